/*
 * store.h: where semd's state is kept across restarts (Redis, by hiredis).
 *
 * The store knows the data model (README "Persistence") and the wire, and
 * nothing of semd's rules: persist.c decides what to write and when, and
 * hands the store batches of changes, each written as one MULTI/EXEC.
 *
 * Start-up reads everything with a blocking connection (store_load); after
 * that one asynchronous connection on semd's own event loop carries the
 * batches. Debian's hiredis 0.14 has no timeouts for it, so the store arms
 * its own: a connect timeout, one on every batch and handshake in flight,
 * and a heartbeat that notices a Redis that stopped answering while idle.
 * Whenever the connection fails, the store drops it and reconnects with
 * capped, jittered exponential backoff, by itself.
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
	STORE_TOKENS		/* every token issued is <= tokens */
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
	uint64_t		 deadline_unix_ms; /* leases: wall-clock end */
	const char		*holder_name;	/* STORE_GRANT_PUT; NULL: - */
	const char		*holder_addr;	/* STORE_GRANT_PUT; NULL: - */
};

/* What the asynchronous connection reports; ctx is store_new's. */
struct store_events {
	/*
	 * Connected, authenticated, database selected: Redis's token bound
	 * (0 when absent) and the semaphore names it holds.
	 */
	void	(*ready)(void *ctx, uint64_t tokens, char **names,
		    size_t nnames);
	/* The batch in flight was acknowledged (ok) or not (!ok). */
	void	(*batch_done)(void *ctx, int ok);
	/* The connection failed; reconnection is under way. */
	void	(*lost)(void *ctx, const char *why);
	/* A heartbeat answered with Redis's token bound. */
	void	(*heartbeat)(void *ctx, uint64_t tokens);
};

/*
 * What store_load finds, one call per object. A grant's holder name and
 * address are NULL when unknown (stored as "-", or by an older semd).
 */
struct store_loader {
	void	(*sem)(void *ctx, const char *name, uint32_t capacity);
	void	(*grant)(void *ctx, const char *sem, uint64_t token,
		    uint32_t n, enum store_grant_kind kind,
		    uint64_t deadline_unix_ms, const char *holder_name,
		    const char *holder_addr);
};

struct store	*store_new(const struct config *cfg, struct event_base *base,
		    const struct store_events *events, void *ctx);
/* Drop the connection and free everything; reports nothing more. */
void		 store_free(struct store *st);

/*
 * Blocking, at start-up: read every semaphore and grant, then raise
 * Redis's token bound to *tokens + reserve, where *tokens comes back as
 * the highest token Redis knows of (its bound, or a higher grant). Returns
 * 0, or -1 with a message in err.
 */
int		 store_load(struct store *st, const struct store_loader *ld,
		    void *ctx, uint64_t reserve, uint64_t *tokens, char *err,
		    size_t errlen);
/*
 * Blocking, at shutdown: write changes in one MULTI/EXEC on a connection
 * of its own, bounded by redis-timeout. Returns 0 or -1.
 */
int		 store_write_blocking(struct store *st,
		    const struct store_change *ch, size_t n);

/* Open the asynchronous connection; ready() follows, or lost(). */
void		 store_connect(struct store *st);
/* 1 when ready() was reported and no batch is in flight. */
int		 store_can_submit(struct store *st);
/* Send one batch as a MULTI/EXEC; batch_done() follows. */
void		 store_submit(struct store *st, const struct store_change *ch,
		    size_t n);
/*
 * Drop the connection now (lost() follows) and reconnect: used when the
 * caller sees that Redis lost data and must be rewritten.
 */
void		 store_reconnect(struct store *st, const char *why);

/* "ok", "appendonly-off", "appendfsync-everysec", "unknown", ... */
const char	*store_durability(struct store *st);
/* "HOST:PORT" or "unix:PATH", for the log. */
const char	*store_address(struct store *st);

#endif /* SEMD_STORE_H */
