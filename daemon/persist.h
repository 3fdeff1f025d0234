/*
 * persist.h: persistence policy: what is written, when, and what a reply
 * waits for (README "Persistence").
 *
 * persist observes every engine change and remembers which semaphores and
 * grants changed (the backlog). Once per event-loop turn it writes their
 * current state to the store in one batch (group commit); while a batch is
 * in flight the next one gathers. In sync mode the reply to a grant or a
 * REFRESH waits for the batch that carries it; a grant whose batch fails
 * is undone and answered ERR UNAVAILABLE, and while the store is down the
 * engine holds every grant.
 *
 * persist knows neither sockets nor Redis: replies go out through the
 * answer callback, keyed by connection id, and writes through store.h.
 */
#ifndef SEMD_PERSIST_H
#define SEMD_PERSIST_H

#include <stdint.h>

#include <event2/event.h>

#include "config.h"
#include "engine.h"

struct persist;

/* What a held-back reply was for. */
enum persist_await_kind {
	AWAIT_GRANT,	/* "OK <token>" */
	AWAIT_REFRESH	/* "OK <ms>" */
};

/*
 * Answer connection conn_id, if it is still there: ok, or ERR UNAVAILABLE
 * (a grant was then undone already).
 */
typedef void (*persist_answer_fn)(void *ctx, uint64_t conn_id,
    enum persist_await_kind kind, uint64_t token, uint32_t ms, int ok);

/* Who serves the data set (PROTOCOL.md "Ownership"). */
enum persist_role {
	ROLE_SINGLE,	/* persistence none: nothing to own */
	ROLE_OWNER,	/* this daemon owns the data set and serves it */
	ROLE_STANDBY	/* another daemon owns it (or nobody yet): wait */
};

struct persist_stats {
	const char	*role;		/* "owner", "standby" or "single" */
	uint64_t	 epoch;		/* the owner's epoch; 0: none known */
	const char	*owner;		/* the owner's advertised address, "-" */
	const char	*state;		/* "ok", "down", "loading" or "off" */
	const char	*mode;		/* "none", "sync" or "async" */
	uint64_t	 backlog;	/* changes not yet written */
	int		 resync;	/* Redis will be rewritten whole */
	uint64_t	 batches;	/* batches acknowledged */
	uint64_t	 failures;	/* batches or connections that failed */
	const char	*last_error;	/* "" when none */
	const char	*durability;	/* store_durability(), or "-" */
};

struct persist	*persist_new(struct config *cfg, struct event_base *base,
		    struct engine *e, persist_answer_fn answer, void *ctx);
/*
 * Write what is still pending (blocking, bounded by redis-timeout) and
 * free everything. Call before the connections are torn down: from here on
 * engine changes are not written, so bound grants survive a clean shutdown
 * and their clients can ATTACH them after the restart.
 */
void		 persist_free(struct persist *p);

/*
 * Start: load the store into the engine (retrying every second while it
 * cannot be reached), call loaded(arg) (config semaphores go in then), open
 * the asynchronous connection, and call ready(arg) once it is up: only
 * then should the server listen. With persistence none, both run at once.
 */
void		 persist_start(struct persist *p, void (*loaded)(void *),
		    void (*ready)(void *), void *arg);

/* The engine observer's share (server.c chains it before the replies). */
void		 persist_observe(struct persist *p,
		    const struct engine_event *ev);

/* 1 in sync mode: grants and REFRESH are answered through persist. */
int		 persist_defers_replies(struct persist *p);
/* 1 in sync mode while the store is down: REFRESH must be refused. */
int		 persist_unavailable(struct persist *p);
/* Hold back a reply until the change it reports is written. */
void		 persist_await(struct persist *p, uint64_t conn_id,
		    enum persist_await_kind kind, uint64_t token, uint32_t ms);

void		 persist_get_stats(struct persist *p, struct persist_stats *st);
enum persist_role persist_role(struct persist *p);

#endif /* SEMD_PERSIST_H */
