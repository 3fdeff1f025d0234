/*
 * store_fake.c: the store in memory of store_fake.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "engine_fake.h"
#include "store_fake.h"

struct store	 fake;


static struct store *
fake_create(const struct config *cfg, struct event_base *base,
    const struct store_events *events, void *ctx)
{
	(void)cfg;
	fake.ev = events;
	fake.ctx = ctx;
	fake.base = base;
	fake.ncreates++;
	return (&fake);
}

void
fake_free_batches(void)
{
	size_t	i, j;

	for (i = 0; i < fake.nbatches; i++) {
		for (j = 0; j < fake.batches[i].n; j++) {
			free((char *)fake.batches[i].ch[j].sem);
			free((char *)fake.batches[i].ch[j].holder_name);
			free((char *)fake.batches[i].ch[j].holder_addr);
			free((char *)fake.batches[i].ch[j].id);
		}
		free(fake.batches[i].ch);
	}
	fake.nbatches = fake.nacked = 0;
}

static void
fake_destroy(struct store *st)
{
	ck_assert_ptr_eq(st, &fake);
	fake.ndestroys++;
	fake.connected = fake.ready = 0;
}

/* Answer claim i as the script said when it was made. */
static void
fake_answer_claim(size_t i)
{
	const struct fake_claim	*c = &fake.claims[i];
	struct store_owner	 own;

	memset(&own, 0, sizeof(own));
	own.epoch = c->epoch;
	own.tokens = fake.claim_tokens;
	switch (c->answer) {
	case CLAIM_OURS:
		own.ours = 1;
		snprintf(own.addr, sizeof(own.addr), "%s", c->addr);
		own.sent_ms = c->at_ms;
		break;
	case CLAIM_OWNED:
		snprintf(own.addr, sizeof(own.addr), "%s", c->owner);
		break;
	case CLAIM_SUPERSEDED:
		own.superseded = 1;
		snprintf(own.addr, sizeof(own.addr), "-");
		break;
	case CLAIM_WAIT:
		own.wait = 1;
		snprintf(own.addr, sizeof(own.addr), "%s", c->addr);
		break;
	case CLAIM_EPOCH_LOST:
		own.epoch_lost = 1;
		snprintf(own.addr, sizeof(own.addr), "-");
		break;
	case CLAIM_ERROR:
		fake.ev->claimed(fake.ctx, NULL, "Connection refused");
		return;
	}
	fake.ev->claimed(fake.ctx, &own, NULL);
}

static void
fake_claim_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	if (fake.ndestroys == fake.ncreates)
		return;		/* destroyed: reports nothing more */
	fake_answer_claim((size_t)(uintptr_t)arg);
}

/* Record the claim; answer it now, or on the next loop turn. */
static void
fake_claim(struct store *st, const char *addr, uint64_t resume_epoch,
    int resume_only, uint64_t least_epoch)
{
	struct fake_claim	*c;
	struct timeval		 tv = { 0, 0 };
	size_t			 i = fake.nclaims;

	ck_assert_ptr_eq(st, &fake);
	ck_assert_uint_lt(fake.nclaims, MAX_CLAIMS);
	c = &fake.claims[fake.nclaims++];
	c->least_epoch = least_epoch;
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	c->resume_epoch = resume_epoch;
	c->resume_only = resume_only;
	c->at_ms = fake_now;
	c->answer = fake.claim_answer;
	c->epoch = fake.claim_epoch;
	c->owner = fake.claim_addr;
	if (fake.claim_inline)
		fake_answer_claim(i);
	else
		event_base_once(fake.base, -1, EV_TIMEOUT, fake_claim_cb,
		    (void *)(uintptr_t)i, &tv);
}

static void
fake_advertise(struct store *st, const char *addr)
{
	(void)st;
	snprintf(fake.advertised, sizeof(fake.advertised), "%s", addr);
}

static int
fake_load(struct store *st, const struct store_loader *ld, void *ctx,
    uint64_t reserve, uint64_t *tokens, int *repair, char *err,
    size_t errlen)
{
	const struct fake_grant	*g;
	uint64_t		 high = fake.bound > *tokens ? fake.bound :
				    *tokens;
	size_t			 i;

	(void)st;
	fake.nloads++;
	if (fake.load_fail) {
		snprintf(err, errlen, "key t:{jobs}:grants is not a hash");
		return (-1);
	}
	*repair = fake.load_repair;
	for (i = 0; i < fake.nload_sems; i++)
		ld->sem(ctx, fake.load_sems[i].name,
		    fake.load_sems[i].capacity, fake.load_sems[i].damaged);
	for (i = 0; i < fake.nload_grants; i++) {
		g = &fake.load_grants[i];
		ld->grant(ctx, g->sem, g->token, g->n, g->kind,
		    g->lease_left_ms, g->holder_name, g->holder_addr,
		    g->multi, g->id);
		if (g->token > high)
			high = g->token;
	}
	*tokens = high;
	fake.bound = high + reserve;
	return (0);
}

/* Keep a copy: the batch points into persist's memory. */
static void
fake_record(const struct store_change *ch, size_t n)
{
	struct fake_batch	*b;
	size_t			 i;

	ck_assert_uint_lt(fake.nbatches, MAX_BATCHES);
	b = &fake.batches[fake.nbatches++];
	b->ch = calloc(n > 0 ? n : 1, sizeof(*ch));
	ck_assert_ptr_nonnull(b->ch);
	if (n > 0)	/* an empty batch (a write awaited, nothing new) */
		memcpy(b->ch, ch, n * sizeof(*ch));
	for (i = 0; i < n; i++) {
		if (ch[i].sem != NULL)
			b->ch[i].sem = strndup(ch[i].sem, ch[i].sem_len);
		if (ch[i].holder_name != NULL)
			b->ch[i].holder_name = strdup(ch[i].holder_name);
		if (ch[i].holder_addr != NULL)
			b->ch[i].holder_addr = strdup(ch[i].holder_addr);
		if (ch[i].id != NULL)
			b->ch[i].id = strdup(ch[i].id);
	}
	b->n = n;
	b->sent_ms = fake_now;
}

static int
fake_write_blocking(struct store *st, const struct store_change *ch,
    size_t n)
{
	(void)st;
	fake.nblocking++;
	fake_record(ch, n);
	fake.nacked = fake.nbatches;
	return (0);
}

void
fake_ready(void)
{
	fake.ready = 1;
	fake.ev->ready(fake.ctx, fake.bound, fake.ready_names,
	    fake.nready_names);
}

static void
fake_ready_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (fake.connected && !fake.ready)
		fake_ready();
}

static void
fake_connect(struct store *st)
{
	struct timeval	tv = { 0, 0 };

	(void)st;
	fake.nconnects++;
	fake.connected = 1;
	if (fake.auto_ready)
		event_base_once(fake.base, -1, EV_TIMEOUT, fake_ready_cb, NULL,
		    &tv);
}

static void
fake_disconnect(struct store *st)
{
	(void)st;
	fake.ndisconnects++;
	fake.connected = fake.ready = 0;
	fake.nacked = fake.nbatches;	/* dropped: no events */
}

static int
fake_can_submit(struct store *st)
{
	(void)st;
	return (fake.connected && fake.ready &&
	    fake.nbatches - fake.nacked < (fake.depth > 0 ? fake.depth : 1));
}

static void
fake_submit(struct store *st, const struct store_change *ch, size_t n)
{
	if (!fake_can_submit(st))
		fake.nbad++;
	fake_record(ch, n);
}

/* The connection failed: every batch in flight fails, in order, then lost(). */
void
fake_fail(const char *why)
{
	fake.ready = 0;
	while (fake.nacked < fake.nbatches) {
		fake.nacked++;
		fake.ev->batch_done(fake.ctx, STORE_UNKNOWN);
	}
	fake.ev->lost(fake.ctx, why);
}

static void
fake_reconnect(struct store *st, const char *why)
{
	(void)st;
	fake.nreconnects++;
	fake_fail(why);
	fake_connect(st);
}

static const char *
fake_durability(struct store *st)
{
	(void)st;
	return ("ok");
}

static const char *
fake_dataset(struct store *st)
{
	(void)st;
	return ("fake db 0 prefix t:");
}

static const char *
fake_address(struct store *st)
{
	(void)st;
	return ("fake:1");
}

/* The fake has no replicas: every write is acknowledged or not, whole. */
static uint64_t
fake_unacked_writes(struct store *st)
{
	(void)st;
	return (0);
}

const struct store_ops fake_ops = {
	.create = fake_create,
	.destroy = fake_destroy,
	.claim = fake_claim,
	.advertise = fake_advertise,
	.load = fake_load,
	.write_blocking = fake_write_blocking,
	.connect = fake_connect,
	.disconnect = fake_disconnect,
	.can_submit = fake_can_submit,
	.submit = fake_submit,
	.reconnect = fake_reconnect,
	.durability = fake_durability,
	.dataset = fake_dataset,
	.address = fake_address,
	.master = fake_address,
	.unacked_writes = fake_unacked_writes,
};

/* Redis acknowledges the oldest batch in flight (and so renews). */
void
fake_ack(int ok)
{
	struct fake_batch	*b;
	size_t			 i;

	ck_assert_uint_lt(fake.nacked, fake.nbatches);
	b = &fake.batches[fake.nacked++];
	if (ok) {
		for (i = 0; i < b->n; i++) {
			if (b->ch[i].type == STORE_TOKENS)
				fake.bound = b->ch[i].token;
		}
	}
	fake.ev->batch_done(fake.ctx, ok ? STORE_ACKED : STORE_UNKNOWN);
	if (ok)
		fake.ev->renewed(fake.ctx, b->sent_ms);
}

/* A fenced request found another owner: the connection is gone. */
void
fake_fence(const char *owner)
{
	fake.connected = fake.ready = 0;
	if (fake.nacked < fake.nbatches) {
		fake.nacked++;
		fake.ev->batch_done(fake.ctx, STORE_REFUSED);
	}
	fake.ev->fenced(fake.ctx, owner);
}

/* Does batch i carry a change of that type for sem (and token)? */
int
batch_has(size_t i, enum store_change_type type, const char *sem,
    uint64_t token)
{
	const struct fake_batch	*b = &fake.batches[i];
	size_t			 j;

	for (j = 0; j < b->n; j++) {
		if (b->ch[j].type != type)
			continue;
		if (sem != NULL && strcmp(b->ch[j].sem, sem) != 0)
			continue;
		if ((type == STORE_GRANT_PUT || type == STORE_GRANT_DEL) &&
		    b->ch[j].token != token)
			continue;
		return (1);
	}
	return (0);
}

void
script_load_sem(const char *name, uint32_t capacity)
{
	ck_assert_uint_lt(fake.nload_sems, MAX_LOAD);
	fake.load_sems[fake.nload_sems].name = name;
	fake.load_sems[fake.nload_sems++].capacity = capacity;
}

/* A semaphore whose own key is damaged: its capacity is unknown. */
void
script_load_damaged(const char *name)
{
	ck_assert_uint_lt(fake.nload_sems, MAX_LOAD);
	fake.load_sems[fake.nload_sems].name = name;
	fake.load_sems[fake.nload_sems++].damaged = 1;
}

/* A lease in Redis, held by name at addr (NULL: unknown). */
void
script_load_lease(const char *sem, uint64_t token, uint32_t n,
    const char *name, const char *addr)
{
	struct fake_grant	*g;

	ck_assert_uint_lt(fake.nload_grants, MAX_LOAD);
	g = &fake.load_grants[fake.nload_grants++];
	g->sem = sem;
	g->token = token;
	g->n = n;
	g->kind = STORE_KIND_LEASE;
	g->lease_left_ms = 60000;
	g->holder_name = name;
	g->holder_addr = addr;
}

