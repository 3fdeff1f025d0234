/*
 * store.h: where semd's state is kept across restarts (Redis, by hiredis).
 *
 * The store knows the data model (README "Persistence") and the wire, and
 * nothing of semd's rules: persist.c decides what to write and when, and
 * hands the store batches of changes, each written as one fenced script
 * call (EVALSHA), which Redis runs whole or not at all.
 *
 * Start-up reads everything with a blocking connection (store_load); after
 * that one asynchronous connection on semd's own event loop carries the
 * batches. Debian's hiredis 0.14 has no timeouts for it, so the store arms
 * its own: a connect timeout, one on every batch and handshake in flight,
 * and a heartbeat that notices a Redis that stopped answering while idle.
 * Whenever the connection fails, the store drops it and reconnects with
 * capped, jittered exponential backoff, by itself; the backoff grows until
 * a batch succeeds again, so a Redis that accepts connections but refuses
 * writes is not hammered.
 *
 * Ownership (README "Ownership and standby"): one daemon at a time owns a
 * data set (address, database, prefix). A claim takes a lease on the owner
 * key with a new epoch; every write is a script that first checks the key
 * still names this daemon's epoch, and renews it, so the write of a daemon
 * that lost its ownership changes nothing.
 *
 * With redis-min-replicas N, a write (and so a batch, a renewal, a claim)
 * counts only once WAIT says N replicas have it; one they did not is
 * reported as an outcome unknown, as if its answer had been lost.
 */
#ifndef SEMD_STORE_H
#define SEMD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "config.h"

struct store;

/* One change: the state an object has now, or its removal. */
enum store_change_type {
	STORE_SEM_PUT,		/* sem has capacity */
	STORE_SEM_DEL,		/* sem and all its grants are gone */
	STORE_GRANT_PUT,	/* sem holds grant token */
	STORE_GRANT_DEL,	/* grant token of sem is gone */
	STORE_TOKENS,		/* every token issued is <= tokens */
	STORE_DISOWN		/* give the data set up (clean shutdown) */
};

enum store_grant_kind {
	STORE_KIND_CONN,	/* bound to a connection: unowned after restart */
	STORE_KIND_LEASE
};

struct store_change {
	enum store_change_type	 type;
	const char		*sem;		/* not for STORE_TOKENS */
	size_t			 sem_len;
	uint32_t		 capacity;	/* STORE_SEM_PUT */
	uint64_t		 token;		/* GRANT_*; STORE_TOKENS: the bound */
	uint32_t		 n;		/* STORE_GRANT_PUT */
	enum store_grant_kind	 kind;		/* STORE_GRANT_PUT */
	uint64_t		 lease_ms;	/* leases: the time left; the
						 * store writes the end on
						 * Redis's clock */
	const char		*holder_name;	/* STORE_GRANT_PUT; NULL: - */
	const char		*holder_addr;	/* STORE_GRANT_PUT; NULL: - */
	uint32_t		 multi;		/* STORE_GRANT_PUT: the grant's
						 * count of semaphores; 0, 1:
						 * a single one */
	const char		*id;		/* STORE_GRANT_PUT: its request
						 * ID; NULL: none */
};

#define STORE_ADDR_MAX	256	/* an advertised HOST:PORT */

/* What a claim found: the data set is ours now, or whose it is. */
struct store_owner {
	int		 ours;		/* 1: this daemon owns it now */
	int		 superseded;	/* resume only, and the epoch moved on */
	uint64_t	 epoch;		/* ours, else the owner's or the last */
	char		 addr[STORE_ADDR_MAX];	/* the owner's, or "-" */
	uint64_t	 sent_ms;	/* ours: the lease runs from then */
	int		 wait;		/* our own key, unacknowledged: it
					 * must expire first */
	int		 epoch_lost;	/* the epoch counter is absent or
					 * below the least epoch asked */
	uint64_t	 tokens;	/* Redis's token bound, as seen */
};

/* What became of a batch. */
enum store_outcome {
	STORE_ACKED,		/* Redis applied it */
	STORE_REFUSED,		/* Redis answered an error: not applied */
	STORE_UNKNOWN		/* no answer (timeout, connection lost): it
				 * may or may not have been applied */
};

/* What the asynchronous connection reports; ctx is the create's. */
struct store_events {
	/*
	 * Connected, authenticated, database selected: Redis's token bound
	 * (0 when absent) and the semaphore names it holds.
	 */
	void	(*ready)(void *ctx, uint64_t tokens, char **names,
		    size_t nnames);
	/* What became of the oldest batch in flight. */
	void	(*batch_done)(void *ctx, enum store_outcome outcome);
	/* The connection failed; reconnection is under way. */
	void	(*lost)(void *ctx, const char *why);
	/* A heartbeat answered with Redis's token bound. */
	void	(*heartbeat)(void *ctx, uint64_t tokens);
	/*
	 * A fenced request (a batch or a heartbeat) sent at sent_ms on the
	 * monotonic clock was acknowledged: the ownership lease runs at least
	 * owner-lease from then.
	 */
	void	(*renewed)(void *ctx, uint64_t sent_ms);
	/*
	 * A fenced request found the data set owned by someone else (owner:
	 * the owner key's value, or "-"): it changed nothing. The connection
	 * is dropped and not retried; batch_done() came first if a batch
	 * was in flight.
	 */
	void	(*fenced)(void *ctx, const char *owner);
	/*
	 * A batch found keys of semd's under the prefix with the wrong type
	 * and replaced them (nkeys > 0): Redis must be rewritten whole.
	 */
	void	(*repaired)(void *ctx, char **keys, size_t nkeys);
	/*
	 * A claim's outcome: *own, or NULL and why it could not be made
	 * (Redis unreachable, refusing, or a key of the wrong type).
	 */
	void	(*claimed)(void *ctx, const struct store_owner *own,
		    const char *err);
};

/*
 * What store_load finds, one call per object. A semaphore whose own key
 * was damaged (wrong type, no valid capacity) comes with damaged set and
 * capacity 0: its grants follow all the same, and the caller decides its
 * capacity. A grant's holder name and address are NULL when unknown
 * (stored as "-", or by an older semd); lease_left_ms is what is left of
 * a lease on Redis's clock (0 when it has ended), 0 for a bound grant.
 */
/* A semaphore's grants come in token order, oldest first. */
struct store_loader {
	void	(*sem)(void *ctx, const char *name, uint32_t capacity,
		    int damaged);
	/*
	 * One part of a grant: of an ACQUIREALL grant of multi semaphores
	 * (1: a single one), each part comes under the same token, with its
	 * own sem and n. id: its request ID, or NULL.
	 */
	void	(*grant)(void *ctx, const char *sem, uint64_t token,
		    uint32_t n, enum store_grant_kind kind,
		    uint64_t lease_left_ms, const char *holder_name,
		    const char *holder_addr, uint32_t multi, const char *id);
};

/*
 * The store, as persist.c sees it: a table of functions, so that the unit
 * tests can drive the persistence policy with a fake (tests/test_persist.c)
 * and the daemon with Redis (store-redis.c and the store-*.c it uses).
 */
struct store_ops {
	struct store	*(*create)(const struct config *cfg,
			    struct event_base *base,
			    const struct store_events *events, void *ctx);
	/* Drop the connection and free everything; reports nothing more. */
	void		 (*destroy)(struct store *st);

	/*
	 * Take the ownership lease of the data set for owner-lease,
	 * advertising addr, on a connection of its own (the event loop goes
	 * on; claimed() follows, perhaps from inside this call). resume_epoch
	 * (0: none) is the epoch this daemon held: it is kept when nobody
	 * owned the data set since; with resume_only, nothing else is taken
	 * (superseded says so). A key that is present is never taken or
	 * renewed, not even this process's own (wait says so). Nothing is
	 * taken while the epoch counter is below least_epoch (epoch_lost).
	 */
	void		 (*claim)(struct store *st, const char *addr,
			    uint64_t resume_epoch, int resume_only,
			    uint64_t least_epoch);
	/* The advertised address changed (the port is known once bound). */
	void		 (*advertise)(struct store *st, const char *addr);
	/*
	 * Blocking, after a claim: read every semaphore and grant, then
	 * raise Redis's token bound (fenced) to *tokens + reserve, where
	 * *tokens comes in as the least bound the caller knows of and comes
	 * back as the highest token known (that, Redis's bound, or a higher
	 * grant). Damaged keys never drop grants: a set of names that is
	 * damaged is rebuilt from the semaphores' keys (SCAN), a semaphore
	 * whose own key is damaged is reported damaged; a grants key or a
	 * grant that cannot be read, or a token bound that is not a number,
	 * fails the load. Returns 0 (*repair set when anything was damaged,
	 * so that the caller rewrites Redis), or -1 with a message in err.
	 */
	int		 (*load)(struct store *st, const struct store_loader *ld,
			    void *ctx, uint64_t reserve, uint64_t *tokens,
			    int *repair, char *err, size_t errlen);
	/*
	 * Blocking, at shutdown: write changes (fenced) on a connection of
	 * its own, bounded by redis-timeout. Returns 0 or -1.
	 */
	int		 (*write_blocking)(struct store *st,
			    const struct store_change *ch, size_t n);

	/* Open the asynchronous connection; ready() follows, or lost(). */
	void		 (*connect)(struct store *st);
	/* Drop the asynchronous connection for good (no events, no retry). */
	void		 (*disconnect)(struct store *st);
	/* 1 when ready() was reported and another batch may be sent. */
	int		 (*can_submit)(struct store *st);
	/* Send one batch, fenced; batch_done() follows, in order. */
	void		 (*submit)(struct store *st, const struct store_change *ch,
			    size_t n);
	/*
	 * Drop the connection now (lost() follows) and reconnect: used when
	 * the caller sees that Redis lost data and must be rewritten.
	 */
	void		 (*reconnect)(struct store *st, const char *why);

	/* "ok", "appendonly-off", "appendfsync-everysec", "unknown", ... */
	const char	*(*durability)(struct store *st);
	/* "redis HOST:PORT db N prefix P": the data set, for the log. */
	const char	*(*dataset)(struct store *st);
	/* "HOST:PORT" or "unix:PATH", for the log. */
	const char	*(*address)(struct store *st);
	/*
	 * The server writes go to now, "HOST:PORT" or "unix:PATH"; "-" while
	 * none is known (the sentinels are being asked). For STATS: with
	 * Sentinel it is the one place an operator sees the failover.
	 */
	const char	*(*master)(struct store *st);
	/*
	 * WAITs (each behind one or more fenced writes) that found fewer than
	 * redis-min-replicas replicas within redis-replica-timeout, so that
	 * those writes did not count, since start.
	 */
	uint64_t	 (*unacked_writes)(struct store *st);
};

extern const struct store_ops store_redis_ops;

#endif /* SEMD_STORE_H */
