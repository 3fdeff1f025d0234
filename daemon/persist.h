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
 * With persistence on, persist keeps this daemon's ownership of the data
 * set (README "Ownership and standby") in owner.c, whose hooks it serves:
 * load the data set when it is ours, drop everything pending when it is
 * lost. Time comes from the injected clock (clock.h).
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
#include "histo.h"

struct persist;

/* What a held-back reply was for. */
enum persist_await_kind {
	AWAIT_GRANT,	/* "OK <token>" */
	AWAIT_REFRESH,	/* "OK <ms>" */
	AWAIT_REPEAT	/* "OK <token>" of a lease granted before, to an
			   ACQUIRE repeated with its ID: never undone here */
};

/* What became of the write a held-back reply waited for. */
enum persist_outcome {
	PERSIST_OK,		/* written */
	PERSIST_FAILED,		/* not written: Redis refused it */
	PERSIST_UNKNOWN		/* Redis did not answer: it may have been */
};

/*
 * Answer connection conn_id, if it is still there: OK, or ERR UNAVAILABLE
 * (a grant was then undone already, and its removal is written next).
 */
typedef void (*persist_answer_fn)(void *ctx, uint64_t conn_id,
    enum persist_await_kind kind, uint64_t token, uint32_t ms,
    enum persist_outcome outcome);

/* Who serves the data set (doc/protocol.md; README "Ownership and standby"). */
enum persist_role {
	ROLE_SINGLE,	/* persistence none: nothing to own */
	ROLE_OWNER,	/* this daemon owns the data set and serves it */
	ROLE_STANDBY,	/* another daemon owns it (or nobody yet): wait */
	ROLE__COUNT
};

/* The persistence state STATS and /metrics show. */
enum persist_state {
	PST_OFF,	/* persistence none */
	PST_LOADING,	/* start-up: reading the store (or not yet ours) */
	PST_DOWN,	/* the store cannot be written now */
	PST_UP,		/* "ok" */
	PST_STANDBY,	/* shown while this daemon is a standby */
	PST__COUNT
};

/* "single", "owner", "standby"; "off", "loading", "down", "ok", ... */
const char	*persist_role_name(enum persist_role role);
const char	*persist_state_name(enum persist_state state);

struct persist_stats {
	const char	*role;		/* "owner", "standby" or "single" */
	const char	*ownership;	/* owner.h's state: "claiming", ... */
	enum persist_role  role_id;	/* role, state and ownership as */
	enum persist_state state_id;	/* the enums they name */
	int		 ownership_id;	/* enum own_state (owner.h) */
	uint64_t	 epoch;		/* the owner's epoch; 0: none known */
	const char	*owner;		/* the owner's advertised address, "-" */
	const char	*state;		/* "ok", "down", "loading" or "off" */
	const char	*mode;		/* "none", "sync" or "async" */
	uint64_t	 backlog;	/* changes not yet written */
	int		 resync;	/* Redis will be rewritten whole */
	uint64_t	 batches;	/* batches acknowledged */
	uint64_t	 failures;	/* batches or connections that failed */
	const struct histo *batch_ms;	/* acknowledged batches' latency */
	const char	*last_error;	/* "" when none */
	const char	*durability;	/* store_durability(), or "-" */
	const char	*master;	/* the store's master(), or "-" */
	uint64_t	 unacked_writes; /* too few replicas acknowledged */
	int		 waiting_redis;	/* not a standby, yet still claiming
					   at start-up: Redis does not answer
					   (reported apart from "standby") */
};

/* What the server does when the role changes; arg is persist_start's. */
struct persist_hooks {
	/* The state is loaded (the config file's semaphores go in now). */
	void	(*loaded)(void *arg);
	/* Serving as owner (or single): listen, if not yet. */
	void	(*ready)(void *arg);
	/* Another daemon owns the data set: listen as a standby. */
	void	(*standby)(void *arg);
	/*
	 * Ownership is lost: close every client connection now, then clear
	 * the engine (engine_clear); grants are held already.
	 */
	void	(*lost)(void *arg);
};

struct store_ops;

/* Persistence on ops's store (store_redis_ops; a fake in the tests). */
struct persist	*persist_new(struct config *cfg, struct event_base *base,
		    const struct clock *clock, struct engine *e,
		    const struct store_ops *ops, persist_answer_fn answer,
		    void *ctx);
/*
 * Write what is still pending (blocking, bounded by redis-timeout) and
 * free everything. Call before the connections are torn down: from here on
 * engine changes are not written, so bound grants survive a clean shutdown
 * and their clients can ATTACH them after the restart.
 */
void		 persist_free(struct persist *p);

/*
 * Start: claim the data set (retrying every second while the store cannot
 * be reached), then either load it into the engine, call hooks->loaded,
 * open the asynchronous connection and call hooks->ready once it is up
 * (only then should the server listen); or, when another daemon owns it,
 * call hooks->standby (or exit with standby no) and claim again every
 * poll until it is ours. With persistence none, loaded and ready run at
 * once.
 */
void		 persist_start(struct persist *p,
		    const struct persist_hooks *hooks, void *arg);
/* The address clients should use, once the port is known (advertise). */
void		 persist_set_advertise(struct persist *p, const char *addr);

/* The engine observer's share (server.c chains it before the replies). */
void		 persist_observe(struct persist *p,
		    const struct engine_event *ev);

/*
 * 1 while this daemon may answer as what it is. An owner past its
 * ownership deadline gives the data set up first (closing every client
 * connection through hooks->lost) and returns 0: call it before writing
 * any reply, since a stopped process or a busy loop runs the deadline's
 * timer late.
 */
int		 persist_owner_check(struct persist *p);

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
