/*
 * test_redis_addr.c: unit tests of the redis directive's grammar
 * (daemon/redis-addr.c): one table of accepted addresses with what they
 * parse to, one of refused ones, each refusal a one-line message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "redis-addr.h"

#define nitems(a)	(sizeof(a) / sizeof((a)[0]))

/* An accepted address: kind, then "host:port" words joined by ' ' (for
 * sentinels, each node, then "/NAME"), or the unix path. */
static const struct {
	const char		*in;
	enum redis_addr_kind	 kind;
	const char		*want;
} good[] = {
	{ "127.0.0.1:6379", REDIS_ADDR_TCP, "127.0.0.1:6379" },
	{ "localhost:1", REDIS_ADDR_TCP, "localhost:1" },
	{ "redis.example.org:65535", REDIS_ADDR_TCP,
	    "redis.example.org:65535" },
	{ "[::1]:6380", REDIS_ADDR_TCP, "[::1]:6380" },
	{ "::1:6380", REDIS_ADDR_TCP, "[::1]:6380" },	/* as before 1.1 */
	{ "unix:/run/redis.sock", REDIS_ADDR_UNIX, "/run/redis.sock" },
	{ "unix:rel/path", REDIS_ADDR_UNIX, "rel/path" },
	{ "sentinel://127.0.0.1/mymaster", REDIS_ADDR_SENTINEL,
	    "127.0.0.1:26379 /mymaster" },
	{ "sentinel://a:1,b,c:3/m", REDIS_ADDR_SENTINEL,
	    "a:1 b:26379 c:3 /m" },
	{ "sentinel://[::1],[fe80::2]:5000/x.y-z_0:1", REDIS_ADDR_SENTINEL,
	    "[::1]:26379 [fe80::2]:5000 /x.y-z_0:1" },
	{ "sentinel://h1,h2,h3,h4,h5,h6,h7,h8,h9,h10,h11,h12,h13,h14,h15,"
	    "h16/m", REDIS_ADDR_SENTINEL, "h1:26379 h2:26379 h3:26379 "
	    "h4:26379 h5:26379 h6:26379 h7:26379 h8:26379 h9:26379 "
	    "h10:26379 h11:26379 h12:26379 h13:26379 h14:26379 h15:26379 "
	    "h16:26379 /m" },
};

static const struct {
	const char	*in;
	const char	*says;	/* a piece of the message */
} bad[] = {
	{ "", "HOST:PORT" },
	{ "localhost", "HOST:PORT" },
	{ "localhost:", "HOST:PORT" },
	{ ":6379", "HOST:PORT" },
	{ "host:0", "HOST:PORT" },
	{ "host:65536", "HOST:PORT" },
	{ "host:12x", "HOST:PORT" },
	{ "host:-1", "HOST:PORT" },
	{ "[::1]", "HOST:PORT" },
	{ "[]:1", "HOST:PORT" },
	{ "[::1]x:1", "HOST:PORT" },
	{ "a/b:1", "HOST:PORT" },
	{ "unix:", "needs a path" },
	{ "sentinel://", "MASTER-NAME" },
	{ "sentinel://host", "MASTER-NAME" },
	{ "sentinel:///m", "MASTER-NAME" },
	{ "sentinel://host/", "master name" },
	{ "sentinel://host/a b", "master name" },
	{ "sentinel://host/a/b", "master name" },
	{ "sentinel://host/xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	    "xxxxxxxxxxxxxxxxxxx", "master name" },
	{ "sentinel://a,,b/m", "not HOST" },
	{ "sentinel://a,/m", "not HOST" },
	{ "sentinel://,a/m", "not HOST" },
	{ "sentinel://a:0/m", "not HOST" },
	{ "sentinel://a:99999/m", "not HOST" },
	{ "sentinel://::1/m", "not HOST" },
	{ "sentinel://[::1/m", "not HOST" },
	{ "sentinel://a@b/m", "not HOST" },
	{ "sentinel://h1,h2,h3,h4,h5,h6,h7,h8,h9,h10,h11,h12,h13,h14,h15,"
	    "h16,h17/m", "at most 16" },
};

/* What *a parsed to, in good[]'s words. */
static void
describe(const struct redis_addr *a, char *buf, size_t len)
{
	char	node[300];
	size_t	i;

	buf[0] = '\0';
	switch (a->kind) {
	case REDIS_ADDR_TCP:
		redis_node_format(a->node.host, a->node.port, buf, len);
		break;
	case REDIS_ADDR_UNIX:
		snprintf(buf, len, "%s", a->path);
		break;
	case REDIS_ADDR_SENTINEL:
		for (i = 0; i < a->nsentinels; i++) {
			redis_node_format(a->sentinels[i].host,
			    a->sentinels[i].port, node, sizeof(node));
			strncat(buf, node, len - strlen(buf) - 1);
			strncat(buf, " ", len - strlen(buf) - 1);
		}
		strncat(buf, "/", len - strlen(buf) - 1);
		strncat(buf, a->master_name, len - strlen(buf) - 1);
		break;
	default:
		snprintf(buf, len, "?");
	}
}

START_TEST(test_good)
{
	struct redis_addr	a;
	char			err[256] = "", got[1024];

	ck_assert_msg(redis_addr_parse(good[_i].in, &a, err, sizeof(err)) ==
	    0, "%s: refused: %s", good[_i].in, err);
	ck_assert_int_eq(a.kind, good[_i].kind);
	describe(&a, got, sizeof(got));
	ck_assert_str_eq(got, good[_i].want);
	redis_addr_free(&a);
	ck_assert_int_eq(a.kind, REDIS_ADDR_NONE);
}
END_TEST

START_TEST(test_bad)
{
	struct redis_addr	a;
	char			err[256] = "";

	ck_assert_msg(redis_addr_parse(bad[_i].in, &a, err, sizeof(err)) ==
	    -1, "%s: accepted", bad[_i].in);
	ck_assert_msg(strstr(err, bad[_i].says) != NULL, "%s: said '%s'",
	    bad[_i].in, err);
	ck_assert_ptr_null(strchr(err, '\n'));
	redis_addr_free(&a);	/* frees what a failure left */
}
END_TEST

/* Every prefix of a good address parses or is refused, never crashes. */
START_TEST(test_prefixes)
{
	struct redis_addr	a;
	char			err[256], buf[512];
	size_t			i, n;

	for (i = 0; i < nitems(good); i++) {
		n = strlen(good[i].in);
		while (n-- > 0) {
			snprintf(buf, sizeof(buf), "%.*s", (int)n, good[i].in);
			(void)redis_addr_parse(buf, &a, err, sizeof(err));
			redis_addr_free(&a);
		}
	}
}
END_TEST

static Suite *
redis_addr_suite(void)
{
	Suite	*s = suite_create("redis-addr");
	TCase	*tc = tcase_create("grammar");

	tcase_add_loop_test(tc, test_good, 0, nitems(good));
	tcase_add_loop_test(tc, test_bad, 0, nitems(bad));
	tcase_add_test(tc, test_prefixes);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr = srunner_create(redis_addr_suite());
	int	 failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
