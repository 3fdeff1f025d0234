/*
 * store-redis.c: the store on Redis, with hiredis 0.14 (see store.h).
 *
 * Data model (prefix P, "semd:" by default; {NAME} is a Redis Cluster
 * hash tag, so all of a semaphore's keys share one slot):
 *
 *   P tokens          string  every token ever issued is <= this
 *   P sems            set     the semaphore names
 *   P {NAME}:sem      hash    capacity
 *   P {NAME}:grants   hash    TOKEN -> "n=N kind=conn|lease deadline_ms=D
 *                             name=L addr=A" (D: Unix ms when a lease
 *                             ends, 0 for conn; L, A: the NAME and address
 *                             of the connection that acquired a lease, or
 *                             "-"; values without them load as "-")
 *   P owner           string  "EPOCH ID ADDR", expires owner-lease after
 *                             the owner's last renewal
 *   P epoch           string  the last epoch handed out
 *
 * Every write is one fenced script (store-scripts.h): the ownership check,
 * its renewal and the batch's commands, atomically.
 *
 * Lifecycle of the asynchronous connection:
 *
 *   down --connect--> connecting --handshake--> ready <--> batch/heartbeat
 *     ^                                                          |
 *     +---- any error, error reply or timeout: drop, backoff ----+
 *
 * Every request in flight has a deadline (deadline_ev), since hiredis 0.14
 * has none and a SIGSTOPped Redis keeps its TCP connection open. Replies
 * for a connection we have dropped (hiredis calls back with NULL as it
 * frees it) are recognised by ac != st->ac and ignored.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
#include <uthash.h>

#include "log.h"
#include "proto.h"
#include "store.h"
#include "store-scripts.h"
#include "timers.h"

#define STORE_KEY_MAX		(PROTO_NAME_MAX + 256)
#define STORE_HOLDER_ADDR_MAX	64	/* a holder's address, NUL included */
#define STORE_HEARTBEAT_MS	1000	/* at most; owner-lease / 3 if less */
#define STORE_BACKOFF_MIN_MS	100
#define STORE_BACKOFF_MAX_MS	2000
/* A batch may take redis-timeout, plus this per change, to be answered. */
#define STORE_CHANGES_PER_MS	50

/* What a reply answers, carried as the callback's privdata. */
enum store_step {
	STEP_AUTH = 1,
	STEP_SELECT,
	STEP_APPENDONLY,
	STEP_APPENDFSYNC,
	STEP_TOKENS,
	STEP_SEMS,
	STEP_LOAD_WRITE,
	STEP_LOAD_RENEW,
	STEP_EXEC,
	STEP_HEARTBEAT
};

/* A fenced request in flight: a batch or a heartbeat. */
struct store_req {
	enum store_step	 step;
	uint64_t	 sent_ms;	/* the ownership lease runs from then */
	uint64_t	 deadline_ms;	/* answered by then, or Redis is down */
};
/* persistence-pipeline's most batches, and a heartbeat. */
#define STORE_INFLIGHT_MAX	(CONFIG_PIPELINE_MAX + 1)

/* The words of one script call, built for a batch. */
struct store_argv {
	char		**argv;
	size_t		 *lens;
	size_t		  n, cap;
};

struct store {
	const struct config	*cfg;
	struct event_base	*base;
	struct store_events	 ev;
	void			*ctx;

	redisAsyncContext	*ac;		/* NULL while down */
	int			 ready;		/* handshake done */
	/* Fenced requests in flight, oldest first (a ring): answered in
	 * order, each with its own deadline. */
	struct store_req	 inflight[STORE_INFLIGHT_MAX];
	unsigned		 inflight_head, ninflight;
	unsigned		 nbatches;	/* STEP_EXEC ones among them */
	uint64_t		 hs_tokens;	/* read in the handshake */
	struct event		*deadline_ev;	/* the request in flight */
	struct event		*retry_ev;	/* the next connect */
	struct event		*heartbeat_ev;
	struct event		*write_ev;	/* send what was queued, now */
	unsigned		 backoff_ms;	/* reset by a fenced success only */
	int			 ever_connected;

	char			 id[24];	/* this process, in the owner key */
	char			 advertise[STORE_ADDR_MAX];
	char			 fence[64];	/* "EPOCH ID " once claimed */
	uint64_t		 epoch;		/* 0: not the owner */
	redisAsyncContext	*cac;		/* claims; NULL while closed */
	int			 claiming;	/* claimed() is due */
	uint64_t		 claim_sent_ms;
	struct event		*claim_deadline_ev;
	char			 write_sha[48];	/* SCRIPT LOAD answers */
	char			 renew_sha[48];

	struct log_repeat	 failure;	/* what keeps failing, if so */
	/* The oldest batch's error reply says Redis applied none of it. */
	int			 oldest_refused;

	char			 host[256];	/* or the unix socket path */
	int			 port;		/* 0: unix socket */
	char			 address[300];
	char			 subject[310];	/* "redis ADDRESS", for the log */
	char			 dataset[400];
	char			 appendonly[16];
	char			 appendfsync[16];
	char			 durability[40];
};

static void	store_fail(struct store *, const char *, int);

/* --- the data model --- */

static void
store_key(struct store *st, char *buf, const char *sem, size_t len,
    const char *what)
{
	if (sem == NULL)
		snprintf(buf, STORE_KEY_MAX, "%s%s", st->cfg->redis_prefix,
		    what);
	else
		snprintf(buf, STORE_KEY_MAX, "%s{%.*s}:%s",
		    st->cfg->redis_prefix, (int)len, sem, what);
}

typedef void (*store_emit_fn)(void *arg, int argc, const char **argv,
    const size_t *lens);

/* SADD or SREM ch's semaphore name in the index of names, P sems. */
static void
store_encode_index(struct store *st, const char *op,
    const struct store_change *ch, store_emit_fn emit, void *arg)
{
	char		 key[STORE_KEY_MAX];
	const char	*argv[3] = { op, key, ch->sem };
	size_t		 lens[3];

	store_key(st, key, NULL, 0, "sems");
	lens[0] = strlen(op);
	lens[1] = strlen(key);
	lens[2] = ch->sem_len;
	emit(arg, 3, argv, lens);
}

/* Emit one command of argc (at most 4) NUL-terminated words. */
static void
store_emit_words(store_emit_fn emit, void *arg, int argc, const char **argv)
{
	size_t	lens[4];
	int	i;

	for (i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	emit(arg, argc, argv, lens);
}

/* Emit the Redis commands that make ch true. */
static void
store_encode(struct store *st, const struct store_change *ch,
    store_emit_fn emit, void *arg)
{
	char	key[STORE_KEY_MAX], key2[STORE_KEY_MAX], num[24], value[256];

	switch (ch->type) {
	case STORE_SEM_PUT:
		store_key(st, key, ch->sem, ch->sem_len, "sem");
		snprintf(num, sizeof(num), "%u", ch->capacity);
		store_emit_words(emit, arg, 4,
		    (const char *[]){ "HSET", key, "capacity", num });
		store_encode_index(st, "SADD", ch, emit, arg);
		break;
	case STORE_SEM_DEL:
		store_key(st, key, ch->sem, ch->sem_len, "sem");
		store_key(st, key2, ch->sem, ch->sem_len, "grants");
		store_emit_words(emit, arg, 3,
		    (const char *[]){ "DEL", key, key2 });
		store_encode_index(st, "SREM", ch, emit, arg);
		break;
	case STORE_GRANT_PUT:
		store_key(st, key, ch->sem, ch->sem_len, "grants");
		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)ch->token);
		/* "+T": the script writes Redis's TIME + T (store-scripts.h). */
		snprintf(value, sizeof(value), "n=%u kind=%s deadline_ms=%s%llu "
		    "name=%.*s addr=%.*s", ch->n,
		    ch->kind == STORE_KIND_LEASE ? "lease" : "conn",
		    ch->kind == STORE_KIND_LEASE ? "+" : "",
		    (unsigned long long)(ch->kind == STORE_KIND_LEASE ?
		    ch->lease_ms : 0), PROTO_LABEL_MAX,
		    ch->holder_name != NULL ? ch->holder_name : "-",
		    STORE_HOLDER_ADDR_MAX - 1,
		    ch->holder_addr != NULL ? ch->holder_addr : "-");
		store_emit_words(emit, arg, 4,
		    (const char *[]){ "HSET", key, num, value });
		break;
	case STORE_GRANT_DEL:
		store_key(st, key, ch->sem, ch->sem_len, "grants");
		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)ch->token);
		store_emit_words(emit, arg, 3,
		    (const char *[]){ "HDEL", key, num });
		break;
	case STORE_DISOWN:
		store_key(st, key, NULL, 0, "owner");
		store_emit_words(emit, arg, 2, (const char *[]){ "DEL", key });
		break;
	case STORE_TOKENS:
		store_key(st, key, NULL, 0, "tokens");
		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)ch->token);
		store_emit_words(emit, arg, 3,
		    (const char *[]){ "SET", key, num });
		break;
	}
}

/* --- fenced script calls --- */

static void
store_argv_push(struct store_argv *a, const char *w, size_t len)
{
	if (a->n == a->cap) {
		a->cap = a->cap == 0 ? 64 : a->cap * 2;
		a->argv = realloc(a->argv, a->cap * sizeof(*a->argv));
		a->lens = realloc(a->lens, a->cap * sizeof(*a->lens));
		if (a->argv == NULL || a->lens == NULL)
			abort();
	}
	a->argv[a->n] = xcalloc(1, len + 1);
	memcpy(a->argv[a->n], w, len);
	a->argv[a->n][len] = '\0';
	a->lens[a->n++] = len;
}

static void
store_argv_pushs(struct store_argv *a, const char *w)
{
	store_argv_push(a, w, strlen(w));
}

static void
store_argv_free(struct store_argv *a)
{
	size_t	i;

	for (i = 0; i < a->n; i++)
		free(a->argv[i]);
	free(a->argv);
	free(a->lens);
	memset(a, 0, sizeof(*a));
}

/* store_emit_fn: one command as its word count, then its words. */
static void
store_emit_argv(void *arg, int argc, const char **argv, const size_t *lens)
{
	struct store_argv	*a = arg;
	char			 num[8];
	int			 i;

	snprintf(num, sizeof(num), "%d", argc);
	store_argv_pushs(a, num);
	for (i = 0; i < argc; i++)
		store_argv_push(a, argv[i], lens[i]);
}

/* The owner key's value: "EPOCH ID ADDR". */
static void
store_owner_value(struct store *st, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", st->fence, st->advertise);
}

/*
 * The words of a fenced script call: verb ("EVAL" or "EVALSHA") and
 * script (its text or SHA1), the keys owner and epoch, then extra_key if
 * not NULL, then the fence's arguments.
 */
static void
store_fenced_call(struct store *st, struct store_argv *a, const char *verb,
    const char *script, const char *extra_key)
{
	char	key[STORE_KEY_MAX], num[24], value[sizeof(st->fence) +
		    STORE_ADDR_MAX];

	store_argv_pushs(a, verb);
	store_argv_pushs(a, script);
	store_argv_pushs(a, extra_key != NULL ? "3" : "2");
	store_key(st, key, NULL, 0, "owner");
	store_argv_pushs(a, key);
	store_key(st, key, NULL, 0, "epoch");
	store_argv_pushs(a, key);
	if (extra_key != NULL)
		store_argv_pushs(a, extra_key);
	store_argv_pushs(a, st->fence);
	store_owner_value(st, value, sizeof(value));
	store_argv_pushs(a, value);
	snprintf(num, sizeof(num), "%lld", (long long)st->cfg->owner_lease_ms);
	store_argv_pushs(a, num);
}

/* A write of n changes as one fenced script call. */
static void
store_batch_argv(struct store *st, struct store_argv *a, const char *verb,
    const char *script, const struct store_change *ch, size_t n)
{
	size_t	i;

	store_fenced_call(st, a, verb, script, NULL);
	for (i = 0; i < n; i++)
		store_encode(st, &ch[i], store_emit_argv, a);
}

/* 1 when an error reply is the fence refusing us; *owner then points in. */
static int
store_is_fenced(const redisReply *r, const char **owner)
{
	static const char	tag[] = "SEMDFENCED ";
	const char		*p;

	if (r == NULL || r->type != REDIS_REPLY_ERROR)
		return (0);
	/* Redis may put its own words before a script's error text. */
	if ((p = strstr(r->str, tag)) == NULL)
		return (0);
	*owner = p + sizeof(tag) - 1;
	return (1);
}

/* A write script's answer: the keys it repaired (an array), else error. */
static int
store_write_ok(const redisReply *r, char *why, size_t len)
{
	if (r == NULL) {
		snprintf(why, len, "connection lost");
		return (0);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(why, len, "write: %s", r->str);
		return (0);
	}
	if (r->type != REDIS_REPLY_ARRAY) {
		snprintf(why, len, "write: unexpected reply");
		return (0);
	}
	return (1);
}

/* Log the keys a write replaced; returns them as an array for events. */
static void
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
		log_warnx("redis %s: key %s had the wrong type for semd; "
		    "replaced it (the keys under prefix '%s' are semd's own)",
		    st->address, r->element[i]->str, st->cfg->redis_prefix);
	}
	if (n > 0 && st->ev.repaired != NULL)
		st->ev.repaired(st->ctx, keys, n);
	free(keys);
}

/*
 * The optional word key=V of s into buf (size bytes): "" when absent,
 * "-", or not fit to show (a name must be a valid label).
 */
static void
store_decode_label(const char *s, size_t len, const char *key, char *buf,
    size_t size)
{
	struct proto_word	w;

	buf[0] = '\0';
	if (!proto_find_kv(s, len, key, &w) || w.len >= size ||
	    (w.len == 1 && w.p[0] == '-') || memchr(w.p, '\0', w.len) != NULL)
		return;
	if (strcmp(key, "name") == 0 && !proto_valid_label(w.p, w.len))
		return;
	memcpy(buf, w.p, w.len);
	buf[w.len] = '\0';
}

/*
 * "n=N kind=K deadline_ms=D [name=L addr=A]" into its parts; -1 when
 * malformed. name and addr ("" when unknown) are PROTO_LABEL_MAX + 1 and
 * STORE_HOLDER_ADDR_MAX bytes.
 */
static int
store_decode_grant(const char *s, size_t len, uint32_t *n,
    enum store_grant_kind *kind, uint64_t *deadline, char *name, char *addr)
{
	struct proto_word	w;
	uint64_t		v;

	store_decode_label(s, len, "name", name, PROTO_LABEL_MAX + 1);
	store_decode_label(s, len, "addr", addr, STORE_HOLDER_ADDR_MAX);

	if (!proto_find_kv(s, len, "n", &w) ||
	    proto_parse_u64(w.p, w.len, PROTO_INT_MAX, &v) != 0 || v == 0)
		return (-1);
	*n = (uint32_t)v;
	if (!proto_find_kv(s, len, "kind", &w))
		return (-1);
	if (w.len == 5 && memcmp(w.p, "lease", 5) == 0)
		*kind = STORE_KIND_LEASE;
	else if (w.len == 4 && memcmp(w.p, "conn", 4) == 0)
		*kind = STORE_KIND_CONN;
	else
		return (-1);
	if (!proto_find_kv(s, len, "deadline_ms", &w) ||
	    proto_parse_u64(w.p, w.len, UINT64_MAX, deadline) != 0)
		return (-1);
	return (0);
}

/* A reply holding a decimal (or nil, 0) into *v; -1 otherwise. */
static int
store_reply_u64(const redisReply *r, uint64_t *v)
{
	if (r == NULL)
		return (-1);
	if (r->type == REDIS_REPLY_NIL) {
		*v = 0;
		return (0);
	}
	if (r->type == REDIS_REPLY_INTEGER && r->integer >= 0) {
		*v = (uint64_t)r->integer;
		return (0);
	}
	if (r->type == REDIS_REPLY_STRING)
		return (proto_parse_u64(r->str, r->len, UINT64_MAX, v));
	return (-1);
}

/* --- the blocking connection: start-up load, shutdown flush --- */

static redisContext *
store_connect_blocking(struct store *st, char *err, size_t errlen)
{
	struct timeval	 tv;
	redisContext	*c;
	redisReply	*r;

	tv.tv_sec = st->cfg->redis_timeout_ms / 1000;
	tv.tv_usec = (st->cfg->redis_timeout_ms % 1000) * 1000;
	c = st->port == 0 ? redisConnectUnixWithTimeout(st->host, tv) :
	    redisConnectWithTimeout(st->host, st->port, tv);
	if (c == NULL || c->err) {
		snprintf(err, errlen, "%s", c != NULL ? c->errstr :
		    "out of memory");
		goto fail;
	}
	redisSetTimeout(c, tv);
	if (st->cfg->redis_password != NULL) {
		r = redisCommand(c, "AUTH %s", st->cfg->redis_password);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			snprintf(err, errlen, "AUTH: %s", r != NULL ? r->str :
			    c->errstr);
			freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	if (st->cfg->redis_db != 0) {
		r = redisCommand(c, "SELECT %lld", (long long)st->cfg->redis_db);
		if (r == NULL || r->type == REDIS_REPLY_ERROR) {
			snprintf(err, errlen, "SELECT: %s", r != NULL ? r->str :
			    c->errstr);
			freeReplyObject(r);
			goto fail;
		}
		freeReplyObject(r);
	}
	return (c);
fail:
	if (c != NULL)
		redisFree(c);
	return (NULL);
}

/* Read the next pipelined reply; NULL (and err) on an I/O error. */
static redisReply *
store_get_reply(redisContext *c, char *err, size_t errlen)
{
	void	*r = NULL;

	if (redisGetReply(c, &r) != REDIS_OK) {
		snprintf(err, errlen, "%s", c->errstr);
		return (NULL);
	}
	return (r);
}

/* What a load reads besides the semaphores: for the grants' decoding. */
struct store_load_ctx {
	const struct store_loader *ld;
	void			*ctx;
	uint64_t		 redis_now_ms;	/* Redis's TIME at the load */
	uint64_t		 max_token;
	int			 repair;	/* something was damaged */
};

/* A grant of a hash being loaded: its token, and where it is (sorting). */
struct store_load_order {
	uint64_t	 token;
	size_t		 at;		/* its field's index in the reply */
};

static int
store_load_order_cmp(const void *a, const void *b)
{
	const struct store_load_order	*x = a, *y = b;

	return (x->token < y->token ? -1 : x->token > y->token);
}

/*
 * Load one semaphore's two replies: its capacity and its grants, handed
 * on in token order (oldest first, as HOLDERS lists them; a Redis hash
 * has no order of its own). A
 * damaged semaphore key is reported (its grants are kept); grants that
 * cannot be read fail the load (-1, err): serving without them could
 * grant what is held.
 */
static int
store_load_sem(struct store *st, struct store_load_ctx *lc,
    const redisReply *name, const redisReply *cap, const redisReply *grants,
    char *err, size_t errlen)
{
	struct store_load_order	*order;
	enum store_grant_kind	 kind;
	uint64_t		 v, token, deadline, left;
	uint32_t		 n;
	size_t			 i, o, norder;
	char			 hname[PROTO_LABEL_MAX + 1];
	char			 haddr[STORE_HOLDER_ADDR_MAX];
	int			 damaged = 0;

	if (name->type != REDIS_REPLY_STRING ||
	    !proto_valid_name(name->str, name->len)) {
		log_warnx("redis %s: skipping a member of %ssems that is not "
		    "a valid semaphore name", st->address,
		    st->cfg->redis_prefix);
		lc->repair = 1;
		return (0);
	}
	if (grants->type != REDIS_REPLY_ARRAY) {
		snprintf(err, errlen, "key %s{%s}:grants is not a hash: its "
		    "grants cannot be read, so this daemon will not serve (it "
		    "could grant what is held); restore the key, or delete it "
		    "if no permit of %s is held", st->cfg->redis_prefix,
		    name->str, name->str);
		return (-1);
	}
	if (cap->type == REDIS_REPLY_NIL && grants->elements == 0) {
		/* A name left without keys: nothing held, nothing to keep. */
		log_warnx("redis %s: semaphore %s is in %ssems but has no "
		    "keys; dropping the name", st->address, name->str,
		    st->cfg->redis_prefix);
		lc->repair = 1;
		return (0);
	}
	if (store_reply_u64(cap, &v) != 0 || cap->type == REDIS_REPLY_NIL ||
	    v > PROTO_INT_MAX) {
		damaged = 1;
		v = 0;
		lc->repair = 1;
	}
	lc->ld->sem(lc->ctx, name->str, (uint32_t)v, damaged);
	order = xcalloc(grants->elements / 2 + 1, sizeof(*order));
	for (i = 0, norder = 0; i + 1 < grants->elements; i += 2) {
		const redisReply *f = grants->element[i];

		order[norder].at = i;
		if (f->type != REDIS_REPLY_STRING || proto_parse_u64(f->str,
		    f->len, UINT64_MAX, &order[norder].token) != 0)
			order[norder].token = 0;	/* refused below */
		norder++;
	}
	qsort(order, norder, sizeof(*order), store_load_order_cmp);
	for (o = 0; o < norder; o++) {
		const redisReply *val = grants->element[order[o].at + 1];

		token = order[o].token;
		if (token == 0 || val->type != REDIS_REPLY_STRING ||
		    store_decode_grant(val->str, val->len, &n, &kind,
		    &deadline, hname, haddr) != 0) {
			snprintf(err, errlen, "a grant of %s in %s{%s}:grants "
			    "cannot be read: this daemon will not serve the "
			    "data set without it; repair or delete that field",
			    name->str, st->cfg->redis_prefix, name->str);
			free(order);
			return (-1);
		}
		if (token > lc->max_token)
			lc->max_token = token;
		left = kind == STORE_KIND_LEASE && deadline > lc->redis_now_ms ?
		    deadline - lc->redis_now_ms : 0;
		lc->ld->grant(lc->ctx, name->str, token, n, kind, left,
		    hname[0] != '\0' ? hname : NULL,
		    haddr[0] != '\0' ? haddr : NULL);
	}
	free(order);
	return (0);
}

/*
 * Redis's clock, in Unix ms: leases' ends are written on it (the write
 * script), so what is left of them is measured on it too.
 */
static int
store_redis_time(redisContext *c, uint64_t *ms, char *err, size_t errlen)
{
	redisReply	*r = redisCommand(c, "TIME");
	uint64_t	 sec, usec;
	int		 rc = -1;

	if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    store_reply_u64(r->element[0], &sec) == 0 &&
	    store_reply_u64(r->element[1], &usec) == 0) {
		*ms = sec * 1000 + usec / 1000;
		rc = 0;
	} else
		snprintf(err, errlen, "TIME: %s", r == NULL ? c->errstr :
		    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
	freeReplyObject(r);
	return (rc);
}

/* pattern with the glob characters of the prefix escaped, then suffix. */
static void
store_glob(struct store *st, char *buf, size_t size, const char *suffix)
{
	const char	*p;
	size_t		 n = 0;

	for (p = st->cfg->redis_prefix; *p != '\0' && n + 2 < size; p++) {
		if (strchr("*?[]\\", *p) != NULL)
			buf[n++] = '\\';
		buf[n++] = *p;
	}
	snprintf(buf + n, size - n, "%s", suffix);
}

/* The semaphore names a load reads, without repeats. */
struct store_names {
	struct store_name {
		char		*name;
		UT_hash_handle	 hh;
	}			*set;
	char			**v;		/* in the order found */
	size_t			 n, cap;
};

static void
store_names_add(struct store_names *nm, const char *name, size_t len)
{
	struct store_name	*e;

	HASH_FIND(hh, nm->set, name, len, e);
	if (e != NULL)
		return;
	if (nm->n == nm->cap) {
		nm->cap = nm->cap == 0 ? 64 : nm->cap * 2;
		if ((nm->v = realloc(nm->v, nm->cap * sizeof(*nm->v))) == NULL)
			abort();
	}
	e = xcalloc(1, sizeof(*e));
	e->name = xcalloc(1, len + 1);
	memcpy(e->name, name, len);
	HASH_ADD_KEYPTR(hh, nm->set, e->name, len, e);
	nm->v[nm->n++] = e->name;
}

static void
store_names_free(struct store_names *nm)
{
	struct store_name	*e, *tmp;

	HASH_ITER(hh, nm->set, e, tmp) {
		HASH_DEL(nm->set, e);
		free(e->name);
		free(e);
	}
	free(nm->v);
	memset(nm, 0, sizeof(*nm));
}

/* Add the NAME of a key "P{NAME}:sem" or "P{NAME}:grants", if it is one. */
static void
store_names_add_key(struct store *st, struct store_names *nm,
    const redisReply *k)
{
	size_t		 plen = strlen(st->cfg->redis_prefix);
	const char	*open, *close;

	if (k->type != REDIS_REPLY_STRING || k->len <= plen + 2 ||
	    memcmp(k->str, st->cfg->redis_prefix, plen) != 0 ||
	    k->str[plen] != '{')
		return;
	open = k->str + plen + 1;
	if ((close = strstr(open, "}:")) == NULL ||
	    (strcmp(close, "}:sem") != 0 && strcmp(close, "}:grants") != 0) ||
	    !proto_valid_name(open, (size_t)(close - open)))
		return;
	store_names_add(nm, open, (size_t)(close - open));
}

/*
 * The set of names is damaged (or gone while tokens were issued): find
 * the semaphores by their own keys instead. Returns -1 with err on an I/O
 * error.
 */
static int
store_scan_names(struct store *st, redisContext *c, struct store_names *nm,
    char *err, size_t errlen)
{
	redisReply	*r;
	char		 match[STORE_KEY_MAX * 2], cursor[32] = "0";
	size_t		 i;

	store_glob(st, match, sizeof(match), "{*}:*");
	do {
		r = redisCommand(c, "SCAN %s MATCH %s COUNT 1000", cursor,
		    match);
		if (r == NULL || r->type != REDIS_REPLY_ARRAY ||
		    r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			snprintf(err, errlen, "SCAN: %s", r == NULL ?
			    c->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
			    "unexpected reply");
			freeReplyObject(r);
			return (-1);
		}
		snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
		for (i = 0; i < r->element[1]->elements; i++)
			store_names_add_key(st, nm, r->element[1]->element[i]);
		freeReplyObject(r);
	} while (strcmp(cursor, "0") != 0);
	return (0);
}

/*
 * The semaphore names: P sems, or, when that set is damaged or gone while
 * tokens were issued, the names of the semaphores' own keys (then *repair).
 */
static int
store_load_names(struct store *st, redisContext *c, uint64_t bound,
    struct store_names *nm, int *repair, char *err, size_t errlen)
{
	char		 key[STORE_KEY_MAX];
	redisReply	*r;
	size_t		 i;
	int		 scan;

	store_key(st, key, NULL, 0, "sems");
	if ((r = redisCommand(c, "SMEMBERS %s", key)) == NULL) {
		snprintf(err, errlen, "SMEMBERS %s: %s", key, c->errstr);
		return (-1);
	}
	if (r->type == REDIS_REPLY_ARRAY) {
		for (i = 0; i < r->elements; i++)
			if (r->element[i]->type == REDIS_REPLY_STRING)
				store_names_add(nm, r->element[i]->str,
				    r->element[i]->len);
		scan = r->elements == 0 && bound > 0;
	} else if (r->type == REDIS_REPLY_ERROR &&
	    strstr(r->str, "WRONGTYPE") != NULL) {
		log_warnx("redis %s: key %s has the wrong type; finding the "
		    "semaphores by their own keys, and rewriting it",
		    st->address, key);
		scan = 1;
	} else {
		snprintf(err, errlen, "SMEMBERS %s: %s", key,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not a set");
		freeReplyObject(r);
		return (-1);
	}
	freeReplyObject(r);
	if (!scan)
		return (0);
	i = nm->n;
	if (store_scan_names(st, c, nm, err, errlen) != 0)
		return (-1);
	if (nm->n > i) {
		log_warnx("redis %s: %zu semaphores had keys but were missing "
		    "from %s; restoring them", st->address, nm->n - i, key);
		*repair = 1;
	}
	return (0);
}

/*
 * Run one fenced write of n changes on the blocking connection c. Returns
 * 0, or -1 with a message in err (the fence's refusal included).
 */
static int
store_run_blocking(struct store *st, redisContext *c,
    const struct store_change *ch, size_t n, char *err, size_t errlen)
{
	struct store_argv	 a = { NULL, NULL, 0, 0 };
	redisReply		*r;
	const char		*owner;
	int			 rc = 0;

	store_batch_argv(st, &a, "EVAL", STORE_LUA_WRITE, ch, n);
	r = redisCommandArgv(c, (int)a.n, (const char **)a.argv, a.lens);
	store_argv_free(&a);
	if (store_is_fenced(r, &owner)) {
		snprintf(err, errlen, "not the owner any more (owner key: %s)",
		    owner);
		rc = -1;
	} else if (!store_write_ok(r, err, errlen)) {
		if (r == NULL)
			snprintf(err, errlen, "%s", c->errstr);
		rc = -1;
	} else
		store_report_repaired(st, r);
	freeReplyObject(r);
	return (rc);
}

static int
store_load(struct store *st, const struct store_loader *ld, void *ctx,
    uint64_t reserve, uint64_t *tokens, int *repair, char *err,
    size_t errlen)
{
	char			 key[STORE_KEY_MAX];
	redisContext		*c;
	redisReply		*r = NULL, *cap, *grants;
	struct store_names	 nm = { NULL, NULL, 0, 0 };
	struct store_load_ctx	 lc = { ld, ctx, 0, 0, 0 };
	size_t			 i;
	int			 rc = -1;
	uint64_t		 bound;

	if ((c = store_connect_blocking(st, err, errlen)) == NULL)
		return (-1);
	if (store_redis_time(c, &lc.redis_now_ms, err, errlen) != 0)
		goto out;
	store_key(st, key, NULL, 0, "tokens");
	r = redisCommand(c, "GET %s", key);
	if (r == NULL || store_reply_u64(r, &bound) != 0) {
		snprintf(err, errlen, "GET %s: %s%s", key, r == NULL ?
		    c->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
		    "not a number", r == NULL ? "" : "; the token bound is "
		    "lost: set it above every token issued (redis-cli SET "
		    "KEY N) to serve again");
		goto out;
	}
	if (store_load_names(st, c, bound, &nm, &lc.repair, err, errlen) != 0)
		goto out;
	/* Pipelined: two requests per semaphore, then read the replies. */
	for (i = 0; i < nm.n; i++) {
		store_key(st, key, nm.v[i], strlen(nm.v[i]), "sem");
		redisAppendCommand(c, "HGET %s capacity", key);
		store_key(st, key, nm.v[i], strlen(nm.v[i]), "grants");
		redisAppendCommand(c, "HGETALL %s", key);
	}
	for (i = 0; i < nm.n; i++) {
		redisReply	 name = { .type = REDIS_REPLY_STRING,
				    .str = nm.v[i], .len = strlen(nm.v[i]) };
		int		 bad;

		if ((cap = store_get_reply(c, err, errlen)) == NULL)
			goto out;
		if ((grants = store_get_reply(c, err, errlen)) == NULL) {
			freeReplyObject(cap);
			goto out;
		}
		bad = store_load_sem(st, &lc, &name, cap, grants, err, errlen);
		freeReplyObject(cap);
		freeReplyObject(grants);
		if (bad)
			goto out;
	}
	if (lc.max_token > bound)
		bound = lc.max_token;
	if (*tokens > bound)
		bound = *tokens;
	/* Reserve the first block before any token is issued (fenced). */
	if (store_run_blocking(st, c, &(struct store_change){
	    .type = STORE_TOKENS, .token = bound + reserve }, 1, err,
	    errlen) != 0)
		goto out;
	*tokens = bound;
	*repair = lc.repair;
	rc = 0;
out:
	freeReplyObject(r);
	store_names_free(&nm);
	redisFree(c);
	return (rc);
}

static int
store_write_blocking(struct store *st, const struct store_change *ch,
    size_t n)
{
	char		 err[256];
	redisContext	*c;
	int		 rc;

	if ((c = store_connect_blocking(st, err, sizeof(err))) == NULL) {
		log_warnx("redis %s: final write: %s", st->address, err);
		return (-1);
	}
	if ((rc = store_run_blocking(st, c, ch, n, err, sizeof(err))) != 0)
		log_warnx("redis %s: final write: %s", st->address, err);
	redisFree(c);
	return (rc);
}

/* Parse the owner key's value "EPOCH ID ADDR" for the log and ROLE. */
static void
store_parse_owner(const char *value, size_t len, struct store_owner *out)
{
	struct proto_word	w;
	size_t			pos = 0;
	uint64_t		epoch = 0;

	snprintf(out->addr, sizeof(out->addr), "-");
	if (proto_next_word(value, len, &pos, &w) &&
	    proto_parse_u64(w.p, w.len, UINT64_MAX, &epoch) == 0)
		out->epoch = epoch;
	if (proto_next_word(value, len, &pos, &w) &&
	    proto_next_word(value, len, &pos, &w))
		snprintf(out->addr, sizeof(out->addr), "%.*s", (int)w.len,
		    w.p);
}

/* --- the asynchronous connection --- */

static void
store_arm_deadline(struct store *st, uint64_t extra_ms)
{
	uint64_t	ms = (uint64_t)st->cfg->redis_timeout_ms + extra_ms;
	struct timeval	tv = { (time_t)(ms / 1000),
			    (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(st->deadline_ev, &tv);
}

static void
store_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store	*st = arg;
	char		 why[96];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "no answer within %lld ms",
	    (long long)st->cfg->redis_timeout_ms);
	store_fail(st, why, 1);
}

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
	evtimer_del(st->deadline_ev);
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
	struct timeval	tv;

	if (st->ninflight == 0) {
		evtimer_del(st->deadline_ev);
		return;
	}
	ms = st->inflight[st->inflight_head].deadline_ms;
	ms = ms > now ? ms - now : 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(st->deadline_ev, &tv);
}

/* Forget every request in flight; returns how many were batches. */
static unsigned
store_drop_inflight(struct store *st)
{
	unsigned	n = st->nbatches;

	st->ninflight = st->nbatches = st->inflight_head = 0;
	evtimer_del(st->deadline_ev);
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
	if (req.step == STEP_EXEC)
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

/*
 * 1 when a write script's error reply means it changed nothing: the
 * errors Redis gives before a script runs, or at its first write, which is
 * the fence's own (store-scripts.h). Any other error may have come after
 * some of the batch was applied: its outcome is unknown.
 */
static int
store_applied_nothing(const redisReply *r)
{
	static const char *const before[] = { "NOSCRIPT", "LOADING",
	    "NOAUTH", "BUSY", "READONLY", "OOM", "MISCONF", "NOREPLICAS",
	    "MASTERDOWN" };
	size_t	i;

	if (r == NULL || r->type != REDIS_REPLY_ERROR)
		return (0);
	for (i = 0; i < sizeof(before) / sizeof(before[0]); i++)
		if (strstr(r->str, before[i]) != NULL)
			return (1);
	return (0);
}

/* The fence refused us: drop the connection for good and say so. */
static void
store_deposed(struct store *st, const char *owner)
{
	redisAsyncContext	*ac = st->ac;
	int			 refused = st->ninflight > 0 &&
				    st->inflight[st->inflight_head].step ==
				    STEP_EXEC;
	unsigned		 nbatches = store_drop_inflight(st);
	char			 who[STORE_ADDR_MAX + 64];

	snprintf(who, sizeof(who), "%s", owner);
	st->ac = NULL;
	st->ready = 0;
	st->epoch = 0;
	redisAsyncFree(ac);
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

static void
store_reply_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store		*st = ac->data;
	const redisReply	*r = reply;
	enum store_step		 step = (enum store_step)(intptr_t)privdata;
	const char		*owner;
	char			 why[256];
	uint64_t		 v;

	if (ac != st->ac)
		return;		/* a dropped connection's leftovers */
	if (r == NULL) {
		store_fail(st, ac->errstr[0] != '\0' ? ac->errstr :
		    "connection lost", 1);
		return;
	}
	switch (step) {
	case STEP_AUTH:
	case STEP_SELECT:
		if (r->type == REDIS_REPLY_ERROR) {
			snprintf(why, sizeof(why), "%s: %s", step == STEP_AUTH ?
			    "AUTH" : "SELECT", r->str);
			store_fail(st, why, 1);
		}
		break;
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
			store_fail(st, why, 1);
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
			store_fail(st, why, 1);
			break;
		}
		st->hs_tokens = v;
		break;
	case STEP_SEMS:
		if (r->type == REDIS_REPLY_ERROR &&
		    strstr(r->str, "WRONGTYPE") != NULL) {
			/* A rewrite replaces it: report no names, bound 0. */
			log_warnx("redis %s: key %ssems has the wrong type; "
			    "semd will rewrite its keys", st->address,
			    st->cfg->redis_prefix);
			st->hs_tokens = 0;
			store_handshake_done(st, &(redisReply){
			    .type = REDIS_REPLY_ARRAY });
			break;
		}
		if (r->type != REDIS_REPLY_ARRAY) {
			snprintf(why, sizeof(why), "SMEMBERS %ssems: %s",
			    st->cfg->redis_prefix, r->type == REDIS_REPLY_ERROR ?
			    r->str : "not a set");
			store_fail(st, why, 1);
			break;
		}
		store_handshake_done(st, r);
		break;
	case STEP_EXEC:
		if (store_is_fenced(r, &owner)) {
			store_deposed(st, owner);
			break;
		}
		if (!store_write_ok(r, why, sizeof(why))) {
			st->oldest_refused = store_applied_nothing(r);
			store_fail(st, why, 1);
			break;
		}
		store_succeeded(st);
		if (st->ac != ac)
			break;	/* the acknowledgement came too late */
		store_report_repaired(st, r);
		st->ev.batch_done(st->ctx, STORE_ACKED);
		break;
	case STEP_HEARTBEAT:
		if (store_is_fenced(r, &owner)) {
			store_deposed(st, owner);
			break;
		}
		if (r->type == REDIS_REPLY_ERROR ||
		    store_tokens_reply(st, r, &v) != 0) {
			snprintf(why, sizeof(why), "heartbeat: %s",
			    r->type == REDIS_REPLY_ERROR ? r->str :
			    "not a number");
			store_fail(st, why, 1);
			break;
		}
		store_succeeded(st);
		if (st->ac == ac)
			st->ev.heartbeat(st->ctx, v);
		break;
	}
}

static void
store_command(struct store *st, enum store_step step, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	redisvAsyncCommand(st->ac, store_reply_cb, (void *)(intptr_t)step, fmt,
	    ap);
	va_end(ap);
}

/*
 * Send a fenced script call built in a; its answer comes as step, within
 * redis-timeout plus extra_ms.
 */
static void
store_send_argv(struct store *st, enum store_step step, struct store_argv *a,
    uint64_t extra_ms)
{
	struct store_req	*req;

	redisAsyncCommandArgv(st->ac, store_reply_cb, (void *)(intptr_t)step,
	    (int)a->n, (const char **)a->argv, a->lens);
	store_argv_free(a);
	event_active(st->write_ev, 0, 0);
	req = &st->inflight[(st->inflight_head + st->ninflight) %
	    STORE_INFLIGHT_MAX];
	req->step = step;
	req->sent_ms = timers_now_ms();
	req->deadline_ms = req->sent_ms +
	    (uint64_t)st->cfg->redis_timeout_ms + extra_ms;
	if (step == STEP_EXEC)
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
	if (st->ac != NULL && (st->ac->c.flags & REDIS_CONNECTED))
		redisAsyncHandleWrite(st->ac);
}

/* Connected: authenticate, select, and read what ready() reports. */
static void
store_handshake(struct store *st)
{
	char	key[STORE_KEY_MAX];

	if (st->cfg->redis_password != NULL)
		store_command(st, STEP_AUTH, "AUTH %s",
		    st->cfg->redis_password);
	if (st->cfg->redis_db != 0)
		store_command(st, STEP_SELECT, "SELECT %lld",
		    (long long)st->cfg->redis_db);
	store_command(st, STEP_APPENDONLY, "CONFIG GET appendonly");
	store_command(st, STEP_APPENDFSYNC, "CONFIG GET appendfsync");
	store_command(st, STEP_LOAD_WRITE, "SCRIPT LOAD %s", STORE_LUA_WRITE);
	store_command(st, STEP_LOAD_RENEW, "SCRIPT LOAD %s", STORE_LUA_RENEW);
	store_key(st, key, NULL, 0, "tokens");
	store_command(st, STEP_TOKENS, "GET %s", key);
	store_key(st, key, NULL, 0, "sems");
	store_command(st, STEP_SEMS, "SMEMBERS %s", key);
	store_arm_deadline(st, 0);
}

static void
store_connect_cb(const redisAsyncContext *ac, int status)
{
	struct store	*st = ac->data;

	if (ac != st->ac)
		return;
	if (status != REDIS_OK) {
		store_fail(st, ac->errstr, 0);	/* hiredis frees ac */
		return;
	}
	store_handshake(st);
}

static void
store_disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct store	*st = ac->data;

	if (ac != st->ac)
		return;
	store_fail(st, status == REDIS_OK ? "disconnected" : ac->errstr, 0);
}

static void
store_connect(struct store *st)
{
	redisAsyncContext	*ac;

	if (st->ac != NULL)
		return;
	ac = st->port == 0 ? redisAsyncConnectUnix(st->host) :
	    redisAsyncConnect(st->host, st->port);
	if (ac == NULL) {
		store_fail(st, "out of memory", 0);
		return;
	}
	if (ac->err) {
		char	why[128];

		snprintf(why, sizeof(why), "%s", ac->errstr);
		redisAsyncFree(ac);
		store_fail(st, why, 0);
		return;
	}
	ac->data = st;
	st->ac = ac;
	redisLibeventAttach(ac, st->base);
	redisAsyncSetConnectCallback(ac, store_connect_cb);
	redisAsyncSetDisconnectCallback(ac, store_disconnect_cb);
	store_arm_deadline(st, 0);
}

static void
store_disconnect(struct store *st)
{
	redisAsyncContext	*ac = st->ac;

	st->ac = NULL;
	st->ready = 0;
	st->epoch = 0;
	store_drop_inflight(st);
	evtimer_del(st->retry_ev);
	if (ac != NULL)
		redisAsyncFree(ac);	/* our callbacks now ignore it */
}

static void
store_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	store_connect(arg);
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
	if (st->ac == NULL || !st->ready || st->ninflight != 0 ||
	    st->epoch == 0)
		return;		/* a batch in flight renews too */
	store_key(st, key, NULL, 0, "tokens");
	store_fenced_call(st, &a, "EVALSHA", st->renew_sha, key);
	store_send_argv(st, STEP_HEARTBEAT, &a, 0);
}

/* The address changed: the owner key says so with the next renewal, now. */
static void
store_advertise(struct store *st, const char *addr)
{
	snprintf(st->advertise, sizeof(st->advertise), "%s", addr);
	store_heartbeat_cb(-1, 0, st);
}

/*
 * The connection failed: drop it (unless hiredis is freeing it, !drop),
 * fail the batch in flight, report, and retry after a jittered backoff
 * that grows until a write succeeds again.
 */
static void
store_fail(struct store *st, const char *why, int drop)
{
	redisAsyncContext	*ac = st->ac;
	unsigned		 nbatches = store_drop_inflight(st);
	char			 reason[256];
	struct timeval		 tv;
	unsigned		 delay;

	/* why may live in ac, which the free below releases. */
	snprintf(reason, sizeof(reason), "%s", why);
	st->ac = NULL;
	st->ready = 0;
	evtimer_del(st->deadline_ev);
	if (ac != NULL && drop)
		redisAsyncFree(ac);	/* our callbacks now ignore it */
	log_repeat(&st->failure, st->subject, reason);

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
	st->ev.lost(st->ctx, reason);
}

static void
store_reconnect(struct store *st, const char *why)
{
	if (st->ac != NULL)
		store_fail(st, why, 1);
}

static int
store_can_submit(struct store *st)
{
	return (st->ac != NULL && st->ready && st->epoch != 0 &&
	    st->nbatches < (unsigned)st->cfg->persistence_pipeline &&
	    st->ninflight < STORE_INFLIGHT_MAX);
}

static void
store_submit(struct store *st, const struct store_change *ch, size_t n)
{
	struct store_argv	a = { NULL, NULL, 0, 0 };

	store_batch_argv(st, &a, "EVALSHA", st->write_sha, ch, n);
	store_send_argv(st, STEP_EXEC, &a, n / STORE_CHANGES_PER_MS);
}

/* --- claims, on a connection of their own --- */

enum store_claim_step {
	CLAIM_AUTH = 1,
	CLAIM_SELECT,
	CLAIM_EVAL
};

/* Drop the claim connection and report the claim failed. */
static void
store_claim_fail(struct store *st, const char *why, int drop)
{
	redisAsyncContext	*ac = st->cac;
	char			 reason[256];

	snprintf(reason, sizeof(reason), "%s", why);	/* may live in ac */
	st->cac = NULL;
	evtimer_del(st->claim_deadline_ev);
	if (ac != NULL && drop)
		redisAsyncFree(ac);
	if (!st->claiming)
		return;
	st->claiming = 0;
	st->ev.claimed(st->ctx, NULL, reason);
}

/* The claim script answered r: what it found, or why it failed. */
static void
store_claim_answered(struct store *st, const redisReply *r)
{
	redisAsyncContext	*ac;
	struct store_owner	 own;
	char			 why[256];
	long long		 status;
	uint64_t		 tokens;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
	    r->element[0]->type != REDIS_REPLY_INTEGER ||
	    r->element[1]->type != REDIS_REPLY_STRING ||
	    r->element[2]->type != REDIS_REPLY_INTEGER ||
	    store_reply_u64(r->element[3], &tokens) != 0) {
		snprintf(why, sizeof(why), "claiming %sowner (and %sepoch): %s",
		    st->cfg->redis_prefix, st->cfg->redis_prefix,
		    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
		store_claim_fail(st, why, 1);
		return;
	}
	memset(&own, 0, sizeof(own));
	own.sent_ms = st->claim_sent_ms;
	status = r->element[0]->integer;
	own.epoch = (uint64_t)r->element[2]->integer;
	own.tokens = tokens;
	if (status == 1) {
		own.ours = 1;
		st->epoch = own.epoch;
		snprintf(st->fence, sizeof(st->fence), "%llu %s ",
		    (unsigned long long)st->epoch, st->id);
		snprintf(own.addr, sizeof(own.addr), "%s", st->advertise);
	} else if (status == 2 || status == 4) {
		own.superseded = status == 2;
		own.epoch_lost = status == 4;
		snprintf(own.addr, sizeof(own.addr), "-");
	} else {
		own.wait = status == 3;
		store_parse_owner(r->element[1]->str, r->element[1]->len,
		    &own);
	}
	evtimer_del(st->claim_deadline_ev);
	st->claiming = 0;
	if (own.ours) {
		/* An owner renews on the main connection: this one may go. */
		ac = st->cac;
		st->cac = NULL;
		redisAsyncFree(ac);	/* deferred: we are in its callback */
	}
	st->ev.claimed(st->ctx, &own, NULL);
}

static void
store_claim_reply_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store		*st = ac->data;
	const redisReply	*r = reply;
	enum store_claim_step	 step = (enum store_claim_step)(intptr_t)
				    privdata;
	char			 why[256];

	if (ac != st->cac)
		return;		/* a dropped connection's leftovers */
	if (r == NULL) {
		store_claim_fail(st, ac->errstr[0] != '\0' ? ac->errstr :
		    "connection lost", 1);
		return;
	}
	if (step != CLAIM_EVAL) {
		if (r->type == REDIS_REPLY_ERROR) {
			snprintf(why, sizeof(why), "%s: %s", step ==
			    CLAIM_AUTH ? "AUTH" : "SELECT", r->str);
			store_claim_fail(st, why, 1);
		}
		return;
	}
	store_claim_answered(st, r);
}

static void
store_claim_connect_cb(const redisAsyncContext *ac, int status)
{
	struct store	*st = ac->data;

	if (ac == st->cac && status != REDIS_OK)
		store_claim_fail(st, ac->errstr, 0);	/* hiredis frees ac */
}

static void
store_claim_disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct store	*st = ac->data;

	if (ac == st->cac)
		store_claim_fail(st, status == REDIS_OK ? "disconnected" :
		    ac->errstr, 0);
}

static void
store_claim_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store	*st = arg;
	char		 why[96];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "claim: no answer within %lld ms",
	    (long long)st->cfg->redis_timeout_ms);
	store_claim_fail(st, why, 1);
}

/* The claim connection, opened (and authenticated) if need be. */
static redisAsyncContext *
store_claim_conn(struct store *st)
{
	redisAsyncContext	*ac;
	char			 why[160];

	if (st->cac != NULL)
		return (st->cac);
	ac = st->port == 0 ? redisAsyncConnectUnix(st->host) :
	    redisAsyncConnect(st->host, st->port);
	if (ac == NULL || ac->err) {
		snprintf(why, sizeof(why), "%s", ac != NULL ? ac->errstr :
		    "out of memory");
		if (ac != NULL)
			redisAsyncFree(ac);
		store_claim_fail(st, why, 0);
		return (NULL);
	}
	ac->data = st;
	st->cac = ac;
	redisLibeventAttach(ac, st->base);
	redisAsyncSetConnectCallback(ac, store_claim_connect_cb);
	redisAsyncSetDisconnectCallback(ac, store_claim_disconnect_cb);
	/* Queued until the connection is up, then sent in order. */
	if (st->cfg->redis_password != NULL)
		redisAsyncCommand(ac, store_claim_reply_cb,
		    (void *)(intptr_t)CLAIM_AUTH, "AUTH %s",
		    st->cfg->redis_password);
	if (st->cfg->redis_db != 0)
		redisAsyncCommand(ac, store_claim_reply_cb,
		    (void *)(intptr_t)CLAIM_SELECT, "SELECT %lld",
		    (long long)st->cfg->redis_db);
	return (ac);
}

static void
store_claim(struct store *st, const char *addr, uint64_t resume_epoch,
    int resume_only, uint64_t least_epoch)
{
	char			 okey[STORE_KEY_MAX], ekey[STORE_KEY_MAX],
				 tkey[STORE_KEY_MAX], num[24], lease[24],
				 least[24];
	struct timeval		 tv = {
		(time_t)(st->cfg->redis_timeout_ms / 1000),
		(suseconds_t)(st->cfg->redis_timeout_ms % 1000) * 1000 };
	redisAsyncContext	*ac;

	snprintf(st->advertise, sizeof(st->advertise), "%s", addr);
	st->claiming = 1;
	if ((ac = store_claim_conn(st)) == NULL)
		return;		/* claimed() said why */
	store_key(st, okey, NULL, 0, "owner");
	store_key(st, ekey, NULL, 0, "epoch");
	store_key(st, tkey, NULL, 0, "tokens");
	snprintf(num, sizeof(num), "%llu", (unsigned long long)resume_epoch);
	snprintf(least, sizeof(least), "%llu", (unsigned long long)least_epoch);
	snprintf(lease, sizeof(lease), "%lld",
	    (long long)st->cfg->owner_lease_ms);
	/* The lease runs from no later than this. */
	st->claim_sent_ms = timers_now_ms();
	redisAsyncCommand(ac, store_claim_reply_cb,
	    (void *)(intptr_t)CLAIM_EVAL, "EVAL %s 3 %s %s %s %s %s %s %s %s %s",
	    STORE_LUA_CLAIM, okey, ekey, tkey, st->id, addr, num,
	    resume_only ? "1" : "0", lease, least);
	evtimer_add(st->claim_deadline_ev, &tv);
}

/* 64 random bits in hex: this process's name in the owner key. */
static void
store_make_id(char *buf, size_t len)
{
	uint64_t	v = ((uint64_t)random() << 33) ^
			    ((uint64_t)random() << 11) ^ (uint64_t)random();

	snprintf(buf, len, "%016llx", (unsigned long long)v);
}

static struct store *
store_new(const struct config *cfg, struct event_base *base,
    const struct store_events *events, void *ctx)
{
	struct store	*st = xcalloc(1, sizeof(*st));
	uint64_t	 hb_ms = STORE_HEARTBEAT_MS;
	struct timeval	 hb;
	const char	*colon;

	st->cfg = cfg;
	st->base = base;
	st->ev = *events;
	st->ctx = ctx;
	if (strncmp(cfg->redis, "unix:", 5) == 0) {
		snprintf(st->host, sizeof(st->host), "%s", cfg->redis + 5);
		st->port = 0;
	} else {
		/* config.c checked the form HOST:PORT; "[v6]:PORT" too. */
		colon = strrchr(cfg->redis, ':');
		snprintf(st->host, sizeof(st->host), "%.*s",
		    (int)(colon - cfg->redis), cfg->redis);
		if (st->host[0] == '[' && st->host[strlen(st->host) - 1] == ']') {
			memmove(st->host, st->host + 1, strlen(st->host));
			st->host[strlen(st->host) - 1] = '\0';
		}
		st->port = atoi(colon + 1);
	}
	snprintf(st->address, sizeof(st->address), "%s", cfg->redis);
	snprintf(st->subject, sizeof(st->subject), "redis %s", cfg->redis);
	snprintf(st->dataset, sizeof(st->dataset), "redis %s db %lld prefix "
	    "'%s'", cfg->redis, (long long)cfg->redis_db, cfg->redis_prefix);
	snprintf(st->durability, sizeof(st->durability), "unknown");
	store_make_id(st->id, sizeof(st->id));
	/* Renew three times per lease: two may be lost before it runs out. */
	if ((uint64_t)cfg->owner_lease_ms / 3 < hb_ms)
		hb_ms = (uint64_t)cfg->owner_lease_ms / 3;
	hb.tv_sec = (time_t)(hb_ms / 1000);
	hb.tv_usec = (suseconds_t)(hb_ms % 1000) * 1000;
	st->deadline_ev = evtimer_new(base, store_deadline_cb, st);
	st->retry_ev = evtimer_new(base, store_retry_cb, st);
	st->heartbeat_ev = event_new(base, -1, EV_PERSIST, store_heartbeat_cb,
	    st);
	st->claim_deadline_ev = evtimer_new(base, store_claim_deadline_cb, st);
	st->write_ev = event_new(base, -1, 0, store_write_cb, st);
	if (st->deadline_ev == NULL || st->retry_ev == NULL ||
	    st->write_ev == NULL ||
	    st->claim_deadline_ev == NULL ||
	    st->heartbeat_ev == NULL || event_add(st->heartbeat_ev, &hb) != 0)
		fatalx("cannot set up the redis timers");
	return (st);
}

static void
store_free(struct store *st)
{
	redisAsyncContext	*ac = st->ac, *cac = st->cac;

	st->ac = NULL;
	st->cac = NULL;
	st->claiming = 0;
	if (ac != NULL)
		redisAsyncFree(ac);
	if (cac != NULL)
		redisAsyncFree(cac);
	event_free(st->claim_deadline_ev);
	event_free(st->write_ev);
	event_free(st->deadline_ev);
	event_free(st->retry_ev);
	event_free(st->heartbeat_ev);
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
};
