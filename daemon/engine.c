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
 *   expiry, resize, waiter timeout, owner closed), engine_sem_wake() grants the
 *   head of the queue while used + head->n <= capacity, and stops at the
 *   first head that does not fit. That head blocks smaller waiters behind
 *   it even when they would fit: a big request is never starved. So a wake
 *   that grants k waiters costs O(k), and one that grants none O(1).
 * - Shrinking below used revokes nothing; waiters wait for used to fall.
 *
 * - Shrinking below used revokes nothing; waiters wait for used to fall.
 *
 * Several semaphores at once (ACQUIREALL): a request of k semaphores is
 * one waiter of k parts, one on each queue, joined at the tail of all of
 * them at once. It is granted when it is at the head of every one of its
 * queues and each has room; at the head of a queue it blocks those behind
 * it, as a big single request does. Every request joins every tail at its
 * arrival, so the queues agree on the order of any two requests: the
 * oldest waiter is at the head of all its queues, and waits only for
 * units, never for another waiter (no deadlock, no starvation). Whenever
 * the head of a queue changes or room appears, that queue is served; a
 * multi-waiter at its head checks its other queues (O(k)); a multi-grant
 * made or released serves each of its k queues in turn. A worklist of
 * queues to serve (engine->wake) keeps this iterative.
 *
 * Request IDs (leases only) are engine-id.c's; putting grants back after
 * a restart is engine-restore.c's. engine-int.h has what they share.
 *
 * Events are emitted once the state is consistent again: a grant is fully
 * linked before GRANTED, and a released grant is unlinked and its units
 * returned before RELEASED (it is freed right after).
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "engine-int.h"

#include <utlist.h>

static void	grant_release(struct engine *, struct grant *,
		    enum engine_release_reason);

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

/* Free an unlinked grant, all its parts and what they own. */
static void
grant_free(struct grant *g)
{
	struct grant	*part, *next;

	free(g->holder_name);
	free(g->holder_addr);
	free(g->id);
	for (part = g->part_next; part != NULL; part = next) {
		next = part->part_next;
		free(part);
	}
	free(g);
}

static struct engine *
sem_engine(struct sem *s)
{
	return (((struct engine_sem *)s)->e);
}

uint64_t
engine_now(struct engine *e)
{
	return (e->clock.now_ms(e->clock.ctx));
}

void *
engine_timer_add(struct engine *e, uint64_t delay_ms, void (*fire)(void *),
    void *arg)
{
	return (e->clock.timer_add(e->clock.ctx, delay_ms, fire, arg));
}

/* Cancel *timer if it is armed and forget it. */
void
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

void
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

/* (Re)arm the deadline of lead g, and of its parts, ms from now. */
static void
grant_arm(struct engine *e, struct grant *g, uint64_t ms)
{
	struct grant	*part;

	engine_timer_cancel(e, &g->timer);
	for (part = g; part != NULL; part = part->part_next)
		part->deadline_ms = engine_now(e) + ms;
	g->timer = engine_timer_add(e, ms, grant_timer_fired, g);
}

/*
 * Link a new part of n units of s to the grant of lead (NULL: s is the
 * lead's own semaphore and the part is the lead), with the lead's token,
 * kind, owner and deadline. Emits nothing.
 */
struct grant *
engine_grant_part_new(struct engine *e, struct grant *lead, struct sem *s,
    uint32_t n)
{
	struct grant	*g = xcalloc(1, sizeof(*g)), **tail;

	g->n = n;
	g->sem = s;
	g->granted_ms = engine_now(e);
	if (lead == NULL) {
		g->lead = g;
		g->nparts = 1;
	} else {
		g->lead = lead;
		g->token = lead->token;
		g->kind = lead->kind;
		g->owner = lead->owner;
		g->deadline_ms = lead->deadline_ms;
		g->id = lead->id;
		g->id_len = lead->id_len;
		for (tail = &lead->part_next; *tail != NULL;
		    tail = &(*tail)->part_next)
			;
		*tail = g;
		lead->nparts++;
		if (g->id != NULL)
			HASH_ADD_KEYPTR(idh, s->grant_ids, g->id, g->id_len,
			    g);
	}
	DL_APPEND2(s->grants, g, sem_prev, sem_next);
	s->used += n;
	s->nholders++;
	return (g);
}

/*
 * Make and link a grant of n units of s under token, its lead part;
 * bound to o when kind is GRANT_CONN, else ending ttl_ms from now. Emits
 * nothing.
 */
struct grant *
engine_grant_new(struct engine *e, struct sem *s, uint64_t token, uint32_t n,
    enum grant_kind kind, struct owner *o, uint64_t ttl_ms)
{
	struct grant	*g = engine_grant_part_new(e, NULL, s, n);

	g->token = token;
	g->kind = kind;
	HASH_ADD(hh, e->grants, token, sizeof(g->token), g);
	if (kind == GRANT_CONN) {
		g->owner = o;
		DL_APPEND2(o->grants, g, own_prev, own_next);
	} else
		grant_arm(e, g, ttl_ms);
	return (g);
}

/*
 * Grant the parts of a request to o: bound when lease_ms is -1, else a
 * lease from now, under ID id (NULL: none). asked_ms is when it was asked
 * for (the wait histograms). Emits GRANTED with cookie; returns the lead.
 */
static struct grant *
grant_make(struct engine *e, const struct engine_part *parts,
    uint32_t nparts, struct owner *o, int64_t lease_ms, const char *id,
    size_t id_len, void *cookie, uint64_t asked_ms)
{
	struct grant	*g;
	uint64_t	 now = engine_now(e);
	uint32_t	 i;

	if (lease_ms < 0)
		g = engine_grant_new(e, parts[0].sem, ++e->last_token, parts[0].n,
		    GRANT_CONN, o, 0);
	else {
		g = engine_grant_new(e, parts[0].sem, ++e->last_token, parts[0].n,
		    GRANT_LEASE, NULL, (uint64_t)lease_ms);
		if (id != NULL)
			engine_id_take(g, id, id_len);
	}
	for (i = 1; i < nparts; i++)
		engine_grant_part_new(e, g, parts[i].sem, parts[i].n);
	e->stats.grants_total++;
	for (i = 0; i < nparts; i++) {
		parts[i].sem->stats.grants_total++;
		histo_observe(&parts[i].sem->stats.wait,
		    now > asked_ms ? now - asked_ms : 0);
	}
	engine_emit(e, ENGINE_EV_GRANTED, g->sem, g, cookie);
	return (g);
}

/* Unlink lead g and its parts from everything and give their units back. */
static void
grant_unlink(struct engine *e, struct grant *g)
{
	struct grant	*part;
	struct sem	*s;

	engine_timer_cancel(e, &g->timer);
	HASH_DEL(e->grants, g);
	if (g->owner != NULL)
		DL_DELETE2(g->owner->grants, g, own_prev, own_next);
	for (part = g; part != NULL; part = part->part_next) {
		s = part->sem;
		DL_DELETE2(s->grants, part, sem_prev, sem_next);
		if (part->id != NULL)
			HASH_DELETE(idh, s->grant_ids, part);
		s->used -= part->n;
		s->nholders--;
	}
}

/* Serve s's queue now, or once the wake under way is done. */
static void	sem_wake_drain(struct engine *);

void
engine_sem_wake(struct engine *e, struct sem *s, int released)
{
	struct engine_sem	*es = (struct engine_sem *)s;

	if (e->held)
		return;
	es->wake_released |= released;
	if (!es->wake_queued) {
		es->wake_queued = 1;
		es->wake_next = e->wake;
		e->wake = es;
	}
	if (!e->waking)
		sem_wake_drain(e);
}

/* End lead g for reason: emit RELEASED, free g, then serve its queues. */
static void
grant_release(struct engine *e, struct grant *g,
    enum engine_release_reason reason)
{
	struct sem	*sems[ENGINE_PARTS_MAX];
	struct grant	*part;
	uint64_t	 now = engine_now(e);
	uint32_t	 i, k = 0;

	grant_unlink(e, g);
	for (part = g; part != NULL; part = part->part_next) {
		sems[k++] = part->sem;
		part->sem->stats.releases_total[reason]++;
		part->sem->stats.last_release_ms = now;
		if (reason != RELEASE_UNDONE)
			histo_observe(&part->sem->stats.hold,
			    now > g->granted_ms ? now - g->granted_ms : 0);
	}
	if (reason == RELEASE_UNDONE)
		e->stats.grants_total--;
	else
		e->stats.releases_total++;
	if (reason == RELEASE_EXPIRED)
		e->stats.expired_total++;
	else if (reason == RELEASE_REVOKED)
		e->stats.revoked_total++;
	engine_emit_released(e, g->sem, g, reason);
	grant_free(g);
	for (i = 0; i < k; i++)
		engine_sem_wake(e, sems[i], 1);
}

/*
 * Take lead w's parts off their queues and cancel its timer; it stays on
 * its owner's list. The semaphores it left go into sems (if not NULL).
 */
uint32_t
engine_waiter_dequeue(struct engine *e, struct waiter *w, struct sem **sems)
{
	struct waiter	*part;
	uint32_t	 k = 0;

	engine_timer_cancel(e, &w->timer);
	for (part = w; part != NULL; part = part->part_next) {
		DL_DELETE2(part->sem->queue, part, q_prev, q_next);
		if (part->id != NULL)
			HASH_DELETE(idh, part->sem->waiter_ids, part);
		part->sem->nwaiters--;
		if (sems != NULL)
			sems[k] = part->sem;
		k++;
	}
	e->nwaiters--;
	return (k);
}

/* Free a dequeued waiter (a lead) and its parts. */
void
engine_waiter_free(struct waiter *w)
{
	struct waiter	*part, *next;

	DL_DELETE2(w->owner->waiters, w, own_prev, own_next);
	free(w->id);
	for (part = w->part_next; part != NULL; part = next) {
		next = part->part_next;
		free(part);
	}
	free(w);
}

/* Count a TIMEOUT answered to the request w (a lead). */
void
engine_waiter_count_timeout(struct engine *e, struct waiter *w)
{
	struct waiter	*part;

	e->stats.timeouts_total++;
	for (part = w; part != NULL; part = part->part_next)
		part->sem->stats.timeouts_total++;
}

/* A waiter's timeout ran out: answer it, then serve the ones behind it. */
void
engine_waiter_timer_fired(void *arg)
{
	struct waiter	*w = arg;
	struct sem	*s = w->sem, *sems[ENGINE_PARTS_MAX];
	struct engine	*e = sem_engine(s);
	void		*cookie = w->cookie;
	uint32_t	 i, k;

	w->timer = NULL;	/* a fired handle is dead */
	engine_waiter_count_timeout(e, w);
	k = engine_waiter_dequeue(e, w, sems);
	engine_waiter_free(w);
	engine_emit(e, ENGINE_EV_WAIT_TIMEOUT, s, NULL, cookie);
	for (i = 0; i < k; i++)
		engine_sem_wake(e, sems[i], 0);
}

/* 1 when lead w is at the head of each of its queues, and each has room. */
static int
waiter_ready(const struct waiter *w)
{
	const struct waiter	*part;

	for (part = w; part != NULL; part = part->part_next) {
		if (part->sem->queue != part ||
		    part->sem->used + part->n > part->sem->capacity)
			return (0);
	}
	return (1);
}

/*
 * Grant the head of s's queue while it is ready (the FIFO rules above).
 * With released set, units came back by a release: a waiter granted now
 * and queued before that release was handed them (the hand-off
 * histogram). A multi-waiter granted leaves other queues with a new head:
 * they are served next.
 */
static void
sem_serve(struct engine *e, struct sem *s, int released)
{
	struct engine_part	 parts[ENGINE_PARTS_MAX];
	struct waiter		*w, *part;
	void			*cookie;
	struct owner		*o;
	int64_t			 lease_ms;
	uint64_t		 asked_ms, now;
	uint32_t		 i, k;
	char			*id;
	size_t			 id_len;

	while ((w = s->queue) != NULL && !e->held && waiter_ready(w->lead)) {
		w = w->lead;
		cookie = w->cookie;
		o = w->owner;
		lease_ms = w->lease_ms;
		asked_ms = w->enqueued_ms;
		for (k = 0, part = w; part != NULL; part = part->part_next) {
			parts[k].sem = part->sem;
			parts[k++].n = part->n;
		}
		if (released && s->stats.last_release_ms >= asked_ms) {
			now = engine_now(e);
			histo_observe(&s->stats.handoff,
			    now > s->stats.last_release_ms ?
			    now - s->stats.last_release_ms : 0);
		}
		engine_waiter_dequeue(e, w, NULL);
		/* The ID passes to the grant (it was unhashed above). */
		id = w->id;
		id_len = w->id_len;
		w->id = NULL;
		engine_waiter_free(w);
		grant_make(e, parts, k, o, lease_ms, id, id_len, cookie,
		    asked_ms);
		free(id);
		for (i = 0; i < k; i++) {
			if (parts[i].sem != s)
				engine_sem_wake(e, parts[i].sem, 0);
		}
	}
}

/* Serve every queue on the worklist, and those their grants touch. */
static void
sem_wake_drain(struct engine *e)
{
	struct engine_sem	*es;
	int			 released;

	e->waking = 1;
	while ((es = e->wake) != NULL) {
		e->wake = es->wake_next;
		es->wake_queued = 0;
		released = es->wake_released;
		es->wake_released = 0;
		sem_serve(e, &es->s, released);
	}
	e->waking = 0;
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
	struct grant	*g;

	/* Waiters and bound grants went with their owners. */
	assert(e->nowners == 0 && e->nwaiters == 0);
	/* By token: a grant's parts are on several semaphores. */
	while ((g = e->grants) != NULL) {
		grant_unlink(e, g);
		grant_free(g);
	}
	HASH_ITER(hh, e->sems, s, stmp) {
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
	engine_sem_wake(e, s, 0);
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
	struct waiter	*w, *part;
	struct sem	*sems[ENGINE_PARTS_MAX];
	uint32_t	 i, k;

	/*
	 * Take o's waiters off their queues first, so that the wakes below
	 * can never grant o (about to be freed) anything.
	 */
	DL_FOREACH2(o->waiters, w, own_next)
		engine_waiter_dequeue(e, w, NULL);
	while (o->grants != NULL)
		grant_release(e, o->grants, RELEASE_CLOSED);
	/* Serve the queues the waiters left, as after a timeout. */
	while ((w = o->waiters) != NULL) {
		for (k = 0, part = w; part != NULL; part = part->part_next)
			sems[k++] = part->sem;
		engine_waiter_free(w);
		for (i = 0; i < k; i++)
			engine_sem_wake(e, sems[i], 0);
	}
	e->nowners--;
	free(o);
}

/* Queue r at the tail of each of its queues (status QUEUED). */
static void
engine_enqueue(struct engine *e, const struct engine_request *r)
{
	struct waiter	*w = NULL, *part, **tail = NULL;
	uint32_t	 i;

	for (i = 0; i < r->nparts; i++) {
		part = xcalloc(1, sizeof(*part));
		part->n = r->parts[i].n;
		part->sem = r->parts[i].sem;
		part->owner = r->owner;
		part->enqueued_ms = engine_now(e);
		part->lease_ms = r->lease_ms;
		if (w == NULL) {
			w = part;
			w->lead = w;
			w->cookie = r->cookie;
			if (r->id != NULL) {
				if ((w->id = malloc(r->id_len + 1)) == NULL)
					abort();
				memcpy(w->id, r->id, r->id_len);
				w->id[r->id_len] = '\0';
				w->id_len = r->id_len;
			}
		} else {
			part->lead = w;
			part->id = w->id;
			part->id_len = w->id_len;
			*tail = part;
		}
		tail = &part->part_next;
		w->nparts = i + 1;
		DL_APPEND2(part->sem->queue, part, q_prev, q_next);
		if (part->id != NULL)
			HASH_ADD_KEYPTR(idh, part->sem->waiter_ids, part->id,
			    part->id_len, part);
		part->sem->nwaiters++;
	}
	DL_APPEND2(r->owner->waiters, w, own_prev, own_next);
	e->nwaiters++;
	if (r->timeout_ms > 0) {
		w->timer = engine_timer_add(e, (uint64_t)r->timeout_ms,
		    engine_waiter_timer_fired, w);
	}
}

enum proto_err
engine_acquire_req(struct engine *e, const struct engine_request *r,
    enum acquire_status *status, struct grant **grant)
{
	enum proto_err	err;
	uint32_t	i;
	int		now = 1;

	assert(r->owner != NULL && r->timeout_ms >= -1 && r->lease_ms >= -1);
	assert(r->nparts >= 1 && r->nparts <= ENGINE_PARTS_MAX);
	assert(r->id == NULL || r->lease_ms >= 0);
	*grant = NULL;
	for (i = 0; i < r->nparts; i++) {
		if (r->parts[i].n > r->parts[i].sem->capacity)
			return (PERR_RANGE);
	}
	if (e->held)
		return (PERR_UNAVAILABLE);
	if (r->id != NULL) {
		*status = ACQUIRE_GRANTED;
		if ((err = engine_id_rules(e, r, status, grant)) !=
		    PERR_NONE || *status != ACQUIRE_GRANTED)
			return (err);
	}
	for (i = 0; i < r->nparts && now; i++) {
		if (r->parts[i].sem->queue != NULL ||
		    r->parts[i].sem->used + r->parts[i].n >
		    r->parts[i].sem->capacity)
			now = 0;
	}
	if (now) {
		*grant = grant_make(e, r->parts, r->nparts, r->owner,
		    r->lease_ms, r->id, r->id_len, NULL, engine_now(e));
		*status = ACQUIRE_GRANTED;
		return (PERR_NONE);
	}
	if (r->timeout_ms == 0) {
		e->stats.timeouts_total++;
		for (i = 0; i < r->nparts; i++)
			r->parts[i].sem->stats.timeouts_total++;
		*status = ACQUIRE_TIMEOUT;
		return (PERR_NONE);
	}
	engine_enqueue(e, r);
	*status = ACQUIRE_QUEUED;
	return (PERR_NONE);
}

enum proto_err
engine_acquire(struct engine *e, struct sem *s, struct owner *o, uint32_t n,
    int64_t timeout_ms, int64_t lease_ms, void *cookie,
    enum acquire_status *status, struct grant **grant)
{
	struct engine_part	part = { s, n };
	struct engine_request	r = { .owner = o, .parts = &part, .nparts = 1,
				    .timeout_ms = timeout_ms,
				    .lease_ms = lease_ms, .cookie = cookie };

	return (engine_acquire_req(e, &r, status, grant));
}

struct grant *
engine_find_grant(struct engine *e, struct sem *s, uint64_t token)
{
	struct grant	*g;

	HASH_FIND(hh, e->grants, &token, sizeof(token), g);
	for (; g != NULL; g = g->part_next) {
		if (g->sem == s)
			return (g);
	}
	return (NULL);
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
	grant_release(e, g->lead, RELEASE_BY_HOLDER);
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
	g = g->lead;
	grant_arm(e, g, ms);
	engine_emit(e, ENGINE_EV_REFRESHED, g->sem, g, NULL);
	return (PERR_NONE);
}

enum proto_err
engine_attach(struct engine *e, struct sem *s, uint64_t token,
    struct owner *o)
{
	struct grant	*g, *part;

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
	g = g->lead;
	engine_timer_cancel(e, &g->timer);
	for (part = g; part != NULL; part = part->part_next) {
		part->kind = GRANT_CONN;
		part->deadline_ms = 0;
		part->owner = o;
	}
	DL_APPEND2(o->grants, g, own_prev, own_next);
	engine_emit(e, ENGINE_EV_ATTACHED, g->sem, g, NULL);
	return (PERR_NONE);
}

enum proto_err
engine_revoke(struct engine *e, struct sem *s, uint64_t token)
{
	struct grant	*g;

	if ((g = engine_find_grant(e, s, token)) == NULL)
		return (PERR_NOTHELD);
	grant_release(e, g->lead, RELEASE_REVOKED);
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
	grant_release(e, g->lead, RELEASE_UNDONE);
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
		engine_sem_wake(e, s, 1);
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
