/*
 * test_proto.c: unit tests of the wire protocol (proto/parse.c, reply.c).
 *
 * Every request is parsed into a request poisoned beforehand, so a field
 * the parser forgets to set shows up as garbage. Lines with NUL bytes are
 * passed with explicit lengths. Refused lines must give ERR PROTO with a
 * message that says what was wrong and is safe to put on a reply line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "proto.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

static struct proto_request	req;
static struct proto_error	err;

static enum proto_parse_result
parse_len(const char *line, size_t len)
{
	memset(&req, 0xa5, sizeof(req));
	memset(&err, 0, sizeof(err));
	return (proto_parse(line, len, &req, &err));
}

static enum proto_parse_result
parse(const char *line)
{
	return (parse_len(line, strlen(line)));
}

/* A message fit for "ERR CODE msg": non-empty, bounded, printable ASCII. */
static int
msg_is_clean(const char *msg)
{
	size_t	i, len = strnlen(msg, PROTO_ERRMSG_MAX);

	if (len == 0 || len == PROTO_ERRMSG_MAX)
		return (0);
	for (i = 0; i < len; i++) {
		if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] > 0x7e)
			return (0);
	}
	return (1);
}

#define ck_ok(line)							\
	ck_assert_msg(parse(line) == PROTO_PARSE_OK,			\
	    "\"%s\" refused: %s", (line), err.msg)

#define ck_bad_len(line, len, needle) do {				\
	ck_assert_msg(parse_len((line), (len)) == PROTO_PARSE_ERROR,	\
	    "\"%s\" not refused", (line));				\
	ck_assert_int_eq(err.code, PERR_PROTO);				\
	ck_assert_msg(strstr(err.msg, (needle)) != NULL,		\
	    "error \"%s\" lacks \"%s\"", err.msg, (needle));		\
	ck_assert_msg(msg_is_clean(err.msg), "bad message \"%s\"",	\
	    err.msg);							\
} while (0)
#define ck_bad(line, needle)	ck_bad_len((line), strlen(line), (needle))

#define ck_word_len(w, s, n) do {					\
	ck_assert_uint_eq((w).len, (n));				\
	ck_assert_mem_eq((w).p, (s), (n));				\
} while (0)
#define ck_word(w, s)		ck_word_len((w), (s), strlen(s))

/* --- tokenizer --- */

START_TEST(test_next_word)
{
	const char		 s[] = " \tab\t\t c\0d  \xff ";
	struct proto_word	 w;
	size_t			 pos = 0;

	ck_assert_int_eq(proto_next_word(s, sizeof(s) - 1, &pos, &w), 1);
	ck_assert_ptr_eq(w.p, s + 2);
	ck_word(w, "ab");
	ck_assert_int_eq(proto_next_word(s, sizeof(s) - 1, &pos, &w), 1);
	ck_word_len(w, "c\0d", 3);
	ck_assert_int_eq(proto_next_word(s, sizeof(s) - 1, &pos, &w), 1);
	ck_word(w, "\xff");
	ck_assert_int_eq(proto_next_word(s, sizeof(s) - 1, &pos, &w), 0);
	ck_assert_int_eq(proto_next_word(s, sizeof(s) - 1, &pos, &w), 0);

	pos = 0;
	ck_assert_int_eq(proto_next_word("", 0, &pos, &w), 0);
	pos = 0;
	ck_assert_int_eq(proto_next_word(" \t \t", 4, &pos, &w), 0);
	/* Only blanks separate: \r, \n, \v and \f belong to words. */
	pos = 0;
	ck_assert_int_eq(proto_next_word("a\r\n\v\fb c", 8, &pos, &w), 1);
	ck_word(w, "a\r\n\v\fb");
	/* len bounds the scan: nothing past it is read. */
	pos = 0;
	ck_assert_int_eq(proto_next_word("abc def", 2, &pos, &w), 1);
	ck_word(w, "ab");
	ck_assert_int_eq(proto_next_word("abc def", 2, &pos, &w), 0);
}
END_TEST

/* --- every verb, and verbs in any case --- */

static const struct {
	const char	*line;
	enum proto_verb	 verb;
} verb_lines[] = {
	{ "PING", VERB_PING },
	{ "AUTH secret", VERB_AUTH },
	{ "CREATE s 1", VERB_CREATE },
	{ "RESIZE s 1", VERB_RESIZE },
	{ "DELETE s", VERB_DELETE },
	{ "ACQUIRE s", VERB_ACQUIRE },
	{ "TRY s", VERB_TRY },
	{ "RELEASE s 1", VERB_RELEASE },
	{ "REFRESH s 1 1", VERB_REFRESH },
	{ "ATTACH s 1", VERB_ATTACH },
	{ "CHECK s 1", VERB_CHECK },
	{ "REVOKE s 1", VERB_REVOKE },
	{ "INFO s", VERB_INFO },
	{ "HOLDERS s", VERB_HOLDERS },
	{ "WAITERS s", VERB_WAITERS },
	{ "LIST", VERB_LIST },
	{ "STATS", VERB_STATS },
	{ "QUIT", VERB_QUIT },
	{ "ROLE", VERB_ROLE },
	{ "NAME w", VERB_NAME },
	{ "CLIENTS", VERB_CLIENTS },
	{ "KILL 1", VERB_KILL },
	{ "WATCH s 1", VERB_WATCH },
	{ "ACQUIREALL a 1 b 1", VERB_ACQUIREALL },
};

START_TEST(test_verb_table_complete)
{
	size_t	i;
	int	v, seen[VERB__COUNT] = { 0 };

	ck_assert_uint_eq(nitems(verb_lines), VERB__COUNT);
	for (i = 0; i < nitems(verb_lines); i++)
		seen[verb_lines[i].verb]++;
	for (v = 0; v < VERB__COUNT; v++)
		ck_assert_int_eq(seen[v], 1);
}
END_TEST

START_TEST(test_verb_any_case)
{
	const char	*line = verb_lines[_i].line;
	enum proto_verb	 verb = verb_lines[_i].verb;
	char		 buf[64];
	size_t		 i, vlen = strcspn(line, " ");

	memcpy(buf, line, vlen);
	buf[vlen] = '\0';
	ck_assert_str_eq(proto_verb_name(verb), buf);
	ck_ok(line);
	ck_assert_int_eq(req.verb, verb);

	/* lower case verb */
	strcpy(buf, line);
	for (i = 0; i < vlen; i++)
		buf[i] = (char)(buf[i] - 'A' + 'a');
	ck_ok(buf);
	ck_assert_int_eq(req.verb, verb);

	/* alternating case */
	for (i = 0; i < vlen; i += 2)
		buf[i] = (char)(buf[i] - 'a' + 'A');
	ck_ok(buf);
	ck_assert_int_eq(req.verb, verb);
}
END_TEST

START_TEST(test_verb_names)
{
	ck_assert_str_eq(proto_verb_name(VERB_PING), "PING");
	ck_assert_str_eq(proto_verb_name(VERB_ACQUIRE), "ACQUIRE");
	ck_assert_str_eq(proto_verb_name(VERB_QUIT), "QUIT");
	ck_assert_ptr_null(proto_verb_name(VERB__COUNT));
	ck_assert_ptr_null(proto_verb_name((enum proto_verb)-1));
}
END_TEST

START_TEST(test_unknown_verb)
{
	ck_bad("FOO", "unknown command 'FOO'");
	ck_bad("foo bar baz", "unknown command 'foo'");
	ck_bad("PINGS", "unknown command 'PINGS'");
	ck_bad("PIN", "unknown command 'PIN'");
	ck_bad("GET / HTTP/1.0", "unknown command 'GET'");
	/* Case folding is ASCII only: 0xc9 is not 'I' in any locale here. */
	ck_bad("P\xc9NG", "unknown command 'P?NG'");
	/* A verb ending in \r (not the line's last byte) is not the verb. */
	ck_bad("PING\r x", "unknown command 'PING?'");
	ck_bad("\rPING", "unknown command '?PING'");
}
END_TEST

START_TEST(test_noarg_verbs)
{
	ck_ok("PING");
	ck_assert_int_eq(req.verb, VERB_PING);
	ck_ok("LIST");
	ck_assert_int_eq(req.verb, VERB_LIST);
	ck_ok("STATS");
	ck_assert_int_eq(req.verb, VERB_STATS);
	ck_ok("QUIT");
	ck_assert_int_eq(req.verb, VERB_QUIT);
	ck_bad("PING x", "wrong number of arguments for 'PING'");
	ck_bad("list x", "wrong number of arguments for 'LIST'");
	ck_bad("STATS x y", "wrong number of arguments for 'STATS'");
	ck_bad("QUIT now", "wrong number of arguments for 'QUIT'");
	ck_ok("role");
	ck_assert_int_eq(req.verb, VERB_ROLE);
	ck_bad("ROLE x", "wrong number of arguments for 'ROLE'");
	ck_ok("clients");
	ck_assert_int_eq(req.verb, VERB_CLIENTS);
	ck_bad("CLIENTS x", "wrong number of arguments for 'CLIENTS'");
}
END_TEST

/* --- 1.1: NAME, KILL, WATCH --- */

START_TEST(test_name_verb)
{
	char	line[128];

	ck_ok("NAME billing-worker@web3:4121");
	ck_assert_int_eq(req.verb, VERB_NAME);
	ck_word(req.arg, "billing-worker@web3:4121");
	ck_ok("name Az09_.:/-@");
	ck_word(req.arg, "Az09_.:/-@");
	ck_ok("NAME @");
	ck_word(req.arg, "@");
	ck_ok("NAME\tMixed\t");
	ck_word(req.arg, "Mixed");

	/* 64 bytes pass, 65 do not. */
	memcpy(line, "NAME ", 5);
	memset(line + 5, 'x', 64);
	line[69] = '\0';
	ck_ok(line);
	ck_assert_uint_eq(req.arg.len, 64);
	ck_assert_ptr_eq(req.arg.p, line + 5);
	line[69] = 'x';
	line[70] = '\0';
	ck_bad(line, "invalid label 'xxxxxxxx");
	ck_bad(line, "1..64 bytes");

	ck_bad("NAME a=b", "invalid label 'a=b'");
	ck_bad("NAME a!", "invalid label 'a!'");
	ck_bad("NAME \xc3\xa9x", "invalid label '?" "?x'");
	ck_bad_len("NAME a\0b", 8, "invalid label 'a?b'");
	ck_bad("NAME", "wrong number of arguments for 'NAME' (usage: "
	    "NAME <label>)");
	ck_bad("NAME a b", "wrong number of arguments for 'NAME'");

	ck_assert_int_eq(proto_valid_label("a@b", 3), 1);
	ck_assert_int_eq(proto_valid_label("", 0), 0);
	ck_assert_int_eq(proto_valid_label("a b", 3), 0);
	ck_assert_int_eq(proto_valid_label("a\tb", 3), 0);
	/* len, not NUL, ends the label */
	ck_assert_int_eq(proto_valid_label("ab!", 2), 1);
}
END_TEST

/* Every byte in a label: the name alphabet and '@' pass. */
START_TEST(test_label_byte)
{
	const char	*alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789_.:/-@";
	char		 line[] = "NAME a?b";
	int		 valid;

	if (_i == ' ' || _i == '\t')
		return;		/* a blank splits the label */
	line[6] = (char)_i;
	valid = _i != 0 && strchr(alphabet, _i) != NULL;
	if (valid) {
		ck_assert_int_eq(parse_len(line, 8), PROTO_PARSE_OK);
		ck_word_len(req.arg, line + 5, 3);
	} else
		ck_bad_len(line, 8, "invalid label");
}
END_TEST

START_TEST(test_kill)
{
	ck_ok("KILL 42");
	ck_assert_int_eq(req.verb, VERB_KILL);
	ck_assert_uint_eq(req.conn_id, 42);
	ck_ok("kill 0");
	ck_assert_uint_eq(req.conn_id, 0);
	ck_ok("KILL 18446744073709551615");
	ck_assert_uint_eq(req.conn_id, UINT64_MAX);
	ck_bad("KILL 18446744073709551616", "invalid connection id "
	    "'18446744073709551616'");
	ck_bad("KILL -1", "invalid connection id '-1'");
	ck_bad("KILL me", "invalid connection id 'me'");
	ck_bad("KILL", "wrong number of arguments for 'KILL' (usage: "
	    "KILL <conn id>)");
	ck_bad("KILL 1 2", "wrong number of arguments for 'KILL'");
}
END_TEST

START_TEST(test_watch)
{
	ck_ok("WATCH s 42");
	ck_assert_int_eq(req.verb, VERB_WATCH);
	ck_word(req.sem, "s");
	ck_assert_uint_eq(req.token, 42);
	ck_assert_int_eq(req.timeout_ms, -1);

	ck_ok("watch db-pool 18446744073709551615 timeout 2500");
	ck_word(req.sem, "db-pool");
	ck_assert_uint_eq(req.token, UINT64_MAX);
	ck_assert_int_eq(req.timeout_ms, 2500);
	ck_ok("WATCH s 1 TIMEOUT 0");
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_ok("WATCH s 1 TIMEOUT 2147483647");
	ck_assert_int_eq(req.timeout_ms, 2147483647);

	ck_bad("WATCH s 1 TIMEOUT 2147483648", "invalid TIMEOUT "
	    "'2147483648'");
	ck_bad("WATCH s 1 TIMEOUT -1", "invalid TIMEOUT '-1'");
	ck_bad("WATCH s 1 TIMEOUT", "TIMEOUT needs a value in ms");
	ck_bad("WATCH s 1 LEASE 5", "unexpected 'LEASE' in WATCH");
	ck_bad("WATCH s 1 5", "unexpected '5' in WATCH");
	ck_bad("WATCH s 1 TIMEOUT 5 TIMEOUT 6",
	    "wrong number of arguments for 'WATCH'");
	ck_bad("WATCH s 1 TIMEOUT 5 x", "wrong number of arguments for "
	    "'WATCH' (usage: WATCH <sem> <token> [TIMEOUT <ms>])");
	ck_bad("WATCH s", "wrong number of arguments for 'WATCH'");
	ck_bad("WATCH", "wrong number of arguments for 'WATCH'");
	ck_bad("WATCH bad!name 1", "invalid semaphore name 'bad!name'");
	ck_bad("WATCH s x", "invalid token 'x'");
	ck_bad("WATCH s 18446744073709551616", "invalid token");
}
END_TEST

START_TEST(test_auth)
{
	const char	pw[] = "AUTH p\0s\xff\x01s";

	ck_ok("AUTH s3cr3t");
	ck_assert_int_eq(req.verb, VERB_AUTH);
	ck_word(req.arg, "s3cr3t");
	/* Passwords keep their case, only the verb folds. */
	ck_ok("auth SeCrEt");
	ck_word(req.arg, "SeCrEt");
	/* Any bytes but blanks, NUL and 0xff included. */
	ck_assert_int_eq(parse_len(pw, sizeof(pw) - 1), PROTO_PARSE_OK);
	ck_word_len(req.arg, "p\0s\xff\x01s", 6);
	ck_assert_ptr_eq(req.arg.p, pw + 5);
	ck_bad("AUTH", "wrong number of arguments for 'AUTH'");
	ck_bad("AUTH a b", "wrong number of arguments for 'AUTH'");
}
END_TEST

START_TEST(test_create)
{
	const char	*line = "CREATE jobs 5";

	ck_ok(line);
	ck_assert_int_eq(req.verb, VERB_CREATE);
	ck_word(req.sem, "jobs");
	ck_assert_ptr_eq(req.sem.p, line + 7);
	ck_assert_uint_eq(req.capacity, 5);
	ck_ok("create Jobs 1");
	ck_word(req.sem, "Jobs");
	ck_assert_uint_eq(req.capacity, 1);
	ck_ok("CREATE s 2147483647");
	ck_assert_uint_eq(req.capacity, 2147483647u);
	ck_ok("CREATE s 0005");
	ck_assert_uint_eq(req.capacity, 5);

	ck_bad("CREATE s 0", "invalid capacity '0'");
	ck_bad("CREATE s 2147483648", "invalid capacity '2147483648'");
	ck_bad("CREATE s -1", "invalid capacity '-1'");
	ck_bad("CREATE s x", "invalid capacity 'x'");
	ck_bad("CREATE s! 1", "invalid semaphore name 's!'");
	ck_bad("CREATE", "wrong number of arguments for 'CREATE'");
	ck_bad("CREATE s", "wrong number of arguments for 'CREATE'");
	ck_bad("CREATE s 1 2", "wrong number of arguments for 'CREATE'");
}
END_TEST

START_TEST(test_resize)
{
	ck_ok("RESIZE s 0");
	ck_assert_int_eq(req.verb, VERB_RESIZE);
	ck_word(req.sem, "s");
	ck_assert_uint_eq(req.capacity, 0);
	ck_ok("resize s 7");
	ck_assert_uint_eq(req.capacity, 7);
	ck_ok("RESIZE s 2147483647");
	ck_assert_uint_eq(req.capacity, 2147483647u);
	ck_bad("RESIZE s 2147483648", "invalid capacity");
	ck_bad("RESIZE s", "wrong number of arguments for 'RESIZE'");
	ck_bad("RESIZE s 1 1", "wrong number of arguments for 'RESIZE'");
	ck_bad("RESIZE 1", "wrong number of arguments for 'RESIZE'");
}
END_TEST

START_TEST(test_sem_only_verbs)
{
	static const struct {
		const char	*verb;
		enum proto_verb	 v;
	} t[] = {
		{ "DELETE", VERB_DELETE }, { "INFO", VERB_INFO },
		{ "HOLDERS", VERB_HOLDERS }, { "WAITERS", VERB_WAITERS },
	};
	char	line[64], want[64];
	size_t	i;

	for (i = 0; i < nitems(t); i++) {
		snprintf(line, sizeof(line), "%s a/b:c.d-e_F", t[i].verb);
		ck_ok(line);
		ck_assert_int_eq(req.verb, t[i].v);
		ck_word(req.sem, "a/b:c.d-e_F");

		snprintf(want, sizeof(want), "wrong number of arguments for "
		    "'%s'", t[i].verb);
		ck_bad(t[i].verb, want);
		snprintf(line, sizeof(line), "%s a b", t[i].verb);
		ck_bad(line, want);
		snprintf(line, sizeof(line), "%s a,b", t[i].verb);
		ck_bad(line, "invalid semaphore name 'a,b'");
	}
}
END_TEST

START_TEST(test_token_verbs)
{
	static const struct {
		const char	*verb;
		enum proto_verb	 v;
	} t[] = {
		{ "RELEASE", VERB_RELEASE }, { "ATTACH", VERB_ATTACH },
		{ "CHECK", VERB_CHECK }, { "REVOKE", VERB_REVOKE },
	};
	char	line[96], want[64];
	size_t	i;

	for (i = 0; i < nitems(t); i++) {
		snprintf(line, sizeof(line), "%s s 42", t[i].verb);
		ck_ok(line);
		ck_assert_int_eq(req.verb, t[i].v);
		ck_word(req.sem, "s");
		ck_assert_uint_eq(req.token, 42);

		snprintf(line, sizeof(line), "%s s 0", t[i].verb);
		ck_ok(line);
		ck_assert_uint_eq(req.token, 0);
		snprintf(line, sizeof(line), "%s s 18446744073709551615",
		    t[i].verb);
		ck_ok(line);
		ck_assert_uint_eq(req.token, UINT64_MAX);

		snprintf(line, sizeof(line), "%s s 18446744073709551616",
		    t[i].verb);
		ck_bad(line, "invalid token '18446744073709551616'");
		snprintf(line, sizeof(line), "%s s 99999999999999999999",
		    t[i].verb);
		ck_bad(line, "invalid token");
		snprintf(line, sizeof(line), "%s s -1", t[i].verb);
		ck_bad(line, "invalid token '-1'");

		snprintf(want, sizeof(want), "wrong number of arguments for "
		    "'%s'", t[i].verb);
		snprintf(line, sizeof(line), "%s s", t[i].verb);
		ck_bad(line, want);
		snprintf(line, sizeof(line), "%s s 1 2", t[i].verb);
		ck_bad(line, want);
	}
}
END_TEST

START_TEST(test_refresh)
{
	ck_ok("REFRESH s 7 30000");
	ck_assert_int_eq(req.verb, VERB_REFRESH);
	ck_word(req.sem, "s");
	ck_assert_uint_eq(req.token, 7);
	ck_assert_uint_eq(req.ms, 30000);
	ck_ok("refresh s 18446744073709551615 0");
	ck_assert_uint_eq(req.token, UINT64_MAX);
	ck_assert_uint_eq(req.ms, 0);
	ck_ok("REFRESH s 1 2147483647");
	ck_assert_uint_eq(req.ms, 2147483647u);
	ck_bad("REFRESH s 1 2147483648", "invalid ms '2147483648'");
	ck_bad("REFRESH s x 1", "invalid token 'x'");
	ck_bad("REFRESH s 1", "wrong number of arguments for 'REFRESH'");
	ck_bad("REFRESH s 1 2 3", "wrong number of arguments for 'REFRESH'");
}
END_TEST

/* --- ACQUIRE and TRY --- */

START_TEST(test_acquire_forms)
{
	ck_ok("ACQUIRE s");
	ck_assert_int_eq(req.verb, VERB_ACQUIRE);
	ck_word(req.sem, "s");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, -1);
	ck_assert_int_eq(req.lease_ms, -1);

	ck_ok("ACQUIRE s 3");
	ck_assert_uint_eq(req.n, 3);
	ck_assert_int_eq(req.timeout_ms, -1);
	ck_assert_int_eq(req.lease_ms, -1);

	ck_ok("ACQUIRE s TIMEOUT 100");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, 100);
	ck_assert_int_eq(req.lease_ms, -1);

	ck_ok("ACQUIRE s LEASE 5000");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, -1);
	ck_assert_int_eq(req.lease_ms, 5000);

	ck_ok("ACQUIRE s 2 TIMEOUT 10 LEASE 20");
	ck_assert_uint_eq(req.n, 2);
	ck_assert_int_eq(req.timeout_ms, 10);
	ck_assert_int_eq(req.lease_ms, 20);

	ck_ok("ACQUIRE s 2 LEASE 20 TIMEOUT 10");
	ck_assert_uint_eq(req.n, 2);
	ck_assert_int_eq(req.timeout_ms, 10);
	ck_assert_int_eq(req.lease_ms, 20);

	ck_ok("ACQUIRE s LEASE 20 TIMEOUT 10");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, 10);
	ck_assert_int_eq(req.lease_ms, 20);

	/* Keywords fold case, the name does not. */
	ck_ok("acquire Sem 4 timeout 1 lease 2");
	ck_word(req.sem, "Sem");
	ck_assert_uint_eq(req.n, 4);
	ck_assert_int_eq(req.timeout_ms, 1);
	ck_assert_int_eq(req.lease_ms, 2);
	ck_ok("AcQuIrE s TiMeOuT 5 LeAsE 6");
	ck_assert_int_eq(req.timeout_ms, 5);
	ck_assert_int_eq(req.lease_ms, 6);

	/* Position 1 is always the name, even one spelled like a keyword. */
	ck_ok("ACQUIRE TIMEOUT 5");
	ck_word(req.sem, "TIMEOUT");
	ck_assert_uint_eq(req.n, 5);
	ck_assert_int_eq(req.timeout_ms, -1);
}
END_TEST

START_TEST(test_acquire_edges)
{
	ck_ok("ACQUIRE s 2147483647 TIMEOUT 0 LEASE 0");
	ck_assert_uint_eq(req.n, 2147483647u);
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_assert_int_eq(req.lease_ms, 0);
	ck_ok("ACQUIRE s TIMEOUT 2147483647 LEASE 2147483647");
	ck_assert_int_eq(req.timeout_ms, 2147483647);
	ck_assert_int_eq(req.lease_ms, 2147483647);
	ck_ok("ACQUIRE s 01 TIMEOUT 007");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, 7);

	ck_bad("ACQUIRE s 0", "invalid n '0': must be 1..2147483647");
	ck_bad("ACQUIRE s 2147483648", "invalid n '2147483648'");
	ck_bad("ACQUIRE s -1", "invalid n '-1'");
	ck_bad("ACQUIRE s +1", "invalid n '+1'");
	ck_bad("ACQUIRE s FOO 1", "invalid n 'FOO'");
	ck_bad("ACQUIRE s TIMEOUT 2147483648", "invalid TIMEOUT '2147483648'");
	ck_bad("ACQUIRE s TIMEOUT -1", "invalid TIMEOUT '-1'");
	ck_bad("ACQUIRE s LEASE 2147483648", "invalid LEASE '2147483648'");
	ck_bad("ACQUIRE s LEASE 1x", "invalid LEASE '1x'");
	ck_bad("ACQUIRE s TIMEOUT LEASE 5", "invalid TIMEOUT 'LEASE'");
}
END_TEST

START_TEST(test_acquire_errors)
{
	ck_bad("ACQUIRE", "wrong number of arguments for 'ACQUIRE'");
	ck_bad("ACQUIRE s 1 TIMEOUT 1 LEASE 1 x",
	    "unexpected 'x' in ACQUIRE");
	ck_bad("ACQUIRE s 1 TIMEOUT 1 LEASE 1 ID i x",
	    "wrong number of arguments for 'ACQUIRE'");
	ck_bad("ACQUIRE s! 1", "invalid semaphore name 's!'");
	ck_bad("ACQUIRE s TIMEOUT", "TIMEOUT needs a value");
	ck_bad("ACQUIRE s 2 LEASE", "LEASE needs a value");
	ck_bad("ACQUIRE s TIMEOUT 1 TIMEOUT 2", "TIMEOUT given twice");
	ck_bad("ACQUIRE s LEASE 1 lease 2", "LEASE given twice");
	ck_bad("ACQUIRE s 1 LEASE 1 LEASE 1", "LEASE given twice");
	ck_bad("ACQUIRE s LEASE 1 TIMEOUT 1 LEASE 1", "LEASE given twice");
	/* n must come right after the name. */
	ck_bad("ACQUIRE s TIMEOUT 1 2", "unexpected '2' in ACQUIRE");
	ck_bad("ACQUIRE s 1 2", "unexpected '2' in ACQUIRE");
	ck_bad("ACQUIRE s 1 WAIT 2", "unexpected 'WAIT' in ACQUIRE");
}
END_TEST

START_TEST(test_try)
{
	ck_ok("TRY s");
	ck_assert_int_eq(req.verb, VERB_TRY);
	ck_word(req.sem, "s");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_assert_int_eq(req.lease_ms, -1);

	ck_ok("TRY s 4");
	ck_assert_uint_eq(req.n, 4);
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_assert_int_eq(req.lease_ms, -1);

	ck_ok("try s lease 9");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_assert_int_eq(req.lease_ms, 9);

	ck_ok("TRY s 4 LEASE 9");
	ck_assert_uint_eq(req.n, 4);
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_assert_int_eq(req.lease_ms, 9);

	ck_bad("TRY s TIMEOUT 5", "TRY takes no TIMEOUT");
	ck_bad("TRY s 1 LEASE 5 timeout 5", "TRY takes no TIMEOUT");
	ck_bad("TRY s LEASE 1 LEASE 2", "LEASE given twice");
	ck_bad("TRY s 0", "invalid n '0'");
	ck_bad("TRY s 1 2", "unexpected '2' in TRY");
	ck_bad("TRY", "wrong number of arguments for 'TRY'");
}
END_TEST

/* --- request IDs (1.1: idempotent lease acquire) --- */

START_TEST(test_acquire_id)
{
	char	line[128];

	ck_ok("ACQUIRE s 2 LEASE 100 ID job-7");
	ck_assert_uint_eq(req.n, 2);
	ck_assert_int_eq(req.lease_ms, 100);
	ck_word(req.id, "job-7");
	ck_assert_uint_eq(req.nparts, 1);
	ck_word(req.parts[0].sem, "s");
	ck_assert_uint_eq(req.parts[0].n, 2);

	/* Options in any order after n; the keyword folds case, the id not. */
	ck_ok("acquire s id AbC lease 5 timeout 7");
	ck_word(req.id, "AbC");
	ck_assert_int_eq(req.lease_ms, 5);
	ck_assert_int_eq(req.timeout_ms, 7);
	ck_ok("ACQUIRE s ID x LEASE 5");
	ck_assert_uint_eq(req.n, 1);
	ck_word(req.id, "x");
	ck_ok("TRY s 3 ID a.b:c/d_e-f LEASE 9");
	ck_assert_int_eq(req.timeout_ms, 0);
	ck_word(req.id, "a.b:c/d_e-f");

	/* No ID: len 0. */
	ck_ok("ACQUIRE s LEASE 5");
	ck_assert_uint_eq(req.id.len, 0);

	/* 64 bytes, not 65. */
	memset(line, 0, sizeof(line));
	snprintf(line, sizeof(line), "ACQUIRE s LEASE 1 ID %064d", 0);
	ck_ok(line);
	ck_assert_uint_eq(req.id.len, 64);
	snprintf(line, sizeof(line), "ACQUIRE s LEASE 1 ID %065d", 0);
	ck_bad(line, "invalid request id");

	ck_bad("ACQUIRE s ID x", "ID needs LEASE");
	ck_bad("ACQUIRE s 2 TIMEOUT 5 ID x", "ID needs LEASE");
	ck_bad("TRY s ID x", "ID needs LEASE");
	ck_bad("ACQUIRE s LEASE 5 ID", "ID needs a request id");
	ck_bad("ACQUIRE s LEASE 5 ID a ID a", "ID given twice");
	ck_bad("ACQUIRE s LEASE 5 ID a@b", "invalid request id 'a@b'");
	ck_bad("ACQUIRE s LEASE 5 ID a!", "invalid request id 'a!'");
	ck_bad("TRY s LEASE 5 ID a TIMEOUT 1", "TRY takes no TIMEOUT");
}
END_TEST

/* --- ACQUIREALL (1.1: atomic acquire of several semaphores) --- */

START_TEST(test_acquireall_forms)
{
	ck_ok("ACQUIREALL gpu 1 db 2");
	ck_assert_int_eq(req.verb, VERB_ACQUIREALL);
	ck_assert_uint_eq(req.nparts, 2);
	ck_word(req.parts[0].sem, "gpu");
	ck_assert_uint_eq(req.parts[0].n, 1);
	ck_word(req.parts[1].sem, "db");
	ck_assert_uint_eq(req.parts[1].n, 2);
	ck_word(req.sem, "gpu");
	ck_assert_uint_eq(req.n, 1);
	ck_assert_int_eq(req.timeout_ms, -1);
	ck_assert_int_eq(req.lease_ms, -1);
	ck_assert_uint_eq(req.id.len, 0);

	ck_ok("acquireall a 1 b 1 c 3 timeout 10 lease 20 id r1");
	ck_assert_uint_eq(req.nparts, 3);
	ck_word(req.parts[2].sem, "c");
	ck_assert_uint_eq(req.parts[2].n, 3);
	ck_assert_int_eq(req.timeout_ms, 10);
	ck_assert_int_eq(req.lease_ms, 20);
	ck_word(req.id, "r1");
	ck_ok("ACQUIREALL a 1 b 1 ID r1 LEASE 20");
	ck_word(req.id, "r1");

	/* Names are case-sensitive: A and a are two semaphores. */
	ck_ok("ACQUIREALL A 1 a 1");
	ck_assert_uint_eq(req.nparts, 2);
}
END_TEST

START_TEST(test_acquireall_limits)
{
	char	line[1024];
	size_t	len;
	int	i;

	/* 16 semaphores, the most, with every option. */
	len = (size_t)snprintf(line, sizeof(line), "ACQUIREALL");
	for (i = 0; i < PROTO_MULTI_MAX; i++)
		len += (size_t)snprintf(line + len, sizeof(line) - len,
		    " s%d %d", i, i + 1);
	snprintf(line + len, sizeof(line) - len,
	    " TIMEOUT 1 LEASE 2 ID x");
	ck_ok(line);
	ck_assert_uint_eq(req.nparts, PROTO_MULTI_MAX);
	ck_word(req.parts[15].sem, "s15");
	ck_assert_uint_eq(req.parts[15].n, 16);
	ck_word(req.id, "x");

	/* 17 is refused, with or without options. */
	snprintf(line + len, sizeof(line) - len, " s16 1");
	ck_bad(line, "at most 16 semaphores");
	snprintf(line + len, sizeof(line) - len,
	    " s16 1 TIMEOUT 1 LEASE 2 ID x");
	ck_bad(line, "at most 16 semaphores");

	ck_bad("ACQUIREALL", "needs 2 to 16 semaphores");
	ck_bad("ACQUIREALL a 1", "needs 2 to 16 semaphores");
	ck_bad("ACQUIREALL a 1 LEASE 5", "needs 2 to 16 semaphores");
}
END_TEST

START_TEST(test_acquireall_errors)
{
	ck_bad("ACQUIREALL a 1 a 2", "semaphore 'a' given twice");
	ck_bad("ACQUIREALL a 1 b 1 a 1", "semaphore 'a' given twice");
	/* Every n is explicit. */
	ck_bad("ACQUIREALL a b 1", "invalid n 'b'");
	ck_bad("ACQUIREALL a 1 b", "semaphore 'b' needs its n");
	ck_bad("ACQUIREALL a 1 b LEASE 5", "semaphore 'b' needs its n");
	ck_bad("ACQUIREALL a 0 b 1", "invalid n '0'");
	/* Keywords in name position start the options. */
	ck_bad("ACQUIREALL a 1 c 1 TIMEOUT 1 b 1", "unexpected 'b'");
	ck_bad("ACQUIREALL a 1 lease 1", "needs 2 to 16");
	ck_bad("ACQUIREALL a! 1 b 1", "invalid semaphore name 'a!'");
	ck_bad("ACQUIREALL a 1 b 1 ID x", "ID needs LEASE");
	ck_bad("ACQUIREALL a 1 b 1 TIMEOUT", "TIMEOUT needs a value");
	ck_bad("ACQUIREALL a 1 b 1 LEASE 1 LEASE 2", "LEASE given twice");
}
END_TEST

/* --- values --- */

START_TEST(test_parse_u64)
{
	uint64_t	v;

	ck_assert_int_eq(proto_parse_u64("0", 1, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(proto_parse_u64("007", 3, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 7);
	ck_assert_int_eq(proto_parse_u64("18446744073709551615", 20,
	    UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_int_eq(proto_parse_u64("000000000000000000000000000000001",
	    33, 1, &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(proto_parse_u64("2147483647", 10, PROTO_INT_MAX,
	    &v), 0);
	ck_assert_uint_eq(v, 2147483647u);
	/* len, not NUL, ends the number */
	ck_assert_int_eq(proto_parse_u64("123", 2, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 12);

	ck_assert_int_eq(proto_parse_u64("18446744073709551616", 20,
	    UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("18446744073709551620", 20,
	    UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("99999999999999999999", 20,
	    UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("184467440737095516150", 21,
	    UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("2147483648", 10, PROTO_INT_MAX,
	    &v), -1);
	ck_assert_int_eq(proto_parse_u64("0", 1, 0, &v), 0);
	ck_assert_int_eq(proto_parse_u64("1", 1, 0, &v), -1);
	ck_assert_int_eq(proto_parse_u64("5", 1, 5, &v), 0);
	ck_assert_int_eq(proto_parse_u64("6", 1, 5, &v), -1);
	ck_assert_int_eq(proto_parse_u64("10", 2, 5, &v), -1);

	ck_assert_int_eq(proto_parse_u64("", 0, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("-1", 2, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("+1", 2, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("1x", 2, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64(" 1", 2, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("1 ", 2, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("0x10", 4, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("1e3", 3, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("1.0", 3, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("1\0002", 3, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("\xff", 1, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64("/", 1, UINT64_MAX, &v), -1);
	ck_assert_int_eq(proto_parse_u64(":", 1, UINT64_MAX, &v), -1);
}
END_TEST

START_TEST(test_numbers_in_requests)
{
	static const char *bad[] = {
		"-1", "+1", "1x", "x1", "0x10", "1e3", "1.5", "１",
	};
	char	line[64];
	size_t	i;

	for (i = 0; i < nitems(bad); i++) {
		snprintf(line, sizeof(line), "CREATE s %s", bad[i]);
		ck_bad(line, "invalid capacity");
		snprintf(line, sizeof(line), "RELEASE s %s", bad[i]);
		ck_bad(line, "invalid token");
		snprintf(line, sizeof(line), "REFRESH s 1 %s", bad[i]);
		ck_bad(line, "invalid ms");
		snprintf(line, sizeof(line), "ACQUIRE s %s", bad[i]);
		ck_bad(line, "invalid n");
		snprintf(line, sizeof(line), "ACQUIRE s LEASE %s", bad[i]);
		ck_bad(line, "invalid LEASE");
	}
	ck_bad_len("CREATE s 1\0", 11, "invalid capacity '1?'");
	ck_bad_len("RELEASE s 1\0002", 13, "invalid token '1?2'");
}
END_TEST

START_TEST(test_names)
{
	char	line[300];

	ck_assert_int_eq(proto_valid_name("Az09_.:/-", 9), 1);
	ck_assert_int_eq(proto_valid_name("a", 1), 1);
	ck_assert_int_eq(proto_valid_name("", 0), 0);
	ck_assert_int_eq(proto_valid_name("a b", 3), 0);
	ck_assert_int_eq(proto_valid_name("ab\0", 3), 0);
	/* len, not NUL, ends the name */
	ck_assert_int_eq(proto_valid_name("ab!", 2), 1);

	memset(line, 'x', sizeof(line));
	ck_assert_int_eq(proto_valid_name(line, 200), 1);
	ck_assert_int_eq(proto_valid_name(line, 201), 0);

	memcpy(line, "INFO ", 5);
	memset(line + 5, 'n', 200);
	line[205] = '\0';
	ck_ok(line);
	ck_assert_uint_eq(req.sem.len, 200);
	ck_assert_ptr_eq(req.sem.p, line + 5);
	line[205] = 'n';
	line[206] = '\0';
	ck_bad(line, "invalid semaphore name 'nnnnnnnnnnnnnnnnnnnn");
	ck_bad(line, "...'");

	/* names are case-sensitive: the bytes come through unchanged */
	ck_ok("INFO MixedCase");
	ck_word(req.sem, "MixedCase");
	ck_ok("info mixedcase");
	ck_word(req.sem, "mixedcase");
}
END_TEST

/* Every byte in a name: the alphabet passes, everything else is refused. */
START_TEST(test_name_byte)
{
	const char	*alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789_.:/-";
	char		 line[] = "INFO a?b";
	int		 valid;

	if (_i == ' ' || _i == '\t')
		return;		/* a blank splits the name: see below */
	line[6] = (char)_i;
	valid = _i != 0 && strchr(alphabet, _i) != NULL;
	if (valid) {
		ck_assert_int_eq(parse_len(line, 8), PROTO_PARSE_OK);
		ck_word_len(req.sem, line + 5, 3);
	} else
		ck_bad_len(line, 8, "invalid semaphore name");
}
END_TEST

START_TEST(test_name_blank)
{
	ck_bad("INFO a b", "wrong number of arguments for 'INFO'");
	ck_bad("INFO a\tb", "wrong number of arguments for 'INFO'");
}
END_TEST

/* --- blanks, \r, NUL, 0xff --- */

START_TEST(test_blank_lines)
{
	ck_assert_int_eq(parse_len("", 0), PROTO_PARSE_EMPTY);
	ck_assert_int_eq(parse(" "), PROTO_PARSE_EMPTY);
	ck_assert_int_eq(parse("\t \t  "), PROTO_PARSE_EMPTY);
	ck_assert_int_eq(parse("\r"), PROTO_PARSE_EMPTY);
	ck_assert_int_eq(parse(" \t\r"), PROTO_PARSE_EMPTY);
	/* only one \r is dropped */
	ck_bad("\r\r", "unknown command '?'");
	ck_bad_len("\0", 1, "unknown command '?'");
	ck_bad("\v", "unknown command '?'");
}
END_TEST

START_TEST(test_blanks_between_words)
{
	ck_ok("  CREATE \t s\t\t 5  ");
	ck_assert_int_eq(req.verb, VERB_CREATE);
	ck_word(req.sem, "s");
	ck_assert_uint_eq(req.capacity, 5);
	ck_ok("\tACQUIRE\ts\t2\tTIMEOUT\t3\tLEASE\t4\t");
	ck_assert_uint_eq(req.n, 2);
	ck_assert_int_eq(req.timeout_ms, 3);
	ck_assert_int_eq(req.lease_ms, 4);
	/* other white space is not a separator */
	ck_bad("CREATE\vs 5", "unknown command 'CREATE?s'");
	ck_bad("CREATE s\n5", "wrong number of arguments for 'CREATE'");
	ck_bad("CREATE s\f5 6", "invalid semaphore name 's?5'");
}
END_TEST

START_TEST(test_carriage_return)
{
	ck_ok("CREATE s 5\r");
	ck_assert_uint_eq(req.capacity, 5);
	ck_ok("PING\r");
	ck_assert_int_eq(req.verb, VERB_PING);
	ck_ok("INFO s \r");
	ck_word(req.sem, "s");
	ck_bad("CREATE s 5\r\r", "invalid capacity '5?'");
	ck_bad("CREATE s\r 5", "invalid semaphore name 's?'");
	ck_bad("AUTH\r pw", "unknown command 'AUTH?'");
	/* A mid-line \r is part of a password. */
	ck_ok("AUTH p\rw\r");
	ck_word(req.arg, "p\rw");
}
END_TEST

START_TEST(test_nul_and_ff)
{
	ck_bad_len("PING\0", 5, "unknown command 'PING?'");
	ck_bad_len("PI\0NG", 5, "unknown command 'PI?NG'");
	ck_bad_len("CREATE s\0x 5", 12, "invalid semaphore name 's?x'");
	ck_bad_len("CREATE \0 5", 10, "invalid semaphore name '?'");
	ck_bad_len("INFO s\xff", 7, "invalid semaphore name 's?'");
	ck_bad_len("\xffPING", 5, "unknown command '?PING'");
	ck_bad_len("PING \0", 6, "wrong number of arguments for 'PING'");
	/* bytes after len are never looked at */
	ck_assert_int_eq(parse_len("PING \xff", 4), PROTO_PARSE_OK);
	ck_assert_int_eq(req.verb, VERB_PING);
}
END_TEST

/* --- error texts --- */

START_TEST(test_error_text_is_safe)
{
	char	line[4200];

	/* a long word is quoted cut short, and the text stays bounded */
	memcpy(line, "CREATE ", 7);
	memset(line + 7, 'x', 4000);
	line[100] = '\x01';
	memcpy(line + 4007, " 1", 3);
	ck_bad(line, "invalid semaphore name 'xxxx");
	/* the quote was cut, not the hint after it */
	ck_bad(line, "...' (1..200 bytes of A-Z a-z 0-9 _ . : / -)");

	memset(line, 'Y', 4000);
	line[4000] = '\0';
	ck_bad(line, "unknown command 'YYYY");
	ck_assert_uint_eq(strlen(err.msg),
	    strlen("unknown command '...'") + 40);

	/* the longest text the parser writes still fits whole */
	memcpy(line, "ACQUIRE s 1 ", 12);
	memset(line + 12, 'Z', 4000);
	line[4012] = '\0';
	ck_bad(line, "(options: TIMEOUT <ms> LEASE <ms> ID <id>)");
	memcpy(line, "ACQUIREALL s 1 t 1 LEASE 1 ", 27);
	memset(line + 27, 'Z', 3900);
	line[3927] = '\0';
	ck_bad(line, "(options: TIMEOUT <ms> LEASE <ms> ID <id>)");

	ck_bad("F\x01\x7f\xff\x1bO", "unknown command 'F????O'");
}
END_TEST

START_TEST(test_set_error)
{
	struct proto_error	e;
	char			big[400];

	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(proto_set_error(&e, PERR_NOSEM, "no semaphore '%s' "
	    "(%d)", "x", 7), PROTO_PARSE_ERROR);
	ck_assert_int_eq(e.code, PERR_NOSEM);
	ck_assert_str_eq(e.msg, "no semaphore 'x' (7)");

	memset(big, 'z', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	proto_set_error(&e, PERR_LIMIT, "%s", big);
	ck_assert_int_eq(e.code, PERR_LIMIT);
	ck_assert_uint_eq(strlen(e.msg), PROTO_ERRMSG_MAX - 1);
}
END_TEST

/* A duration with bare numbers in the unit bare (ms); -1 when refused. */
static int64_t
dur(const char *s, uint64_t bare)
{
	uint64_t	v;

	if (proto_parse_duration_ms(s, strlen(s), bare, UINT64_MAX, &v) != 0)
		return (-1);
	return ((int64_t)v);
}

START_TEST(test_split_words)
{
	char	 line[128], *w[PROTO_SPLIT_MAX + 1];
	char	 many[3 * (PROTO_SPLIT_MAX + 1) + 1];
	int	 i;

	strcpy(line, "  acquire\tjobs   2 --lease 1m\r\n");
	ck_assert_int_eq(proto_split_words(line, w, 8), 5);
	ck_assert_str_eq(w[0], "acquire");
	ck_assert_str_eq(w[1], "jobs");
	ck_assert_str_eq(w[2], "2");
	ck_assert_str_eq(w[3], "--lease");
	ck_assert_str_eq(w[4], "1m");		/* the CR LF are not words */
	strcpy(line, " \t ");
	ck_assert_int_eq(proto_split_words(line, w, 8), 0);
	strcpy(line, "a b c");
	ck_assert_int_eq(proto_split_words(line, w, 2), -1);
	strcpy(line, "a\rb c");			/* a CR ends the line */
	ck_assert_int_eq(proto_split_words(line, w, 8), 1);
	ck_assert_str_eq(w[0], "a");
	for (i = 0; i <= PROTO_SPLIT_MAX; i++)
		memcpy(many + 3 * i, "xy ", 3);
	many[sizeof(many) - 1] = '\0';
	ck_assert_int_eq(proto_split_words(many, w, PROTO_SPLIT_MAX + 1), -1);
}
END_TEST

START_TEST(test_durations)
{
	uint64_t	v;

	/* semd-cli: a bare number is seconds, as flock -w, timeout, sleep */
	ck_assert_int_eq(dur("30", 1000), 30000);
	ck_assert_int_eq(dur("1.5", 1000), 1500);
	/* semd.conf: a bare number is milliseconds, as the protocol's <ms> */
	ck_assert_int_eq(dur("30", 1), 30);
	ck_assert_int_eq(dur("0", 1), 0);
	/* units, case-insensitive, decimals */
	ck_assert_int_eq(dur("250ms", 1000), 250);
	ck_assert_int_eq(dur("1.5s", 1), 1500);
	ck_assert_int_eq(dur("2m", 1), 120000);
	ck_assert_int_eq(dur("24h", 1), 86400000);
	ck_assert_int_eq(dur("0.5H", 1), 1800000);
	ck_assert_int_eq(dur("1S", 1), 1000);
	ck_assert_int_eq(dur("10MS", 1), 10);
	ck_assert_int_eq(dur("007s", 1), 7000);
	/* fractions are kept to the millisecond, truncated */
	ck_assert_int_eq(dur("1.2345s", 1), 1234);
	ck_assert_int_eq(dur("0.0001s", 1), 0);
	ck_assert_int_eq(dur("1.999ms", 1), 1);
	ck_assert_int_eq(dur("0.1234567890123456789h", 1), 444444);
	/* malformed */
	ck_assert_int_eq(dur("", 1), -1);
	ck_assert_int_eq(dur("s", 1), -1);
	ck_assert_int_eq(dur(".5s", 1), -1);
	ck_assert_int_eq(dur("5.s", 1), -1);
	ck_assert_int_eq(dur("-1s", 1), -1);
	ck_assert_int_eq(dur("+1s", 1), -1);
	ck_assert_int_eq(dur("1 s", 1), -1);
	ck_assert_int_eq(dur("1sec", 1), -1);
	ck_assert_int_eq(dur("1d", 1), -1);
	ck_assert_int_eq(dur("1.2.3s", 1), -1);
	ck_assert_int_eq(dur("1e3", 1), -1);
	ck_assert_int_eq(dur("0x10", 1), -1);
	/* overflow and max */
	ck_assert_int_eq(proto_parse_duration_ms("18446744073709551615", 20,
	    1, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_int_eq(dur("18446744073709551616", 1), -1);
	ck_assert_int_eq(dur("18446744073709551615h", 1), -1);
	ck_assert_int_eq(dur("5124095576030431.9h", 1), -1);
	ck_assert_int_eq(proto_parse_duration_ms("61s", 3, 1, 60000, &v), -1);
	ck_assert_int_eq(proto_parse_duration_ms("60s", 3, 1, 60000, &v), 0);
	ck_assert_uint_eq(v, 60000);
	/* only len bytes are read */
	ck_assert_int_eq(proto_parse_duration_ms("15sXX", 3, 1, 60000, &v), 0);
	ck_assert_uint_eq(v, 15000);
}
END_TEST

START_TEST(test_sizes)
{
	uint64_t	v;

	ck_assert_int_eq(proto_parse_units("8mb", 3, proto_size_units, 1,
	    UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 8 * 1024 * 1024);
	ck_assert_int_eq(proto_parse_units("1k", 2, proto_size_units, 1,
	    UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 1000);
	ck_assert_int_eq(proto_parse_units("1.5KB", 5, proto_size_units, 1,
	    UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 1536);
	ck_assert_int_eq(proto_parse_units("4096", 4, proto_size_units, 1,
	    UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(proto_parse_units("1ms", 3, proto_size_units, 1,
	    UINT64_MAX, &v), -1);
	/* no unit table: bare numbers only */
	ck_assert_int_eq(proto_parse_units("12k", 3, NULL, 1, UINT64_MAX,
	    &v), -1);
	ck_assert_int_eq(proto_parse_units("12", 2, NULL, 1, UINT64_MAX, &v),
	    0);
	ck_assert_uint_eq(v, 12);
}
END_TEST

START_TEST(test_err_names)
{
	static const char *names[] = {
		"PROTO", "TOOLONG", "AUTH", "NOSEM", "EXISTS", "RANGE",
		"NOTHELD", "NOTOWNER", "NOTLEASE", "BUSY", "LIMIT",
		"UNAVAILABLE", "STANDBY", "NOCONN",
	};
	size_t	i;

	ck_assert_uint_eq(nitems(names), PERR__COUNT - 1);
	for (i = 0; i < nitems(names); i++) {
		ck_assert_str_eq(proto_err_name((enum proto_err)(i + 1)),
		    names[i]);
		ck_assert_int_eq(proto_err_lookup(names[i], strlen(names[i])),
		    (int)(i + 1));
	}
	ck_assert_int_eq(PERR_PROTO, 1);
	ck_assert_int_eq(PERR_NOCONN, PERR__COUNT - 1);
	ck_assert_ptr_null(proto_err_name(PERR_NONE));
	ck_assert_ptr_null(proto_err_name(PERR__COUNT));
	ck_assert_ptr_null(proto_err_name((enum proto_err)-1));

	ck_assert_int_eq(proto_err_lookup("proto", 5), PERR_NONE);
	ck_assert_int_eq(proto_err_lookup("PROT", 4), PERR_NONE);
	ck_assert_int_eq(proto_err_lookup("PROTOX", 6), PERR_NONE);
	ck_assert_int_eq(proto_err_lookup("", 0), PERR_NONE);
	ck_assert_int_eq(proto_err_lookup("PROTOCOL", 5), PERR_PROTO);
	ck_assert_int_eq(proto_err_lookup("NOTHELDX", 7), PERR_NOTHELD);
}
END_TEST

/* --- replies --- */

START_TEST(test_reply_ok)
{
	struct proto_reply	r;
	const char		*line;

	ck_assert_int_eq(proto_parse_reply("OK", 2, &r), PROTO_REPLY_OK);
	ck_assert_int_eq(r.kind, PROTO_REPLY_OK);
	ck_assert_uint_eq(r.rest.len, 0);
	ck_assert_int_eq(r.code, PERR_NONE);

	ck_assert_int_eq(proto_parse_reply("OK\r", 3, &r), PROTO_REPLY_OK);
	ck_assert_uint_eq(r.rest.len, 0);

	line = "OK 42";
	ck_assert_int_eq(proto_parse_reply(line, 5, &r), PROTO_REPLY_OK);
	ck_word(r.rest, "42");
	ck_assert_ptr_eq(r.rest.p, line + 3);

	ck_assert_int_eq(proto_parse_reply("OK 3\r", 5, &r), PROTO_REPLY_OK);
	ck_word(r.rest, "3");

	/* inner blanks kept, outer ones dropped */
	line = "OK \t name=a  used=1 \t \r";
	ck_assert_int_eq(proto_parse_reply(line, strlen(line), &r),
	    PROTO_REPLY_OK);
	ck_word(r.rest, "name=a  used=1");

	ck_assert_int_eq(proto_parse_reply("OK PONG", 7, &r), PROTO_REPLY_OK);
	ck_word(r.rest, "PONG");
}
END_TEST

START_TEST(test_reply_timeout)
{
	struct proto_reply	r;

	ck_assert_int_eq(proto_parse_reply("TIMEOUT", 7, &r),
	    PROTO_REPLY_TIMEOUT);
	ck_assert_int_eq(r.kind, PROTO_REPLY_TIMEOUT);
	ck_assert_uint_eq(r.rest.len, 0);
	ck_assert_int_eq(proto_parse_reply("TIMEOUT\r", 8, &r),
	    PROTO_REPLY_TIMEOUT);
	/* later versions may add words, as on OK */
	ck_assert_int_eq(proto_parse_reply("TIMEOUT waited_ms=5", 19, &r),
	    PROTO_REPLY_TIMEOUT);
	ck_word(r.rest, "waited_ms=5");
}
END_TEST

START_TEST(test_reply_err)
{
	struct proto_reply	r;
	const char		*line;

	line = "ERR NOSEM no semaphore 'x'\r";
	ck_assert_int_eq(proto_parse_reply(line, strlen(line), &r),
	    PROTO_REPLY_ERR);
	ck_assert_int_eq(r.kind, PROTO_REPLY_ERR);
	ck_assert_int_eq(r.code, PERR_NOSEM);
	ck_word(r.code_word, "NOSEM");
	ck_word(r.rest, "no semaphore 'x'");

	ck_assert_int_eq(proto_parse_reply("ERR PROTO", 9, &r),
	    PROTO_REPLY_ERR);
	ck_assert_int_eq(r.code, PERR_PROTO);
	ck_assert_uint_eq(r.rest.len, 0);

	/* an unknown code is still an error, code word kept */
	line = "ERR FUTURE something  new";
	ck_assert_int_eq(proto_parse_reply(line, strlen(line), &r),
	    PROTO_REPLY_ERR);
	ck_assert_int_eq(r.code, PERR_NONE);
	ck_word(r.code_word, "FUTURE");
	ck_word(r.rest, "something  new");

	ck_assert_int_eq(proto_parse_reply("ERR proto x", 11, &r),
	    PROTO_REPLY_ERR);
	ck_assert_int_eq(r.code, PERR_NONE);
	ck_word(r.code_word, "proto");
}
END_TEST

START_TEST(test_reply_roundtrip)
{
	struct proto_error	e;
	struct proto_reply	r;
	char			buf[256];
	int			code, n;

	for (code = PERR_PROTO; code < PERR__COUNT; code++) {
		proto_set_error(&e, (enum proto_err)code, "text %d here", code);
		/* As the daemon's conn_reply_err() writes it. */
		n = snprintf(buf, sizeof(buf), "ERR %s %s",
		    proto_err_name((enum proto_err)code), e.msg);
		ck_assert_int_eq(proto_parse_reply(buf, (size_t)n, &r),
		    PROTO_REPLY_ERR);
		ck_assert_int_eq(r.code, code);
		ck_assert_str_eq(proto_err_name(r.code), proto_err_name(code));
		ck_assert_mem_eq(r.rest.p, e.msg, r.rest.len);
		ck_assert_uint_eq(r.rest.len, strlen(e.msg));
	}
}
END_TEST

START_TEST(test_reply_bad)
{
	static const char *bad[] = {
		"", " ", "\r", "ok", "Ok 1", "OKAY", "OK\r\r", "+OK", "PONG",
		"ERR", "ERR\r", "ERR  ", "err PROTO x", "TIMEOUTS", "timeout",
		"-ERR PROTO x", "OK\v1",
	};
	struct proto_reply	r;
	size_t			i;

	for (i = 0; i < nitems(bad); i++) {
		r.kind = PROTO_REPLY_OK;
		ck_assert_msg(proto_parse_reply(bad[i], strlen(bad[i]), &r) ==
		    PROTO_REPLY_BAD, "\"%s\" taken for a reply", bad[i]);
		ck_assert_int_eq(r.kind, PROTO_REPLY_BAD);
	}
	ck_assert_int_eq(proto_parse_reply("OK\0", 3, &r), PROTO_REPLY_BAD);
	ck_assert_int_eq(proto_parse_reply("\xffOK", 3, &r), PROTO_REPLY_BAD);
}
END_TEST

START_TEST(test_find_kv)
{
	const char		*s = "name=jobs capacity=5\tused=0 kind=conn "
	    "ttl_ms=- x= a=b=c used=9";
	size_t			 len = strlen(s);
	struct proto_word	 v;

	ck_assert_int_eq(proto_find_kv(s, len, "name", &v), 1);
	ck_word(v, "jobs");
	ck_assert_ptr_eq(v.p, s + 5);
	ck_assert_int_eq(proto_find_kv(s, len, "capacity", &v), 1);
	ck_word(v, "5");
	ck_assert_int_eq(proto_find_kv(s, len, "used", &v), 1);
	ck_word(v, "0");	/* the first one wins */
	ck_assert_int_eq(proto_find_kv(s, len, "ttl_ms", &v), 1);
	ck_word(v, "-");
	ck_assert_int_eq(proto_find_kv(s, len, "x", &v), 1);
	ck_assert_uint_eq(v.len, 0);
	ck_assert_int_eq(proto_find_kv(s, len, "a", &v), 1);
	ck_word(v, "b=c");

	/* whole keys only, case-sensitive */
	ck_assert_int_eq(proto_find_kv(s, len, "cap", &v), 0);
	ck_assert_int_eq(proto_find_kv(s, len, "apacity", &v), 0);
	ck_assert_int_eq(proto_find_kv(s, len, "Name", &v), 0);
	ck_assert_int_eq(proto_find_kv(s, len, "holders", &v), 0);
	ck_assert_int_eq(proto_find_kv(s, len, "jobs", &v), 0);
	/* only s[0..len) is searched */
	ck_assert_int_eq(proto_find_kv(s, 9, "name", &v), 1);
	ck_word(v, "jobs");
	ck_assert_int_eq(proto_find_kv(s, 8, "name", &v), 1);
	ck_word(v, "job");
	ck_assert_int_eq(proto_find_kv(s, 9, "capacity", &v), 0);
	ck_assert_int_eq(proto_find_kv("", 0, "name", &v), 0);
	ck_assert_int_eq(proto_find_kv("name", 4, "name", &v), 0);
}
END_TEST

START_TEST(test_find_kv_in_reply)
{
	const char		*line = "OK name=s capacity=3 used=1 "
	    "available=2 holders=1 waiters=0 future=yes\r";
	struct proto_reply	 r;
	struct proto_word	 v;
	uint64_t		 n;

	ck_assert_int_eq(proto_parse_reply(line, strlen(line), &r),
	    PROTO_REPLY_OK);
	ck_assert_int_eq(proto_find_kv(r.rest.p, r.rest.len, "available",
	    &v), 1);
	ck_assert_int_eq(proto_parse_u64(v.p, v.len, UINT64_MAX, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(proto_find_kv(r.rest.p, r.rest.len, "future", &v),
	    1);
	ck_word(v, "yes");	/* the \r was dropped */
}
END_TEST

static Suite *
proto_suite(void)
{
	Suite	*s = suite_create("proto");
	TCase	*tc;

	tc = tcase_create("words");
	tcase_add_test(tc, test_next_word);
	suite_add_tcase(s, tc);

	tc = tcase_create("verbs");
	tcase_add_test(tc, test_verb_table_complete);
	tcase_add_loop_test(tc, test_verb_any_case, 0, nitems(verb_lines));
	tcase_add_test(tc, test_verb_names);
	tcase_add_test(tc, test_unknown_verb);
	tcase_add_test(tc, test_noarg_verbs);
	tcase_add_test(tc, test_auth);
	tcase_add_test(tc, test_create);
	tcase_add_test(tc, test_resize);
	tcase_add_test(tc, test_sem_only_verbs);
	tcase_add_test(tc, test_token_verbs);
	tcase_add_test(tc, test_refresh);
	tcase_add_test(tc, test_name_verb);
	tcase_add_loop_test(tc, test_label_byte, 0, 256);
	tcase_add_test(tc, test_kill);
	tcase_add_test(tc, test_watch);
	suite_add_tcase(s, tc);

	tc = tcase_create("acquire");
	tcase_add_test(tc, test_acquire_forms);
	tcase_add_test(tc, test_acquire_edges);
	tcase_add_test(tc, test_acquire_errors);
	tcase_add_test(tc, test_try);
	tcase_add_test(tc, test_acquire_id);
	tcase_add_test(tc, test_acquireall_forms);
	tcase_add_test(tc, test_acquireall_limits);
	tcase_add_test(tc, test_acquireall_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("values");
	tcase_add_test(tc, test_parse_u64);
	tcase_add_test(tc, test_numbers_in_requests);
	tcase_add_test(tc, test_names);
	tcase_add_loop_test(tc, test_name_byte, 0, 256);
	tcase_add_test(tc, test_name_blank);
	suite_add_tcase(s, tc);

	tc = tcase_create("bytes");
	tcase_add_test(tc, test_blank_lines);
	tcase_add_test(tc, test_blanks_between_words);
	tcase_add_test(tc, test_carriage_return);
	tcase_add_test(tc, test_nul_and_ff);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_add_test(tc, test_error_text_is_safe);
	tcase_add_test(tc, test_set_error);
	tcase_add_test(tc, test_err_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("replies");
	tcase_add_test(tc, test_reply_ok);
	tcase_add_test(tc, test_reply_timeout);
	tcase_add_test(tc, test_reply_err);
	tcase_add_test(tc, test_reply_roundtrip);
	tcase_add_test(tc, test_reply_bad);
	tcase_add_test(tc, test_find_kv);
	tcase_add_test(tc, test_find_kv_in_reply);
	tcase_add_test(tc, test_split_words);
	tcase_add_test(tc, test_durations);
	tcase_add_test(tc, test_sizes);
	suite_add_tcase(s, tc);

	return (s);
}

int
main(void)
{
	SRunner	*sr = srunner_create(proto_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
