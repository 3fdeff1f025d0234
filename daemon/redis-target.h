/*
 * redis-target.h: which Redis server is the master now, the one place
 * every connection of the store (store-conn.c, store-load.c) asks before
 * it connects.
 *
 * With a plain address (HOST:PORT, unix:PATH) the answer never changes.
 * With sentinel://NODES/NAME the answer is asked of the sentinels, in
 * turn (SENTINEL get-master-addr-by-name, each bounded by redis-timeout),
 * cached, and forgotten when a connection to it is lost or finds a
 * replica (ROLE, READONLY): the next connect asks again. A subscription to
 * +switch-master on one sentinel moves the cache at once and tells every
 * user, so that connections to the old master go without waiting for a
 * timeout. Debian's hiredis 0.14 knows nothing of Sentinel: these are
 * plain commands on plain connections.
 */
#ifndef SEMD_REDIS_TARGET_H
#define SEMD_REDIS_TARGET_H

#include <sys/queue.h>

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "config.h"

/* One connection that uses the target (store_conn), registered once. */
struct redis_target_user {
	TAILQ_ENTRY(redis_target_user) entry;
	/* A query this user waited for ended: why is NULL when the master
	 * is known now, else why not. */
	void	(*resolved)(void *arg, const char *why);
	/* +switch-master moved the master: redis_target_current says where. */
	void	(*moved)(void *arg);
	void	*arg;
	int	 waiting;	/* for the query in flight */
	int	 notify;	/* being told (redis_target_finish) */
};

struct redis_target;

/*
 * For cfg's redis address (kept, not copied). With a base, a sentinel
 * address subscribes to +switch-master at once; without (the start-up
 * check), only the blocking calls work.
 */
struct redis_target *redis_target_new(const struct config *cfg,
	    struct event_base *base);
void	redis_target_free(struct redis_target *t);

/* 1 for a sentinel:// address. */
int	redis_target_is_sentinel(const struct redis_target *t);
/*
 * The master, when known: 1 with *host and *port (TCP) or *path (unix)
 * pointing into t until the next change; 0 when the sentinels must be
 * asked first (redis_target_ask or _resolve_blocking).
 */
int	redis_target_current(const struct redis_target *t, const char **host,
	    int *port, const char **path);
/* Counts the master's moves to another address (0 until the first). */
uint64_t redis_target_generation(const struct redis_target *t);
/* The master as "host:port" (or the path), "?" while unknown. */
const char *redis_target_name(const struct redis_target *t);

void	redis_target_register(struct redis_target *t,
	    struct redis_target_user *u);
void	redis_target_unregister(struct redis_target *t,
	    struct redis_target_user *u);
/*
 * Ask the sentinels (unless a query is in flight already); u->resolved
 * follows, never from inside this call. A query goes on when its users
 * cancel: its answer is cached for the next connect.
 */
void	redis_target_ask(struct redis_target *t, struct redis_target_user *u);
void	redis_target_cancel(struct redis_target *t,
	    struct redis_target_user *u);
/*
 * host:port was lost or is no master (any more): forget it, so that the
 * next connect asks the sentinels. Nothing for a plain address.
 */
void	redis_target_lost(struct redis_target *t, const char *host, int port);

/*
 * Ask the sentinels now, blocking, each within redis-timeout: 0 when the
 * master is known (then redis_target_current says it), else -1, why in
 * err, and *unknown 1 when every sentinel that answered said it knows no
 * master of that name.
 */
int	redis_target_resolve_blocking(struct redis_target *t, int *unknown,
	    char *err, size_t errlen);
/*
 * The ROLE answer r (a redisReply): 1 for a master, 0 for a replica (then
 * what it says in why), 1 too when r is an error (a server without ROLE:
 * READONLY still catches a replica).
 */
int	redis_target_role_master(const void *r, char *why, size_t len);

/*
 * semd's start: -1 and one line in err when the address cannot be right:
 * sentinels that all say they know no master MASTER-NAME, or a server
 * (given or found) that answers ROLE as a replica. Unreachable servers
 * are no reason: semd starts and keeps asking.
 */
int	redis_target_check_start(const struct config *cfg, char *err,
	    size_t errlen);

#endif /* SEMD_REDIS_TARGET_H */
