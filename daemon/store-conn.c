/*
 * store-conn.c: one asynchronous Redis connection with its deadline and a
 * single failure report (see store-conn.h), shared by the batch pipeline
 * and the claims so that connecting, failing and freeing are written once.
 *
 * A live hiredis context points at its store_conn (ac->data); dropping it
 * clears that pointer before hiredis frees it (at once, or after the
 * callback that is running returns), so every late callback of a dropped
 * context finds NULL and returns without touching the store.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "log.h"
#include "proto.h"
#include "redis-target.h"
#include "store-conn.h"
#include "store-model.h"

static int	store_conn_connect(struct store_conn *, const char *, int,
		    const char *);

/* The connection's own tags, below STORE_CONN_TAG_MIN. */
enum {
	STORE_CONN_AUTH = 1,
	STORE_CONN_SELECT,
	STORE_CONN_ROLE
};

/*
 * Forget the context: late callbacks find no store_conn. With do_free, free
 * it too (deferred by hiredis when inside one of its callbacks); without,
 * hiredis is freeing it already.
 */
static void
store_conn_drop(struct store_conn *sc, int do_free)
{
	redisAsyncContext	*ac = sc->ac;

	if (sc->asking) {
		redis_target_cancel(sc->target, &sc->user);
		sc->asking = 0;
		sc->drops++;
		evtimer_del(sc->deadline_ev);
		return;
	}
	if (ac == NULL)
		return;
	sc->ac = NULL;
	sc->drops++;
	evtimer_del(sc->deadline_ev);
	ac->data = NULL;
	if (do_free)
		redisAsyncFree(ac);
}

/*
 * Drop (do_free: see store_conn_drop) and report why, copied first. The
 * server is forgotten as the master: with Sentinel, the next open asks
 * which server is the master now.
 */
static void
store_conn_failed(struct store_conn *sc, const char *why, int do_free)
{
	char	reason[256];

	snprintf(reason, sizeof(reason), "%s", why);	/* may live in ac */
	if (sc->ac != NULL)
		redis_target_lost(sc->target, sc->host, sc->port);
	store_conn_drop(sc, do_free);
	sc->ev.failed(sc->arg, reason);
}

void
store_conn_fail(struct store_conn *sc, const char *why)
{
	store_conn_failed(sc, why, 1);
}

void
store_conn_close(struct store_conn *sc)
{
	store_conn_drop(sc, 1);
}

int
store_conn_is_open(const struct store_conn *sc)
{
	return (sc->ac != NULL || sc->asking);
}

int
store_conn_can_queue(const struct store_conn *sc)
{
	return (sc->ac != NULL);
}

static void
store_conn_reply_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct store_conn	*sc = ac->data;
	const redisReply	*r = reply;
	int			 tag = (int)(intptr_t)privdata;
	char			 why[256];

	if (sc == NULL || ac != sc->ac)
		return;		/* a dropped connection's leftovers */
	if (r == NULL) {
		store_conn_fail(sc, ac->errstr[0] != '\0' ? ac->errstr :
		    "connection lost");
		return;
	}
	if (r->type == REDIS_REPLY_ERROR &&
	    strstr(r->str, "READONLY") != NULL) {
		/* A master demoted under us: a replica now. */
		snprintf(why, sizeof(why), "%s%s answered READONLY: a replica "
		    "now", sc->what, redis_target_name(sc->target));
		store_conn_fail(sc, why);
		return;
	}
	if (tag >= STORE_CONN_TAG_MIN) {
		sc->ev.reply(sc->arg, r, tag);
		return;
	}
	if (tag == STORE_CONN_ROLE) {
		if (!redis_target_role_master(r, why, sizeof(why))) {
			char	msg[300];

			snprintf(msg, sizeof(msg), "%s%.64s:%d is %.180s",
			    sc->what, sc->host, sc->port, why);
			store_conn_fail(sc, msg);
		}
		return;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(why, sizeof(why), "%s: %s", tag == STORE_CONN_AUTH ?
		    "AUTH" : "SELECT", r->str);
		store_conn_fail(sc, why);
	}
}

static void
store_conn_connect_cb(const redisAsyncContext *ac, int status)
{
	struct store_conn	*sc = ac->data;

	if (sc == NULL || ac != sc->ac)
		return;
	if (status != REDIS_OK) {
		store_conn_failed(sc, ac->errstr, 0);	/* hiredis frees ac */
		return;
	}
	if (sc->ev.connected != NULL)
		sc->ev.connected(sc->arg);
}

static void
store_conn_disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct store_conn	*sc = ac->data;

	if (sc == NULL || ac != sc->ac)
		return;
	store_conn_failed(sc, status == REDIS_OK ? "disconnected" :
	    ac->errstr, 0);	/* hiredis frees ac */
}

static void
store_conn_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct store_conn	*sc = arg;
	char			 why[96];

	(void)fd;
	(void)what;
	snprintf(why, sizeof(why), "%sno answer within %lld ms", sc->what,
	    (long long)sc->cfg->redis_timeout_ms);
	store_conn_fail(sc, why);
}

/* The sentinels answered (why NULL) or did not, for an open. */
static void
store_conn_resolved(void *arg, const char *why)
{
	struct store_conn	*sc = arg;
	const char		*host, *path;
	char			 reason[300];
	int			 port;

	if (!sc->asking)
		return;
	sc->asking = 0;
	if (why != NULL ||
	    !redis_target_current(sc->target, &host, &port, &path)) {
		snprintf(reason, sizeof(reason), "%s%s", sc->what,
		    why != NULL ? why : "the master was lost again");
		sc->drops++;
		evtimer_del(sc->deadline_ev);
		sc->ev.failed(sc->arg, reason);
		return;
	}
	(void)store_conn_connect(sc, host, port, path);
}

/* +switch-master: a connection to another server goes now. */
static void
store_conn_moved(void *arg)
{
	struct store_conn	*sc = arg;
	const char		*host, *path;
	char			 why[300];
	int			 port;

	if (sc->ac != NULL && sc->host[0] != '\0' &&
	    redis_target_current(sc->target, &host, &port, &path) &&
	    (strcmp(host, sc->host) != 0 || port != sc->port)) {
		snprintf(why, sizeof(why), "%sthe master moved to %s "
		    "(+switch-master)", sc->what,
		    redis_target_name(sc->target));
		store_conn_fail(sc, why);
	}
	if (sc->ev.moved != NULL)
		sc->ev.moved(sc->arg);
}

void
store_conn_init(struct store_conn *sc, const struct config *cfg,
    struct redis_target *target, struct event_base *base, const char *what,
    const struct store_conn_events *ev, void *arg)
{
	memset(sc, 0, sizeof(*sc));
	sc->cfg = cfg;
	sc->target = target;
	sc->user.resolved = store_conn_resolved;
	sc->user.moved = store_conn_moved;
	sc->user.arg = sc;
	redis_target_register(target, &sc->user);
	sc->base = base;
	sc->what = what;
	sc->ev = *ev;
	sc->arg = arg;
	if ((sc->deadline_ev = evtimer_new(base, store_conn_deadline_cb,
	    sc)) == NULL)
		fatalx("cannot set up a redis timer");
}

void
store_conn_cleanup(struct store_conn *sc)
{
	store_conn_close(sc);
	if (sc->deadline_ev != NULL) {
		event_free(sc->deadline_ev);
		redis_target_unregister(sc->target, &sc->user);
	}
	sc->deadline_ev = NULL;
}

/* Connect to host:port or path, the master; see store_conn_open. */
static int
store_conn_connect(struct store_conn *sc, const char *host, int port,
    const char *path)
{
	const struct config	*cfg = sc->cfg;
	redisAsyncContext	*ac;
	char			 why[160];

	ac = path != NULL ? redisAsyncConnectUnix(path) :
	    redisAsyncConnect(host, port);
	if (ac == NULL || ac->err) {
		snprintf(why, sizeof(why), "%s", ac != NULL ? ac->errstr :
		    "out of memory");
		if (ac != NULL)
			redisAsyncFree(ac);
		sc->ev.failed(sc->arg, why);
		return (-1);
	}
	ac->data = sc;
	sc->ac = ac;
	snprintf(sc->host, sizeof(sc->host), "%s", host != NULL ? host : "");
	sc->port = port;
	redisLibeventAttach(ac, sc->base);
	redisAsyncSetConnectCallback(ac, store_conn_connect_cb);
	redisAsyncSetDisconnectCallback(ac, store_conn_disconnect_cb);
	/* Queued until the connection is up, then sent first, in order. */
	if (cfg->redis_password != NULL)
		store_conn_command(sc, STORE_CONN_AUTH, "AUTH %s",
		    cfg->redis_password);
	if (cfg->redis_db != 0)
		store_conn_command(sc, STORE_CONN_SELECT, "SELECT %lld",
		    (long long)cfg->redis_db);
	/* A replica (a stale Sentinel answer, a demoted master) fails it. */
	store_conn_command(sc, STORE_CONN_ROLE, "ROLE");
	return (0);
}

int
store_conn_open(struct store_conn *sc)
{
	const char	*host, *path;
	int		 port;

	if (sc->ac != NULL || sc->asking)
		return (0);
	if (!redis_target_current(sc->target, &host, &port, &path)) {
		sc->asking = 1;
		redis_target_ask(sc->target, &sc->user);
		return (0);
	}
	return (store_conn_connect(sc, host, port, path));
}

void
store_conn_command(struct store_conn *sc, int tag, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	redisvAsyncCommand(sc->ac, store_conn_reply_cb, (void *)(intptr_t)tag,
	    fmt, ap);
	va_end(ap);
}

void
store_conn_command_argv(struct store_conn *sc, int tag, int argc,
    const char **argv, const size_t *lens)
{
	redisAsyncCommandArgv(sc->ac, store_conn_reply_cb,
	    (void *)(intptr_t)tag, argc, argv, lens);
}

void
store_conn_write_now(struct store_conn *sc)
{
	if (sc->ac != NULL && (sc->ac->c.flags & REDIS_CONNECTED))
		redisAsyncHandleWrite(sc->ac);
}

void
store_conn_arm(struct store_conn *sc, uint64_t ms)
{
	struct timeval	tv = { (time_t)(ms / 1000),
			    (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(sc->deadline_ev, &tv);
}

void
store_conn_disarm(struct store_conn *sc)
{
	evtimer_del(sc->deadline_ev);
}

/*
 * --- replies: how every Redis connection of the store (the pipeline, the
 * claims, the blocking load) reads them ---
 */

int
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

int
store_reply_fenced(const redisReply *r, const char **owner)
{
	size_t	len;

	return (r != NULL && r->type == REDIS_REPLY_ERROR &&
	    store_is_fenced(r->str, r->len, owner, &len));
}

int
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
