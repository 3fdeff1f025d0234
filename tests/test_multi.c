/*
 * test_multi.c: unit tests of the engine's grants of several semaphores
 * (ACQUIREALL) and of request IDs (daemon/engine.c; PROTOCOL 1.1
 * "Atomic acquire of several semaphores", "Idempotent lease acquire").
 *
 * Time is the fake clock of engine_fake.c. The observer checks, at every
 * event, that each part of a grant is where it must be (on its
 * semaphore's list, found by (sem, token), counted in used) and that a
 * waiter that is answered is on no queue. The last test runs thousands of
 * random steps against a small reference model of the rules, written
 * here, and compares every reply and every queue.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <utlist.h>

#include "engine.h"
#include "engine_fake.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

/* --- event recorder and invariant checks --- */

struct rec {
	enum engine_event_type	 type;
	void			*cookie;
	uint64_t		 token;
	uint32_t		 nparts;
	enum engine_release_reason reason;
};

#define NRECS	4096
static struct rec	 recs[NRECS];
static size_t		 nrecs;
static struct engine	*eng;
static struct sem	*all_sems[16];
static size_t		 nall_sems;

static int		 cookies[8];
#define A		(&cookies[0])
#define B		(&cookies[1])
#define C		(&cookies[2])
#define D		(&cookies[3])

static int
grant_on_list(const struct sem *s, const struct grant *g)
{
	const struct grant	*x;

	DL_FOREACH2(s->grants, x, sem_next)
		if (x == g)
			return (1);
	return (0);
}

/* Every semaphore's counters agree with its lists, and no answered waiter
 * is still queued. */
static void
check_all(void *answered)
{
	const struct waiter	*w;
	const char		*msg;
	size_t			 i;

	for (i = 0; i < nall_sems; i++) {
		msg = fake_check_sem(all_sems[i]);
		ck_assert_msg(msg == NULL, "%s: %s", all_sems[i]->name, msg);
		if (answered == NULL)
			continue;
		DL_FOREACH2(all_sems[i]->queue, w, q_next)
			ck_assert_ptr_ne(w->lead->cookie, answered);
	}
}

static void
on_event(void *ctx, const struct engine_event *ev)
{
	const struct grant	*g = ev->grant, *part;
	struct rec		*r;
	uint32_t		 k = 0;

	(void)ctx;
	ck_assert_uint_lt(nrecs, NRECS);
	r = &recs[nrecs++];
	r->type = ev->type;
	r->cookie = ev->cookie;
	r->reason = ev->reason;
	if (g != NULL) {
		ck_assert_ptr_eq(g->lead, g);		/* events carry leads */
		ck_assert_ptr_eq(ev->sem, g->sem);
		r->token = g->token;
		r->nparts = g->nparts;
	}
	switch (ev->type) {
	case ENGINE_EV_GRANTED:
	case ENGINE_EV_REFRESHED:
	case ENGINE_EV_ATTACHED:
		ck_assert_ptr_eq(engine_grant_by_token(eng, g->token), g);
		for (part = g; part != NULL; part = part->part_next, k++) {
			ck_assert_ptr_eq(part->lead, g);
			ck_assert_uint_eq(part->token, g->token);
			ck_assert_int_eq(part->kind, g->kind);
			ck_assert_ptr_eq(part->owner, g->owner);
			ck_assert_uint_eq(part->deadline_ms, g->deadline_ms);
			ck_assert_ptr_eq(engine_find_grant(eng, part->sem,
			    g->token), part);
			ck_assert(grant_on_list(part->sem, part));
		}
		ck_assert_uint_eq(k, g->nparts);
		break;
	case ENGINE_EV_RELEASED:
		ck_assert_ptr_null(engine_grant_by_token(eng, g->token));
		for (part = g; part != NULL; part = part->part_next) {
			ck_assert_ptr_null(engine_find_grant(eng, part->sem,
			    g->token));
			ck_assert(!grant_on_list(part->sem, part));
		}
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
	case ENGINE_EV_WAIT_REPLACED:
		ck_assert_ptr_nonnull(ev->cookie);
		ck_assert_ptr_null(g);
		break;
	default:
		break;
	}
	check_all(ev->type == ENGINE_EV_WAIT_REPLACED ? NULL : ev->cookie);
}

/* The last event with that cookie and type, or NULL. */
static const struct rec *
find_rec(enum engine_event_type type, void *cookie)
{
	size_t	i;

	for (i = nrecs; i > 0; i--)
		if (recs[i - 1].type == type && recs[i - 1].cookie == cookie)
			return (&recs[i - 1]);
	return (NULL);
}

/* --- fixture and helpers --- */

static struct owner	*owners[8];

static void
setup(void)
{
	fake_reset(1000);
	nrecs = 0;
	nall_sems = 0;
	memset(owners, 0, sizeof(owners));
	eng = engine_new(&fake_clock, on_event, NULL, 0);
}

static void
teardown(void)
{
	size_t	i;

	for (i = 0; i < nitems(owners); i++)
		if (owners[i] != NULL)
			engine_owner_free(eng, owners[i]);
	engine_free(eng);
	ck_assert_uint_eq(fake_ntimers, 0);
	eng = NULL;
}

static struct owner *
owner(uint64_t id)
{
	owners[id] = engine_owner_new(eng, id);
	return (owners[id]);
}

static struct sem *
mksem(const char *name, uint32_t capacity)
{
	struct sem	*s;

	ck_assert_int_eq(engine_create(eng, name, strlen(name), capacity, &s),
	    PERR_NONE);
	all_sems[nall_sems++] = s;
	return (s);
}

/* ACQUIREALL of (s1, n1), (s2, n2): the engine's status, or -err. */
static int
acq2(struct owner *o, struct sem *s1, uint32_t n1, struct sem *s2,
    uint32_t n2, int64_t timeout_ms, int64_t lease_ms, const char *id,
    void *cookie, struct grant **g)
{
	struct engine_part	parts[2] = { { s1, n1 }, { s2, n2 } };
	struct engine_request	r = { .owner = o, .parts = parts,
				    .nparts = s2 != NULL ? 2 : 1,
				    .timeout_ms = timeout_ms,
				    .lease_ms = lease_ms, .id = id,
				    .id_len = id != NULL ? strlen(id) : 0,
				    .cookie = cookie };
	enum acquire_status	st;
	struct grant		*dummy;
	enum proto_err		err;

	err = engine_acquire_req(eng, &r, &st, g != NULL ? g : &dummy);
	return (err != PERR_NONE ? -(int)err : (int)st);
}

/* The cookies of s's queue, in order, as a string of letters (A..). */
static const char *
queue_of(const struct sem *s)
{
	static char		 buf[32];
	const struct waiter	*w;
	size_t			 n = 0;

	DL_FOREACH2(s->queue, w, q_next)
		buf[n++] = (char)('A' + ((int *)w->lead->cookie - cookies));
	buf[n] = '\0';
	return (buf);
}

/* --- deadlock and FIFO across queues --- */

/* A then B against B then A: both granted in turn, never stuck. */
START_TEST(test_no_deadlock)
{
	struct sem	*a = mksem("a", 1), *b = mksem("b", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3);
	struct grant	*g1, *g2;
	int		 i;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(acq2(o1, a, 1, b, 1, -1, -1, NULL, A, &g1),
		    ACQUIRE_GRANTED);
		ck_assert_int_eq(acq2(o2, b, 1, a, 1, -1, -1, NULL, B, NULL),
		    ACQUIRE_QUEUED);
		ck_assert_int_eq(acq2(o3, a, 1, b, 1, -1, -1, NULL, C, NULL),
		    ACQUIRE_QUEUED);
		ck_assert_str_eq(queue_of(a), "BC");
		ck_assert_str_eq(queue_of(b), "BC");
		ck_assert_int_eq(engine_release(eng, b, g1->token, o1),
		    PERR_NONE);
		g2 = engine_grant_by_token(eng, find_rec(ENGINE_EV_GRANTED,
		    B)->token);
		ck_assert_ptr_eq(g2->owner, o2);
		ck_assert_uint_eq(a->used, 1);
		ck_assert_uint_eq(b->used, 1);
		ck_assert_str_eq(queue_of(a), "C");
		ck_assert_int_eq(engine_release(eng, a, g2->token, o2),
		    PERR_NONE);
		g1 = engine_grant_by_token(eng, find_rec(ENGINE_EV_GRANTED,
		    C)->token);
		ck_assert_ptr_eq(g1->owner, o3);
		ck_assert_int_eq(engine_release(eng, a, g1->token, o3),
		    PERR_NONE);
		ck_assert_uint_eq(a->used + b->used, 0);
	}
}
END_TEST

/*
 * Two singles hold a and b; ACQUIREALL a b and ACQUIREALL b a wait. The
 * older is at the head of both queues and is granted once both are
 * free; the younger after it.
 */
START_TEST(test_crossed_waiters)
{
	struct sem	*a = mksem("a", 1), *b = mksem("b", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3),
			*o4 = owner(4);
	struct grant	*ga, *gb;

	ck_assert_int_eq(acq2(o1, a, 1, NULL, 0, -1, -1, NULL, NULL, &ga),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, b, 1, NULL, 0, -1, -1, NULL, NULL, &gb),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o3, a, 1, b, 1, -1, -1, NULL, A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o4, b, 1, a, 1, -1, -1, NULL, B, NULL),
	    ACQUIRE_QUEUED);
	nrecs = 0;
	engine_release(eng, a, ga->token, o1);
	ck_assert_uint_eq(nrecs, 1);			/* A still needs b */
	ck_assert_uint_eq(a->used, 0);
	engine_release(eng, b, gb->token, o2);
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, A));
	ck_assert_ptr_null(find_rec(ENGINE_EV_GRANTED, B));
	engine_owner_free(eng, o3);
	owners[3] = NULL;
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, B));
	ck_assert_uint_eq(find_rec(ENGINE_EV_GRANTED, B)->nparts, 2);
}
END_TEST

/*
 * A multi-waiter at the head of a and second in b: it blocks a (a
 * single that fits waits behind it), and is granted once it reaches
 * b's head with room; the single behind it on a then too.
 */
START_TEST(test_head_of_one_second_in_other)
{
	struct sem	*a = mksem("a", 2), *b = mksem("b", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3),
			*o4 = owner(4);
	struct grant	*gx, *g;

	ck_assert_int_eq(acq2(o1, b, 1, NULL, 0, -1, -1, NULL, NULL, &gx),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, b, 1, NULL, 0, -1, -1, NULL, A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o3, a, 1, b, 1, -1, -1, NULL, B, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_str_eq(queue_of(a), "B");
	ck_assert_str_eq(queue_of(b), "AB");
	/* a has room, but B is at its head: a TRY fails, an ACQUIRE waits. */
	ck_assert_int_eq(acq2(o4, a, 1, NULL, 0, 0, -1, NULL, NULL, NULL),
	    ACQUIRE_TIMEOUT);
	ck_assert_int_eq(acq2(o4, a, 1, NULL, 0, -1, -1, NULL, C, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_str_eq(queue_of(a), "BC");
	engine_release(eng, b, gx->token, o1);
	/* A got b; B is at b's head now but b is full. */
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, A));
	ck_assert_ptr_null(find_rec(ENGINE_EV_GRANTED, B));
	ck_assert_str_eq(queue_of(b), "B");
	g = engine_grant_by_token(eng, find_rec(ENGINE_EV_GRANTED, A)->token);
	engine_release(eng, b, g->token, o2);
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, B));
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, C));
	ck_assert_uint_eq(a->used, 2);
	ck_assert_uint_eq(b->used, 1);
	ck_assert_ptr_null(a->queue);
	ck_assert_ptr_null(b->queue);
}
END_TEST

/* RESIZE of one semaphore grants a multi-waiter, whose grant lets the
 * waiter behind it on its other queue in. */
START_TEST(test_resize_serves_other_queues)
{
	struct sem	*a = mksem("a", 1), *b = mksem("b", 2);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3);

	ck_assert_int_eq(acq2(o1, a, 1, NULL, 0, -1, -1, NULL, NULL, NULL),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, a, 1, b, 1, -1, -1, NULL, A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o3, b, 1, NULL, 0, -1, -1, NULL, B, NULL),
	    ACQUIRE_QUEUED);			/* b has room: FIFO holds it */
	ck_assert_uint_eq(b->used, 0);
	engine_resize(eng, a, 2);
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, A));
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, B));
	ck_assert_uint_eq(a->used, 2);
	ck_assert_uint_eq(b->used, 2);
	/* Shrinking below used revokes nothing. */
	engine_resize(eng, b, 0);
	ck_assert_uint_eq(b->used, 2);
	ck_assert_int_eq(acq2(o3, a, 1, b, 1, -1, -1, NULL, C, NULL),
	    -(int)PERR_RANGE);
}
END_TEST

/* A multi-waiter that times out, or whose connection closes, lets in
 * the waiters behind it on each of its queues. */
START_TEST(test_leaving_serves_every_queue)
{
	struct sem	*a = mksem("a", 2), *b = mksem("b", 2);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3),
			*o4 = owner(4), *o5 = owner(5);

	ck_assert_int_eq(acq2(o1, a, 1, b, 1, -1, -1, NULL, NULL, NULL),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, a, 2, b, 2, 100, -1, NULL, A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o3, a, 1, NULL, 0, -1, -1, NULL, B, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o4, b, 1, NULL, 0, -1, -1, NULL, C, NULL),
	    ACQUIRE_QUEUED);
	fake_advance(99);
	ck_assert_ptr_null(find_rec(ENGINE_EV_WAIT_TIMEOUT, A));
	fake_advance(1);
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_WAIT_TIMEOUT, A));
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, B));
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, C));
	ck_assert_uint_eq(a->stats.timeouts_total, 1);
	ck_assert_uint_eq(b->stats.timeouts_total, 1);

	/* The same when its owner goes. */
	ck_assert_int_eq(acq2(o2, a, 1, b, 1, -1, -1, NULL, A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o5, a, 1, b, 1, -1, -1, NULL, D, NULL),
	    ACQUIRE_QUEUED);
	engine_owner_free(eng, o1);		/* its grant goes: A fits */
	owners[1] = NULL;
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, A));
	ck_assert_str_eq(queue_of(a), "D");
	engine_owner_free(eng, o2);		/* A's grant goes: D fits */
	owners[2] = NULL;
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, D));
	ck_assert_ptr_null(a->queue);
	ck_assert_ptr_null(b->queue);
	/* A waiter of o5 on both: freeing o5 empties both queues. */
	ck_assert_int_eq(acq2(o5, a, 2, b, 2, -1, -1, NULL, D, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_uint_eq(a->nwaiters + b->nwaiters, 2);
	engine_owner_free(eng, o5);
	owners[5] = NULL;
	ck_assert_uint_eq(a->nwaiters + b->nwaiters, 0);
}
END_TEST

/* --- the whole grant through any of its semaphores --- */

START_TEST(test_whole_grant_ops)
{
	struct sem	*a = mksem("a", 3), *b = mksem("b", 3), *c = mksem("c", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g, *pb;
	struct engine_stats st;

	ck_assert_int_eq(acq2(o1, a, 1, b, 2, -1, 1000, NULL, NULL, &g),
	    ACQUIRE_GRANTED);
	ck_assert_uint_eq(g->nparts, 2);
	pb = engine_find_grant(eng, b, g->token);
	ck_assert_ptr_nonnull(pb);
	ck_assert_uint_eq(pb->n, 2);			/* CHECK's n */
	ck_assert_ptr_eq(pb->lead, g);
	ck_assert_ptr_null(engine_find_grant(eng, c, g->token));
	ck_assert_int_eq(engine_refresh(eng, b, g->token, 5000), PERR_NONE);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, pb), 5000);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 5000);
	ck_assert_int_eq(engine_release(eng, c, g->token, o2), PERR_NOTHELD);
	/* A lease: anyone may release it, through either semaphore. */
	ck_assert_int_eq(engine_release(eng, b, g->token, o2), PERR_NONE);
	ck_assert_uint_eq(a->used + b->used, 0);
	ck_assert_uint_eq(a->nholders + b->nholders, 0);
	engine_get_stats(eng, &st);
	ck_assert_uint_eq(st.grants_total, 1);
	ck_assert_uint_eq(st.releases_total, 1);
	ck_assert_uint_eq(a->stats.grants_total, 1);
	ck_assert_uint_eq(b->stats.grants_total, 1);

	/* Bound: NOTOWNER for others, revoked whole, expired whole. */
	ck_assert_int_eq(acq2(o1, a, 1, b, 1, -1, -1, NULL, NULL, &g),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(engine_release(eng, b, g->token, o2), PERR_NOTOWNER);
	ck_assert_int_eq(engine_refresh(eng, a, g->token, 5), PERR_NOTLEASE);
	ck_assert_int_eq(engine_delete(eng, b), PERR_BUSY);
	ck_assert_int_eq(engine_revoke(eng, b, g->token), PERR_NONE);
	ck_assert_int_eq(recs[nrecs - 1].type, ENGINE_EV_RELEASED);
	ck_assert_int_eq(recs[nrecs - 1].reason, RELEASE_REVOKED);
	ck_assert_uint_eq(a->used + b->used, 0);
	ck_assert_int_eq(acq2(o1, a, 1, b, 1, -1, 50, NULL, NULL, &g),
	    ACQUIRE_GRANTED);
	fake_advance(50);
	ck_assert_int_eq(recs[nrecs - 1].reason, RELEASE_EXPIRED);
	ck_assert_uint_eq(a->used + b->used, 0);
	/* DELETE is BUSY while a multi-waiter waits there, too. */
	ck_assert_int_eq(acq2(o1, c, 1, NULL, 0, -1, -1, NULL, NULL, NULL),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, a, 1, c, 1, -1, -1, NULL, A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(engine_delete(eng, a), PERR_BUSY);
}
END_TEST

/* A restart restores a multi-grant part by part; ATTACH takes it whole. */
START_TEST(test_restore_parts)
{
	struct sem	*a = mksem("a", 1), *b = mksem("b", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g;

	g = engine_restore_grant(eng, a, 40, 1, GRANT_UNOWNED, 1000);
	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(engine_restore_part(eng, g, b, 1));
	ck_assert_ptr_null(engine_restore_part(eng, g, b, 1));	/* twice */
	ck_assert_uint_eq(g->nparts, 2);
	ck_assert_uint_eq(b->used, 1);
	ck_assert_int_eq(engine_attach(eng, b, 40, o1), PERR_NONE);
	ck_assert_int_eq(engine_find_grant(eng, a, 40)->kind, GRANT_CONN);
	ck_assert_ptr_eq(engine_find_grant(eng, a, 40)->owner, o1);
	ck_assert_int_eq(engine_attach(eng, a, 40, o2), PERR_NOTOWNER);
	fake_advance(2000);			/* attached: no reclaim */
	ck_assert_uint_eq(a->used + b->used, 2);
	engine_owner_free(eng, o1);
	owners[1] = NULL;
	ck_assert_uint_eq(a->used + b->used, 0);
	ck_assert_uint_gt(engine_last_token(eng), 39);

	/* Unclaimed: released whole when the grace runs out. */
	g = engine_restore_grant(eng, a, 41, 1, GRANT_UNOWNED, 10);
	engine_restore_part(eng, g, b, 1);
	fake_advance(10);
	ck_assert_int_eq(recs[nrecs - 1].reason, RELEASE_UNCLAIMED);
	ck_assert_uint_eq(a->used + b->used, 0);
}
END_TEST

/* --- request IDs --- */

START_TEST(test_id_repeat)
{
	struct sem	*a = mksem("a", 3), *b = mksem("b", 3);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g, *g2;
	uint64_t	 t;
	size_t		 n;

	ck_assert_int_eq(acq2(o1, a, 2, NULL, 0, -1, 1000, "r1", NULL, &g),
	    ACQUIRE_GRANTED);
	n = nrecs;
	/* Same id, same n, another connection: the same token, nothing new. */
	ck_assert_int_eq(acq2(o2, a, 2, NULL, 0, 0, 9, "r1", NULL, &g2),
	    ACQUIRE_REPEATED);
	ck_assert_ptr_eq(g2, g);
	ck_assert_uint_eq(nrecs, n);
	ck_assert_uint_eq(a->used, 2);
	ck_assert_int_eq(engine_grant_ttl_ms(eng, g), 1000);	/* unchanged */
	/* Another n, or other semaphores: EXISTS. */
	ck_assert_int_eq(acq2(o2, a, 1, NULL, 0, -1, 9, "r1", NULL, NULL),
	    -(int)PERR_EXISTS);
	ck_assert_int_eq(acq2(o2, a, 2, b, 1, -1, 9, "r1", NULL, NULL),
	    -(int)PERR_EXISTS);
	/* Case-sensitive, and scoped to the semaphore. */
	ck_assert_int_eq(acq2(o2, a, 1, NULL, 0, -1, 9, "R1", NULL, NULL),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, b, 1, NULL, 0, -1, 9, "r1", NULL, NULL),
	    ACQUIRE_GRANTED);
	/* Once released, the id is free again: a new grant. */
	t = g->token;
	engine_release(eng, a, t, NULL);
	ck_assert_int_eq(acq2(o2, a, 2, NULL, 0, -1, 9, "r1", NULL, &g2),
	    ACQUIRE_GRANTED);
	ck_assert_uint_gt(g2->token, t);
}
END_TEST

START_TEST(test_id_multi)
{
	struct sem	*a = mksem("a", 3), *b = mksem("b", 3), *c = mksem("c", 3);
	struct owner	*o1 = owner(1), *o2 = owner(2);
	struct grant	*g, *g2;

	ck_assert_int_eq(acq2(o1, a, 1, b, 2, -1, 1000, "job", NULL, &g),
	    ACQUIRE_GRANTED);
	/* Any order of the same parts. */
	ck_assert_int_eq(acq2(o2, b, 2, a, 1, -1, 1000, "job", NULL, &g2),
	    ACQUIRE_REPEATED);
	ck_assert_ptr_eq(g2, g);
	ck_assert_int_eq(acq2(o2, b, 1, a, 1, -1, 1000, "job", NULL, NULL),
	    -(int)PERR_EXISTS);
	ck_assert_int_eq(acq2(o2, a, 1, c, 2, -1, 1000, "job", NULL, NULL),
	    -(int)PERR_EXISTS);
	ck_assert_int_eq(acq2(o2, b, 2, NULL, 0, -1, 1000, "job", NULL, NULL),
	    -(int)PERR_EXISTS);
	/* c knows nothing of it. */
	ck_assert_int_eq(acq2(o2, c, 2, NULL, 0, -1, 1000, "job", NULL, NULL),
	    ACQUIRE_GRANTED);
	ck_assert_uint_eq(a->used, 1);
	ck_assert_uint_eq(b->used, 2);
	/* The id goes with the grant, from every semaphore. */
	engine_revoke(eng, a, g->token);
	ck_assert_ptr_null(a->grant_ids);
	ck_assert_ptr_null(b->grant_ids);
	/* Restored ids: set once; refused when held there already. */
	g = engine_restore_grant(eng, a, 500, 1, GRANT_LEASE, 1000);
	engine_restore_part(eng, g, b, 1);
	ck_assert_int_eq(engine_grant_set_id(eng, g, "r", 1), 0);
	ck_assert_int_eq(acq2(o2, b, 1, a, 1, -1, 5, "r", NULL, &g2),
	    ACQUIRE_REPEATED);
	ck_assert_uint_eq(g2->token, 500);
	g2 = engine_restore_grant(eng, b, 501, 1, GRANT_LEASE, 1000);
	ck_assert_int_eq(engine_grant_set_id(eng, g2, "r", 1), -1);
	ck_assert_ptr_null(g2->id);
}
END_TEST

/*
 * A retry whose id names a waiting request takes its place in every
 * queue; the old one hears WAIT_REPLACED. With another n: EXISTS, and the
 * old one waits on.
 */
START_TEST(test_id_takeover)
{
	struct sem	*a = mksem("a", 1), *b = mksem("b", 1);
	struct owner	*o1 = owner(1), *o2 = owner(2), *o3 = owner(3),
			*o4 = owner(4);
	struct grant	*g;

	ck_assert_int_eq(acq2(o1, a, 1, b, 1, -1, -1, NULL, NULL, &g),
	    ACQUIRE_GRANTED);
	ck_assert_int_eq(acq2(o2, a, 1, b, 1, 500, 100, "x", A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o3, b, 1, NULL, 0, -1, -1, NULL, B, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_int_eq(acq2(o4, a, 1, b, 1, -1, 100, "x", C, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_WAIT_REPLACED, A));
	ck_assert_str_eq(queue_of(a), "C");
	ck_assert_str_eq(queue_of(b), "CB");	/* C kept A's place */
	ck_assert_ptr_null(o2->waiters);
	ck_assert_ptr_eq(o4->waiters->cookie, C);
	ck_assert_int_eq(acq2(o2, a, 1, NULL, 0, -1, 100, "x", D, NULL),
	    -(int)PERR_EXISTS);
	/* A's timeout went with it: C waits without one. */
	fake_advance(1000);
	ck_assert_ptr_null(find_rec(ENGINE_EV_WAIT_TIMEOUT, A));
	ck_assert_ptr_null(find_rec(ENGINE_EV_WAIT_TIMEOUT, C));
	engine_release(eng, a, g->token, o1);
	ck_assert_ptr_nonnull(find_rec(ENGINE_EV_GRANTED, C));
	ck_assert_ptr_nonnull(engine_grant_by_token(eng, find_rec(
	    ENGINE_EV_GRANTED, C)->token)->id);
	/* Now held: a repeat is answered its token. */
	ck_assert_int_eq(acq2(o2, b, 1, a, 1, -1, 100, "x", NULL, &g),
	    ACQUIRE_REPEATED);
	ck_assert_uint_eq(g->token, find_rec(ENGINE_EV_GRANTED, C)->token);

	/* A take-over with TIMEOUT 0 gives up the place at once. */
	engine_resize(eng, b, 0);
	ck_assert_int_eq(acq2(o2, b, 1, NULL, 0, -1, -1, NULL, NULL, NULL),
	    -(int)PERR_RANGE);
	engine_resize(eng, b, 1);
	ck_assert_int_eq(acq2(o2, b, 1, NULL, 0, -1, 100, "y", A, NULL),
	    ACQUIRE_QUEUED);
	ck_assert_str_eq(queue_of(b), "BA");
	ck_assert_int_eq(acq2(o1, b, 1, NULL, 0, 0, 100, "y", D, NULL),
	    ACQUIRE_TIMEOUT);
	ck_assert_str_eq(queue_of(b), "B");
	ck_assert_ptr_null(b->waiter_ids);
}
END_TEST

/* --- randomized, against a reference model --- */

/*
 * A check that writes nothing while it passes: Check's ck_assert_*()
 * report every passing check's place to the parent, which thousands of
 * steps turn into millions of writes.
 */
#define M_CHECK(cond, ...) do {						\
	if (!(cond))							\
		ck_abort_msg(__VA_ARGS__);				\
} while (0)

#define M_SEMS		4
#define M_OWNERS	5
#define M_REQS		16384

/* A request of the model: waiting, held, or done. */
struct m_req {
	int		 state;		/* 0 done, 1 waiting, 2 held */
	int		 owner;
	int		 nparts;
	int		 sem[M_SEMS];
	uint32_t	 n[M_SEMS];
	int64_t		 lease_ms;
	uint64_t	 seq;		/* arrival order */
	uint64_t	 deadline;	/* waiting: timeout; held: lease end */
	uint64_t	 tseq;		/* when its timer was armed */
	uint64_t	 token;		/* held */
	int		 answered;	/* the engine's answer seen */
	int		 id;		/* index in m_ids, -1: none */
};

/* A small pool of request IDs, so that repeats and take-overs happen. */
static const char *const m_ids[] = { "i0", "i1", "i2" };

static struct {
	uint32_t	 cap[M_SEMS];
	uint64_t	 used[M_SEMS];
	struct m_req	 req[M_REQS];
	int		 nreq;
	int		 live[M_REQS];	/* indices of requests not done */
	int		 nlive;
	uint64_t	 seq, tseq;
	struct sem	*s[M_SEMS];
	struct owner	*o[M_OWNERS];
	uint64_t	 last_token;
	/* What the run exercised: it must not pass by doing nothing. */
	unsigned	 multi_granted_late, timeouts, expired, head_blocked;
	unsigned	 repeats, takeovers, id_exists;
} m;

static int
m_cookie_index(void *cookie)
{
	return ((int)((struct m_req *)cookie - m.req));
}

/* 1 if no older waiting request names semaphore s. */
static int
m_first_on(const struct m_req *r, int s)
{
	int	i, j, x;

	for (x = 0; x < m.nlive; x++) {
		i = m.live[x];
		if (m.req[i].state != 1 || m.req[i].seq >= r->seq)
			continue;
		for (j = 0; j < m.req[i].nparts; j++)
			if (m.req[i].sem[j] == s)
				return (0);
	}
	return (1);
}

static int
m_ready(const struct m_req *r)
{
	int	j;

	for (j = 0; j < r->nparts; j++)
		if (!m_first_on(r, r->sem[j]) ||
		    m.used[r->sem[j]] + r->n[j] > m.cap[r->sem[j]])
			return (0);
	return (1);
}

static void
m_hold(struct m_req *r)
{
	int	j;

	r->state = 2;
	for (j = 0; j < r->nparts; j++)
		m.used[r->sem[j]] += r->n[j];
	if (r->lease_ms >= 0) {
		r->deadline = fake_now + (uint64_t)r->lease_ms;
		r->tseq = ++m.tseq;
	}
}

/* Serve to the fixpoint: grant every ready waiter (order-free: two
 * ready waiters share no queue, since each is at the head of its own). */
static void
m_serve(void)
{
	int	i, x, again = 1;

	while (again) {
		again = 0;
		for (x = 0; x < m.nlive; x++) {
			i = m.live[x];
			if (m.req[i].state == 1 && m_ready(&m.req[i])) {
				m_hold(&m.req[i]);
				again = 1;
			}
		}
	}
}

static void
m_end(struct m_req *r)
{
	int	j;

	if (r->state == 2)
		for (j = 0; j < r->nparts; j++)
			m.used[r->sem[j]] -= r->n[j];
	r->state = 0;
}

/* The engine's events, checked against the model's state as they come. */
static void
m_on_event(void *ctx, const struct engine_event *ev)
{
	struct m_req	*r;
	const char	*msg;
	int		 k;

	(void)ctx;
	for (k = 0; k < M_SEMS && m.s[k] != NULL; k++) {
		msg = fake_check_sem(m.s[k]);
		M_CHECK(msg == NULL, "s%d: %s", k, msg);
	}
	if (ev->type == ENGINE_EV_GRANTED) {
		M_CHECK((ev->grant->token) > (m.last_token), "ev->grant->token > m.last_token");
		m.last_token = ev->grant->token;
		if (ev->cookie != NULL) {
			r = ev->cookie;
			M_CHECK((r->state) == (1), "r->state == 1");
			if (ev->grant->nparts > 1)
				m.multi_granted_late++;
			r->token = ev->grant->token;
			r->answered = 2;
		}
	} else if (ev->type == ENGINE_EV_WAIT_REPLACED) {
		r = ev->cookie;
		M_CHECK(r->state == 1, "a replaced request was not waiting");
		r->answered = 6;
	} else if (ev->type == ENGINE_EV_WAIT_TIMEOUT) {
		r = ev->cookie;
		M_CHECK((r->state) == (1), "r->state == 1");
		r->answered = 3;
		m.timeouts++;
	} else if (ev->type == ENGINE_EV_RELEASED &&
	    ev->reason == RELEASE_EXPIRED) {
		m.expired++;
	}
}

/*
 * Apply what the engine answered and compare the whole state: every
 * request not done (a done one has no part left in the engine, which the
 * counts of used and of the queues show).
 */
static void
m_compare(void)
{
	const struct waiter	*w;
	const struct grant	*g;
	struct m_req		*r;
	int			 i, j, k, x, p;
	int			 nwait[M_SEMS] = { 0 };
	uint64_t		 prev;

	for (x = 0; x < m.nlive; x++) {
		i = m.live[x];
		r = &m.req[i];
		if (r->state == 2 && r->answered == 2)
			r->answered = 4;	/* granted: both agree */
		M_CHECK(r->answered != 2, "req %d granted by the engine only",
		    i);
		M_CHECK(!(r->state == 2 && r->answered != 4),
		    "req %d granted by the model only", i);
		M_CHECK(r->answered != 3, "req %d: a TIMEOUT the model did "
		    "not give", i);
		M_CHECK(r->answered != 6, "req %d: replaced by the engine "
		    "only", i);
		for (p = 0; p < r->nparts && r->state == 1; p++)
			nwait[r->sem[p]]++;
		for (p = 0; p < r->nparts && r->state == 2; p++) {
			g = engine_find_grant(eng, m.s[r->sem[p]], r->token);
			M_CHECK(g != NULL && g->n == r->n[p], "req %d: its "
			    "part on s%d is not held", i, r->sem[p]);
		}
	}
	for (k = 0; k < M_SEMS; k++) {
		M_CHECK(m.s[k]->used == m.used[k], "s%d: used %llu, model "
		    "%llu", k, (unsigned long long)m.s[k]->used,
		    (unsigned long long)m.used[k]);
		M_CHECK(m.s[k]->capacity == m.cap[k], "s%d: capacity", k);
		/* The queue: the model's waiters on k, in arrival order. */
		prev = 0;
		j = 0;
		DL_FOREACH2(m.s[k]->queue, w, q_next) {
			i = m_cookie_index(w->lead->cookie);
			M_CHECK(m.req[i].state == 1, "s%d: req %d queued, not "
			    "waiting in the model", k, i);
			M_CHECK(m.req[i].seq > prev, "s%d: queue out of "
			    "arrival order", k);
			prev = m.req[i].seq;
			j++;
		}
		M_CHECK(j == nwait[k], "s%d: %d queued, model %d", k, j,
		    nwait[k]);
	}
	/* Only requests not done stay on the live list. */
	for (x = j = 0; x < m.nlive; x++)
		if (m.req[m.live[x]].state != 0)
			m.live[j++] = m.live[x];
	m.nlive = j;
}

/* 1 if a and b name the same semaphores with the same n each. */
static int
m_same_parts(const struct m_req *a, const struct m_req *b)
{
	int	i, j;

	if (a->nparts != b->nparts)
		return (0);
	for (i = 0; i < a->nparts; i++) {
		for (j = 0; j < b->nparts; j++)
			if (b->sem[j] == a->sem[i])
				break;
		if (j == b->nparts || b->n[j] != a->n[i])
			return (0);
	}
	return (1);
}

/* The live request in state with r's ID that names r's j-th semaphore. */
static struct m_req *
m_id_on(const struct m_req *r, int j, int state)
{
	struct m_req	*x;
	int		 i, p;

	for (i = 0; i < m.nlive; i++) {
		x = &m.req[m.live[i]];
		if (x == r || x->state != state || x->id != r->id)
			continue;
		for (p = 0; p < x->nparts; p++)
			if (x->sem[p] == r->sem[j])
				return (x);
	}
	return (NULL);
}

/*
 * The ID rules for r (which has an ID), as PROTOCOL.md states them: -1
 * when they do not decide, else the status the engine must answer, or
 * 0 with *exists set; the model is updated (a take-over).
 */
static int
m_id_rules(struct m_req *r, int64_t timeout_ms, int *exists,
    uint64_t *token)
{
	struct m_req	*x = NULL;
	int		 j;

	*exists = 0;
	for (j = 0; j < r->nparts && x == NULL; j++)
		x = m_id_on(r, j, 2);
	if (x != NULL) {
		if (!m_same_parts(x, r)) {
			*exists = 1;
			return (0);
		}
		*token = x->token;
		return (ACQUIRE_REPEATED);
	}
	for (j = 0; j < r->nparts && x == NULL; j++)
		x = m_id_on(r, j, 1);
	if (x == NULL)
		return (-1);
	if (!m_same_parts(x, r)) {
		*exists = 1;
		return (0);
	}
	/* r takes x's place in every queue: x's arrival. */
	M_CHECK(x->answered == 6, "req %d: not replaced by the engine",
	    (int)(x - m.req));
	x->answered = 0;
	x->state = 0;
	r->seq = x->seq;
	r->state = 1;
	r->deadline = UINT64_MAX;
	if (timeout_ms == 0) {
		r->state = 0;
		m_serve();
		return (ACQUIRE_TIMEOUT);
	}
	if (timeout_ms > 0) {
		r->deadline = fake_now + (uint64_t)timeout_ms;
		r->tseq = ++m.tseq;
	}
	return (ACQUIRE_QUEUED);
}

/* The model's next timer due by until: deadline, then arming order. */
static struct m_req *
m_next_timer(uint64_t until)
{
	struct m_req	*best = NULL, *r;
	int		 x;

	for (x = 0; x < m.nlive; x++) {
		r = &m.req[m.live[x]];
		if (!((r->state == 1 && r->deadline != UINT64_MAX) ||
		    (r->state == 2 && r->lease_ms >= 0)) || r->deadline > until)
			continue;
		if (best == NULL || r->deadline < best->deadline ||
		    (r->deadline == best->deadline && r->tseq < best->tseq))
			best = r;
	}
	return (best);
}

/*
 * Move both clocks to until: the engine's fires its timers of each
 * instant, the model ends its requests of that instant in the same
 * (arming) order, serving after each; then the states must agree.
 */
static void
m_advance(uint64_t until)
{
	struct m_req	*r;
	uint64_t	 at;

	while ((r = m_next_timer(until)) != NULL) {
		at = r->deadline;
		fake_advance(at - fake_now);
		while ((r = m_next_timer(at)) != NULL) {
			if (r->state == 1) {
				M_CHECK(r->answered == 3, "req %d: no " "TIMEOUT from the engine", (int)(r - m.req));
				r->answered = 0;
			}
			m_end(r);
			m_serve();
		}
		m_compare();
	}
	fake_advance(until - fake_now);
}

START_TEST(test_random_model)
{
	struct engine_part	 parts[M_SEMS];
	struct engine_request	 er;
	enum acquire_status	 st;
	struct grant		*g;
	enum proto_err		 err;
	unsigned		 seed = 20 + (unsigned)_i, step;
	int			 i, j, k, op, idx, range, decided, exists;
	struct m_req		*x;
	uint64_t		 token = 0;
	char			 name[8];

	engine_free(eng);
	eng = engine_new(&fake_clock, m_on_event, NULL, 0);
	memset(&m, 0, sizeof(m));
	srand(seed);
	for (k = 0; k < M_SEMS; k++) {
		m.cap[k] = 1 + (uint32_t)(rand() % 4);
		snprintf(name, sizeof(name), "s%d", k);
		M_CHECK((engine_create(eng, name, strlen(name),
		    m.cap[k], &m.s[k])) == (PERR_NONE), "engine_create(eng, name, strlen(name), m.cap[k], &m.s[k]) == PERR_NONE");
	}
	for (i = 0; i < M_OWNERS; i++)
		m.o[i] = engine_owner_new(eng, (uint64_t)i + 1);

	for (step = 0; step < 20000 && m.nreq < M_REQS - 1; step++) {
		op = rand() % 100;
		if (op < 50) {
			/* ACQUIRE (1 semaphore) or ACQUIREALL (2..4). */
			struct m_req *r = &m.req[m.nreq];

			memset(r, 0, sizeof(*r));
			r->nparts = rand() % 3 == 0 ? 1 : 2 + rand() % 3;
			range = 0;
			for (j = 0; j < r->nparts; j++) {
				do {
					k = rand() % M_SEMS;
					for (i = 0; i < j; i++)
						if (r->sem[i] == k)
							break;
				} while (i < j);
				r->sem[j] = k;
				r->n[j] = 1 + (rand() % 4 == 0 ?
				    (uint32_t)(rand() % 4) : 0);
				if (r->n[j] > m.cap[k])
					range = 1;
				parts[j].sem = m.s[k];
				parts[j].n = r->n[j];
			}
			r->owner = rand() % M_OWNERS;
			r->lease_ms = rand() % 2 ? -1 : 1 + rand() % 60;
			r->id = r->lease_ms >= 0 && rand() % 2 ?
			    rand() % (int)nitems(m_ids) : -1;
			x = m.nlive > 0 ? &m.req[m.live[rand() % m.nlive]] :
			    NULL;
			if (x != NULL && x->id >= 0 && rand() % 2) {
				/* A retry: x's parts, in another order. */
				r->id = x->id;
				r->lease_ms = 1 + rand() % 60;
				r->nparts = x->nparts;
				range = 0;
				for (j = 0; j < r->nparts; j++) {
					i = (j + x->nparts - 1) % x->nparts;
					r->sem[j] = x->sem[i];
					r->n[j] = x->n[i];
					parts[j].sem = m.s[r->sem[j]];
					parts[j].n = r->n[j];
					if (r->n[j] > m.cap[r->sem[j]])
						range = 1;
				}
			}
			memset(&er, 0, sizeof(er));
			if (r->id >= 0) {
				er.id = m_ids[r->id];
				er.id_len = strlen(er.id);
			}
			er.owner = m.o[r->owner];
			er.parts = parts;
			er.nparts = (uint32_t)r->nparts;
			er.timeout_ms = rand() % 4 == 0 ? 0 : rand() % 3 == 0 ?
			    -1 : 1 + rand() % 80;
			er.lease_ms = r->lease_ms;
			er.cookie = r;
			r->seq = ++m.seq;
			err = engine_acquire_req(eng, &er, &st, &g);
			if (range) {
				M_CHECK((err) == (PERR_RANGE), "err == PERR_RANGE");
				continue;
			}
			if (r->id >= 0 && (decided = m_id_rules(r,
			    er.timeout_ms, &exists, &token)) >= 0) {
				if (exists) {
					M_CHECK(err == PERR_EXISTS, "req %d: "
					    "not EXISTS", m.nreq);
					m.id_exists++;
					continue;
				}
				M_CHECK(err == PERR_NONE && (int)st == decided,
				    "req %d: the ID rules answered %d/%d, the "
				    "model %d", m.nreq, (int)err, (int)st,
				    decided);
				if (decided == ACQUIRE_REPEATED) {
					M_CHECK(g->token == token, "a repeat "
					    "answered another token");
					m.repeats++;
					continue;
				}
				m.takeovers++;
				if (r->state == 1)
					m.live[m.nlive++] = m.nreq;
				m.nreq++;
				m_compare();
				continue;
			}
			M_CHECK((err) == (PERR_NONE), "err == PERR_NONE");
			m.live[m.nlive++] = m.nreq;
			m.nreq++;
			r->state = 1;
			r->deadline = UINT64_MAX;
			if (m_ready(r)) {
				M_CHECK((st) == (ACQUIRE_GRANTED), "st == ACQUIRE_GRANTED");
				m_hold(r);
				r->token = g->token;
				r->answered = 4;
			} else if (er.timeout_ms == 0) {
				M_CHECK((st) == (ACQUIRE_TIMEOUT), "st == ACQUIRE_TIMEOUT");
				r->state = 0;
			} else {
				M_CHECK((st) == (ACQUIRE_QUEUED), "st == ACQUIRE_QUEUED");
				/* Room on each, yet queued: someone's ahead. */
				for (j = 0; j < r->nparts; j++)
					if (m.used[r->sem[j]] + r->n[j] >
					    m.cap[r->sem[j]])
						break;
				if (j == r->nparts)
					m.head_blocked++;
				if (er.timeout_ms > 0) {
					r->deadline = fake_now +
					    (uint64_t)er.timeout_ms;
					r->tseq = ++m.tseq;
				}
			}
		} else if (op < 72) {
			/* RELEASE a held grant through a random part. */
			idx = rand() % (m.nreq + 1);
			if (idx >= m.nreq || m.req[idx].state != 2)
				continue;
			j = rand() % m.req[idx].nparts;
			i = rand() % M_OWNERS;
			err = engine_release(eng, m.s[m.req[idx].sem[j]],
			    m.req[idx].token, m.o[i]);
			if (m.req[idx].lease_ms < 0 && i != m.req[idx].owner) {
				M_CHECK((err) == (PERR_NOTOWNER), "err == PERR_NOTOWNER");
				continue;
			}
			M_CHECK((err) == (PERR_NONE), "err == PERR_NONE");
			m_end(&m.req[idx]);
			m_serve();
		} else if (op < 88) {
			m_advance(fake_now + 1 + (uint64_t)(rand() % 40));
		} else if (op < 94) {
			k = rand() % M_SEMS;
			m.cap[k] = (uint32_t)(rand() % 5);
			engine_resize(eng, m.s[k], m.cap[k]);
			m_serve();
		} else {
			/* A connection closes: its bound grants and its
			 * waiters go; its leases stay. */
			i = rand() % M_OWNERS;
			engine_owner_free(eng, m.o[i]);
			for (idx = 0; idx < m.nreq; idx++) {
				struct m_req *r = &m.req[idx];

				if (r->owner == i && (r->state == 1 ||
				    (r->state == 2 && r->lease_ms < 0)))
					m_end(r);
			}
			m_serve();
			m.o[i] = engine_owner_new(eng, (uint64_t)i + 1);
		}
		m_compare();
	}
	for (i = 0; i < M_OWNERS; i++)
		engine_owner_free(eng, m.o[i]);
	ck_assert_uint_gt(m.multi_granted_late, 100);
	ck_assert_uint_gt(m.timeouts, 100);
	ck_assert_uint_gt(m.expired, 100);
	ck_assert_uint_gt(m.head_blocked, 100);
	ck_assert_uint_gt(m.repeats, 20);
	ck_assert_uint_gt(m.takeovers, 20);
	ck_assert_uint_gt(m.id_exists, 20);
}
END_TEST

static Suite *
multi_suite(void)
{
	Suite	*s = suite_create("multi");
	TCase	*tc;

	tc = tcase_create("acquireall");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_no_deadlock);
	tcase_add_test(tc, test_crossed_waiters);
	tcase_add_test(tc, test_head_of_one_second_in_other);
	tcase_add_test(tc, test_resize_serves_other_queues);
	tcase_add_test(tc, test_leaving_serves_every_queue);
	tcase_add_test(tc, test_whole_grant_ops);
	tcase_add_test(tc, test_restore_parts);
	suite_add_tcase(s, tc);

	tc = tcase_create("id");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_id_repeat);
	tcase_add_test(tc, test_id_multi);
	tcase_add_test(tc, test_id_takeover);
	suite_add_tcase(s, tc);

	tc = tcase_create("random");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_random_model, 0, 8);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr = srunner_create(multi_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
