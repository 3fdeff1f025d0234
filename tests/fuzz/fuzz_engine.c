/*
 * fuzz_engine.c: libFuzzer harness for the semaphore rules (daemon/engine.c).
 *
 * The input is a stream of operations, one opcode byte then its argument
 * bytes (0 once the input runs out): create, resize, delete, acquire (n,
 * timeout, lease), release, refresh, attach, revoke, undo, owner new and
 * free, hold grants, advance the fake clock (firing due timers), restore a
 * grant, raise the token floor, label a grant, clear. The harness keeps its
 * own model of grants and queued waiters, fed by the engine's events, and
 * aborts as soon as the engine disagrees with it or with a rule:
 *
 * - used is the sum of n over the grants; nholders and nwaiters count the
 *   lists; the engine's stats count what the model holds and the events
 *   it saw; every answer (NOTHELD, NOTOWNER, NOTLEASE...) follows from
 *   the model;
 * - used <= capacity, unless a restored grant or a RESIZE below used put
 *   it over (until it falls back); a grant is never made over capacity;
 * - FIFO: a queued waiter is granted only at the head of its queue, in
 *   enqueue order; an ACQUIRE is granted at once only when nobody waits;
 *   after every operation the head of a queue does not fit (else the
 *   engine should have granted it), unless grants are held;
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
	OP_ADVANCE, OP_RESTORE, OP_FLOOR, OP_HOLDER, OP_CLEAR, OP__COUNT
};

/* A queued ACQUIRE, as the model sees it; its address is the cookie. */
struct fz_waiter {
	int		 queued;
	int		 sem;
	int		 owner;
	uint32_t	 n;
	int64_t		 lease_ms;
	uint64_t	 seq;		/* enqueue order */
	uint64_t	 deadline_ms;	/* UINT64_MAX: none */
};

struct fz_grant {
	uint64_t	 token;
	int		 sem;
	uint32_t	 n;
	enum grant_kind	 kind;
	int		 owner;		/* GRANT_CONN only, else -1 */
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
	int			 op_sem;
	int			 op_owner;	/* OP_OWNER_FREE's, else -1 */
	uint64_t		 op_token;
	uint32_t		 op_n;
	int64_t			 op_lease_ms;
	int			 op_granted;	/* an ACQUIRE granted at once */
} fz;

static const char *const sem_names[NSEMS] = { "a", "b", "c", "d" };

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

/* The model's grant of that token if it is on sem, else NULL. */
static struct fz_grant *
model_grant_on(uint64_t token, int sem)
{
	struct fz_grant	*mg = model_grant(token);

	return (mg != NULL && mg->sem == sem ? mg : NULL);
}

static void
model_grant_add(uint64_t token, int sem, uint32_t n, enum grant_kind kind,
    int owner)
{
	struct fz_grant	*mg;

	CHECK(model_grant(token) == NULL, "a token is granted twice");
	CHECK(fz.ngrants < MAX_GRANTS, "more grants than the model allows");
	mg = &fz.grants[fz.ngrants++];
	mg->token = token;
	mg->sem = sem;
	mg->n = n;
	mg->kind = kind;
	mg->owner = owner;
}

static size_t
model_nqueued(void)
{
	size_t	i, n = 0;

	for (i = 0; i < MAX_WAITERS; i++)
		n += fz.waiters[i].queued;
	return (n);
}

/* The model's head of sem's queue (lowest seq), or NULL. */
static struct fz_waiter *
model_head(int sem)
{
	struct fz_waiter	*w, *head = NULL;
	size_t			 i;

	for (i = 0; i < MAX_WAITERS; i++) {
		w = &fz.waiters[i];
		if (w->queued && w->sem == sem &&
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

static void
on_granted(const struct engine_event *ev, int sem)
{
	struct grant		*g = ev->grant;
	struct fz_waiter	*w;
	struct sem		*s = ev->sem;

	CHECK(!fz.held, "a grant while grants are held");
	fz.stats.grants_total++;
	CHECK(g->token > fz.max_token, "tokens do not strictly increase");
	fz.max_token = g->token;
	CHECK(s->used <= s->capacity, "a grant made over capacity");
	if (ev->cookie == NULL) {
		/* engine_acquire granting at once: only with nobody queued. */
		CHECK(fz.op == OP_ACQUIRE && !fz.op_granted &&
		    fz.op_sem == sem, "an unexpected immediate grant");
		CHECK(s->queue == NULL && model_head(sem) == NULL,
		    "an ACQUIRE overtook queued waiters");
		CHECK(g->n == fz.op_n, "granted another n than asked");
		fz.op_granted = 1;
		if (fz.op_lease_ms < 0) {
			CHECK(g->kind == GRANT_CONN, "a bound ACQUIRE got a lease");
			model_grant_add(g->token, sem, g->n, GRANT_CONN,
			    owner_index(g->owner));
		} else {
			CHECK(g->kind == GRANT_LEASE, "a lease ACQUIRE is bound");
			model_grant_add(g->token, sem, g->n, GRANT_LEASE, -1);
		}
		return;
	}
	w = cookie_waiter(ev->cookie);
	CHECK(w->sem == sem, "a waiter granted on another semaphore");
	CHECK(model_head(sem) == w, "a waiter granted before an earlier one");
	CHECK(g->n == w->n, "a waiter granted another n than it asked");
	w->queued = 0;
	if (w->lease_ms < 0) {
		CHECK(g->kind == GRANT_CONN &&
		    owner_index(g->owner) == w->owner,
		    "a bound waiter granted to another owner");
		model_grant_add(g->token, sem, g->n, GRANT_CONN, w->owner);
	} else {
		CHECK(g->kind == GRANT_LEASE && g->owner == NULL,
		    "a lease waiter granted a bound grant");
		model_grant_add(g->token, sem, g->n, GRANT_LEASE, -1);
	}
}

static void
on_released(const struct engine_event *ev, int sem)
{
	struct grant	*g = ev->grant;
	struct fz_grant	*mg = model_grant(g->token);

	CHECK(mg != NULL, "a release of a grant the model does not hold");
	CHECK(mg->sem == sem && mg->n == g->n && mg->kind == g->kind,
	    "a released grant is not the one granted");
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
		CHECK(w->sem == sem, "a waiter timed out on another semaphore");
		w->queued = 0;
		fz.stats.timeouts_total++;
		break;
	case ENGINE_EV_WAIT_REPLACED:
		/* (tests/test_multi.c has IDs and multi-grants) */
		CHECK(0, "a waiter replaced, though no request has an ID");
		break;
	}
	msg = fake_check_sem(ev->sem);
	CHECK(msg == NULL, msg);
}

/* Everything the model knows agrees with the engine. */
static void
check_all(void)
{
	struct engine_stats	 st;
	struct sem		*s;
	struct grant		*g;
	struct waiter		*w;
	struct fz_waiter	*mw;
	struct fz_grant		*mg;
	const char		*msg;
	uint64_t		 used, last = 0;
	size_t			 i, ntimers = 0, nsems = 0;
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
		for (used = 0, i = 0; i < fz.ngrants; i++) {
			if (fz.grants[i].sem == k)
				used += fz.grants[i].n;
		}
		CHECK(s->used == used, "used is not what the model granted");
		if (s->used <= s->capacity)
			fz.over[k] = 0;
		CHECK(!fz.over[k] ? s->used <= s->capacity : 1,
		    "used went over capacity");
		/* The queue is the model's, in enqueue order. */
		last = 0;
		DL_FOREACH2(s->queue, w, q_next) {
			mw = cookie_waiter(w->cookie);
			CHECK(mw->sem == k && mw->seq > last && mw->n == w->n,
			    "the queue is not in enqueue order");
			last = mw->seq;
			CHECK(engine_waited_ms(fz.e, w) ==
			    fake_now - w->enqueued_ms, "a wrong wait time");
			ntimers += w->timer != NULL;
			CHECK((w->timer != NULL) ==
			    (mw->deadline_ms != UINT64_MAX),
			    "a waiter's timer is missing or extra");
		}
		if (!fz.held && s->queue != NULL) {
			CHECK(s->used + s->queue->n > s->capacity,
			    "the head of a queue fits but was not granted");
		}
	}
	for (i = 0; i < fz.ngrants; i++) {
		mg = &fz.grants[i];
		g = engine_grant_by_token(fz.e, mg->token);
		CHECK(g != NULL && g->n == mg->n && g->kind == mg->kind,
		    "a grant of the model is missing");
		CHECK(mg->kind == GRANT_CONN ?
		    g->owner == fz.owners[mg->owner] && g->timer == NULL :
		    g->owner == NULL && g->timer != NULL,
		    "a grant's owner or timer is wrong");
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

static void
op_acquire(int k, struct sem *s)
{
	enum acquire_status	 st;
	enum proto_err		 rc;
	struct grant		*g;
	struct fz_waiter	*w = NULL;
	int			 o = arg_owner();
	uint8_t			 nb = next_byte(), tb = next_byte(),
				 lb = next_byte();
	int64_t			 timeout_ms, lease_ms;
	size_t			 i;

	fz.op_n = nb == 0xff ? PROTO_INT_MAX : 1 + (uint32_t)nb % 4;
	timeout_ms = tb == 0 ? 0 : tb == 1 ? -1 : (int64_t)(tb - 2) * 10;
	lease_ms = lb == 0 ? -1 : (int64_t)(lb - 1) * 10;
	fz.op_lease_ms = lease_ms;
	if (fz.owners[o] == NULL ||
	    fz.ngrants + model_nqueued() + 1 > MAX_GRANTS)
		return;
	for (i = 0; i < MAX_WAITERS && w == NULL; i++) {
		if (!fz.waiters[i].queued)
			w = &fz.waiters[i];
	}
	if (w == NULL)
		return;
	w->sem = k;
	w->owner = o;
	w->n = fz.op_n;
	w->lease_ms = lease_ms;
	w->seq = ++fz.seq;
	w->deadline_ms = timeout_ms > 0 ? fake_now + (uint64_t)timeout_ms :
	    UINT64_MAX;
	fz.op_granted = 0;
	rc = engine_acquire(fz.e, s, fz.owners[o], fz.op_n, timeout_ms,
	    lease_ms, w, &st, &g);
	if (fz.op_n > s->capacity) {
		CHECK(rc == PERR_RANGE, "n > capacity was not refused");
		return;
	}
	if (fz.held) {
		CHECK(rc == PERR_UNAVAILABLE, "an ACQUIRE while held");
		return;
	}
	CHECK(rc == PERR_NONE, "an ACQUIRE refused");
	switch (st) {
	case ACQUIRE_GRANTED:
		CHECK(fz.op_granted && g != NULL && g->n == fz.op_n,
		    "GRANTED without its event");
		break;
	case ACQUIRE_QUEUED:
		CHECK(!fz.op_granted && timeout_ms != 0,
		    "a TRY or a granted ACQUIRE queued");
		w->queued = 1;
		break;
	case ACQUIRE_TIMEOUT:
		CHECK(!fz.op_granted && timeout_ms == 0,
		    "TIMEOUT for an ACQUIRE that may wait");
		CHECK(s->queue != NULL || s->used + fz.op_n > s->capacity,
		    "a TRY refused although it fits");
		fz.stats.timeouts_total++;
		break;
	case ACQUIRE_REPEATED:
		CHECK(0, "a repeat, though no request has an ID");
		break;
	}
}

static void
op_restore(int k, struct sem *s)
{
	struct grant	*g;
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
	model_grant_add(token, k, n, kind, -1);
	if (token > fz.max_token)
		fz.max_token = token;
	if (s->used > s->capacity)
		fz.over[k] = 1;
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

	fz.op = next_byte() % OP__COUNT;
	k = fz.op_sem = next_byte() % NSEMS;
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
		op_acquire(k, s);
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
		op_restore(k, s);
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
			engine_grant_set_holder(g, b & 1 ? "worker@host" : NULL,
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
