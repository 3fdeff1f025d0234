/*
 * store-load.c: the Redis store's blocking connection (see store.h's
 * load and write_blocking): at start-up, read every semaphore and grant
 * and reserve the first block of tokens; at shutdown, write the last
 * changes. Both run before or after the event loop, so a blocking
 * hiredis context, bounded by redis-timeout, is the simple way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>
#include <uthash.h>

#include "log.h"
#include "proto.h"
#include "store-redis.h"
#include "store-scripts.h"

/* A blocking command whose error answer fails the connection. */
static int
store_command_ok(redisContext *c, const char *what, char *err, size_t errlen,
    redisReply *r)
{
	int	ok = r != NULL && r->type != REDIS_REPLY_ERROR;

	if (!ok)
		snprintf(err, errlen, "%s: %s", what, r != NULL ? r->str :
		    c->errstr);
	freeReplyObject(r);
	return (ok);
}

/* Connected, authenticated, database selected; NULL (and err) if not. */
static redisContext *
store_connect_blocking(struct store *st, char *err, size_t errlen)
{
	const struct config	*cfg = st->cfg;
	struct timeval		 tv;
	redisContext		*c;

	tv.tv_sec = cfg->redis_timeout_ms / 1000;
	tv.tv_usec = (cfg->redis_timeout_ms % 1000) * 1000;
	c = cfg->redis_path != NULL ?
	    redisConnectUnixWithTimeout(cfg->redis_path, tv) :
	    redisConnectWithTimeout(cfg->redis_host, (int)cfg->redis_port, tv);
	if (c == NULL || c->err) {
		snprintf(err, errlen, "%s", c != NULL ? c->errstr :
		    "out of memory");
		goto fail;
	}
	redisSetTimeout(c, tv);
	if (cfg->redis_password != NULL && !store_command_ok(c, "AUTH", err,
	    errlen, redisCommand(c, "AUTH %s", cfg->redis_password)))
		goto fail;
	if (cfg->redis_db != 0 && !store_command_ok(c, "SELECT", err, errlen,
	    redisCommand(c, "SELECT %lld", (long long)cfg->redis_db)))
		goto fail;
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
 * Load the grants of semaphore name, the HGETALL reply grants, in token
 * order (oldest first, as HOLDERS lists them: a Redis hash has no order
 * of its own): -1 (and err) when one cannot be read, since serving
 * without it could grant what is held.
 */
static int
store_load_grants(struct store *st, struct store_load_ctx *lc,
    const char *name, const redisReply *grants, char *err, size_t errlen)
{
	struct store_load_order	*order;
	enum store_grant_kind	 kind;
	uint64_t		 token, deadline, left;
	uint32_t		 n, multi;
	size_t			 i, o, norder = 0;
	char			 hname[PROTO_LABEL_MAX + 1];
	char			 id[PROTO_ID_MAX + 1];
	char			 haddr[STORE_HOLDER_ADDR_MAX];

	order = xcalloc(grants->elements / 2 + 1, sizeof(*order));
	for (i = 0; i + 1 < grants->elements; i += 2) {
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
		    &deadline, hname, haddr) != 0 ||
		    store_decode_grant_set(val->str, val->len, &multi,
		    id) != 0) {
			snprintf(err, errlen, "a grant of %s in %s{%s}:grants "
			    "cannot be read: this daemon will not serve the "
			    "data set without it; repair or delete that field",
			    name, st->cfg->redis_prefix, name);
			free(order);
			return (-1);
		}
		if (token > lc->max_token)
			lc->max_token = token;
		left = kind == STORE_KIND_LEASE && deadline > lc->redis_now_ms ?
		    deadline - lc->redis_now_ms : 0;
		lc->ld->grant(lc->ctx, name, token, n, kind, left,
		    hname[0] != '\0' ? hname : NULL,
		    haddr[0] != '\0' ? haddr : NULL, multi,
		    id[0] != '\0' ? id : NULL);
	}
	free(order);
	return (0);
}

/*
 * Load one semaphore's two replies: its capacity and its grants. A
 * damaged semaphore key is reported (its grants are kept); grants that
 * cannot be read fail the load (-1, err).
 */
static int
store_load_sem(struct store *st, struct store_load_ctx *lc, const char *name,
    const redisReply *cap, const redisReply *grants, char *err,
    size_t errlen)
{
	uint64_t	v;
	int		damaged = 0;

	if (!proto_valid_name(name, strlen(name))) {
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
		    name, name);
		return (-1);
	}
	if (cap->type == REDIS_REPLY_NIL && grants->elements == 0) {
		/* A name left without keys: nothing held, nothing to keep. */
		log_warnx("redis %s: semaphore %s is in %ssems but has no "
		    "keys; dropping the name", st->address, name,
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
	lc->ld->sem(lc->ctx, name, (uint32_t)v, damaged);
	return (store_load_grants(st, lc, name, grants, err, errlen));
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

/* Add the NAME of the key k, if it is one of a semaphore's keys. */
static void
store_names_add_key(struct store *st, struct store_names *nm,
    const redisReply *k)
{
	const char	*name;
	size_t		 len;

	if (k->type == REDIS_REPLY_STRING &&
	    store_key_sem_name(&st->model, k->str, k->len, &name, &len))
		store_names_add(nm, name, len);
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

	store_glob(&st->model, match, sizeof(match), "{*}:*");
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

	store_key(&st->model, key, NULL, 0, "sems");
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
 * Read every semaphore of nm, pipelined: two requests per semaphore
 * (capacity, grants), then their replies. -1 and err on an I/O error or
 * a grant that cannot be read.
 */
static int
store_load_sems(struct store *st, redisContext *c, struct store_load_ctx *lc,
    const struct store_names *nm, char *err, size_t errlen)
{
	char		 key[STORE_KEY_MAX];
	redisReply	*cap, *grants;
	size_t		 i;
	int		 bad;

	for (i = 0; i < nm->n; i++) {
		store_key(&st->model, key, nm->v[i], strlen(nm->v[i]), "sem");
		redisAppendCommand(c, "HGET %s capacity", key);
		store_key(&st->model, key, nm->v[i], strlen(nm->v[i]),
		    "grants");
		redisAppendCommand(c, "HGETALL %s", key);
	}
	for (i = 0; i < nm->n; i++) {
		if ((cap = store_get_reply(c, err, errlen)) == NULL)
			return (-1);
		if ((grants = store_get_reply(c, err, errlen)) == NULL) {
			freeReplyObject(cap);
			return (-1);
		}
		bad = store_load_sem(st, lc, nm->v[i], cap, grants, err,
		    errlen);
		freeReplyObject(cap);
		freeReplyObject(grants);
		if (bad)
			return (-1);
	}
	return (0);
}

/*
 * Run one fenced write of n changes on the blocking connection c. Returns
 * 0, or -1 with a message in err (the fence's refusal included, and too
 * few replicas acknowledging it with redis-min-replicas).
 */
static int
store_run_blocking(struct store *st, redisContext *c,
    const struct store_change *ch, size_t n, char *err, size_t errlen)
{
	struct store_argv	 a = { NULL, NULL, 0, 0 };
	redisReply		*r;
	const char		*owner;
	int			 rc = 0;

	store_batch_argv(&st->model, &a, "EVAL", STORE_LUA_WRITE, ch, n);
	r = redisCommandArgv(c, (int)a.n, (const char **)a.argv, a.lens);
	store_argv_free(&a);
	if (store_reply_fenced(r, &owner)) {
		snprintf(err, errlen, "not the owner any more (owner key: %s)",
		    owner);
		rc = -1;
	} else if (!store_write_ok(r, err, errlen)) {
		if (r == NULL)
			snprintf(err, errlen, "%s", c->errstr);
		rc = -1;
	} else {
		store_report_repaired(st, r);
		/* Counted only once replicas have it (redis-min-replicas). */
		rc = store_wait_blocking(st, c, err, errlen);
	}
	freeReplyObject(r);
	return (rc);
}

/* Redis's token bound into *bound (0 when absent); -1 and err if not. */
static int
store_load_bound(struct store *st, redisContext *c, uint64_t *bound,
    char *err, size_t errlen)
{
	char		 key[STORE_KEY_MAX];
	redisReply	*r;
	int		 rc = 0;

	store_key(&st->model, key, NULL, 0, "tokens");
	r = redisCommand(c, "GET %s", key);
	if (r == NULL || store_reply_u64(r, bound) != 0) {
		snprintf(err, errlen, "GET %s: %s%s", key, r == NULL ?
		    c->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
		    "not a number", r == NULL ? "" : "; the token bound is "
		    "lost: set it above every token issued (redis-cli SET "
		    "KEY N) to serve again");
		rc = -1;
	}
	freeReplyObject(r);
	return (rc);
}

int
store_load(struct store *st, const struct store_loader *ld, void *ctx,
    uint64_t reserve, uint64_t *tokens, int *repair, char *err,
    size_t errlen)
{
	redisContext		*c;
	struct store_names	 nm = { NULL, NULL, 0, 0 };
	struct store_load_ctx	 lc = { ld, ctx, 0, 0, 0 };
	int			 rc = -1;
	uint64_t		 bound;

	if ((c = store_connect_blocking(st, err, errlen)) == NULL)
		return (-1);
	if (store_redis_time(c, &lc.redis_now_ms, err, errlen) != 0 ||
	    store_load_bound(st, c, &bound, err, errlen) != 0 ||
	    store_load_names(st, c, bound, &nm, &lc.repair, err, errlen) != 0 ||
	    store_load_sems(st, c, &lc, &nm, err, errlen) != 0)
		goto out;
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
	store_names_free(&nm);
	redisFree(c);
	return (rc);
}

int
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
