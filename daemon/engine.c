/*
 * engine.c: the semaphore rules, as a pure state machine (see engine.h).
 *
 * Semaphores live in a hash by name, grants in one daemon-wide hash by
 * token; a grant sits on its semaphore's list and, when bound, on its
 * owner's list; a waiter sits on its semaphore's queue and on its owner's
 * list. Every list is an intrusive utlist DL list, so adding or removing
 * one holder or waiter is O(1).
 *
 * FIFO rules (those of Go's x/sync/semaphore.Weighted):
 *
 * - An ACQUIRE of n is granted at once only if used + n <= capacity and
 *   nobody is queued; a TRY (timeout 0) that cannot be granted at once
 *   answers TIMEOUT; anything else joins the tail of the queue.
 * - n > capacity is refused (RANGE) rather than queued for ever.
 * - Whenever units come back or a waiter leaves (release, revoke, lease
 *   expiry, resize, waiter timeout, owner closed), sem_wake() grants the
 *   head of the queue while used + head->n <= capacity, and stops at the
 *   first head that does not fit. That head blocks smaller waiters behind
 *   it even when they would fit: a big request is never starved. So a wake
 *   that grants k waiters costs O(k), and one that grants none O(1).
 * - Shrinking below used revokes nothing; waiters wait for used to fall.
 *
 * Events are emitted once the state is consistent again: a grant is fully
 * linked before GRANTED, and a released grant is unlinked and its units
 * returned before RELEASED (it is freed right after).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* uthash must abort on ENOMEM, as every other allocation here does. */
#define uthash_fatal(msg)	abort()

#include <utlist.h>

#include "engine.h"

struct engine {
	struct clock	 clock;
	engine_event_fn		 on_event;
	void			*ctx;
	uint32_t		 max_sems;

	struct sem		*sems;		/* by name, creation order */
	struct grant		*grants;	/* by token */
	uint64_t		 last_token;
	uint64_t		 nwaiters;
	uint64_t		 nowners;
	int			 held;		/* engine_hold_grants() */
	struct engine_stats	 stats;		/* the *_total counters */
};

/*
 * A semaphore as allocated here. Timer callbacks get one argument (the
 * grant or the waiter) and find their engine through its semaphore.
 */
struct engine_sem {
	struct sem	 s;	/* first: a struct sem * is a struct engine_sem * */
	struct engine	*e;
};

static void	grant_release(struct engine *, struct grant *,
		    enum engine_release_reason);
static void	sem_wake(struct engine *, struct sem *, int);

/* calloc that aborts on failure. */
static void *
xcalloc(size_t n, size_t size)
{
	void	*p;

	if ((p = calloc(n, size)) == NULL)
		abort();
	return (p);
}

/* strdup that aborts on failure; NULL stays NULL. */
static char *
xstrdup_or_null(const char *s)
{
	char	*p;

	if (s == NULL)
		return (NULL);
	if ((p = strdup(s)) == NULL)
		abort();
	return (p);
}

/* Free an unlinked grant and what it owns. */
static void
grant_free(struct grant *g)
{
	free(g->holder_name);
	free(g->holder_addr);
	free(g);
}

static struct engine *
sem_engine(struct sem *s)
{
	return (((struct engine_sem *)s)->e);
}

static uint64_t
engine_now(struct engine *e)
{
	return (e->clock.now_ms(e->clock.ctx));
}

static void *
engine_timer_add(struct engine *e, uint64_t delay_ms, void (*fire)(void *),
    void *arg)
{
	return (e->clock.timer_add(e->clock.ctx, delay_ms, fire, arg));
}

/* Cancel *timer if it is armed and forget it. */
static void
engine_timer_cancel(struct engine *e, void **timer)
{
	if (*timer != NULL) {
		e->clock.timer_del(e->clock.ctx, *timer);
		*timer = NULL;
	}
}

/* Tell the observer, if any. */
static void
engine_emit_event(struct engine *e, const struct engine_event *ev)
{
	if (e->on_event != NULL)
		e->on_event(e->ctx, ev);
}

static void
engine_emit(struct engine *e, enum engine_event_type type, struct sem *s,
    struct grant *g, void *cookie)
{
	struct engine_event	ev = { .type = type, .sem = s, .grant = g,
				    .cookie = cookie };

	engine_emit_event(e, &ev);
}

/* RELEASED, the one event with a reason. */
static void
engine_emit_released(struct engine *e, struct sem *s, struct grant *g,
    enum engine_release_reason reason)
{
	struct engine_event	ev = { .type = ENGINE_EV_RELEASED, .sem = s,
				    .grant = g, .reason = reason };

	engine_emit_event(e, &ev);
}

/* A lease ran out, or an unowned grant was not attached in time. */
static void
grant_timer_fired(void *arg)
{
	struct grant	*g = arg;
	struct engine	*e = sem_engine(g->sem);

	g->timer = NULL;	/* a fired handle is dead */
	if (engine_now(e) < g->deadline_ms) {
		/* Early (a coarse timer): a lease may end late, never early. */
		g->timer = engine_timer_add(e, g->deadline_ms - engine_now(e),
		    grant_timer_fired, g);
		return;
	}
	if (g->kind == GRANT_LEASE)
		grant_release(e, g, RELEASE_EXPIRED);
	else
		grant_release(e, g, RELEASE_UNCLAIMED);
}

/* (Re)arm g's deadline ms from now. */
static void
grant_arm(struct engine *e, struct grant *g, uint64_t ms)
{
	engine_timer_cancel(e, &g->timer);
	g->deadline_ms = engine_now(e) + ms;
	g->timer = engine_timer_add(e, ms, grant_timer_fired, g);
}

/*
 * Make and link a grant of n units of s under token; bound to o when kind
 * is GRANT_CONN, else ending ttl_ms from now. Emits nothing.
 */
static struct grant *
grant_new(struct engine *e, struct sem *s, uint64_t token, uint32_t n,
    enum grant_kind kind, struct owner *o, uint64_t ttl_ms)
{
	struct grant	*g = xcalloc(1, sizeof(*g));

	g->token = token;
	g->n = n;
	g->kind = kind;
	g->sem = s;
	g->granted_ms = engine_now(e);
	HASH_ADD(hh, e->grants, token, sizeof(g->token), g);
	DL_APPEND2(s->grants, g, sem_prev, sem_next);
	if (kind == GRANT_CONN) {
		g->owner = o;
		DL_APPEND2(o->grants, g, own_prev, own_next);
	} else
		grant_arm(e, g, ttl_ms);
	s->used += n;
	s->nholders++;
	return (g);
}

/*
 * Grant n units of s to o: bound when lease_ms is -1, else a lease from
 * now. asked_ms is when it was asked for (the wait histogram). Emits
 * GRANTED with cookie; returns the grant.
 */
static struct grant *
grant_make(struct engine *e, struct sem *s, struct owner *o, uint32_t n,
    int64_t lease_ms, void *cookie, uint64_t asked_ms)
{
	struct grant	*g;
	uint64_t	 now = engine_now(e);

	if (lease_ms < 0)
		g = grant_new(e, s, ++e->last_token, n, GRANT_CONN, o, 0);
	else {
		g = grant_new(e, s, ++e->last_token, n, GRANT_LEASE, NULL,
		    (uint64_t)lease_ms);
	}
	e->stats.grants_total++;
	s->stats.grants_total++;
	histo_observe(&s->stats.wait, now > asked_ms ? now - asked_ms : 0);
	engine_emit(e, ENGINE_EV_GRANTED, s, g, cookie);
	return (g);
}

/* Unlink g from everything and give its units back; g is not freed. */
static void
grant_unlink(struct engine *e, struct grant *g)
{
	struct sem	*s = g->sem;

	engine_timer_cancel(e, &g->timer);
	HASH_DEL(e->grants, g);
	DL_DELETE2(s->grants, g, sem_prev, sem_next);
	if (g->owner != NULL)
		DL_DELETE2(g->owner->grants, g, own_prev, own_next);
	s->used -= g->n;
	s->nholders--;
}

/* End g for reason: emit RELEASED, free g, then serve the queue. */
static void
grant_release(struct engine *e, struct grant *g,
    enum engine_release_reason reason)
{
	struct sem	*s = g->sem;
	uint64_t	 now = engine_now(e);

	grant_unlink(e, g);
	s->stats.releases_total[reason]++;
	s->stats.last_release_ms = now;
	if (reason != RELEASE_UNDONE)
		histo_observe(&s->stats.hold, now > g->granted_ms ?
		    now - g->granted_ms : 0);
	if (reason == RELEASE_UNDONE)
		e->stats.grants_total--;
	else
		e->stats.releases_total++;
	if (reason == RELEASE_EXPIRED)
		e->stats.expired_total++;
	else if (reason == RELEASE_REVOKED)
		e->stats.revoked_total++;
	engine_emit_released(e, s, g, reason);
	grant_free(g);
	sem_wake(e, s, 1);
}

/* Take w off its queue and cancel its timer; it stays on its owner's. */
static void
waiter_dequeue(struct engine *e, struct waiter *w)
{
	engine_timer_cancel(e, &w->timer);
	DL_DELETE2(w->sem->queue, w, q_prev, q_next);
	w->sem->nwaiters--;
	e->nwaiters--;
}

/* Free a dequeued waiter. */
static void
waiter_free(struct waiter *w)
{
	DL_DELETE2(w->owner->waiters, w, own_prev, own_next);
	free(w);
}

/* A waiter's timeout ran out: answer it, then serve the ones behind it. */
static void
waiter_timer_fired(void *arg)
{
	struct waiter	*w = arg;
	struct sem	*s = w->sem;
	struct engine	*e = sem_engine(s);
	void		*cookie = w->cookie;

	w->timer = NULL;	/* a fired handle is dead */
	waiter_dequeue(e, w);
	waiter_free(w);
	e->stats.timeouts_total++;
	s->stats.timeouts_total++;
	engine_emit(e, ENGINE_EV_WAIT_TIMEOUT, s, NULL, cookie);
	sem_wake(e, s, 0);
}

/*
 * Grant the head of s's queue while it fits (the FIFO rules above). With
 * released set, units came back by a release: a waiter granted now and
 * queued before that release was handed them (the hand-off histogram).
 */
static void
sem_wake(struct engine *e, struct sem *s, int released)
{
	struct waiter	*w;
	void		*cookie;
	struct owner	*o;
	uint32_t	 n;
	int64_t		 lease_ms;
	uint64_t	 asked_ms, now;

	if (e->held)
		return;
	while ((w = s->queue) != NULL && s->used + w->n <= s->capacity) {
		cookie = w->cookie;
		o = w->owner;
		n = w->n;
		lease_ms = w->lease_ms;
		asked_ms = w->enqueued_ms;
		if (released && s->stats.last_release_ms >= asked_ms) {
			now = engine_now(e);
			histo_observe(&s->stats.handoff,
			    now > s->stats.last_release_ms ?
			    now - s->stats.last_release_ms : 0);
		}
		waiter_dequeue(e, w);
		waiter_free(w);
		grant_make(e, s, o, n, lease_ms, cookie, asked_ms);
	}
}

struct engine *
engine_new(const struct clock *clock, engine_event_fn on_event,
    void *ctx, uint32_t max_sems)
{
	struct engine	*e = xcalloc(1, sizeof(*e));

	e->clock = *clock;
	e->on_event = on_event;
	e->ctx = ctx;
	e->max_sems = max_sems;
	return (e);
}

void
engine_set_max_sems(struct engine *e, uint32_t max_sems)
{
	e->max_sems = max_sems;
}

void
engine_free(struct engine *e)
{
	engine_clear(e);
	free(e);
}

void
engine_clear(struct engine *e)
{
	struct sem	*s, *stmp;
	struct grant	*g, *gtmp;

	/* Waiters and bound grants went with their owners. */
	assert(e->nowners == 0 && e->nwaiters == 0);
	HASH_ITER(hh, e->sems, s, stmp) {
		DL_FOREACH_SAFE2(s->grants, g, gtmp, sem_next) {
			grant_unlink(e, g);
			grant_free(g);
		}
		HASH_DEL(e->sems, s);
		free(s);
	}
}

enum proto_err
engine_create(struct engine *e, const char *name, size_t len,
    uint32_t capacity, struct sem **out)
{
	struct engine_sem	*es;
	struct sem		*s;

	assert(len > 0 && len <= PROTO_NAME_MAX);
	if ((s = engine_find(e, name, len)) != NULL) {
		if (out != NULL)
			*out = s;
		return (s->capacity == capacity ? PERR_NONE : PERR_EXISTS);
	}
	if (out != NULL)
		*out = NULL;
	if (e->max_sems != 0 && HASH_COUNT(e->sems) >= e->max_sems)
		return (PERR_LIMIT);

	es = xcalloc(1, sizeof(*es));
	es->e = e;
	s = &es->s;
	memcpy(s->name, name, len);
	s->name_len = len;
	s->capacity = capacity;
	HASH_ADD_KEYPTR(hh, e->sems, s->name, s->name_len, s);
	if (out != NULL)
		*out = s;
	engine_emit(e, ENGINE_EV_SEM_CREATED, s, NULL, NULL);
	return (PERR_NONE);
}

struct sem *
engine_find(struct engine *e, const char *name, size_t len)
{
	struct sem	*s;

	HASH_FIND(hh, e->sems, name, len, s);
	return (s);
}

void
engine_resize(struct engine *e, struct sem *s, uint32_t capacity)
{
	s->capacity = capacity;
	engine_emit(e, ENGINE_EV_SEM_RESIZED, s, NULL, NULL);
	sem_wake(e, s, 0);
}

enum proto_err
engine_delete(struct engine *e, struct sem *s)
{
	if (s->grants != NULL || s->queue != NULL)
		return (PERR_BUSY);
	HASH_DEL(e->sems, s);
	engine_emit(e, ENGINE_EV_SEM_DELETED, s, NULL, NULL);
	free(s);
	return (PERR_NONE);
}

struct sem *
engine_sem_first(struct engine *e)
{
	return (e->sems);
}

struct sem *
engine_sem_next(const struct sem *s)
{
	return (s->hh.next);
}

struct owner *
engine_owner_new(struct engine *e, uint64_t id)
{
	struct owner	*o = xcalloc(1, sizeof(*o));

	o->id = id;
	e->nowners++;
	return (o);
}

void
engine_owner_free(struct engine *e, struct owner *o)
{
	struct waiter	*w, *wtmp;

	/*
	 * Take o's waiters off their queues first, so that the wakes below
	 * can never grant o (about to be freed) anything.
	 */
	DL_FOREACH2(o->waiters, w, own_next)
		waiter_dequeue(e, w);
	while (o->grants != NULL)
		grant_release(e, o->grants, RELEASE_CLOSED);
	/* Serve the queues the waiters left, as after a timeout. */
	DL_FOREACH_SAFE2(o->waiters, w, wtmp, own_next) {
		sem_wake(e, w->sem, 0);
		waiter_free(w);
	}
	e->nowners--;
	free(o);
}

enum proto_err
engine_acquire(struct engine *e, struct sem *s, struct owner *o, uint32_t n,
    int64_t timeout_ms, int64_t lease_ms, void *cookie,
    enum acquire_status *status, struct grant **grant)
{
	struct waiter	*w;

	assert(o != NULL && timeout_ms >= -1 && lease_ms >= -1);
	*grant = NULL;
	if (n > s->capacity)
		return (PERR_RANGE);
	if (e->held)
		return (PERR_UNAVAILABLE);
	if (s->queue == NULL && s->used + n <= s->capacity) {
		*grant = grant_make(e, s, o, n, lease_ms, NULL,
		    engine_now(e));
		*status = ACQUIRE_GRANTED;
		return (PERR_NONE);
	}
	if (timeout_ms == 0) {
		e->stats.timeouts_total++;
		s->stats.timeouts_total++;
		*status = ACQUIRE_TIMEOUT;
		return (PERR_NONE);
	}

	w = xcalloc(1, sizeof(*w));
	w->n = n;
	w->lease_ms = lease_ms;
	w->enqueued_ms = engine_now(e);
	w->sem = s;
	w->owner = o;
	w->cookie = cookie;
	DL_APPEND2(s->queue, w, q_prev, q_next);
	DL_APPEND2(o->waiters, w, own_prev, own_next);
	s->nwaiters++;
	e->nwaiters++;
	if (timeout_ms > 0) {
		w->timer = engine_timer_add(e, (uint64_t)timeout_ms,
		    waiter_timer_fired, w);
	}
	*status = ACQUIRE_QUEUED;
	return (PERR_NONE);
}

struct grant *
engine_find_grant(struct engine *e, struct sem *s, uint64_t token)
{
	struct grant	*g;

	HASH_FIND(hh, e->grants, &token, sizeof(token), g);
	if (g == NULL || g->sem != s)
		return (NULL);
	return (g);
}

enum proto_err
engine_release(struct engine *e, struct sem *s, uint64_t token,
    struct owner *o)
{
	struct grant	*g;

	if ((g = engine_find_grant(e, s, token)) == NULL)
		return (PERR_NOTHELD);
	if (g->kind == GRANT_CONN && g->owner != o)
		return (PERR_NOTOWNER);
	grant_release(e, g, RELEASE_BY_HOLDER);
	return (PERR_NONE);
}

enum proto_err
engine_refresh(struct engine *e, struct sem *s, uint64_t token, uint32_t ms)
{
	struct grant	*g;

	if ((g = engine_find_grant(e, s, token)) == NULL)
		return (PERR_NOTHELD);
	if (g->kind != GRANT_LEASE)
		return (PERR_NOTLEASE);
	grant_arm(e, g, ms);
	engine_emit(e, ENGINE_EV_REFRESHED, s, g, NULL);
	return (PERR_NONE);
}

enum proto_err
engine_attach(struct engine *e, struct sem *s, uint64_t token,
    struct owner *o)
{
	struct grant	*g;

	if ((g = engine_find_grant(e, s, token)) == NULL)
		return (PERR_NOTHELD);
	switch (g->kind) {
	case GRANT_LEASE:
		/* Bound to nobody: there is nothing to take back. */
		return (PERR_NOTLEASE);
	case GRANT_CONN:
		return (g->owner == o ? PERR_NONE : PERR_NOTOWNER);
	case GRANT_UNOWNED:
		break;
	}
	engine_timer_cancel(e, &g->timer);
	g->kind = GRANT_CONN;
	g->deadline_ms = 0;
	g->owner = o;
	DL_APPEND2(o->grants, g, own_prev, own_next);
	engine_emit(e, ENGINE_EV_ATTACHED, s, g, NULL);
	return (PERR_NONE);
}

enum proto_err
engine_revoke(struct engine *e, struct sem *s, uint64_t token)
{
	struct grant	*g;

	if ((g = engine_find_grant(e, s, token)) == NULL)
		return (PERR_NOTHELD);
	grant_release(e, g, RELEASE_REVOKED);
	return (PERR_NONE);
}

struct grant *
engine_grant_by_token(struct engine *e, uint64_t token)
{
	struct grant	*g;

	HASH_FIND(hh, e->grants, &token, sizeof(token), g);
	return (g);
}

void
engine_undo_grant(struct engine *e, struct grant *g)
{
	grant_release(e, g, RELEASE_UNDONE);
}

void
engine_hold_grants(struct engine *e, int hold)
{
	struct sem	*s, *tmp;

	e->held = hold;
	if (hold)
		return;
	/* A queue may have been held back with room to spare: serve it. */
	HASH_ITER(hh, e->sems, s, tmp)
		sem_wake(e, s, 1);
}

struct grant *
engine_restore_grant(struct engine *e, struct sem *s, uint64_t token,
    uint32_t n, enum grant_kind kind, uint64_t ttl_ms)
{
	struct grant	*g;

	assert(kind != GRANT_CONN && token != 0);
	if (token > ENGINE_TOKEN_MAX)
		return (NULL);
	HASH_FIND(hh, e->grants, &token, sizeof(token), g);
	if (g != NULL)
		return (NULL);
	engine_raise_token_floor(e, token);
	return (grant_new(e, s, token, n, kind, NULL, ttl_ms));
}

void
engine_grant_set_holder(struct grant *g, const char *name, const char *addr)
{
	char	*n = xstrdup_or_null(name), *a = xstrdup_or_null(addr);

	free(g->holder_name);
	free(g->holder_addr);
	g->holder_name = n;
	g->holder_addr = a;
}

int64_t
engine_grant_ttl_ms(struct engine *e, const struct grant *g)
{
	uint64_t	now;

	if (g->kind == GRANT_CONN)
		return (-1);
	now = engine_now(e);
	return (g->deadline_ms > now ? (int64_t)(g->deadline_ms - now) : 0);
}

uint64_t
engine_waited_ms(struct engine *e, const struct waiter *w)
{
	uint64_t	now = engine_now(e);

	return (now > w->enqueued_ms ? now - w->enqueued_ms : 0);
}

const char *
engine_release_reason_name(enum engine_release_reason reason)
{
	static const char *const names[RELEASE_NREASONS] = {
		"released", "revoked", "expired", "closed", "unclaimed",
		"undone"
	};

	return ((unsigned)reason < RELEASE_NREASONS ? names[reason] : "unknown");
}

const char *
engine_kind_name(enum grant_kind kind)
{
	return (kind == GRANT_LEASE ? "lease" : "conn");
}

uint64_t
engine_last_token(struct engine *e)
{
	return (e->last_token);
}

void
engine_raise_token_floor(struct engine *e, uint64_t floor)
{
	if (floor > ENGINE_TOKEN_MAX)
		floor = ENGINE_TOKEN_MAX;
	if (floor > e->last_token)
		e->last_token = floor;
}

void
engine_get_stats(struct engine *e, struct engine_stats *st)
{
	*st = e->stats;
	st->sems = HASH_COUNT(e->sems);
	st->grants = HASH_COUNT(e->grants);
	st->waiters = e->nwaiters;
}
