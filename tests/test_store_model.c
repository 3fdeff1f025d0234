/*
 * test_store_model.c: unit tests of semd's data model in Redis
 * (daemon/store-model.c): key names, the commands every change becomes,
 * the fenced script's words, and the decoding of what Redis holds, which
 * is untrusted input (old values, damaged values, NUL bytes).
 *
 * Commands are captured as one string each, words joined by single
 * spaces, so that an expectation reads like the Redis command it is.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "store-model.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

static struct store_model	model;

static void
model_set(const char *prefix)
{
	memset(&model, 0, sizeof(model));
	model.prefix = prefix;
	model.owner_lease_ms = 3000;
	snprintf(model.fence, sizeof(model.fence), "7 00ab ");
	snprintf(model.advertise, sizeof(model.advertise), "10.0.0.1:7070");
}

static void
setup(void)
{
	model_set("semd:");
}

/* The emitted commands, each as its words joined by spaces. */
static char	cmds[8][1024];
static size_t	ncmds;

static void
capture(void *arg, int argc, const char **argv, const size_t *lens)
{
	char	*p;
	int	 i;

	(void)arg;
	ck_assert_uint_lt(ncmds, nitems(cmds));
	p = cmds[ncmds++];
	*p = '\0';
	for (i = 0; i < argc; i++) {
		ck_assert_uint_eq(lens[i], strlen(argv[i]));
		if (i > 0)
			strcat(p, " ");
		strncat(p, argv[i], lens[i]);
	}
}

static void
encode(const struct store_change *ch)
{
	ncmds = 0;
	store_encode(&model, ch, capture, NULL);
}

static struct store_change
change(enum store_change_type type, const char *sem)
{
	struct store_change	ch;

	memset(&ch, 0, sizeof(ch));
	ch.type = type;
	ch.sem = sem;
	ch.sem_len = sem != NULL ? strlen(sem) : 0;
	return (ch);
}

/* --- keys --- */

START_TEST(test_keys)
{
	char	key[STORE_KEY_MAX];

	store_key(&model, key, NULL, 0, "tokens");
	ck_assert_str_eq(key, "semd:tokens");
	store_key(&model, key, "db.main", 7, "sem");
	ck_assert_str_eq(key, "semd:{db.main}:sem");
	/* len, not the NUL, bounds the name. */
	store_key(&model, key, "db.mainXYZ", 7, "grants");
	ck_assert_str_eq(key, "semd:{db.main}:grants");
	model_set("");
	store_key(&model, key, NULL, 0, "owner");
	ck_assert_str_eq(key, "owner");
}
END_TEST

START_TEST(test_keys_glob_prefix)
{
	char	key[STORE_KEY_MAX], pat[STORE_KEY_MAX * 2];

	model_set("a*b?[c]\\:");
	store_key(&model, key, "s", 1, "sem");
	ck_assert_str_eq(key, "a*b?[c]\\:{s}:sem");
	store_glob(&model, pat, sizeof(pat), "{*}:*");
	ck_assert_str_eq(pat, "a\\*b\\?\\[c\\]\\\\:{*}:*");
	model_set("plain:");
	store_glob(&model, pat, sizeof(pat), "{*}:*");
	ck_assert_str_eq(pat, "plain:{*}:*");
	/* A pattern buffer too small is cut, never overrun. */
	model_set("****");
	memset(pat, 'X', sizeof(pat));
	store_glob(&model, pat, 6, "{*}:*");
	ck_assert_uint_lt(strlen(pat), 6);
}
END_TEST

/* Parse a key of len bytes: the name found, or NULL. */
static const char *
key_name(const char *key, size_t len)
{
	static char	buf[PROTO_NAME_MAX + 1];
	const char	*name;
	size_t		 nlen;

	if (!store_key_sem_name(&model, key, len, &name, &nlen))
		return (NULL);
	ck_assert(name >= key && name + nlen <= key + len);
	memcpy(buf, name, nlen);
	buf[nlen] = '\0';
	return (buf);
}

#define ck_key_name(key, want) ck_assert_pstr_eq(key_name((key),	\
	strlen(key)), (want))

START_TEST(test_key_names)
{
	char	longkey[PROTO_NAME_MAX + 32], name[PROTO_NAME_MAX + 2];

	ck_key_name("semd:{a}:sem", "a");
	ck_key_name("semd:{jobs.build-1/x:y}:grants", "jobs.build-1/x:y");
	ck_key_name("semd:{a}:semx", NULL);
	ck_key_name("semd:{a}:", NULL);
	ck_key_name("semd:{a}:grant", NULL);
	ck_key_name("semd:{}:sem", NULL);
	ck_key_name("semd:{a b}:sem", NULL);	/* not a valid name */
	ck_key_name("semd:{a}:b}:sem", NULL);	/* the first "}:" counts */
	ck_key_name("semd:tokens", NULL);
	ck_key_name("semd:sems", NULL);
	ck_key_name("other:{a}:sem", NULL);
	ck_key_name("semd:{a", NULL);
	ck_key_name("", NULL);
	/* A NUL inside: the length counts, not the NUL. */
	ck_assert_ptr_null(key_name("semd:{a}:sem\0xx", 15));
	ck_assert_ptr_null(key_name("semd:{a\0b}:sem", 14));
	ck_assert_str_eq(key_name("semd:{a}:sem\0xx", 12), "a");
	/* Names of PROTO_NAME_MAX bytes, and one more. */
	memset(name, 'n', PROTO_NAME_MAX);
	name[PROTO_NAME_MAX] = '\0';
	snprintf(longkey, sizeof(longkey), "semd:{%s}:grants", name);
	ck_key_name(longkey, name);
	name[PROTO_NAME_MAX] = 'n';
	name[PROTO_NAME_MAX + 1] = '\0';
	snprintf(longkey, sizeof(longkey), "semd:{%s}:grants", name);
	ck_key_name(longkey, NULL);
	/* A prefix with glob characters is matched as it is. */
	model_set("a*[");
	ck_key_name("a*[{s}:sem", "s");
	ck_key_name("ab[{s}:sem", NULL);
}
END_TEST

/* --- encoding --- */

START_TEST(test_encode_sems)
{
	struct store_change	ch = change(STORE_SEM_PUT, "db");

	ch.capacity = 2147483647u;
	encode(&ch);
	ck_assert_uint_eq(ncmds, 2);
	ck_assert_str_eq(cmds[0], "HSET semd:{db}:sem capacity 2147483647");
	ck_assert_str_eq(cmds[1], "SADD semd:sems db");
	ch = change(STORE_SEM_DEL, "db");
	encode(&ch);
	ck_assert_uint_eq(ncmds, 2);
	ck_assert_str_eq(cmds[0], "DEL semd:{db}:sem semd:{db}:grants");
	ck_assert_str_eq(cmds[1], "SREM semd:sems db");
}
END_TEST

START_TEST(test_encode_grants)
{
	struct store_change	ch = change(STORE_GRANT_PUT, "db");

	ch.token = 18446744073709551615ull;
	ch.n = 3;
	ch.kind = STORE_KIND_LEASE;
	ch.lease_ms = 1500;
	ch.holder_name = "worker-1";
	ch.holder_addr = "10.1.2.3:4567";
	encode(&ch);
	ck_assert_uint_eq(ncmds, 1);
	/* "+T": the script writes Redis's TIME + T. */
	ck_assert_str_eq(cmds[0], "HSET semd:{db}:grants "
	    "18446744073709551615 n=3 kind=lease deadline_ms=+1500 "
	    "name=worker-1 addr=10.1.2.3:4567");
	/* A bound grant has no end, whatever lease_ms says; unknown: -. */
	ch.kind = STORE_KIND_CONN;
	ch.lease_ms = 99;
	ch.token = 5;
	ch.holder_name = ch.holder_addr = NULL;
	encode(&ch);
	ck_assert_str_eq(cmds[0], "HSET semd:{db}:grants 5 n=3 kind=conn "
	    "deadline_ms=0 name=- addr=-");
	ch = change(STORE_GRANT_DEL, "db");
	ch.token = 5;
	encode(&ch);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_str_eq(cmds[0], "HDEL semd:{db}:grants 5");
}
END_TEST

START_TEST(test_encode_long_names)
{
	char			 sem[PROTO_NAME_MAX + 1], label[PROTO_LABEL_MAX + 1];
	char			 want[1024];
	struct store_change	 ch;

	memset(sem, 's', PROTO_NAME_MAX);
	sem[PROTO_NAME_MAX] = '\0';
	memset(label, 'l', PROTO_LABEL_MAX);
	label[PROTO_LABEL_MAX] = '\0';
	ch = change(STORE_GRANT_PUT, sem);
	ch.token = 1;
	ch.n = 1;
	ch.kind = STORE_KIND_LEASE;
	ch.lease_ms = 2147483647u;
	ch.holder_name = label;
	ch.holder_addr = "[2001:db8::1]:65535";
	encode(&ch);
	snprintf(want, sizeof(want), "HSET semd:{%s}:grants 1 n=1 kind=lease "
	    "deadline_ms=+2147483647 name=%s addr=[2001:db8::1]:65535", sem,
	    label);
	ck_assert_str_eq(cmds[0], want);
	ch = change(STORE_SEM_PUT, sem);
	ch.capacity = 1;
	encode(&ch);
	snprintf(want, sizeof(want), "SADD semd:sems %s", sem);
	ck_assert_str_eq(cmds[1], want);
}
END_TEST

/* 1.1: an ACQUIREALL grant's count of semaphores and a lease's ID. */
START_TEST(test_encode_multi_id)
{
	struct store_change	ch = change(STORE_GRANT_PUT, "gpu");
	char			sem[PROTO_NAME_MAX + 1], label[PROTO_LABEL_MAX + 1];
	char			id[PROTO_ID_MAX + 1], want[1024];
	uint32_t		multi;
	char			did[PROTO_ID_MAX + 1];

	ch.token = 12;
	ch.n = 2;
	ch.kind = STORE_KIND_LEASE;
	ch.lease_ms = 30000;
	ch.multi = 2;
	ch.id = "job-7";
	encode(&ch);
	ck_assert_str_eq(cmds[0], "HSET semd:{gpu}:grants 12 n=2 kind=lease "
	    "deadline_ms=+30000 name=- addr=- multi=2 id=job-7");
	/* A single grant without an ID is written as before 1.1. */
	ch.multi = 1;
	ch.id = NULL;
	encode(&ch);
	ck_assert_str_eq(cmds[0], "HSET semd:{gpu}:grants 12 n=2 kind=lease "
	    "deadline_ms=+30000 name=- addr=-");

	/* The longest value fits whole. */
	memset(sem, 's', PROTO_NAME_MAX);
	sem[PROTO_NAME_MAX] = '\0';
	memset(label, 'l', PROTO_LABEL_MAX);
	label[PROTO_LABEL_MAX] = '\0';
	memset(id, 'i', PROTO_ID_MAX);
	id[PROTO_ID_MAX] = '\0';
	ch = change(STORE_GRANT_PUT, sem);
	ch.token = 18446744073709551615ull;
	ch.n = 2147483647u;
	ch.kind = STORE_KIND_LEASE;
	ch.lease_ms = 2147483647u;
	ch.holder_name = label;
	ch.holder_addr = "[2001:db8:1234:5678:9abc:def0:1234:5678]:65535";
	ch.multi = 16;
	ch.id = id;
	encode(&ch);
	snprintf(want, sizeof(want), "HSET semd:{%s}:grants "
	    "18446744073709551615 n=2147483647 kind=lease "
	    "deadline_ms=+2147483647 name=%s "
	    "addr=[2001:db8:1234:5678:9abc:def0:1234:5678]:65535 multi=16 "
	    "id=%s", sem, label, id);
	ck_assert_str_eq(cmds[0], want);
	ck_assert_int_eq(store_decode_grant_set(want, strlen(want), &multi,
	    did), 0);
	ck_assert_uint_eq(multi, 16);
	ck_assert_str_eq(did, id);
}
END_TEST

START_TEST(test_decode_grant_set)
{
	static const char *const bad[] = {
		"n=1 kind=lease deadline_ms=0 multi=1",
		"n=1 kind=lease deadline_ms=0 multi=17",
		"n=1 kind=lease deadline_ms=0 multi=",
		"n=1 kind=lease deadline_ms=0 multi=x",
		"n=1 kind=lease deadline_ms=0 id=",
		"n=1 kind=lease deadline_ms=0 id=a@b",
		"n=1 kind=lease deadline_ms=0 id=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",	/* 65 */
	};
	const char	*v;
	uint32_t	 multi;
	char		 id[PROTO_ID_MAX + 1];
	size_t		 i;

	/* Values of older semds: a single grant, no ID. */
	v = "n=1 kind=lease deadline_ms=5 name=- addr=-";
	ck_assert_int_eq(store_decode_grant_set(v, strlen(v), &multi, id), 0);
	ck_assert_uint_eq(multi, 1);
	ck_assert_str_eq(id, "");
	v = "n=1 kind=conn deadline_ms=0 multi=3 id=a.b:c/d_e-f";
	ck_assert_int_eq(store_decode_grant_set(v, strlen(v), &multi, id), 0);
	ck_assert_uint_eq(multi, 3);
	ck_assert_str_eq(id, "a.b:c/d_e-f");
	/* Cut at len: the word after it is not read. */
	ck_assert_int_eq(store_decode_grant_set(v, 27, &multi, id), 0);
	ck_assert_uint_eq(multi, 1);
	for (i = 0; i < nitems(bad); i++)
		ck_assert_msg(store_decode_grant_set(bad[i], strlen(bad[i]),
		    &multi, id) == -1, "\"%s\" accepted", bad[i]);
}
END_TEST

START_TEST(test_encode_store_wide)
{
	struct store_change	ch = change(STORE_TOKENS, NULL);

	ch.token = 1000;
	encode(&ch);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_str_eq(cmds[0], "SET semd:tokens 1000");
	ch = change(STORE_DISOWN, NULL);
	encode(&ch);
	ck_assert_uint_eq(ncmds, 1);
	ck_assert_str_eq(cmds[0], "DEL semd:owner");
}
END_TEST

/* --- the fenced script's words --- */

static void
ck_words(const struct store_argv *a, const char *const *want, size_t n)
{
	size_t	i;

	ck_assert_uint_eq(a->n, n);
	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(a->lens[i], strlen(want[i]));
		ck_assert_str_eq(a->argv[i], want[i]);
	}
}

START_TEST(test_fenced_call)
{
	static const char *const renew[] = { "EVALSHA", "abc123", "3",
	    "semd:owner", "semd:epoch", "semd:tokens", "7 00ab ",
	    "7 00ab 10.0.0.1:7070", "3000" };
	struct store_argv	a = { NULL, NULL, 0, 0 };
	char			buf[STORE_FENCE_MAX + STORE_ADDR_MAX];

	store_owner_value(&model, buf, sizeof(buf));
	ck_assert_str_eq(buf, "7 00ab 10.0.0.1:7070");
	store_fenced_call(&model, &a, "EVALSHA", "abc123", "semd:tokens");
	ck_words(&a, renew, nitems(renew));
	store_argv_free(&a);
	ck_assert_uint_eq(a.n, 0);
	ck_assert_ptr_null(a.argv);
}
END_TEST

START_TEST(test_batch_argv)
{
	static const char *const want[] = { "EVAL", "SCRIPT", "2",
	    "semd:owner", "semd:epoch", "7 00ab ", "7 00ab 10.0.0.1:7070",
	    "3000", "4", "HSET", "semd:{q}:sem", "capacity", "4", "3", "SADD",
	    "semd:sems", "q", "3", "HDEL", "semd:{q}:grants", "9" };
	struct store_change	 ch[2];
	struct store_argv	 a = { NULL, NULL, 0, 0 };
	size_t			 i;

	ch[0] = change(STORE_SEM_PUT, "q");
	ch[0].capacity = 4;
	ch[1] = change(STORE_GRANT_DEL, "q");
	ch[1].token = 9;
	store_batch_argv(&model, &a, "EVAL", "SCRIPT", ch, 2);
	ck_words(&a, want, nitems(want));
	store_argv_free(&a);
	/* Many changes: the word array grows. */
	for (i = 0; i < 100; i++)
		store_batch_argv(&model, &a, "EVAL", "S", ch, 2);
	ck_assert_uint_eq(a.n, 100 * nitems(want));
	ck_assert_str_eq(a.argv[a.n - 1], "9");
	store_argv_free(&a);
}
END_TEST

/* --- decoding grants --- */

static uint32_t			dn;
static enum store_grant_kind	dkind;
static uint64_t			ddeadline;
static char			dname[PROTO_LABEL_MAX + 1];
static char			daddr[STORE_HOLDER_ADDR_MAX];

static int
decode_len(const char *s, size_t len)
{
	dn = 0xdead;
	ddeadline = 0xdead;
	memset(dname, 'X', sizeof(dname));
	memset(daddr, 'X', sizeof(daddr));
	return (store_decode_grant(s, len, &dn, &dkind, &ddeadline, dname,
	    daddr));
}

static int
decode(const char *s)
{
	return (decode_len(s, strlen(s)));
}

START_TEST(test_decode_grant)
{
	ck_assert_int_eq(decode("n=3 kind=lease deadline_ms=1700000000123 "
	    "name=worker-1 addr=10.1.2.3:4567"), 0);
	ck_assert_uint_eq(dn, 3);
	ck_assert_int_eq(dkind, STORE_KIND_LEASE);
	ck_assert_uint_eq(ddeadline, 1700000000123ull);
	ck_assert_str_eq(dname, "worker-1");
	ck_assert_str_eq(daddr, "10.1.2.3:4567");
	/* In any order, "-" for unknown. */
	ck_assert_int_eq(decode("addr=- kind=conn name=- deadline_ms=0 n=1"),
	    0);
	ck_assert_int_eq(dkind, STORE_KIND_CONN);
	ck_assert_uint_eq(dn, 1);
	ck_assert_str_eq(dname, "");
	ck_assert_str_eq(daddr, "");
	/* Written by an older semd: no name, no addr. */
	ck_assert_int_eq(decode("n=2 kind=lease deadline_ms=5"), 0);
	ck_assert_uint_eq(ddeadline, 5);
	ck_assert_str_eq(dname, "");
	ck_assert_str_eq(daddr, "");
	/* The largest numbers that fit. */
	ck_assert_int_eq(decode("n=2147483647 kind=conn "
	    "deadline_ms=18446744073709551615"), 0);
	ck_assert_uint_eq(dn, 2147483647u);
	ck_assert_uint_eq(ddeadline, UINT64_MAX);
}
END_TEST

START_TEST(test_decode_grant_malformed)
{
	static const char *const bad[] = {
		"",
		"n=0 kind=conn deadline_ms=0",
		"n= kind=conn deadline_ms=0",
		"n=-1 kind=conn deadline_ms=0",
		"n=2147483648 kind=conn deadline_ms=0",
		"n=99999999999999999999999 kind=conn deadline_ms=0",
		"kind=conn deadline_ms=0",
		"n=1 deadline_ms=0",
		"n=1 kind= deadline_ms=0",
		"n=1 kind=lea deadline_ms=0",
		"n=1 kind=leases deadline_ms=0",
		"n=1 kind=CONN deadline_ms=0",
		"n=1 kind=conn",
		"n=1 kind=conn deadline_ms=+5",
		"n=1 kind=conn deadline_ms=18446744073709551616",
		"n=1 kind=conn deadline_ms=0x10",
		"n=1kind=conn deadline_ms=0",
		"garbage",
	};
	size_t	i;

	for (i = 0; i < nitems(bad); i++)
		ck_assert_msg(decode(bad[i]) == -1, "\"%s\" accepted", bad[i]);
}
END_TEST

START_TEST(test_decode_grant_nul)
{
	static const char	v1[] = "n=1\0 kind=conn deadline_ms=0";
	static const char	v2[] = "n=1 kind=conn deadline_ms=0 name=a\0b "
				    "addr=x\0y";
	static const char	v3[] = "n=1 kind=conn\0 deadline_ms=0";
	static const char	v4[] = "n=4 kind=lease deadline_ms=9\0";

	ck_assert_int_eq(decode_len(v1, sizeof(v1) - 1), -1);
	ck_assert_int_eq(decode_len(v3, sizeof(v3) - 1), -1);
	ck_assert_int_eq(decode_len(v4, sizeof(v4) - 1), -1);
	/* A control character in an address: unknown, the grant kept. */
	ck_assert_int_eq(decode("n=1 kind=conn deadline_ms=0 addr=a\rb"), 0);
	ck_assert_str_eq(daddr, "");
	/* A label with a NUL is unknown, not cut at the NUL. */
	ck_assert_int_eq(decode_len(v2, sizeof(v2) - 1), 0);
	ck_assert_str_eq(dname, "");
	ck_assert_str_eq(daddr, "");
	/* The length bounds the value: what follows is not read. */
	ck_assert_int_eq(decode_len("n=1 kind=conn deadline_ms=0 name=zz",
	    27), 0);
	ck_assert_str_eq(dname, "");
}
END_TEST

START_TEST(test_decode_labels)
{
	char	v[512], label[PROTO_LABEL_MAX + 2], addr[STORE_HOLDER_ADDR_MAX + 1];

	/* A name that is not a valid label is dropped, the grant kept. */
	ck_assert_int_eq(decode("n=1 kind=conn deadline_ms=0 name=a\x01z"), 0);
	ck_assert_str_eq(dname, "");
	memset(label, 'l', PROTO_LABEL_MAX);
	label[PROTO_LABEL_MAX] = '\0';
	snprintf(v, sizeof(v), "n=1 kind=conn deadline_ms=0 name=%s", label);
	ck_assert_int_eq(decode(v), 0);
	ck_assert_str_eq(dname, label);
	label[PROTO_LABEL_MAX] = 'l';
	label[PROTO_LABEL_MAX + 1] = '\0';
	snprintf(v, sizeof(v), "n=1 kind=conn deadline_ms=0 name=%s", label);
	ck_assert_int_eq(decode(v), 0);
	ck_assert_str_eq(dname, "");
	/* Addresses: up to STORE_HOLDER_ADDR_MAX - 1 bytes. */
	memset(addr, 'a', STORE_HOLDER_ADDR_MAX - 1);
	addr[STORE_HOLDER_ADDR_MAX - 1] = '\0';
	snprintf(v, sizeof(v), "n=1 kind=conn deadline_ms=0 addr=%s", addr);
	ck_assert_int_eq(decode(v), 0);
	ck_assert_str_eq(daddr, addr);
	addr[STORE_HOLDER_ADDR_MAX - 1] = 'a';
	addr[STORE_HOLDER_ADDR_MAX] = '\0';
	snprintf(v, sizeof(v), "n=1 kind=conn deadline_ms=0 addr=%s", addr);
	ck_assert_int_eq(decode(v), 0);
	ck_assert_str_eq(daddr, "");
}
END_TEST

START_TEST(test_encode_decode)
{
	struct store_change	 ch = change(STORE_GRANT_PUT, "db");
	const char		*value;

	ch.token = 77;
	ch.n = 12;
	ch.kind = STORE_KIND_CONN;
	ch.holder_name = "api@host";
	ch.holder_addr = "[::1]:40000";
	encode(&ch);
	/* The value is the command's last word. */
	value = strstr(cmds[0], " 77 ") + 4;
	ck_assert_int_eq(decode(value), 0);
	ck_assert_uint_eq(dn, 12);
	ck_assert_int_eq(dkind, STORE_KIND_CONN);
	ck_assert_uint_eq(ddeadline, 0);
	ck_assert_str_eq(dname, "api@host");
	ck_assert_str_eq(daddr, "[::1]:40000");
}
END_TEST

/* --- the owner key --- */

static struct store_owner	own;

static void
parse_owner(const char *v, size_t len)
{
	memset(&own, 0, sizeof(own));
	own.epoch = 42;
	store_parse_owner(v, len, &own);
}

START_TEST(test_parse_owner)
{
	parse_owner("12 00ab 10.0.0.1:7070", 21);
	ck_assert_uint_eq(own.epoch, 12);
	ck_assert_str_eq(own.addr, "10.0.0.1:7070");
	parse_owner("18446744073709551615 id [::1]:1", 31);
	ck_assert_uint_eq(own.epoch, UINT64_MAX);
	ck_assert_str_eq(own.addr, "[::1]:1");
	/* What cannot be read leaves the epoch and says "-". */
	parse_owner("", 0);
	ck_assert_uint_eq(own.epoch, 42);
	ck_assert_str_eq(own.addr, "-");
	parse_owner("x id addr", 9);
	ck_assert_uint_eq(own.epoch, 42);
	ck_assert_str_eq(own.addr, "addr");
	parse_owner("18446744073709551616 id addr", 28);
	ck_assert_uint_eq(own.epoch, 42);
	parse_owner("5 id", 4);
	ck_assert_uint_eq(own.epoch, 5);
	ck_assert_str_eq(own.addr, "-");
	/* The length bounds it. */
	parse_owner("5 id addrXXXX", 9);
	ck_assert_str_eq(own.addr, "addr");
	/* An address that would break ROLE's reply line is unknown. */
	parse_owner("5 id a\r\nOK", 11);
	ck_assert_str_eq(own.addr, "-");
	parse_owner("5 id a\0b", 8);
	ck_assert_str_eq(own.addr, "-");
	parse_owner("5 id h\xc3\xa9:1", 10);
	ck_assert_str_eq(own.addr, "-");
}
END_TEST

START_TEST(test_parse_owner_long)
{
	char	v[STORE_ADDR_MAX * 2];

	memset(v, 'a', sizeof(v));
	memcpy(v, "1 id ", 5);
	parse_owner(v, sizeof(v));
	ck_assert_uint_eq(own.epoch, 1);
	ck_assert_uint_eq(strlen(own.addr), STORE_ADDR_MAX - 1);
}
END_TEST

/* --- error replies --- */

START_TEST(test_fenced)
{
	static const char	withnul[] = "ERR x\0SEMDFENCED 3 id a:1";
	const char		*owner;
	size_t			 len;
	const char		*e;

	e = "SEMDFENCED 9 00cd 10.0.0.2:7070";
	ck_assert_int_eq(store_is_fenced(e, strlen(e), &owner, &len), 1);
	ck_assert_uint_eq(len, strlen("9 00cd 10.0.0.2:7070"));
	ck_assert_int_eq(memcmp(owner, "9 00cd 10.0.0.2:7070", len), 0);
	/* Redis's own words before the script's. */
	e = "ERR Error running script (call to f_1): @user_script:9: "
	    "SEMDFENCED -";
	ck_assert_int_eq(store_is_fenced(e, strlen(e), &owner, &len), 1);
	ck_assert_uint_eq(len, 1);
	ck_assert_int_eq(owner[0], '-');
	ck_assert_int_eq(store_is_fenced(withnul, sizeof(withnul) - 1, &owner,
	    &len), 1);
	ck_assert_uint_eq(len, 8);
	e = "SEMDFENCED";		/* no space, no owner */
	ck_assert_int_eq(store_is_fenced(e, strlen(e), &owner, &len), 0);
	e = "ERR unknown command";
	ck_assert_int_eq(store_is_fenced(e, strlen(e), &owner, &len), 0);
	ck_assert_int_eq(store_is_fenced("", 0, &owner, &len), 0);
	/* Beyond the length is not looked at. */
	e = "ERR SEMDFENCED 1";
	ck_assert_int_eq(store_is_fenced(e, 10, &owner, &len), 0);
}
END_TEST

START_TEST(test_applied_nothing)
{
	static const char *const nothing[] = {
		"NOSCRIPT No matching script. Please use EVAL.",
		"LOADING Redis is loading the dataset in memory",
		"NOAUTH Authentication required.",
		"BUSY Redis is busy running a script.",
		"READONLY You can't write against a read only replica.",
		"OOM command not allowed when used memory > 'maxmemory'.",
		"MISCONF Redis is configured to save RDB snapshots",
		"NOREPLICAS Not enough good replicas to write.",
		"MASTERDOWN Link with MASTER is down",
		"ERR Error running script: @user_script:1: OOM command not "
		    "allowed",
	};
	static const char *const unknown[] = {
		"ERR Error running script: WRONGTYPE Operation against a key",
		"ERR unknown command",
		"",
	};
	size_t	i;

	for (i = 0; i < nitems(nothing); i++)
		ck_assert_msg(store_applied_nothing(nothing[i],
		    strlen(nothing[i])), "\"%s\"", nothing[i]);
	for (i = 0; i < nitems(unknown); i++)
		ck_assert_msg(!store_applied_nothing(unknown[i],
		    strlen(unknown[i])), "\"%s\"", unknown[i]);
	ck_assert_int_eq(store_applied_nothing("NOSCRIPT", 4), 0);
}
END_TEST

static Suite *
store_model_suite(void)
{
	Suite	*s = suite_create("store_model");
	TCase	*tc;

	tc = tcase_create("keys");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_keys);
	tcase_add_test(tc, test_keys_glob_prefix);
	tcase_add_test(tc, test_key_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("encode");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_encode_sems);
	tcase_add_test(tc, test_encode_grants);
	tcase_add_test(tc, test_encode_long_names);
	tcase_add_test(tc, test_encode_store_wide);
	tcase_add_test(tc, test_encode_multi_id);
	tcase_add_test(tc, test_fenced_call);
	tcase_add_test(tc, test_batch_argv);
	suite_add_tcase(s, tc);

	tc = tcase_create("decode");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_decode_grant);
	tcase_add_test(tc, test_decode_grant_malformed);
	tcase_add_test(tc, test_decode_grant_nul);
	tcase_add_test(tc, test_decode_grant_set);
	tcase_add_test(tc, test_decode_labels);
	tcase_add_test(tc, test_encode_decode);
	tcase_add_test(tc, test_parse_owner);
	tcase_add_test(tc, test_parse_owner_long);
	tcase_add_test(tc, test_fenced);
	tcase_add_test(tc, test_applied_nothing);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr = srunner_create(store_model_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
