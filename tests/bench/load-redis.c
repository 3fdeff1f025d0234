/*
 * load-redis.c: semload's Redis targets, over hiredis's async API on the
 * same libevent loop: the anchors semd is compared with.
 *
 * ping: PING after PING on every connection.
 *
 * lua: the counting semaphore of the npm package redis-semaphore
 * (RedisSemaphore), the same algorithm re-implemented here: a sorted set
 * of holders scored by the time they acquired; to acquire, a script drops
 * the holders older than the lock timeout and, if fewer than limit are
 * left, adds the caller and refreshes the key's expiry (1), else refuses
 * (0); a refused client waits retry-ms and runs the script again, as the
 * package's retryInterval does. Release is ZREM. The script is loaded
 * once and run with EVALSHA, as the package's createEval does; "now" is
 * the client's wall clock in ms (Date.now()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "semload.h"

static const char lua_acquire[] =
	"local key = KEYS[1]\n"
	"local limit = tonumber(ARGV[1])\n"
	"local identifier = ARGV[2]\n"
	"local lock_timeout = tonumber(ARGV[3])\n"
	"local now = tonumber(ARGV[4])\n"
	"redis.call('zremrangebyscore', key, '-inf', now - lock_timeout)\n"
	"if redis.call('zcard', key) < limit then\n"
	"  redis.call('zadd', key, now, identifier)\n"
	"  redis.call('pexpire', key, lock_timeout)\n"
	"  return 1\n"
	"end\n"
	"return 0\n";

struct rconn {
	struct load		*l;
	int			 id;
	redisAsyncContext	*ac;
	struct event		*timer;	/* hold, think and retry pauses */
	enum { RT_ACQUIRE, RT_RETRY, RT_RELEASE } timer_next;
	int			 acquiring;	/* since t0, not granted */
	uint64_t		 t0;	/* acquire began */
	uint64_t		 t_sent;	/* the request in flight */
	char			 ident[64];	/* holder id in the ZSET */
};

static struct rconn	*rconns;
static char		 lua_sha[64];

static void	lua_begin(struct rconn *, uint64_t);
static void	lua_try(struct rconn *, uint64_t);
static void	lua_release(struct rconn *, uint64_t);
static void	ping_send(struct rconn *, uint64_t);

static int
redis_alloc(struct load *l)
{
	int	i;

	if ((rconns = calloc((size_t)l->o.conns, sizeof(*rconns))) == NULL) {
		fprintf(stderr, "semload: out of memory\n");
		return (-1);
	}
	for (i = 0; i < l->o.conns; i++) {
		rconns[i].l = l;
		rconns[i].id = i;
		snprintf(rconns[i].ident, sizeof(rconns[i].ident),
		    "semload-%ld-%d", (long)getpid(), i);
	}
	return (0);
}

static int
ping_prepare(struct load *l)
{
	return (redis_alloc(l));
}

/* Load the script (SCRIPT LOAD) and empty the key, on a blocking
 * connection; -1 after printing why. */
static int
lua_prepare(struct load *l)
{
	redisContext	*rc;
	redisReply	*r;

	rc = redisConnect(l->o.host, l->o.port);
	if (rc == NULL || rc->err) {
		fprintf(stderr, "semload: redis %s:%d: %s\n", l->o.host,
		    l->o.port, rc ? rc->errstr : "out of memory");
		redisFree(rc);
		return (-1);
	}
	r = redisCommand(rc, "SCRIPT LOAD %s", lua_acquire);
	if (r == NULL || r->type != REDIS_REPLY_STRING ||
	    r->len >= (int)sizeof(lua_sha)) {
		fprintf(stderr, "semload: SCRIPT LOAD: %s\n", r == NULL ?
		    rc->errstr : r->type == REDIS_REPLY_ERROR ? r->str :
		    "unexpected reply");
		freeReplyObject(r);
		redisFree(rc);
		return (-1);
	}
	memcpy(lua_sha, r->str, (size_t)r->len);
	lua_sha[r->len] = '\0';
	freeReplyObject(r);
	r = redisCommand(rc, "DEL %s", l->o.sem);
	freeReplyObject(r);
	redisFree(rc);
	return (redis_alloc(l));
}

static void
redis_connect_cb(const redisAsyncContext *ac, int status)
{
	struct rconn	*c = ac->data;

	if (status != REDIS_OK)
		load_fatal("redis conn %d: %s", c->id, ac->errstr);
	load_ready(c->l);
}

static void
redis_disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct rconn	*c = ac->data;

	(void)status;
	c->ac = NULL;
	if (c->l->phase != PHASE_DONE)
		load_fatal("redis conn %d: disconnected: %s", c->id,
		    ac->err ? ac->errstr : "by the server");
}

static void
redis_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rconn	*c = arg;
	uint64_t	 now = load_now_ns();

	(void)fd;
	(void)what;
	switch (c->timer_next) {
	case RT_ACQUIRE:
		lua_begin(c, now);
		break;
	case RT_RETRY:
		load_attempt(c->l, 0);
		lua_try(c, now);
		break;
	case RT_RELEASE:
		lua_release(c, now);
		break;
	}
}

static int
redis_connect(struct load *l, int i)
{
	struct rconn	*c = &rconns[i];

	c->ac = redisAsyncConnect(l->o.host, l->o.port);
	if (c->ac == NULL || c->ac->err)
		load_fatal("redis conn %d: %s", i, c->ac ? c->ac->errstr :
		    "out of memory");
	c->ac->data = c;
	if (redisLibeventAttach(c->ac, l->base) != REDIS_OK)
		load_fatal("redis conn %d: cannot attach to the loop", i);
	redisAsyncSetConnectCallback(c->ac, redis_connect_cb);
	redisAsyncSetDisconnectCallback(c->ac, redis_disconnect_cb);
	c->timer = evtimer_new(l->base, redis_timer_cb, c);
	return (0);
}

/* Run next after ms, or at once when ms is 0. */
static void
redis_after(struct rconn *c, int next, double ms)
{
	struct timeval	tv;

	if (c->l->phase == PHASE_DONE)
		return;
	c->timer_next = next;
	if (ms <= 0) {
		redis_timer_cb(-1, 0, c);
		return;
	}
	load_tv(ms, &tv);
	evtimer_add(c->timer, &tv);
}

static void
redis_send_failed(struct rconn *c)
{
	load_fatal("redis conn %d: cannot send: %s", c->id, c->ac->errstr);
}

static void
ping_cb(redisAsyncContext *ac, void *reply, void *arg)
{
	struct rconn	*c = arg;
	redisReply	*r = reply;
	uint64_t	 now = load_now_ns();

	(void)ac;
	if (r == NULL)		/* freed at the end */
		return;
	if (r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0)
		load_fatal("redis conn %d: PING: %s", c->id,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not PONG");
	if (load_counting(c->l)) {
		c->l->ops++;
		hist_add(&c->l->ping, now - c->t_sent);
	}
	ping_send(c, now);
}

static void
ping_send(struct rconn *c, uint64_t now)
{
	if (c->l->phase == PHASE_DONE)
		return;
	c->t_sent = now;
	if (redisAsyncCommand(c->ac, ping_cb, c, "PING") != REDIS_OK)
		redis_send_failed(c);
}

static void
ping_start(struct load *l)
{
	uint64_t	now = load_now_ns();
	int		i;

	for (i = 0; i < l->o.conns; i++)
		ping_send(&rconns[i], now);
}

static long long
wall_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static void
lua_acquire_cb(redisAsyncContext *ac, void *reply, void *arg)
{
	struct rconn	*c = arg;
	struct load	*l = c->l;
	redisReply	*r = reply;
	uint64_t	 now = load_now_ns();

	(void)ac;
	if (r == NULL)
		return;
	if (r->type != REDIS_REPLY_INTEGER)
		load_fatal("redis conn %d: EVALSHA: %s", c->id,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not an integer");
	if (r->integer == 1) {
		c->acquiring = 0;
		load_granted(l, c->t0, now);
		redis_after(c, RT_RELEASE, l->o.hold_ms);
		return;
	}
	load_refused(l, 0);
	redis_after(c, RT_RETRY, l->o.retry_ms);
}

static void
lua_try(struct rconn *c, uint64_t now)
{
	struct load	*l = c->l;

	if (l->phase == PHASE_DONE)
		return;
	c->t_sent = now;
	if (redisAsyncCommand(c->ac, lua_acquire_cb, c,
	    "EVALSHA %s 1 %s %ld %s %ld %lld", lua_sha, l->o.sem, l->o.limit,
	    c->ident, l->o.lock_timeout_ms, wall_ms()) != REDIS_OK)
		redis_send_failed(c);
}

/* A new acquire: its first attempt. */
static void
lua_begin(struct rconn *c, uint64_t now)
{
	if (c->l->phase == PHASE_DONE)
		return;
	c->t0 = now;
	c->acquiring = 1;
	load_attempt(c->l, 1);
	lua_try(c, now);
}

static void
lua_release_cb(redisAsyncContext *ac, void *reply, void *arg)
{
	struct rconn	*c = arg;
	redisReply	*r = reply;
	uint64_t	 now = load_now_ns();

	(void)ac;
	if (r == NULL)
		return;
	if (r->type != REDIS_REPLY_INTEGER)
		load_fatal("redis conn %d: ZREM: %s", c->id,
		    r->type == REDIS_REPLY_ERROR ? r->str : "not an integer");
	load_released(c->l, c->t_sent, now);
	redis_after(c, RT_ACQUIRE, c->l->o.think_ms);
}

static void
lua_release(struct rconn *c, uint64_t now)
{
	if (c->l->phase == PHASE_DONE)
		return;
	load_release_sent(c->l, now);
	c->t_sent = now;
	if (redisAsyncCommand(c->ac, lua_release_cb, c, "ZREM %s %s",
	    c->l->o.sem, c->ident) != REDIS_OK)
		redis_send_failed(c);
}

/* Every connection begins an acquire at once. */
static void
lua_start(struct load *l)
{
	uint64_t	now = load_now_ns();
	int		i;

	for (i = 0; i < l->o.conns; i++)
		lua_begin(&rconns[i], now);
}

static int
ping_starved(const struct load *l)
{
	(void)l;
	return (0);
}

static int
lua_starved(const struct load *l)
{
	int	i, n = 0;

	for (i = 0; i < l->o.conns; i++)
		if (rconns[i].acquiring && rconns[i].t0 < l->t_measure_ns)
			n++;
	return (n);
}

static void
redis_stop(struct load *l)
{
	int	i;

	for (i = 0; i < l->o.conns; i++) {
		if (rconns[i].ac != NULL)
			redisAsyncFree(rconns[i].ac);
		if (rconns[i].timer != NULL)
			event_free(rconns[i].timer);
	}
	free(rconns);
	rconns = NULL;
}

const struct load_ops load_ping_ops = {
	"redis", ping_prepare, redis_connect, ping_start, ping_starved,
	redis_stop
};

const struct load_ops load_lua_ops = {
	"lua", lua_prepare, redis_connect, lua_start, lua_starved,
	redis_stop
};
