/*
 * persist.c: persistence policy (see persist.h and README "Persistence").
 *
 * The backlog is a set of dirty objects, not a log of operations: a
 * semaphore name or a grant token that changed since it was last written.
 * A batch writes each one's state *now* (put, or delete when it is gone),
 * so writes are idempotent, a failed batch is simply marked dirty again,
 * and many changes to one object cost one write. Batches are acknowledged
 * in order on one connection, so Redis always moves from one consistent
 * state of semd's to a later one.
 *
 * Pipelining: up to persistence-pipeline batches are in flight at once
 * (a flight each: what it wrote, the replies it holds, the token bound it
 * raises). Redis answers them in order and fsyncs once per event-loop
 * turn, so batches sent together share an fsync, and a waiter woken while
 * a batch is in flight goes out with the next one instead of waiting for
 * it. A grant is still answered only once the batch holding it is
 * acknowledged; when one fails, the store fails every later one too, and
 * all of them are dirty again, in order.
 *
 * Tokens: Redis's bound (P tokens) is kept at least TOKEN_BLOCK / 2 ahead
 * of the last token issued, raised inside the same fenced script call as
 * the grants that need it. A grant therefore never costs an extra round trip,
 * and after any crash the bound is above every token a client ever saw.
 *
 * If Redis comes back with a lower bound than it acknowledged (flushed,
 * restarted without its data, restored from an old snapshot), or if the
 * backlog outgrew persistence-backlog, Redis is rewritten from memory:
 * semd's memory is the truth, Redis its copy.
 *
 * Ownership: before it loads, semd claims the data set (store.h). The
 * claim, and every acknowledged write or heartbeat after it, proves that
 * the owner key names us for owner-lease from the moment it was sent, so
 * we may act as owner until then, less a margin for clock-rate drift
 * (owner_until_ms, on our own monotonic clock). Past that moment another
 * daemon may take over, so we stop first: nothing more is granted, every
 * client connection is closed (their bound permits are then unowned in
 * Redis, and only the next owner's reclaim-grace, which starts after its
 * claim, can release them), memory is dropped, and we claim again: as a
 * standby, or with standby no only to resume the very epoch we held.
 * Regained or taken over, the data set is loaded as after a restart.
 * The timer at that moment can run late (a stopped process, a busy loop),
 * so the deadline is also checked before anything is answered or written
 * (persist_owner_check) and when an acknowledgement arrives: one that
 * comes after the deadline proves nothing and counts as not persisted.
 *
 * A daemon remembers the highest epoch and token bound it has seen in
 * Redis. It never claims a data set whose epoch counter went below that
 * (Redis lost its data: the owner, if alive, restores its claim and
 * rewrites Redis from memory), and its tokens continue above every bound
 * it saw, so tokens never repeat across a flush.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "log.h"
#include "persist.h"
#include "store.h"
#include "timers.h"

#define TOKEN_BLOCK		1000
#define PERSIST_RETRY_LOAD_MS	1000
/* A standby claims this often at the most (owner-lease / 4 if less). */
#define PERSIST_POLL_MAX_MS	500
#define PERSIST_CLAIM_BACKOFF_MAX_MS 2000
/* A load that fails is retried with backoff, up to this. */
#define PERSIST_LOAD_BACKOFF_MAX_MS 30000

enum persist_state {
	PST_OFF,	/* persistence none */
	PST_LOADING,	/* start-up: reading the store */
	PST_DOWN,	/* the store cannot be written now */
	PST_UP
};

static const char *const state_names[] = { "off", "loading", "down", "ok" };
static const char *const role_names[] = { "single", "owner", "standby" };

struct dirty_sem {
	char		 name[PROTO_NAME_MAX + 1];
	size_t		 len;
	UT_hash_handle	 hh;
};

struct dirty_grant {
	uint64_t	 token;
	char		 sem[PROTO_NAME_MAX + 1];	/* for its removal */
	size_t		 sem_len;
	UT_hash_handle	 hh;
};

/* One batch in flight: what it writes, and what waits for it. */
struct flight {
	struct dirty_sem	*sems;
	struct dirty_grant	*grants;
	struct await		*awaits;	/* answered when it lands */
	uint64_t		 tokens;	/* Redis's bound once it lands */
	int			 resync;	/* it rewrites Redis whole */
	uint64_t		 sent_ms;	/* for the batch histogram */
	struct flight		*next;
};

struct await {
	enum persist_outcome	 outcome;	/* of a failed batch */
	uint64_t		 conn_id;
	enum persist_await_kind	 kind;
	uint64_t		 token;
	uint32_t		 ms;
	struct await		*next;
};

struct persist {
	struct config		*cfg;
	struct event_base	*base;
	struct engine		*engine;
	persist_answer_fn	 answer;
	void			*ctx;
	const struct store_ops	*ops;
	struct store		*store;
	enum persist_state	 state;
	enum persist_role	 role;
	uint64_t		 epoch;		/* the owner's, as last seen */
	char			 owner_addr[STORE_ADDR_MAX];
	char			 advertise[STORE_ADDR_MAX];
	uint64_t		 owner_until_ms; /* act as owner until then */
	uint64_t		 held_epoch;	/* ours before we lost it */
	uint64_t		 owned_seen_ms;	/* standby no: saw another owner */
	uint64_t		 claim_backoff_ms; /* claims failing: the next try */
	struct log_repeat	 claim_failure;
	uint64_t		 load_backoff_ms; /* loads failing: the next try */
	struct log_repeat	 load_failure;
	struct log_repeat	 epoch_wait;	/* Redis lost its epoch counter */
	uint64_t		 seen_epoch;	/* the highest seen in Redis */
	uint64_t		 seen_tokens;	/* the highest token bound seen */
	char			 subject[320];	/* "redis ADDRESS", for the log */
	int			 listening;	/* the server listens */

	struct dirty_sem	*dirty_sems;
	struct dirty_grant	*dirty_grants;
	/* Replies held for the store, oldest first: answered in order. */
	struct await		*awaits;
	struct await		**awaits_tail;	/* &last->next, or &awaits */
	struct await		*failed;	/* of failed batches, in order */
	struct await		**failed_tail;
	struct flight		*flights;	/* in flight, oldest first */
	struct flight		**flights_tail;
	unsigned		 nflights;
	int			 resync;	/* rewrite Redis whole */
	char			**stale_names;	/* in Redis; to delete first */
	size_t			 nstale;

	uint64_t		 tokens_acked;	/* Redis's bound, as written */
	uint64_t		 tokens_sent;	/* ...or as in flight */

	struct event		*flush_ev;
	struct event		*claim_ev;	/* claim (and load) next */
	struct event		*owner_ev;	/* at owner_until_ms */
	const struct persist_hooks *hooks;
	void			*arg;

	uint64_t		 batches;
	uint64_t		 failures;
	struct histo		 batch_ms;	/* send to acknowledgement */
	char			 last_error[512];
	uint32_t		 load_sems, load_grants, load_unowned;
	char			**load_damaged;	/* their capacity is unknown */
	size_t			 nload_damaged;
};

static void
persist_schedule(struct persist *p)
{
	if (p->state == PST_UP)
		event_active(p->flush_ev, 0, 0);
}

static uint64_t
persist_backlog(struct persist *p)
{
	return (HASH_COUNT(p->dirty_sems) + HASH_COUNT(p->dirty_grants));
}

static void
dirty_clear(struct dirty_sem **sems, struct dirty_grant **grants)
{
	struct dirty_sem	*ds, *dstmp;
	struct dirty_grant	*dg, *dgtmp;

	HASH_ITER(hh, *sems, ds, dstmp) {
		HASH_DEL(*sems, ds);
		free(ds);
	}
	HASH_ITER(hh, *grants, dg, dgtmp) {
		HASH_DEL(*grants, dg);
		free(dg);
	}
}

static void
dirty_sem_add(struct dirty_sem **set, const char *name, size_t len)
{
	struct dirty_sem	*ds;

	HASH_FIND(hh, *set, name, len, ds);
	if (ds != NULL)
		return;
	ds = xcalloc(1, sizeof(*ds));
	memcpy(ds->name, name, len);
	ds->len = len;
	HASH_ADD_KEYPTR(hh, *set, ds->name, ds->len, ds);
}

static void
dirty_grant_add(struct dirty_grant **set, uint64_t token, const char *sem,
    size_t sem_len)
{
	struct dirty_grant	*dg;

	HASH_FIND(hh, *set, &token, sizeof(token), dg);
	if (dg != NULL)
		return;
	dg = xcalloc(1, sizeof(*dg));
	dg->token = token;
	memcpy(dg->sem, sem, sem_len);
	dg->sem_len = sem_len;
	HASH_ADD(hh, *set, token, sizeof(dg->token), dg);
}

/* A failed batch: what it carried is dirty again (unless already so). */
static void
dirty_merge_flight(struct persist *p, struct flight *f)
{
	struct dirty_sem	*ds, *dstmp;
	struct dirty_grant	*dg, *dgtmp;

	HASH_ITER(hh, f->sems, ds, dstmp)
		dirty_sem_add(&p->dirty_sems, ds->name, ds->len);
	HASH_ITER(hh, f->grants, dg, dgtmp)
		dirty_grant_add(&p->dirty_grants, dg->token, dg->sem,
		    dg->sem_len);
	dirty_clear(&f->sems, &f->grants);
	if (f->resync)
		p->resync = 1;
	f->resync = 0;
}

/* A new flight at the tail. */
static struct flight *
flight_push(struct persist *p)
{
	struct flight	*f = xcalloc(1, sizeof(*f));

	f->sent_ms = timers_now_ms();
	*p->flights_tail = f;
	p->flights_tail = &f->next;
	p->nflights++;
	return (f);
}

/* The oldest flight, unlinked; the caller frees it. */
static struct flight *
flight_pop(struct persist *p)
{
	struct flight	*f = p->flights;

	if (f == NULL)
		return (NULL);
	if ((p->flights = f->next) == NULL)
		p->flights_tail = &p->flights;
	p->nflights--;
	f->next = NULL;
	return (f);
}

void
persist_observe(struct persist *p, const struct engine_event *ev)
{
	if (p->state == PST_OFF || p->state == PST_LOADING)
		return;
	switch (ev->type) {
	case ENGINE_EV_SEM_CREATED:
	case ENGINE_EV_SEM_RESIZED:
	case ENGINE_EV_SEM_DELETED:
		dirty_sem_add(&p->dirty_sems, ev->sem->name, ev->sem->name_len);
		break;
	case ENGINE_EV_GRANTED:
	case ENGINE_EV_RELEASED:
	case ENGINE_EV_REFRESHED:
	case ENGINE_EV_ATTACHED:
		dirty_grant_add(&p->dirty_grants, ev->grant->token,
		    ev->sem->name, ev->sem->name_len);
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
		return;
	}
	if (persist_backlog(p) > (uint64_t)p->cfg->persistence_backlog) {
		/* Memory stays bounded; Redis is rewritten when it is back. */
		log_warnx("persistence backlog over %lld changes: dropping it; "
		    "redis will be rewritten from memory when it is back",
		    (long long)p->cfg->persistence_backlog);
		dirty_clear(&p->dirty_sems, &p->dirty_grants);
		p->resync = 1;
	}
	persist_schedule(p);
}

/* --- building a batch --- */

struct batch {
	struct store_change	*ch;
	size_t			 n, cap;
};

static struct store_change *
batch_add(struct batch *b)
{
	if (b->n == b->cap) {
		b->cap = b->cap == 0 ? 64 : b->cap * 2;
		if ((b->ch = realloc(b->ch, b->cap * sizeof(*b->ch))) == NULL)
			abort();
	}
	memset(&b->ch[b->n], 0, sizeof(b->ch[0]));
	return (&b->ch[b->n++]);
}

static void
batch_sem(struct batch *b, const char *name, size_t len, const struct sem *s)
{
	struct store_change	*c = batch_add(b);

	c->type = s != NULL ? STORE_SEM_PUT : STORE_SEM_DEL;
	c->sem = name;
	c->sem_len = len;
	c->capacity = s != NULL ? s->capacity : 0;
}

static void
batch_grant(struct persist *p, struct batch *b, const char *sem, size_t len,
    uint64_t token, const struct grant *g)
{
	struct store_change	*c = batch_add(b);

	c->type = g != NULL ? STORE_GRANT_PUT : STORE_GRANT_DEL;
	c->sem = sem;
	c->sem_len = len;
	c->token = token;
	if (g == NULL)
		return;
	c->n = g->n;
	c->holder_name = g->holder_name;
	c->holder_addr = g->holder_addr;
	if (g->kind == GRANT_LEASE) {
		c->kind = STORE_KIND_LEASE;
		c->lease_ms = (uint64_t)engine_grant_ttl_ms(p->engine, g);
	} else
		c->kind = STORE_KIND_CONN;	/* unowned is conn too */
}

/* Keep Redis's token bound TOKEN_BLOCK / 2 ahead of the last token. */
static void
batch_tokens(struct persist *p, struct batch *b, int force)
{
	uint64_t		 last = engine_last_token(p->engine);
	struct store_change	*c;

	if (!force && p->tokens_sent >= last + TOKEN_BLOCK / 2)
		return;
	if (p->tokens_sent < last + TOKEN_BLOCK)
		p->tokens_sent = last + TOKEN_BLOCK;
	c = batch_add(b);
	c->type = STORE_TOKENS;
	c->token = p->tokens_sent;
}

/* The dirty objects' current state; they move to flight f. */
static void
batch_from_dirty(struct persist *p, struct batch *b, struct flight *f)
{
	struct dirty_sem	*ds;
	struct dirty_grant	*dg;

	f->sems = p->dirty_sems;
	f->grants = p->dirty_grants;
	p->dirty_sems = NULL;
	p->dirty_grants = NULL;
	for (ds = f->sems; ds != NULL; ds = ds->hh.next)
		batch_sem(b, ds->name, ds->len,
		    engine_find(p->engine, ds->name, ds->len));
	for (dg = f->grants; dg != NULL; dg = dg->hh.next)
		batch_grant(p, b, dg->sem, dg->sem_len, dg->token,
		    engine_grant_by_token(p->engine, dg->token));
	batch_tokens(p, b, 0);
}

/* Everything, after deleting what Redis holds: it lost or missed data. */
static void
batch_full(struct persist *p, struct batch *b, struct flight *f)
{
	struct sem	*s;
	struct grant	*g;
	size_t		 i;

	dirty_clear(&p->dirty_sems, &p->dirty_grants);
	for (i = 0; i < p->nstale; i++)
		batch_sem(b, p->stale_names[i], strlen(p->stale_names[i]),
		    NULL);
	for (s = engine_sems(p->engine); s != NULL; s = s->hh.next) {
		batch_sem(b, s->name, s->name_len, s);
		for (g = s->grants; g != NULL; g = g->sem_next)
			batch_grant(p, b, s->name, s->name_len, g->token, g);
	}
	batch_tokens(p, b, 1);
	p->resync = 0;
	f->resync = 1;
}

static void
persist_free_stale(struct persist *p)
{
	size_t	i;

	for (i = 0; i < p->nstale; i++)
		free(p->stale_names[i]);
	free(p->stale_names);
	p->stale_names = NULL;
	p->nstale = 0;
}

/* flush_ev: send what gathered, if the store can take a batch now. */
static void
persist_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct persist	*p = arg;
	struct batch	 b = { NULL, 0, 0 };
	struct flight	*f;

	(void)fd;
	(void)what;
	if (p->state != PST_UP || !p->ops->can_submit(p->store))
		return;		/* batch_done or ready will call again */
	if (!persist_owner_check(p))
		return;		/* past the deadline: nothing more is sent */
	if (!p->resync && persist_backlog(p) == 0 && p->awaits == NULL) {
		batch_tokens(p, &b, 0);
		if (b.n == 0)
			return;
	}
	f = flight_push(p);
	if (p->resync) {
		log_info("redis %s: rewriting it from memory",
		    p->ops->address(p->store));
		batch_full(p, &b, f);
	} else if (b.n == 0)
		batch_from_dirty(p, &b, f);
	f->tokens = p->tokens_sent;
	f->awaits = p->awaits;
	p->awaits = NULL;
	p->awaits_tail = &p->awaits;
	p->ops->submit(p->store, b.ch, b.n);
	free(b.ch);
	/* Only now: the batch pointed into the stale names. */
	persist_free_stale(p);
}

/* --- answers held back in sync mode --- */

/* Drop a list of held-back answers unanswered (shutdown). */
static void
await_free_list(struct await **list)
{
	struct await	*a;

	while ((a = *list) != NULL) {
		*list = a->next;
		free(a);
	}
}

/*
 * Answer a list of held-back replies: PERSIST_OK, or each with the outcome
 * of its failed batch (outcome is then PERSIST_FAILED or _UNKNOWN, for
 * replies whose batch was never sent).
 */
static void
persist_answer_all(struct persist *p, struct await **list,
    enum persist_outcome outcome)
{
	struct await	*a;
	struct grant	*g;
	enum persist_outcome o;

	while ((a = *list) != NULL) {
		*list = a->next;
		o = outcome == PERSIST_OK ? PERSIST_OK :
		    a->outcome != PERSIST_OK ? a->outcome : outcome;
		/*
		 * Not granted: take it back before saying so. The removal is
		 * written with the next batch, which also undoes a write
		 * whose outcome was unknown.
		 */
		if (o != PERSIST_OK && a->kind == AWAIT_GRANT &&
		    (g = engine_grant_by_token(p->engine, a->token)) != NULL)
			engine_undo_grant(p->engine, g);
		p->answer(p->ctx, a->conn_id, a->kind, a->token, a->ms, o);
		free(a);
	}
}

void
persist_await(struct persist *p, uint64_t conn_id,
    enum persist_await_kind kind, uint64_t token, uint32_t ms)
{
	struct await	*a = xcalloc(1, sizeof(*a));

	a->conn_id = conn_id;
	a->kind = kind;
	a->token = token;
	a->ms = ms;
	*p->awaits_tail = a;
	p->awaits_tail = &a->next;
	persist_schedule(p);
}

int
persist_defers_replies(struct persist *p)
{
	return (p->cfg->persistence == PERSIST_SYNC);
}

int
persist_unavailable(struct persist *p)
{
	return (p->cfg->persistence == PERSIST_SYNC && p->state != PST_UP);
}

/* --- the store's reports --- */

static void
persist_down(struct persist *p, const char *why)
{
	/* The store logs the failure itself, once, and how often it recurs. */
	if (p->state == PST_UP)
		log_warnx("redis %s: %s", p->ops->address(p->store),
		    p->cfg->persistence == PERSIST_SYNC ? "new grants get ERR "
		    "UNAVAILABLE until it is back" : "writing behind once it "
		    "is back");
	snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	p->failures++;
	p->state = PST_DOWN;
	if (p->cfg->persistence != PERSIST_SYNC)
		return;
	/* Hold first, so that undoing a grant cannot make another one. */
	engine_hold_grants(p->engine, 1);
	persist_answer_all(p, &p->failed, PERSIST_FAILED);
	p->failed_tail = &p->failed;
	persist_answer_all(p, &p->awaits, PERSIST_FAILED);
	p->awaits_tail = &p->awaits;
}

static void
persist_batch_done(void *ctx, enum store_outcome outcome)
{
	struct persist	*p = ctx;
	struct flight	*f;
	struct await	*a;

	/* Acknowledged after our deadline: it proves nothing (see top). */
	if (outcome == STORE_ACKED && !persist_owner_check(p))
		return;
	if ((f = flight_pop(p)) == NULL)
		fatalx("redis: a batch acknowledged that was never sent");
	if (outcome != STORE_ACKED) {
		/*
		 * Every later batch fails too, then lost() or fenced() says
		 * why: their replies wait there, oldest first.
		 */
		dirty_merge_flight(p, f);
		p->tokens_sent = p->tokens_acked;
		for (a = f->awaits; a != NULL; a = a->next)
			a->outcome = outcome == STORE_REFUSED ?
			    PERSIST_FAILED : PERSIST_UNKNOWN;
		*p->failed_tail = f->awaits;
		while (*p->failed_tail != NULL)
			p->failed_tail = &(*p->failed_tail)->next;
		free(f);
		return;
	}
	dirty_clear(&f->sems, &f->grants);
	p->tokens_acked = f->tokens;
	p->batches++;
	histo_observe(&p->batch_ms, timers_now_ms() - f->sent_ms);
	persist_answer_all(p, &f->awaits, PERSIST_OK);
	free(f);
	persist_schedule(p);
}

static void
persist_lost(void *ctx, const char *why)
{
	persist_down(ctx, why);
}

static void
persist_ready(void *ctx, uint64_t tokens, char **names, size_t nnames)
{
	struct persist	*p = ctx;
	size_t		 i;

	if (tokens < p->tokens_acked && !p->resync) {
		log_warnx("redis %s: its token bound went back (%llu < %llu): "
		    "it lost data", p->ops->address(p->store),
		    (unsigned long long)tokens,
		    (unsigned long long)p->tokens_acked);
		p->resync = 1;
	}
	if (p->resync) {
		persist_free_stale(p);
		p->stale_names = xcalloc(nnames + 1, sizeof(char *));
		for (i = 0; i < nnames; i++)
			p->stale_names[i] = xstrdup(names[i]);
		p->nstale = nnames;
	}
	p->tokens_sent = p->tokens_acked;
	p->last_error[0] = '\0';
	p->state = PST_UP;
	if (p->cfg->persistence == PERSIST_SYNC)
		engine_hold_grants(p->engine, 0);
	if (!p->listening) {
		p->listening = 1;
		p->hooks->ready(p->arg);
	}
	persist_schedule(p);
}

static void
persist_heartbeat(void *ctx, uint64_t tokens)
{
	struct persist	*p = ctx;

	if (tokens >= p->tokens_acked) {
		/* A flush that found the heartbeat in flight waits for this. */
		persist_schedule(p);
		return;
	}
	/* Flushed or restarted empty under us: reconnect and rewrite. */
	p->resync = 1;
	p->ops->reconnect(p->store, "its token bound went back: it lost data");
}

/* Keys of ours had the wrong type and were replaced: rewrite them all. */
static void
persist_repaired(void *ctx, char **keys, size_t nkeys)
{
	struct persist	*p = ctx;

	(void)keys;
	(void)nkeys;
	p->resync = 1;
	persist_schedule(p);
}

/* --- ownership --- */

/* How long before the owner key can expire we stop acting as owner. */
static uint64_t
persist_owner_margin_ms(struct persist *p)
{
	uint64_t	lease = (uint64_t)p->cfg->owner_lease_ms;

	return (lease / 10 > 50 ? lease / 10 : 50);
}

static uint64_t
persist_poll_ms(struct persist *p)
{
	uint64_t	ms = (uint64_t)p->cfg->owner_lease_ms / 4;

	return (ms < PERSIST_POLL_MAX_MS ? ms : PERSIST_POLL_MAX_MS);
}

static void
persist_claim_in(struct persist *p, uint64_t ms)
{
	struct timeval	tv = { (time_t)(ms / 1000),
			    (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(p->claim_ev, &tv);
}

static void
persist_arm_owner(struct persist *p)
{
	uint64_t	now = timers_now_ms(), ms;
	struct timeval	tv;

	ms = p->owner_until_ms > now ? p->owner_until_ms - now : 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(p->owner_ev, &tv);
}

/* What the owner key proved: we own the data set until then. */
static void
persist_extend(struct persist *p, uint64_t sent_ms)
{
	uint64_t	until = sent_ms + (uint64_t)p->cfg->owner_lease_ms -
			    persist_owner_margin_ms(p);

	if (until <= p->owner_until_ms)
		return;
	p->owner_until_ms = until;
	persist_arm_owner(p);
}

/*
 * A fenced request was acknowledged. If our deadline passed before it
 * arrived, we may already have been replaced, whatever it says: give up
 * (persist_owner_check) instead of extending.
 */
static void
persist_renewed(void *ctx, uint64_t sent_ms)
{
	struct persist	*p = ctx;

	if (p->role == ROLE_OWNER && persist_owner_check(p))
		persist_extend(p, sent_ms);
}

static void
persist_drop_pending(struct persist *p)
{
	struct flight	*f;

	while ((f = flight_pop(p)) != NULL) {
		dirty_clear(&f->sems, &f->grants);
		await_free_list(&f->awaits);
		free(f);
	}
	dirty_clear(&p->dirty_sems, &p->dirty_grants);
	persist_free_stale(p);
	await_free_list(&p->awaits);
	await_free_list(&p->failed);
	p->awaits_tail = &p->awaits;
	p->failed_tail = &p->failed;
	p->resync = 0;
}

/*
 * Stop acting as owner, at once: grant nothing, close every client
 * connection, forget memory, and claim again (as a standby, or with
 * standby no only to resume our own epoch). The first claim waits one
 * owner-lease: our key expires by then, and a standby, which claims every
 * poll, takes over first; a claim whose answer is lost (one-way
 * partition) would only delay it by a lease, never extend ours.
 */
static void
persist_lose(struct persist *p, const char *why)
{
	if (p->role != ROLE_OWNER && p->state == PST_LOADING)
		return;		/* not acting as owner: nothing to stop */
	log_warnx("lost ownership of %s (epoch %llu): %s; closing every "
	    "client connection and %s", p->ops->dataset(p->store),
	    (unsigned long long)p->epoch, why, p->cfg->standby ?
	    "serving as a standby" : "trying to resume this epoch");
	evtimer_del(p->owner_ev);
	engine_hold_grants(p->engine, 1);
	p->ops->disconnect(p->store);
	persist_drop_pending(p);
	p->held_epoch = p->epoch;
	p->owner_until_ms = 0;
	p->role = ROLE_STANDBY;
	p->state = PST_LOADING;
	snprintf(p->owner_addr, sizeof(p->owner_addr), "-");
	snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	p->failures++;
	p->hooks->lost(p->arg);
	persist_claim_in(p, (uint64_t)p->cfg->owner_lease_ms);
}

int
persist_owner_check(struct persist *p)
{
	char	why[128];

	if (p->role != ROLE_OWNER || p->state == PST_LOADING ||
	    timers_now_ms() < p->owner_until_ms)
		return (1);
	snprintf(why, sizeof(why), "could not renew it within owner-lease "
	    "(%lld ms)", (long long)p->cfg->owner_lease_ms);
	persist_lose(p, why);
	return (0);
}

static void
persist_fenced(void *ctx, const char *owner)
{
	struct persist	*p = ctx;
	char		 why[STORE_ADDR_MAX + 64];

	snprintf(why, sizeof(why), "another daemon owns it (owner key: %s)",
	    owner);
	persist_lose(p, why);
}

/* owner_ev: the last proof of ownership ran out. */
static void
persist_owner_cb(evutil_socket_t fd, short what, void *arg)
{
	struct persist	*p = arg;

	(void)fd;
	(void)what;
	if (persist_owner_check(p) && p->role == ROLE_OWNER)
		persist_arm_owner(p);	/* extended meanwhile */
}

/* --- start-up, takeover --- */

static void
persist_load_sem(void *ctx, const char *name, uint32_t capacity, int damaged)
{
	struct persist	*p = ctx;
	struct sem	*s;

	if (engine_create(p->engine, name, strlen(name), capacity, &s) !=
	    PERR_NONE) {
		log_warnx("redis: cannot restore semaphore %s", name);
		return;
	}
	p->load_sems++;
	if (!damaged)
		return;
	p->load_damaged = realloc(p->load_damaged, (p->nload_damaged + 1) *
	    sizeof(*p->load_damaged));
	if (p->load_damaged == NULL)
		abort();
	p->load_damaged[p->nload_damaged++] = xstrdup(name);
}

static void
persist_free_damaged(struct persist *p)
{
	size_t	i;

	for (i = 0; i < p->nload_damaged; i++)
		free(p->load_damaged[i]);
	free(p->load_damaged);
	p->load_damaged = NULL;
	p->nload_damaged = 0;
}

/*
 * A semaphore whose key was damaged lost its capacity, not its grants:
 * it gets what its grants hold, so that nothing more is granted until an
 * operator resizes it (or the config file, which names it, does).
 */
static void
persist_fix_damaged(struct persist *p)
{
	struct sem	*s;
	size_t		 i;
	uint32_t	 cap;

	for (i = 0; i < p->nload_damaged; i++) {
		s = engine_find(p->engine, p->load_damaged[i],
		    strlen(p->load_damaged[i]));
		if (s == NULL)
			continue;
		cap = s->used > PROTO_INT_MAX ? PROTO_INT_MAX :
		    (uint32_t)s->used;
		engine_resize(p->engine, s, cap);
		log_warnx("redis: semaphore %s had a damaged key; restored "
		    "with its %u grants and capacity %u (what they hold): "
		    "RESIZE it to its real capacity", s->name,
		    (unsigned)s->nholders, (unsigned)cap);
	}
	persist_free_damaged(p);
}

/*
 * A lease resumes with the time it had left on Redis's clock, never less
 * than the grace: it may end late, never early, whatever the wall clocks
 * of semd's hosts say. A bound grant becomes unowned for the grace.
 */
static void
persist_load_grant(void *ctx, const char *sem, uint64_t token, uint32_t n,
    enum store_grant_kind kind, uint64_t lease_left_ms,
    const char *holder_name, const char *holder_addr)
{
	struct persist	*p = ctx;
	struct grant	*g;
	struct sem	*s = engine_find(p->engine, sem, strlen(sem));
	uint64_t	 grace = (uint64_t)p->cfg->reclaim_grace_ms;
	uint64_t	 ttl = grace;

	if (s == NULL)
		return;
	if (kind == STORE_KIND_LEASE && lease_left_ms > grace)
		ttl = lease_left_ms;
	if ((g = engine_restore_grant(p->engine, s, token, n, kind ==
	    STORE_KIND_LEASE ? GRANT_LEASE : GRANT_UNOWNED, ttl)) == NULL)
		return;
	engine_grant_set_holder(g, holder_name, holder_addr);
	p->load_grants++;
	if (kind == STORE_KIND_CONN)
		p->load_unowned++;
}

/*
 * The load failed: drop what was read, close the connections a standby
 * has (the engine is cleared with them), say why (once, then how often),
 * and claim again after a backoff that grows to 30 s.
 */
static void
persist_load_failed(struct persist *p, const char *err)
{
	uint64_t	retry = p->load_backoff_ms * 2;

	if (retry == 0)
		retry = PERSIST_RETRY_LOAD_MS;
	if (retry > PERSIST_LOAD_BACKOFF_MAX_MS)
		retry = PERSIST_LOAD_BACKOFF_MAX_MS;
	p->load_backoff_ms = retry;
	snprintf(p->last_error, sizeof(p->last_error), "cannot load: %.400s",
	    err);
	log_repeat(&p->load_failure, p->subject, p->last_error);
	persist_free_damaged(p);
	if (p->listening)
		p->hooks->lost(p->arg);
	else
		engine_clear(p->engine);
	persist_claim_in(p, retry);
}

/*
 * The data set is ours: load it as after a restart, then connect. how:
 * "owner of" at start-up, "took over" or "resumed" after a standby time.
 */
static int
persist_load(struct persist *p, const char *how)
{
	static const struct store_loader loader = {
		persist_load_sem, persist_load_grant
	};
	uint64_t	 t0 = timers_now_ms(), tokens = p->seen_tokens;
	char		 err[300];
	int		 repair = 0;

	p->load_sems = p->load_grants = p->load_unowned = 0;
	if (p->ops->load(p->store, &loader, p, TOKEN_BLOCK, &tokens, &repair,
	    err, sizeof(err)) != 0) {
		persist_load_failed(p, err);
		return (-1);
	}
	p->load_backoff_ms = 0;
	log_repeat_end(&p->load_failure, p->subject);
	persist_fix_damaged(p);
	engine_raise_token_floor(p->engine, tokens);
	p->tokens_acked = p->tokens_sent = tokens + TOKEN_BLOCK;
	if (p->tokens_acked > p->seen_tokens)
		p->seen_tokens = p->tokens_acked;
	log_info("%s %s with epoch %llu: loaded %u semaphores, %u grants "
	    "(%u unowned) in %llu ms", how,
	    p->ops->dataset(p->store), (unsigned long long)p->epoch,
	    p->load_sems, p->load_grants, p->load_unowned,
	    (unsigned long long)(timers_now_ms() - t0));
	p->last_error[0] = '\0';
	p->role = ROLE_OWNER;
	p->state = PST_DOWN;
	if (repair) {
		log_warnx("redis %s: damaged keys found; rewriting them from "
		    "memory", p->ops->address(p->store));
		p->resync = 1;
	}
	p->hooks->loaded(p->arg);
	p->ops->connect(p->store);
	return (0);
}

/* Someone else owns the data set: wait as a standby, or exit. */
static void
persist_not_owner(struct persist *p, const struct store_owner *own)
{
	const char	*dataset = p->ops->dataset(p->store);

	if (own->superseded)
		fatalx("%s was taken over (epoch %llu) since this daemon lost "
		    "it; exiting (standby no)", dataset,
		    (unsigned long long)own->epoch);
	if (!p->cfg->standby) {
		/*
		 * The key may be a crashed predecessor's (kill -9, then a
		 * restart): only a key still held after a whole lease belongs
		 * to a live owner.
		 */
		if (p->owned_seen_ms == 0) {
			p->owned_seen_ms = timers_now_ms();
			log_info("%s is owned by %s (epoch %llu); waiting up to "
			    "owner-lease (%lld ms) to see whether that owner is "
			    "alive", dataset, own->addr,
			    (unsigned long long)own->epoch,
			    (long long)p->cfg->owner_lease_ms);
		}
		if (timers_now_ms() - p->owned_seen_ms <=
		    (uint64_t)p->cfg->owner_lease_ms + persist_poll_ms(p)) {
			persist_claim_in(p, persist_poll_ms(p));
			return;
		}
		fatalx("%s is owned by %s (epoch %llu); exiting: a second "
		    "owner could over-grant (set \"standby yes\" to wait as "
		    "its standby)", dataset, own->addr,
		    (unsigned long long)own->epoch);
	}
	p->epoch = own->epoch;
	snprintf(p->owner_addr, sizeof(p->owner_addr), "%s", own->addr);
	p->role = ROLE_STANDBY;
	if (!p->listening) {
		p->listening = 1;
		p->hooks->standby(p->arg);
	}
	persist_claim_in(p, persist_poll_ms(p));
}

/*
 * Redis's epoch counter went below what we saw: it lost its data. Wait
 * (claiming every poll) for the owner to restore its claim, or for an
 * operator to set the counter; say so once, then how often.
 */
static void
persist_epoch_lost(struct persist *p, const struct store_owner *own)
{
	char	msg[600];

	snprintf(msg, sizeof(msg), "its epoch counter %sepoch is %llu, below "
	    "epoch %llu which this daemon has seen: Redis lost its data. Not "
	    "claiming it (tokens and epochs would start again); waiting for "
	    "the owner to restore its claim, or, if no owner is left, for an "
	    "operator to run: redis-cli SET %sepoch %llu (and SET %stokens "
	    "%llu if that is higher than what it holds)",
	    p->cfg->redis_prefix, (unsigned long long)own->epoch,
	    (unsigned long long)p->seen_epoch, p->cfg->redis_prefix,
	    (unsigned long long)p->seen_epoch, p->cfg->redis_prefix,
	    (unsigned long long)p->seen_tokens);
	snprintf(p->last_error, sizeof(p->last_error), "%.500s", msg);
	log_repeat(&p->epoch_wait, p->subject, msg);
	persist_claim_in(p, persist_poll_ms(p));
}

/* claim_ev: claim the data set; persist_claimed() follows. */
static void
persist_claim_cb(evutil_socket_t fd, short what, void *arg)
{
	struct persist	*p = arg;

	(void)fd;
	(void)what;
	p->ops->claim(p->store, p->advertise, p->held_epoch,
	    !p->cfg->standby && p->held_epoch != 0, p->seen_epoch);
}

/* A claim failed to run: back off and say it once, then how often. */
static void
persist_claim_failed(struct persist *p, const char *err)
{
	uint64_t	retry_ms;

	/*
	 * Redis is unreachable or refuses: back off from the poll (a standby)
	 * or 1 s (starting up) to at most 2 s.
	 */
	retry_ms = p->claim_backoff_ms * 2;
	if (retry_ms == 0)
		retry_ms = p->listening ? persist_poll_ms(p) :
		    PERSIST_RETRY_LOAD_MS;
	if (retry_ms > PERSIST_CLAIM_BACKOFF_MAX_MS)
		retry_ms = PERSIST_CLAIM_BACKOFF_MAX_MS;
	p->claim_backoff_ms = retry_ms;
	snprintf(p->last_error, sizeof(p->last_error), "cannot load: %.200s",
	    err);
	log_repeat(&p->claim_failure, p->subject, p->last_error);
	persist_claim_in(p, retry_ms);
}

/* A claim's outcome: load the data set when it is ours. */
static void
persist_claimed(void *ctx, const struct store_owner *own, const char *err)
{
	struct persist	*p = ctx;
	const char	*how;

	if (own == NULL) {
		persist_claim_failed(p, err);
		return;
	}
	p->claim_backoff_ms = 0;
	log_repeat_end(&p->claim_failure, p->subject);
	if (own->tokens > p->seen_tokens)
		p->seen_tokens = own->tokens;
	if (own->epoch_lost) {
		persist_epoch_lost(p, own);
		return;
	}
	log_repeat_end(&p->epoch_wait, p->subject);
	if (own->epoch > p->seen_epoch)
		p->seen_epoch = own->epoch;
	if (own->wait) {
		/* Our own key, from a claim we saw no answer to: it expires. */
		persist_claim_in(p, persist_poll_ms(p));
		return;
	}
	if (own->ours)
		p->owned_seen_ms = 0;	/* the next owner is watched anew */
	if (!own->ours) {
		persist_not_owner(p, own);
		return;
	}
	how = !p->listening ? "owner of" : own->epoch == p->held_epoch ?
	    "resumed" : "took over";
	p->epoch = own->epoch;
	p->held_epoch = own->epoch;
	snprintf(p->owner_addr, sizeof(p->owner_addr), "%s", p->advertise);
	persist_extend(p, own->sent_ms);
	if (timers_now_ms() >= p->owner_until_ms) {
		/* Answered too late to act on: let the key expire. */
		p->owner_until_ms = 0;
		evtimer_del(p->owner_ev);
		persist_claim_in(p, persist_poll_ms(p));
		return;
	}
	persist_load(p, how);
}

void
persist_start(struct persist *p, const struct persist_hooks *hooks,
    void *arg)
{
	p->hooks = hooks;
	p->arg = arg;
	if (p->state == PST_OFF) {
		hooks->loaded(arg);
		p->listening = 1;
		hooks->ready(arg);
		return;
	}
	/* Grants wait for the store: nothing is served before ready(). */
	if (p->cfg->persistence == PERSIST_SYNC)
		engine_hold_grants(p->engine, 1);
	persist_claim_in(p, 0);
}

void
persist_set_advertise(struct persist *p, const char *addr)
{
	snprintf(p->advertise, sizeof(p->advertise), "%s", addr);
	if (p->role == ROLE_OWNER)
		snprintf(p->owner_addr, sizeof(p->owner_addr), "%s", addr);
	if (p->store != NULL)
		p->ops->advertise(p->store, addr);
}

struct persist *
persist_new(struct config *cfg, struct event_base *base, struct engine *e,
    const struct store_ops *ops, persist_answer_fn answer, void *ctx)
{
	static const struct store_events events = {
		.ready = persist_ready,
		.batch_done = persist_batch_done,
		.lost = persist_lost,
		.heartbeat = persist_heartbeat,
		.renewed = persist_renewed,
		.fenced = persist_fenced,
		.repaired = persist_repaired,
		.claimed = persist_claimed,
	};
	struct persist	*p = xcalloc(1, sizeof(*p));

	p->cfg = cfg;
	p->base = base;
	p->engine = e;
	p->ops = ops;
	p->awaits_tail = &p->awaits;
	p->failed_tail = &p->failed;
	p->flights_tail = &p->flights;
	p->answer = answer;
	p->ctx = ctx;
	p->state = PST_OFF;
	p->role = ROLE_SINGLE;
	snprintf(p->owner_addr, sizeof(p->owner_addr), "-");
	snprintf(p->advertise, sizeof(p->advertise), "-");
	if (cfg->persistence == PERSIST_NONE)
		return (p);
	/* Not serving until the claim says whose the data set is. */
	p->role = ROLE_STANDBY;
	p->state = PST_LOADING;
	p->store = ops->create(cfg, base, &events, p);
	snprintf(p->subject, sizeof(p->subject), "redis %s",
	    ops->address(p->store));
	p->flush_ev = event_new(base, -1, 0, persist_flush_cb, p);
	p->claim_ev = evtimer_new(base, persist_claim_cb, p);
	p->owner_ev = evtimer_new(base, persist_owner_cb, p);
	if (p->flush_ev == NULL || p->claim_ev == NULL || p->owner_ev == NULL)
		fatalx("cannot set up persistence events");
	return (p);
}

void
persist_free(struct persist *p)
{
	struct batch	 b = { NULL, 0, 0 };
	struct flight	*f, last = { 0 };

	if (p->store != NULL && p->role == ROLE_OWNER &&
	    p->state != PST_LOADING) {
		/* Last words: what the event loop had no turn left to send. */
		while ((f = flight_pop(p)) != NULL) {
			dirty_merge_flight(p, f);
			await_free_list(&f->awaits);
			free(f);
		}
		if (p->resync)
			batch_full(p, &b, &last);
		else if (persist_backlog(p) > 0)
			batch_from_dirty(p, &b, &last);
		/* Last of all: a standby may take over at once. */
		batch_add(&b)->type = STORE_DISOWN;
		if (p->ops->write_blocking(p->store, b.ch, b.n) == 0)
			log_info("redis %s: %zu final changes written; gave up "
			    "ownership (epoch %llu)", p->ops->address(p->store),
			    b.n - 1, (unsigned long long)p->epoch);
		free(b.ch);
		dirty_clear(&last.sems, &last.grants);	/* b pointed in */
	}
	persist_drop_pending(p);
	persist_free_damaged(p);
	if (p->store != NULL)
		p->ops->destroy(p->store);
	if (p->flush_ev != NULL)
		event_free(p->flush_ev);
	if (p->claim_ev != NULL)
		event_free(p->claim_ev);
	if (p->owner_ev != NULL)
		event_free(p->owner_ev);
	free(p);
}

enum persist_role
persist_role(struct persist *p)
{
	return (p->role);
}

void
persist_get_stats(struct persist *p, struct persist_stats *st)
{
	struct flight	*f;

	st->role = role_names[p->role];
	st->epoch = p->epoch;
	st->owner = p->owner_addr;
	st->state = p->role == ROLE_STANDBY ? "standby" :
	    state_names[p->state];
	st->mode = config_persist_mode_name((enum persist_mode)
	    p->cfg->persistence);
	st->backlog = persist_backlog(p);
	st->resync = p->resync;
	for (f = p->flights; f != NULL; f = f->next)
		st->resync |= f->resync;
	st->batches = p->batches;
	st->failures = p->failures;
	st->batch_ms = &p->batch_ms;
	st->last_error = p->last_error;
	st->durability = p->store != NULL ? p->ops->durability(p->store) :
	    "-";
}
