/*
 * store-conn.h: one asynchronous hiredis connection on semd's event loop,
 * the kind both the batch pipeline (store-redis.c) and the claims
 * (store-claim.c) use.
 *
 * It connects to the master that redis-target.c names (asking the
 * sentinels first when it knows none), queues AUTH, SELECT and ROLE
 * before anything else, and reports a failure once,
 * through failed(): a connect or I/O error, an error answer to AUTH or
 * SELECT, or a deadline that ran out (hiredis 0.14 has no timeouts, and a
 * SIGSTOPped Redis keeps its TCP connection open), a server that is no
 * master (ROLE, or READONLY to any command: it is forgotten as the
 * master, so the next open asks again), or +switch-master naming another
 * master. A dropped connection
 * is forgotten at once: the replies hiredis still hands back for it (NULL
 * ones, as it frees it) never reach the owner, so the owner may drop the
 * connection, or free itself, from inside any of its callbacks.
 */
#ifndef SEMD_STORE_CONN_H
#define SEMD_STORE_CONN_H

#include <stdint.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>

#include "config.h"
#include "redis-target.h"

/* What a connection reports; arg is the init's. */
struct store_conn_events {
	/* Connected: the owner may queue what follows AUTH and SELECT. */
	void	(*connected)(void *arg);
	/* The answer r (never NULL, maybe an error) to a command of tag. */
	void	(*reply)(void *arg, const redisReply *r, int tag);
	/* The connection failed and is dropped already; why says how. */
	void	(*failed)(void *arg, const char *why);
	/*
	 * Optional: Sentinel named another master (+switch-master), after a
	 * connection to the old one was failed: a retry may go now.
	 */
	void	(*moved)(void *arg);
};

struct store_conn {
	const struct config	*cfg;
	struct event_base	*base;
	const char		*what;		/* "" or "claim: ", for why */
	struct store_conn_events ev;
	void			*arg;
	struct redis_target	*target;	/* where the master is */
	struct redis_target_user user;
	int			 asking;	/* the sentinels, to open */
	redisAsyncContext	*ac;		/* NULL while closed */
	char			 host[256];	/* ac's server; "" for unix */
	int			 port;
	unsigned		 drops;		/* counts every drop */
	struct event		*deadline_ev;
};

/* Tags below this are the connection's own (AUTH, SELECT). */
#define STORE_CONN_TAG_MIN	16

/* Set up, closed. Exits on a failure to make the deadline timer. */
void	store_conn_init(struct store_conn *sc, const struct config *cfg,
	    struct redis_target *target, struct event_base *base,
	    const char *what,
	    const struct store_conn_events *ev, void *arg);
/* Close (without a report) and free the timer. */
void	store_conn_cleanup(struct store_conn *sc);

/*
 * Connect on base to the master (after asking the sentinels, when the
 * target knows none), queueing AUTH, SELECT and ROLE; connected() or
 * failed() follows. Returns 0, or -1 after failed() was reported from
 * inside this call. Arms no deadline: the caller does, and it covers the
 * asking too.
 */
int	store_conn_open(struct store_conn *sc);
/* 1 while open (connecting, or asking the sentinels, included). */
int	store_conn_is_open(const struct store_conn *sc);
/*
 * 1 when commands may be queued now: open and not waiting for the
 * sentinels (then connected() follows, and they are queued there).
 */
int	store_conn_can_queue(const struct store_conn *sc);
/*
 * Drop the connection without a report. A caller that reports something
 * which might drop it compares drops before and after.
 */
void	store_conn_close(struct store_conn *sc);
/* Drop the connection (if open) and report failed(why). */
void	store_conn_fail(struct store_conn *sc, const char *why);

/* Queue a command; its answer comes to reply() with tag. */
void	store_conn_command(struct store_conn *sc, int tag, const char *fmt,
	    ...) __attribute__((format(printf, 3, 4)));
void	store_conn_command_argv(struct store_conn *sc, int tag, int argc,
	    const char **argv, const size_t *lens);
/*
 * Write what is queued now, when connected (rather than on the adapter's
 * next turn): see store-redis.c's write_ev.
 */
void	store_conn_write_now(struct store_conn *sc);

/*
 * The deadline: failed("no answer within redis-timeout ms") unless
 * disarmed (or re-armed) within ms.
 */
void	store_conn_arm(struct store_conn *sc, uint64_t ms);
void	store_conn_disarm(struct store_conn *sc);

/* --- reading replies (every connection of the store) --- */

/* A reply holding a decimal (or nil, 0) into *v; -1 otherwise. */
int	store_reply_u64(const redisReply *r, uint64_t *v);
/*
 * A write script's answer: 1 when it is the array of keys it repaired,
 * else 0 and why in why.
 */
int	store_write_ok(const redisReply *r, char *why, size_t len);
/* 1 when an error reply is the fence refusing us; *owner then points in. */
int	store_reply_fenced(const redisReply *r, const char **owner);

#endif /* SEMD_STORE_CONN_H */
