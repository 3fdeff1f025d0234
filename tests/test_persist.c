/*
 * test_persist.c: unit tests of the persistence and ownership policy
 * (daemon/persist.c), on a fake store instead of Redis.
 *
 * The fake implements every op of struct store_ops in memory. A test
 * scripts what a claim answers (on the next loop turn, or inside claim()
 * with claim_inline: the store may do either), what a load finds and
 * whether the asynchronous connection comes up by itself; the fake
 * records every claim and every batch submitted, and the test answers
 * the batches as Redis would (fake_ack, fake_fail, fake_fence, renewed).
 *
 * Time is the fake clock of engine_fake.h, given to the engine, to
 * persist and to ownership: run_ms and WAIT_FOR move it by hand, a
 * millisecond at a time, and run the event loop without blocking between
 * steps for what persist and the fake store schedule "at once". Nothing
 * waits for real time, so timing is asserted exactly where it is the
 * point (when an owner gives up), and the suite runs in milliseconds.
 *
 * The tests of fatalx (exit status 1) are Check exit tests, run in fork
 * mode only. A failed assertion ends a forked test with _exit(1) too (as
 * does a sanitizer report), so an exit test expecting 1 could not fail:
 * instead each registers an on_exit guard that turns exit(1) with the
 * expected error line in the log into EXIT_FATALX, which nothing else
 * produces, and any other exit() into 2.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <event2/event.h>

#include "config.h"
#include "engine.h"
#include "engine_fake.h"
#include "log.h"
#include "owner.h"
#include "persist.h"
#include "store.h"
#include "store_fake.h"

#define ADDR		"127.0.0.1:7400"	/* what this daemon advertises */
#define MAX_ANSWERS	16
#define WAIT_MS		3000	/* generous bound for what is due at once */
#define EXIT_FATALX	3	/* the expected fatalx, seen by exit_guard */
/*
 * libevent arms a timer from the time cached when its loop turn began, so
 * a timer armed late in a callback seems to fire that much early.
 */
#define EARLY_MS	25

/* --- the daemon around persist: engine, hooks, answers --- */

struct answer {
	uint64_t		 conn_id;
	enum persist_await_kind	 kind;
	uint64_t		 token;
	int			 ok;
	enum persist_outcome	 outcome;
};

static struct event_base	*base;
static struct engine		*engine;
static struct persist		*persist;
static struct owner		*client;	/* one connection's party */
static struct config		 cfg;
static int			 cfg_loaded;
static char			 logpath[256];

static unsigned			 nloaded, nready, nstandby, nlost;
static uint64_t			 lost_at_ms;
static char			 lost_role[16], lost_error[256];
static struct answer		 answers[MAX_ANSWERS];
static size_t			 nanswers;

static void
on_engine_event(void *ctx, const struct engine_event *ev)
{
	(void)ctx;
	if (persist != NULL)
		persist_observe(persist, ev);
}

static void
on_answer(void *ctx, uint64_t conn_id, enum persist_await_kind kind,
    uint64_t token, uint32_t ms, enum persist_outcome outcome)
{
	(void)ctx;
	(void)ms;
	ck_assert_uint_lt(nanswers, MAX_ANSWERS);
	answers[nanswers].conn_id = conn_id;
	answers[nanswers].kind = kind;
	answers[nanswers].token = token;
	answers[nanswers].outcome = outcome;
	answers[nanswers++].ok = outcome == PERSIST_OK;
}

/* As server.c: the configuration's semaphore goes in once loaded. */
static void
hook_loaded(void *arg)
{
	struct sem	*s;

	(void)arg;
	nloaded++;
	ck_assert_int_eq(engine_create(engine, "jobs", 4, 2, &s), PERR_NONE);
}

static void
hook_ready(void *arg)
{
	(void)arg;
	nready++;
}

static void
hook_standby(void *arg)
{
	(void)arg;
	nstandby++;
}

/* As server.c: every connection goes, then memory; a client comes back. */
static void
hook_lost(void *arg)
{
	struct persist_stats	st;

	(void)arg;
	nlost++;
	lost_at_ms = fake_now;
	persist_get_stats(persist, &st);
	snprintf(lost_role, sizeof(lost_role), "%s", st.role);
	snprintf(lost_error, sizeof(lost_error), "%s", st.last_error);
	engine_owner_free(engine, client);
	engine_clear(engine);
	client = engine_owner_new(engine, 100 + nlost);
}

static const struct persist_hooks hooks = {
	.loaded = hook_loaded,
	.ready = hook_ready,
	.standby = hook_standby,
	.lost = hook_lost,
};

/* Run what is due now: the loop, without blocking, until it is idle. */
static void
run_now(void)
{
	int	i;

	for (i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Move the fake clock ms forward, a millisecond at a time. */
static void
run_ms(uint64_t ms)
{
	uint64_t	end = fake_now + ms;

	run_now();
	while (fake_now < end) {
		fake_advance(1);
		run_now();
	}
}

/* Run until cond holds, failing after ms of fake time. */
#define WAIT_FOR(cond, ms) do {						\
	uint64_t _end = fake_now + (ms);				\
	run_now();							\
	while (!(cond) && fake_now < _end)				\
		run_ms(1);						\
	ck_assert_msg((cond), "timed out waiting for %s", #cond);	\
} while (0)

/* Run until the fake clock reaches at_ms. */
static void
run_until_ms(uint64_t at_ms)
{
	if (fake_now < at_ms)
		run_ms(at_ms - fake_now);
}

static int
log_has(const char *what)
{
	FILE	*fp;
	char	 line[2048];
	int	 found = 0;

	if ((fp = fopen(logpath, "r")) == NULL)
		return (0);
	while (!found && fgets(line, sizeof(line), fp) != NULL)
		found = strstr(line, what) != NULL;
	fclose(fp);
	return (found);
}

/* How many log lines contain what. */
static unsigned
log_count(const char *what)
{
	FILE		*fp;
	char		 line[2048];
	unsigned	 n = 0;

	if ((fp = fopen(logpath, "r")) == NULL)
		return (0);
	while (fgets(line, sizeof(line), fp) != NULL)
		n += strstr(line, what) != NULL;
	fclose(fp);
	return (n);
}

/* A lease grant of n on sem, or the engine's error. */
static enum proto_err
acquire(const char *name, uint64_t *token)
{
	struct sem		*s = engine_find(engine, name, strlen(name));
	struct grant		*g = NULL;
	enum acquire_status	 status;
	enum proto_err		 err;

	ck_assert_ptr_nonnull(s);
	err = engine_acquire(engine, s, client, 1, 0, 60000, NULL, &status,
	    &g);
	if (err == PERR_NONE) {
		ck_assert_int_eq(status, ACQUIRE_GRANTED);
		*token = g->token;
	}
	return (err);
}

/* A grant answered the sync way: held back until its batch is written. */
static uint64_t
acquire_await(const char *name, uint64_t conn_id)
{
	uint64_t	token = 0;

	ck_assert_int_eq(acquire(name, &token), PERR_NONE);
	ck_assert(persist_defers_replies(persist));
	persist_await(persist, conn_id, AWAIT_GRANT, token, 0);
	return (token);
}

static void
stats(struct persist_stats *st)
{
	persist_get_stats(persist, st);
}

/* persist on the fake, configured as semd would be from these words. */
static void
start(const char *mode, const char *standby, const char *lease)
{
	char			*argv[] = { "semd", "--redis", "127.0.0.1:1",
				    "--persistence", (char *)mode, "--standby",
				    (char *)standby, "--owner-lease",
				    (char *)lease };
	char			 err[256];
	enum config_action	 action;

	ck_assert_msg(config_load(&cfg, sizeof(argv) / sizeof(argv[0]), argv,
	    &action, err, sizeof(err)) == 0, "%s", err);
	cfg_loaded = 1;
	persist = persist_new(&cfg, base, &fake_clock, engine, &fake_ops,
	    on_answer, NULL);
	ck_assert_uint_eq(fake.ncreates, 1);
	persist_set_advertise(persist, ADDR);
	persist_start(persist, &hooks, NULL);
}

/* Start, gain ownership with epoch 1, load, connect, be ready. */
static void
gain(const char *mode, const char *lease)
{
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 1;
	start(mode, "no", lease);
	WAIT_FOR(nloaded == 1, WAIT_MS);
	ck_assert_uint_eq(fake.nconnects, 1);
	fake_ready();
	ck_assert_uint_eq(nready, 1);
}

static void
setup(void)
{
	const char		*dir = getenv("TMPDIR");
	int			 fd;

	memset(&fake, 0, sizeof(fake));
	nloaded = nready = nstandby = nlost = 0;
	lost_at_ms = 0;
	lost_role[0] = lost_error[0] = '\0';
	nanswers = 0;
	cfg_loaded = 0;
	persist = NULL;

	snprintf(logpath, sizeof(logpath), "%s/semd-test-persist.XXXXXX",
	    dir != NULL && *dir != '\0' ? dir : "/tmp");
	fd = mkstemp(logpath);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(log_open(logpath, LOG_LEVEL_DEBUG), 0);

	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	fake_reset(1000000);
	engine = engine_new(&fake_clock, on_engine_event, NULL, 0);
	client = engine_owner_new(engine, 1);
}

static void
teardown(void)
{
	if (persist != NULL)
		persist_free(persist);
	persist = NULL;
	ck_assert_uint_eq(fake.ndestroys, fake.ncreates);
	ck_assert_uint_eq(fake.nbad, 0);
	fake_free_batches();
	engine_owner_free(engine, client);
	engine_free(engine);
	fake_reset(0);
	event_base_free(base);
	if (cfg_loaded)
		config_free(&cfg);
	log_close();
	unlink(logpath);
}

/* --- exit tests: the expected fatalx, and nothing else --- */

static const char	*exit_expect;
static unsigned		 exit_expect_lost, exit_expect_loaded;
static uint64_t		 exit_not_before_ms;	/* after the first claim */

static void
exit_guard(int status, void *arg)
{
	uint64_t	 early_ms = fake.nclaims > 0 ? fake.claims[0].at_ms +
			    exit_not_before_ms : UINT64_MAX;

	(void)arg;
	if (status == 1 && log_has(exit_expect) &&
	    nlost == exit_expect_lost && nloaded == exit_expect_loaded &&
	    nstandby == 0 && fake_now >= early_ms)
		_exit(EXIT_FATALX);
	fprintf(stderr, "exit(%d) without \"%s\" in the log, or lost %u, "
	    "loaded %u, standby %u, or before %llu ms\n", status, exit_expect,
	    nlost, nloaded, nstandby, (unsigned long long)exit_not_before_ms);
	_exit(2);
}

/* The test must end in fatalx(line) (exit 1), lost and loaded so often. */
static void
expect_exit(const char *line, unsigned lost, unsigned loaded)
{
	exit_expect = line;
	exit_expect_lost = lost;
	exit_expect_loaded = loaded;
	exit_not_before_ms = 0;
	ck_assert_int_eq(on_exit(exit_guard, NULL), 0);
}

/* --- the tests --- */

/*
 * Claimed with epoch 1, loaded, connected, ready; grants are held until
 * the store is ready; in sync mode a reply waits for its own batch.
 */
START_TEST(test_gained)
{
	struct persist_stats	 st;
	const struct store_change *c = NULL;
	uint64_t		 t1, t2, tok;
	size_t			 i;

	script_load_sem("old", 3);
	script_load_lease("old", 7, 1, NULL, NULL);
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 1;
	fake.claim_inline = 1;
	start("sync", "no", "500ms");
	stats(&st);
	ck_assert_str_eq(st.role, "standby");	/* not yet claimed */
	WAIT_FOR(nloaded == 1, WAIT_MS);

	ck_assert_uint_eq(fake.nclaims, 1);
	ck_assert_str_eq(fake.claims[0].addr, ADDR);
	ck_assert_uint_eq(fake.claims[0].resume_epoch, 0);
	ck_assert_int_eq(fake.claims[0].resume_only, 0);
	ck_assert_uint_eq(fake.nloads, 1);
	ck_assert_ptr_nonnull(engine_find(engine, "old", 3));
	ck_assert_ptr_nonnull(engine_grant_by_token(engine, 7));
	ck_assert_uint_eq(fake.nconnects, 1);
	stats(&st);
	ck_assert_str_eq(st.role, "owner");
	ck_assert_uint_eq(st.epoch, 1);
	ck_assert_str_eq(st.owner, ADDR);
	ck_assert_str_eq(st.state, "down");
	ck_assert_int_eq(persist_role(persist), ROLE_OWNER);

	/* Loaded, not ready: nothing is granted yet. */
	ck_assert_uint_eq(nready, 0);
	ck_assert_int_eq(persist_unavailable(persist), 1);
	ck_assert_int_eq(acquire("jobs", &tok), PERR_UNAVAILABLE);
	run_ms(20);
	ck_assert_uint_eq(nready, 0);

	fake_ready();
	ck_assert_uint_eq(nready, 1);
	stats(&st);
	ck_assert_str_eq(st.state, "ok");
	ck_assert_int_eq(persist_unavailable(persist), 0);

	/* A grant goes out in a batch; its reply waits for the ack. */
	t1 = acquire_await("jobs", 11);
	ck_assert_uint_gt(t1, 7);
	engine_grant_set_holder(engine_grant_by_token(engine, t1), "w1",
	    "127.0.0.1:5000");
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	ck_assert(batch_has(0, STORE_GRANT_PUT, "jobs", t1));
	ck_assert(batch_has(0, STORE_SEM_PUT, "jobs", 0));
	for (i = 0; i < fake.batches[0].n; i++) {
		c = &fake.batches[0].ch[i];
		if (c->type == STORE_GRANT_PUT && c->token == t1)
			break;
	}
	ck_assert_str_eq(c->holder_name, "w1");
	ck_assert_str_eq(c->holder_addr, "127.0.0.1:5000");
	ck_assert_uint_eq(nanswers, 0);

	/* A second grant gathers while the first batch is in flight. */
	t2 = acquire_await("jobs", 12);
	run_ms(20);
	ck_assert_uint_eq(fake.nbatches, 1);
	ck_assert_uint_eq(nanswers, 0);

	fake_ack(1);
	ck_assert_uint_eq(nanswers, 1);
	ck_assert_uint_eq(answers[0].conn_id, 11);
	ck_assert_uint_eq(answers[0].token, t1);
	ck_assert_int_eq(answers[0].kind, AWAIT_GRANT);
	ck_assert_int_eq(answers[0].ok, 1);

	WAIT_FOR(fake.nbatches == 2, WAIT_MS);
	ck_assert(batch_has(1, STORE_GRANT_PUT, "jobs", t2));
	ck_assert(!batch_has(1, STORE_GRANT_PUT, "jobs", t1));
	ck_assert_uint_eq(nanswers, 1);
	fake_ack(1);
	ck_assert_uint_eq(nanswers, 2);
	ck_assert_uint_eq(answers[1].conn_id, 12);
	ck_assert_uint_eq(answers[1].token, t2);
	ck_assert_int_eq(answers[1].ok, 1);

	stats(&st);
	ck_assert_uint_eq(st.batches, 2);
	ck_assert_uint_eq(st.backlog, 0);

	/* The address is known later (port 0): the owner shown follows. */
	persist_set_advertise(persist, "127.0.0.1:7401");
	stats(&st);
	ck_assert_str_eq(st.owner, "127.0.0.1:7401");
	ck_assert_str_eq(fake.advertised, "127.0.0.1:7401");
	ck_assert(log_has("owner of fake db 0 prefix t: with epoch 1"));
}
END_TEST

/* Renewed more often than owner-lease, the owner stays owner. */
START_TEST(test_renewed)
{
	struct persist_stats	 st;
	uint64_t		 t0;
	int			 i;

	gain("sync", "500ms");
	t0 = fake.claims[0].at_ms;
	for (i = 0; i < 15; i++) {
		run_ms(100);
		fake.ev->renewed(fake.ctx, fake_now);
		ck_assert_uint_eq(nlost, 0);
	}
	ck_assert_uint_ge(fake_now, t0 + 3 * 500);
	stats(&st);
	ck_assert_str_eq(st.role, "owner");
	ck_assert_str_eq(st.state, "ok");
	ck_assert_uint_eq(fake.nclaims, 1);
	ck_assert_uint_eq(fake.ndisconnects, 0);
}
END_TEST

/*
 * Not renewed: the owner gives up at owner-lease less the margin after
 * its claim was sent, not before and before the lease runs out; then
 * grants are held, nothing is written, and it claims its epoch back.
 */
START_TEST(test_lost)
{
	struct persist_stats	 st;
	uint64_t		 t0, tok, lease = 3000, margin = 300;
	size_t			 nbatches;
	struct sem		*s;

	gain("sync", "3s");
	t0 = fake.claims[0].at_ms;
	fake.claim_answer = CLAIM_ERROR;	/* Redis stays unreachable */

	run_until_ms(t0 + lease - margin - 200);
	ck_assert_uint_eq(nlost, 0);
	stats(&st);
	ck_assert_str_eq(st.role, "owner");

	WAIT_FOR(nlost == 1, lease);
	ck_assert_uint_ge(lost_at_ms, t0 + lease - margin);
	ck_assert_uint_lt(lost_at_ms, t0 + lease);
	ck_assert_uint_eq(fake.ndisconnects, 1);

	stats(&st);
	ck_assert_str_eq(st.role, "standby");
	ck_assert_str_eq(st.owner, "-");
	ck_assert_int_eq(persist_role(persist), ROLE_STANDBY);
	ck_assert_str_eq(lost_role, "standby");
	ck_assert_str_eq(lost_error,
	    "could not renew it within owner-lease (3000 ms)");
	ck_assert(log_has("lost ownership of fake db 0 prefix t: (epoch 1)"));

	/* Memory is gone; what is made now is neither granted nor written. */
	ck_assert_ptr_null(engine_find(engine, "jobs", 4));
	ck_assert_int_eq(engine_create(engine, "late", 4, 1, &s), PERR_NONE);
	ck_assert_int_eq(acquire("late", &tok), PERR_UNAVAILABLE);
	ck_assert_int_eq(persist_unavailable(persist), 1);
	nbatches = fake.nbatches;

	/*
	 * It claims again one owner-lease later (its key has expired by then,
	 * and a standby has had its turn), to resume only the epoch it held.
	 */
	WAIT_FOR(fake.nclaims >= 2, lease + WAIT_MS);
	ck_assert_uint_eq(fake.claims[1].resume_epoch, 1);
	ck_assert_int_eq(fake.claims[1].resume_only, 1);
	ck_assert_uint_ge(fake.claims[1].at_ms, lost_at_ms + lease - 5);
	ck_assert_uint_lt(fake.claims[1].at_ms, lost_at_ms + lease + 250);
	run_ms(200);
	ck_assert_uint_eq(fake.nbatches, nbatches);
	ck_assert_uint_eq(nlost, 1);
	ck_assert_uint_eq(fake.nconnects, 1);
}
END_TEST

/* Another owner's key, seen by a fenced write: lost at once. */
START_TEST(test_fenced)
{
	struct persist_stats	 st;

	gain("sync", "3s");
	fake.claim_answer = CLAIM_ERROR;
	(void)acquire_await("jobs", 21);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);

	fake_fence("10.0.0.9:7313");
	ck_assert_uint_eq(nlost, 1);
	ck_assert_uint_lt(lost_at_ms, fake.claims[0].at_ms + 3000 - 300);
	ck_assert_uint_eq(fake.ndisconnects, 1);
	stats(&st);
	ck_assert_str_eq(st.role, "standby");
	ck_assert_str_eq(st.last_error,
	    "another daemon owns it (owner key: 10.0.0.9:7313)");
	ck_assert_uint_eq(st.backlog, 0);
	/* Its connection is closed by the lost hook: no answer goes out. */
	ck_assert_uint_eq(nanswers, 0);

	WAIT_FOR(fake.nclaims == 2, WAIT_MS);
	ck_assert_uint_eq(fake.claims[1].resume_epoch, 1);
	ck_assert_int_eq(fake.claims[1].resume_only, 1);
	run_ms(50);
	ck_assert_uint_eq(nlost, 1);
}
END_TEST

/* Lost, then nobody took over: the same epoch again, loaded anew. */
START_TEST(test_regained)
{
	struct persist_stats	 st;
	struct grant		*g;
	uint64_t		 t1, t2;

	gain("sync", "500ms");
	t1 = acquire_await("jobs", 31);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	fake_ack(1);
	ck_assert_uint_eq(nanswers, 1);

	/* What Redis holds now; the next claim resumes epoch 1. */
	script_load_sem("jobs", 2);
	script_load_lease("jobs", t1, 1, "worker-1", "10.1.1.1:5000");
	fake.auto_ready = 1;
	fake.claim_inline = 1;

	/* No more renewals: lost; the lost hook clears the engine. */
	WAIT_FOR(nlost == 1, WAIT_MS);
	WAIT_FOR(nloaded == 2, WAIT_MS);
	ck_assert_uint_eq(fake.nclaims, 2);
	ck_assert_uint_eq(fake.claims[1].resume_epoch, 1);
	ck_assert_int_eq(fake.claims[1].resume_only, 1);
	ck_assert_uint_eq(fake.nloads, 2);
	g = engine_grant_by_token(engine, t1);
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(g->holder_name, "worker-1");
	ck_assert_str_eq(g->holder_addr, "10.1.1.1:5000");
	fake.ev->renewed(fake.ctx, fake_now);

	stats(&st);
	ck_assert_str_eq(st.role, "owner");
	ck_assert_uint_eq(st.epoch, 1);
	ck_assert_str_eq(st.owner, ADDR);
	WAIT_FOR(fake.ready, WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.state, "ok");
	ck_assert_str_eq(st.last_error, "");
	ck_assert_uint_ge(st.failures, 1);
	ck_assert_uint_eq(fake.nconnects, 2);
	ck_assert_uint_eq(nready, 1);		/* listening already */
	ck_assert(log_has("resumed fake db 0 prefix t: with epoch 1: "
	    "loaded 1 semaphores, 1 grants"));

	/* Serving again: a new grant, above the old, written and answered. */
	t2 = acquire_await("jobs", 32);
	ck_assert_uint_gt(t2, t1);
	WAIT_FOR(fake.nbatches == 2, WAIT_MS);
	ck_assert(batch_has(1, STORE_GRANT_PUT, "jobs", t2));
	fake_ack(1);
	ck_assert_uint_eq(nanswers, 2);
	ck_assert_uint_eq(answers[1].conn_id, 32);
	ck_assert_int_eq(answers[1].ok, 1);
	ck_assert_uint_eq(nlost, 1);
}
END_TEST

/* standby no, and the data set was taken over since: exit 1. */
START_TEST(test_superseded)
{
	expect_exit("error: fake db 0 prefix t: was taken over (epoch 2) "
	    "since this daemon lost it; exiting (standby no)", 1, 1);
	gain("sync", "500ms");
	fake.claim_answer = CLAIM_SUPERSEDED;
	fake.claim_epoch = 2;
	fake_fence("10.0.0.2:7313");
	run_ms(WAIT_MS);
	ck_abort_msg("did not exit");
}
END_TEST

/* standby no, lost, and another daemon holds the key now: exit 1. */
START_TEST(test_owned_after_loss)
{
	expect_exit("error: fake db 0 prefix t: is owned by 10.0.0.2:7313 "
	    "(epoch 3); exiting", 1, 1);
	gain("sync", "500ms");
	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 3;
	fake.claim_addr = "10.0.0.2:7313";
	run_ms(WAIT_MS);
	ck_abort_msg("did not exit");
}
END_TEST

/*
 * A second daemon with standby no finds a live owner: the key might be a
 * crashed predecessor's, so it looks again for a whole owner-lease; the
 * key is still held, so it exits 1 without loading.
 */
START_TEST(test_live_owner_at_start)
{
	expect_exit("error: fake db 0 prefix t: is owned by 10.0.0.1:7313 "
	    "(epoch 4); exiting", 0, 0);
	exit_not_before_ms = 500;
	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 4;
	fake.claim_addr = "10.0.0.1:7313";
	start("sync", "no", "500ms");
	run_ms(WAIT_MS);
	ck_abort_msg("did not exit");
}
END_TEST

/*
 * standby no, and the owner key is a crashed predecessor's: it runs out
 * within owner-lease, and this daemon owns the data set, without exiting.
 */
START_TEST(test_dead_owner_at_start)
{
	struct persist_stats	 st;

	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 4;
	fake.claim_addr = "10.0.0.1:7313";
	start("sync", "no", "500ms");
	WAIT_FOR(fake.nclaims >= 2, WAIT_MS);
	ck_assert(log_has("is owned by 10.0.0.1:7313 (epoch 4); waiting up "
	    "to owner-lease (500 ms)"));
	ck_assert_uint_eq(nstandby, 0);

	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 5;
	fake.auto_ready = 1;
	WAIT_FOR(nloaded == 1, WAIT_MS);
	WAIT_FOR(nready == 1, WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.role, "owner");
	ck_assert_uint_eq(st.epoch, 5);
	ck_assert_uint_eq(nstandby, 0);
	ck_assert(log_has("owner of fake db 0 prefix t: with epoch 5"));
}
END_TEST

/*
 * Redis unreachable while a standby claims: the retries back off from
 * the poll, doubling up to 2 s, and the log says it once; one answer
 * resets both.
 */
START_TEST(test_claim_backoff)
{
	static const uint64_t	 gaps_ms[] = { 125, 250, 500, 1000, 2000,
				    2000 };
	struct persist_stats	 st;
	size_t			 i, first, n = sizeof(gaps_ms) /
				    sizeof(gaps_ms[0]);
	uint64_t		 gap;

	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 4;
	fake.claim_addr = "10.0.0.1:7313";
	start("sync", "yes", "500ms");
	WAIT_FOR(nstandby == 1, WAIT_MS);
	fake.claim_answer = CLAIM_ERROR;
	first = fake.nclaims;	/* the next claim is the first to fail */
	WAIT_FOR(fake.nclaims == first + n + 1, 6000 + WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.last_error, "cannot load: Connection refused");
	for (i = 0; i < n; i++) {
		gap = fake.claims[first + i + 1].at_ms -
		    fake.claims[first + i].at_ms;
		ck_assert_uint_ge(gap, gaps_ms[i] - EARLY_MS);
		ck_assert_uint_lt(gap, gaps_ms[i] + 1000);
	}
	ck_assert_uint_eq(log_count("redis fake:1: cannot load: Connection "
	    "refused"), 1);

	/* Redis answers again: said once, and the poll is back. */
	fake.claim_answer = CLAIM_OWNED;
	WAIT_FOR(fake.nclaims == first + n + 3, 2000 + WAIT_MS);
	gap = fake.claims[first + n + 2].at_ms -
	    fake.claims[first + n + 1].at_ms;
	ck_assert_uint_ge(gap, 125 - EARLY_MS);
	ck_assert_uint_lt(gap, 1000);
	ck_assert(log_has("redis fake:1: back (after 'cannot load: "
	    "Connection refused', seen 6 more times)"));
	ck_assert_uint_eq(nstandby, 1);
}
END_TEST

/* A standby claims every poll, then takes over with a new epoch. */
START_TEST(test_standby)
{
	struct persist_stats	 st;
	uint64_t		 tok, poll = 500 / 4;
	size_t			 i;

	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 4;
	fake.claim_addr = "10.0.0.1:7313";
	start("sync", "yes", "500ms");
	WAIT_FOR(nstandby == 1, WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.role, "standby");
	ck_assert_str_eq(st.state, "standby");
	ck_assert_uint_eq(st.epoch, 4);
	ck_assert_str_eq(st.owner, "10.0.0.1:7313");
	ck_assert_int_eq(persist_role(persist), ROLE_STANDBY);

	WAIT_FOR(fake.nclaims >= 5, 10 * poll + WAIT_MS);
	for (i = 0; i < fake.nclaims; i++) {
		ck_assert_str_eq(fake.claims[i].addr, ADDR);
		ck_assert_uint_eq(fake.claims[i].resume_epoch, 0);
		ck_assert_int_eq(fake.claims[i].resume_only, 0);
		if (i > 0)
			ck_assert_uint_ge(fake.claims[i].at_ms,
			    fake.claims[i - 1].at_ms + poll - EARLY_MS);
	}
	ck_assert_uint_eq(nstandby, 1);
	ck_assert_uint_eq(nloaded, 0);
	ck_assert_uint_eq(fake.nloads, 0);
	ck_assert_uint_eq(fake.nconnects, 0);

	/* The owner died: the claim is ours, with the next epoch. */
	script_load_sem("jobs", 2);
	script_load_lease("jobs", 40, 1, NULL, NULL);
	fake.auto_ready = 1;
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 5;
	WAIT_FOR(nloaded == 1, WAIT_MS);
	fake.ev->renewed(fake.ctx, fake_now);
	stats(&st);
	ck_assert_str_eq(st.role, "owner");
	ck_assert_uint_eq(st.epoch, 5);
	ck_assert_str_eq(st.owner, ADDR);
	ck_assert_ptr_nonnull(engine_grant_by_token(engine, 40));
	ck_assert(log_has("took over fake db 0 prefix t: with epoch 5"));
	WAIT_FOR(fake.ready, WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.state, "ok");
	ck_assert_uint_eq(nstandby, 1);
	ck_assert_int_eq(acquire("jobs", &tok), PERR_NONE);
	ck_assert_uint_gt(tok, 40);
}
END_TEST

/*
 * sync: Redis down while we still own the data set. The batch in flight
 * fails, its grant is undone and answered ERR, grants are held; once
 * Redis is back, grants flow and the failed objects are written again.
 */
START_TEST(test_outage_sync)
{
	struct persist_stats	 st;
	uint64_t		 t1, tok;

	gain("sync", "3s");
	t1 = acquire_await("jobs", 41);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	ck_assert(batch_has(0, STORE_GRANT_PUT, "jobs", t1));

	fake_fail("connection reset");
	ck_assert_uint_eq(nanswers, 1);
	ck_assert_uint_eq(answers[0].conn_id, 41);
	ck_assert_int_eq(answers[0].ok, 0);
	ck_assert_ptr_null(engine_grant_by_token(engine, t1));
	stats(&st);
	ck_assert_str_eq(st.role, "owner");
	ck_assert_str_eq(st.state, "down");
	ck_assert_str_eq(st.last_error, "connection reset");
	ck_assert_uint_eq(st.failures, 1);
	ck_assert_int_eq(persist_unavailable(persist), 1);
	ck_assert_int_eq(acquire("jobs", &tok), PERR_UNAVAILABLE);
	run_ms(50);
	ck_assert_uint_eq(fake.nbatches, 1);

	fake_ready();
	stats(&st);
	ck_assert_str_eq(st.state, "ok");
	ck_assert_int_eq(persist_unavailable(persist), 0);
	WAIT_FOR(fake.nbatches == 2, WAIT_MS);
	ck_assert(batch_has(1, STORE_GRANT_DEL, "jobs", t1));
	ck_assert(batch_has(1, STORE_SEM_PUT, "jobs", 0));
	fake_ack(1);
	ck_assert_int_eq(acquire("jobs", &tok), PERR_NONE);
	ck_assert_uint_gt(tok, t1);
	ck_assert_uint_eq(nlost, 0);
	ck_assert_uint_eq(fake.ndisconnects, 0);
}
END_TEST

/* async: grants go on while Redis is down; the failed batch is redone. */
START_TEST(test_outage_async)
{
	struct persist_stats	 st;
	uint64_t		 t1, t2;
	struct sem		*s;

	gain("async", "3s");
	ck_assert_int_eq(persist_defers_replies(persist), 0);
	ck_assert_int_eq(engine_create(engine, "a", 1, 1, &s), PERR_NONE);
	ck_assert_int_eq(acquire("a", &t1), PERR_NONE);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	ck_assert(batch_has(0, STORE_SEM_PUT, "a", 0));
	ck_assert(batch_has(0, STORE_GRANT_PUT, "a", t1));

	fake_fail("connection reset");
	stats(&st);
	ck_assert_str_eq(st.state, "down");
	ck_assert_uint_eq(st.backlog, 3);	/* a, jobs, t1 */
	ck_assert_int_eq(persist_unavailable(persist), 0);
	ck_assert_int_eq(acquire("jobs", &t2), PERR_NONE);
	run_ms(50);
	ck_assert_uint_eq(fake.nbatches, 1);

	fake_ready();
	WAIT_FOR(fake.nbatches == 2, WAIT_MS);
	ck_assert(batch_has(1, STORE_SEM_PUT, "a", 0));
	ck_assert(batch_has(1, STORE_GRANT_PUT, "a", t1));
	ck_assert(batch_has(1, STORE_GRANT_PUT, "jobs", t2));
	fake_ack(1);
	stats(&st);
	ck_assert_uint_eq(st.backlog, 0);
	ck_assert_uint_eq(st.batches, 1);
	ck_assert_uint_eq(nlost, 0);
}
END_TEST

/*
 * A heartbeat finds Redis's token bound gone back (flushed under us):
 * reconnect, and rewrite Redis whole, deleting what it holds first.
 */
START_TEST(test_lost_data)
{
	struct persist_stats	 st;
	char			*names[] = { "gone" };
	uint64_t		 t1;
	size_t			 i;
	struct sem		*s;

	gain("async", "3s");
	ck_assert_int_eq(engine_create(engine, "a", 1, 1, &s), PERR_NONE);
	ck_assert_int_eq(acquire("a", &t1), PERR_NONE);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	fake_ack(1);
	fake.ev->heartbeat(fake.ctx, fake.bound);
	ck_assert_uint_eq(fake.nreconnects, 0);

	fake.bound = 0;
	fake.ready_names = names;
	fake.nready_names = 1;
	fake.ev->heartbeat(fake.ctx, fake.bound);
	ck_assert_uint_eq(fake.nreconnects, 1);
	stats(&st);
	ck_assert_str_eq(st.state, "down");
	ck_assert_int_eq(st.resync, 1);

	fake_ready();
	WAIT_FOR(fake.nbatches == 2, WAIT_MS);
	ck_assert(batch_has(1, STORE_SEM_DEL, "gone", 0));
	ck_assert(batch_has(1, STORE_SEM_PUT, "a", 0));
	ck_assert(batch_has(1, STORE_SEM_PUT, "jobs", 0));
	ck_assert(batch_has(1, STORE_GRANT_PUT, "a", t1));
	for (i = 0; i < fake.batches[1].n; i++) {
		if (fake.batches[1].ch[i].type == STORE_TOKENS)
			break;
	}
	ck_assert_uint_lt(i, fake.batches[1].n);
	ck_assert_uint_gt(fake.batches[1].ch[i].token, t1);
	fake_ack(1);
	stats(&st);
	ck_assert_int_eq(st.resync, 0);
	ck_assert_str_eq(st.state, "ok");
}
END_TEST

/*
 * A clean shutdown writes what the loop had no turn left to send, and
 * gives the data set up last, so that a standby may take over at once.
 */
START_TEST(test_shutdown_writes)
{
	struct fake_batch	*b;
	uint64_t		 tok;

	gain("async", "500ms");
	ck_assert_int_eq(acquire("jobs", &tok), PERR_NONE);
	persist_free(persist);
	persist = NULL;
	ck_assert_uint_eq(fake.nblocking, 1);
	b = &fake.batches[fake.nbatches - 1];
	ck_assert(batch_has(fake.nbatches - 1, STORE_GRANT_PUT, "jobs", tok));
	ck_assert_int_eq(b->ch[b->n - 1].type, STORE_DISOWN);
	ck_assert_uint_eq(fake.ndestroys, 1);
	ck_assert(log_has("gave up ownership (epoch 1)"));
}
END_TEST

/*
 * The owner's process was stopped (or its loop busy) past its deadline
 * with a batch in flight: the deadline's timer has not run, and the
 * acknowledgement arrives first. It proves nothing: the grant is not
 * answered, and ownership is given up before anything else happens.
 */
START_TEST(test_late_ack)
{
	uint64_t	t0, lease = 1000;

	gain("sync", "1s");
	t0 = fake.claims[0].at_ms;
	(void)acquire_await("jobs", 21);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	/* Stopped: no loop turn, so the deadline's timer cannot fire. */
	fake_jump(t0 + lease - fake_now);
	ck_assert_uint_eq(nlost, 0);
	fake_ack(1);
	ck_assert_uint_eq(nlost, 1);
	ck_assert_uint_eq(nanswers, 0);
	ck_assert_int_eq(persist_role(persist), ROLE_STANDBY);
	ck_assert_uint_eq(fake.ndisconnects, 1);
	ck_assert_str_eq(lost_error,
	    "could not renew it within owner-lease (1000 ms)");
}
END_TEST

/* Any answer checks the deadline first: persist_owner_check. */
START_TEST(test_owner_check)
{
	uint64_t	t0, lease = 1000, margin = 100;

	gain("sync", "1s");
	t0 = fake.claims[0].at_ms;
	ck_assert_int_eq(persist_owner_check(persist), 1);
	ck_assert_uint_eq(nlost, 0);
	fake_jump(t0 + lease - margin - fake_now);
	ck_assert_int_eq(persist_owner_check(persist), 0);
	ck_assert_uint_eq(nlost, 1);
	/* A standby answers as a standby: nothing to give up. */
	ck_assert_int_eq(persist_owner_check(persist), 1);
	ck_assert_uint_eq(nlost, 1);
}
END_TEST

/*
 * Redis lost its epoch counter while this standby watched epoch 5 and a
 * token bound of 7000: it does not take the data set until the counter
 * is back, asks with its least epoch, and its tokens continue above.
 */
START_TEST(test_epoch_lost)
{
	uint64_t	tok;
	size_t		n;

	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 5;
	fake.claim_tokens = 7000;
	fake.claim_addr = "10.0.0.1:7313";
	start("sync", "yes", "500ms");
	WAIT_FOR(nstandby == 1, WAIT_MS);

	fake.claim_answer = CLAIM_EPOCH_LOST;
	fake.claim_epoch = 0;
	fake.claim_tokens = 0;
	n = fake.nclaims;
	WAIT_FOR(fake.nclaims >= n + 4, WAIT_MS);
	ck_assert_uint_eq(fake.claims[fake.nclaims - 1].least_epoch, 5);
	ck_assert_uint_eq(fake.nloads, 0);
	ck_assert(log_has("below epoch 5 which this daemon has seen"));
	ck_assert(log_has("redis-cli SET semd:epoch 5"));
	/* Said once, then counted (log_repeat). */
	ck_assert_uint_eq(log_count("below epoch 5"), 1);

	/* An operator set the counter: the next claim is ours. */
	fake.auto_ready = 1;
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 6;
	WAIT_FOR(nloaded == 1, WAIT_MS);
	WAIT_FOR(fake.ready, WAIT_MS);
	ck_assert_int_eq(acquire("jobs", &tok), PERR_NONE);
	ck_assert_uint_gt(tok, 7000);
}
END_TEST

/* Our own key, from a claim whose answer we never saw: wait, no exit. */
START_TEST(test_own_key_waits)
{
	fake.claim_answer = CLAIM_WAIT;
	fake.claim_epoch = 3;
	start("sync", "no", "500ms");
	WAIT_FOR(fake.nclaims >= 4, WAIT_MS);
	ck_assert_uint_eq(fake.nloads, 0);
	ck_assert_uint_eq(nstandby, 0);
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 4;
	WAIT_FOR(nloaded == 1, WAIT_MS);
}
END_TEST

/*
 * A standby's takeover load fails: its client connections go (hooks->lost
 * clears the engine with them, no abort), it says why once and claims
 * again after a backoff; once the key is repaired it takes over.
 */
START_TEST(test_load_fails)
{
	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 4;
	fake.claim_addr = "10.0.0.1:7313";
	start("sync", "yes", "500ms");
	WAIT_FOR(nstandby == 1, WAIT_MS);

	fake.load_fail = 1;
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 5;
	WAIT_FOR(fake.nloads == 1, WAIT_MS);
	ck_assert_uint_eq(nlost, 1);
	ck_assert_uint_eq(nloaded, 0);
	ck_assert_int_eq(persist_role(persist), ROLE_STANDBY);
	WAIT_FOR(fake.nloads == 2, 1000 + WAIT_MS);
	ck_assert_uint_ge(fake.claims[fake.nclaims - 1].at_ms,
	    fake.claims[fake.nclaims - 2].at_ms + 1000 - EARLY_MS);
	ck_assert_uint_eq(log_count("is not a hash"), 1);

	fake.load_fail = 0;
	fake.auto_ready = 1;
	WAIT_FOR(nloaded == 1, 2000 + WAIT_MS);
	ck_assert(log_has("back (after 'cannot load: key t:{jobs}:grants"));
}
END_TEST

/*
 * A semaphore whose own key was damaged keeps its grants and gets what
 * they hold as its capacity; Redis is rewritten from memory.
 */
START_TEST(test_damaged_sem)
{
	struct sem	*s;

	script_load_damaged("b");
	script_load_lease("b", 40, 2, NULL, NULL);
	script_load_lease("b", 41, 1, NULL, NULL);
	fake.load_repair = 1;
	fake.auto_ready = 1;
	gain("sync", "3s");
	s = engine_find(engine, "b", 1);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(s->capacity, 3);
	ck_assert_uint_eq(s->used, 3);
	ck_assert(log_has("semaphore b had a damaged key"));
	WAIT_FOR(fake.nbatches >= 1, WAIT_MS);
	ck_assert(batch_has(0, STORE_SEM_PUT, "b", 0));
}
END_TEST

/*
 * A batch refused by Redis was not written: "nothing was granted". One
 * Redis did not answer may have been: its grant is undone all the same,
 * the answer says the outcome is unknown, and its removal is written.
 */
START_TEST(test_outcomes)
{
	uint64_t	a, b;

	gain("sync", "3s");
	a = acquire_await("jobs", 21);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	fake_fail("test: no answer");
	ck_assert_uint_eq(nanswers, 1);
	ck_assert_int_eq(answers[0].outcome, PERSIST_UNKNOWN);
	ck_assert_ptr_null(engine_grant_by_token(engine, a));
	fake_ready();
	WAIT_FOR(fake.nbatches >= 2, WAIT_MS);
	ck_assert(batch_has(1, STORE_GRANT_DEL, "jobs", a));
	fake_ack(1);

	b = acquire_await("jobs", 22);
	WAIT_FOR(fake.nbatches >= 3, WAIT_MS);
	fake_fence("10.0.0.9:7313");
	ck_assert_uint_eq(nanswers, 1);	/* closed by lost: not answered */
	(void)b;
}
END_TEST

/* The change of batch i that writes token's part on sem, or NULL. */
static const struct store_change *
batch_part(size_t i, const char *sem, uint64_t token)
{
	size_t	j;

	for (j = 0; j < fake.batches[i].n; j++) {
		const struct store_change *c = &fake.batches[i].ch[j];

		if (c->type == STORE_GRANT_PUT && c->token == token &&
		    strcmp(c->sem, sem) == 0)
			return (c);
	}
	return (NULL);
}

/* A leased ACQUIREALL of jobs and gpu, with request ID id. */
static enum proto_err
acquire_all(uint32_t n_jobs, uint32_t n_gpu, const char *id,
    enum acquire_status *st, struct grant **g)
{
	struct engine_part	parts[2] = {
		{ engine_find(engine, "jobs", 4), n_jobs },
		{ engine_find(engine, "gpu", 3), n_gpu } };
	struct engine_request	r = { .owner = client, .parts = parts,
				    .nparts = 2, .timeout_ms = 0,
				    .lease_ms = 60000, .id = id,
				    .id_len = strlen(id) };

	return (engine_acquire_req(engine, &r, st, g));
}

/*
 * An ACQUIREALL grant is written whole in one batch: a part in each
 * semaphore's grants, each with its n, the count and the request ID.
 * A repeat waits for the write too, but its failure undoes nothing.
 * Its release deletes every part in one batch.
 */
START_TEST(test_multi_batch)
{
	const struct store_change	*cj, *cg;
	enum acquire_status		 st;
	struct grant			*g, *g2;
	uint64_t			 t;

	gain("sync", "3s");
	ck_assert_int_eq(engine_create(engine, "gpu", 3, 1, NULL), PERR_NONE);
	ck_assert_int_eq(acquire_all(2, 1, "job-7", &st, &g), PERR_NONE);
	ck_assert_int_eq(st, ACQUIRE_GRANTED);
	t = g->token;
	persist_await(persist, 31, AWAIT_GRANT, t, 0);
	WAIT_FOR(fake.nbatches == 1, WAIT_MS);
	cj = batch_part(0, "jobs", t);
	cg = batch_part(0, "gpu", t);
	ck_assert_ptr_nonnull(cj);
	ck_assert_ptr_nonnull(cg);
	ck_assert_uint_eq(cj->n, 2);
	ck_assert_uint_eq(cg->n, 1);
	ck_assert_uint_eq(cj->multi, 2);
	ck_assert_uint_eq(cg->multi, 2);
	ck_assert_str_eq(cj->id, "job-7");
	ck_assert_str_eq(cg->id, "job-7");
	ck_assert_int_eq(cg->kind, STORE_KIND_LEASE);
	/* A repeat before the first answer: answered with it, in order. */
	ck_assert_int_eq(acquire_all(2, 1, "job-7", &st, &g2), PERR_NONE);
	ck_assert_int_eq(st, ACQUIRE_REPEATED);
	ck_assert_ptr_eq(g2, g);
	persist_await(persist, 32, AWAIT_REPEAT, t, 0);
	fake_ack(1);
	WAIT_FOR(fake.nbatches == 2, WAIT_MS);
	fake_ack(1);
	ck_assert_uint_eq(nanswers, 2);
	ck_assert_int_eq(answers[1].kind, AWAIT_REPEAT);
	ck_assert_uint_eq(answers[1].token, t);
	ck_assert(answers[1].ok);
	/* A repeat whose batch fails: ERR, and the lease stays. */
	persist_await(persist, 33, AWAIT_REPEAT, t, 0);
	WAIT_FOR(fake.nbatches == 3, WAIT_MS);
	fake_fail("test: refused");
	ck_assert_uint_eq(nanswers, 3);
	ck_assert(!answers[2].ok);
	ck_assert_ptr_eq(engine_grant_by_token(engine, t), g);
	fake_ready();
	/* Released through one semaphore: both parts go, in one batch. */
	ck_assert_int_eq(engine_release(engine, engine_find(engine, "gpu", 3),
	    t, NULL), PERR_NONE);
	WAIT_FOR(fake.nbatches >= 4, WAIT_MS);
	ck_assert(batch_has(fake.nbatches - 1, STORE_GRANT_DEL, "jobs", t));
	ck_assert(batch_has(fake.nbatches - 1, STORE_GRANT_DEL, "gpu", t));
}
END_TEST

/* A part of an ACQUIREALL grant as Redis holds it. */
static void
script_load_part(const char *sem, uint64_t token, uint32_t n,
    uint32_t multi, const char *id)
{
	script_load_lease(sem, token, n, NULL, NULL);
	fake.load_grants[fake.nload_grants - 1].multi = multi;
	fake.load_grants[fake.nload_grants - 1].id = id;
}

/*
 * A load joins the parts under one grant with its ID, so a repeat after
 * the restart learns its token. A grant missing a part is restored with
 * the parts found (they stay held), and Redis is rewritten.
 */
START_TEST(test_multi_load)
{
	struct sem		*b, *c;
	struct grant		*g;
	enum acquire_status	 st;

	script_load_sem("b", 2);
	script_load_sem("c", 1);
	script_load_part("b", 50, 2, 2, "x");
	script_load_part("c", 50, 1, 2, "x");
	script_load_part("c", 52, 1, 3, NULL);	/* its 2 others are lost */
	fake.auto_ready = 1;
	gain("sync", "3s");
	b = engine_find(engine, "b", 1);
	c = engine_find(engine, "c", 1);
	g = engine_grant_by_token(engine, 50);
	ck_assert_ptr_nonnull(g);
	ck_assert_uint_eq(g->nparts, 2);
	ck_assert_ptr_eq(engine_find_grant(engine, c, 50)->lead, g);
	ck_assert_uint_eq(b->used, 2);
	ck_assert_uint_eq(c->used, 2);		/* 50 and what is left of 52 */
	ck_assert_str_eq(g->id, "x");
	ck_assert_ptr_nonnull(engine_grant_by_token(engine, 52));
	ck_assert(log_has("grant 52 holds 3 semaphores but only 1"));
	/* Rewritten from memory: 52 as what it is now. */
	WAIT_FOR(fake.nbatches >= 1, WAIT_MS);
	ck_assert_ptr_nonnull(batch_part(0, "c", 52));
	ck_assert_uint_eq(batch_part(0, "c", 52)->multi, 1);
	ck_assert_uint_eq(batch_part(0, "b", 50)->multi, 2);
	/* The ID came back: a repeat of x is answered 50. */
	{
		struct engine_part	parts[2] = { { c, 1 }, { b, 2 } };
		struct engine_request	r = { .owner = client, .parts = parts,
					    .nparts = 2, .timeout_ms = 0,
					    .lease_ms = 1000, .id = "x",
					    .id_len = 1 };

		ck_assert_int_eq(engine_acquire_req(engine, &r, &st, &g),
		    PERR_NONE);
		ck_assert_int_eq(st, ACQUIRE_REPEATED);
		ck_assert_uint_eq(g->token, 50);
	}
}
END_TEST

/*
 * The ownership states a standby goes through when it takes over and
 * loses the data set again, as STATS shows them (owner.c's table allows
 * exactly these steps; any other aborts).
 */
START_TEST(test_states)
{
	struct persist_stats	st;

	fake.claim_answer = CLAIM_ERROR;
	start("sync", "yes", "500ms");
	stats(&st);
	ck_assert_str_eq(st.ownership, "claiming");
	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 4;
	fake.claim_addr = "10.0.0.1:7313";
	WAIT_FOR(nstandby == 1, WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.ownership, "standby");
	fake.auto_ready = 1;
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 5;
	WAIT_FOR(nloaded == 1, WAIT_MS);
	stats(&st);
	ck_assert_str_eq(st.ownership, "owner");
	ck_assert_str_eq(st.role, "owner");
	fake.claim_answer = CLAIM_OWNED;
	fake.claim_epoch = 6;
	WAIT_FOR(nlost == 1, 500 + WAIT_MS);	/* nothing renews it */
	stats(&st);
	ck_assert_str_eq(st.ownership, "lost");
	ck_assert_str_eq(st.role, "standby");
	WAIT_FOR(fake.nclaims > 0 && fake.claims[fake.nclaims - 1].at_ms >=
	    lost_at_ms + 500, 500 + WAIT_MS);
	run_ms(10);
	stats(&st);
	ck_assert_str_eq(st.ownership, "standby");
	ck_assert_uint_eq(st.epoch, 6);
	ck_assert_str_eq(ownership_state_name(OWN_WAITING), "waiting");
	ck_assert_str_eq(ownership_state_name(OWN_EXITING), "exiting");
	ck_assert_str_eq(ownership_state_name(OWN__COUNT), "?");
}
END_TEST

static Suite *
persist_suite(int forking)
{
	Suite	*su = suite_create("persist");
	TCase	*tc = tcase_create("persist");
	TCase	*te;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_gained);
	tcase_add_test(tc, test_renewed);
	tcase_add_test(tc, test_lost);
	tcase_add_test(tc, test_fenced);
	tcase_add_test(tc, test_regained);
	tcase_add_test(tc, test_standby);
	tcase_add_test(tc, test_dead_owner_at_start);
	tcase_add_test(tc, test_claim_backoff);
	tcase_add_test(tc, test_outage_sync);
	tcase_add_test(tc, test_outage_async);
	tcase_add_test(tc, test_lost_data);
	tcase_add_test(tc, test_shutdown_writes);
	tcase_add_test(tc, test_late_ack);
	tcase_add_test(tc, test_owner_check);
	tcase_add_test(tc, test_epoch_lost);
	tcase_add_test(tc, test_own_key_waits);
	tcase_add_test(tc, test_load_fails);
	tcase_add_test(tc, test_damaged_sem);
	tcase_add_test(tc, test_outcomes);
	tcase_add_test(tc, test_multi_batch);
	tcase_add_test(tc, test_multi_load);
	tcase_add_test(tc, test_states);
	suite_add_tcase(su, tc);

	/* fatalx would end the runner itself without fork. */
	if (!forking)
		return (su);
	te = tcase_create("exit");
	tcase_add_checked_fixture(te, setup, teardown);
	tcase_set_timeout(te, 30);
	tcase_add_exit_test(te, test_superseded, EXIT_FATALX);
	tcase_add_exit_test(te, test_owned_after_loss, EXIT_FATALX);
	tcase_add_exit_test(te, test_live_owner_at_start, EXIT_FATALX);
	suite_add_tcase(su, te);
	return (su);
}

int
main(void)
{
	SRunner	*sr = srunner_create(NULL);
	int	 failed, forking;

	forking = srunner_fork_status(sr) != CK_NOFORK;
	if (!forking)
		printf("CK_FORK=no: the exit tests are left out\n");
	srunner_add_suite(sr, persist_suite(forking));
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
