/*
 * test_engine.c: unit tests of the semaphore rules (daemon/engine.c).
 *
 * Time is a fake clock (engine_fake.c) moved by hand with fake_advance(),
 * which fires due timers in deadline order (timers armed by a fired
 * callback included).
 * Every engine event is recorded, and the observer checks the engine's
 * invariants each time it is called, so a test fails if an event is ever
 * emitted while the state is half-updated.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <utlist.h>

#include "engine.h"
#include "engine_fake.h"

/* --- event recorder and invariant checks --- */

struct rec {
	enum engine_event_type		 type;
	struct sem			*sem;
	void				*cookie;
	enum engine_release_reason	 reason;
	uint64_t			 token;
	uint32_t			 n;
	uint64_t			 at_ms;
	char				 holder[32];	/* RELEASED: name/addr */
};

#define NRECS	64
static struct rec	 recs[NRECS];
static size_t		 nrecs;

static int		 cookies[8];
#define A		(&cookies[0])
#define B		(&cookies[1])
#define C		(&cookies[2])
#define D		(&cookies[3])

static int
on_list(struct grant *head, struct grant *g, int by_owner)
{
	struct grant	*x;

	for (x = head; x != NULL; x = by_owner ? x->own_next : x->sem_next) {
		if (x == g)
			return (1);
	}
	return (0);
}

static void
on_event(void *ctx, const struct engine_event *ev)
{
	struct engine	*e = *(struct engine **)ctx;
	struct grant	*g = ev->grant, *p;
	struct waiter	*w;
	struct rec	*r;
	const char	*msg;

	ck_assert_uint_lt(nrecs, NRECS);
	r = &recs[nrecs++];
	r->type = ev->type;
	r->sem = ev->sem;
	r->cookie = ev->cookie;
	r->reason = ev->reason;
	r->at_ms = fake_now;
	if (g != NULL) {
		r->token = g->token;
		r->n = g->n;
	}

	switch (ev->type) {
	case ENGINE_EV_SEM_DELETED:
		ck_assert_ptr_null(engine_find(e, ev->sem->name,
		    ev->sem->name_len));
		return;
	case ENGINE_EV_GRANTED:
	case ENGINE_EV_REFRESHED:
	case ENGINE_EV_ATTACHED:
		ck_assert_ptr_nonnull(g);
		ck_assert_ptr_eq(engine_find_grant(e, ev->sem, g->token), g);
		ck_assert(on_list(ev->sem->grants, g, 0));
		if (g->kind == GRANT_CONN)
			ck_assert(on_list(g->owner->grants, g, 1));
		else
			ck_assert_ptr_null(g->owner);
		/* Events carry a grant's lead; each part is in place too. */
		ck_assert_ptr_eq(g->lead, g);
		for (p = g->part_next; p != NULL; p = p->part_next) {
			ck_assert_ptr_eq(p->lead, g);
			ck_assert_ptr_eq(engine_find_grant(e, p->sem, g->token),
			    p);
			ck_assert(on_list(p->sem->grants, p, 0));
			ck_assert_int_eq(p->kind, g->kind);
			ck_assert_ptr_null(fake_check_sem(p->sem));
		}
		break;
	case ENGINE_EV_RELEASED:
		ck_assert_ptr_nonnull(g);
		/* The holder's labels are still readable, for observers. */
		snprintf(r->holder, sizeof(r->holder), "%s/%s",
		    g->holder_name != NULL ? g->holder_name : "-",
		    g->holder_addr != NULL ? g->holder_addr : "-");
		ck_assert_ptr_null(engine_find_grant(e, ev->sem, g->token));
		ck_assert(!on_list(ev->sem->grants, g, 0));
		if (g->owner != NULL)
			ck_assert(!on_list(g->owner->grants, g, 1));
		for (p = g->part_next; p != NULL; p = p->part_next) {
			ck_assert(!on_list(p->sem->grants, p, 0));
			ck_assert_ptr_null(fake_check_sem(p->sem));
		}
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
		ck_assert_ptr_nonnull(ev->cookie);
		ck_assert_ptr_null(g);
		break;
	default:
		break;
	}
	/* A waiter is off the queue by the time its answer is announced. */
	if (ev->cookie != NULL) {
		DL_FOREACH2(ev->sem->queue, w, q_next)
			ck_assert_ptr_ne(w->cookie, ev->cookie);
	}
	msg = fake_check_sem(ev->sem);
	ck_assert_msg(msg == NULL, "%s: %s", ev->sem->name, msg);
}

/* Event i is of that type, with that cookie and (for RELEASED) reason. */
static void
expect(size_t i, enum engine_event_type type, void *cookie,
    enum engine_release_reason reason)
{
	ck_assert_uint_gt(nrecs, i);
	ck_assert_int_eq(recs[i].type, type);
	ck_assert_ptr_eq(recs[i].cookie, cookie);
	if (type == ENGINE_EV_RELEASED)
		ck_assert_int_eq(recs[i].reason, reason);
}

/* --- fixture and helpers --- */

static struct engine	*eng;
static struct owner	*owners[8];

static void
setup(void)
{
	fake_reset(1000);
	nrecs = 0;
	memset(owners, 0, sizeof(owners));
	eng = engine_new(&fake_clock, on_event, &eng, 0);
}

static void
teardown(void)
{
	size_t	i;

	for (i = 0; i < 8; i++) {
		if (owners[i] != NULL)
			engine_owner_free(eng, owners[i]);
	}
	engine_free(eng);
	ck_assert_uint_eq(fake_ntimers, 0);	/* every timer cancelled */
	/* Drop stale pointers, so that LeakSanitizer sees any leak. */
	memset(recs, 0, sizeof(recs));
	eng = NULL;
}

/* Owner number id (1..7), freed by teardown unless drop_owner()ed. */
static struct owner *
owner(uint64_t id)
{
	ck_assert_ptr_null(owners[id]);
	owners[id] = engine_owner_new(eng, id);
	return (owners[id]);
}

static void
drop_owner(struct owner *o)
{
	ck_assert_ptr_eq(owners[o->id], o);
	owners[o->id] = NULL;
	engine_owner_free(eng, o);
}

static struct sem *
mksem(const char *name, uint32_t capacity)
{
	struct sem	*s;

	ck_assert_int_eq(engine_create(eng, name, strlen(name), capacity, &s),
	    PERR_NONE);
	ck_assert_ptr_nonnull(s);
	return (s);
}

/* An ACQUIRE that must be granted at once; returns its token. */
static uint64_t
take(struct sem *s, struct owner *o, uint32_t n, int64_t lease_ms)
{
	enum acquire_status	 st;
	struct grant		*g;

	ck_assert_int_eq(engine_acquire(eng, s, o, n, -1, lease_ms, NULL,
	    &st, &g), PERR_NONE);
	ck_assert_int_eq(st, ACQUIRE_GRANTED);
	ck_assert_ptr_nonnull(g);
	ck_assert_uint_eq(g->n, n);
	return (g->token);
}

/* An ACQUIRE that must be queued. */
static void
wait_for(struct sem *s, struct owner *o, uint32_t n, int64_t timeout_ms,
    int64_t lease_ms, void *cookie)
{
	enum acquire_status	 st;
	struct grant		*g;

	ck_assert_int_eq(engine_acquire(eng, s, o, n, timeout_ms, lease_ms,
	    cookie, &st, &g), PERR_NONE);
	ck_assert_int_eq(st, ACQUIRE_QUEUED);
	ck_assert_ptr_null(g);
}

/* The status of a TRY (timeout 0) that must not fail. */
static enum acquire_status
try_acquire(struct sem *s, struct owner *o, uint32_t n)
{
	enum acquire_status	 st;
	struct grant		*g;

	ck_assert_int_eq(engine_acquire(eng, s, o, n, 0, -1, NULL, &st, &g),
	    PERR_NONE);
	return (st);
}

static struct engine_stats
stats(void)
{
	struct engine_stats	st;

	engine_get_stats(eng, &st);
	return (st);
}

/* --- CREATE, DELETE, the list of semaphores --- */

START_TEST(test_create)
{
	struct sem	*s, *s2;

	s = mksem("a", 3);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_SEM_CREATED, NULL, 0);
	ck_assert_ptr_eq(recs[0].sem, s);
	ck_assert_str_eq(s->name, "a");
	ck_assert_uint_eq(s->name_len, 1);
	ck_assert_uint_eq(s->capacity, 3);

	/* Same capacity: idempotent, no event. */
	ck_assert_int_eq(engine_create(eng, "a", 1, 3, &s2), PERR_NONE);
	ck_assert_ptr_eq(s2, s);
	ck_assert_uint_eq(nrecs, 1);

	/* Other capacity: EXISTS, and *out shows the existing one. */
	s2 = NULL;
	ck_assert_int_eq(engine_create(eng, "a", 1, 4, &s2), PERR_EXISTS);
	ck_assert_ptr_eq(s2, s);
	ck_assert_uint_eq(s->capacity, 3);
	ck_assert_uint_eq(nrecs, 1);

	/* Names are bytes with a length, not C strings. */
	ck_assert_ptr_eq(engine_find(eng, "abc", 1), s);
	ck_assert_ptr_null(engine_find(eng, "ab", 2));
	ck_assert_uint_eq(stats().sems, 1);
}
END_TEST

START_TEST(test_create_limit)
{
	struct engine	*e2;
	struct sem	*a, *b, *s;

	e2 = engine_new(&fake_clock, on_event, &e2, 2);
	ck_assert_int_eq(engine_create(e2, "a", 1, 1, &a), PERR_NONE);
	ck_assert_int_eq(engine_create(e2, "b", 1, 1, &b), PERR_NONE);
	ck_assert_int_eq(engine_create(e2, "c", 1, 1, &s), PERR_LIMIT);
	ck_assert_ptr_null(s);
	ck_assert_ptr_null(engine_find(e2, "c", 1));
	ck_assert_uint_eq(nrecs, 2);

	/* At the limit, existing names still answer as before. */
	ck_assert_int_eq(engine_create(e2, "a", 1, 1, &s), PERR_NONE);
	ck_assert_ptr_eq(s, a);
	ck_assert_int_eq(engine_create(e2, "a", 1, 2, &s), PERR_EXISTS);

	/* A DELETE makes room again. */
	ck_assert_int_eq(engine_delete(e2, b), PERR_NONE);
	ck_assert_int_eq(engine_create(e2, "c", 1, 1, &s), PERR_NONE);
	ck_assert_ptr_nonnull(engine_find(e2, "c", 1));
	engine_free(e2);
}
END_TEST

START_TEST(test_sems_order)
{
	const char	*want[] = { "c", "b", "a" };
	struct sem	*s;
	size_t		 i = 0;

	mksem("c", 1);
	s = mksem("a", 1);
	mksem("b", 1);
	ck_assert_int_eq(engine_delete(eng, s), PERR_NONE);
	mksem("a", 1);
	for (s = engine_sem_first(eng); s != NULL;
	    s = engine_sem_next(s)) {
		ck_assert_uint_lt(i, 3);
		ck_assert_str_eq(s->name, want[i]);
		i++;
	}
	ck_assert_uint_eq(i, 3);
	ck_assert_uint_eq(stats().sems, 3);
}
END_TEST

START_TEST(test_delete_busy)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	uint64_t	 t;

	t = take(s, o1, 1, -1);
	ck_assert_int_eq(engine_delete(eng, s), PERR_BUSY);

	/* Waiters alone keep it busy too: capacity 0 holds one queued. */
	wait_for(s, o2, 1, -1, -1, A);
	engine_resize(eng, s, 0);
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	ck_assert_uint_eq(s->nholders, 0);
	ck_assert_uint_eq(s->nwaiters, 1);
	ck_assert_int_eq(engine_delete(eng, s), PERR_BUSY);
	ck_assert_ptr_eq(engine_find(eng, "s", 1), s);

	drop_owner(o2);
	nrecs = 0;
	ck_assert_int_eq(engine_delete(eng, s), PERR_NONE);
	ck_assert_uint_eq(nrecs, 1);
	ck_assert_int_eq(recs[0].type, ENGINE_EV_SEM_DELETED);
	ck_assert_ptr_null(engine_find(eng, "s", 1));
	ck_assert_uint_eq(stats().sems, 0);
}
END_TEST

START_TEST(test_tokens_across_delete)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o = owner(1);
	uint64_t	 t1, t2;

	ck_assert_uint_eq(engine_last_token(eng), 0);
	t1 = take(s, o, 1, -1);
	ck_assert_uint_eq(t1, 1);
	ck_assert_int_eq(engine_release(eng, s, t1, o), PERR_NONE);
	ck_assert_int_eq(engine_delete(eng, s), PERR_NONE);

	s = mksem("s", 1);
	t2 = take(s, o, 1, -1);
	ck_assert_uint_gt(t2, t1);
	ck_assert_int_eq(engine_release(eng, s, t2, o), PERR_NONE);

	engine_raise_token_floor(eng, 100);
	ck_assert_uint_eq(take(s, o, 1, 0), 101);
	engine_raise_token_floor(eng, 50);		/* never lowers */
	fake_advance(0);
	ck_assert_uint_eq(take(s, o, 1, -1), 102);
	ck_assert_uint_eq(engine_last_token(eng), 102);
}
END_TEST

/* --- ACQUIRE and the FIFO --- */

START_TEST(test_grant_immediate)
{
	struct sem	*s = mksem("s", 3);
	struct owner	*o = owner(1);
	struct grant	*g;
	uint64_t	 t1, t2;

	nrecs = 0;
	t1 = take(s, o, 1, -1);
	t2 = take(s, o, 2, -1);
	ck_assert_uint_eq(t1, 1);
	ck_assert_uint_eq(t2, 2);
	ck_assert_uint_eq(s->used, 3);
	ck_assert_uint_eq(s->nholders, 2);

	g = engine_find_grant(eng, s, t1);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, GRANT_CONN);
	ck_assert_ptr_eq(g->owner, o);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), -1);
	ck_assert_uint_eq(g->granted_ms, 1000);
	ck_assert_ptr_eq(s->grants, g);			/* grant order */
	ck_assert_uint_eq(s->grants->sem_next->token, t2);
	ck_assert_ptr_eq(o->grants, g);

	/* Immediate grants are announced with no cookie. */
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_GRANTED, NULL, 0);
	ck_assert_uint_eq(recs[0].token, t1);
	expect(1, ENGINE_EV_GRANTED, NULL, 0);

	/* Full: the next one queues. */
	wait_for(s, o, 1, -1, -1, A);
	ck_assert_uint_eq(s->nwaiters, 1);
	ck_assert_ptr_eq(o->waiters, s->queue);
}
END_TEST

START_TEST(test_range)
{
	struct sem		*s = mksem("s", 3);
	struct owner		*o = owner(1);
	enum acquire_status	 st;
	struct grant		*g = (struct grant *)1;

	nrecs = 0;
	ck_assert_int_eq(engine_acquire(eng, s, o, 4, -1, -1, A, &st, &g),
	    PERR_RANGE);
	ck_assert_ptr_null(g);
	ck_assert_int_eq(engine_acquire(eng, s, o, 4, 0, 100, A, &st, &g),
	    PERR_RANGE);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_uint_eq(s->nwaiters, 0);
	ck_assert_ptr_null(o->waiters);
	ck_assert_uint_eq(fake_ntimers, 0);
	ck_assert_uint_eq(engine_last_token(eng), 0);
	ck_assert_uint_eq(stats().timeouts_total, 0);

	/* n == capacity is fine. */
	ck_assert_uint_eq(take(s, o, 3, -1), 1);
}
END_TEST

START_TEST(test_try)
{
	struct sem	*s = mksem("s", 2);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	uint64_t	 t;

	t = take(s, o1, 2, -1);
	nrecs = 0;
	ck_assert_int_eq(try_acquire(s, o2, 1), ACQUIRE_TIMEOUT);
	ck_assert_uint_eq(stats().timeouts_total, 1);
	ck_assert_uint_eq(s->nwaiters, 0);
	ck_assert_uint_eq(fake_ntimers, 0);
	ck_assert_uint_eq(nrecs, 0);

	/* One unit is free, but a waiter is queued: FIFO says TIMEOUT. */
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	take(s, o1, 1, -1);
	wait_for(s, o1, 2, -1, -1, A);
	ck_assert_int_eq(try_acquire(s, o2, 1), ACQUIRE_TIMEOUT);
	ck_assert_uint_eq(stats().timeouts_total, 2);
	ck_assert_uint_eq(s->used, 1);

	/* With nobody queued and room, TRY is granted. */
	drop_owner(o1);
	ck_assert_int_eq(try_acquire(s, o2, 2), ACQUIRE_GRANTED);
	ck_assert_uint_eq(s->used, 2);
}
END_TEST

/* Go's Weighted: a big head blocks smaller waiters until it leaves. */
START_TEST(test_head_of_line)
{
	struct sem	*s = mksem("s", 10);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3);
	uint64_t	 t;

	t = take(s, o1, 5, -1);
	wait_for(s, o2, 10, 100, -1, A);
	wait_for(s, o3, 1, -1, -1, B);		/* 5 are free, yet it waits */
	ck_assert_uint_eq(s->nwaiters, 2);
	ck_assert_uint_eq(s->used, 5);

	nrecs = 0;
	fake_advance(99);
	ck_assert_uint_eq(nrecs, 0);
	fake_advance(1);
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_WAIT_TIMEOUT, A, 0);
	expect(1, ENGINE_EV_GRANTED, B, 0);
	ck_assert_uint_eq(recs[1].at_ms, 1100);	/* at once */
	ck_assert_uint_eq(s->used, 6);
	ck_assert_uint_eq(s->nwaiters, 0);
	ck_assert_ptr_null(o2->waiters);
	ck_assert_uint_eq(stats().timeouts_total, 1);

	/* A timed-out waiter is never granted later. */
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	ck_assert_uint_eq(nrecs, 3);
	expect(2, ENGINE_EV_RELEASED, NULL, RELEASE_BY_HOLDER);
}
END_TEST

START_TEST(test_fifo_order)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o[4] = { owner(1), owner(2), owner(3), owner(4) };
	void		*want[3] = { A, B, C };
	uint64_t	 t;
	size_t		 i;

	t = take(s, o[0], 1, -1);
	for (i = 0; i < 3; i++)
		wait_for(s, o[i + 1], 1, -1, -1, want[i]);
	ck_assert_ptr_eq(s->queue->cookie, A);

	for (i = 0; i < 3; i++) {
		nrecs = 0;
		ck_assert_int_eq(engine_release(eng, s, t, o[i]), PERR_NONE);
		ck_assert_uint_eq(nrecs, 2);
		expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_BY_HOLDER);
		expect(1, ENGINE_EV_GRANTED, want[i], 0);
		ck_assert_uint_gt(recs[1].token, t);
		t = recs[1].token;
		ck_assert_ptr_eq(engine_find_grant(eng, s, t)->owner,
		    o[i + 1]);
		ck_assert_uint_eq(s->nwaiters, 2 - i);
	}
}
END_TEST

START_TEST(test_wake_several)
{
	struct sem	*s = mksem("s", 10);
	struct owner	*o0 = owner(1), *o1 = owner(2);
	uint64_t	 t;

	t = take(s, o0, 10, -1);
	wait_for(s, o1, 3, -1, -1, A);
	wait_for(s, o1, 3, 500, -1, B);
	wait_for(s, o1, 4, -1, 50, C);
	wait_for(s, o1, 1, 500, -1, D);

	nrecs = 0;
	ck_assert_int_eq(engine_release(eng, s, t, o0), PERR_NONE);
	ck_assert_uint_eq(nrecs, 4);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_BY_HOLDER);
	expect(1, ENGINE_EV_GRANTED, A, 0);
	expect(2, ENGINE_EV_GRANTED, B, 0);
	expect(3, ENGINE_EV_GRANTED, C, 0);
	ck_assert_uint_eq(recs[3].n, 4);
	ck_assert_uint_eq(s->used, 10);
	ck_assert_uint_eq(s->nwaiters, 1);
	ck_assert_ptr_eq(s->queue->cookie, D);
	ck_assert_uint_eq(stats().grants_total, 4);

	/* B's timer went with it; D's and C's lease timer remain. */
	ck_assert_uint_eq(fake_ntimers, 2);
	fake_advance(50);		/* C's lease ends: D (1) fits */
	ck_assert_uint_eq(nrecs, 6);
	expect(4, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	expect(5, ENGINE_EV_GRANTED, D, 0);
	ck_assert_uint_eq(s->used, 7);
	ck_assert_uint_eq(fake_ntimers, 0);
}
END_TEST

START_TEST(test_waiter_timers)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3);
	uint64_t	 t;

	/* TIMEOUT -1 arms nothing and waits for ever. */
	t = take(s, o1, 1, -1);
	wait_for(s, o2, 1, -1, -1, A);
	ck_assert_uint_eq(fake_ntimers, 0);
	nrecs = 0;
	fake_advance(1000000000);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_uint_eq(s->nwaiters, 1);
	ck_assert_uint_eq(engine_waited_ms(eng, s->queue), 1000000000);

	/* A waiter granted before its timeout never times out. */
	wait_for(s, o3, 1, 100, -1, B);
	ck_assert_uint_eq(fake_ntimers, 1);
	ck_assert_uint_eq(engine_waited_ms(eng, s->queue->q_next), 0);
	fake_advance(50);
	ck_assert_uint_eq(engine_waited_ms(eng, s->queue->q_next), 50);
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	t = recs[nrecs - 1].token;
	ck_assert_int_eq(engine_release(eng, s, t, o2), PERR_NONE);
	expect(nrecs - 1, ENGINE_EV_GRANTED, B, 0);
	ck_assert_uint_eq(fake_ntimers, 0);
	nrecs = 0;
	fake_advance(100);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_uint_eq(stats().timeouts_total, 0);
}
END_TEST

/* A fired callback's own timers fire within the same fake_advance(). */
START_TEST(test_timer_chain)
{
	struct sem	*s = mksem("s", 10);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3);

	take(s, o1, 5, -1);
	wait_for(s, o2, 10, 100, -1, A);
	wait_for(s, o3, 1, -1, 10, B);
	nrecs = 0;
	fake_advance(200);
	ck_assert_uint_eq(nrecs, 3);
	expect(0, ENGINE_EV_WAIT_TIMEOUT, A, 0);
	ck_assert_uint_eq(recs[0].at_ms, 1100);
	expect(1, ENGINE_EV_GRANTED, B, 0);
	expect(2, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	ck_assert_uint_eq(recs[2].at_ms, 1110);
	ck_assert_uint_eq(s->used, 5);
}
END_TEST

/* --- RESIZE --- */

START_TEST(test_resize_up)
{
	struct sem	*s = mksem("s", 5);
	struct owner	*o = owner(1);

	take(s, o, 5, -1);
	wait_for(s, o, 3, -1, -1, A);
	wait_for(s, o, 4, -1, -1, B);
	wait_for(s, o, 5, -1, -1, C);
	nrecs = 0;
	engine_resize(eng, s, 12);
	ck_assert_uint_eq(s->capacity, 12);
	ck_assert_uint_eq(nrecs, 3);
	expect(0, ENGINE_EV_SEM_RESIZED, NULL, 0);
	expect(1, ENGINE_EV_GRANTED, A, 0);
	expect(2, ENGINE_EV_GRANTED, B, 0);
	ck_assert_uint_eq(s->used, 12);
	ck_assert_ptr_eq(s->queue->cookie, C);
}
END_TEST

START_TEST(test_resize_down)
{
	struct sem	*s = mksem("s", 10);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	uint64_t	 t1, t2;

	t1 = take(s, o1, 3, -1);
	t2 = take(s, o1, 3, -1);
	nrecs = 0;
	engine_resize(eng, s, 4);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_SEM_RESIZED, NULL, 0);
	ck_assert_uint_eq(s->used, 6);		/* nothing revoked */
	ck_assert_ptr_nonnull(engine_find_grant(eng, s, t1));
	ck_assert_ptr_nonnull(engine_find_grant(eng, s, t2));

	/* New grants wait until used + n <= capacity. */
	ck_assert_int_eq(try_acquire(s, o2, 1), ACQUIRE_TIMEOUT);
	wait_for(s, o2, 1, -1, -1, A);
	ck_assert_int_eq(engine_release(eng, s, t1, o1), PERR_NONE);
	expect(nrecs - 1, ENGINE_EV_GRANTED, A, 0);
	ck_assert_uint_eq(s->used, 4);

	/* Capacity 0 admits nobody: any n is out of range. */
	engine_resize(eng, s, 0);
	ck_assert_int_eq(engine_acquire(eng, s, o2, 1, -1, -1, B,
	    &(enum acquire_status){ 0 }, &(struct grant *){ NULL }),
	    PERR_RANGE);
	ck_assert_uint_eq(s->used, 4);
}
END_TEST

/* --- RELEASE, REFRESH, ATTACH, REVOKE errors --- */

START_TEST(test_notowner)
{
	struct sem	*s = mksem("s", 3);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	uint64_t	 t, l1, l2;

	t = take(s, o1, 1, -1);
	l1 = take(s, o1, 1, 1000);
	l2 = take(s, o1, 1, 1000);
	nrecs = 0;
	ck_assert_int_eq(engine_release(eng, s, t, o2), PERR_NOTOWNER);
	ck_assert_int_eq(engine_release(eng, s, t, NULL), PERR_NOTOWNER);
	ck_assert_int_eq(engine_attach(eng, s, t, o2), PERR_NOTOWNER);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_ptr_eq(engine_find_grant(eng, s, t)->owner, o1);

	/* A lease belongs to whoever has the token. */
	ck_assert_int_eq(engine_release(eng, s, l1, o2), PERR_NONE);
	ck_assert_int_eq(engine_release(eng, s, l2, NULL), PERR_NONE);
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	ck_assert_uint_eq(s->used, 0);
	ck_assert_uint_eq(fake_ntimers, 0);
}
END_TEST

START_TEST(test_notlease)
{
	struct sem	*s = mksem("s", 2);
	struct owner	*o = owner(1);
	struct grant	*g;
	uint64_t	 t, l;

	t = take(s, o, 1, -1);
	l = take(s, o, 1, 500);
	nrecs = 0;
	ck_assert_int_eq(engine_refresh(eng, s, t, 100), PERR_NOTLEASE);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, engine_find_grant(eng, s,
	    t)), -1);

	/* A lease is bound to nobody: there is nothing to ATTACH. */
	ck_assert_int_eq(engine_attach(eng, s, l, o), PERR_NOTLEASE);
	g = engine_find_grant(eng, s, l);
	ck_assert_int_eq(g->kind, GRANT_LEASE);
	ck_assert_ptr_null(g->owner);
	ck_assert(!on_list(o->grants, g, 1));
	ck_assert_uint_eq(nrecs, 0);
}
END_TEST

START_TEST(test_notheld)
{
	struct sem	*s = mksem("s", 2), *s2 = mksem("s2", 2);
	struct owner	*o = owner(1);
	uint64_t	 t, other, l;

	/* After RELEASE. */
	t = take(s, o, 1, -1);
	ck_assert_int_eq(engine_release(eng, s, t, o), PERR_NONE);
	ck_assert_ptr_null(engine_find_grant(eng, s, t));
	ck_assert_int_eq(engine_release(eng, s, t, o), PERR_NOTHELD);
	ck_assert_int_eq(engine_refresh(eng, s, t, 10), PERR_NOTHELD);
	ck_assert_int_eq(engine_attach(eng, s, t, o), PERR_NOTHELD);
	ck_assert_int_eq(engine_revoke(eng, s, t), PERR_NOTHELD);

	/* Never granted. */
	ck_assert_int_eq(engine_release(eng, s, 999, o), PERR_NOTHELD);

	/* A token of another semaphore is not held here. */
	other = take(s2, o, 1, 100);
	nrecs = 0;
	ck_assert_ptr_null(engine_find_grant(eng, s, other));
	ck_assert_int_eq(engine_release(eng, s, other, o), PERR_NOTHELD);
	ck_assert_int_eq(engine_refresh(eng, s, other, 10), PERR_NOTHELD);
	ck_assert_int_eq(engine_attach(eng, s, other, o), PERR_NOTHELD);
	ck_assert_int_eq(engine_revoke(eng, s, other), PERR_NOTHELD);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_ptr_nonnull(engine_find_grant(eng, s2, other));
	ck_assert_uint_eq(s2->used, 1);

	/* After its lease ran out. */
	l = take(s, o, 2, 50);
	fake_advance(50);
	ck_assert_ptr_null(engine_find_grant(eng, s, l));
	ck_assert_int_eq(engine_release(eng, s, l, o), PERR_NOTHELD);
	ck_assert_int_eq(engine_refresh(eng, s, l, 10), PERR_NOTHELD);
	ck_assert_uint_eq(s->used, 0);
}
END_TEST

START_TEST(test_revoke)
{
	struct sem	*s = mksem("s", 2);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	uint64_t	 t, l;

	t = take(s, o1, 1, -1);
	l = take(s, o1, 1, 1000);
	wait_for(s, o2, 1, -1, -1, A);
	nrecs = 0;
	ck_assert_int_eq(engine_revoke(eng, s, t), PERR_NONE);
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_REVOKED);
	ck_assert_uint_eq(recs[0].token, t);
	expect(1, ENGINE_EV_GRANTED, A, 0);
	ck_assert_ptr_null(o1->grants);
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NOTHELD);

	/* Revoking a lease cancels its expiry. */
	ck_assert_int_eq(engine_revoke(eng, s, l), PERR_NONE);
	ck_assert_uint_eq(fake_ntimers, 0);
	ck_assert_uint_eq(stats().revoked_total, 2);
	ck_assert_uint_eq(stats().releases_total, 2);
}
END_TEST

/* --- holding grants while the store is down, undoing a grant --- */

/* Per-semaphore stats: grants, releases by reason, timeouts, histograms. */
START_TEST(test_sem_stats)
{
	struct sem		*s = mksem("s", 1);
	struct owner		*o1 = owner(1), *o2 = owner(2);
	const struct sem_stats	*st = &s->stats;
	uint64_t		 t;

	t = take(s, o1, 1, -1);			/* waits 0 ms */
	wait_for(s, o2, 1, -1, -1, A);
	fake_advance(300);			/* o2 waits 300 ms */
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	ck_assert_uint_eq(st->grants_total, 2);
	ck_assert_uint_eq(st->releases_total[RELEASE_BY_HOLDER], 1);
	ck_assert_uint_eq(st->wait.count, 2);
	ck_assert_uint_eq(st->wait.sum_ms, 300);
	ck_assert_uint_eq(st->wait.counts[0], 1);	/* 0 ms: le 100 us */
	ck_assert_uint_eq(st->wait.counts[11], 1);	/* 300 ms: le 0.5 s */
	ck_assert_uint_eq(st->hold.count, 1);
	ck_assert_uint_eq(st->hold.sum_ms, 300);
	/* The release handed its unit over at once. */
	ck_assert_uint_eq(st->handoff.count, 1);
	ck_assert_uint_eq(st->handoff.sum_ms, 0);
	ck_assert_uint_eq(histo_quantile_ms(&st->wait, 0.5), 0);
	ck_assert_uint_ge(histo_quantile_ms(&st->wait, 0.99), 250);
	ck_assert_uint_le(histo_quantile_ms(&st->wait, 0.99), 500);

	/* A TRY that cannot be granted and a waiter that gives up. */
	ck_assert_int_eq(try_acquire(s, o1, 1), ACQUIRE_TIMEOUT);
	wait_for(s, o1, 1, 50, -1, B);
	fake_advance(60);
	ck_assert_uint_eq(st->timeouts_total, 2);
	ck_assert_uint_eq(st->grants_total, 2);
	ck_assert_uint_eq(st->wait.count, 2);

	/* A hand-off delayed by a hold counts from the release. */
	wait_for(s, o1, 1, -1, -1, C);
	engine_hold_grants(eng, 1);
	fake_advance(100);
	t = engine_last_token(eng);
	ck_assert_int_eq(engine_release(eng, s, t, o2), PERR_NONE);
	fake_advance(2000);
	engine_hold_grants(eng, 0);
	ck_assert_uint_eq(st->handoff.count, 2);
	ck_assert_uint_eq(st->handoff.sum_ms, 2000);
	ck_assert_uint_eq(st->hold.sum_ms, 300 + 60 + 100);
	ck_assert_uint_eq(st->wait.sum_ms, 300 + 2100);

	/* The connection closes: its grant ends for that reason. */
	engine_owner_free(eng, o1);
	owners[1] = NULL;
	ck_assert_uint_eq(st->releases_total[RELEASE_CLOSED], 1);
	ck_assert_str_eq(engine_release_reason_name(RELEASE_CLOSED), "closed");
	ck_assert_str_eq(engine_release_reason_name(RELEASE_BY_HOLDER),
	    "released");
}
END_TEST

/* Bucket edges, the +Inf bucket and the quantile of an empty histogram. */
START_TEST(test_histo)
{
	struct histo	h, sum;

	memset(&h, 0, sizeof(h));
	memset(&sum, 0, sizeof(sum));
	ck_assert_uint_eq(histo_quantile_ms(&h, 0.99), 0);
	histo_observe(&h, 1);		/* 1 ms: le 0.001 exactly */
	histo_observe(&h, 2);		/* le 0.0025 */
	histo_observe(&h, 60000);	/* le 60 exactly */
	histo_observe(&h, 60001);	/* +Inf */
	ck_assert_uint_eq(h.counts[3], 1);
	ck_assert_uint_eq(h.counts[4], 1);
	ck_assert_uint_eq(h.counts[HISTO_NBOUNDS - 1], 1);
	ck_assert_uint_eq(h.counts[HISTO_NBOUNDS], 1);
	ck_assert_uint_eq(h.count, 4);
	ck_assert_uint_eq(h.sum_ms, 120004);
	ck_assert_uint_eq(histo_quantile_ms(&h, 1.0), 60000);
	ck_assert_uint_eq(histo_bound_us(0), 100);
	ck_assert_uint_eq(histo_bound_us(HISTO_NBOUNDS - 1), 60000000);
	histo_add(&sum, &h);
	histo_add(&sum, &h);
	ck_assert_uint_eq(sum.count, 8);
	ck_assert_uint_eq(sum.counts[HISTO_NBOUNDS], 2);
}
END_TEST

START_TEST(test_hold_grants)
{
	struct sem		*s = mksem("s", 2);
	struct owner		*o1 = owner(1), *o2 = owner(2);
	enum acquire_status	 st;
	struct grant		*g;
	uint64_t		 t;

	t = take(s, o1, 2, -1);
	wait_for(s, o2, 1, -1, -1, A);
	engine_hold_grants(eng, 1);
	nrecs = 0;

	/* Held: a new acquire is refused outright and nothing is queued. */
	ck_assert_int_eq(engine_acquire(eng, s, o2, 1, -1, -1, B, &st, &g),
	    PERR_UNAVAILABLE);
	ck_assert_ptr_null(g);
	ck_assert_uint_eq(s->nwaiters, 1);
	/* RANGE still comes first: it could never be granted anyway. */
	ck_assert_int_eq(engine_acquire(eng, s, o2, 3, -1, -1, B, &st, &g),
	    PERR_RANGE);

	/* A release takes effect, but the waiter stays queued. */
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_BY_HOLDER);
	ck_assert_uint_eq(s->used, 0);
	ck_assert_uint_eq(s->nwaiters, 1);
	engine_resize(eng, s, 5);
	ck_assert_uint_eq(s->nwaiters, 1);

	/* Lifting the hold serves the queue at once. */
	nrecs = 0;
	engine_hold_grants(eng, 0);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_GRANTED, A, 0);
	ck_assert_uint_eq(s->used, 1);
	ck_assert_uint_eq(s->nwaiters, 0);
}
END_TEST

START_TEST(test_undo_grant)
{
	struct sem	*s = mksem("s", 1), *s2 = mksem("t", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g;
	uint64_t	 t, l;

	t = take(s, o1, 1, -1);
	l = take(s2, o1, 1, 5000);
	wait_for(s, o2, 1, -1, -1, A);
	ck_assert_ptr_eq(engine_grant_by_token(eng, l)->sem, s2);
	ck_assert_ptr_null(engine_grant_by_token(eng, l + 100));

	/* The store failed: hold, then undo both grants. */
	engine_hold_grants(eng, 1);
	nrecs = 0;
	engine_undo_grant(eng, engine_grant_by_token(eng, t));
	engine_undo_grant(eng, engine_grant_by_token(eng, l));
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_UNDONE);
	expect(1, ENGINE_EV_RELEASED, NULL, RELEASE_UNDONE);
	ck_assert_ptr_null(o1->grants);
	ck_assert_uint_eq(fake_ntimers, 0);	/* the lease timer went too */
	ck_assert_uint_eq(stats().grants_total, 0);
	ck_assert_uint_eq(stats().releases_total, 0);
	ck_assert_uint_eq(s->nwaiters, 1);

	/* Tokens never go back, even over undone grants. */
	engine_hold_grants(eng, 0);
	g = engine_find_grant(eng, s, l + 1);
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_eq(g->owner, o2);
}
END_TEST

/* --- leases --- */

START_TEST(test_lease_expiry)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g;
	uint64_t	 l;

	l = take(s, o1, 1, 100);
	g = engine_find_grant(eng, s, l);
	ck_assert_int_eq(g->kind, GRANT_LEASE);
	ck_assert_str_eq(engine_kind_name(g->kind), "lease");
	ck_assert_ptr_null(g->owner);
	ck_assert_ptr_null(o1->grants);
	ck_assert_uint_eq(g->deadline_ms, 1100);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 100);
	wait_for(s, o2, 1, -1, -1, A);

	fake_advance(40);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 60);
	nrecs = 0;
	fake_advance(60);
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	ck_assert_uint_eq(recs[0].token, l);
	ck_assert_uint_eq(recs[0].at_ms, 1100);
	expect(1, ENGINE_EV_GRANTED, A, 0);
	ck_assert_uint_eq(stats().expired_total, 1);
	ck_assert_uint_eq(stats().releases_total, 1);
}
END_TEST

/*
 * A timer that fires early (libevent counts from a time it cached, the
 * clock truncates) must not end a lease early: it may end late, never
 * early.
 */
START_TEST(test_lease_never_early)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	uint64_t	 l;

	fake_early = 5;
	l = take(s, o1, 1, 100);
	wait_for(s, o2, 1, -1, -1, A);
	nrecs = 0;
	fake_advance(99);
	ck_assert_uint_eq(nrecs, 0);		/* fired at 1095: re-armed */
	ck_assert_uint_eq(fake_ntimers, 1);	/* the lease's, re-armed */
	ck_assert_ptr_nonnull(engine_find_grant(eng, s, l));
	fake_advance(1);
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	ck_assert_uint_eq(recs[0].at_ms, 1100);
	expect(1, ENGINE_EV_GRANTED, A, 0);
	fake_early = 0;
}
END_TEST

START_TEST(test_lease_refresh)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o = owner(1);
	struct grant	*g;
	uint64_t	 l;

	l = take(s, o, 1, 100);
	fake_advance(80);
	nrecs = 0;
	ck_assert_int_eq(engine_refresh(eng, s, l, 100), PERR_NONE);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_REFRESHED, NULL, 0);
	g = engine_find_grant(eng, s, l);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 100);
	ck_assert_uint_eq(fake_ntimers, 1);	/* the old timer is gone */

	fake_advance(99);				/* past the first deadline */
	ck_assert_ptr_eq(engine_find_grant(eng, s, l), g);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 1);
	fake_advance(1);
	ck_assert_ptr_null(engine_find_grant(eng, s, l));
	expect(1, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	ck_assert_uint_eq(recs[1].at_ms, 1180);
}
END_TEST

START_TEST(test_lease_zero)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o = owner(1);
	uint64_t	 l;

	/* LEASE 0 is granted, then ends on the next loop turn. */
	l = take(s, o, 1, 0);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, engine_find_grant(eng, s,
	    l)), 0);
	ck_assert_uint_eq(s->used, 1);
	nrecs = 0;
	fake_advance(0);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	ck_assert_int_eq(engine_release(eng, s, l, o), PERR_NOTHELD);

	/* REFRESH 0 likewise. */
	l = take(s, o, 1, 100);
	ck_assert_int_eq(engine_refresh(eng, s, l, 0), PERR_NONE);
	fake_advance(0);
	ck_assert_ptr_null(engine_find_grant(eng, s, l));
}
END_TEST

/* A queued lease starts when it is granted, not when it was asked for. */
START_TEST(test_lease_starts_at_grant)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g;
	uint64_t	 t;

	t = take(s, o1, 1, -1);
	wait_for(s, o2, 1, -1, 100, A);
	fake_advance(50);
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	expect(nrecs - 1, ENGINE_EV_GRANTED, A, 0);
	g = engine_find_grant(eng, s, recs[nrecs - 1].token);
	ck_assert_int_eq(g->kind, GRANT_LEASE);
	ck_assert_ptr_null(g->owner);
	ck_assert_uint_eq(g->granted_ms, 1050);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 100);
	fake_advance(99);
	ck_assert_ptr_eq(engine_find_grant(eng, s, g->token), g);
	fake_advance(1);
	ck_assert_uint_eq(s->used, 0);
	ck_assert_uint_eq(recs[nrecs - 1].at_ms, 1150);
}
END_TEST

/* --- owners (connections) going away --- */

START_TEST(test_owner_free)
{
	struct sem	*s = mksem("s", 10), *s2 = mksem("s2", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*lease;
	uint64_t	 t1, t2, l;

	t1 = take(s, o1, 4, -1);
	l = take(s, o1, 2, 5000);
	t2 = take(s2, o1, 1, -1);
	wait_for(s, o2, 8, 1000, -1, A);

	nrecs = 0;
	drop_owner(o1);
	ck_assert_uint_eq(nrecs, 3);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_CLOSED);
	ck_assert_uint_eq(recs[0].token, t1);
	expect(1, ENGINE_EV_GRANTED, A, 0);	/* 2 + 8 fit */
	expect(2, ENGINE_EV_RELEASED, NULL, RELEASE_CLOSED);
	ck_assert_uint_eq(recs[2].token, t2);

	/* The lease outlives its connection. */
	lease = engine_find_grant(eng, s, l);
	ck_assert_ptr_nonnull(lease);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, lease), 5000);
	ck_assert_uint_eq(s->used, 10);
	ck_assert_uint_eq(s2->used, 0);
	ck_assert_uint_eq(stats().releases_total, 2);
}
END_TEST

/* The head waiter's owner closes: the queue behind it moves at once. */
START_TEST(test_owner_free_head_waiter)
{
	struct sem	*s = mksem("s", 10);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3);

	take(s, o1, 5, -1);
	wait_for(s, o2, 10, 1000, -1, A);
	wait_for(s, o3, 1, -1, -1, B);
	ck_assert_uint_eq(fake_ntimers, 1);

	nrecs = 0;
	drop_owner(o2);
	ck_assert_uint_eq(nrecs, 1);		/* no event for A */
	expect(0, ENGINE_EV_GRANTED, B, 0);
	ck_assert_uint_eq(s->used, 6);
	ck_assert_uint_eq(s->nwaiters, 0);
	ck_assert_uint_eq(fake_ntimers, 0);
	ck_assert_uint_eq(stats().timeouts_total, 0);
	ck_assert_uint_eq(stats().waiters, 0);
	fake_advance(2000);
	ck_assert_uint_eq(nrecs, 1);
}
END_TEST

/* An owner queued behind its own grant is never granted while closing. */
START_TEST(test_owner_free_own_waiter)
{
	struct sem	*s = mksem("s", 10);
	struct owner	*o1 = owner(1), *o2 = owner(2);

	take(s, o1, 5, -1);
	wait_for(s, o1, 10, -1, -1, A);
	wait_for(s, o2, 6, -1, -1, B);

	nrecs = 0;
	drop_owner(o1);
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_CLOSED);
	expect(1, ENGINE_EV_GRANTED, B, 0);
	ck_assert_uint_eq(s->used, 6);
	ck_assert_uint_eq(s->nholders, 1);
	ck_assert_ptr_eq(s->grants->owner, o2);
}
END_TEST

/* --- restart: restored grants, ATTACH, reclaim --- */

START_TEST(test_restore_attach)
{
	struct sem	*s = mksem("s", 2), *s2 = mksem("s2", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g;

	nrecs = 0;
	g = engine_restore_grant(eng, s, 7, 2, GRANT_UNOWNED, 10000);
	ck_assert_ptr_nonnull(g);
	ck_assert_uint_eq(nrecs, 0);
	ck_assert_uint_eq(engine_last_token(eng), 7);
	ck_assert_str_eq(engine_kind_name(g->kind), "conn");
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 10000);
	ck_assert_uint_eq(s->used, 2);
	ck_assert_ptr_null(engine_restore_grant(eng, s, 7, 1, GRANT_LEASE,
	    10));

	/* Unowned: not refreshable, and nobody owns it yet. */
	ck_assert_int_eq(engine_refresh(eng, s, 7, 100), PERR_NOTLEASE);

	ck_assert_int_eq(engine_attach(eng, s, 7, o1), PERR_NONE);
	ck_assert_uint_eq(nrecs, 1);
	expect(0, ENGINE_EV_ATTACHED, NULL, 0);
	ck_assert_int_eq(g->kind, GRANT_CONN);
	ck_assert_ptr_eq(g->owner, o1);
	ck_assert_ptr_eq(o1->grants, g);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), -1);
	ck_assert_uint_eq(fake_ntimers, 0);	/* reclaim timer cancelled */
	fake_advance(20000);
	ck_assert_ptr_eq(engine_find_grant(eng, s, 7), g);

	ck_assert_int_eq(engine_attach(eng, s, 7, o1), PERR_NONE);
	ck_assert_uint_eq(nrecs, 1);		/* idempotent: no event */
	ck_assert_int_eq(engine_attach(eng, s, 7, o2), PERR_NOTOWNER);
	ck_assert_int_eq(engine_release(eng, s, 7, o2), PERR_NOTOWNER);

	/* Tokens go on above the restored one. */
	ck_assert_uint_eq(take(s2, o2, 1, -1), 8);

	/* Now bound, it goes with its owner. */
	drop_owner(o1);
	expect(nrecs - 1, ENGINE_EV_RELEASED, NULL, RELEASE_CLOSED);
	ck_assert_uint_eq(s->used, 0);
}
END_TEST

START_TEST(test_restore_unclaimed)
{
	struct sem	*s = mksem("s", 1);
	struct owner	*o1 = owner(1);
	struct grant	*g;

	ck_assert_ptr_nonnull(engine_restore_grant(eng, s, 3, 1,
	    GRANT_UNOWNED, 100));
	wait_for(s, o1, 1, -1, -1, A);
	nrecs = 0;
	fake_advance(100);
	ck_assert_uint_eq(nrecs, 2);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_UNCLAIMED);
	ck_assert_uint_eq(recs[0].token, 3);
	expect(1, ENGINE_EV_GRANTED, A, 0);
	ck_assert_uint_eq(recs[1].token, 4);
	ck_assert_uint_eq(stats().expired_total, 0);
	ck_assert_uint_eq(stats().releases_total, 1);

	/* Anyone may release an unowned grant; a restored lease refreshes. */
	engine_resize(eng, s, 5);
	ck_assert_ptr_nonnull(engine_restore_grant(eng, s, 2, 1,
	    GRANT_UNOWNED, 100));
	ck_assert_int_eq(engine_release(eng, s, 2, NULL), PERR_NONE);
	g = engine_restore_grant(eng, s, 10, 3, GRANT_LEASE, 50);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(engine_refresh(eng, s, 10, 500), PERR_NONE);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 500);
	ck_assert_uint_eq(s->used, 4);
	ck_assert_uint_eq(engine_last_token(eng), 10);
}
END_TEST

/* --- stats, freeing, misc --- */

START_TEST(test_stats)
{
	struct sem		*s = mksem("s", 2), *s2 = mksem("s2", 2);
	struct owner		*o1 = owner(1), *o2 = owner(2);
	struct engine_stats	 st;
	uint64_t		 t, l, r;

	t = take(s, o1, 1, -1);
	l = take(s, o1, 1, 10);
	r = take(s2, o1, 1, -1);
	ck_assert_int_eq(try_acquire(s, o2, 1), ACQUIRE_TIMEOUT);
	wait_for(s, o2, 2, 5, -1, A);		/* will time out */
	wait_for(s2, o2, 2, -1, -1, B);		/* stays queued */
	st = stats();
	ck_assert_uint_eq(st.sems, 2);
	ck_assert_uint_eq(st.grants, 3);
	ck_assert_uint_eq(st.waiters, 2);

	fake_advance(5);				/* A times out */
	fake_advance(5);				/* l expires */
	ck_assert_int_eq(engine_revoke(eng, s2, r), PERR_NONE); /* B in */
	ck_assert_int_eq(engine_release(eng, s, t, o1), PERR_NONE);
	st = stats();
	ck_assert_uint_eq(st.grants_total, 4);
	ck_assert_uint_eq(st.releases_total, 3);
	ck_assert_uint_eq(st.timeouts_total, 2);
	ck_assert_uint_eq(st.expired_total, 1);
	ck_assert_uint_eq(st.revoked_total, 1);
	ck_assert_uint_eq(st.grants, 1);
	ck_assert_uint_eq(st.waiters, 0);
	(void)l;
}
END_TEST

START_TEST(test_free_silent)
{
	struct engine	*e2;
	struct sem	*s;
	struct owner	*o;
	enum acquire_status st;
	struct grant	*g;

	/* No observer at all, and engine_free() cancels what is pending. */
	e2 = engine_new(&fake_clock, NULL, NULL, 0);
	ck_assert_int_eq(engine_create(e2, "s", 1, 2, &s), PERR_NONE);
	o = engine_owner_new(e2, 1);
	ck_assert_int_eq(engine_acquire(e2, s, o, 1, -1, 100, NULL, &st, &g),
	    PERR_NONE);
	ck_assert_int_eq(engine_acquire(e2, s, o, 1, -1, -1, NULL, &st, &g),
	    PERR_NONE);
	ck_assert_int_eq(engine_acquire(e2, s, o, 2, 50, -1, NULL, &st, &g),
	    PERR_NONE);
	ck_assert_int_eq(st, ACQUIRE_QUEUED);
	ck_assert_ptr_nonnull(engine_restore_grant(e2, s, 99, 1,
	    GRANT_UNOWNED, 100));
	ck_assert_uint_eq(fake_ntimers, 3);
	engine_owner_free(e2, o);
	ck_assert_uint_eq(fake_ntimers, 2);
	nrecs = 0;
	engine_free(e2);
	ck_assert_uint_eq(fake_ntimers, 0);
	ck_assert_uint_eq(nrecs, 0);
}
END_TEST

/* Opaque holder labels: copied, replaced, seen at release, freed. */
START_TEST(test_grant_holder)
{
	struct sem	*s = mksem("s", 3);
	struct owner	*o = owner(1);
	struct grant	*g, *g2, *g3;
	char		 name[] = "worker@web3", addr[] = "10.0.0.7:4121";
	uint64_t	 l;

	l = take(s, o, 1, 100);
	g = engine_find_grant(eng, s, l);
	ck_assert_ptr_null(g->holder_name);
	ck_assert_ptr_null(g->holder_addr);
	nrecs = 0;
	engine_grant_set_holder(g, name, addr);
	ck_assert_uint_eq(nrecs, 0);			/* no event */
	ck_assert_str_eq(g->holder_name, "worker@web3");
	ck_assert_str_eq(g->holder_addr, "10.0.0.7:4121");
	ck_assert_ptr_ne(g->holder_name, name);		/* a copy */
	name[0] = 'X';
	ck_assert_str_eq(g->holder_name, "worker@web3");

	engine_grant_set_holder(g, NULL, "unix");	/* replaced */
	ck_assert_ptr_null(g->holder_name);
	ck_assert_str_eq(g->holder_addr, "unix");
	engine_grant_set_holder(g, "w2", "1.2.3.4:5");

	fake_advance(100);
	expect(0, ENGINE_EV_RELEASED, NULL, RELEASE_EXPIRED);
	ck_assert_str_eq(recs[0].holder, "w2/1.2.3.4:5");

	/* Restored grants take labels too; engine_free frees them. */
	g2 = engine_restore_grant(eng, s, 50, 1, GRANT_LEASE, 1000);
	engine_grant_set_holder(g2, "old", "127.0.0.1:1");
	g3 = engine_find_grant(eng, s, take(s, o, 1, -1));
	engine_grant_set_holder(g3, "bound", NULL);
	ck_assert_int_eq(engine_revoke(eng, s, 50), PERR_NONE);
	expect(nrecs - 1, ENGINE_EV_RELEASED, NULL, RELEASE_REVOKED);
	ck_assert_str_eq(recs[nrecs - 1].holder, "old/127.0.0.1:1");
	g2 = engine_restore_grant(eng, s, 60, 1, GRANT_UNOWNED, 1000);
	engine_grant_set_holder(g2, "left", "held");
}
END_TEST

START_TEST(test_kind_name)
{
	ck_assert_str_eq(engine_kind_name(GRANT_CONN), "conn");
	ck_assert_str_eq(engine_kind_name(GRANT_LEASE), "lease");
	ck_assert_str_eq(engine_kind_name(GRANT_UNOWNED), "conn");
}
END_TEST

static Suite *
engine_suite(void)
{
	Suite	*su = suite_create("engine");
	TCase	*tc = tcase_create("engine");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_create);
	tcase_add_test(tc, test_create_limit);
	tcase_add_test(tc, test_sems_order);
	tcase_add_test(tc, test_delete_busy);
	tcase_add_test(tc, test_tokens_across_delete);
	tcase_add_test(tc, test_grant_immediate);
	tcase_add_test(tc, test_range);
	tcase_add_test(tc, test_try);
	tcase_add_test(tc, test_head_of_line);
	tcase_add_test(tc, test_fifo_order);
	tcase_add_test(tc, test_wake_several);
	tcase_add_test(tc, test_waiter_timers);
	tcase_add_test(tc, test_timer_chain);
	tcase_add_test(tc, test_resize_up);
	tcase_add_test(tc, test_resize_down);
	tcase_add_test(tc, test_notowner);
	tcase_add_test(tc, test_notlease);
	tcase_add_test(tc, test_notheld);
	tcase_add_test(tc, test_revoke);
	tcase_add_test(tc, test_hold_grants);
	tcase_add_test(tc, test_undo_grant);
	tcase_add_test(tc, test_lease_expiry);
	tcase_add_test(tc, test_lease_never_early);
	tcase_add_test(tc, test_lease_refresh);
	tcase_add_test(tc, test_lease_zero);
	tcase_add_test(tc, test_lease_starts_at_grant);
	tcase_add_test(tc, test_owner_free);
	tcase_add_test(tc, test_owner_free_head_waiter);
	tcase_add_test(tc, test_owner_free_own_waiter);
	tcase_add_test(tc, test_restore_attach);
	tcase_add_test(tc, test_restore_unclaimed);
	tcase_add_test(tc, test_stats);
	tcase_add_test(tc, test_free_silent);
	tcase_add_test(tc, test_grant_holder);
	tcase_add_test(tc, test_kind_name);
	tcase_add_test(tc, test_sem_stats);
	tcase_add_test(tc, test_histo);
	suite_add_tcase(su, tc);
	return (su);
}

int
main(void)
{
	SRunner	*sr = srunner_create(engine_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
