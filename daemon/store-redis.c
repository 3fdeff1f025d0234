/*
 * store-redis.c: the store on Redis, with hiredis 0.14 (see store.h): the
 * batch pipeline and store_redis_ops. The data model is store-model.c,
 * the start-up load and final write store-load.c, claims store-claim.c,
 * the asynchronous connection store-conn.c (store-redis.h lists them).
 *
 * Every write is one fenced script call (EVALSHA of STORE_LUA_WRITE,
 * store-scripts.h): the ownership check, its renewal and the batch's
 * commands, atomically. With redis-min-replicas, one WAIT follows the
 * calls queued in one turn (store-wait.c: WAIT covers every earlier write
 * of its connection), and they count as acknowledged only once WAIT says
 * enough replicas have them; too few fail the connection, as an answer
 * that never came does. One WAIT per turn rather than per call, because
 * Redis runs nothing more of a connection while it waits.
 *
 * Lifecycle of the pipeline's connection:
 *
 *   down --connect--> connecting --handshake--> ready <--> batch/heartbeat
 *     ^                                                          |
 *     +---- any error, error reply or timeout: drop, backoff ----+
 *
 * Every request in flight has a deadline (the connection's), since
 * hiredis 0.14 has none and a SIGSTOPped Redis keeps its TCP connection
 * open; requests are answered in order, so the oldest one's is armed.
 */
#include <sys/random.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "log.h"
#include "store-redis.h"
#include "store-scripts.h"
#include "timers.h"

#define STORE_HEARTBEAT_MS	1000	/* at most; owner-lease / 3 if less */
#define STORE_BACKOFF_MIN_MS	100
#define STORE_BACKOFF_MAX_MS	2000
/* A batch may take redis-timeout, plus this per change, to be answered. */
#define STORE_CHANGES_PER_MS	50

/* What an answer on the pipeline's connection answers: its tag. */
enum store_step {
	STEP_APPENDONLY = STORE_CONN_TAG_MIN,
	STEP_APPENDFSYNC,
	STEP_TOKENS,
	STEP_SEMS,
	STEP_LOAD_WRITE,
	STEP_LOAD_RENEW,
	STEP_BATCH,		/* EVALSHA of the write script */
	STEP_HEARTBEAT,		/* EVALSHA of the renew script */
	STEP_WAIT		/* WAIT behind either (redis-min-replicas) */
};

void
store_report_repaired(struct store *st, const redisReply *r)
{
	char	**keys;
	size_t	  i, n = 0;

	if (r->elements == 0)
		return;
	keys = xcalloc(r->elements + 1, sizeof(*keys));
	for (i = 0; i < r->elements; i++) {
		if (r->element[i]->type != REDIS_REPLY_STRING)
			continue;
		keys[n++] = r->element[i]->str;
		if (strcmp(r->element[i]->str, STORE_RESTORED_WORD) == 0)
			log_warnx("redis %s: the owner key was gone (Redis lost "
			    "its data): put it back; rewriting Redis from "
			    "memory", st->address);
		else
			log_warnx("redis %s: key %s had the wrong type for "
			    "semd; replaced it (the keys under prefix '%s' are "
			    "semd's own)", st->address, r->element[i]->str,
			    st->cfg->redis_prefix);
	}
	if (n > 0 && st->ev.repaired != NULL)
		st->ev.repaired(st->ctx, keys, n);
	free(keys);
}

/* --- the batch pipeline --- */

/* Redis's durability as one word, for STATS and the start-up warning. */
static void
store_update_durability(struct store *st)
{
	const char	*was = st->durability[0] != '\0' ? st->durability :
			    NULL;
	char		 now[sizeof(st->durability)];

	if (st->appendonly[0] == '\0' || st->appendfsync[0] == '\0')
		snprintf(now, sizeof(now), "unknown");
	else if (strcmp(st->appendonly, "yes") != 0)
		snprintf(now, sizeof(now), "appendonly-off");
	else if (strcmp(st->appendfsync, "always") != 0)
		snprintf(now, sizeof(now), "appendfsync-%s", st->appendfsync);
	else
		snprintf(now, sizeof(now), "ok");
	if (strcmp(now, "ok") != 0 && (was == NULL || strcmp(was, now) != 0))
		log_warnx("redis %s: %s: an acknowledged grant is only as "
		    "durable as Redis's AOF policy (appendonly yes, "
		    "appendfsync always make it survive a crash of Redis)",
		    st->address, now);
	snprintf(st->durability, sizeof(st->durability), "%s", now);
}

/* CONFIG GET's [name, value] into buf; left empty when refused. */
static void
store_config_value(const redisReply *r, char *buf, size_t len)
{
	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[1]->type == REDIS_REPLY_STRING)
		snprintf(buf, len, "%s", r->element[1]->str);
	else
		buf[0] = '\0';
}

static void
store_handshake_done(struct store *st, const redisReply *r)
{
	char	**names;
	size_t	  i, n = 0;

	names = xcalloc(r->elements + 1, sizeof(*names));
	for (i = 0; i < r->elements; i++) {
		if (r->element[i]->type == REDIS_REPLY_STRING)
			names[n++] = r->element[i]->str;
	}
	store_conn_disarm(&st->conn);
	/*
	 * Sentinel promoted a replica: it may lack the last writes semd sent
	 * (replication is asynchronous), grants, releases or the token bound
	 * alike. repaired() makes persist rewrite Redis from memory, as after
	 * a flush, token bound included: persist keeps the highest bound it
	 * saw, so tokens never go back.
	 */
	if (st->ever_connected &&
	    redis_target_generation(st->target) != st->hs_generation) {
		log_warnx("redis %s: the master is %s now (a failover): "
		    "rewriting it from memory, as a promoted replica may lack "
		    "the last writes", st->address,
		    redis_target_name(st->target));
		if (st->ev.repaired != NULL)
			st->ev.repaired(st->ctx, NULL, 0);
	}
	st->hs_generation = redis_target_generation(st->target);
	st->ready = 1;
	store_update_durability(st);
	/* After a failure, "back" is said once a write goes through. */
	if (!st->ever_connected)
		log_info("redis %s: connected", st->address);
	st->ever_connected = 1;
	st->ev.ready(st->ctx, st->hs_tokens, names, n);
	free(names);
}

/* Arm the deadline of the oldest request in flight, if any. */
static void
store_arm_oldest(struct store *st)
{
	uint64_t	now = timers_now_ms(), ms;

	if (st->ninflight == 0) {
		store_conn_disarm(&st->conn);
		return;
	}
	ms = st->inflight[st->inflight_head].deadline_ms;
	store_conn_arm(&st->conn, ms > now ? ms - now : 0);
}

/* Forget every request in flight; returns how many were batches. */
static unsigned
store_drop_inflight(struct store *st)
{
	unsigned	n = st->nbatches;

	st->ninflight = st->nbatches = st->inflight_head = 0;
	st->wait_due = 0;
	store_conn_disarm(&st->conn);
	return (n);
}

/*
 * The oldest request in flight was acknowledged: the store is healthy
 * again, and the ownership lease runs from when it was sent.
 */
static void
store_succeeded(struct store *st)
{
	struct store_req	req = st->inflight[st->inflight_head];

	st->inflight_head = (st->inflight_head + 1) % STORE_INFLIGHT_MAX;
	st->ninflight--;
	if (req.step == STEP_BATCH)
		st->nbatches--;
	store_arm_oldest(st);
	st->backoff_ms = 0;
	log_repeat_end(&st->failure, st->subject);
	st->ev.renewed(st->ctx, req.sent_ms);
}

/*
 * Report n batches that will not be acknowledged, oldest first. Only the
 * oldest can be known not to have been applied (refused): a later one may
 * have run before the connection went.
 */
static void
store_fail_batches(struct store *st, unsigned n, int refused)
{
	unsigned	i;

	for (i = 0; i < n; i++)
		st->ev.batch_done(st->ctx, i == 0 && refused ? STORE_REFUSED :
		    STORE_UNKNOWN);
}

/* The fence refused us: drop the connection for good and say so. */
static void
store_deposed(struct store *st, const char *owner)
{
	int		 refused = st->ninflight > 0 &&
			    st->inflight[st->inflight_head].step == STEP_BATCH;
	unsigned	 nbatches = store_drop_inflight(st);
	char		 who[STORE_ADDR_MAX + 64];

	snprintf(who, sizeof(who), "%s", owner);
	st->ready = 0;
	st->epoch = 0;
	store_conn_close(&st->conn);
	/* The fence runs first: the refused batch changed nothing. */
	store_fail_batches(st, nbatches, refused);
	st->ev.fenced(st->ctx, who);
}

/* The token bound of a GET or a renewal; "wrongtype" counts as 0. */
static int
store_tokens_reply(struct store *st, const redisReply *r, uint64_t *v)
{
	if (r->type == REDIS_REPLY_ERROR &&
	    strstr(r->str, "WRONGTYPE") != NULL) {
		*v = 0;
	} else if (r->type == REDIS_REPLY_STRING &&
	    strcmp(r->str, "restored") == 0) {
		/* The fence put our claim back: Redis lost its data. */
		*v = 0;
		log_warnx("redis %s: the owner key was gone (Redis lost its "
		    "data): put it back", st->address);
		return (0);
	} else if (r->type == REDIS_REPLY_STATUS ||
	    (r->type == REDIS_REPLY_STRING && strcmp(r->str, "wrongtype") ==
	    0)) {
		*v = 0;
	} else
		return (store_reply_u64(r, v));
	log_warnx("redis %s: key %stokens has the wrong type; semd will "
	    "rewrite its keys", st->address, st->cfg->redis_prefix);
	return (0);
}

/* SMEMBERS P sems answered r: the handshake's last answer. */
static void
store_sems_answered(struct store *st, const redisReply *r)
{
	char	why[256];

	if (r->type == REDIS_REPLY_ERROR &&
	    strstr(r->str, "WRONGTYPE") != NULL) {
		/* A rewrite replaces it: report no names, bound 0. */
		log_warnx("redis %s: key %ssems has the wrong type; semd will "
		    "rewrite its keys", st->address, st->cfg->redis_prefix);
		st->hs_tokens = 0;
		store_handshake_done(st, &(redisReply){
		    .type = REDIS_REPLY_ARRAY });
		return;
	}
	if (r->type != REDIS_REPLY_ARRAY) {
		snprintf(why, sizeof(why), "SMEMBERS %ssems: %s",
		    st->cfg->redis_prefix, r->type == REDIS_REPLY_ERROR ?
		    r->str : "not a set");
		store_conn_fail(&st->conn, why);
		return;
	}
	store_handshake_done(st, r);
}

/* One answer of the handshake (store_handshake), r. */
static void
store_handshake_answered(struct store *st, const redisReply *r,
    enum store_step step)
{
	char		why[256];
	uint64_t	v;

	switch (step) {
	case STEP_APPENDONLY:
		store_config_value(r, st->appendonly, sizeof(st->appendonly));
		break;
	case STEP_APPENDFSYNC:
		store_config_value(r, st->appendfsync, sizeof(st->appendfsync));
		break;
	case STEP_LOAD_WRITE:
	case STEP_LOAD_RENEW:
		if (r->type != REDIS_REPLY_STRING) {
			snprintf(why, sizeof(why), "SCRIPT LOAD: %s",
			    r->type == REDIS_REPLY_ERROR ? r->str :
			    "unexpected reply");
			store_conn_fail(&st->conn, why);
			break;
		}
		snprintf(step == STEP_LOAD_WRITE ? st->write_sha :
		    st->renew_sha, sizeof(st->write_sha), "%s", r->str);
		break;
	case STEP_TOKENS:
		if (store_tokens_reply(st, r, &v) != 0) {
			snprintf(why, sizeof(why), "GET %stokens: %s",
			    st->cfg->redis_prefix, r->type == REDIS_REPLY_ERROR ?
			    r->str : "not a number");
			store_conn_fail(&st->conn, why);
			break;
		}
		st->hs_tokens = v;
		break;
	default:	/* STEP_SEMS, the last */
		store_sems_answered(st, r);
		break;
	}
}

/* The write script answered a batch, r. */
static void
store_batch_answered(struct store *st, const redisReply *r)
{
	const char	*owner;
	char		 why[256];
	unsigned	 drops = st->conn.drops;

	if (store_reply_fenced(r, &owner)) {
		store_deposed(st, owner);
		return;
	}
	if (!store_write_ok(r, why, sizeof(why))) {
		st->oldest_refused = r->type == REDIS_REPLY_ERROR &&
		    store_applied_nothing(r->str, r->len);
		store_conn_fail(&st->conn, why);
		return;
	}
	if (store_wait_on(st)) {
		/* Applied by the master: a fact, whatever the replicas say. */
		store_report_repaired(st, r);
		st->inflight[st->inflight_head].written = 1;
		return;		/* store_wait_answered() goes on */
	}
	store_succeeded(st);
	if (st->conn.drops != drops)
		return;		/* the acknowledgement came too late */
	store_report_repaired(st, r);
	st->ev.batch_done(st->ctx, STORE_ACKED);
}

/* The renew script answered a heartbeat, r: Redis's token bound. */
static void
store_heartbeat_answered(struct store *st, const redisReply *r)
{
	const char	*owner;
	char		 why[256];
	unsigned	 drops = st->conn.drops;
	uint64_t	 v;

	if (store_reply_fenced(r, &owner)) {
		store_deposed(st, owner);
		return;
	}
	if (r->type == REDIS_REPLY_ERROR ||
	    store_tokens_reply(st, r, &v) != 0) {
		snprintf(why, sizeof(why), "heartbeat: %s",
		    r->type == REDIS_REPLY_ERROR ? r->str : "not a number");
		store_conn_fail(&st->conn, why);
		return;
	}
	if (store_wait_on(st)) {
		st->inflight[st->inflight_head].written = 1;
		st->inflight[st->inflight_head].tokens = v;
		return;		/* store_wait_answered() goes on */
	}
	store_succeeded(st);
	if (st->conn.drops == drops)
		st->ev.heartbeat(st->ctx, v);
}

/*
 * WAIT answered r, for the oldest requests in flight that the master
 * applied (those answered since the last WAIT, all of them written before
 * it): they are acknowledged now if enough replicas have them; if not,
 * they fail as requests whose answer never came (outcome unknown: a
 * batch's grants are undone and written again, a renewal extends
 * nothing).
 */
static void
store_wait_answered(struct store *st, const redisReply *r)
{
	struct store_req	req;
	char			why[256];
	unsigned		drops = st->conn.drops;

	if (st->ninflight == 0 || !st->inflight[st->inflight_head].written) {
		store_conn_fail(&st->conn, "WAIT answered out of turn");
		return;
	}
	if (!store_wait_ok(st, r, why, sizeof(why))) {
		store_conn_fail(&st->conn, why);
		return;
	}
	while (st->ninflight > 0 && st->inflight[st->inflight_head].written) {
		req = st->inflight[st->inflight_head];
		store_succeeded(st);
		if (st->conn.drops != drops)
			return;	/* the acknowledgement came too late */
		if (req.step == STEP_BATCH)
			st->ev.batch_done(st->ctx, STORE_ACKED);
		else
			st->ev.heartbeat(st->ctx, req.tokens);
		if (st->conn.drops != drops)
			return;
	}
}

/* store_conn_events.reply: r answers the request of tag step. */
static void
store_answered(void *arg, const redisReply *r, int step)
{
	struct store	*st = arg;

	if (step == STEP_BATCH)
		store_batch_answered(st, r);
	else if (step == STEP_HEARTBEAT)
		store_heartbeat_answered(st, r);
	else if (step == STEP_WAIT)
		store_wait_answered(st, r);
	else
		store_handshake_answered(st, r, (enum store_step)step);
}

/*
 * Send a fenced script call built in a (with redis-min-replicas, WAIT
 * goes behind it later in the turn: store_write_cb); its answer comes as
 * step, within redis-timeout plus extra_ms (plus redis-replica-timeout
 * for WAIT).
 */
static void
store_send_argv(struct store *st, enum store_step step, struct store_argv *a,
    uint64_t extra_ms)
{
	struct store_req	*req;

	store_conn_command_argv(&st->conn, step, (int)a->n,
	    (const char **)a->argv, a->lens);
	store_argv_free(a);
	st->wait_due = store_wait_on(st);
	event_active(st->write_ev, 0, 0);
	req = &st->inflight[(st->inflight_head + st->ninflight) %
	    STORE_INFLIGHT_MAX];
	req->step = step;
	req->written = 0;
	req->tokens = 0;
	req->sent_ms = timers_now_ms();
	req->deadline_ms = req->sent_ms +
	    (uint64_t)st->cfg->redis_timeout_ms + extra_ms +
	    store_wait_extra_ms(st);
	if (step == STEP_BATCH)
		st->nbatches++;
	if (st->ninflight++ == 0)
		store_arm_oldest(st);
}

/*
 * write_ev, later in the turn that queued a fenced request: write it
 * now. hiredis's libevent adapter would enable EV_WRITE and write on the
 * next turn, a turn later and with two epoll_ctl calls per batch; this
 * way batches queued in one turn go out together in one write, and the
 * adapter's add and delete of EV_WRITE cancel out in libevent's epoll
 * changelist (semd.c). Errors are hiredis's to report, as from the
 * adapter's own callback.
 */
static void
store_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store	*st = arg;

	(void)fd;
	(void)what;
	if (st->wait_due && store_conn_is_open(&st->conn))
		store_wait_send(st, &st->conn, STEP_WAIT);
	st->wait_due = 0;
	store_conn_write_now(&st->conn);
}

/*
 * store_conn_events.connected: AUTH and SELECT are queued already; read
 * what ready() reports.
 */
static void
store_handshake(void *arg)
{
	struct store	*st = arg;
	char		 key[STORE_KEY_MAX];

	store_conn_command(&st->conn, STEP_APPENDONLY, "CONFIG GET appendonly");
	store_conn_command(&st->conn, STEP_APPENDFSYNC,
	    "CONFIG GET appendfsync");
	store_conn_command(&st->conn, STEP_LOAD_WRITE, "SCRIPT LOAD %s",
	    STORE_LUA_WRITE);
	store_conn_command(&st->conn, STEP_LOAD_RENEW, "SCRIPT LOAD %s",
	    STORE_LUA_RENEW);
	store_key(&st->model, key, NULL, 0, "tokens");
	store_conn_command(&st->conn, STEP_TOKENS, "GET %s", key);
	store_key(&st->model, key, NULL, 0, "sems");
	store_conn_command(&st->conn, STEP_SEMS, "SMEMBERS %s", key);
	store_conn_arm(&st->conn, (uint64_t)st->cfg->redis_timeout_ms);
}

/*
 * store_conn_events.failed: the connection failed and is dropped. Fail
 * the batches in flight, report, and retry after a jittered backoff that
 * grows until a write succeeds again.
 */
static void
store_lost(void *arg, const char *why)
{
	struct store	*st = arg;
	unsigned	 nbatches = store_drop_inflight(st);
	struct timeval	 tv;
	unsigned	 delay;

	st->ready = 0;
	log_repeat(&st->failure, st->subject, why);

	st->backoff_ms = st->backoff_ms == 0 ? STORE_BACKOFF_MIN_MS :
	    st->backoff_ms * 2;
	if (st->backoff_ms > STORE_BACKOFF_MAX_MS)
		st->backoff_ms = STORE_BACKOFF_MAX_MS;
	/* Jitter: many semd instances must not reconnect in lockstep. */
	delay = st->backoff_ms / 2 + (unsigned)random() %
	    (st->backoff_ms / 2 + 1);
	tv.tv_sec = delay / 1000;
	tv.tv_usec = (suseconds_t)(delay % 1000) * 1000;
	evtimer_add(st->retry_ev, &tv);

	/* A failed batch fails every later one: all are written again. */
	store_fail_batches(st, nbatches, st->oldest_refused);
	st->oldest_refused = 0;
	st->ev.lost(st->ctx, why);
}

static void
store_connect(struct store *st)
{
	if (store_conn_is_open(&st->conn))
		return;
	if (store_conn_open(&st->conn) == 0)
		store_conn_arm(&st->conn, (uint64_t)st->cfg->redis_timeout_ms);
}

static void
store_disconnect(struct store *st)
{
	st->ready = 0;
	st->epoch = 0;
	store_drop_inflight(st);
	evtimer_del(st->retry_ev);
	store_conn_close(&st->conn);	/* reports nothing */
}

static void
store_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	store_connect(arg);
}

/*
 * store_conn_events.moved: Sentinel named a new master; a reconnection
 * waiting out its backoff (the old master was down) goes now.
 */
static void
store_master_moved(void *arg)
{
	struct store	*st = arg;

	if (!evtimer_pending(st->retry_ev, NULL))
		return;
	evtimer_del(st->retry_ev);
	store_connect(st);
}

/* The heartbeat renews the ownership and watches the token bound. */
static void
store_heartbeat_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store		*st = arg;
	struct store_argv	 a = { NULL, NULL, 0, 0 };
	char			 key[STORE_KEY_MAX];

	(void)fd;
	(void)what;
	if (!store_conn_is_open(&st->conn) || !st->ready ||
	    st->ninflight != 0 || st->epoch == 0)
		return;		/* a batch in flight renews too */
	store_key(&st->model, key, NULL, 0, "tokens");
	store_fenced_call(&st->model, &a, "EVALSHA", st->renew_sha, key);
	store_send_argv(st, STEP_HEARTBEAT, &a, 0);
}

/* The address changed: the owner key says so with the next renewal, now. */
static void
store_advertise(struct store *st, const char *addr)
{
	snprintf(st->model.advertise, sizeof(st->model.advertise), "%s", addr);
	store_heartbeat_cb(-1, 0, st);
}

static void
store_reconnect(struct store *st, const char *why)
{
	if (store_conn_is_open(&st->conn))
		store_conn_fail(&st->conn, why);
}

static int
store_can_submit(struct store *st)
{
	return (store_conn_is_open(&st->conn) && st->ready && st->epoch != 0 &&
	    st->nbatches < (unsigned)st->cfg->persistence_pipeline &&
	    st->ninflight < STORE_INFLIGHT_MAX);
}

static void
store_submit(struct store *st, const struct store_change *ch, size_t n)
{
	struct store_argv	a = { NULL, NULL, 0, 0 };

	store_batch_argv(&st->model, &a, "EVALSHA", st->write_sha, ch, n);
	store_send_argv(st, STEP_BATCH, &a, n / STORE_CHANGES_PER_MS);
}

/* --- the store as a whole --- */

/*
 * 64 random bits in hex: this process's name in the owner key. From the
 * kernel, not random(): two daemons started in the same second could seed
 * random() alike (pid ^ time), and a standby that shares its owner's id
 * would take the owner's key for its own unacknowledged claim and wait.
 */
static void
store_make_id(char *buf, size_t len)
{
	uint64_t	v;

	if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		fatal("getrandom");
	snprintf(buf, len, "%016llx", (unsigned long long)v);
}

/* The pipeline's timers: the heartbeat runs from now on. */
static void
store_timers_new(struct store *st)
{
	uint64_t	hb_ms = STORE_HEARTBEAT_MS;
	struct timeval	hb;

	/* Renew three times per lease: two may be lost before it runs out. */
	if ((uint64_t)st->cfg->owner_lease_ms / 3 < hb_ms)
		hb_ms = (uint64_t)st->cfg->owner_lease_ms / 3;
	hb.tv_sec = (time_t)(hb_ms / 1000);
	hb.tv_usec = (suseconds_t)(hb_ms % 1000) * 1000;
	st->retry_ev = evtimer_new(st->base, store_retry_cb, st);
	st->heartbeat_ev = event_new(st->base, -1, EV_PERSIST,
	    store_heartbeat_cb, st);
	st->write_ev = event_new(st->base, -1, 0, store_write_cb, st);
	if (st->retry_ev == NULL || st->write_ev == NULL ||
	    st->heartbeat_ev == NULL || event_add(st->heartbeat_ev, &hb) != 0)
		fatalx("cannot set up the redis timers");
}

static struct store *
store_new(const struct config *cfg, struct event_base *base,
    const struct store_events *events, void *ctx)
{
	static const struct store_conn_events conn_ev = {
		.connected = store_handshake,
		.reply = store_answered,
		.failed = store_lost,
		.moved = store_master_moved
	};
	struct store	*st = xcalloc(1, sizeof(*st));

	st->cfg = cfg;
	st->base = base;
	st->ev = *events;
	st->ctx = ctx;
	st->model.prefix = cfg->redis_prefix;
	st->model.owner_lease_ms = cfg->owner_lease_ms;
	snprintf(st->address, sizeof(st->address), "%s", cfg->redis);
	snprintf(st->subject, sizeof(st->subject), "redis %s", cfg->redis);
	snprintf(st->dataset, sizeof(st->dataset), "redis %s db %lld prefix "
	    "'%s'", cfg->redis, (long long)cfg->redis_db, cfg->redis_prefix);
	snprintf(st->durability, sizeof(st->durability), "unknown");
	store_make_id(st->id, sizeof(st->id));
	st->target = redis_target_new(cfg, base);
	store_conn_init(&st->conn, cfg, st->target, base, "", &conn_ev, st);
	store_claim_init(st);
	store_timers_new(st);
	return (st);
}

static void
store_free(struct store *st)
{
	st->claiming = 0;
	store_conn_cleanup(&st->conn);
	store_conn_cleanup(&st->claim_conn);
	event_free(st->write_ev);
	event_free(st->retry_ev);
	event_free(st->heartbeat_ev);
	redis_target_free(st->target);
	free(st);
}

static const char *
store_durability(struct store *st)
{
	return (st->durability);
}

static const char *
store_dataset(struct store *st)
{
	return (st->dataset);
}

static const char *
store_address(struct store *st)
{
	return (st->address);
}

static const char *
store_master(struct store *st)
{
	const char	*host, *path;
	int		 port;

	if (!redis_target_current(st->target, &host, &port, &path))
		return ("-");
	if (path != NULL)
		snprintf(st->master, sizeof(st->master), "unix:%s", path);
	else	/* an IPv6 host in brackets, as sock_format_peer() */
		snprintf(st->master, sizeof(st->master),
		    strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host, port);
	return (st->master);
}

static uint64_t
store_unacked_writes(struct store *st)
{
	return (st->unacked_writes);
}

const struct store_ops store_redis_ops = {
	.create = store_new,
	.destroy = store_free,
	.claim = store_claim,
	.advertise = store_advertise,
	.load = store_load,
	.write_blocking = store_write_blocking,
	.connect = store_connect,
	.disconnect = store_disconnect,
	.can_submit = store_can_submit,
	.submit = store_submit,
	.reconnect = store_reconnect,
	.durability = store_durability,
	.dataset = store_dataset,
	.address = store_address,
	.master = store_master,
	.unacked_writes = store_unacked_writes,
};
