/*
 * engine.h: the semaphore rules, as a pure state machine.
 *
 * The engine knows nothing of sockets, replies or Redis. Time comes from an
 * injected clock, timers from an injected timer provider (libevent in the
 * daemon, a hand-driven fake in the unit tests), and every change leaves
 * through one observer callback (engine_event_fn) that the server uses to
 * answer waiters and persistence uses to write changes.
 *
 * Structures are declared here so that readers (INFO, HOLDERS, WAITERS,
 * LIST, STATS) can walk them; only engine.c changes them.
 */
#ifndef SEMD_ENGINE_H
#define SEMD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "clock.h"
#include "histo.h"
#include "proto.h"

struct engine;
struct owner;
struct waiter;

enum grant_kind {
	GRANT_CONN,	/* bound to its connection (owner) */
	GRANT_LEASE,	/* outlives its connection until the lease ends */
	GRANT_UNOWNED	/* was bound; its connection was lost in a restart */
};

/*
 * A grant holds n units of one semaphore, or of each of 2 to 16
 * semaphores at once (ACQUIREALL). A grant is a chain of parts, one
 * struct grant per semaphore, from its lead (lead == the part itself for
 * a single-semaphore grant) along part_next. Every part is on its
 * semaphore's list with its own n, so used, holders, HOLDERS and DELETE
 * see it as a holder of that semaphore. token, kind, owner and
 * deadline_ms are the same on every part (changed together); the lead
 * alone is in the token hash and on its owner's list, and alone has the
 * timer, the holder labels, the count of parts and the request ID.
 */
struct grant {
	uint64_t	 token;		/* daemon-wide unique, increasing */
	uint32_t	 n;		/* units of sem this part holds */
	enum grant_kind	 kind;
	struct sem	*sem;
	struct owner	*owner;		/* GRANT_CONN only, else NULL */
	uint64_t	 granted_ms;
	uint64_t	 deadline_ms;	/* GRANT_LEASE and GRANT_UNOWNED */
	void		*timer;		/* lead: lease expiry / reclaim */
	/*
	 * Opaque labels the server gives a lease (engine_grant_set_holder):
	 * the name and address of the connection that acquired it. NULL:
	 * unknown. The engine only keeps and frees them. Lead only.
	 */
	char		*holder_name;
	char		*holder_addr;

	struct grant	*lead;		/* the first part (itself if single) */
	struct grant	*part_next;	/* the next part, NULL after the last */
	uint32_t	 nparts;	/* lead: how many parts (1..16) */
	/*
	 * The request ID it was granted under (a lease only), NUL-terminated,
	 * or NULL. The lead owns the copy; every part points to it and is
	 * in its semaphore's grant_ids under it.
	 */
	char		*id;
	size_t		 id_len;

	struct grant	*sem_prev, *sem_next;	/* sem->grants, grant order */
	struct grant	*own_prev, *own_next;	/* owner->grants (lead) */
	UT_hash_handle	 hh;			/* engine->grants (lead) */
	UT_hash_handle	 idh;			/* sem->grant_ids by id */
};

/*
 * A queued ACQUIRE, or ACQUIREALL: one part per semaphore it waits on,
 * from the lead along part_next, each on its semaphore's queue with its
 * own n. The lead alone is on its owner's list and has the timer, the
 * cookie, the lease and the request ID (shared with the parts, as for a
 * grant).
 */
struct waiter {
	uint32_t	 n;
	int64_t		 lease_ms;	/* -1: bound grant */
	uint64_t	 enqueued_ms;
	struct sem	*sem;
	struct owner	*owner;
	void		*cookie;	/* the server's, handed back in events */
	void		*timer;		/* NULL: waits for ever */

	struct waiter	*lead;
	struct waiter	*part_next;
	uint32_t	 nparts;	/* lead: how many parts (1..16) */
	char		*id;		/* as a grant's */
	size_t		 id_len;

	struct waiter	*q_prev, *q_next;	/* sem->queue, FIFO */
	struct waiter	*own_prev, *own_next;	/* owner->waiters (lead) */
	UT_hash_handle	 idh;			/* sem->waiter_ids by id */
};

enum engine_release_reason {
	RELEASE_BY_HOLDER,	/* RELEASE */
	RELEASE_REVOKED,	/* REVOKE */
	RELEASE_EXPIRED,	/* the lease ran out */
	RELEASE_CLOSED,		/* the owning connection closed */
	RELEASE_UNCLAIMED,	/* nobody ATTACHed within the reclaim grace */
	RELEASE_UNDONE		/* its grant could not be persisted */
};
#define RELEASE_NREASONS	(RELEASE_UNDONE + 1)

/*
 * What a semaphore has done since it was created (or loaded): for the
 * metrics endpoint and INFO. Counters only grow; times are ms.
 */
struct sem_stats {
	uint64_t	 grants_total;	/* grants made (undone ones too) */
	uint64_t	 releases_total[RELEASE_NREASONS];
	uint64_t	 timeouts_total; /* acquires answered TIMEOUT */
	uint64_t	 last_release_ms; /* when units last came back */
	struct histo	 wait;		/* request to grant, granted only */
	struct histo	 handoff;	/* freeing release to a waiter's grant */
	struct histo	 hold;		/* grant to release (not undone) */
};

/* A named counting semaphore. */
struct sem {
	char		 name[PROTO_NAME_MAX + 1];
	size_t		 name_len;
	uint32_t	 capacity;
	uint64_t	 used;		/* sum of n over grants */
	uint32_t	 nholders;
	uint32_t	 nwaiters;
	struct grant	*grants;	/* utlist, in grant order */
	struct waiter	*queue;		/* utlist, head is served first */
	struct grant	*grant_ids;	/* uthash (idh): parts with an ID */
	struct waiter	*waiter_ids;	/* uthash (idh): parts with an ID */
	struct sem_stats stats;
	UT_hash_handle	 hh;		/* engine->sems by name */
};

/* A party that can hold bound grants and wait: one per connection. */
struct owner {
	uint64_t	 id;		/* the connection id shown to users */
	struct grant	*grants;
	struct waiter	*waiters;
};

enum engine_event_type {
	ENGINE_EV_SEM_CREATED,
	ENGINE_EV_SEM_RESIZED,
	ENGINE_EV_SEM_DELETED,	/* sem is valid during the callback only */
	ENGINE_EV_GRANTED,	/* cookie != NULL when a queued waiter won */
	ENGINE_EV_RELEASED,	/* grant is valid during the callback only */
	ENGINE_EV_REFRESHED,	/* a lease got a new deadline */
	ENGINE_EV_ATTACHED,	/* an unowned grant is bound again */
	ENGINE_EV_WAIT_TIMEOUT,	/* a queued waiter gave up; cookie is set */
	ENGINE_EV_WAIT_REPLACED	/* a newer request with its ID took its
				   place in the queues; cookie is the old's */
};

struct engine_event {
	enum engine_event_type		 type;
	struct sem			*sem;
	struct grant			*grant;
	void				*cookie;
	enum engine_release_reason	 reason;	/* RELEASED only */
};

/*
 * Events about a grant or a waiter come once, whatever its count of
 * semaphores: sem is then its lead's, grant the lead (walk part_next for
 * the others).
 *
 * The observer. It runs synchronously inside engine calls and timer
 * callbacks, so it must not call back into engine functions that change
 * state; the server defers any such follow-up to a later loop turn.
 */
typedef void (*engine_event_fn)(void *ctx, const struct engine_event *ev);

/* Outcome of engine_acquire() when it returns PERR_NONE. */
enum acquire_status {
	ACQUIRE_GRANTED,	/* *grant is set */
	ACQUIRE_QUEUED,		/* queued; a GRANTED or WAIT_TIMEOUT follows */
	ACQUIRE_TIMEOUT,	/* timeout_ms was 0 and it could not be granted */
	ACQUIRE_REPEATED	/* its ID names a lease held with the same
				   parts: *grant is it; nothing changed */
};

/* One semaphore of a request, and the units it asks of it. */
struct engine_part {
	struct sem	*sem;
	uint32_t	 n;
};

/*
 * An ACQUIRE, TRY or ACQUIREALL: nparts (1..ENGINE_PARTS_MAX) distinct
 * semaphores. timeout_ms -1 waits for ever, lease_ms -1 binds the grant
 * to owner; id (id_len bytes, NULL: none) only with a lease.
 */
struct engine_request {
	struct owner			*owner;
	const struct engine_part	*parts;
	uint32_t			 nparts;
	int64_t				 timeout_ms;
	int64_t				 lease_ms;
	const char			*id;
	size_t				 id_len;
	void				*cookie;
};
#define ENGINE_PARTS_MAX	PROTO_MULTI_MAX

struct engine_stats {
	uint64_t	grants_total;	/* grants ever made */
	uint64_t	releases_total;	/* grants ended, for any reason */
	uint64_t	timeouts_total;	/* acquires answered TIMEOUT */
	uint64_t	expired_total;	/* leases that ran out */
	uint64_t	revoked_total;
	uint32_t	sems;
	uint64_t	grants;		/* held now */
	uint64_t	waiters;	/* queued now */
};

/* A new engine; max_sems bounds CREATE (0: no bound). Aborts on ENOMEM. */
struct engine	*engine_new(const struct clock *clock,
		    engine_event_fn on_event, void *ctx, uint32_t max_sems);
/* Change the bound on CREATE; semaphores over it stay (a reload). */
void		 engine_set_max_sems(struct engine *e, uint32_t max_sems);
/*
 * Free everything, cancel every timer; emits no events. Every owner must
 * have been freed first (engine_owner_free): owners belong to the caller.
 */
void		 engine_free(struct engine *e);

/*
 * Forget every semaphore and grant, cancel their timers; emits no events.
 * Every owner must have been freed first. The token floor stays: tokens
 * never go back. (A daemon that lost its ownership, before it reloads.)
 */
void		 engine_clear(struct engine *e);

/* CREATE: PERR_NONE (also when it exists with that capacity), EXISTS, LIMIT. */
enum proto_err	 engine_create(struct engine *e, const char *name, size_t len,
		    uint32_t capacity, struct sem **out);
/* The semaphore of that name, or NULL. */
struct sem	*engine_find(struct engine *e, const char *name, size_t len);
/* RESIZE: takes effect at once, growing wakes waiters. */
void		 engine_resize(struct engine *e, struct sem *s, uint32_t capacity);
/* DELETE: PERR_NONE or BUSY (holders or waiters). Frees s. */
enum proto_err	 engine_delete(struct engine *e, struct sem *s);

/*
 * Every semaphore, in creation order: for (s = engine_sem_first(e); s !=
 * NULL; s = engine_sem_next(s)). Only the engine walks its tables.
 */
struct sem	*engine_sem_first(struct engine *e);
struct sem	*engine_sem_next(const struct sem *s);

/* An owner for a new connection; engine_owner_free when it closes. */
struct owner	*engine_owner_new(struct engine *e, uint64_t id);
/*
 * The connection closed: release its bound grants (RELEASED/CLOSED events),
 * drop its waiters silently, leave its leases, re-examine the queues.
 */
void		 engine_owner_free(struct engine *e, struct owner *o);

/*
 * ACQUIRE/TRY. timeout_ms -1 waits for ever, lease_ms -1 binds the grant to
 * the owner. Returns RANGE when n > capacity, UNAVAILABLE while grants
 * are held (engine_hold_grants); else PERR_NONE and *status.
 * A queued waiter later produces exactly one GRANTED or WAIT_TIMEOUT event
 * carrying cookie, unless its owner is freed first.
 */
enum proto_err	 engine_acquire(struct engine *e, struct sem *s,
		    struct owner *o, uint32_t n, int64_t timeout_ms,
		    int64_t lease_ms, void *cookie, enum acquire_status *status,
		    struct grant **grant);

/*
 * ACQUIRE, TRY and ACQUIREALL (README "Atomic acquire"; the rules in
 * engine.c). Returns RANGE when some n > its capacity, UNAVAILABLE while
 * grants are held (engine_hold_grants), EXISTS when r->id names a lease
 * held, or a request waiting, with other semaphores or another n; else
 * PERR_NONE and *status. A request whose ID names a waiting request with
 * the same parts takes its place in the queues: the old one gets
 * WAIT_REPLACED, the new one QUEUED (or TIMEOUT, with timeout_ms 0).
 */
enum proto_err	 engine_acquire_req(struct engine *e,
		    const struct engine_request *r,
		    enum acquire_status *status, struct grant **grant);

/*
 * The part on s of the grant of that token, or NULL (not held, or the
 * grant holds nothing of s). Its lead is the grant as a whole.
 */
struct grant	*engine_find_grant(struct engine *e, struct sem *s,
		    uint64_t token);
/*
 * RELEASE by o: NOTHELD, NOTOWNER (bound to another owner) or PERR_NONE.
 * Leases and unowned grants may be released by anyone (o may be NULL).
 */
enum proto_err	 engine_release(struct engine *e, struct sem *s,
		    uint64_t token, struct owner *o);
/* REFRESH: NOTHELD, NOTLEASE or PERR_NONE (lease ends ms from now). */
enum proto_err	 engine_refresh(struct engine *e, struct sem *s,
		    uint64_t token, uint32_t ms);
/*
 * ATTACH an unowned grant to o: NOTHELD, NOTOWNER (bound to another owner),
 * NOTLEASE (a lease: bound to nobody, nothing to take back) or PERR_NONE
 * (also when o already owns it).
 */
enum proto_err	 engine_attach(struct engine *e, struct sem *s,
		    uint64_t token, struct owner *o);
/* REVOKE any grant: NOTHELD or PERR_NONE. */
enum proto_err	 engine_revoke(struct engine *e, struct sem *s,
		    uint64_t token);

/* The grant (its lead) of that token in any semaphore, or NULL. */
struct grant	*engine_grant_by_token(struct engine *e, uint64_t token);
/*
 * Take back a grant that was made but could not be persisted, as if it had
 * never been answered (RELEASED with RELEASE_UNDONE). Not counted as a
 * release, nor in grants_total.
 */
void		 engine_undo_grant(struct engine *e, struct grant *g);
/*
 * Hold every grant while the store that must acknowledge them is down:
 * engine_acquire() answers UNAVAILABLE (and queues nothing), waiters stay
 * queued and no wake grants anything. Lifting the hold serves every queue,
 * as a release would.
 */
void		 engine_hold_grants(struct engine *e, int hold);

/*
 * The largest token the engine takes from outside (a restored grant, a
 * token floor): only a corrupt store has larger ones, and taking them
 * would wrap the token counter to 0 and issue old tokens again.
 */
#define ENGINE_TOKEN_MAX	((uint64_t)INT64_MAX)

/*
 * Persistence, after a restart: put back a grant of s under its old token,
 * as GRANT_LEASE or GRANT_UNOWNED, ending ttl_ms from now (RELEASED with
 * EXPIRED or UNCLAIMED). Raises the token floor; emits no event; used may
 * then exceed the capacity. NULL if that token is already held or above
 * ENGINE_TOKEN_MAX.
 */
struct grant	*engine_restore_grant(struct engine *e, struct sem *s,
		    uint64_t token, uint32_t n, enum grant_kind kind,
		    uint64_t ttl_ms);

/*
 * Persistence, after a restart: add to the grant of lead (restored by
 * engine_restore_grant) its part of n units of s. NULL if the grant has a
 * part on s already, or ENGINE_PARTS_MAX parts. Emits no event.
 */
struct grant	*engine_restore_part(struct engine *e, struct grant *lead,
		    struct sem *s, uint32_t n);
/*
 * Give the grant of lead the request ID id (len bytes, a lease): 0, or -1
 * (and no ID) when another grant holds that ID on one of its semaphores.
 * Emits nothing. For persistence, after a restart and before any request
 * waits: waiting requests' IDs are not looked at.
 */
int		 engine_grant_set_id(struct engine *e, struct grant *lead,
		    const char *id, size_t len);

/*
 * Keep copies of name and addr (either may be NULL: unknown) on g,
 * replacing any it had; they are freed with g. Emits nothing and changes
 * no rule's state, so the observer may call it.
 */
void		 engine_grant_set_holder(struct grant *g, const char *name,
		    const char *addr);

/* Milliseconds left on a lease or reclaim grace; -1 for bound grants. */
int64_t		 engine_grant_ttl_ms(struct engine *e, const struct grant *g);
/* How long a waiter has waited. */
uint64_t	 engine_waited_ms(struct engine *e, const struct waiter *w);
/* "released", "revoked", "expired", "closed", "unclaimed" or "undone". */
const char	*engine_release_reason_name(enum engine_release_reason reason);
/* "conn" or "lease" (an unowned grant shows as "conn"). */
const char	*engine_kind_name(enum grant_kind kind);

/* The highest token ever issued (0: none); tokens continue above it. */
uint64_t	 engine_last_token(struct engine *e);
/*
 * Make every later token greater than floor (used by persistence); a floor
 * above ENGINE_TOKEN_MAX counts as ENGINE_TOKEN_MAX.
 */
void		 engine_raise_token_floor(struct engine *e, uint64_t floor);

void		 engine_get_stats(struct engine *e, struct engine_stats *st);

#endif /* SEMD_ENGINE_H */
