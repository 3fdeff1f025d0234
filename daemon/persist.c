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
 * the grants that need it. A grant therefore never costs an extra round
 * trip, and after any crash the bound is above every token a client ever saw.
 *
 * If Redis comes back with a lower bound than it acknowledged (flushed,
 * restarted without its data, restored from an old snapshot), if a write
 * or heartbeat had to put the owner key back (the fence says so), or if
 * the backlog outgrew persistence-backlog, Redis is rewritten from memory,
 * each semaphore's keys deleted first: semd's memory is the truth, Redis
 * its copy.
 *
 * Ownership (owner.c) decides whether this daemon may write at all: it
 * claims the data set, calls back here to load it and to serve, and to
 * drop everything pending when ownership is lost. persist forwards it the
 * store's reports about ownership (claimed, renewed, fenced).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "dirty.h"
#include "load-parts.h"
#include "log.h"
#include "owner.h"
#include "persist.h"
#include "store.h"

#define TOKEN_BLOCK		1000

static const char *const state_names[PST__COUNT] = {
	[PST_OFF] = "off",
	[PST_LOADING] = "loading",
	[PST_DOWN] = "down",
	[PST_UP] = "ok",
	[PST_STANDBY] = "standby",
};
static const char *const role_names[ROLE__COUNT] = {
	[ROLE_SINGLE] = "single",
	[ROLE_OWNER] = "owner",
	[ROLE_STANDBY] = "standby",
};

const char *
persist_role_name(enum persist_role role)
{
	return (role < ROLE__COUNT ? role_names[role] : "?");
}

const char *
persist_state_name(enum persist_state state)
{
	return (state < PST__COUNT ? state_names[state] : "?");
}
static const struct ownership_hooks persist_own_hooks;
static void	persist_free_damaged(struct persist *);

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
	const struct clock	*clock;
	struct ownership	*own;		/* NULL: persistence none */
	int			 listening;	/* persistence none: at once */

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
	const struct persist_hooks *hooks;
	void			*arg;

	uint64_t		 batches;
	uint64_t		 failures;
	struct histo		 batch_ms;	/* send to acknowledgement */
	char			 last_error[512];
	uint32_t		 load_sems, load_grants, load_unowned;
	char			**load_damaged;	/* their capacity is unknown */
	size_t			 nload_damaged;
	struct load_parts	*load_parts;	/* ACQUIREALL grants loaded */
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

	f->sent_ms = clock_now(p->clock);
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
	const struct grant	*g;

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
		/* Every part: a multi-grant is written in one batch, whole. */
		for (g = ev->grant; g != NULL; g = g->part_next)
			dirty_grant_add(&p->dirty_grants, g->token,
			    g->sem->name, g->sem->name_len);
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
	case ENGINE_EV_WAIT_REPLACED:
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
	c->n = g->n;			/* this part's */
	c->multi = g->lead->nparts;
	c->id = g->lead->id;
	c->holder_name = g->lead->holder_name;
	c->holder_addr = g->lead->holder_addr;
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
	struct sem		*s;

	f->sems = p->dirty_sems;
	f->grants = p->dirty_grants;
	p->dirty_sems = NULL;
	p->dirty_grants = NULL;
	for (ds = f->sems; ds != NULL; ds = ds->hh.next)
		batch_sem(b, ds->name, ds->len,
		    engine_find(p->engine, ds->name, ds->len));
	for (dg = f->grants; dg != NULL; dg = dg->hh.next) {
		s = engine_find(p->engine, dg->sem, dg->sem_len);
		batch_grant(p, b, dg->sem, dg->sem_len, dg->token, s == NULL ?
		    NULL : engine_find_grant(p->engine, s, dg->token));
	}
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
	for (s = engine_sem_first(p->engine); s != NULL;
	    s = engine_sem_next(s)) {
		/*
		 * Its keys go first: grants Redis holds that memory no longer
		 * has (written after a flush, released since) must not stay.
		 */
		batch_sem(b, s->name, s->name_len, NULL);
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
	histo_observe(&p->batch_ms, clock_now(p->clock) - f->sent_ms);
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
	if (ownership_start_listening(p->own))
		p->hooks->ready(p->arg);
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

/* --- ownership (owner.c): its reports, and what it asks of us --- */

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

int
persist_owner_check(struct persist *p)
{
	return (p->own == NULL || ownership_check(p->own));
}

static void
persist_renewed(void *ctx, uint64_t sent_ms)
{
	struct persist	*p = ctx;

	ownership_renewed(p->own, sent_ms);
}

static void
persist_fenced(void *ctx, const char *owner)
{
	struct persist	*p = ctx;

	ownership_fenced(p->own, owner);
}

static void
persist_claimed(void *ctx, const struct store_owner *own, const char *err)
{
	struct persist	*p = ctx;

	ownership_claimed(p->own, own, err);
}

/* Ownership is lost: grant nothing, write nothing, forget what waits. */
static void
persist_own_drop(void *arg)
{
	struct persist	*p = arg;

	engine_hold_grants(p->engine, 1);
	p->ops->disconnect(p->store);
	persist_drop_pending(p);
	p->state = PST_LOADING;
}

static void
persist_own_standby(void *arg)
{
	struct persist	*p = arg;

	p->hooks->standby(p->arg);
}

static void
persist_own_lost(void *arg)
{
	struct persist	*p = arg;

	persist_free_damaged(p);
	p->hooks->lost(p->arg);
}

/* Loaded and the owner now: the config's semaphores, then the writes. */
static void
persist_own_serve(void *arg)
{
	struct persist	*p = arg;

	p->hooks->loaded(p->arg);
	p->ops->connect(p->store);
}

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
    const char *holder_name, const char *holder_addr, uint32_t multi,
    const char *id)
{
	struct persist	*p = ctx;
	struct grant	*g;
	struct sem	*s = engine_find(p->engine, sem, strlen(sem));
	uint64_t	 grace = (uint64_t)p->cfg->reclaim_grace_ms;
	uint64_t	 ttl = grace;

	if (s == NULL)
		return;
	/*
	 * Another part of an ACQUIREALL grant loaded already: it joins
	 * that grant (which keeps the first part's kind and deadline).
	 */
	if (multi > 1 && (g = engine_grant_by_token(p->engine, token)) !=
	    NULL) {
		if (load_parts_expected(p->load_parts, token) > 1)
			engine_restore_part(p->engine, g, s, n);
		return;
	}
	if (kind == STORE_KIND_LEASE && lease_left_ms > grace)
		ttl = lease_left_ms;
	if ((g = engine_restore_grant(p->engine, s, token, n, kind ==
	    STORE_KIND_LEASE ? GRANT_LEASE : GRANT_UNOWNED, ttl)) == NULL)
		return;
	engine_grant_set_holder(g, holder_name, holder_addr);
	if (id != NULL && kind == STORE_KIND_LEASE &&
	    engine_grant_set_id(p->engine, g, id, strlen(id)) != 0)
		log_warnx("redis: request id %s of grant %llu of %s is held "
		    "by another grant there; loaded without it", id,
		    (unsigned long long)token, sem);
	if (multi > 1)
		load_parts_add(&p->load_parts, token, multi);
	p->load_grants++;
	if (kind == STORE_KIND_CONN)
		p->load_unowned++;
}

/*
 * The data set is ours (ownership_hooks.load): read it into the engine,
 * with tokens above every bound ownership saw.
 */
static int
persist_own_load(void *arg, const char *how, uint64_t *tokens, char *err,
    size_t errlen)
{
	static const struct store_loader loader = {
		persist_load_sem, persist_load_grant
	};
	struct persist	*p = arg;
	uint64_t	 t0 = clock_now(p->clock);
	int		 repair = 0;

	p->load_sems = p->load_grants = p->load_unowned = 0;
	if (p->ops->load(p->store, &loader, p, TOKEN_BLOCK, tokens, &repair,
	    err, errlen) != 0) {
		load_parts_free(&p->load_parts);
		return (-1);
	}
	/* A grant that lost parts is rewritten with those it has. */
	if (load_parts_check(&p->load_parts, p->engine) > 0)
		repair = 1;
	persist_fix_damaged(p);
	engine_raise_token_floor(p->engine, *tokens);
	p->tokens_acked = p->tokens_sent = *tokens + TOKEN_BLOCK;
	*tokens = p->tokens_acked;
	log_info("%s %s with epoch %llu: loaded %u semaphores, %u grants "
	    "(%u unowned) in %llu ms", how,
	    p->ops->dataset(p->store), (unsigned long long)ownership_epoch(
	    p->own), p->load_sems, p->load_grants, p->load_unowned,
	    (unsigned long long)(clock_now(p->clock) - t0));
	p->last_error[0] = '\0';
	p->state = PST_DOWN;
	if (repair) {
		log_warnx("redis %s: damaged keys found; rewriting them from "
		    "memory", p->ops->address(p->store));
		p->resync = 1;
	}
	return (0);
}

static const struct ownership_hooks persist_own_hooks = {
	.load = persist_own_load,
	.serve = persist_own_serve,
	.drop = persist_own_drop,
	.standby = persist_own_standby,
	.lost = persist_own_lost,
};

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
	ownership_start(p->own);
}

void
persist_set_advertise(struct persist *p, const char *addr)
{
	if (p->own != NULL)
		ownership_set_advertise(p->own, addr);
	if (p->store != NULL)
		p->ops->advertise(p->store, addr);
}

struct persist *
persist_new(struct config *cfg, struct event_base *base,
    const struct clock *clock, struct engine *e, const struct store_ops *ops,
    persist_answer_fn answer, void *ctx)
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
	p->clock = clock;
	p->engine = e;
	p->ops = ops;
	p->awaits_tail = &p->awaits;
	p->failed_tail = &p->failed;
	p->flights_tail = &p->flights;
	p->answer = answer;
	p->ctx = ctx;
	p->state = PST_OFF;
	if (cfg->persistence == PERSIST_NONE)
		return (p);
	/* Not serving until the claim says whose the data set is. */
	p->state = PST_LOADING;
	p->store = ops->create(cfg, base, &events, p);
	p->own = ownership_new(cfg, clock, ops, p->store, &persist_own_hooks,
	    p, p->last_error, sizeof(p->last_error));
	p->flush_ev = event_new(base, -1, 0, persist_flush_cb, p);
	if (p->flush_ev == NULL)
		fatalx("cannot set up persistence events");
	return (p);
}

void
persist_free(struct persist *p)
{
	struct batch	 b = { NULL, 0, 0 };
	struct flight	*f, last = { 0 };

	if (p->own != NULL && ownership_state(p->own) == OWN_OWNER) {
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
			    b.n - 1, (unsigned long long)ownership_epoch(p->own));
		free(b.ch);
		dirty_clear(&last.sems, &last.grants);	/* b pointed in */
	}
	persist_drop_pending(p);
	persist_free_damaged(p);
	ownership_free(p->own);
	if (p->store != NULL)
		p->ops->destroy(p->store);
	if (p->flush_ev != NULL)
		event_free(p->flush_ev);
	free(p);
}

enum persist_role
persist_role(struct persist *p)
{
	if (p->own == NULL)
		return (ROLE_SINGLE);
	return (ownership_state(p->own) == OWN_OWNER ? ROLE_OWNER :
	    ROLE_STANDBY);
}

void
persist_get_stats(struct persist *p, struct persist_stats *st)
{
	struct flight		*f;
	enum persist_role	 role = persist_role(p);

	st->role_id = role;
	st->role = role_names[role];
	st->ownership_id = p->own != NULL ? ownership_state(p->own) : OWN_OFF;
	st->ownership = ownership_state_name((enum own_state)st->ownership_id);
	st->state_id = role == ROLE_STANDBY ? PST_STANDBY : p->state;
	st->state = state_names[st->state_id];
	st->epoch = p->own != NULL ? ownership_epoch(p->own) : 0;
	st->owner = p->own != NULL ? ownership_owner_addr(p->own) : "-";
	st->mode = config_persist_mode_name((enum persist_mode)
	    p->cfg->persistence);
	st->backlog = persist_backlog(p);
	st->resync = p->resync;
	for (f = p->flights; f != NULL; f = f->next)
		st->resync |= f->resync;
	st->batches = p->batches;
	st->failures = p->failures + (p->own != NULL ?
	    ownership_failures(p->own) : 0);
	st->batch_ms = &p->batch_ms;
	st->last_error = p->last_error;
	st->durability = p->store != NULL ? p->ops->durability(p->store) :
	    "-";
	st->master = p->store != NULL ? p->ops->master(p->store) : "-";
	st->unacked_writes = p->store != NULL ?
	    p->ops->unacked_writes(p->store) : 0;
	st->waiting_redis = p->own != NULL && !p->cfg->standby &&
	    ownership_state(p->own) == OWN_CLAIMING;
}
