/*
 * store-model.c: semd's data model in Redis, pure (see store-model.h):
 * what the keys are called, what a change is written as, and what a
 * value read back means. Whatever Redis holds is untrusted input here:
 * every decoder takes a length and stops at it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "store-model.h"

void
store_key(const struct store_model *m, char *buf, const char *sem,
    size_t len, const char *what)
{
	if (sem == NULL)
		snprintf(buf, STORE_KEY_MAX, "%s%s", m->prefix, what);
	else
		snprintf(buf, STORE_KEY_MAX, "%s{%.*s}:%s", m->prefix,
		    (int)len, sem, what);
}

void
store_glob(const struct store_model *m, char *buf, size_t size,
    const char *suffix)
{
	const char	*p;
	size_t		 n = 0;

	for (p = m->prefix; *p != '\0' && n + 2 < size; p++) {
		if (strchr("*?[]\\", *p) != NULL)
			buf[n++] = '\\';
		buf[n++] = *p;
	}
	snprintf(buf + n, size - n, "%s", suffix);
}

/* 1 when s (len bytes) ends with exactly the NUL-terminated tail. */
static int
store_is_tail(const char *s, size_t len, const char *tail)
{
	return (len == strlen(tail) && memcmp(s, tail, len) == 0);
}

int
store_key_sem_name(const struct store_model *m, const char *key, size_t len,
    const char **name, size_t *namelen)
{
	size_t		 plen = strlen(m->prefix);
	const char	*open, *close;

	if (len <= plen + 2 || memcmp(key, m->prefix, plen) != 0 ||
	    key[plen] != '{')
		return (0);
	open = key + plen + 1;
	/* The first "}:": a valid name holds no '}'. */
	if ((close = memmem(open, len - plen - 1, "}:", 2)) == NULL ||
	    (!store_is_tail(close, (size_t)(key + len - close), "}:sem") &&
	    !store_is_tail(close, (size_t)(key + len - close), "}:grants")) ||
	    !proto_valid_name(open, (size_t)(close - open)))
		return (0);
	*name = open;
	*namelen = (size_t)(close - open);
	return (1);
}

/* SADD or SREM ch's semaphore name in the index of names, P sems. */
static void
store_encode_index(const struct store_model *m, const char *op,
    const struct store_change *ch, store_emit_fn emit, void *arg)
{
	char		 key[STORE_KEY_MAX];
	const char	*argv[3] = { op, key, ch->sem };
	size_t		 lens[3];

	store_key(m, key, NULL, 0, "sems");
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

/* A grant's value; a lease's end is "+T", which the script makes absolute. */
static void
store_grant_value(const struct store_change *ch, char *buf, size_t size)
{
	int	lease = ch->kind == STORE_KIND_LEASE;

	size_t	len;

	/* "+T": the script writes Redis's TIME + T (store-scripts.h). */
	len = (size_t)snprintf(buf, size, "n=%u kind=%s deadline_ms=%s%llu "
	    "name=%.*s addr=%.*s", ch->n, lease ? "lease" : "conn",
	    lease ? "+" : "", (unsigned long long)(lease ? ch->lease_ms : 0),
	    PROTO_LABEL_MAX, ch->holder_name != NULL ? ch->holder_name : "-",
	    STORE_HOLDER_ADDR_MAX - 1,
	    ch->holder_addr != NULL ? ch->holder_addr : "-");
	/* 1.1's words come last, and only when set: old values stay. */
	if (ch->multi > 1 && len < size)
		len += (size_t)snprintf(buf + len, size - len, " multi=%u",
		    ch->multi);
	if (ch->id != NULL && len < size)
		snprintf(buf + len, size - len, " id=%.*s", PROTO_ID_MAX,
		    ch->id);
}

void
store_encode(const struct store_model *m, const struct store_change *ch,
    store_emit_fn emit, void *arg)
{
	char	key[STORE_KEY_MAX], key2[STORE_KEY_MAX], num[24];
	char	value[STORE_GRANT_VALUE_MAX];

	switch (ch->type) {
	case STORE_SEM_PUT:
		store_key(m, key, ch->sem, ch->sem_len, "sem");
		snprintf(num, sizeof(num), "%u", ch->capacity);
		store_emit_words(emit, arg, 4,
		    (const char *[]){ "HSET", key, "capacity", num });
		store_encode_index(m, "SADD", ch, emit, arg);
		break;
	case STORE_SEM_DEL:
		store_key(m, key, ch->sem, ch->sem_len, "sem");
		store_key(m, key2, ch->sem, ch->sem_len, "grants");
		store_emit_words(emit, arg, 3,
		    (const char *[]){ "DEL", key, key2 });
		store_encode_index(m, "SREM", ch, emit, arg);
		break;
	case STORE_GRANT_PUT:
		store_key(m, key, ch->sem, ch->sem_len, "grants");
		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)ch->token);
		store_grant_value(ch, value, sizeof(value));
		store_emit_words(emit, arg, 4,
		    (const char *[]){ "HSET", key, num, value });
		break;
	case STORE_GRANT_DEL:
		store_key(m, key, ch->sem, ch->sem_len, "grants");
		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)ch->token);
		store_emit_words(emit, arg, 3,
		    (const char *[]){ "HDEL", key, num });
		break;
	case STORE_DISOWN:
		store_key(m, key, NULL, 0, "owner");
		store_emit_words(emit, arg, 2, (const char *[]){ "DEL", key });
		break;
	case STORE_TOKENS:
		store_key(m, key, NULL, 0, "tokens");
		snprintf(num, sizeof(num), "%llu",
		    (unsigned long long)ch->token);
		store_emit_words(emit, arg, 3,
		    (const char *[]){ "SET", key, num });
		break;
	}
}

void
store_argv_push(struct store_argv *a, const char *w, size_t len)
{
	if (a->n == a->cap) {
		a->cap = a->cap == 0 ? 64 : a->cap * 2;
		a->argv = realloc(a->argv, a->cap * sizeof(*a->argv));
		a->lens = realloc(a->lens, a->cap * sizeof(*a->lens));
		if (a->argv == NULL || a->lens == NULL)
			abort();
	}
	if ((a->argv[a->n] = malloc(len + 1)) == NULL)
		abort();
	memcpy(a->argv[a->n], w, len);
	a->argv[a->n][len] = '\0';
	a->lens[a->n++] = len;
}

void
store_argv_pushs(struct store_argv *a, const char *w)
{
	store_argv_push(a, w, strlen(w));
}

void
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

void
store_owner_value(const struct store_model *m, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s", m->fence, m->advertise);
}

void
store_fenced_call(const struct store_model *m, struct store_argv *a,
    const char *verb, const char *script, const char *extra_key)
{
	char	key[STORE_KEY_MAX], num[24];
	char	value[STORE_FENCE_MAX + STORE_ADDR_MAX];

	store_argv_pushs(a, verb);
	store_argv_pushs(a, script);
	store_argv_pushs(a, extra_key != NULL ? "3" : "2");
	store_key(m, key, NULL, 0, "owner");
	store_argv_pushs(a, key);
	store_key(m, key, NULL, 0, "epoch");
	store_argv_pushs(a, key);
	if (extra_key != NULL)
		store_argv_pushs(a, extra_key);
	store_argv_pushs(a, m->fence);
	store_owner_value(m, value, sizeof(value));
	store_argv_pushs(a, value);
	snprintf(num, sizeof(num), "%lld", (long long)m->owner_lease_ms);
	store_argv_pushs(a, num);
}

void
store_batch_argv(const struct store_model *m, struct store_argv *a,
    const char *verb, const char *script, const struct store_change *ch,
    size_t n)
{
	size_t	i;

	store_fenced_call(m, a, verb, script, NULL);
	for (i = 0; i < n; i++)
		store_encode(m, &ch[i], store_emit_argv, a);
}

/*
 * 1 when every byte of p is printable ASCII, blanks excluded: what semd
 * puts on a reply line (ROLE, INFO) must not end it or carry a NUL.
 */
static int
store_printable(const char *p, size_t len)
{
	size_t	i;

	for (i = 0; i < len; i++)
		if ((unsigned char)p[i] <= 0x20 || (unsigned char)p[i] >= 0x7f)
			return (0);
	return (1);
}

void
store_decode_label(const char *s, size_t len, const char *key, char *buf,
    size_t size)
{
	struct proto_word	w;

	buf[0] = '\0';
	if (!proto_find_kv(s, len, key, &w) || w.len >= size ||
	    (w.len == 1 && w.p[0] == '-') || !store_printable(w.p, w.len))
		return;
	if (strcmp(key, "name") == 0 && !proto_valid_label(w.p, w.len))
		return;
	memcpy(buf, w.p, w.len);
	buf[w.len] = '\0';
}

int
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

int
store_decode_grant_set(const char *s, size_t len, uint32_t *multi,
    char *id)
{
	struct proto_word	w;
	uint64_t		v;

	*multi = 1;
	id[0] = '\0';
	if (proto_find_kv(s, len, "multi", &w)) {
		if (proto_parse_u64(w.p, w.len, PROTO_MULTI_MAX, &v) != 0 ||
		    v < PROTO_MULTI_MIN)
			return (-1);
		*multi = (uint32_t)v;
	}
	if (proto_find_kv(s, len, "id", &w)) {
		if (!proto_valid_id(w.p, w.len))
			return (-1);
		memcpy(id, w.p, w.len);
		id[w.len] = '\0';
	}
	return (0);
}

void
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
	    proto_next_word(value, len, &pos, &w) &&
	    store_printable(w.p, w.len))
		snprintf(out->addr, sizeof(out->addr), "%.*s", (int)w.len,
		    w.p);
}

int
store_is_fenced(const char *err, size_t len, const char **owner,
    size_t *owner_len)
{
	static const char	tag[] = "SEMDFENCED ";
	const char		*p;

	/* Redis may put its own words before a script's error text. */
	if ((p = memmem(err, len, tag, sizeof(tag) - 1)) == NULL)
		return (0);
	*owner = p + sizeof(tag) - 1;
	*owner_len = (size_t)(err + len - *owner);
	return (1);
}

int
store_applied_nothing(const char *err, size_t len)
{
	static const char *const before[] = { "NOSCRIPT", "LOADING",
	    "NOAUTH", "BUSY", "READONLY", "OOM", "MISCONF", "NOREPLICAS",
	    "MASTERDOWN" };
	size_t	i;

	for (i = 0; i < sizeof(before) / sizeof(before[0]); i++)
		if (memmem(err, len, before[i], strlen(before[i])) != NULL)
			return (1);
	return (0);
}
