/*
 * semc_api.c: drives libsemc against a semd (or a scripted fake) that a
 * tests/client/test_*.py script started, and prints one "ok - ..." or
 * "FAIL - ...: details" line per check, which the script passes on.
 *
 *	semc_api api PORT		every call, on semd --semaphore jobs 2
 *	semc_api auth PORT		semd --requirepass secret
 *	semc_api errors PORT FREEPORT	each outcome a real semd gives
 *	semc_api fake PORT		the scripted fake: codes, lost replies
 *	semc_api fakeid PORT		the scripted fake: request ids, the
 *					retry of a leased acquire whose reply
 *					was lost, ACQUIREALL's request line
 *	semc_api ids PORT		request ids and ACQUIREALL on semd
 *					--semaphore a 1 --semaphore b 2
 *	semc_api lostproxy PORT [MS]	a leased ACQUIRE a through a proxy
 *					that loses the first reply (MS: its
 *					failover_timeout_ms)
 *	semc_api keeper PORT		the lease keeper
 *	semc_api reattach PORT kept|lost   holds a bound permit across a
 *					semd restart the script does
 *	semc_api unix PATH		a Unix socket
 *	semc_api who PORT		NAME, CLIENTS, KILL; name= and addr=
 *					in HOLDERS and WAITERS (semd --semaphore
 *					jobs 2)
 *	semc_api watch PORT		semc_watch for each reason it can see
 *					without a restart
 *	semc_api watchone PORT TOKEN REASON  WATCH jobs TOKEN ends for REASON
 *	semc_api keeperwatch PORT	the keeper learns of a revoked lease
 *					through WATCH; prints how fast
 *	semc_api version		the version macros and semc_version()
 *	semc_api opts PORT		struct semc_opts's size, and lease_ms 0
 *					(a bound permit, never an expired one)
 *	semc_api bound PORT		holds a bound permit of jobs and keeps
 *					its bound (semc_bound_keep) as told on
 *					stdin: "keep MS" keeps it MS ms or until
 *					it is lost ("lost T" with T the
 *					CLOCK_MONOTONIC ms), "reconnect", "quit"
 *
 * Host lists and failover (opts.hosts = LIST; "-" for none, so that
 * SEMD_HOSTS is read; failover_timeout_ms = MS, 0 for the default):
 *
 *	semc_api follow LIST MS		two TRY jobs LEASE 60000 succeed
 *	semc_api giveup LIST MS		TRY gives SEMC_ERR_CONNECT
 *	semc_api lostreply LIST		TRY closes (bound): SEMC_ERR_LOST,
 *					once
 *	semc_api badlist LIST		every call: SEMC_ERR_INVAL
 *	semc_api failover LIST		holds a bound permit while the script
 *					kills the owner; "go" on stdin, then
 *					a call re-attaches it; "go" again,
 *					then a TRY with a lease
 *	semc_api keeperfail LIST	a kept lease of 6 s, while the script
 *					kills the owner after "lease N"
 */
#include <sys/wait.h>

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "semc.h"

static int	failed;

static void __attribute__((format(printf, 2, 3)))
check(int good, const char *fmt, ...)
{
	va_list	ap;

	fputs(good ? "ok - " : "FAIL - ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!good)
		failed = 1;
}

/* got must be want; the details say what came instead. */
static int
expect(struct semc *c, enum semc_err got, enum semc_err want, const char *desc)
{
	check(got == want, "%s -> %s%s%s%s%s", desc, semc_errname(want),
	    got == want ? "" : ": got ", got == want ? "" : semc_errname(got),
	    got == want ? "" : ": ", got == want ? "" : semc_errmsg(c));
	return (got == want);
}

static int64_t
now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static struct semc *
handle(const char *port, const char *password, int io_timeout_ms)
{
	struct semc_opts	 opts;
	struct semc		*c;

	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.port = atoi(port);
	opts.password = password;
	opts.io_timeout_ms = io_timeout_ms;
	if ((c = semc_new(&opts)) == NULL) {
		perror("semc_new");
		exit(1);
	}
	return (c);
}

static void
scenario_api(const char *port)
{
	struct semc		*c = handle(port, NULL, 0), *other;
	struct semc_info	 info, *list;
	struct semc_holder	*h;
	struct semc_waiter	*w;
	struct semc_stat	*st;
	struct semc_check	 chk;
	uint64_t		 t1, t2, t3, left;
	size_t			 n, i;
	int			 found;

	expect(c, semc_connect(c), SEMC_OK, "semc_connect");
	check(semc_fd(c) >= 0, "semc_fd is the socket once connected");
	expect(c, semc_ping(c), SEMC_OK, "semc_ping");
	expect(c, semc_create(c, "db", 3), SEMC_OK, "semc_create db 3");
	expect(c, semc_create(c, "db", 3), SEMC_OK,
	    "semc_create db 3 again (same capacity)");
	expect(c, semc_info(c, "db", &info), SEMC_OK, "semc_info db");
	check(strcmp(info.name, "db") == 0 && info.capacity == 3 &&
	    info.used == 0 && info.available == 3 && info.holders == 0 &&
	    info.waiters == 0, "semc_info fields: name=%s capacity=%u used=%llu"
	    " available=%llu", info.name, info.capacity,
	    (unsigned long long)info.used, (unsigned long long)info.available);

	expect(c, semc_acquire(c, "db", 2, SEMC_FOREVER, SEMC_BOUND, &t1),
	    SEMC_OK, "semc_acquire db 2, bound");
	check(semc_bound_count(c) == 1, "the bound permit is remembered "
	    "(count %zu)", semc_bound_count(c));
	expect(c, semc_try(c, "db", 1, 60000, &t2), SEMC_OK,
	    "semc_try db 1 LEASE 60000");
	check(t2 > t1, "tokens increase: %llu > %llu",
	    (unsigned long long)t2, (unsigned long long)t1);
	expect(c, semc_try(c, "db", 1, SEMC_BOUND, &t3), SEMC_TIMEOUT,
	    "semc_try db 1 when full");
	expect(c, semc_acquire(c, "db", 1, 100, SEMC_BOUND, &t3), SEMC_TIMEOUT,
	    "semc_acquire db 1 TIMEOUT 100 when full");

	expect(c, semc_check(c, "db", t1, &chk), SEMC_OK, "semc_check bound");
	check(chk.n == 2 && chk.lease == 0 && chk.ttl_ms == -1,
	    "semc_check bound: n=2 kind=conn ttl=- (got n=%u lease=%d "
	    "ttl=%lld)", chk.n, chk.lease, (long long)chk.ttl_ms);
	expect(c, semc_check(c, "db", t2, &chk), SEMC_OK, "semc_check lease");
	check(chk.n == 1 && chk.lease == 1 && chk.ttl_ms > 0 &&
	    chk.ttl_ms <= 60000, "semc_check lease: n=1 kind=lease "
	    "0 < ttl <= 60000 (got %lld)", (long long)chk.ttl_ms);
	expect(c, semc_refresh(c, "db", t2, 120000, &left), SEMC_OK,
	    "semc_refresh 120000");
	check(left == 120000, "semc_refresh answers the new lease: %llu",
	    (unsigned long long)left);

	expect(c, semc_holders(c, "db", &h, &n), SEMC_OK, "semc_holders");
	check(n == 2 && h[0].token == t1 && h[0].n == 2 && !h[0].lease &&
	    h[0].owner > 0 && h[0].ttl_ms == -1 && h[1].token == t2 &&
	    h[1].lease && h[1].owner == 0 && h[1].ttl_ms > 0,
	    "semc_holders: the bound grant, then the lease (%zu rows)", n);
	free(h);

	/* A waiter from another handle, seen by WAITERS. */
	other = handle(port, NULL, 0);
	expect(c, semc_resize(c, "db", 4), SEMC_OK, "semc_resize db 4");
	expect(other, semc_try(other, "db", 1, SEMC_BOUND, &t3), SEMC_OK,
	    "after resize to 4 a fourth permit is free");
	expect(c, semc_resize(c, "db", 0), SEMC_OK, "semc_resize db 0");
	expect(c, semc_waiters(c, "db", &w, &n), SEMC_OK,
	    "semc_waiters (none)");
	check(n == 0 && w == NULL, "semc_waiters: empty list, NULL array");
	free(w);
	expect(c, semc_revoke(c, "db", t3), SEMC_OK,
	    "semc_revoke another handle's bound permit");
	expect(other, semc_release(other, "db", t3), SEMC_ERR_NOTHELD,
	    "its holder learns it from RELEASE");
	check(semc_bound_count(other) == 0, "NOTHELD on release forgets it");
	semc_free(other);

	expect(c, semc_list(c, &list, &n), SEMC_OK, "semc_list");
	found = 0;
	for (i = 0; i < n; i++)
		found |= strcmp(list[i].name, "db") == 0 &&
		    list[i].capacity == 0 && list[i].used == 3;
	check(n >= 2 && found, "semc_list has db (capacity 0, used 3) and "
	    "jobs: %zu rows", n);
	free(list);

	expect(c, semc_stats(c, &st, &n), SEMC_OK, "semc_stats");
	found = 0;
	for (i = 0; i < n; i++)
		found += (strcmp(st[i].key, "protocol") == 0 &&
		    strcmp(st[i].value, "1.1") == 0) +
		    (strcmp(st[i].key, "grants") == 0 &&
		    strcmp(st[i].value, "2") == 0);
	check(found == 2, "semc_stats: protocol=1.1 and grants=2");
	free(st);

	/* tmo: its one permit held, so a TRY is answered TIMEOUT. */
	expect(c, semc_create(c, "tmo", 1), SEMC_OK, "semc_create tmo 1");
	expect(c, semc_try(c, "tmo", 1, 60000, &t3), SEMC_OK, "semc_try tmo");
	expect(c, semc_try(c, "tmo", 1, 60000, &left), SEMC_TIMEOUT,
	    "semc_try tmo again: TIMEOUT");
	expect(c, semc_info_all(c, "tmo", &st, &n), SEMC_OK, "semc_info_all");
	found = 0;
	for (i = 0; i < n; i++)
		found += (i == 0 && strcmp(st[i].key, "name") == 0 &&
		    strcmp(st[i].value, "tmo") == 0) +
		    (strcmp(st[i].key, "used") == 0 &&
		    strcmp(st[i].value, "1") == 0) +
		    (strcmp(st[i].key, "grants_total") == 0 &&
		    strcmp(st[i].value, "1") == 0) +
		    (strcmp(st[i].key, "timeouts_total") == 0 &&
		    strcmp(st[i].value, "1") == 0) +
		    (strcmp(st[i].key, "wait_p99_ms") == 0);
	check(found == 5 && n == 10, "semc_info_all: name=tmo first, used=1, "
	    "grants_total=1, timeouts_total=1, wait_p99_ms; 10 keys (%zu)", n);
	free(st);
	expect(c, semc_release(c, "tmo", t3), SEMC_OK, "semc_release tmo");
	expect(c, semc_delete(c, "tmo"), SEMC_OK, "semc_delete tmo");
	expect(c, semc_info_all(c, "nope", &st, &n), SEMC_ERR_NOSEM,
	    "semc_info_all of no semaphore");
	check(st == NULL && n == 0, "and nothing is returned");
	expect(c, semc_info_all(c, "bad name", &st, &n), SEMC_ERR_INVAL,
	    "semc_info_all of an invalid name: nothing sent");

	expect(c, semc_delete(c, "db"), SEMC_ERR_BUSY, "semc_delete busy");
	expect(c, semc_release(c, "db", t1), SEMC_OK, "semc_release bound");
	check(semc_bound_count(c) == 0, "a released permit is forgotten");
	expect(c, semc_release(c, "db", t2), SEMC_OK, "semc_release lease");
	expect(c, semc_delete(c, "db"), SEMC_OK, "semc_delete");
	expect(c, semc_info(c, "db", &info), SEMC_ERR_NOSEM,
	    "semc_info after delete");

	/* ATTACH of a permit that no restart left unowned. */
	expect(c, semc_acquire(c, "jobs", 1, 1000, SEMC_BOUND, &t1), SEMC_OK,
	    "semc_acquire jobs, bound");
	expect(c, semc_attach(c, "jobs", t1), SEMC_OK,
	    "semc_attach of our own bound permit is a no-op");
	check(semc_bound_count(c) == 1, "and it is remembered once");
	expect(c, semc_try(c, "jobs", 1, 60000, &t2), SEMC_OK,
	    "semc_try jobs LEASE 60000");
	expect(c, semc_attach(c, "jobs", t2), SEMC_ERR_NOTLEASE,
	    "semc_attach of a lease");
	expect(c, semc_release(c, "jobs", t2), SEMC_OK, "release the lease");
	expect(c, semc_attach(c, "jobs", t1 + 1000), SEMC_ERR_NOTHELD,
	    "semc_attach of a token never granted");

	expect(c, semc_quit(c), SEMC_OK, "semc_quit");
	check(semc_fd(c) == -1 && semc_bound_count(c) == 0,
	    "after QUIT: no socket, no bound permit remembered");
	expect(c, semc_info(c, "jobs", &info), SEMC_OK,
	    "a call after QUIT connects again");
	check(info.used == 0, "QUIT released the bound permit (used=%llu)",
	    (unsigned long long)info.used);
	semc_free(c);
}

static void
scenario_auth(const char *port)
{
	struct semc		*c = handle(port, NULL, 0);
	struct semc_info	 info;

	expect(c, semc_ping(c), SEMC_OK, "PING needs no AUTH");
	expect(c, semc_info(c, "jobs", &info), SEMC_ERR_AUTH,
	    "INFO without AUTH");
	check(strstr(semc_errmsg(c), "(ERR AUTH)") != NULL,
	    "the message carries the server's text and code: %s",
	    semc_errmsg(c));
	expect(c, semc_auth(c, "wrong"), SEMC_ERR_AUTH, "semc_auth wrong");
	expect(c, semc_auth(c, "two words"), SEMC_ERR_INVAL,
	    "semc_auth with a blank is refused before sending");
	expect(c, semc_auth(c, "secret"), SEMC_OK, "semc_auth right");
	expect(c, semc_info(c, "jobs", &info), SEMC_OK, "INFO after AUTH");
	expect(c, semc_quit(c), SEMC_OK, "semc_quit");
	expect(c, semc_info(c, "jobs", &info), SEMC_OK,
	    "the reconnect after QUIT sends AUTH again");
	semc_free(c);

	c = handle(port, "secret", 0);
	expect(c, semc_info(c, "jobs", &info), SEMC_OK,
	    "opts.password is sent on connect");
	semc_free(c);
	c = handle(port, "wrong", 0);
	expect(c, semc_connect(c), SEMC_ERR_AUTH,
	    "semc_connect with a wrong opts.password");
	semc_free(c);
}

static void
scenario_errors(const char *port, const char *freeport)
{
	struct semc	*c = handle(port, NULL, 0), *other, *down;
	uint64_t	 t, t2;
	char		 name[SEMC_NAME_MAX + 2];
	int		 i, j;

	expect(c, semc_create(c, "jobs", 5), SEMC_ERR_EXISTS,
	    "CREATE with another capacity");
	expect(c, semc_acquire(c, "nosuch", 1, 0, SEMC_BOUND, &t),
	    SEMC_ERR_NOSEM, "ACQUIRE of an unknown name");
	expect(c, semc_acquire(c, "jobs", 3, 0, SEMC_BOUND, &t),
	    SEMC_ERR_RANGE, "ACQUIRE n > capacity");
	expect(c, semc_release(c, "jobs", 999999), SEMC_ERR_NOTHELD,
	    "RELEASE of a token never granted");
	expect(c, semc_acquire(c, "jobs", 1, 0, SEMC_BOUND, &t), SEMC_OK,
	    "ACQUIRE bound");
	other = handle(port, NULL, 0);
	expect(other, semc_release(other, "jobs", t), SEMC_ERR_NOTOWNER,
	    "RELEASE of another connection's bound permit");
	expect(c, semc_refresh(c, "jobs", t, 1000, NULL), SEMC_ERR_NOTLEASE,
	    "REFRESH of a bound permit");
	expect(c, semc_delete(c, "jobs"), SEMC_ERR_BUSY, "DELETE with holders");
	expect(c, semc_create(c, "second", 1), SEMC_OK, "CREATE second");
	expect(c, semc_create(c, "third", 1), SEMC_ERR_LIMIT,
	    "CREATE over max-semaphores 2");
	expect(c, semc_acquire(c, "jobs", 2, 50, SEMC_BOUND, &t2),
	    SEMC_TIMEOUT, "ACQUIRE not granted within 50 ms");

	expect(c, semc_acquire(c, "bad name", 1, 0, SEMC_BOUND, &t2),
	    SEMC_ERR_INVAL, "a name with a blank is refused before sending");
	memset(name, 'a', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	expect(c, semc_info(c, name, NULL), SEMC_ERR_INVAL,
	    "a 201-byte name is refused before sending");
	expect(c, semc_acquire(c, "jobs", 0, 0, SEMC_BOUND, &t2),
	    SEMC_ERR_INVAL, "n = 0 is refused before sending");
	expect(c, semc_acquire(c, "jobs", 1, -2, SEMC_BOUND, &t2),
	    SEMC_ERR_INVAL, "a timeout below -1 is refused");
	expect(c, semc_ping(c), SEMC_OK, "the connection is still usable");

	down = handle(freeport, NULL, 0);
	expect(down, semc_ping(down), SEMC_ERR_CONNECT,
	    "a port nobody listens on");
	check(strstr(semc_errmsg(down), "refused") != NULL,
	    "the message says why: %s", semc_errmsg(down));
	semc_free(down);

	/* Every outcome has its own name and message. */
	for (i = 0; i < SEMC__COUNT; i++)
		for (j = 0; j < i; j++)
			if (strcmp(semc_strerror(i), semc_strerror(j)) == 0 ||
			    strcmp(semc_errname(i), semc_errname(j)) == 0)
				check(0, "outcomes %d and %d differ", i, j);
	check(1, "all %d outcomes have distinct names and messages",
	    SEMC__COUNT);
	check(strcmp(semc_strerror(SEMC__COUNT), "unknown error") == 0,
	    "semc_strerror out of range");
	semc_free(other);
	semc_free(c);
}

/*
 * Against the fake server of test_lost.py, which answers INFO eCODE with
 * "ERR CODE text", and misbehaves on the names below.
 */
static void
scenario_fake(const char *port)
{
	static const struct {
		const char	*code;
		enum semc_err	 err;
	} codes[] = {
		{ "PROTO", SEMC_ERR_PROTO }, { "TOOLONG", SEMC_ERR_TOOLONG },
		{ "AUTH", SEMC_ERR_AUTH }, { "NOSEM", SEMC_ERR_NOSEM },
		{ "EXISTS", SEMC_ERR_EXISTS }, { "RANGE", SEMC_ERR_RANGE },
		{ "NOTHELD", SEMC_ERR_NOTHELD },
		{ "NOTOWNER", SEMC_ERR_NOTOWNER },
		{ "NOTLEASE", SEMC_ERR_NOTLEASE }, { "BUSY", SEMC_ERR_BUSY },
		{ "LIMIT", SEMC_ERR_LIMIT },
		{ "UNAVAILABLE", SEMC_ERR_UNAVAILABLE },
		{ "FUTURE", SEMC_ERR_SERVER },
	};
	struct semc		*c = handle(port, NULL, 300);
	struct semc_info	 info;
	struct semc_stat	*st;
	char			 sem[64], desc[128];
	uint64_t		 t;
	size_t			 i, n;

	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		snprintf(sem, sizeof(sem), "e%s", codes[i].code);
		snprintf(desc, sizeof(desc), "ERR %s maps to its own outcome",
		    codes[i].code);
		expect(c, semc_info(c, sem, &info), codes[i].err, desc);
	}
	expect(c, semc_acquire(c, "closes", 1, SEMC_FOREVER, SEMC_BOUND, &t),
	    SEMC_ERR_LOST, "a bound ACQUIRE whose connection closes before "
	    "the reply: permit possibly lost, not 'not granted'");
	expect(c, semc_try(c, "closes", 1, SEMC_BOUND, &t), SEMC_ERR_LOST,
	    "a bound TRY likewise");
	expect(c, semc_acquire(c, "silent", 1, 100, SEMC_BOUND, &t),
	    SEMC_ERR_LOST, "a bound ACQUIRE TIMEOUT 100 with no reply within "
	    "100 ms + the I/O timeout: LOST");
	expect(c, semc_info(c, "closes", &info), SEMC_ERR_NOREPLY,
	    "INFO whose reply is lost: outcome unknown");
	expect(c, semc_info(c, "garbage", &info), SEMC_ERR_BADREPLY,
	    "a reply that is not OK/TIMEOUT/ERR");
	expect(c, semc_info(c, "fields", &info), SEMC_ERR_BADREPLY,
	    "an INFO reply without its fields");
	expect(c, semc_info(c, "extra", &info), SEMC_OK,
	    "unknown key=value pairs and extra words are ignored");
	check(info.capacity == 4 && info.used == 1,
	    "the known fields are read (capacity=%u used=%llu)",
	    info.capacity, (unsigned long long)info.used);
	expect(c, semc_info_all(c, "extra", &st, &n), SEMC_OK,
	    "semc_info_all: every key, known or not");
	check(n == 7 && strcmp(st[6].key, "color") == 0 &&
	    strcmp(st[6].value, "blue") == 0 && strcmp(st[1].key,
	    "capacity") == 0 && strcmp(st[1].value, "4") == 0,
	    "semc_info_all: 7 keys, color=blue last; a word without = is "
	    "skipped (%zu)", n);
	free(st);
	expect(c, semc_info_all(c, "garbage", &st, &n), SEMC_ERR_BADREPLY,
	    "semc_info_all of a reply that is not OK");
	expect(c, semc_info_all(c, "noname", &st, &n), SEMC_ERR_BADREPLY,
	    "semc_info_all of a reply without name=");
	check(st == NULL && n == 0, "and nothing is returned");
	expect(c, semc_info_all(c, "eNOSEM", &st, &n), SEMC_ERR_NOSEM,
	    "semc_info_all: ERR NOSEM");
	expect(c, semc_info_all(c, "closes", &st, &n), SEMC_ERR_NOREPLY,
	    "semc_info_all whose reply is lost: outcome unknown");
	expect(c, semc_ping(c), SEMC_OK, "the handle reconnects afterwards");
	semc_free(c);
}

/* semc_acquire_with's options with an id. */
static struct semc_acquire_opts *
with_id(struct semc_acquire_opts *o, const char *id)
{
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->id = id;
	return (o);
}

static void
scenario_fakeid(const char *port)
{
	struct semc_opts	 opts = SEMC_OPTS_INIT;
	struct semc_acquire_opts o;
	struct semc_want	 w[SEMC_ACQUIRE_ALL_MAX + 1];
	struct semc		*c;
	char			 names[SEMC_ACQUIRE_ALL_MAX + 1][8];
	uint64_t		 t = 0;
	int64_t			 start;
	size_t			 i;

	opts.port = atoi(port);
	opts.io_timeout_ms = 300;
	opts.failover_timeout_ms = 1000;
	if ((c = semc_new(&opts)) == NULL)
		exit(1);
	expect(c, semc_acquire(c, "lostonce", 2, 5000, 60000, &t), SEMC_OK,
	    "a leased ACQUIRE whose reply was lost is sent again with its "
	    "id, and its token learnt");
	check(t == 42, "the token of the repeat (%llu)",
	    (unsigned long long)t);
	expect(c, semc_try(c, "lostonce", 1, 60000, &t), SEMC_OK,
	    "a leased TRY likewise");
	start = now_ms();
	expect(c, semc_acquire(c, "closes", 1, SEMC_FOREVER, 60000, &t),
	    SEMC_ERR_NOREPLY, "a leased ACQUIRE never answered: NOREPLY "
	    "once the retries end, not LOST");
	check(now_ms() - start >= 1000 && now_ms() - start < 8000,
	    "the retries last failover_timeout_ms (%lld ms)",
	    (long long)(now_ms() - start));
	check(strstr(semc_errmsg(c), " ID ") != NULL,
	    "the message names the id: %s", semc_errmsg(c));
	expect(c, semc_acquire_with(c, "lostonce", 1, 400, 60000,
	    with_id(&o, "job-7.run:1"), &t), SEMC_OK,
	    "semc_acquire_with: the caller's id");
	expect(c, semc_acquire_with(c, "any", 1, 100, SEMC_BOUND,
	    with_id(&o, "x"), &t), SEMC_ERR_INVAL, "an id without a lease");
	expect(c, semc_acquire_with(c, "any", 1, 100, 60000,
	    with_id(&o, "a b"), &t), SEMC_ERR_INVAL, "an id with a blank");
	expect(c, semc_acquire_with(c, "any", 1, 100, 60000,
	    with_id(&o, "0123456789012345678901234567890123456789"
	    "0123456789012345678901234"), &t), SEMC_ERR_INVAL,
	    "an id of 65 bytes");
	memset(&o, 0, sizeof(o));
	expect(c, semc_acquire_with(c, "any", 1, 100, 60000, &o, &t),
	    SEMC_ERR_INVAL, "struct semc_acquire_opts without its size");

	w[0].sem = "ma";
	w[0].n = 2;
	w[1].sem = "mb";
	w[1].n = 1;
	expect(c, semc_acquire_all(c, w, 2, 500, 60000, NULL, &t), SEMC_OK,
	    "semc_acquire_all sends ACQUIREALL");
	check(t == 9, "its token (%llu)", (unsigned long long)t);
	expect(c, semc_acquire_all(c, w, 2, SEMC_FOREVER, SEMC_BOUND, NULL,
	    &t), SEMC_OK, "a bound ACQUIREALL, no TIMEOUT");
	check(semc_bound_count(c) == 1, "a bound grant is one permit to "
	    "re-attach (%zu)", semc_bound_count(c));
	expect(c, semc_release(c, "mb", t), SEMC_OK, "released through its "
	    "second semaphore");
	check(semc_bound_count(c) == 0, "and forgotten (%zu)",
	    semc_bound_count(c));
	expect(c, semc_acquire_all(c, w, 1, 500, 60000, NULL, &t),
	    SEMC_ERR_INVAL, "one semaphore is not ACQUIREALL");
	w[1].sem = "ma";
	expect(c, semc_acquire_all(c, w, 2, 500, 60000, NULL, &t),
	    SEMC_ERR_INVAL, "a semaphore named twice");
	for (i = 0; i <= SEMC_ACQUIRE_ALL_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "m%zu", i);
		w[i].sem = names[i];
		w[i].n = 1;
	}
	expect(c, semc_acquire_all(c, w, SEMC_ACQUIRE_ALL_MAX + 1, 500, 60000,
	    NULL, &t), SEMC_ERR_INVAL, "17 semaphores");
	w[3].n = 0;
	expect(c, semc_acquire_all(c, w, 4, 500, 60000, NULL, &t),
	    SEMC_ERR_INVAL, "n 0");
	w[3].n = 1;
	w[3].sem = "bad name";
	expect(c, semc_acquire_all(c, w, 4, 500, 60000, NULL, &t),
	    SEMC_ERR_INVAL, "a name with a blank");
	/* Last: what is learnt here lasts as long as the connection. */
	expect(c, semc_acquire_with(c, "noid", 1, 100, 60000, NULL, &t),
	    SEMC_OK, "a semd that refuses ID (1.0): the drawn id is left out");
	check(t == 7, "and the token comes (%llu)", (unsigned long long)t);
	expect(c, semc_acquire_with(c, "noid", 1, 100, 60000, NULL, &t),
	    SEMC_OK, "the next acquire on that connection goes without one");
	expect(c, semc_acquire_with(c, "noid", 1, 100, 60000,
	    with_id(&o, "mine"), &t), SEMC_ERR_PROTO,
	    "the caller's own id is never left out: ERR PROTO");
	expect(c, semc_acquire(c, "closes", 1, SEMC_FOREVER, SEMC_BOUND, &t),
	    SEMC_ERR_LOST, "a bound ACQUIRE whose reply is lost: LOST, as "
	    "before");
	semc_free(c);
}

/*
 * Against semd --semaphore a 1 --semaphore b 2: ACQUIREALL takes both or
 * neither; a repeated id answers the lease's token.
 */
static void
scenario_ids(const char *port)
{
	struct semc		*c = handle(port, NULL, 5000);
	struct semc		*c2 = handle(port, NULL, 5000);
	struct semc_acquire_opts o;
	struct semc_want	 ab[2] = { { "a", 1 }, { "b", 2 } };
	struct semc_want	 ab1[2] = { { "b", 1 }, { "a", 1 } };
	struct semc_info	 ia, ib;
	struct semc_holder	*h;
	struct semc_check	 chk;
	uint64_t		 t, t2, tb;
	size_t			 n;

	if (!expect(c, semc_acquire_all(c, ab, 2, 1000, 60000, NULL, &t),
	    SEMC_OK, "ACQUIREALL a 1 b 2, a lease"))
		goto out;
	expect(c, semc_info(c, "a", &ia), SEMC_OK, "INFO a");
	expect(c, semc_info(c, "b", &ib), SEMC_OK, "INFO b");
	check(ia.used == 1 && ib.used == 2, "both held (a used %llu, b used "
	    "%llu)", (unsigned long long)ia.used, (unsigned long long)ib.used);
	expect(c, semc_check(c, "b", t, &chk), SEMC_OK, "CHECK through b");
	check(chk.n == 2 && chk.lease, "CHECK shows b's n (%u)", chk.n);
	expect(c, semc_release(c, "b", t), SEMC_OK, "RELEASE through b");
	expect(c, semc_info(c, "a", &ia), SEMC_OK, "INFO a");
	check(ia.used == 0, "releases the whole grant (a used %llu)",
	    (unsigned long long)ia.used);

	/* Both or neither: b held by another, so a is not taken either. */
	expect(c2, semc_acquire(c2, "b", 2, 1000, SEMC_BOUND, &tb), SEMC_OK,
	    "another handle holds b 2");
	expect(c, semc_acquire_all(c, ab1, 2, 0, 60000, NULL, &t),
	    SEMC_TIMEOUT, "ACQUIREALL b 1 a 1 TIMEOUT 0: not granted");
	expect(c, semc_info(c, "a", &ia), SEMC_OK, "INFO a");
	check(ia.used == 0 && ia.waiters == 0, "nothing of a held or waited "
	    "for (used %llu, waiters %llu)", (unsigned long long)ia.used,
	    (unsigned long long)ia.waiters);
	expect(c2, semc_release(c2, "b", tb), SEMC_OK, "b released");
	expect(c, semc_acquire_all(c, ab1, 2, 1000, SEMC_BOUND, NULL, &t),
	    SEMC_OK, "a bound ACQUIREALL");
	check(semc_bound_count(c) == 1, "remembered once (%zu)",
	    semc_bound_count(c));
	expect(c, semc_release(c, "a", t), SEMC_OK, "released");

	/* The same id again: the same token, one grant. */
	expect(c, semc_acquire_with(c, "b", 1, 1000, 60000,
	    with_id(&o, "job-42"), &t), SEMC_OK, "ACQUIRE b 1 LEASE ID job-42");
	expect(c2, semc_acquire_with(c2, "b", 1, 1000, 60000,
	    with_id(&o, "job-42"), &t2), SEMC_OK, "the same id, another "
	    "connection");
	check(t == t2, "the same token (%llu, %llu)", (unsigned long long)t,
	    (unsigned long long)t2);
	if (expect(c, semc_holders(c, "b", &h, &n), SEMC_OK, "HOLDERS b")) {
		check(n == 1 && h[0].token == t && h[0].n == 1, "one grant "
		    "(%zu)", n);
		free(h);
	}
	expect(c2, semc_acquire_with(c2, "b", 2, 1000, 60000,
	    with_id(&o, "job-42"), &t2), SEMC_ERR_EXISTS, "the same id with "
	    "another n: ERR EXISTS");
	expect(c, semc_release(c, "b", t), SEMC_OK, "released");
	expect(c, semc_acquire_all(c, ab, 2, 1000, 60000,
	    with_id(&o, "pair-1"), &t), SEMC_OK, "ACQUIREALL with an id");
	ab1[0].n = 2;
	expect(c2, semc_acquire_all(c2, ab1, 2, 1000, 60000,
	    with_id(&o, "pair-1"), &t2), SEMC_OK, "repeated, in another "
	    "order");
	check(t == t2, "the same token (%llu, %llu)", (unsigned long long)t,
	    (unsigned long long)t2);
	ab1[0].n = 1;
	expect(c2, semc_acquire_all(c2, ab1, 2, 1000, 60000,
	    with_id(&o, "pair-1"), &t2), SEMC_ERR_EXISTS, "with another n: "
	    "ERR EXISTS");
	expect(c, semc_release(c, "a", t), SEMC_OK, "released");
out:
	semc_free(c);
	semc_free(c2);
}

/*
 * A leased ACQUIRE of a 1 through a proxy that loses its first reply:
 * prints the token; the script checks semd granted one.
 */
static void
scenario_lostproxy(const char *port, const char *failover_ms)
{
	struct semc_opts	 opts = SEMC_OPTS_INIT;
	struct semc		*c;
	uint64_t		 t;
	int64_t			 start = now_ms();

	opts.port = atoi(port);
	opts.io_timeout_ms = 5000;
	opts.failover_timeout_ms = failover_ms != NULL ? atoi(failover_ms) : 0;
	if ((c = semc_new(&opts)) == NULL)
		exit(1);
	if (expect(c, semc_acquire(c, "a", 1, 5000, 60000, &t), SEMC_OK,
	    "a leased ACQUIRE whose reply the proxy lost: the token"))
		printf("token %llu\ntook_ms %lld\n", (unsigned long long)t,
		    (long long)(now_ms() - start));
	semc_free(c);
}

struct lost_seen {
	pthread_mutex_t	lock;
	int		calls;
	enum semc_err	why;
	uint64_t	token;
};

static void
keeper_lost(void *arg, const char *sem, uint64_t token, enum semc_err why,
    const char *msg)
{
	struct lost_seen	*seen = arg;

	(void)sem;
	(void)msg;
	pthread_mutex_lock(&seen->lock);
	seen->calls++;
	seen->why = why;
	seen->token = token;
	pthread_mutex_unlock(&seen->lock);
}

static void
scenario_keeper(const char *port)
{
	struct semc		*c = handle(port, NULL, 0);
	struct semc_opts	 opts;
	struct semc_keeper	*k;
	struct semc_check	 chk;
	struct lost_seen	 seen;
	struct pollfd		 pfd;
	uint64_t		 t;

	memset(&seen, 0, sizeof(seen));
	pthread_mutex_init(&seen.lock, NULL);
	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.port = atoi(port);
	k = semc_keeper_new(&opts, keeper_lost, &seen);
	check(k != NULL, "semc_keeper_new");
	expect(c, semc_acquire(c, "jobs", 1, 1000, 600, &t), SEMC_OK,
	    "ACQUIRE jobs LEASE 600");
	expect(c, semc_keeper_add(k, "jobs", t, 600), SEMC_OK,
	    "semc_keeper_add");
	expect(c, semc_keeper_add(k, "jobs", t, 600), SEMC_ERR_INVAL,
	    "semc_keeper_add twice");
	sleep(2);	/* over three lease lengths */
	expect(c, semc_check(c, "jobs", t, &chk), SEMC_OK,
	    "the lease is still held after 2 s, three times its length");
	check(!semc_keeper_lost(k, "jobs", t), "semc_keeper_lost: kept");

	pfd.fd = semc_keeper_fd(k);
	pfd.events = POLLIN;
	check(poll(&pfd, 1, 0) == 0, "the keeper's fd is not readable yet");
	expect(c, semc_revoke(c, "jobs", t), SEMC_OK, "REVOKE the lease");
	check(poll(&pfd, 1, 10000) == 1, "the keeper's fd becomes readable "
	    "after its next refresh fails");
	check(semc_keeper_lost(k, "jobs", t), "semc_keeper_lost: lost");
	pthread_mutex_lock(&seen.lock);
	check(seen.calls == 1 && seen.why == SEMC_ERR_NOTHELD &&
	    seen.token == t, "the callback was called once, with NOTHELD "
	    "(calls %d, why %s)", seen.calls, semc_errname(seen.why));
	pthread_mutex_unlock(&seen.lock);
	expect(c, semc_keeper_remove(k, "jobs", t), SEMC_OK,
	    "semc_keeper_remove");
	expect(c, semc_keeper_remove(k, "jobs", t), SEMC_ERR_INVAL,
	    "semc_keeper_remove of an unknown lease");
	check(semc_keeper_lost(k, "jobs", t), "an unknown lease counts as lost");

	/* Removed before it runs out: the keeper lets it go. */
	expect(c, semc_acquire(c, "jobs", 1, 1000, 300, &t), SEMC_OK,
	    "ACQUIRE jobs LEASE 300");
	expect(c, semc_keeper_add(k, "jobs", t, 300), SEMC_OK, "watch it");
	expect(c, semc_keeper_remove(k, "jobs", t), SEMC_OK, "unwatch it");
	sleep(1);
	expect(c, semc_check(c, "jobs", t, NULL), SEMC_ERR_NOTHELD,
	    "an unwatched lease runs out");
	semc_keeper_free(k);
	pthread_mutex_destroy(&seen.lock);
	semc_free(c);
}

struct reported {
	int		calls;
	uint64_t	token;
};

static void
lost_cb(void *arg, const struct semc_permit *p, enum semc_err why)
{
	struct reported	*r = arg;

	r->calls++;
	r->token = p->token;
	printf("# lost callback: %s %llu: %s\n", p->sem,
	    (unsigned long long)p->token, semc_errname(why));
}

/*
 * Hold a bound permit, tell the script ("token N"), wait for it to
 * restart semd ("go" on stdin), then make a call: the handle reconnects
 * and ATTACHes the permit again (kept) or reports it lost (lost).
 */
static void
scenario_reattach(const char *port, const char *want)
{
	struct semc		*c = handle(port, NULL, 0);
	struct semc_permit	 p;
	struct semc_check	 chk;
	struct reported		 r = { 0, 0 };
	char			 line[64];
	uint64_t		 t;
	int			 kept = strcmp(want, "kept") == 0;

	semc_set_lost_cb(c, lost_cb, &r);
	if (!expect(c, semc_acquire(c, "jobs", 1, 5000, SEMC_BOUND, &t),
	    SEMC_OK, "ACQUIRE jobs, bound"))
		return;
	printf("token %llu\n", (unsigned long long)t);
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL)
		return;
	expect(c, semc_ping(c), SEMC_OK, "the first call after the restart "
	    "reconnects");
	if (kept) {
		check(r.calls == 0 && !semc_next_lost(c, &p),
		    "nothing reported lost");
		check(semc_bound_count(c) == 1, "the permit is still ours");
		expect(c, semc_check(c, "jobs", t, &chk), SEMC_OK,
		    "CHECK: the grant survived the restart");
		expect(c, semc_release(c, "jobs", t), SEMC_OK,
		    "RELEASE from the new connection: it owns the permit");
	} else {
		check(r.calls == 1 && r.token == t, "the lost callback told "
		    "us of the permit (%d calls)", r.calls);
		check(semc_next_lost(c, &p) && p.token == t &&
		    strcmp(p.sem, "jobs") == 0 && p.n == 1,
		    "semc_next_lost gives it: jobs, token, n=1");
		check(!semc_next_lost(c, &p), "and only it");
		check(semc_bound_count(c) == 0, "it is no longer counted");
	}
	semc_free(c);
}

static void
scenario_unix(const char *path)
{
	struct semc_opts	 opts;
	struct semc		*c;
	uint64_t		 t;

	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.unix_path = path;
	c = semc_new(&opts);
	expect(c, semc_ping(c), SEMC_OK, "PING over the Unix socket");
	expect(c, semc_acquire(c, "jobs", 1, 1000, SEMC_BOUND, &t), SEMC_OK,
	    "ACQUIRE over the Unix socket");
	expect(c, semc_release(c, "jobs", t), SEMC_OK, "RELEASE over it");
	semc_free(c);
	opts.unix_path = "/nonexistent/semd.sock";
	c = semc_new(&opts);
	expect(c, semc_ping(c), SEMC_ERR_CONNECT, "a missing Unix socket");
	semc_free(c);
}

static struct semc *
handle_list(const char *hosts, const char *failover_ms)
{
	struct semc_opts	 opts;
	struct semc		*c;

	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	if (strcmp(hosts, "-") != 0)
		opts.hosts = hosts;
	opts.failover_timeout_ms = atoi(failover_ms);
	opts.io_timeout_ms = 5000;
	if ((c = semc_new(&opts)) == NULL) {
		perror("semc_new");
		exit(1);
	}
	return (c);
}

static void
scenario_follow(const char *hosts, const char *failover_ms)
{
	struct semc	*c = handle_list(hosts, failover_ms);
	uint64_t	 t;

	if (expect(c, semc_try(c, "jobs", 1, 60000, &t), SEMC_OK,
	    "TRY jobs LEASE 60000 reaches the owner"))
		printf("# token %llu\n", (unsigned long long)t);
	expect(c, semc_try(c, "jobs", 1, 60000, &t), SEMC_OK,
	    "a second TRY on the same handle");
	semc_free(c);
}

static void
scenario_giveup(const char *hosts, const char *failover_ms)
{
	struct semc	*c = handle_list(hosts, failover_ms);
	uint64_t	 t;
	int64_t		 start_ms, took_ms;
	struct timespec	 ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	start_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	expect(c, semc_try(c, "jobs", 1, 60000, &t), SEMC_ERR_CONNECT,
	    "no owner anywhere: the call gives up");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	took_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - start_ms;
	check(strstr(semc_errmsg(c), "no owner") != NULL,
	    "the message says so: %s", semc_errmsg(c));
	check(atoi(failover_ms) < 0 || took_ms >= atoi(failover_ms),
	    "it searched for the whole failover time (%lld ms)",
	    (long long)took_ms);
	printf("took_ms %lld\n", (long long)took_ms);
	semc_free(c);
}

static void
scenario_lostreply(const char *hosts)
{
	struct semc	*c = handle_list(hosts, "0");
	uint64_t	 t;

	expect(c, semc_try(c, "closes", 1, SEMC_BOUND, &t), SEMC_ERR_LOST,
	    "a bound TRY whose reply was lost is LOST, not sent elsewhere");
	semc_free(c);
}

static void
scenario_badlist(const char *hosts)
{
	struct semc	*c = handle_list(hosts, "0");
	uint64_t	 t;

	expect(c, semc_ping(c), SEMC_ERR_INVAL, "PING with a bad host list");
	check(strstr(semc_errmsg(c), "host list") != NULL,
	    "the message says what is wrong: %s", semc_errmsg(c));
	expect(c, semc_try(c, "jobs", 1, 1000, &t), SEMC_ERR_INVAL,
	    "and every call after it");
	semc_free(c);
}

/* Wait for a line on stdin; 0 at end of file. */
static int
await_go(void)
{
	char	line[64];

	return (fgets(line, sizeof(line), stdin) != NULL);
}

static void
scenario_failover(const char *hosts)
{
	struct semc		*c = handle_list(hosts, "0");
	struct semc_permit	 p;
	struct reported		 r = { 0, 0 };
	uint64_t		 t, t2;

	semc_set_lost_cb(c, lost_cb, &r);
	if (!expect(c, semc_acquire(c, "jobs", 1, 5000, SEMC_BOUND, &t),
	    SEMC_OK, "ACQUIRE jobs, bound, on the owner"))
		return;
	printf("token %llu\n", (unsigned long long)t);
	fflush(stdout);
	if (!await_go())
		return;
	expect(c, semc_ping(c), SEMC_OK, "the first call after the owner's "
	    "death finds the new owner");
	check(r.calls == 0 && !semc_next_lost(c, &p),
	    "no permit reported lost (%d calls)", r.calls);
	check(semc_bound_count(c) == 1, "the bound permit is still ours");
	printf("attached\n");
	fflush(stdout);
	if (!await_go())
		return;
	if (expect(c, semc_try(c, "jobs", 1, 60000, &t2), SEMC_OK,
	    "TRY jobs LEASE 60000 on the new owner"))
		printf("lease %llu\n", (unsigned long long)t2);
	expect(c, semc_release(c, "jobs", t), SEMC_OK,
	    "RELEASE of the re-attached permit");
	semc_free(c);
}

static void
scenario_keeperfail(const char *hosts)
{
	struct semc		*c = handle_list(hosts, "0");
	struct semc_opts	 opts;
	struct semc_keeper	*k;
	struct semc_check	 chk;
	struct lost_seen	 seen;
	uint64_t		 t;

	memset(&seen, 0, sizeof(seen));
	pthread_mutex_init(&seen.lock, NULL);
	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.hosts = hosts;
	opts.io_timeout_ms = 1000;
	if ((k = semc_keeper_new(&opts, keeper_lost, &seen)) == NULL) {
		check(0, "semc_keeper_new");
		return;
	}
	if (expect(c, semc_acquire(c, "jobs", 1, 1000, 6000, &t), SEMC_OK,
	    "ACQUIRE jobs LEASE 6000") &&
	    expect(c, semc_keeper_add(k, "jobs", t, 6000), SEMC_OK,
	    "the keeper watches it")) {
		printf("lease %llu\n", (unsigned long long)t);
		fflush(stdout);
		if (await_go()) {
			sleep(8);	/* the lease's length and more */
			check(!semc_keeper_lost(k, "jobs", t), "after the "
			    "failover and 8 s the keeper still keeps it");
			expect(c, semc_check(c, "jobs", t, &chk), SEMC_OK,
			    "CHECK on the new owner: the lease is held");
			pthread_mutex_lock(&seen.lock);
			check(seen.calls == 0, "the keeper reported no loss "
			    "(%d calls)", seen.calls);
			pthread_mutex_unlock(&seen.lock);
		}
	}
	semc_keeper_free(k);
	pthread_mutex_destroy(&seen.lock);
	semc_free(c);
}

/* The CLIENTS line of the connection labelled name; 0 if none. */
static int
find_client(struct semc *c, const char *name, struct semc_client *out)
{
	struct semc_client	*cl;
	size_t			 n, i;
	int			 found = 0;

	if (semc_clients(c, &cl, &n) != SEMC_OK)
		return (0);
	for (i = 0; i < n; i++) {
		if (strcmp(cl[i].name, name) == 0) {
			*out = cl[i];
			found = 1;
		}
	}
	free(cl);
	return (found);
}

static void
scenario_who(const char *port)
{
	struct semc_opts	 opts;
	struct semc		*c = handle(port, NULL, 0), *holder, *waiter;
	struct semc_client	 me, cl;
	struct semc_holder	*h;
	struct semc_waiter	*w;
	uint64_t		 t, t2, tl;
	size_t			 n;
	pid_t			 pid;
	char			 label[SEMC_LABEL_MAX + 2];

	expect(c, semc_name(c, "bad label"), SEMC_ERR_INVAL,
	    "semc_name with a blank is refused before sending");
	memset(label, 'a', sizeof(label) - 1);
	label[sizeof(label) - 1] = '\0';
	expect(c, semc_name(c, label), SEMC_ERR_INVAL,
	    "a 65-byte label is refused");
	expect(c, semc_name(c, "admin@test:1"), SEMC_OK, "semc_name");
	check(find_client(c, "admin@test:1", &me) && me.id > 0 &&
	    strncmp(me.addr, "127.0.0.1:", 10) == 0 &&
	    strcmp(me.cmd, "clients") == 0, "CLIENTS shows it: id=%llu "
	    "addr=%s cmd=%s", (unsigned long long)me.id, me.addr, me.cmd);

	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.port = atoi(port);
	opts.name = "worker@hostA:42";
	if ((holder = semc_new(&opts)) == NULL)
		exit(1);
	expect(holder, semc_acquire(holder, "jobs", 2, 1000, SEMC_BOUND, &t),
	    SEMC_OK, "a handle with opts.name takes jobs 2, bound");
	check(find_client(c, "worker@hostA:42", &cl) && cl.grants == 1 &&
	    strcmp(cl.cmd, "acquire") == 0 && !cl.waiting,
	    "opts.name was sent on connect: CLIENTS shows grants=1 "
	    "cmd=acquire");
	opts.name = "waiter@hostB:7";
	if ((waiter = semc_new(&opts)) == NULL)
		exit(1);
	expect(c, semc_acquire(c, "jobs", 1, 0, 60000, &tl), SEMC_TIMEOUT,
	    "jobs is full");
	if (expect(c, semc_holders(c, "jobs", &h, &n), SEMC_OK,
	    "semc_holders")) {
		check(n == 1 && h[0].token == t &&
		    strcmp(h[0].name, "worker@hostA:42") == 0 &&
		    strncmp(h[0].addr, "127.0.0.1:", 10) == 0,
		    "HOLDERS: name=%s addr=%s", n ? h[0].name : "?",
		    n ? h[0].addr : "?");
		free(h);
	}
	/* A child waits for a permit (3 s at most), so WAITERS lists it. */
	if ((pid = fork()) == 0) {
		semc_acquire(waiter, "jobs", 1, 3000, SEMC_BOUND, &t2);
		_exit(0);
	}
	n = 0;
	for (int i = 0; i < 100 && n == 0; i++) {
		if (semc_waiters(c, "jobs", &w, &n) != SEMC_OK)
			break;
		if (n == 1)
			check(strcmp(w[0].name, "waiter@hostB:7") == 0 &&
			    strncmp(w[0].addr, "127.0.0.1:", 10) == 0,
			    "WAITERS: name=%s addr=%s", w[0].name, w[0].addr);
		free(w);
		if (n == 0)
			poll(NULL, 0, 20);
	}
	check(n == 1, "a waiter was listed");
	check(find_client(c, "waiter@hostB:7", &cl) && cl.waiting &&
	    strcmp(cl.cmd, "acquire") == 0, "CLIENTS: the waiter waiting=1");

	expect(c, semc_kill(c, 999999), SEMC_ERR_NOCONN,
	    "semc_kill of an id that is not open");
	check(find_client(c, "worker@hostA:42", &cl), "the holder's id");
	expect(c, semc_kill(c, cl.id), SEMC_OK, "semc_kill of the holder");
	expect(c, semc_check(c, "jobs", t, NULL), SEMC_ERR_NOTHELD,
	    "its bound permit was released");
	/* The holder's next call reconnects and names itself again. */
	expect(holder, semc_ping(holder), SEMC_OK,
	    "the killed handle reconnects");
	check(find_client(c, "worker@hostA:42", &cl) && cl.id != 0,
	    "and is named again on its new connection (id %llu)",
	    (unsigned long long)cl.id);
	waitpid(pid, NULL, 0);
	semc_free(holder);
	semc_free(waiter);
	semc_free(c);
}

static void
scenario_watch(const char *port)
{
	struct semc		*c = handle(port, NULL, 0);
	struct semc		*watcher = handle(port, NULL, 0), *other;
	enum semc_watch_reason	 r;
	uint64_t		 t;
	int64_t			 start;
	pid_t			 pid;

	expect(watcher, semc_watch(watcher, "jobs", 12345, 0, &r),
	    SEMC_ERR_NOTHELD, "WATCH of a token not held");
	expect(watcher, semc_watch(watcher, "nosuch", 1, 0, &r),
	    SEMC_ERR_NOSEM, "WATCH of an unknown semaphore");
	expect(watcher, semc_watch(watcher, "bad name", 1, 0, &r),
	    SEMC_ERR_INVAL, "WATCH of a bad name: refused before sending");

	expect(c, semc_acquire(c, "jobs", 1, 0, SEMC_BOUND, &t), SEMC_OK,
	    "ACQUIRE jobs, bound");
	r = SEMC_WATCH_OTHER;
	expect(watcher, semc_watch(watcher, "jobs", t, 100, &r), SEMC_TIMEOUT,
	    "WATCH TIMEOUT 100 of a held grant");
	check(r == SEMC_WATCH_TIMEOUT, "reason: %s", semc_reasonname(r));

	/* Each end, done by a child while the parent watches. */
#define WATCH_END(what, reason, action) do {				\
	if ((pid = fork()) == 0) {					\
		poll(NULL, 0, 200);					\
		action;							\
		_exit(0);						\
	}								\
	start = now_ms();						\
	r = SEMC_WATCH_OTHER;						\
	expect(watcher, semc_watch(watcher, "jobs", t, 10000, &r),	\
	    SEMC_OK, "WATCH until " what);				\
	check(r == reason, "reason %s (want %s), after %lld ms",	\
	    semc_reasonname(r), semc_reasonname(reason),		\
	    (long long)(now_ms() - start));				\
	waitpid(pid, NULL, 0);						\
} while (0)

	WATCH_END("RELEASE", SEMC_WATCH_RELEASED,
	    semc_release(c, "jobs", t));
	expect(c, semc_acquire(c, "jobs", 1, 0, SEMC_BOUND, &t), SEMC_OK,
	    "ACQUIRE jobs again");
	WATCH_END("REVOKE", SEMC_WATCH_REVOKED,
	    other = handle(port, NULL, 0); semc_revoke(other, "jobs", t);
	    semc_free(other));
	semc_close(c);		/* the parent forgets the revoked permit */
	expect(c, semc_acquire(c, "jobs", 1, 0, SEMC_BOUND, &t), SEMC_OK,
	    "ACQUIRE jobs, bound, once more");
	WATCH_END("its connection closes", SEMC_WATCH_CLOSED, semc_quit(c));
	expect(c, semc_acquire(c, "jobs", 1, 0, 300, &t), SEMC_OK,
	    "ACQUIRE jobs LEASE 300");
	WATCH_END("the lease runs out", SEMC_WATCH_EXPIRED, (void)0);
#undef WATCH_END
	check(strcmp(semc_reasonname(SEMC_WATCH_UNCLAIMED), "unclaimed") ==
	    0 && strcmp(semc_reasonname(SEMC_WATCH_TIMEOUT), "timeout") == 0,
	    "semc_reasonname");
	semc_free(watcher);
	semc_free(c);
}

static void
scenario_watchone(const char *port, const char *token, const char *want)
{
	struct semc		*c = handle(port, NULL, 0);
	enum semc_watch_reason	 r = SEMC_WATCH_TIMEOUT;

	expect(c, semc_watch(c, "jobs", strtoull(token, NULL, 10), 20000, &r),
	    SEMC_OK, "WATCH jobs until the grant ends");
	check(strcmp(semc_reasonname(r), want) == 0, "reason %s (want %s)",
	    semc_reasonname(r), want);
	semc_free(c);
}

static void
scenario_keeperwatch(const char *port)
{
	struct semc		*c = handle(port, NULL, 0);
	struct semc_opts	 opts;
	struct semc_keeper	*k;
	struct semc_client	*cl;
	struct lost_seen	 seen;
	struct pollfd		 pfd;
	uint64_t		 t;
	int64_t			 start, took;
	size_t			 n, i;
	int			 watching = 0, tries;

	memset(&seen, 0, sizeof(seen));
	pthread_mutex_init(&seen.lock, NULL);
	memset(&opts, 0, sizeof(opts));
	opts.size = sizeof(opts);
	opts.port = atoi(port);
	opts.name = "keeper";
	if ((k = semc_keeper_new(&opts, keeper_lost, &seen)) == NULL) {
		check(0, "semc_keeper_new");
		return;
	}
	/* 30 s: its first refresh is 10 s away, so only WATCH can tell. */
	expect(c, semc_acquire(c, "jobs", 1, 1000, 30000, &t), SEMC_OK,
	    "ACQUIRE jobs LEASE 30000");
	expect(c, semc_keeper_add(k, "jobs", t, 30000), SEMC_OK,
	    "semc_keeper_add");
	for (tries = 0; tries < 250 && !watching; tries++) {
		if (semc_clients(c, &cl, &n) != SEMC_OK)
			break;
		for (i = 0; i < n; i++)
			if (strcmp(cl[i].name, "keeper") == 0 &&
			    strcmp(cl[i].cmd, "watch") == 0 && cl[i].waiting)
				watching = 1;
		free(cl);
		if (!watching)
			poll(NULL, 0, 20);
	}
	check(watching, "the keeper WATCHes the lease on a connection "
	    "named by opts.name");
	pfd.fd = semc_keeper_fd(k);
	pfd.events = POLLIN;
	start = now_ms();
	expect(c, semc_revoke(c, "jobs", t), SEMC_OK, "REVOKE the lease");
	check(poll(&pfd, 1, 10000) == 1, "the keeper's fd becomes readable");
	took = now_ms() - start;
	printf("keeper told of the revoked lease in %lld ms\n",
	    (long long)took);
	check(took < 1000, "the keeper was told through WATCH, long before "
	    "its first refresh (10 s): %lld ms", (long long)took);
	check(semc_keeper_lost(k, "jobs", t), "semc_keeper_lost: lost");
	pthread_mutex_lock(&seen.lock);
	check(seen.calls == 1 && seen.why == SEMC_ERR_NOTHELD &&
	    seen.token == t, "the callback was called once, with NOTHELD "
	    "(calls %d, why %s)", seen.calls, semc_errname(seen.why));
	pthread_mutex_unlock(&seen.lock);

	/* Removed and released: the WATCH's "released" is no loss. */
	expect(c, semc_acquire(c, "jobs", 1, 1000, 30000, &t), SEMC_OK,
	    "ACQUIRE jobs LEASE 30000 again");
	expect(c, semc_keeper_add(k, "jobs", t, 30000), SEMC_OK, "keep it");
	poll(NULL, 0, 200);
	expect(c, semc_keeper_remove(k, "jobs", t), SEMC_OK, "unkeep it");
	expect(c, semc_release(c, "jobs", t), SEMC_OK, "release it");
	poll(NULL, 0, 200);
	pthread_mutex_lock(&seen.lock);
	check(seen.calls == 1, "no loss reported for a lease removed, then "
	    "released (calls %d)", seen.calls);
	pthread_mutex_unlock(&seen.lock);
	semc_keeper_free(k);
	pthread_mutex_destroy(&seen.lock);
	semc_free(c);
}

/* A handle from a struct semc_opts of the given size (and tail byte). */
static struct semc *
handle_sized(const char *port, size_t size, int tail)
{
	unsigned char		 buf[sizeof(struct semc_opts) + 16];
	struct semc_opts	*opts = (struct semc_opts *)(void *)buf;
	struct semc		*c;

	memset(buf, 0, sizeof(buf));
	opts->size = size;
	opts->port = atoi(port);
	if (tail)
		buf[sizeof(buf) - 1] = 1;
	if ((c = semc_new(opts)) == NULL) {
		perror("semc_new");
		exit(1);
	}
	return (c);
}

static void
scenario_opts(const char *port)
{
	struct semc_opts	 init = SEMC_OPTS_INIT;
	struct semc		*c;
	struct semc_check	 chk;
	struct semc_info	 info;
	uint64_t		 t;

	check(init.size == sizeof(init) && init.host == NULL &&
	    init.port == 0, "SEMC_OPTS_INIT sets size (%zu) and nothing else",
	    init.size);

	c = handle_sized(port, 0, 0);
	expect(c, semc_ping(c), SEMC_ERR_INVAL, "size 0 (no SEMC_OPTS_INIT)");
	check(strstr(semc_errmsg(c), "SEMC_OPTS_INIT") != NULL,
	    "the message says how to fix it: %s", semc_errmsg(c));
	semc_free(c);
	c = handle_sized(port, sizeof(void *), 0);
	expect(c, semc_ping(c), SEMC_ERR_INVAL, "a size too small");
	semc_free(c);
	c = handle_sized(port, sizeof(struct semc_opts) + 16, 1);
	expect(c, semc_ping(c), SEMC_ERR_INVAL, "a newer struct that sets a "
	    "field this library does not know");
	check(strstr(semc_errmsg(c), "does not know") != NULL, "says so: %s",
	    semc_errmsg(c));
	semc_free(c);
	c = handle_sized(port, sizeof(struct semc_opts) + 16, 0);
	expect(c, semc_ping(c), SEMC_OK, "a newer struct whose new fields "
	    "are 0 (their defaults)");
	semc_free(c);

	c = handle_sized(port, sizeof(struct semc_opts), 0);
	expect(c, semc_ping(c), SEMC_OK, "size = sizeof: accepted");
	expect(c, semc_acquire(c, "jobs", 1, 0, 0, &t), SEMC_OK,
	    "semc_acquire jobs 1, timeout 0, lease_ms 0");
	expect(c, semc_check(c, "jobs", t, &chk), SEMC_OK,
	    "lease_ms 0: the permit is held");
	check(chk.lease == 0 && chk.ttl_ms == -1 && semc_bound_count(c) == 1,
	    "lease_ms 0 is no lease: a bound permit (lease=%d ttl=%lld "
	    "bound=%zu)", chk.lease, (long long)chk.ttl_ms,
	    semc_bound_count(c));
	expect(c, semc_release(c, "jobs", t), SEMC_OK,
	    "its release is OK, not ERR_NOTHELD");
	expect(c, semc_try(c, "jobs", 1, 0, &t), SEMC_OK, "semc_try lease 0");
	expect(c, semc_check(c, "jobs", t, &chk), SEMC_OK, "held");
	check(chk.lease == 0, "semc_try lease_ms 0: bound too");
	semc_free(c);		/* closing releases a bound permit */
	/*
	 * semd notices the close when its loop next reads that socket,
	 * which may come after a new connection's first command: wait for
	 * the whole capacity (2) rather than looking once.
	 */
	c = handle(port, NULL, 0);
	expect(c, semc_acquire(c, "jobs", 2, 10000, 0, &t), SEMC_OK,
	    "closing the handle released it: all 2 permits granted");
	expect(c, semc_info(c, "jobs", &info), SEMC_OK, "semc_info");
	check(info.used == 2, "used %llu of 2, the new handle's",
	    (unsigned long long)info.used);
	semc_free(c);
}

static void
scenario_version(void)
{
	char	built[32];

	snprintf(built, sizeof(built), "%d.%d.%d", SEMC_VERSION_MAJOR,
	    SEMC_VERSION_MINOR, SEMC_VERSION_PATCH);
	check(strcmp(built, SEMC_VERSION) == 0, "SEMC_VERSION %s is "
	    "MAJOR.MINOR.PATCH (%s)", SEMC_VERSION, built);
	check(strcmp(SEMC_VERSION, PACKAGE_VERSION) == 0, "SEMC_VERSION "
	    "%s is configure.ac's version %s", SEMC_VERSION, PACKAGE_VERSION);
	check(strcmp(semc_version(), SEMC_VERSION) == 0, "semc_version() "
	    "%s", semc_version());
}

/* Keep the bound for ms (or until lost); say how it went. */
static void
bound_keep_for(struct semc *c, int64_t ms)
{
	struct pollfd	pfd;
	int64_t		until = now_ms() + ms, next, left, margin;
	enum semc_err	err;

	for (;;) {
		err = semc_bound_keep(c, &next);
		if (err == SEMC_ERR_BOUND) {
			printf("lost %lld\n", (long long)now_ms());
			printf("# %s\n", semc_errmsg(c));
			check(semc_bound_count(c) == 0, "after the loss the "
			    "handle holds no bound permit");
			check(semc_bound_left_ms(c, NULL) == -1, "and no "
			    "bound applies");
			return;
		}
		if (err != SEMC_OK) {
			printf("keep %s %s\n", semc_errname(err),
			    semc_errmsg(c));
			return;
		}
		if (now_ms() >= until)
			break;
		if (next < 0 || next > until - now_ms())
			next = until - now_ms();
		pfd.fd = semc_fd(c);
		pfd.events = POLLIN;
		(void)poll(&pfd, 1, (int)next);
	}
	left = semc_bound_left_ms(c, &margin);
	printf("kept left %lld margin %lld\n", (long long)left,
	    (long long)margin);
}

static void
scenario_bound(const char *port)
{
	struct semc		*c = handle(port, NULL, 0);
	struct semc_permit	 p;
	struct reported		 r = { 0, 0 };
	char			 line[64];
	uint64_t		 t;
	int64_t			 left, margin;
	enum semc_err		 err;

	semc_set_lost_cb(c, lost_cb, &r);
	check(semc_bound_left_ms(c, &margin) == -1 && margin == -1,
	    "no bound before any permit is held");
	if (!expect(c, semc_acquire(c, "jobs", 1, 1000, SEMC_BOUND, &t),
	    SEMC_OK, "ACQUIRE jobs, bound"))
		return;
	left = semc_bound_left_ms(c, &margin);
	printf("token %llu left %lld margin %lld\n", (unsigned long long)t,
	    (long long)left, (long long)margin);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		if (strncmp(line, "keep ", 5) == 0)
			bound_keep_for(c, atoll(line + 5));
		else if (strcmp(line, "reconnect\n") == 0) {
			err = semc_reconnect(c);
			printf("reconnect %s\n", semc_errname(err));
		} else
			break;
		while (semc_next_lost(c, &p))
			printf("lostpermit %s %llu\n", p.sem,
			    (unsigned long long)p.token);
		printf("callbacks %d bound %zu\n", r.calls,
		    semc_bound_count(c));
		fflush(stdout);
	}
	semc_free(c);
}

int
main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "api") == 0)
		scenario_api(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "auth") == 0)
		scenario_auth(argv[2]);
	else if (argc >= 4 && strcmp(argv[1], "errors") == 0)
		scenario_errors(argv[2], argv[3]);
	else if (argc >= 3 && strcmp(argv[1], "fake") == 0)
		scenario_fake(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "fakeid") == 0)
		scenario_fakeid(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "ids") == 0)
		scenario_ids(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "lostproxy") == 0)
		scenario_lostproxy(argv[2], argc >= 4 ? argv[3] : NULL);
	else if (argc >= 3 && strcmp(argv[1], "keeper") == 0)
		scenario_keeper(argv[2]);
	else if (argc >= 4 && strcmp(argv[1], "reattach") == 0)
		scenario_reattach(argv[2], argv[3]);
	else if (argc >= 3 && strcmp(argv[1], "unix") == 0)
		scenario_unix(argv[2]);
	else if (argc >= 4 && strcmp(argv[1], "follow") == 0)
		scenario_follow(argv[2], argv[3]);
	else if (argc >= 4 && strcmp(argv[1], "giveup") == 0)
		scenario_giveup(argv[2], argv[3]);
	else if (argc >= 3 && strcmp(argv[1], "lostreply") == 0)
		scenario_lostreply(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "badlist") == 0)
		scenario_badlist(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "failover") == 0)
		scenario_failover(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "keeperfail") == 0)
		scenario_keeperfail(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "who") == 0)
		scenario_who(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "watch") == 0)
		scenario_watch(argv[2]);
	else if (argc >= 5 && strcmp(argv[1], "watchone") == 0)
		scenario_watchone(argv[2], argv[3], argv[4]);
	else if (argc >= 3 && strcmp(argv[1], "keeperwatch") == 0)
		scenario_keeperwatch(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "opts") == 0)
		scenario_opts(argv[2]);
	else if (argc >= 3 && strcmp(argv[1], "bound") == 0)
		scenario_bound(argv[2]);
	else if (argc >= 2 && strcmp(argv[1], "version") == 0)
		scenario_version();
	else {
		fprintf(stderr, "usage: semc_api SCENARIO ARGS...\n");
		return (2);
	}
	return (failed);
}
