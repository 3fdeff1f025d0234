/*
 * test_conn.c: conn.c without a network: over bufferevent_pair_new(),
 * and over a Unix socketpair for its end-of-turn writes to a socket.
 *
 * Each test builds a server by hand (engine, timers, persistence none or
 * sync on a tiny fake store that the test acknowledges), attaches one or
 * more connections to one end of a bufferevent pair and plays the client
 * on the other end: framing at and over max-line, lines split across
 * reads, the per-turn line and time budgets, CR handling, EOF while
 * waiting on the engine or the store, max-output and max-output-total, the
 * time limits. Between them the tests
 * take every transition of conn.c's state table, so removing one makes
 * conn_set_state() fail a test.
 */
#include <sys/socket.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "cmd.h"
#include "config.h"
#include "conn.h"
#include "engine.h"
#include "engine_fake.h"
#include "log.h"
#include "persist.h"
#include "server.h"
#include "store.h"
#include "store_fake.h"

static struct config		 cfg;

/* Batches sent and not yet answered (store_fake.h). */
#define IN_FLIGHT()	((int)(fake.nbatches - fake.nacked))

/* --- a server without listeners --- */

static struct server		 srv;

static struct event_base	*base;

static void
noop(void *arg)
{
	(void)arg;
}

/* As server.c's: the config file's semaphores go in once loaded. */
static void
loaded(void *arg)
{
	size_t	i;

	(void)arg;
	for (i = 0; i < cfg.nsems; i++)
		engine_create(srv.engine, cfg.sems[i].name,
		    strlen(cfg.sems[i].name), cfg.sems[i].capacity, NULL);
}

static void
engine_event(void *ctx, const struct engine_event *ev)
{
	persist_observe(srv.persist, ev);
	cmd_engine_event(ctx, ev);
}

/*
 * Run for ms milliseconds of the fake clock (engine_fake.h), a millisecond
 * at a time, running the loop without blocking in between: what the
 * connections, the bufferevent pairs and persist do "at once" happens,
 * and conn.c's sweep and the engine's timers fire as the clock passes
 * them. At least one turn.
 */
static void
spin(int ms)
{
	uint64_t	end = fake_now + (uint64_t)ms;
	int		i;

	do {
		for (i = 0; i < 3; i++)
			event_base_loop(base, EVLOOP_NONBLOCK);
		fake_advance(1);
	} while (fake_now < end);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

static const struct server_hooks conn_hooks = {
	.dispatch = cmd_dispatch,
	.closing = cmd_watch_drop,
};

/* A server from "--directive value" words (NULL-terminated). */
static void
server_up(const char *first, ...)
{
	static const struct persist_hooks hooks = { loaded, noop, noop, noop };
	char		*argv[32], err[256];
	int		 argc = 0;
	enum config_action action;
	const char	*w;
	uint64_t	 end;
	va_list		 ap;

	argv[argc++] = (char *)"semd";
	va_start(ap, first);
	for (w = first; w != NULL && argc < 31; w = va_arg(ap, const char *))
		argv[argc++] = (char *)w;
	va_end(ap);
	argv[argc] = NULL;
	ck_assert_int_eq(config_load(&cfg, argc, argv, &action, err,
	    sizeof(err)), 0);
	base = event_base_new();
	/*
	 * The store: a claim that is ours at once, ready on the next turn,
	 * persistence-pipeline batches in flight.
	 */
	fake_free_batches();
	memset(&fake, 0, sizeof(fake));
	fake.claim_answer = CLAIM_OURS;
	fake.claim_epoch = 1;
	fake.claim_inline = 1;
	fake.auto_ready = 1;
	fake.depth = (unsigned)cfg.persistence_pipeline;
	memset(&srv, 0, sizeof(srv));
	srv.cfg = &cfg;
	srv.base = base;
	srv.hooks = &conn_hooks;
	fake_reset(1000000);
	srv.clock = fake_clock;
	srv.start_ms = fake_now;
	srv.engine = engine_new(&srv.clock, engine_event, &srv, 0);
	srv.persist = persist_new(&cfg, base, &srv.clock, srv.engine, &fake_ops,
	    cmd_persisted, &srv);
	persist_start(srv.persist, &hooks, &srv);
	conn_service_start(&srv);
	/* Let the claim (a timer, due at once) and the fake store's ready
	 * happen, and acknowledge the start-up batch (the config's
	 * semaphores). */
	end = fake_now + 2000;
	do
		spin(1);
	while (persist_role(srv.persist) == ROLE_STANDBY && fake_now < end);
	event_base_loop(base, EVLOOP_NONBLOCK);
	if (IN_FLIGHT()) {
		fake_ack(1);
		event_base_loop(base, EVLOOP_NONBLOCK);
	}
}

static void
server_down(void)
{
	engine_hold_grants(srv.engine, 1);
	persist_free(srv.persist);
	conn_free_all(&srv);
	conn_service_stop(&srv);
	engine_free(srv.engine);
	fake_free_batches();
	fake_reset(0);
	event_base_free(base);
	config_free(&cfg);
}

/* --- the client's end --- */

struct client {
	struct bufferevent	*bev;	/* ours; the conn has the other end */
	uint64_t		 id;	/* the connection's */
	int			 eof;
};

static void
client_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct client	*cl = arg;

	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		cl->eof = 1;
}

static void
client_new(struct client *cl)
{
	struct bufferevent	*pair[2];
	struct conn		*c;

	memset(cl, 0, sizeof(*cl));
	ck_assert_int_eq(bufferevent_pair_new(base, 0, pair), 0);
	c = conn_new(&srv, pair[0], "test:1");
	cl->id = c->id;
	cl->bev = pair[1];
	bufferevent_setcb(cl->bev, NULL, NULL, client_event_cb, cl);
	bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}

/*
 * As client_new, over a Unix socketpair: the connection then writes its
 * replies to the socket itself at the end of each turn. sndbuf > 0 makes
 * its send buffer that small, so that a long reply fills it.
 */
static void
client_new_socket(struct client *cl, int sndbuf)
{
	evutil_socket_t	 fds[2];
	struct conn	*c;

	memset(cl, 0, sizeof(*cl));
	ck_assert_int_eq(evutil_socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
	ck_assert_int_eq(evutil_make_socket_nonblocking(fds[0]), 0);
	ck_assert_int_eq(evutil_make_socket_nonblocking(fds[1]), 0);
	if (sndbuf > 0)
		ck_assert_int_eq(setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF,
		    &sndbuf, sizeof(sndbuf)), 0);
	c = conn_new(&srv, bufferevent_socket_new(base, fds[0],
	    BEV_OPT_CLOSE_ON_FREE), "test:2");
	cl->id = c->id;
	cl->bev = bufferevent_socket_new(base, fds[1], BEV_OPT_CLOSE_ON_FREE);
	ck_assert_ptr_nonnull(cl->bev);
	bufferevent_setcb(cl->bev, NULL, NULL, client_event_cb, cl);
	bufferevent_enable(cl->bev, EV_READ | EV_WRITE);
}

/* 1 when c's bufferevent waits for room to write (EV_WRITE enabled). */
static int
conn_waits_to_write(struct conn *c)
{
	return ((bufferevent_get_enabled(c->bev) & EV_WRITE) != 0);
}

static void
client_send(struct client *cl, const char *text)
{
	bufferevent_write(cl->bev, text, strlen(text));
}



/* The next reply line, without CRLF, into buf; 0 when none yet. */
static int
client_line(struct client *cl, char *buf, size_t len)
{
	struct evbuffer	*in = bufferevent_get_input(cl->bev);
	size_t		 n;
	char		*line;

	if ((line = evbuffer_readln(in, &n, EVBUFFER_EOL_CRLF)) == NULL)
		return (0);
	snprintf(buf, len, "%s", line);
	free(line);
	return (1);
}

/* Wait up to 2 s for the next line and compare it with want. */
static void
expect_line(struct client *cl, const char *want)
{
	char		buf[512];
	uint64_t	end = fake_now + 2000;

	while (!client_line(cl, buf, sizeof(buf))) {
		ck_assert_msg(fake_now < end, "no reply, wanted '%s'",
		    want);
		spin(1);
	}
	ck_assert_str_eq(buf, want);
}

static int
lines_pending(struct client *cl)
{
	struct evbuffer		*in = bufferevent_get_input(cl->bev);
	struct evbuffer_ptr	 p;
	int			 n = 0;

	evbuffer_ptr_set(in, &p, 0, EVBUFFER_PTR_SET);
	for (;;) {
		p = evbuffer_search(in, "\n", 1, &p);
		if (p.pos < 0)
			return (n);
		n++;
		evbuffer_ptr_set(in, &p, 1, EVBUFFER_PTR_ADD);
	}
}

static struct conn *
conn_of(struct client *cl)
{
	return (conn_find(&srv, cl->id));
}

/* The connection is torn down within 2 s. */
static void
expect_gone(struct client *cl)
{
	uint64_t	end = fake_now + 2000;

	while (conn_of(cl) != NULL) {
		ck_assert_msg(fake_now < end, "connection %llu still "
		    "open (state %s)", (unsigned long long)cl->id,
		    conn_of(cl) != NULL ?
		    conn_state_name(conn_of(cl)->state) : "gone");
		spin(1);
	}
}

/* The client closes: EOF reaches the connection, then the end goes. */
static void
client_free(struct client *cl)
{
	if (cl->bev == NULL)
		return;
	bufferevent_flush(cl->bev, EV_WRITE, BEV_FINISHED);
	spin(1);
	bufferevent_free(cl->bev);
	cl->bev = NULL;
}

/* "PING" padded with blanks to exactly n bytes. */
static const char *
ping_of(size_t n, const char *end)
{
	static char	buf[8192];

	memset(buf, ' ', n);
	memcpy(buf, "PING", 4);
	snprintf(buf + n, sizeof(buf) - n, "%s", end);
	return (buf);
}

/* --- framing --- */

START_TEST(test_max_line_exactly)
{
	struct client	cl;

	server_up("--max-line", "64", NULL);
	client_new(&cl);
	client_send(&cl, ping_of(64, "\n"));
	expect_line(&cl, "OK PONG");
	client_send(&cl, ping_of(64, "\r\n"));	/* the CR does not count */
	expect_line(&cl, "OK PONG");
	ck_assert_int_eq(conn_of(&cl)->state, CONN_READY);
	client_free(&cl);
	server_down();
}
END_TEST

START_TEST(test_max_line_one_over)
{
	struct client	cl;

	server_up("--max-line", "64", NULL);
	client_new(&cl);
	client_send(&cl, ping_of(65, "\n"));
	expect_line(&cl, "ERR TOOLONG request line exceeds max-line (64 "
	    "bytes)");
	expect_gone(&cl);		/* READY -> CLOSING -> DEAD */
	client_free(&cl);
	server_down();
}
END_TEST

START_TEST(test_max_line_no_newline)
{
	struct client	cl;

	server_up("--max-line", "64", NULL);
	client_new(&cl);
	client_send(&cl, ping_of(64, "\r"));	/* may still end in "\n" */
	spin(20);
	ck_assert_int_eq(lines_pending(&cl), 0);
	ck_assert_ptr_nonnull(conn_of(&cl));
	client_send(&cl, "\n");
	expect_line(&cl, "OK PONG");
	client_send(&cl, ping_of(65, ""));	/* 65 bytes, no newline */
	expect_line(&cl, "ERR TOOLONG request line exceeds max-line (64 "
	    "bytes)");
	expect_gone(&cl);
	client_free(&cl);
	server_down();
}
END_TEST

START_TEST(test_split_lines)
{
	struct client	cl;

	server_up(NULL);
	client_new(&cl);
	client_send(&cl, "PI");
	spin(5);
	client_send(&cl, "NG\r");
	spin(5);
	ck_assert_int_eq(lines_pending(&cl), 0);
	client_send(&cl, "\nPING\nPI");
	expect_line(&cl, "OK PONG");
	expect_line(&cl, "OK PONG");
	client_send(&cl, "NG\n");
	expect_line(&cl, "OK PONG");
	client_free(&cl);
	server_down();
}
END_TEST

START_TEST(test_cr_handling)
{
	struct client	cl;

	server_up(NULL);
	client_new(&cl);
	client_send(&cl, "PING\r\n");
	expect_line(&cl, "OK PONG");
	client_send(&cl, "\r\n\n   \r\n");	/* blank lines: no reply */
	client_send(&cl, "PING\n");
	expect_line(&cl, "OK PONG");
	client_send(&cl, "PI\rNG\r\n");		/* a CR inside is a byte */
	expect_line(&cl, "ERR PROTO unknown command 'PI?NG'");
	client_free(&cl);
	server_down();
}
END_TEST

static struct client	*budget_busy;
static int		 budget_seen = -1;

/* The quiet client's first reply: how many had the busy one got then? */
static void
budget_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	(void)arg;
	if (budget_seen < 0)
		budget_seen = lines_pending(budget_busy);
}

START_TEST(test_line_budget)
{
	struct client	busy, quiet;
	char		many[1000 * 6 + 1];
	int		i;

	server_up(NULL);
	client_new(&busy);
	client_new(&quiet);
	bufferevent_setcb(quiet.bev, budget_read_cb, NULL, client_event_cb,
	    &quiet);
	budget_busy = &busy;
	for (i = 0; i < 1000; i++)
		memcpy(many + i * 6, "PING\r\n", 6);
	many[6000] = '\0';
	client_send(&busy, many);
	client_send(&quiet, "PING\r\n");
	spin(50);
	ck_assert_int_eq(lines_pending(&busy), 1000);
	/*
	 * A read callback takes CONN_LINES_PER_TURN lines, then yields: the
	 * quiet client is answered after a budget or two of the busy one's
	 * (depending on which callback libevent runs first), not after all
	 * 1000.
	 */
	ck_assert_int_gt(budget_seen, 0);
	ck_assert_int_le(budget_seen, 2 * CONN_LINES_PER_TURN);
	client_free(&busy);
	client_free(&quiet);
	server_down();
}
END_TEST

/* How many times text occurs in what the client has received. */
static int
client_count(struct client *cl, const char *text)
{
	struct evbuffer		*in = bufferevent_get_input(cl->bev);
	struct evbuffer_ptr	 p;
	int			 n = 0;

	evbuffer_ptr_set(in, &p, 0, EVBUFFER_PTR_SET);
	for (;;) {
		p = evbuffer_search(in, text, strlen(text), &p);
		if (p.pos < 0)
			return (n);
		n++;
		evbuffer_ptr_set(in, &p, 1, EVBUFFER_PTR_ADD);
	}
}

static struct client	*slow_busy;
static int		 slow_seen = -1;

/* The quiet client's reply: how many listings had the busy one got? */
static void
slow_read_cb(struct bufferevent *bev, void *arg)
{
	(void)bev;
	(void)arg;
	if (slow_seen < 0)
		slow_seen = client_count(slow_busy, "OK 5000\r\n");
}

START_TEST(test_turn_time_budget)
{
	struct client	busy, quiet;
	char		name[64];
	int		i;

	/* Room for every listing: only the turn's time budget stops it. */
	server_up("--max-output", "1gb", "--max-output-total", "2gb", NULL);
	for (i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "semaphore-%04d", i);
		engine_create(srv.engine, name, strlen(name), 1, NULL);
	}
	client_new(&busy);
	client_new(&quiet);
	bufferevent_setcb(quiet.bev, slow_read_cb, NULL, client_event_cb,
	    &quiet);
	slow_busy = &busy;
	for (i = 0; i < CONN_LINES_PER_TURN; i++)
		client_send(&busy, "LIST\n");
	client_send(&quiet, "PING\n");
	spin(100);
	while (client_count(&busy, "OK 5000\r\n") < CONN_LINES_PER_TURN)
		spin(10);
	/*
	 * A listing of 5000 semaphores takes far more than CONN_TURN_US / 8:
	 * the busy client's turn ends after a few of its 64 lines, and the
	 * quiet one is answered long before the last.
	 */
	ck_assert_int_ge(slow_seen, 0);
	ck_assert_int_le(slow_seen, 2 * 8);
	client_free(&busy);
	client_free(&quiet);
	server_down();
}
END_TEST

/* --- waiting, and EOF while waiting --- */

START_TEST(test_eof_while_waiting_on_engine)
{
	struct client	a, b;
	struct engine_stats st;

	server_up("--semaphore", "s", "1", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&a, "ACQUIRE s\n");
	expect_line(&a, "OK 1");
	client_send(&b, "ACQUIRE s\nPING\n");	/* PING waits behind it */
	spin(10);
	ck_assert_int_eq(conn_of(&b)->state, CONN_WAIT_ENGINE);
	ck_assert_int_eq(lines_pending(&b), 0);
	client_free(&b);			/* EOF while queued */
	spin(10);
	ck_assert_ptr_null(conn_of(&b));	/* WAIT_ENGINE -> DEAD */
	engine_get_stats(srv.engine, &st);
	ck_assert_uint_eq(st.waiters, 0);
	client_free(&a);
	server_down();
}
END_TEST

START_TEST(test_granted_after_wait)
{
	struct client	a, b;

	server_up("--semaphore", "s", "1", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&a, "ACQUIRE s\n");
	expect_line(&a, "OK 1");
	client_send(&b, "ACQUIRE s\nPING\n");
	spin(10);
	ck_assert_int_eq(conn_of(&b)->state, CONN_WAIT_ENGINE);
	client_send(&a, "RELEASE s 1\n");	/* WAIT_ENGINE -> READY */
	expect_line(&a, "OK");
	expect_line(&b, "OK 2");
	expect_line(&b, "OK PONG");		/* then the pipelined one */
	client_send(&b, "ACQUIRE s TIMEOUT 30\n");
	expect_line(&b, "TIMEOUT");		/* held by b itself */
	ck_assert_int_eq(conn_of(&b)->state, CONN_READY);
	client_free(&a);
	client_free(&b);
	server_down();
}
END_TEST

START_TEST(test_wait_store)
{
	struct client	a;

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "2", NULL);
	client_new(&a);
	client_send(&a, "ACQUIRE s\nPING\n");	/* READY -> WAIT_STORE */
	spin(10);
	ck_assert_int_eq(conn_of(&a)->state, CONN_WAIT_STORE);
	ck_assert_int_eq(lines_pending(&a), 0);
	fake_ack(1);				/* WAIT_STORE -> READY */
	expect_line(&a, "OK 1");
	expect_line(&a, "OK PONG");
	client_free(&a);
	server_down();
}
END_TEST

START_TEST(test_wait_engine_then_store)
{
	struct client	a, b;

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "1", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&a, "ACQUIRE s\n");
	spin(10);
	fake_ack(1);
	expect_line(&a, "OK 1");
	client_send(&b, "ACQUIRE s\n");
	spin(10);
	ck_assert_int_eq(conn_of(&b)->state, CONN_WAIT_ENGINE);
	client_send(&a, "RELEASE s 1\n");
	expect_line(&a, "OK");
	spin(10);
	/* Granted to b, being written: WAIT_ENGINE -> WAIT_STORE. */
	ck_assert_int_eq(conn_of(&b)->state, CONN_WAIT_STORE);
	fake_ack(1);
	expect_line(&b, "OK 2");
	client_free(&a);
	client_free(&b);
	server_down();
}
END_TEST

START_TEST(test_eof_while_waiting_on_store)
{
	struct client		a;
	struct engine_stats	st;

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "1", NULL);
	client_new(&a);
	client_send(&a, "ACQUIRE s\n");
	spin(10);
	ck_assert_int_eq(conn_of(&a)->state, CONN_WAIT_STORE);
	/* Half-closed: the grant being written is still answered. */
	bufferevent_flush(a.bev, EV_WRITE, BEV_FINISHED);
	spin(10);
	ck_assert_ptr_nonnull(conn_of(&a));
	fake_ack(1);
	expect_line(&a, "OK 1");
	expect_gone(&a);			/* then it closes */
	engine_get_stats(srv.engine, &st);
	ck_assert_uint_eq(st.grants, 0);	/* and its permit goes */
	client_free(&a);
	server_down();
}
END_TEST

START_TEST(test_killed_while_waiting_on_store)
{
	struct client	a, k;
	char		req[64];

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "1", NULL);
	client_new(&a);
	client_new(&k);
	client_send(&a, "ACQUIRE s\n");
	spin(10);
	ck_assert_int_eq(conn_of(&a)->state, CONN_WAIT_STORE);
	snprintf(req, sizeof(req), "KILL %llu\n", (unsigned long long)a.id);
	client_send(&k, req);			/* WAIT_STORE -> DEAD */
	expect_line(&k, "OK");
	expect_gone(&a);
	fake_ack(1);				/* nobody left to answer */
	client_free(&a);
	client_free(&k);
	server_down();
}
END_TEST

START_TEST(test_watching)
{
	struct client	a, w, x;

	server_up("--semaphore", "s", "2", NULL);
	client_new(&a);
	client_new(&w);
	client_new(&x);
	client_send(&a, "ACQUIRE s LEASE 60000\n");
	expect_line(&a, "OK 1");
	client_send(&w, "WATCH s 1\nPING\n");	/* READY -> WATCHING */
	client_send(&x, "WATCH s 1\n");
	spin(10);
	ck_assert_int_eq(conn_of(&w)->state, CONN_WATCHING);
	client_free(&x);			/* WATCHING -> DEAD */
	spin(10);
	ck_assert_ptr_null(conn_of(&x));
	client_send(&a, "REVOKE s 1\n");	/* WATCHING -> READY */
	expect_line(&a, "OK");
	expect_line(&w, "OK revoked");
	expect_line(&w, "OK PONG");
	client_free(&a);
	client_free(&w);
	server_down();
}
END_TEST

START_TEST(test_quit_flushes)
{
	struct client	a;

	server_up(NULL);
	client_new(&a);
	client_send(&a, "PING\nQUIT\nPING\n");	/* READY -> CLOSING -> DEAD */
	expect_line(&a, "OK PONG");
	expect_line(&a, "OK");
	expect_gone(&a);
	ck_assert_int_eq(lines_pending(&a), 0);	/* nothing after QUIT */
	client_free(&a);
	server_down();
}
END_TEST

/* --- writing to a socket at the end of the turn --- */

START_TEST(test_socket_direct_write)
{
	struct client	a;

	server_up(NULL);
	client_new_socket(&a, 0);
	client_send(&a, "PING\nPING\nPING\n");
	expect_line(&a, "OK PONG");
	expect_line(&a, "OK PONG");
	expect_line(&a, "OK PONG");
	/* Written straight to the socket: no write event was left armed. */
	ck_assert_int_eq(conn_waits_to_write(conn_of(&a)), 0);
	client_send(&a, "PING\nQUIT\nPING\n");
	expect_line(&a, "OK PONG");
	expect_line(&a, "OK");
	expect_gone(&a);
	ck_assert_int_eq(lines_pending(&a), 0);
	client_free(&a);
	server_down();
}
END_TEST

START_TEST(test_socket_full)
{
	struct client	a;
	struct conn	*c;
	char		buf[512];
	int		i, n = 0;
	uint64_t	end;

	server_up(NULL);
	for (i = 0; i < 2000; i++) {
		char	name[64];

		snprintf(name, sizeof(name), "sem-with-a-long-name-%04d", i);
		engine_create(srv.engine, name, strlen(name), 1, NULL);
	}
	client_new_socket(&a, 4096);
	bufferevent_disable(a.bev, EV_READ);	/* it reads nothing, yet */
	client_send(&a, "LIST\nPING\n");
	spin(20);
	/* ~150 KB does not fit the socket: the rest waits for room. */
	c = conn_of(&a);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_gt(evbuffer_get_length(bufferevent_get_output(c->bev)),
	    0);
	ck_assert_int_eq(conn_waits_to_write(c), 1);
	bufferevent_enable(a.bev, EV_READ);
	end = fake_now + 3000;
	while (n < 1 + 2000 + 1) {
		ck_assert_msg(fake_now < end, "%d lines of 2002", n);
		spin(5);
		while (client_line(&a, buf, sizeof(buf)))
			n++;
		ck_assert_int_le(n, 1 + 2000 + 1);
		ck_assert_ptr_nonnull(conn_of(&a));
	}
	ck_assert_str_eq(buf, "OK PONG");
	/* Drained: the write event is off again. */
	ck_assert_int_eq(conn_waits_to_write(conn_of(&a)), 0);
	client_free(&a);
	server_down();
}
END_TEST

/* --- pipelined persistence --- */

START_TEST(test_pipelined_batches)
{
	struct client	a, b;

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "5",
	    "--persistence-pipeline", "4", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&a, "ACQUIRE s\n");
	spin(10);
	client_send(&b, "ACQUIRE s\n");
	spin(10);
	/* b's grant did not wait for a's batch to land. */
	ck_assert_int_eq(IN_FLIGHT(), 2);
	fake_ack(1);
	expect_line(&a, "OK 1");
	spin(10);
	ck_assert_int_eq(conn_of(&b)->state, CONN_WAIT_STORE);
	ck_assert_int_eq(lines_pending(&b), 0);
	fake_ack(1);
	expect_line(&b, "OK 2");
	client_free(&a);
	client_free(&b);
	server_down();
}
END_TEST

START_TEST(test_pipeline_depth)
{
	struct client	c[3];
	int		i;

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "5",
	    "--persistence-pipeline", "2", NULL);
	for (i = 0; i < 3; i++) {
		client_new(&c[i]);
		client_send(&c[i], "ACQUIRE s\n");
		spin(10);
	}
	ck_assert_int_eq(IN_FLIGHT(), 2);	/* the third waits */
	fake_ack(1);
	spin(10);
	ck_assert_int_eq(IN_FLIGHT(), 2);	/* now it goes */
	fake_ack(1);
	fake_ack(1);
	expect_line(&c[0], "OK 1");
	expect_line(&c[1], "OK 2");
	expect_line(&c[2], "OK 3");
	for (i = 0; i < 3; i++)
		client_free(&c[i]);
	server_down();
}
END_TEST

START_TEST(test_pipeline_failure)
{
	struct client		a, b;
	struct engine_stats	st;
	char			buf[256];

	server_up("--redis", "127.0.0.1:1", "--semaphore", "s", "5",
	    "--persistence-pipeline", "4", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&a, "ACQUIRE s\n");
	spin(10);
	client_send(&b, "ACQUIRE s\n");
	spin(10);
	ck_assert_int_eq(IN_FLIGHT(), 2);
	/* The first fails: the second, in flight behind it, fails too. */
	fake_fail("test: connection lost");
	spin(10);
	ck_assert(client_line(&a, buf, sizeof(buf)));
	ck_assert_msg(strncmp(buf, "ERR UNAVAILABLE", 15) == 0, "%s", buf);
	ck_assert(client_line(&b, buf, sizeof(buf)));
	ck_assert_msg(strncmp(buf, "ERR UNAVAILABLE", 15) == 0, "%s", buf);
	engine_get_stats(srv.engine, &st);
	ck_assert_uint_eq(st.grants, 0);	/* both undone */
	/* Back: what the failed batches carried is written again. */
	fake.ready = 0;
	fake_ready();
	spin(10);
	ck_assert_int_eq(IN_FLIGHT(), 1);
	fake_ack(1);
	client_send(&a, "ACQUIRE s\n");
	spin(10);
	fake_ack(1);
	spin(1);	/* the reply is written at the end of a turn */
	ck_assert(client_line(&a, buf, sizeof(buf)));
	ck_assert_msg(strncmp(buf, "OK ", 3) == 0, "%s", buf);
	client_free(&a);
	client_free(&b);
	server_down();
}
END_TEST

/* --- output and time limits --- */

START_TEST(test_max_output_reader)
{
	struct client	a;
	char		req[64];
	int		i, n = 0;
	char		buf[512];

	server_up("--max-output", "4096", NULL);
	client_new(&a);
	for (i = 0; i < 100; i++) {
		snprintf(req, sizeof(req), "CREATE sem-with-a-long-name-%03d 1\n",
		    i);
		client_send(&a, req);
	}
	spin(50);
	while (client_line(&a, buf, sizeof(buf)))
		ck_assert_str_eq(buf, "OK");
	/* A listing of ~8 KB, twice max-output, reaches a reader whole. */
	client_send(&a, "LIST\nPING\n");
	spin(50);
	while (client_line(&a, buf, sizeof(buf)))
		n++;
	ck_assert_int_eq(n, 1 + 100 + 1);
	ck_assert_ptr_nonnull(conn_of(&a));
	client_free(&a);
	server_down();
}
END_TEST

START_TEST(test_max_output_nonreader)
{
	struct client	a;
	struct conn	*c;
	int		i;

	server_up("--max-output", "4096", NULL);
	for (i = 0; i < 100; i++) {
		char	name[64];

		snprintf(name, sizeof(name), "sem-with-a-long-name-%03d", i);
		engine_create(srv.engine, name, strlen(name), 1, NULL);
	}
	client_new(&a);
	bufferevent_disable(a.bev, EV_READ);	/* it reads nothing */
	for (i = 0; i < 50; i++)
		client_send(&a, "LIST\n");
	spin(20);
	c = conn_of(&a);
	ck_assert_ptr_nonnull(c);
	/* No more requests are taken while its replies are unread. */
	ck_assert_uint_lt(evbuffer_get_length(bufferevent_get_output(c->bev)),
	    3 * 4096);
	ck_assert_uint_gt(evbuffer_get_length(bufferevent_get_input(c->bev)),
	    0);
	/* A whole sweep without draining: READY -> DEAD. */
	spin(2500);
	ck_assert_ptr_null(conn_of(&a));
	client_free(&a);
	server_down();
}
END_TEST

static void
add_output(struct conn *c, void *arg)
{
	*(size_t *)arg += evbuffer_get_length(bufferevent_get_output(c->bev));
}

/* The unread replies of every connection, as conn.c counts them. */
static size_t
output_of_all(void)
{
	size_t	n = 0;

	conn_foreach(&srv, add_output, &n);
	return (n);
}

START_TEST(test_max_output_total)
{
	struct client	big, small, reader;
	char		name[64];
	int		i;

	server_up("--max-output", "1mb", "--max-output-total", "64kb",
	    NULL);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "sem-with-a-long-name-%03d", i);
		engine_create(srv.engine, name, strlen(name), 1, NULL);
	}
	client_new(&big);
	client_new(&small);
	client_new(&reader);
	bufferevent_disable(big.bev, EV_READ);	/* they read nothing */
	bufferevent_disable(small.bev, EV_READ);
	client_send(&small, "LIST\n");		/* ~9 KB */
	spin(20);
	ck_assert_uint_eq(conn_output_bytes(&srv), output_of_all());
	ck_assert_uint_gt(conn_output_bytes(&srv), 4096);
	for (i = 0; i < 20; i++)		/* ~180 KB */
		client_send(&big, "LIST\n");
	spin(50);
	/* The one with the most unread replies is closed; no one else. */
	expect_gone(&big);
	ck_assert_ptr_nonnull(conn_of(&small));
	ck_assert_uint_eq(conn_output_bytes(&srv), output_of_all());
	ck_assert_uint_le(conn_output_bytes(&srv), 64 * 1024);
	client_send(&reader, "PING\n");
	expect_line(&reader, "OK PONG");
	client_free(&big);
	client_free(&small);
	client_free(&reader);
	spin(20);
	/* (small's connection still tries to flush its replies.) */
	ck_assert_uint_eq(conn_output_bytes(&srv), output_of_all());
	server_down();
}
END_TEST

START_TEST(test_line_timeout)
{
	struct client	a, b;

	server_up("--line-timeout", "1s", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&a, "PI");		/* a line that never ends */
	client_send(&b, "PING\n");
	expect_line(&b, "OK PONG");
	spin(2600);
	ck_assert_ptr_null(conn_of(&a));
	ck_assert_ptr_nonnull(conn_of(&b));	/* idle but not slow */
	client_free(&a);
	client_free(&b);
	server_down();
}
END_TEST

START_TEST(test_idle_timeout)
{
	struct client	a, h, w;

	server_up("--timeout", "1s", "--semaphore", "s", "1", NULL);
	client_new(&a);
	client_new(&h);
	client_new(&w);
	client_send(&h, "ACQUIRE s\n");
	expect_line(&h, "OK 1");
	client_send(&w, "ACQUIRE s\n");		/* waits: not idle */
	spin(2600);
	ck_assert_ptr_null(conn_of(&a));	/* idle: closed */
	ck_assert_ptr_nonnull(conn_of(&h));	/* holds a permit: kept */
	ck_assert_ptr_nonnull(conn_of(&w));
	client_free(&a);
	client_free(&h);
	client_free(&w);
	server_down();
}
END_TEST

START_TEST(test_auth_timeout)
{
	struct client	a, b;

	server_up("--requirepass", "secret", "--auth-timeout", "1s", NULL);
	client_new(&a);
	client_new(&b);
	client_send(&b, "AUTH secret\n");
	expect_line(&b, "OK");
	client_send(&a, "PING\n");		/* allowed, but not AUTH */
	expect_line(&a, "OK PONG");
	spin(2600);
	ck_assert_ptr_null(conn_of(&a));
	ck_assert_ptr_nonnull(conn_of(&b));
	client_free(&a);
	client_free(&b);
	server_down();
}
END_TEST

START_TEST(test_state_names)
{
	ck_assert_str_eq(conn_state_name(CONN_READY), "ready");
	ck_assert_str_eq(conn_state_name(CONN_WAIT_STORE), "wait-store");
	ck_assert_str_eq(conn_state_name(CONN_DEAD), "dead");
	ck_assert_str_eq(conn_state_name(CONN__COUNT), "?");
}
END_TEST

static Suite *
conn_suite(void)
{
	Suite	*s = suite_create("conn");
	TCase	*tc = tcase_create("conn");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_max_line_exactly);
	tcase_add_test(tc, test_max_line_one_over);
	tcase_add_test(tc, test_max_line_no_newline);
	tcase_add_test(tc, test_split_lines);
	tcase_add_test(tc, test_cr_handling);
	tcase_add_test(tc, test_line_budget);
	tcase_add_test(tc, test_turn_time_budget);
	tcase_add_test(tc, test_eof_while_waiting_on_engine);
	tcase_add_test(tc, test_granted_after_wait);
	tcase_add_test(tc, test_wait_store);
	tcase_add_test(tc, test_wait_engine_then_store);
	tcase_add_test(tc, test_eof_while_waiting_on_store);
	tcase_add_test(tc, test_killed_while_waiting_on_store);
	tcase_add_test(tc, test_watching);
	tcase_add_test(tc, test_quit_flushes);
	tcase_add_test(tc, test_socket_direct_write);
	tcase_add_test(tc, test_socket_full);
	tcase_add_test(tc, test_pipelined_batches);
	tcase_add_test(tc, test_pipeline_depth);
	tcase_add_test(tc, test_pipeline_failure);
	tcase_add_test(tc, test_max_output_reader);
	tcase_add_test(tc, test_max_output_nonreader);
	tcase_add_test(tc, test_max_output_total);
	tcase_add_test(tc, test_line_timeout);
	tcase_add_test(tc, test_idle_timeout);
	tcase_add_test(tc, test_auth_timeout);
	tcase_add_test(tc, test_state_names);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	SRunner	*sr = srunner_create(conn_suite());
	int	 failed;

	log_open(NULL, getenv("TEST_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return (failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}
