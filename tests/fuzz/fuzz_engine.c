/*
 * fuzz_engine.c: libFuzzer harness for the semaphore rules (daemon/engine.c).
 *
 * The input is a stream of operations, one opcode byte then its argument
 * bytes (0 once the input runs out): create, resize, delete, acquire (n,
 * timeout, lease), release, refresh, attach, revoke, undo, owner new and
 * free, hold grants, advance the fake clock (firing due timers), restore a
 * grant, raise the token floor, label a grant, clear; and (opcode bytes
 * 0xe0 and up, which older inputs never use) ACQUIREALL over 2..NSEMS
 * semaphores in any order, each with its n, with a timeout, a lease and
 * maybe a request ID; a single-semaphore lease ACQUIRE with an ID; and a
 * restore that also puts back a grant's parts on other semaphores and its
 * ID (engine_restore_part, engine_grant_set_id).
 * IDs come from a pool of NIDS so that repeats are frequent. The harness
 * keeps its own model of grants and queued waiters (each a list of parts,
 * a semaphore and its n), fed by the engine's events, and aborts as soon
 * as the engine disagrees with it or with a rule:
 *
 * - used is the sum of the n of the parts on that semaphore; nholders and
 *   nwaiters count the lists; every part of a grant or waiter is on its
 *   queue or list with its n, points to its lead, and only the lead has a
 *   timer; the engine's stats count what the model holds and the events
 *   it saw; every answer (NOTHELD, NOTOWNER, NOTLEASE, RANGE, EXISTS,
 *   GRANTED, QUEUED, TIMEOUT, REPEATED) follows from the model;
 * - used <= capacity, unless a restored grant or a RESIZE below used put
 *   it over (until it falls back); a grant is never made over capacity on
 *   any of its semaphores;
 * - FIFO: a queued waiter is granted only at the head of every queue it
 *   is on, each with room, in enqueue order; an ACQUIRE(ALL) is granted
 *   at once only when none of its queues has a waiter; after every
 *   operation no waiter at the head of all its queues fits in all of them
 *   (else the engine should have granted it), unless grants are held;
 * - RELEASE, REVOKE, REFRESH, ATTACH and UNDO through any semaphore of a
 *   multi-grant act on the whole grant; release, revoke, expiry, undo and
 *   close free every part;
 * - request IDs: a repeat of an ID held with the same parts (any order)
 *   grants nothing and answers the same token; other parts or n is
 *   EXISTS; a repeat of a waiting ID with the same parts takes its place
 *   in every queue (WAIT_REPLACED for the old, which is answered nothing
 *   else); a restored lease takes an ID only when no lease holds it on
 *   one of its semaphores; at most one request per ID and semaphore
 *   waits or holds;
 * - tokens strictly increase, and are above every restored token, even
 *   after a corrupt store's floor or token near 2^64 (refused or clamped
 *   to ENGINE_TOKEN_MAX);
 * - every event has a cause in the operation that is running; a lease or
 *   a reclaim grace never ends before its deadline, even when timers fire
 *   early (the first byte sets how early); armed timers are exactly those
 *   of leases, unowned grants and waiters with a timeout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include "engine.h"
#include "engine_fake.h"

#define NSEMS		4
#define NOWNERS		4
#define MAX_WAITERS	32
#define MAX_GRANTS	96
#define NIDS		3	/* request IDs: few, so that they repeat */

#define CHECK(cond, what) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_engine: %s (%s) at op %zu\n",	\
		    (what), #cond, fz.op_index);			\
		abort();						\
	}								\
} while (0)

enum fz_op {
	OP_CREATE, OP_RESIZE, OP_DELETE, OP_ACQUIRE, OP_RELEASE, OP_REFRESH,
	OP_ATTACH, OP_REVOKE, OP_UNDO, OP_OWNER_NEW, OP_OWNER_FREE, OP_HOLD,
	OP_ADVANCE, OP_RESTORE, OP_FLOOR, OP_HOLDER, OP_CLEAR,
	OP_ACQUIRE_ALL, OP_ACQUIRE_ID, OP_RESTORE_MULTI, OP__COUNT
};
/* Opcode bytes below OP_BYTE_NEW pick one of the first OP_NOLD ops. */
#define OP_NOLD		(OP_CLEAR + 1)
#define OP_BYTE_NEW	0xe0

/* One semaphore of a request, and the units it asks of it. */
struct fz_part {
	int		 sem;
	uint32_t	 n;
};

/*
 * A queued ACQUIRE(ALL), as the model sees it; its address is the
 * cookie. parts[0] is the lead's semaphore (the request's first).
 */
struct fz_waiter {
	int		 queued;
	int		 owner;
	int		 id;		/* index in id_names, -1: none */
	struct fz_part	 parts[NSEMS];
	uint32_t	 nparts;
	int64_t		 lease_ms;
	uint64_t	 seq;		/* enqueue order */
	uint64_t	 deadline_ms;	/* UINT64_MAX: none */
};

struct fz_grant {
	uint64_t	 token;
	struct fz_part	 parts[NSEMS];
	uint32_t	 nparts;
	enum grant_kind	 kind;
	int		 owner;		/* GRANT_CONN only, else -1 */
	int		 id;		/* index in id_names, -1: none */
};

static struct {
	struct engine		*e;
	const uint8_t		*p;
	size_t			 left;
	size_t			 op_index;

	int			 exists[NSEMS];
	uint32_t		 capacity[NSEMS];
	int			 over[NSEMS];	/* used may exceed capacity */
	struct owner		*owners[NOWNERS];
	int			 held;

	struct fz_waiter	 waiters[MAX_WAITERS];
	uint64_t		 seq;
	struct fz_grant		 grants[MAX_GRANTS];
	size_t			 ngrants;
	uint64_t		 max_token;	/* every token seen so far */
	struct engine_stats	 stats;		/* the *_total counters */

	/* What the running operation may cause. */
	enum fz_op		 op;
	int			 op_owner;	/* OP_OWNER_FREE's, else -1 */
	uint64_t		 op_token;
	int64_t			 op_lease_ms;
	int			 op_granted;	/* an ACQUIRE granted at once */
	/* The running ACQUIRE(ALL): its parts and ID, the waiter it replaced. */
	struct fz_part		 op_parts[NSEMS];
	uint32_t		 op_nparts;
	int			 op_id;
	struct fz_waiter	*op_replaced;
} fz;

static const char *const sem_names[NSEMS] = { "a", "b", "c", "d" };
static const char *const id_names[NIDS] = { "job-1", "job-2", "Job-1" };

static uint8_t
next_byte(void)
{
	if (fz.left == 0)
		return (0);
	fz.left--;
	return (*fz.p++);
}

static int
sem_index(const struct sem *s)
{
	int	i;

	for (i = 0; i < NSEMS; i++) {
		if (s->name_len == 1 && s->name[0] == sem_names[i][0])
			return (i);
	}
	CHECK(0, "an event names a semaphore the harness never created");
	return (-1);
}

static int
owner_index(const struct owner *o)
{
	int	i;

	for (i = 0; i < NOWNERS; i++) {
		if (o != NULL && fz.owners[i] == o)
			return (i);
	}
	CHECK(0, "a grant is bound to an unknown owner");
	return (-1);
}

/* The n that parts ask of sem, 0 when none of them is on it. */
static uint32_t
parts_n(const struct fz_part *parts, uint32_t nparts, int sem)
{
	uint32_t	i;

	for (i = 0; i < nparts; i++) {
		if (parts[i].sem == sem)
			return (parts[i].n);
	}
	return (0);
}

/* 1 when a and b ask the same n of the same semaphores, in any order. */
static int
parts_same(const struct fz_part *a, uint32_t na, const struct fz_part *b,
    uint32_t nb)
{
	uint32_t	i;

	if (na != nb)
		return (0);
	for (i = 0; i < na; i++) {
		if (parts_n(b, nb, a[i].sem) != a[i].n ||
		    parts_n(a, na, b[i].sem) != b[i].n)
			return (0);
	}
	return (1);
}

/* 1 when a and b have a semaphore in common. */
static int
parts_overlap(const struct fz_part *a, uint32_t na, const struct fz_part *b,
    uint32_t nb)
{
	uint32_t	i;

	for (i = 0; i < na; i++) {
		if (parts_n(b, nb, a[i].sem) != 0)
			return (1);
	}
	return (0);
}

/* The index in id_names of the engine's ID (len bytes), -1 for none. */
static int
id_index(const char *id, size_t len)
{
	int	i;

	if (id == NULL)
		return (-1);
	for (i = 0; i < NIDS; i++) {
		if (strlen(id_names[i]) == len &&
		    memcmp(id, id_names[i], len) == 0 && id[len] == '\0')
			return (i);
	}
	CHECK(0, "an ID the harness never gave");
	return (-1);
}

/* The parts of the engine's grant of lead g, checked to be one chain. */
static uint32_t
grant_parts(const struct grant *g, struct fz_part *parts)
{
	const struct grant	*part;
	uint32_t		 k = 0;

	for (part = g; part != NULL; part = part->part_next) {
		CHECK(k < NSEMS && part->lead == g && part->token == g->token,
		    "a grant's parts are not one chain under its lead");
		parts[k].sem = sem_index(part->sem);
		parts[k++].n = part->n;
	}
	CHECK(k == g->nparts, "a grant's nparts is not its count of parts");
	return (k);
}

static struct fz_grant *
model_grant(uint64_t token)
{
	size_t	i;

	for (i = 0; i < fz.ngrants; i++) {
		if (fz.grants[i].token == token)
			return (&fz.grants[i]);
	}
	return (NULL);
}

/* The model's grant of that token if it has a part on sem, else NULL. */
static struct fz_grant *
model_grant_on(uint64_t token, int sem)
{
	struct fz_grant	*mg = model_grant(token);

	return (mg != NULL && parts_n(mg->parts, mg->nparts, sem) != 0 ?
	    mg : NULL);
}

static void
model_grant_add(uint64_t token, const struct fz_part *parts,
    uint32_t nparts, enum grant_kind kind, int owner, int id)
{
	struct fz_grant	*mg;

	CHECK(model_grant(token) == NULL, "a token is granted twice");
	CHECK(fz.ngrants < MAX_GRANTS, "more grants than the model allows");
	mg = &fz.grants[fz.ngrants++];
	mg->token = token;
	memcpy(mg->parts, parts, nparts * sizeof(*parts));
	mg->nparts = nparts;
	mg->kind = kind;
	mg->owner = owner;
	mg->id = id;
}

/* The units the model's grants hold of sem. */
static uint64_t
model_used(int sem)
{
	uint64_t	used = 0;
	size_t		i;

	for (i = 0; i < fz.ngrants; i++)
		used += parts_n(fz.grants[i].parts, fz.grants[i].nparts, sem);
	return (used);
}

static size_t
model_nqueued(void)
{
	size_t	i, n = 0;

	for (i = 0; i < MAX_WAITERS; i++)
		n += fz.waiters[i].queued;
	return (n);
}

/* The model's head of sem's queue (lowest seq with a part there), or NULL. */
static struct fz_waiter *
model_head(int sem)
{
	struct fz_waiter	*w, *head = NULL;
	size_t			 i;

	for (i = 0; i < MAX_WAITERS; i++) {
		w = &fz.waiters[i];
		if (w->queued && parts_n(w->parts, w->nparts, sem) != 0 &&
		    (head == NULL || w->seq < head->seq))
			head = w;
	}
	return (head);
}

static struct fz_waiter *
cookie_waiter(void *cookie)
{
	struct fz_waiter	*w = cookie;

	CHECK(w >= fz.waiters && w < fz.waiters + MAX_WAITERS,
	    "an event carries a cookie the harness never gave");
	CHECK(w->queued, "an event answers a waiter that is not queued");
	return (w);
}

static int
op_is_acquire(void)
{
	return (fz.op == OP_ACQUIRE || fz.op == OP_ACQUIRE_ALL ||
	    fz.op == OP_ACQUIRE_ID);
}

/*
 * 1 when the engine's waiter (lead w) is at the head of every queue it is
 * on and each has room for it: then it must have been granted.
 */
static int
waiter_fits(const struct waiter *w)
{
	const struct waiter	*part;

	for (part = w; part != NULL; part = part->part_next) {
		if (part->sem->queue != part ||
		    part->sem->used + part->n > part->sem->capacity)
			return (0);
	}
	return (1);
}

static void
on_granted(const struct engine_event *ev, int sem)
{
	struct grant		*g = ev->grant, *part;
	struct fz_waiter	*w;
	struct fz_part		 parts[NSEMS];
	uint32_t		 nparts, i;
	int			 owner = -1;

	CHECK(!fz.held, "a grant while grants are held");
	CHECK(g == g->lead && g->sem == ev->sem,
	    "GRANTED names a part, not the lead");
	fz.stats.grants_total++;
	CHECK(g->token > fz.max_token, "tokens do not strictly increase");
	fz.max_token = g->token;
	nparts = grant_parts(g, parts);
	for (part = g; part != NULL; part = part->part_next)
		CHECK(part->sem->used <= part->sem->capacity,
		    "a grant made over capacity");
	if (g->kind == GRANT_CONN)
		owner = owner_index(g->owner);
	if (ev->cookie == NULL) {
		/* Granting at once: only with nobody queued on any part. */
		CHECK(op_is_acquire() && !fz.op_granted &&
		    sem == fz.op_parts[0].sem &&
		    parts_same(parts, nparts, fz.op_parts, fz.op_nparts),
		    "an unexpected immediate grant");
		for (i = 0; i < nparts; i++)
			CHECK(model_head(parts[i].sem) == NULL,
			    "an ACQUIRE overtook queued waiters");
		for (part = g; part != NULL; part = part->part_next)
			CHECK(part->sem->queue == NULL,
			    "an ACQUIRE granted past a queue");
		CHECK(id_index(g->id, g->id_len) == fz.op_id,
		    "granted under another ID than asked");
		fz.op_granted = 1;
		if (fz.op_lease_ms < 0) {
			CHECK(g->kind == GRANT_CONN, "a bound ACQUIRE got a lease");
			model_grant_add(g->token, parts, nparts, GRANT_CONN,
			    owner, -1);
		} else {
			CHECK(g->kind == GRANT_LEASE, "a lease ACQUIRE is bound");
			model_grant_add(g->token, parts, nparts, GRANT_LEASE,
			    -1, fz.op_id);
		}
		return;
	}
	w = cookie_waiter(ev->cookie);
	CHECK(sem == w->parts[0].sem &&
	    parts_same(parts, nparts, w->parts, w->nparts),
	    "a waiter granted other parts than it asked");
	for (i = 0; i < nparts; i++)
		CHECK(model_head(parts[i].sem) == w,
		    "a waiter granted while not at the head of all its queues");
	CHECK(id_index(g->id, g->id_len) == w->id,
	    "a waiter granted under another ID");
	w->queued = 0;
	if (w->lease_ms < 0) {
		CHECK(g->kind == GRANT_CONN && owner == w->owner,
		    "a bound waiter granted to another owner");
		model_grant_add(g->token, parts, nparts, GRANT_CONN, w->owner,
		    -1);
	} else {
		CHECK(g->kind == GRANT_LEASE && g->owner == NULL,
		    "a lease waiter granted a bound grant");
		model_grant_add(g->token, parts, nparts, GRANT_LEASE, -1,
		    w->id);
	}
}

static void
on_released(const struct engine_event *ev, int sem)
{
	struct grant	*g = ev->grant, *part, *other;
	struct fz_grant	*mg = model_grant(g->token);
	struct fz_part	 parts[NSEMS];
	uint32_t	 nparts;
	const char	*msg;

	CHECK(mg != NULL, "a release of a grant the model does not hold");
	CHECK(g == g->lead, "RELEASED names a part, not the lead");
	nparts = grant_parts(g, parts);
	CHECK(sem == mg->parts[0].sem && mg->kind == g->kind &&
	    parts_same(parts, nparts, mg->parts, mg->nparts),
	    "a released grant is not the one granted");
	/* Every part is off its semaphore, its units back, before RELEASED. */
	for (part = g; part != NULL; part = part->part_next) {
		DL_FOREACH2(part->sem->grants, other, sem_next)
			CHECK(other != part, "a released part is still held");
		msg = fake_check_sem(part->sem);
		CHECK(msg == NULL, msg);
	}
	switch (ev->reason) {
	case RELEASE_BY_HOLDER:
		CHECK(fz.op == OP_RELEASE && fz.op_token == g->token,
		    "a release nobody asked for");
		break;
	case RELEASE_REVOKED:
		CHECK(fz.op == OP_REVOKE && fz.op_token == g->token,
		    "a revoke nobody asked for");
		fz.stats.revoked_total++;
		break;
	case RELEASE_UNDONE:
		CHECK(fz.op == OP_UNDO && fz.op_token == g->token,
		    "an undo nobody asked for");
		fz.stats.grants_total--;	/* and not a release */
		break;
	case RELEASE_CLOSED:
		CHECK(fz.op_owner >= 0 && mg->kind == GRANT_CONN &&
		    mg->owner == fz.op_owner,
		    "a grant released for a close that is not its owner's");
		break;
	case RELEASE_EXPIRED:
		CHECK(fz.op == OP_ADVANCE && mg->kind == GRANT_LEASE &&
		    fake_now >= g->deadline_ms, "a lease expired early");
		fz.stats.expired_total++;
		break;
	case RELEASE_UNCLAIMED:
		CHECK(fz.op == OP_ADVANCE && mg->kind == GRANT_UNOWNED &&
		    fake_now >= g->deadline_ms,
		    "an unowned grant reclaimed early");
		break;
	}
	if (ev->reason != RELEASE_UNDONE)
		fz.stats.releases_total++;
	*mg = fz.grants[--fz.ngrants];
}

static void
on_event(void *ctx, const struct engine_event *ev)
{
	struct fz_grant		*mg;
	struct fz_waiter	*w;
	const char		*msg;
	int			 sem = sem_index(ev->sem);

	(void)ctx;
	switch (ev->type) {
	case ENGINE_EV_SEM_CREATED:
		CHECK(fz.op == OP_CREATE, "a semaphore created unasked");
		return;
	case ENGINE_EV_SEM_RESIZED:
		CHECK(fz.op == OP_RESIZE, "a semaphore resized unasked");
		break;
	case ENGINE_EV_SEM_DELETED:
		CHECK(fz.op == OP_DELETE, "a semaphore deleted unasked");
		return;		/* being freed */
	case ENGINE_EV_GRANTED:
		on_granted(ev, sem);
		break;
	case ENGINE_EV_RELEASED:
		on_released(ev, sem);
		break;
	case ENGINE_EV_REFRESHED:
		CHECK(fz.op == OP_REFRESH && fz.op_token == ev->grant->token,
		    "a refresh nobody asked for");
		break;
	case ENGINE_EV_ATTACHED:
		mg = model_grant(ev->grant->token);
		CHECK(fz.op == OP_ATTACH && mg != NULL &&
		    mg->kind == GRANT_UNOWNED, "an attach of a grant not unowned");
		mg->kind = GRANT_CONN;
		mg->owner = owner_index(ev->grant->owner);
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
		w = cookie_waiter(ev->cookie);
		/* A TIMEOUT may come as early as the timer (a lease may not). */
		CHECK(fz.op == OP_ADVANCE &&
		    fake_now + fake_early >= w->deadline_ms,
		    "a waiter timed out early");
		CHECK(w->parts[0].sem == sem,
		    "a waiter timed out on another semaphore");
		w->queued = 0;
		fz.stats.timeouts_total++;
		break;
	case ENGINE_EV_WAIT_REPLACED:
		/* Only by the running request, with its ID and parts. */
		w = cookie_waiter(ev->cookie);
		CHECK(op_is_acquire() && fz.op_id >= 0 &&
		    fz.op_replaced == NULL && w->id == fz.op_id &&
		    w->parts[0].sem == sem &&
		    parts_same(w->parts, w->nparts, fz.op_parts, fz.op_nparts),
		    "a waiter replaced by a request without its ID and parts");
		w->queued = 0;
		fz.op_replaced = w;
		break;
	}
	msg = fake_check_sem(ev->sem);
	CHECK(msg == NULL, msg);
}

/* No two requests with one ID hold or wait on s. */
static void
check_ids(const struct sem *s)
{
	const struct grant	*g;
	const struct waiter	*w;
	unsigned		 seen = 0;
	int			 i;

	DL_FOREACH2(s->grants, g, sem_next) {
		if ((i = id_index(g->id, g->id_len)) < 0)
			continue;
		CHECK(!(seen & 1u << i),
		    "two grants hold one ID on a semaphore");
		seen |= 1u << i;
	}
	DL_FOREACH2(s->queue, w, q_next) {
		if ((i = id_index(w->id, w->id_len)) < 0)
			continue;
		CHECK(!(seen & 1u << i),
		    "two requests with one ID hold or wait on a semaphore");
		seen |= 1u << i;
	}
}

/* The queue of s (the model's k) is the model's, in enqueue order. */
static size_t
check_queue(struct sem *s, int k)
{
	struct waiter		*w;
	struct fz_waiter	*mw;
	uint64_t		 last = 0;
	size_t			 i, nq = 0, ntimers = 0;

	DL_FOREACH2(s->queue, w, q_next) {
		CHECK(w->sem == s && w->lead != NULL,
		    "a queued part has no lead or another semaphore");
		mw = cookie_waiter(w->lead->cookie);
		CHECK(parts_n(mw->parts, mw->nparts, k) == w->n &&
		    mw->seq > last, "the queue is not in enqueue order");
		last = mw->seq;
		CHECK(id_index(w->id, w->id_len) == mw->id,
		    "a waiter's ID is not its request's");
		CHECK(engine_waited_ms(fz.e, w) == fake_now - w->enqueued_ms,
		    "a wrong wait time");
		if (w == w->lead) {
			CHECK(w->nparts == mw->nparts && mw->parts[0].sem == k,
			    "a waiter's lead or count of parts is wrong");
			ntimers += w->timer != NULL;
			CHECK((w->timer != NULL) ==
			    (mw->deadline_ms != UINT64_MAX),
			    "a waiter's timer is missing or extra");
		} else
			CHECK(w->timer == NULL, "a waiter's part has a timer");
		nq++;
	}
	for (i = 0; i < MAX_WAITERS; i++) {
		mw = &fz.waiters[i];
		nq -= mw->queued && parts_n(mw->parts, mw->nparts, k) != 0;
	}
	CHECK(nq == 0, "a queue has more or fewer waiters than the model");
	return (ntimers);
}

/* Everything the model knows agrees with the engine. */
static void
check_all(void)
{
	struct engine_stats	 st;
	struct sem		*s;
	struct grant		*g, *part;
	struct fz_grant		*mg;
	struct fz_part		 parts[NSEMS];
	const char		*msg;
	uint32_t		 nparts;
	size_t			 i, ntimers = 0, nsems = 0, nheld;
	int			 k;

	for (k = 0; k < NSEMS; k++) {
		s = engine_find(fz.e, sem_names[k], 1);
		CHECK((s != NULL) == fz.exists[k], "a semaphore came or went");
		if (s == NULL)
			continue;
		nsems++;
		msg = fake_check_sem(s);
		CHECK(msg == NULL, msg);
		CHECK(s->capacity == fz.capacity[k], "the capacity changed");
		CHECK(s->used == model_used(k),
		    "used is not what the model granted");
		if (s->used <= s->capacity)
			fz.over[k] = 0;
		CHECK(!fz.over[k] ? s->used <= s->capacity : 1,
		    "used went over capacity");
		for (nheld = 0, i = 0; i < fz.ngrants; i++)
			nheld += model_grant_on(fz.grants[i].token, k) != NULL;
		CHECK(s->nholders == nheld,
		    "a semaphore has more or fewer holders than the model");
		ntimers += check_queue(s, k);
		check_ids(s);
		if (!fz.held && s->queue != NULL) {
			CHECK(!waiter_fits(s->queue->lead),
			    "a waiter at the head of all its queues fits "
			    "but was not granted");
		}
	}
	for (i = 0; i < fz.ngrants; i++) {
		mg = &fz.grants[i];
		g = engine_grant_by_token(fz.e, mg->token);
		CHECK(g != NULL && g == g->lead && g->kind == mg->kind,
		    "a grant of the model is missing");
		nparts = grant_parts(g, parts);
		CHECK(sem_index(g->sem) == mg->parts[0].sem &&
		    parts_same(parts, nparts, mg->parts, mg->nparts),
		    "a grant's parts are not the model's");
		CHECK(id_index(g->id, g->id_len) == mg->id,
		    "a grant's ID is not the model's");
		CHECK(mg->kind == GRANT_CONN ?
		    g->owner == fz.owners[mg->owner] && g->timer == NULL :
		    g->owner == NULL && g->timer != NULL,
		    "a grant's owner or timer is wrong");
		for (part = g->part_next; part != NULL; part = part->part_next)
			CHECK(part->kind == g->kind &&
			    part->owner == g->owner &&
			    part->deadline_ms == g->deadline_ms &&
			    part->timer == NULL && part->id == g->id,
			    "a part of a grant disagrees with its lead");
		ntimers += g->timer != NULL;
		/* Due deadlines fired in fake_advance(): none is behind. */
		CHECK(mg->kind == GRANT_CONN ? engine_grant_ttl_ms(fz.e, g) == -1 :
		    g->deadline_ms >= fake_now && engine_grant_ttl_ms(fz.e, g) ==
		    (int64_t)(g->deadline_ms - fake_now), "a wrong ttl");
		CHECK(strcmp(engine_kind_name(g->kind),
		    g->kind == GRANT_LEASE ? "lease" : "conn") == 0,
		    "a wrong kind name");
	}
	CHECK(fake_ntimers == ntimers, "armed timers are not those expected");
	for (i = 0, s = engine_sem_first(fz.e); s != NULL;
	    s = engine_sem_next(s))
		i++;
	CHECK(i == nsems, "engine_sem_first/next do not list every semaphore");
	engine_get_stats(fz.e, &st);
	CHECK(st.sems == nsems && st.grants == fz.ngrants &&
	    st.waiters == model_nqueued(), "the stats disagree with the model");
	CHECK(st.grants_total == fz.stats.grants_total &&
	    st.releases_total == fz.stats.releases_total &&
	    st.timeouts_total == fz.stats.timeouts_total &&
	    st.expired_total == fz.stats.expired_total &&
	    st.revoked_total == fz.stats.revoked_total,
	    "the *_total counters disagree with the events");
	CHECK(engine_last_token(fz.e) >= fz.max_token,
	    "the token floor went back");
}

/* A capacity: mostly small, so that grants collide. */
static uint32_t
arg_capacity(uint32_t min)
{
	uint8_t	b = next_byte();

	if (b == 0xff)
		return (PROTO_INT_MAX);
	return (min + (uint32_t)b % 6);
}

/* A token: one the model holds, or the next, or a stale or odd one. */
static uint64_t
arg_token(void)
{
	uint8_t	b = next_byte();

	if (b < 0xf0 && fz.ngrants > 0)
		return (fz.grants[b % fz.ngrants].token);
	switch (b & 3) {
	case 0:
		return (0);
	case 1:
		return (fz.max_token + 1);
	case 2:
		return (fz.max_token > 0 ? fz.max_token - 1 : 0);
	}
	return (UINT64_MAX);
}

static int
arg_owner(void)
{
	return (next_byte() % NOWNERS);
}

static int64_t
arg_timeout(void)
{
	uint8_t	b = next_byte();

	return (b == 0 ? 0 : b == 1 ? -1 : (int64_t)(b - 2) * 10);
}

/* An n: mostly small; 0xff asks more than any capacity (RANGE). */
static uint32_t
arg_n(void)
{
	uint8_t	b = next_byte();

	return (b == 0xff ? PROTO_INT_MAX : 1 + (uint32_t)b % 4);
}

/*
 * What the model says the request in fz.op_* must get: RANGE,
 * UNAVAILABLE, EXISTS, or PERR_NONE and *status; *repeat is the grant a
 * repeat answers, *taken the waiter whose place it takes.
 */
static enum proto_err
model_answer(int64_t timeout_ms, enum acquire_status *status,
    struct fz_grant **repeat, struct fz_waiter **taken)
{
	struct fz_grant		*mg;
	struct fz_waiter	*mw;
	const struct fz_part	*p;
	uint32_t		 i;
	size_t			 j;
	int			 other = 0, fits = 1;

	*repeat = NULL;
	*taken = NULL;
	for (i = 0; i < fz.op_nparts; i++) {
		if (fz.op_parts[i].n > fz.capacity[fz.op_parts[i].sem])
			return (PERR_RANGE);
	}
	if (fz.held)
		return (PERR_UNAVAILABLE);
	/* An ID held on one of its semaphores decides, then one waiting. */
	for (j = 0; fz.op_id >= 0 && j < fz.ngrants; j++) {
		mg = &fz.grants[j];
		if (mg->id != fz.op_id || !parts_overlap(mg->parts, mg->nparts,
		    fz.op_parts, fz.op_nparts))
			continue;
		if (parts_same(mg->parts, mg->nparts, fz.op_parts,
		    fz.op_nparts))
			*repeat = mg;
		else
			other = 1;
	}
	if (other)
		return (PERR_EXISTS);
	if (*repeat != NULL) {
		*status = ACQUIRE_REPEATED;
		return (PERR_NONE);
	}
	for (j = 0; fz.op_id >= 0 && j < MAX_WAITERS; j++) {
		mw = &fz.waiters[j];
		if (!mw->queued || mw->id != fz.op_id ||
		    !parts_overlap(mw->parts, mw->nparts, fz.op_parts,
		    fz.op_nparts))
			continue;
		if (parts_same(mw->parts, mw->nparts, fz.op_parts,
		    fz.op_nparts))
			*taken = mw;
		else
			other = 1;
	}
	if (other)
		return (PERR_EXISTS);
	if (*taken != NULL) {
		*status = timeout_ms == 0 ? ACQUIRE_TIMEOUT : ACQUIRE_QUEUED;
		return (PERR_NONE);
	}
	for (i = 0; i < fz.op_nparts; i++) {
		p = &fz.op_parts[i];
		if (model_head(p->sem) != NULL ||
		    model_used(p->sem) + p->n > fz.capacity[p->sem])
			fits = 0;
	}
	*status = fits ? ACQUIRE_GRANTED : timeout_ms == 0 ? ACQUIRE_TIMEOUT :
	    ACQUIRE_QUEUED;
	return (PERR_NONE);
}

/*
 * The request in fz.op_* (parts, lease, ID) by owner o: ACQUIRE, TRY or
 * ACQUIREALL, with its answer checked against the model's.
 */
static void
op_request(int o, int64_t timeout_ms)
{
	struct engine_part	 parts[NSEMS];
	struct engine_request	 r;
	enum acquire_status	 st, want_st = ACQUIRE_GRANTED;
	enum proto_err		 rc, want;
	struct fz_waiter	*w = NULL, *taken;
	struct fz_grant		*repeat;
	struct grant		*g = NULL;
	uint32_t		 i;
	size_t			 j;

	if (fz.owners[o] == NULL ||
	    fz.ngrants + model_nqueued() + 1 > MAX_GRANTS)
		return;
	for (j = 0; j < MAX_WAITERS && w == NULL; j++) {
		if (!fz.waiters[j].queued)
			w = &fz.waiters[j];
	}
	if (w == NULL)
		return;
	for (i = 0; i < fz.op_nparts; i++) {
		parts[i].sem = engine_find(fz.e,
		    sem_names[fz.op_parts[i].sem], 1);
		parts[i].n = fz.op_parts[i].n;
		if (parts[i].sem == NULL)
			return;		/* the server's NOSEM */
	}
	want = model_answer(timeout_ms, &want_st, &repeat, &taken);
	w->owner = o;
	w->id = fz.op_id;
	memcpy(w->parts, fz.op_parts, sizeof(w->parts));
	w->nparts = fz.op_nparts;
	w->lease_ms = fz.op_lease_ms;
	w->seq = ++fz.seq;
	w->deadline_ms = timeout_ms > 0 ? fake_now + (uint64_t)timeout_ms :
	    UINT64_MAX;
	fz.op_granted = 0;
	fz.op_replaced = NULL;
	if (fz.op == OP_ACQUIRE) {
		/* The single-semaphore entry point, as ACQUIRE and TRY use. */
		rc = engine_acquire(fz.e, parts[0].sem, fz.owners[o],
		    parts[0].n, timeout_ms, fz.op_lease_ms, w, &st, &g);
	} else {
		memset(&r, 0, sizeof(r));
		r.owner = fz.owners[o];
		r.parts = parts;
		r.nparts = fz.op_nparts;
		r.timeout_ms = timeout_ms;
		r.lease_ms = fz.op_lease_ms;
		if (fz.op_id >= 0) {
			r.id = id_names[fz.op_id];
			r.id_len = strlen(r.id);
		}
		r.cookie = w;
		rc = engine_acquire_req(fz.e, &r, &st, &g);
	}
	CHECK(rc == want, "an ACQUIRE answered another error than the model");
	if (rc != PERR_NONE) {
		CHECK(!fz.op_granted && fz.op_replaced == NULL,
		    "a refused ACQUIRE changed something");
		return;
	}
	CHECK(st == want_st,
	    "an ACQUIRE answered another status than the model");
	CHECK(fz.op_replaced == taken, "the wrong waiter was replaced");
	switch (st) {
	case ACQUIRE_GRANTED:
		CHECK(fz.op_granted && g != NULL && g == g->lead &&
		    g->token == fz.max_token, "GRANTED without its event");
		break;
	case ACQUIRE_QUEUED:
		CHECK(!fz.op_granted && timeout_ms != 0,
		    "a TRY or a granted ACQUIRE queued");
		if (taken != NULL) {
			/* Its place in each queue, its parts in their order. */
			w->seq = taken->seq;
			memcpy(w->parts, taken->parts, sizeof(w->parts));
		}
		w->queued = 1;
		break;
	case ACQUIRE_TIMEOUT:
		CHECK(!fz.op_granted && timeout_ms == 0,
		    "TIMEOUT for an ACQUIRE that may wait");
		fz.stats.timeouts_total++;
		break;
	case ACQUIRE_REPEATED:
		CHECK(!fz.op_granted && g != NULL && g == g->lead &&
		    g->token == repeat->token,
		    "a repeat answered another grant, or granted one");
		break;
	}
}

/* ACQUIRE of n of k: owner, n, timeout, lease (0: bound). No ID. */
static void
op_acquire(int k)
{
	int		o = arg_owner();
	uint32_t	n = arg_n();
	int64_t		timeout_ms = arg_timeout();
	uint8_t		lb = next_byte();

	fz.op_parts[0].sem = k;
	fz.op_parts[0].n = n;
	fz.op_nparts = 1;
	fz.op_lease_ms = lb == 0 ? -1 : (int64_t)(lb - 1) * 10;
	fz.op_id = -1;
	op_request(o, timeout_ms);
}

/* A lease ACQUIRE of k with an ID: owner, n, timeout, lease, ID. */
static void
op_acquire_id(int k)
{
	int		o = arg_owner();
	uint32_t	n = arg_n();
	int64_t		timeout_ms = arg_timeout();

	fz.op_lease_ms = (int64_t)next_byte() * 10;
	fz.op_id = next_byte() % NIDS;
	fz.op_parts[0].sem = k;
	fz.op_parts[0].n = n;
	fz.op_nparts = 1;
	op_request(o, timeout_ms);
}

/*
 * ACQUIREALL from k: owner; a byte for how many semaphores (2..NSEMS,
 * those after k), from which one and in which direction they are
 * listed; an n each; timeout, lease (0: bound), ID (0xc0 and up: none).
 */
static void
op_acquire_all(int k)
{
	int		o = arg_owner();
	uint8_t		b = next_byte(), ib;
	uint32_t	i, nparts = 2 + (uint32_t)b % (NSEMS - 1),
			first = ((uint32_t)b >> 2) % nparts;
	int64_t		timeout_ms;

	for (i = 0; i < nparts; i++) {
		fz.op_parts[i].sem = (k + (int)((first + (b & 0x80 ?
		    nparts - i : i)) % nparts)) % NSEMS;
		fz.op_parts[i].n = arg_n();
	}
	fz.op_nparts = nparts;
	timeout_ms = arg_timeout();
	b = next_byte();
	fz.op_lease_ms = b == 0 ? -1 : (int64_t)(b - 1) * 10;
	ib = next_byte();
	fz.op_id = fz.op_lease_ms >= 0 && ib < 0xc0 ? ib % NIDS : -1;
	op_request(o, timeout_ms);
}

/*
 * Persistence putting back the parts of a restored grant: a byte whose
 * bits 1..NSEMS-1 add a part on each semaphore after k (an n each) and
 * whose bit 0 tries a second part on k; then an ID (0xc0 and up: none)
 * for a lease. Restores come before any request is queued (a daemon
 * loads before it listens), so an ID some waiter has is not tried.
 */
static void
restore_parts(int k, struct grant *g, struct fz_grant *mg)
{
	struct fz_waiter	*mw;
	struct grant		*part;
	struct sem		*s;
	uint8_t			 b = next_byte();
	uint32_t		 n;
	size_t			 i;
	int			 j, sem, id, want = 0;

	for (j = 1; j < NSEMS; j++) {
		n = 1 + (uint32_t)next_byte() % 4;
		sem = (k + j) % NSEMS;
		if (!(b & 1u << j) ||
		    (s = engine_find(fz.e, sem_names[sem], 1)) == NULL)
			continue;
		part = engine_restore_part(fz.e, g, s, n);
		CHECK(part != NULL && part->lead == g && part->n == n &&
		    part->token == g->token && part->kind == g->kind &&
		    part->deadline_ms == g->deadline_ms,
		    "a part of a restored grant not restored");
		mg->parts[mg->nparts].sem = sem;
		mg->parts[mg->nparts++].n = n;
		if (s->used > s->capacity)
			fz.over[sem] = 1;
	}
	if (b & 1)
		CHECK(engine_restore_part(fz.e, g, g->sem, 1) == NULL,
		    "a restored grant got two parts on one semaphore");
	b = next_byte();
	if (g->kind != GRANT_LEASE || b >= 0xc0)
		return;
	id = b % NIDS;
	for (i = 0; i < MAX_WAITERS; i++) {
		mw = &fz.waiters[i];
		if (mw->queued && mw->id == id && parts_overlap(mw->parts,
		    mw->nparts, mg->parts, mg->nparts))
			return;
	}
	for (i = 0; i < fz.ngrants; i++) {
		if (&fz.grants[i] != mg && fz.grants[i].id == id &&
		    parts_overlap(fz.grants[i].parts, fz.grants[i].nparts,
		    mg->parts, mg->nparts))
			want = -1;
	}
	CHECK(engine_grant_set_id(fz.e, g, id_names[id],
	    strlen(id_names[id])) == want,
	    "a restored lease took an ID another lease holds, or was refused");
	if (want == 0)
		mg->id = id;
}

/* RESTORE: a grant of k put back; multi also restores parts and an ID. */
static void
op_restore(int k, struct sem *s, int multi)
{
	struct grant	*g;
	struct fz_part	 part;
	uint8_t		 tb = next_byte(), nb = next_byte(),
			 kb = next_byte(), ttl = next_byte();
	uint64_t	 token;
	uint32_t	 n = 1 + (uint32_t)nb % 4;
	enum grant_kind	 kind = kb & 1 ? GRANT_UNOWNED : GRANT_LEASE;

	if (tb >= 0xf0 && fz.ngrants > 0)
		token = fz.grants[tb % fz.ngrants].token;
	else if (tb >= 0xe8)
		token = UINT64_MAX - (tb & 7);	/* a corrupt store's */
	else
		token = fz.max_token + 1 + tb % 8;
	if (fz.ngrants + model_nqueued() + 1 > MAX_GRANTS)
		return;
	g = engine_restore_grant(fz.e, s, token, n, kind,
	    (uint64_t)ttl * 10);
	if (token > ENGINE_TOKEN_MAX) {
		CHECK(g == NULL, "a token above ENGINE_TOKEN_MAX restored");
		return;
	}
	if (model_grant(token) != NULL) {
		CHECK(g == NULL, "a held token restored twice");
		return;
	}
	CHECK(g != NULL && g->token == token && g->n == n && g->kind == kind,
	    "a restore failed");
	part.sem = k;
	part.n = n;
	model_grant_add(token, &part, 1, kind, -1, -1);
	if (token > fz.max_token)
		fz.max_token = token;
	if (s->used > s->capacity)
		fz.over[k] = 1;
	if (multi)
		restore_parts(k, g, model_grant(token));
}

/* Free owner o, dropping the model's waiters first: none may be granted. */
static void
owner_free(int o)
{
	size_t	i;

	for (i = 0; i < MAX_WAITERS; i++) {
		if (fz.waiters[i].queued && fz.waiters[i].owner == o)
			fz.waiters[i].queued = 0;
	}
	fz.op_owner = o;
	engine_owner_free(fz.e, fz.owners[o]);
	fz.owners[o] = NULL;
	fz.op_owner = -1;
	for (i = 0; i < fz.ngrants; i++) {
		CHECK(fz.grants[i].owner != o,
		    "a bound grant outlived its owner");
	}
}

static void
run_op(void)
{
	struct sem	*s;
	struct grant	*g;
	struct fz_grant	*mg;
	enum proto_err	 rc, want;
	uint64_t	 token;
	uint32_t	 cap;
	uint8_t		 b;
	int		 k, o;

	b = next_byte();
	fz.op = b < OP_BYTE_NEW ? b % OP_NOLD :
	    OP_NOLD + (b - OP_BYTE_NEW) % (OP__COUNT - OP_NOLD);
	k = next_byte() % NSEMS;
	s = engine_find(fz.e, sem_names[k], 1);
	if (s == NULL && fz.op != OP_CREATE && fz.op != OP_OWNER_NEW &&
	    fz.op != OP_OWNER_FREE && fz.op != OP_HOLD &&
	    fz.op != OP_ADVANCE && fz.op != OP_FLOOR && fz.op != OP_CLEAR)
		return;
	switch (fz.op) {
	case OP_CREATE:
		cap = arg_capacity(1);
		rc = engine_create(fz.e, sem_names[k], 1, cap, &s);
		if (fz.exists[k]) {
			CHECK(rc == (cap == fz.capacity[k] ? PERR_NONE :
			    PERR_EXISTS), "CREATE of an existing semaphore");
		} else if (rc == PERR_NONE) {
			fz.exists[k] = 1;
			fz.capacity[k] = cap;
			fz.over[k] = 0;
		} else
			CHECK(rc == PERR_LIMIT && s == NULL, "CREATE failed");
		break;
	case OP_RESIZE:
		cap = arg_capacity(0);
		fz.capacity[k] = cap;
		engine_resize(fz.e, s, cap);
		if (s->used > cap)
			fz.over[k] = 1;
		break;
	case OP_DELETE:
		rc = engine_delete(fz.e, s);
		CHECK(rc == PERR_NONE || rc == PERR_BUSY, "DELETE failed");
		if (rc == PERR_NONE)
			fz.exists[k] = 0;
		break;
	case OP_ACQUIRE:
		op_acquire(k);
		break;
	case OP_ACQUIRE_ALL:
		op_acquire_all(k);
		break;
	case OP_ACQUIRE_ID:
		op_acquire_id(k);
		break;
	case OP_RELEASE:
		fz.op_token = token = arg_token();
		o = next_byte() % (NOWNERS + 1);	/* NOWNERS: nobody */
		mg = model_grant_on(token, k);
		want = mg == NULL ? PERR_NOTHELD : mg->kind == GRANT_CONN &&
		    mg->owner != o ? PERR_NOTOWNER : PERR_NONE;
		rc = engine_release(fz.e, s, token,
		    o < NOWNERS ? fz.owners[o] : NULL);
		CHECK(rc == want, "RELEASE answered wrong");
		break;
	case OP_REFRESH:
		fz.op_token = token = arg_token();
		mg = model_grant_on(token, k);
		want = mg == NULL ? PERR_NOTHELD : mg->kind != GRANT_LEASE ?
		    PERR_NOTLEASE : PERR_NONE;
		rc = engine_refresh(fz.e, s, token, (uint32_t)next_byte() * 10);
		CHECK(rc == want, "REFRESH answered wrong");
		break;
	case OP_ATTACH:
		fz.op_token = token = arg_token();
		o = arg_owner();
		if (fz.owners[o] == NULL)
			break;
		mg = model_grant_on(token, k);
		want = mg == NULL ? PERR_NOTHELD : mg->kind == GRANT_LEASE ?
		    PERR_NOTLEASE : mg->kind == GRANT_CONN && mg->owner != o ?
		    PERR_NOTOWNER : PERR_NONE;
		rc = engine_attach(fz.e, s, token, fz.owners[o]);
		CHECK(rc == want, "ATTACH answered wrong");
		break;
	case OP_REVOKE:
		fz.op_token = token = arg_token();
		want = model_grant_on(token, k) == NULL ? PERR_NOTHELD :
		    PERR_NONE;
		rc = engine_revoke(fz.e, s, token);
		CHECK(rc == want, "REVOKE answered wrong");
		break;
	case OP_UNDO:
		fz.op_token = token = arg_token();
		if (model_grant_on(token, k) != NULL)
			engine_undo_grant(fz.e, engine_find_grant(fz.e, s, token));
		break;
	case OP_OWNER_NEW:
		o = arg_owner();
		if (fz.owners[o] == NULL)
			fz.owners[o] = engine_owner_new(fz.e, (uint64_t)o + 1);
		break;
	case OP_OWNER_FREE:
		o = arg_owner();
		if (fz.owners[o] != NULL)
			owner_free(o);
		break;
	case OP_HOLD:
		fz.held = next_byte() & 1;
		engine_hold_grants(fz.e, fz.held);
		break;
	case OP_ADVANCE:
		b = next_byte();
		fake_advance(b == 0xff ? 100000 : (uint64_t)b * 5);
		break;
	case OP_RESTORE:
		op_restore(k, s, 0);
		break;
	case OP_RESTORE_MULTI:
		op_restore(k, s, 1);
		break;
	case OP_FLOOR:
		b = next_byte();
		token = b >= 0xf8 ? UINT64_MAX - (b & 7) : fz.max_token + b;
		engine_raise_token_floor(fz.e, token);
		if (token > ENGINE_TOKEN_MAX)
			token = ENGINE_TOKEN_MAX;
		if (token > fz.max_token)
			fz.max_token = token;
		break;
	case OP_HOLDER:
		token = arg_token();
		if ((g = engine_find_grant(fz.e, s, token)) != NULL) {
			b = next_byte();
			/* The server labels the lead: only its are kept. */
			engine_grant_set_holder(g->lead,
			    b & 1 ? "worker@host" : NULL,
			    b & 2 ? "127.0.0.1:4000" : NULL);
		}
		break;
	case OP_CLEAR:
		for (o = 0; o < NOWNERS; o++) {
			if (fz.owners[o] != NULL)
				owner_free(o);
		}
		engine_clear(fz.e);
		memset(fz.exists, 0, sizeof(fz.exists));
		fz.ngrants = 0;
		break;
	case OP__COUNT:
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int	o;
	uint8_t	b;

	memset(&fz, 0, sizeof(fz));
	fz.p = data;
	fz.left = size;
	fz.op_owner = -1;
	fake_reset(1000);
	/*
	 * The first byte bounds CREATE (0: no bound), as max-semaphores, and
	 * makes timers fire up to 7 ms early, as libevent's can.
	 */
	b = next_byte();
	fz.e = engine_new(&fake_clock, on_event, NULL, b % 4);
	fake_early = (b >> 2) & 7;
	while (fz.left > 0) {
		run_op();
		fz.op = OP__COUNT;
		check_all();
		fz.op_index++;
	}
	for (o = 0; o < NOWNERS; o++) {
		if (fz.owners[o] != NULL)
			owner_free(o);
	}
	engine_free(fz.e);
	CHECK(fake_ntimers == 0, "engine_free left timers armed");
	return (0);
}
