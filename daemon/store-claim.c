/*
 * store-claim.c: claims of the ownership lease (store.h's claim), on an
 * asynchronous connection of their own so that a claim never waits
 * behind batches: one script call (STORE_LUA_CLAIM) and its answer. Once
 * the data set is ours the connection goes: the owner renews its lease
 * with every batch and heartbeat of the pipeline (store-redis.c).
 *
 * With redis-min-replicas, WAIT follows the script, and a claim that made
 * us the owner counts only once enough replicas have it: a replica
 * promoted without it would let another daemon claim the same data set.
 * A claim they did not acknowledge within the first half of its lease is
 * reported as one that failed; our key on the master then expires unused
 * (the next claim finds it and waits, store.h's claim).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "store-redis.h"
#include "store-scripts.h"
#include "timers.h"

/* The claim script's answer, and WAIT's: their tags. */
#define CLAIM_EVAL	STORE_CONN_TAG_MIN
#define CLAIM_WAIT	(STORE_CONN_TAG_MIN + 1)

/* store_conn_events.failed: the claim could not be made. */
static void
store_claim_failed(void *arg, const char *why)
{
	struct store	*st = arg;

	if (!st->claiming)
		return;
	st->claiming = 0;
	st->ev.claimed(st->ctx, NULL, why);
}

/*
 * What the claim script's answer r says, into *own: -1 when r is not a
 * claim's answer (then why).
 */
static int
store_claim_decode(struct store *st, const redisReply *r,
    struct store_owner *own, char *why, size_t len)
{
	long long	status;
	uint64_t	tokens;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_STRING ||
	    r->element[2]->type != REDIS_REPLY_INTEGER ||
	    store_reply_u64(r->element[3], &tokens) != 0) {
		snprintf(why, len, "claiming %sowner (and %sepoch): %s",
		    st->cfg->redis_prefix, st->cfg->redis_prefix,
		    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		return (-1);
	}
	memset(own, 0, sizeof(*own));
	own->sent_ms = st->claim_sent_ms;
	status = r->element[0]->integer;
	own->epoch = (uint64_t)r->element[2]->integer;
	own->tokens = tokens;
	if (status == 1) {
		own->ours = 1;
		snprintf(own->addr, sizeof(own->addr), "%s",
		    st->model.advertise);
	} else if (status == 2 || status == 4) {
		own->superseded = status == 2;
		own->epoch_lost = status == 4;
		snprintf(own->addr, sizeof(own->addr), "-");
	} else {
		own->wait = status == 3;
		store_parse_owner(r->element[1]->str, r->element[1]->len, own);
	}
	return (0);
}

/*
 * Our claim took the data set, but too few replicas acknowledged it: not
 * ours after all. Fail the claim (the connection goes, as after a lost
 * answer); ownership backs off and claims again.
 */
static void
store_claim_unreplicated(struct store *st, const char *why)
{
	char	msg[300];

	/* No epoch in it: the same failure is logged once, then counted. */
	snprintf(msg, sizeof(msg), "claim: %s", why);
	store_conn_fail(&st->claim_conn, msg);
}

/*
 * Our claim took the data set but WAIT found too few replicas: they may
 * be slow rather than gone (a first sync, a loaded host), and a claim
 * given up leaves our key to expire for a whole owner-lease first. So
 * ask again (WAIT covers the claim still) while another WAIT would end
 * within the first half of the claim's lease; returns 1 if it asked.
 */
static int
store_claim_wait_again(struct store *st)
{
	uint64_t	extra = store_wait_extra_ms(st);

	if (timers_now_ms() + extra >= st->claim_sent_ms +
	    (uint64_t)st->cfg->owner_lease_ms / 2)
		return (0);
	store_wait_send(st, &st->claim_conn, CLAIM_WAIT);
	store_conn_arm(&st->claim_conn, (uint64_t)st->cfg->redis_timeout_ms +
	    extra);
	return (1);
}

/* store_conn_events.reply: the claim script (or WAIT) answered r. */
static void
store_claim_answered(void *arg, const redisReply *r, int tag)
{
	struct store		*st = arg;
	struct store_owner	 own;
	char			 why[256];

	if (tag == CLAIM_WAIT) {
		/* Only a claim that took the data set must be replicated. */
		own = st->claim_own;
		if (own.ours && !store_wait_enough(st, r) &&
		    store_claim_wait_again(st))
			return;
		if (own.ours && !store_wait_ok(st, r, why, sizeof(why))) {
			store_claim_unreplicated(st, why);
			return;
		}
	} else if (store_claim_decode(st, r, &own, why, sizeof(why)) != 0) {
		store_conn_fail(&st->claim_conn, why);
		return;
	} else if (store_wait_on(st)) {
		/* Whatever it found: WAIT answers next, on this connection. */
		st->claim_own = own;
		return;
	}
	store_conn_disarm(&st->claim_conn);
	st->claiming = 0;
	if (own.ours) {
		st->epoch = own.epoch;
		snprintf(st->model.fence, sizeof(st->model.fence), "%llu %s ",
		    (unsigned long long)st->epoch, st->id);
		/* An owner renews on the pipeline: this connection may go. */
		store_conn_close(&st->claim_conn);
	}
	st->ev.claimed(st->ctx, &own, NULL);
}

/* Queue the claim script with store_claim's arguments. */
static void
store_claim_send(struct store *st)
{
	const struct store_model *m = &st->model;
	char			 okey[STORE_KEY_MAX], ekey[STORE_KEY_MAX],
				 tkey[STORE_KEY_MAX], num[24], lease[24],
				 least[24];

	st->claim_queued = 1;
	store_key(m, okey, NULL, 0, "owner");
	store_key(m, ekey, NULL, 0, "epoch");
	store_key(m, tkey, NULL, 0, "tokens");
	snprintf(num, sizeof(num), "%llu",
	    (unsigned long long)st->claim_resume_epoch);
	snprintf(least, sizeof(least), "%llu",
	    (unsigned long long)st->claim_least_epoch);
	snprintf(lease, sizeof(lease), "%lld",
	    (long long)st->cfg->owner_lease_ms);
	/* The lease runs from no later than this. */
	st->claim_sent_ms = timers_now_ms();
	store_conn_command(&st->claim_conn, CLAIM_EVAL,
	    "EVAL %s 3 %s %s %s %s %s %s %s %s %s", STORE_LUA_CLAIM, okey,
	    ekey, tkey, st->id, m->advertise, num,
	    st->claim_resume_only ? "1" : "0", lease, least);
	if (store_wait_on(st))
		store_wait_send(st, &st->claim_conn, CLAIM_WAIT);
}

/*
 * store_conn_events.connected: a claim that had to wait for the sentinels
 * to name the master goes now.
 */
static void
store_claim_connected(void *arg)
{
	struct store	*st = arg;

	if (st->claiming && !st->claim_queued)
		store_claim_send(st);
}

void
store_claim(struct store *st, const char *addr, uint64_t resume_epoch,
    int resume_only, uint64_t least_epoch)
{
	snprintf(st->model.advertise, sizeof(st->model.advertise), "%s", addr);
	st->claiming = 1;
	st->claim_queued = 0;
	st->claim_resume_epoch = resume_epoch;
	st->claim_resume_only = resume_only;
	st->claim_least_epoch = least_epoch;
	if (store_conn_open(&st->claim_conn) != 0)
		return;		/* claimed() said why */
	/* Queued at once unless the sentinels are being asked first. */
	if (store_conn_can_queue(&st->claim_conn))
		store_claim_send(st);
	store_conn_arm(&st->claim_conn, (uint64_t)st->cfg->redis_timeout_ms +
	    store_wait_extra_ms(st));
}

void
store_claim_init(struct store *st)
{
	static const struct store_conn_events ev = {
		.connected = store_claim_connected,
		.reply = store_claim_answered,
		.failed = store_claim_failed
	};

	store_conn_init(&st->claim_conn, st->cfg, st->target, st->base,
	    "claim: ", &ev, st);
}
