/*
 * semc-cmd.c: one function per protocol command. Each checks its
 * arguments before anything is sent (a name with a blank would smuggle a
 * second request in), builds the request line, and turns the reply's
 * words into the caller's types. Listings read their k lines here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "semc-int.h"

typedef enum semc_err	semc_line_fn(struct semc *c, const char *line,
			    size_t len, void *entry);
typedef void		semc_drop_fn(void *entry);

static enum semc_err
semc_check_name(struct semc *c, const char *sem)
{
	if (sem == NULL || !proto_valid_name(sem, strlen(sem)))
		return (semc_seterr(c, SEMC_ERR_INVAL, "invalid semaphore "
		    "name '%.64s' (1 to %d bytes of A-Z a-z 0-9 _ . : / -)",
		    sem != NULL ? sem : "(null)", SEMC_NAME_MAX));
	return (SEMC_OK);
}

/* v in min..PROTO_INT_MAX, or SEMC_ERR_INVAL naming what. */
enum semc_err
semc_check_int(struct semc *c, const char *what, int64_t v, int64_t min)
{
	if (v < min || v > (int64_t)PROTO_INT_MAX)
		return (semc_seterr(c, SEMC_ERR_INVAL, "%s %lld out of range "
		    "%lld..%u", what, (long long)v, (long long)min,
		    PROTO_INT_MAX));
	return (SEMC_OK);
}

static enum semc_err
semc_badreply(struct semc *c, const char *what, const struct proto_word *w)
{
	return (semc_seterr(c, SEMC_ERR_BADREPLY, "%s: '%.*s'", what,
	    (int)(w->len > 80 ? 80 : w->len), w->p));
}

/* The first word of an OK reply as a number. */
static enum semc_err
semc_first_u64(struct semc *c, const struct proto_reply *reply,
    uint64_t max, uint64_t *out)
{
	struct proto_word	w;
	size_t			pos = 0;

	if (!proto_next_word(reply->rest.p, reply->rest.len, &pos, &w) ||
	    proto_parse_u64(w.p, w.len, max, out) != 0)
		return (semc_badreply(c, "expected a number after OK",
		    &reply->rest));
	return (SEMC_OK);
}

/* key=<decimal> of a reply line; "-" gives dash_value when allowed. */
static int
semc_kv_u64(const char *s, size_t len, const char *key, int64_t dash_value,
    uint64_t *out)
{
	struct proto_word	v;

	if (!proto_find_kv(s, len, key, &v))
		return (-1);
	if (dash_value != 0 && v.len == 1 && v.p[0] == '-') {
		*out = (uint64_t)dash_value;
		return (0);
	}
	return (proto_parse_u64(v.p, v.len, UINT64_MAX, out));
}

/* kind=conn|lease: 1 for a lease, 0 bound, -1 neither. */
static int
semc_kv_lease(const char *s, size_t len)
{
	struct proto_word	v;

	if (!proto_find_kv(s, len, "kind", &v))
		return (-1);
	if (v.len == 5 && memcmp(v.p, "lease", 5) == 0)
		return (1);
	if (v.len == 4 && memcmp(v.p, "conn", 4) == 0)
		return (0);
	return (-1);
}

static enum semc_err
semc_bad_line(struct semc *c, const char *line, size_t len)
{
	struct proto_word	w = { line, len };

	return (semc_badreply(c, "missing or malformed field", &w));
}

enum semc_err
semc_ping(struct semc *c)
{
	struct proto_reply	reply;

	return (semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "PING"));
}

enum semc_err
semc_auth(struct semc *c, const char *password)
{
	struct proto_reply	 reply;
	enum semc_err		 err;
	char			*copy;

	if (password == NULL || password[0] == '\0' ||
	    strpbrk(password, " \t\r\n") != NULL)
		return (semc_seterr(c, SEMC_ERR_INVAL,
		    "a password is one word: no blanks, not empty"));
	if ((copy = strdup(password)) == NULL)
		return (semc_seterr(c, SEMC_ERR_NOMEM, NULL));
	err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "AUTH %s", password);
	if (err != SEMC_OK) {
		free(copy);
		return (err);
	}
	if (c->password != NULL)
		explicit_bzero(c->password, strlen(c->password));
	free(c->password);
	c->password = copy;
	return (SEMC_OK);
}

static enum semc_err
semc_sem_capacity(struct semc *c, const char *verb, const char *sem,
    uint32_t capacity, int64_t min)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if ((err = semc_check_name(c, sem)) != SEMC_OK ||
	    (err = semc_check_int(c, "capacity", capacity, min)) != SEMC_OK)
		return (err);
	return (semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "%s %s %u", verb, sem,
	    capacity));
}

enum semc_err
semc_create(struct semc *c, const char *sem, uint32_t capacity)
{
	return (semc_sem_capacity(c, "CREATE", sem, capacity, 1));
}

enum semc_err
semc_resize(struct semc *c, const char *sem, uint32_t capacity)
{
	return (semc_sem_capacity(c, "RESIZE", sem, capacity, 0));
}

enum semc_err
semc_delete(struct semc *c, const char *sem)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if ((err = semc_check_name(c, sem)) != SEMC_OK)
		return (err);
	return (semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "DELETE %s", sem));
}

enum semc_err
semc_acquire(struct semc *c, const char *sem, uint32_t n, int64_t timeout_ms,
    int64_t lease_ms, uint64_t *token)
{
	return (semc_acquire_one(c, 0, sem, n, timeout_ms, lease_ms, NULL,
	    token));
}

enum semc_err
semc_try(struct semc *c, const char *sem, uint32_t n, int64_t lease_ms,
    uint64_t *token)
{
	return (semc_acquire_one(c, 1, sem, n, 0, lease_ms, NULL, token));
}

/* VERB sem token, for the commands that take just those. */
static enum semc_err
semc_sem_token(struct semc *c, const char *verb, const char *sem,
    uint64_t token, struct proto_reply *reply)
{
	enum semc_err	err;

	if ((err = semc_check_name(c, sem)) != SEMC_OK)
		return (err);
	return (semc_call(c, SEMC_REQ_PLAIN, 0, reply, "%s %s %llu", verb, sem,
	    (unsigned long long)token));
}

enum semc_err
semc_release(struct semc *c, const char *sem, uint64_t token)
{
	struct proto_reply	reply;
	enum semc_err		err;

	err = semc_sem_token(c, "RELEASE", sem, token, &reply);
	if (err == SEMC_OK)
		semc_bound_remove_token(c, token);
	else if (err == SEMC_ERR_NOTHELD)
		semc_bound_remove(c, sem, token);
	return (err);
}

enum semc_err
semc_revoke(struct semc *c, const char *sem, uint64_t token)
{
	struct proto_reply	reply;
	enum semc_err		err;

	err = semc_sem_token(c, "REVOKE", sem, token, &reply);
	if (err == SEMC_OK)
		semc_bound_remove_token(c, token);
	return (err);
}

enum semc_err
semc_attach(struct semc *c, const char *sem, uint64_t token)
{
	struct proto_reply	reply;
	enum semc_err		err;

	err = semc_sem_token(c, "ATTACH", sem, token, &reply);
	if (err == SEMC_OK) {
		semc_bound_remove(c, sem, token);
		if (semc_bound_add(c, sem, token, 0) != SEMC_OK)
			return (semc_seterr(c, SEMC_ERR_NOMEM, "attached, "
			    "but cannot remember it for reconnects"));
	}
	return (err);
}

enum semc_err
semc_refresh(struct semc *c, const char *sem, uint64_t token,
    uint32_t lease_ms, uint64_t *left_ms)
{
	struct proto_reply	reply;
	enum semc_err		err;
	uint64_t		left;

	if ((err = semc_check_name(c, sem)) != SEMC_OK ||
	    (err = semc_check_int(c, "lease_ms", lease_ms, 0)) != SEMC_OK)
		return (err);
	err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "REFRESH %s %llu %u",
	    sem, (unsigned long long)token, lease_ms);
	if (err != SEMC_OK)
		return (err);
	if ((err = semc_first_u64(c, &reply, UINT64_MAX, &left)) != SEMC_OK)
		return (err);
	if (left_ms != NULL)
		*left_ms = left;
	return (SEMC_OK);
}

enum semc_err
semc_check(struct semc *c, const char *sem, uint64_t token,
    struct semc_check *out)
{
	struct proto_reply	reply;
	struct semc_check	chk;
	enum semc_err		err;
	uint64_t		n, ttl;

	if ((err = semc_sem_token(c, "CHECK", sem, token, &reply)) != SEMC_OK)
		return (err);
	if (semc_kv_u64(reply.rest.p, reply.rest.len, "n", 0, &n) != 0 ||
	    n > PROTO_INT_MAX ||
	    (chk.lease = semc_kv_lease(reply.rest.p, reply.rest.len)) < 0 ||
	    semc_kv_u64(reply.rest.p, reply.rest.len, "ttl_ms", -1, &ttl) != 0)
		return (semc_bad_line(c, reply.rest.p, reply.rest.len));
	chk.n = (uint32_t)n;
	chk.ttl_ms = (int64_t)ttl;
	if (out != NULL)
		*out = chk;
	return (SEMC_OK);
}

/* An INFO-style line (INFO's reply, LIST's lines) into *out. */
static enum semc_err
semc_parse_info(struct semc *c, const char *s, size_t len, void *entry)
{
	struct semc_info	*out = entry;
	struct proto_word	 name;
	uint64_t		 cap;

	memset(out, 0, sizeof(*out));
	if (!proto_find_kv(s, len, "name", &name) ||
	    !proto_valid_name(name.p, name.len) ||
	    semc_kv_u64(s, len, "capacity", 0, &cap) != 0 ||
	    cap > PROTO_INT_MAX ||
	    semc_kv_u64(s, len, "used", 0, &out->used) != 0 ||
	    semc_kv_u64(s, len, "available", 0, &out->available) != 0 ||
	    semc_kv_u64(s, len, "holders", 0, &out->holders) != 0 ||
	    semc_kv_u64(s, len, "waiters", 0, &out->waiters) != 0)
		return (semc_bad_line(c, s, len));
	memcpy(out->name, name.p, name.len);
	out->capacity = (uint32_t)cap;
	return (SEMC_OK);
}

enum semc_err
semc_info(struct semc *c, const char *sem, struct semc_info *out)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if ((err = semc_check_name(c, sem)) != SEMC_OK)
		return (err);
	err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "INFO %s", sem);
	if (err != SEMC_OK)
		return (err);
	return (semc_parse_info(c, reply.rest.p, reply.rest.len, out));
}

/*
 * An optional key=string (name=, addr=) into out (size bytes): "" when
 * absent or "-"; cut to fit (semd's own limits keep them shorter).
 */
static void
semc_kv_str(const char *s, size_t len, const char *key, char *out,
    size_t size)
{
	struct proto_word	v;

	out[0] = '\0';
	if (!proto_find_kv(s, len, key, &v) || (v.len == 1 && v.p[0] == '-'))
		return;
	if (v.len >= size)
		v.len = size - 1;
	memcpy(out, v.p, v.len);
	out[v.len] = '\0';
}

static enum semc_err
semc_parse_holder(struct semc *c, const char *s, size_t len, void *entry)
{
	struct semc_holder	*h = entry;
	uint64_t		 n, ttl;

	if (semc_kv_u64(s, len, "token", 0, &h->token) != 0 ||
	    semc_kv_u64(s, len, "n", 0, &n) != 0 || n > PROTO_INT_MAX ||
	    (h->lease = semc_kv_lease(s, len)) < 0 ||
	    semc_kv_u64(s, len, "owner", -2, &h->owner) != 0 ||
	    semc_kv_u64(s, len, "ttl_ms", -1, &ttl) != 0)
		return (semc_bad_line(c, s, len));
	if (h->owner == (uint64_t)-2)
		h->owner = 0;
	h->n = (uint32_t)n;
	h->ttl_ms = (int64_t)ttl;
	semc_kv_str(s, len, "name", h->name, sizeof(h->name));
	semc_kv_str(s, len, "addr", h->addr, sizeof(h->addr));
	return (SEMC_OK);
}

static enum semc_err
semc_parse_waiter(struct semc *c, const char *s, size_t len, void *entry)
{
	struct semc_waiter	*w = entry;
	uint64_t		 n;

	if (semc_kv_u64(s, len, "n", 0, &n) != 0 || n > PROTO_INT_MAX ||
	    semc_kv_u64(s, len, "waited_ms", 0, &w->waited_ms) != 0 ||
	    semc_kv_u64(s, len, "owner", 0, &w->owner) != 0)
		return (semc_bad_line(c, s, len));
	w->n = (uint32_t)n;
	semc_kv_str(s, len, "name", w->name, sizeof(w->name));
	semc_kv_str(s, len, "addr", w->addr, sizeof(w->addr));
	return (SEMC_OK);
}

/*
 * Read the k lines of a listing whose "OK k" is in reply, parsing each
 * with fn into a growing array of size-byte entries (*out, *count); on
 * failure, drop (if not NULL) frees what fn kept in each parsed entry.
 * A listing cut short closes the connection: the rest would be misread.
 */
static enum semc_err
semc_listing(struct semc *c, const struct proto_reply *reply, size_t size,
    semc_line_fn *fn, semc_drop_fn *drop, void **out, size_t *count)
{
	const char	*line;
	enum semc_err	 err;
	uint64_t	 k, i;
	size_t		 len;
	char		*array = NULL, *p;

	*out = NULL;
	*count = 0;
	if ((err = semc_first_u64(c, reply, UINT32_MAX, &k)) != SEMC_OK) {
		semc_conn_close(c);
		return (err);
	}
	for (i = 0; i < k; i++) {
		err = semc_conn_readline(c, semc_now_ms() +
		    (c->io_timeout_ms < 0 ? 1000000000 : c->io_timeout_ms),
		    &line, &len);
		if (err == SEMC_OK &&
		    (p = realloc(array, (i + 1) * size)) == NULL)
			err = semc_seterr(c, SEMC_ERR_NOMEM, NULL);
		else if (err == SEMC_OK) {
			array = p;
			memset(array + i * size, 0, size);
			err = fn(c, line, len, array + i * size);
		}
		if (err != SEMC_OK) {
			semc_conn_close(c);
			while (drop != NULL && i-- > 0)
				drop(array + i * size);
			free(array);
			return (err);
		}
	}
	*out = array;
	*count = (size_t)k;
	return (semc_seterr(c, SEMC_OK, NULL));
}

enum semc_err
semc_holders(struct semc *c, const char *sem, struct semc_holder **out,
    size_t *count)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if ((err = semc_check_name(c, sem)) != SEMC_OK ||
	    (err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "HOLDERS %s",
	    sem)) != SEMC_OK)
		return (err);
	return (semc_listing(c, &reply, sizeof(**out), semc_parse_holder, NULL,
	    (void **)out, count));
}

enum semc_err
semc_waiters(struct semc *c, const char *sem, struct semc_waiter **out,
    size_t *count)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if ((err = semc_check_name(c, sem)) != SEMC_OK ||
	    (err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "WAITERS %s",
	    sem)) != SEMC_OK)
		return (err);
	return (semc_listing(c, &reply, sizeof(**out), semc_parse_waiter, NULL,
	    (void **)out, count));
}

enum semc_err
semc_list(struct semc *c, struct semc_info **out, size_t *count)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if ((err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "LIST")) !=
	    SEMC_OK)
		return (err);
	return (semc_listing(c, &reply, sizeof(**out), semc_parse_info, NULL,
	    (void **)out, count));
}

/* A STATS line, "key=value", copied: kept until the end of the reply. */
struct semc_stat_line {
	char	*text;
	size_t	 len;
};

/* The '=' of a "key=value" word with a key; NULL if it has none. */
static const char *
semc_kv_eq(const struct proto_word *w)
{
	const char	*eq = memchr(w->p, '=', w->len);

	return (eq == w->p ? NULL : eq);
}

static enum semc_err
semc_parse_stat(struct semc *c, const char *s, size_t len, void *entry)
{
	struct semc_stat_line	*l = entry;
	struct proto_word	 w;
	size_t			 pos = 0;

	if (!proto_next_word(s, len, &pos, &w) || semc_kv_eq(&w) == NULL)
		return (semc_bad_line(c, s, len));
	if ((l->text = malloc(w.len)) == NULL)
		return (semc_seterr(c, SEMC_ERR_NOMEM, NULL));
	memcpy(l->text, w.p, w.len);
	l->len = w.len;
	return (SEMC_OK);
}

static void
semc_drop_stat(void *entry)
{
	free(((struct semc_stat_line *)entry)->text);
}

/*
 * n "key=value" words (each with a key and an '=') as one block: the
 * array of n struct semc_stat first, then "key\0value\0" for each.
 */
static enum semc_err
semc_kv_block(struct semc *c, const struct proto_word *kv, size_t n,
    struct semc_stat **out, size_t *count)
{
	struct semc_stat	*stats;
	const char		*eq;
	size_t			 i, bytes = 0;
	char			*p;

	*out = NULL;
	*count = 0;
	if (n == 0)
		return (semc_seterr(c, SEMC_OK, NULL));
	for (i = 0; i < n; i++)
		bytes += kv[i].len + 1;
	if ((stats = malloc(n * sizeof(*stats) + bytes)) == NULL)
		return (semc_seterr(c, SEMC_ERR_NOMEM, NULL));
	p = (char *)(stats + n);
	for (i = 0; i < n; i++) {
		eq = semc_kv_eq(&kv[i]);
		memcpy(p, kv[i].p, kv[i].len);
		p[eq - kv[i].p] = '\0';
		p[kv[i].len] = '\0';
		stats[i].key = p;
		stats[i].value = p + (eq - kv[i].p) + 1;
		p += kv[i].len + 1;
	}
	*out = stats;
	*count = n;
	return (semc_seterr(c, SEMC_OK, NULL));
}

/* STATS: one block, the array first, then the strings it points to. */
enum semc_err
semc_stats(struct semc *c, struct semc_stat **out, size_t *count)
{
	struct proto_reply	 reply;
	struct semc_stat_line	*lines;
	struct proto_word	*kv = NULL;
	enum semc_err		 err;
	size_t			 i, n;

	*out = NULL;
	*count = 0;
	if ((err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "STATS")) !=
	    SEMC_OK ||
	    (err = semc_listing(c, &reply, sizeof(*lines), semc_parse_stat,
	    semc_drop_stat, (void **)&lines, &n)) != SEMC_OK)
		return (err);
	if (n > 0 && (kv = calloc(n, sizeof(*kv))) == NULL)
		err = semc_seterr(c, SEMC_ERR_NOMEM, NULL);
	for (i = 0; kv != NULL && i < n; i++) {
		kv[i].p = lines[i].text;
		kv[i].len = lines[i].len;
	}
	if (err == SEMC_OK)
		err = semc_kv_block(c, kv, n, out, count);
	for (i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	free(kv);
	return (err);
}

/*
 * INFO, every key=value of the reply as sent, known to us or not; other
 * words are skipped, as semc_info does. It must name the semaphore.
 */
/* Every key=value word of an OK line, as semc_kv_block gives them. */
static enum semc_err
semc_reply_kv(struct semc *c, const struct proto_reply *reply,
    struct semc_stat **out, size_t *count)
{
	struct proto_word	 w, *kv;
	enum semc_err		 err;
	size_t			 pos, n = 0;

	for (pos = 0; proto_next_word(reply->rest.p, reply->rest.len, &pos,
	    &w);)
		n += semc_kv_eq(&w) != NULL;
	if ((kv = calloc(n + 1, sizeof(*kv))) == NULL)
		return (semc_seterr(c, SEMC_ERR_NOMEM, NULL));
	for (pos = 0, n = 0; proto_next_word(reply->rest.p, reply->rest.len,
	    &pos, &w);) {
		if (semc_kv_eq(&w) != NULL)
			kv[n++] = w;
	}
	err = semc_kv_block(c, kv, n, out, count);
	free(kv);
	return (err);
}

enum semc_err
semc_info_all(struct semc *c, const char *sem, struct semc_stat **out,
    size_t *count)
{
	struct proto_reply	 reply;
	struct proto_word	 w;
	enum semc_err		 err;

	*out = NULL;
	*count = 0;
	if ((err = semc_check_name(c, sem)) != SEMC_OK ||
	    (err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "INFO %s",
	    sem)) != SEMC_OK)
		return (err);
	if (!proto_find_kv(reply.rest.p, reply.rest.len, "name", &w))
		return (semc_bad_line(c, reply.rest.p, reply.rest.len));
	return (semc_reply_kv(c, &reply, out, count));
}

enum semc_err
semc_role(struct semc *c, struct semc_stat **out, size_t *count)
{
	struct proto_reply	 reply;
	struct proto_word	 w;
	enum semc_err		 err;

	*out = NULL;
	*count = 0;
	if ((err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "ROLE")) !=
	    SEMC_OK)
		return (err);
	if (!proto_find_kv(reply.rest.p, reply.rest.len, "role", &w))
		return (semc_bad_line(c, reply.rest.p, reply.rest.len));
	return (semc_reply_kv(c, &reply, out, count));
}

enum semc_err
semc_name(struct semc *c, const char *label)
{
	struct proto_reply	 reply;
	enum semc_err		 err;
	char			*copy;

	if (label == NULL || !proto_valid_label(label, strlen(label)))
		return (semc_seterr(c, SEMC_ERR_INVAL, "invalid name '%.64s' "
		    "(1 to %d bytes of A-Z a-z 0-9 _ . : / - @)",
		    label != NULL ? label : "(null)", SEMC_LABEL_MAX));
	if ((copy = strdup(label)) == NULL)
		return (semc_seterr(c, SEMC_ERR_NOMEM, NULL));
	/* Sent here; kept after, so a connect made for it sends it once. */
	err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "NAME %s", label);
	free(c->name);
	c->name = copy;
	return (err);
}

static enum semc_err
semc_parse_client(struct semc *c, const char *s, size_t len, void *entry)
{
	struct semc_client	*cl = entry;
	struct proto_word	 addr;
	uint64_t		 waiting;

	if (semc_kv_u64(s, len, "id", 0, &cl->id) != 0 ||
	    !proto_find_kv(s, len, "addr", &addr) ||
	    semc_kv_u64(s, len, "age_ms", 0, &cl->age_ms) != 0 ||
	    semc_kv_u64(s, len, "idle_ms", 0, &cl->idle_ms) != 0 ||
	    semc_kv_u64(s, len, "grants", 0, &cl->grants) != 0 ||
	    semc_kv_u64(s, len, "waiting", 0, &waiting) != 0 || waiting > 1)
		return (semc_bad_line(c, s, len));
	cl->waiting = (int)waiting;
	semc_kv_str(s, len, "addr", cl->addr, sizeof(cl->addr));
	semc_kv_str(s, len, "name", cl->name, sizeof(cl->name));
	semc_kv_str(s, len, "cmd", cl->cmd, sizeof(cl->cmd));
	if (cl->cmd[0] == '\0')
		strcpy(cl->cmd, "-");
	return (SEMC_OK);
}

enum semc_err
semc_clients(struct semc *c, struct semc_client **out, size_t *count)
{
	struct proto_reply	reply;
	enum semc_err		err;

	*out = NULL;
	*count = 0;
	if ((err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "CLIENTS")) !=
	    SEMC_OK)
		return (err);
	return (semc_listing(c, &reply, sizeof(**out), semc_parse_client, NULL,
	    (void **)out, count));
}

enum semc_err
semc_kill(struct semc *c, uint64_t id)
{
	struct proto_reply	reply;

	return (semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "KILL %llu",
	    (unsigned long long)id));
}

static const char *const semc_reasons[] = {
	"released", "expired", "revoked", "closed", "unclaimed", "other",
	"timeout"
};

const char *
semc_reasonname(enum semc_watch_reason reason)
{
	if ((unsigned)reason >= sizeof(semc_reasons) / sizeof(semc_reasons[0]))
		return ("unknown");
	return (semc_reasons[reason]);
}

/* The reason word of "OK <reason>"; SEMC_WATCH_OTHER for a new one. */
enum semc_watch_reason
semc_watch_reason_of(const struct proto_reply *reply)
{
	struct proto_word	w;
	size_t			pos = 0, i;

	if (!proto_next_word(reply->rest.p, reply->rest.len, &pos, &w))
		return (SEMC_WATCH_OTHER);
	for (i = 0; i < SEMC_WATCH_OTHER; i++) {
		if (strlen(semc_reasons[i]) == w.len &&
		    memcmp(semc_reasons[i], w.p, w.len) == 0)
			return ((enum semc_watch_reason)i);
	}
	return (SEMC_WATCH_OTHER);
}

enum semc_err
semc_watch(struct semc *c, const char *sem, uint64_t token,
    int64_t timeout_ms, enum semc_watch_reason *reason)
{
	struct proto_reply	 reply;
	enum semc_err		 err;
	enum semc_watch_reason	 r = SEMC_WATCH_TIMEOUT;
	char			 topt[32] = "";

	if ((err = semc_check_name(c, sem)) != SEMC_OK ||
	    (err = semc_check_int(c, "timeout_ms", timeout_ms, -1)) != SEMC_OK)
		return (err);
	if (timeout_ms >= 0)
		snprintf(topt, sizeof(topt), " TIMEOUT %lld",
		    (long long)timeout_ms);
	err = semc_call(c, SEMC_REQ_PLAIN, timeout_ms, &reply,
	    "WATCH %s %llu%s", sem, (unsigned long long)token, topt);
	if (err == SEMC_OK)
		r = semc_watch_reason_of(&reply);
	if ((err == SEMC_OK || err == SEMC_TIMEOUT) && reason != NULL)
		*reason = r;
	return (err);
}

enum semc_err
semc_quit(struct semc *c)
{
	struct proto_reply	reply;
	enum semc_err		err;

	if (c->fd == -1) {	/* nothing to quit; forget bound permits */
		semc_close(c);
		return (semc_seterr(c, SEMC_OK, NULL));
	}
	err = semc_call(c, SEMC_REQ_PLAIN, 0, &reply, "QUIT");
	semc_close(c);
	return (err);
}
