/*
 * redis-target.c: the current Redis master, from the configuration or
 * from Redis Sentinel (see redis-target.h).
 *
 * Two asynchronous connections of its own, both to sentinels: the query
 * (one at a time, sentinel after sentinel until one names the master)
 * and the subscription to +switch-master (one sentinel; another, after a
 * second, when it goes). Like store-conn.c, a dropped hiredis context has
 * its data pointer cleared first, so late callbacks find nothing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>

#include "log.h"
#include "proto.h"
#include "redis-target.h"

#define SUBSCRIBE_RETRY_MS	1000

enum {
	TAG_AUTH = 1,
	TAG_MASTER,		/* SENTINEL get-master-addr-by-name */
	TAG_SUBSCRIBE
};

struct redis_target {
	const struct config	*cfg;
	const struct redis_addr	*addr;
	struct event_base	*base;

	/* The master as last heard of: known, or forgotten (lost). */
	int			 known;
	int			 ever;		/* host, port hold one */
	char			 host[256];
	int			 port;
	uint64_t		 generation;
	char			 name[300];

	TAILQ_HEAD(, redis_target_user) users;

	/* The query in flight (qac != NULL or between sentinels). */
	redisAsyncContext	*qac;
	size_t			 qat;		/* the sentinel asked */
	size_t			 qtried;
	size_t			 qunknown;	/* said "no such master" */
	size_t			 qanswered;
	size_t			 first;		/* the last that answered */
	int			 querying;
	struct event		*q_ev;		/* its deadline */
	char			 qwhy[256];
	char			 qfailed[256];	/* connecting failed at once */

	/* The +switch-master subscription. */
	redisAsyncContext	*sac;
	size_t			 sat;
	struct event		*s_ev;		/* resubscribe */
};

static void	redis_target_query(struct redis_target *);
static void	redis_target_subscribe(struct redis_target *);
static void	redis_target_query_timeout_cb(evutil_socket_t, short, void *);
static void	redis_target_resubscribe_cb(evutil_socket_t, short, void *);

static void
redis_target_set_name(struct redis_target *t)
{
	if (t->addr->kind == REDIS_ADDR_UNIX)
		snprintf(t->name, sizeof(t->name), "%s", t->addr->path);
	else if (!t->known)
		snprintf(t->name, sizeof(t->name), "?");
	else
		redis_node_format(t->host, t->port, t->name, sizeof(t->name));
}

/* The master is host:port now, as how says. */
static void
redis_target_set(struct redis_target *t, const char *host, int port,
    const char *how)
{
	char	was[300];

	if (t->ever && strcmp(t->host, host) == 0 && t->port == port) {
		t->known = 1;
		redis_target_set_name(t);
		return;
	}
	redis_node_format(t->host, t->port, was, sizeof(was));
	if (t->ever)
		t->generation++;
	snprintf(t->host, sizeof(t->host), "%s", host);
	t->port = port;
	t->known = t->ever = 1;
	redis_target_set_name(t);
	log_info("redis sentinel: master %s is %s (%s%s%s)",
	    t->addr->master_name, t->name, how, t->generation > 0 ?
	    ", was " : "", t->generation > 0 ? was : "");
}

struct redis_target *
redis_target_new(const struct config *cfg, struct event_base *base)
{
	struct redis_target	*t = xcalloc(1, sizeof(*t));

	t->cfg = cfg;
	t->addr = &cfg->redis_addr;
	t->base = base;
	TAILQ_INIT(&t->users);
	if (t->addr->kind == REDIS_ADDR_TCP) {
		snprintf(t->host, sizeof(t->host), "%s", t->addr->node.host);
		t->port = t->addr->node.port;
		t->known = t->ever = 1;
	} else if (t->addr->kind == REDIS_ADDR_UNIX)
		t->known = t->ever = 1;
	redis_target_set_name(t);
	if (base != NULL && t->addr->kind == REDIS_ADDR_SENTINEL) {
		t->q_ev = evtimer_new(base, redis_target_query_timeout_cb, t);
		t->s_ev = evtimer_new(base, redis_target_resubscribe_cb, t);
		if (t->q_ev == NULL || t->s_ev == NULL)
			fatalx("cannot set up the sentinel timers");
		redis_target_subscribe(t);
	}
	return (t);
}

/* Forget a context; free it unless hiredis is freeing it already. */
static void
redis_target_drop(redisAsyncContext **acp, int do_free)
{
	redisAsyncContext	*ac = *acp;

	if (ac == NULL)
		return;
	*acp = NULL;
	ac->data = NULL;
	if (do_free)
		redisAsyncFree(ac);
}

void
redis_target_free(struct redis_target *t)
{
	if (t == NULL)
		return;
	redis_target_drop(&t->qac, 1);
	redis_target_drop(&t->sac, 1);
	if (t->q_ev != NULL)
		event_free(t->q_ev);
	if (t->s_ev != NULL)
		event_free(t->s_ev);
	free(t);
}

int
redis_target_is_sentinel(const struct redis_target *t)
{
	return (t->addr->kind == REDIS_ADDR_SENTINEL);
}

int
redis_target_current(const struct redis_target *t, const char **host,
    int *port, const char **path)
{
	*host = *path = NULL;
	*port = 0;
	if (!t->known)
		return (0);
	if (t->addr->kind == REDIS_ADDR_UNIX)
		*path = t->addr->path;
	else {
		*host = t->host;
		*port = t->port;
	}
	return (1);
}

uint64_t
redis_target_generation(const struct redis_target *t)
{
	return (t->generation);
}

const char *
redis_target_name(const struct redis_target *t)
{
	return (t->name);
}

void
redis_target_register(struct redis_target *t, struct redis_target_user *u)
{
	u->waiting = u->notify = 0;
	TAILQ_INSERT_TAIL(&t->users, u, entry);
}

void
redis_target_unregister(struct redis_target *t, struct redis_target_user *u)
{
	TAILQ_REMOVE(&t->users, u, entry);
}

void
redis_target_cancel(struct redis_target *t, struct redis_target_user *u)
{
	(void)t;
	u->waiting = u->notify = 0;
}

void
redis_target_lost(struct redis_target *t, const char *host, int port)
{
	if (t->addr->kind != REDIS_ADDR_SENTINEL || !t->known ||
	    host == NULL || strcmp(host, t->host) != 0 || port != t->port)
		return;
	t->known = 0;
	log_debug("redis sentinel: master %s at %s:%d lost; the sentinels "
	    "are asked again", t->addr->master_name, host, port);
	redis_target_set_name(t);
}

/*
 * The query ended (why NULL: the master is known). Every user that
 * waited is told once; one that asks again from its callback waits for
 * the next query.
 */
static void
redis_target_finish(struct redis_target *t, const char *why)
{
	struct redis_target_user	*u;
	char				 reason[256];

	snprintf(reason, sizeof(reason), "%s", why != NULL ? why : "");
	evtimer_del(t->q_ev);
	t->querying = 0;
	TAILQ_FOREACH(u, &t->users, entry) {
		u->notify = u->waiting;
		u->waiting = 0;
	}
	for (;;) {
		TAILQ_FOREACH(u, &t->users, entry)
			if (u->notify)
				break;
		if (u == NULL)
			break;
		u->notify = 0;
		u->resolved(u->arg, why != NULL ? reason : NULL);
	}
}

/* The sentinel asked gave no master (why): ask the next, or give up. */
static void
redis_target_next(struct redis_target *t, const char *why, int do_free)
{
	char	node[300], all[256];

	redis_node_format(t->addr->sentinels[t->qat].host,
	    t->addr->sentinels[t->qat].port, node, sizeof(node));
	snprintf(t->qwhy, sizeof(t->qwhy), "sentinel %.80s: %.160s", node,
	    why);
	redis_target_drop(&t->qac, do_free);
	evtimer_del(t->q_ev);
	if (++t->qtried < t->addr->nsentinels) {
		t->qat = (t->qat + 1) % t->addr->nsentinels;
		redis_target_query(t);
		return;
	}
	if (t->qunknown > 0 && t->qunknown == t->qanswered)
		snprintf(all, sizeof(all), "no sentinel knows a master named "
		    "%s", t->addr->master_name);
	else
		snprintf(all, sizeof(all), "no sentinel named the master "
		    "(last: %.200s)", t->qwhy);
	redis_target_finish(t, all);
}

/*
 * SENTINEL get-master-addr-by-name's answer r: 1 and the master in *host,
 * *port; 0 for nil (no such master); -1 (why) otherwise.
 */
static int
redis_target_master_reply(const redisReply *r, char *host, size_t hlen,
    int *port, char *why, size_t len)
{
	uint64_t	p;

	if (r->type == REDIS_REPLY_NIL)
		return (0);
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING &&
	    r->element[0]->len > 0 && r->element[0]->len < hlen &&
	    proto_parse_u64(r->element[1]->str, r->element[1]->len, 65535,
	    &p) == 0 && p > 0) {
		memcpy(host, r->element[0]->str, r->element[0]->len);
		host[r->element[0]->len] = '\0';
		*port = (int)p;
		return (1);
	}
	snprintf(why, len, "SENTINEL get-master-addr-by-name: %s",
	    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
	return (-1);
}

static void
redis_target_query_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct redis_target	*t = ac->data;
	const redisReply	*r = reply;
	char			 why[256], host[256];
	int			 port;

	if (t == NULL || ac != t->qac)
		return;
	if (r == NULL) {
		redis_target_next(t, ac->errstr[0] != '\0' ? ac->errstr :
		    "connection lost", 1);
		return;
	}
	if ((int)(intptr_t)privdata == TAG_AUTH) {
		if (r->type == REDIS_REPLY_ERROR) {
			snprintf(why, sizeof(why), "AUTH: %s", r->str);
			redis_target_next(t, why, 1);
		}
		return;
	}
	t->qanswered++;
	switch (redis_target_master_reply(r, host, sizeof(host), &port, why,
	    sizeof(why))) {
	case 1:
		t->first = t->qat;
		redis_target_drop(&t->qac, 1);
		redis_target_set(t, host, port, "asked");
		redis_target_finish(t, NULL);
		break;
	case 0:
		t->qunknown++;
		snprintf(why, sizeof(why), "knows no master named %s",
		    t->addr->master_name);
		redis_target_next(t, why, 1);
		break;
	default:
		redis_target_next(t, why, 1);
	}
}

/* The subscription went: the next sentinel, in a second. */
static void
redis_target_resubscribe_later(struct redis_target *t)
{
	struct timeval	tv = { SUBSCRIBE_RETRY_MS / 1000,
			    (SUBSCRIBE_RETRY_MS % 1000) * 1000 };

	t->sat = (t->sat + 1) % t->addr->nsentinels;
	evtimer_add(t->s_ev, &tv);
}

static void
redis_target_connect_cb(const redisAsyncContext *ac, int status)
{
	struct redis_target	*t = ac->data;

	if (t == NULL || status == REDIS_OK)
		return;
	if (ac == t->qac)
		redis_target_next(t, ac->errstr, 0);	/* hiredis frees ac */
	else if (ac == t->sac) {
		redis_target_drop(&t->sac, 0);	/* hiredis frees ac */
		redis_target_resubscribe_later(t);
	}
}

static void
redis_target_disconnect_cb(const redisAsyncContext *ac, int status)
{
	struct redis_target	*t = ac->data;

	(void)status;
	if (t == NULL)
		return;
	if (ac == t->qac)
		redis_target_next(t, "disconnected", 0);
	else if (ac == t->sac) {
		redis_target_drop(&t->sac, 0);	/* hiredis frees ac */
		redis_target_resubscribe_later(t);
	}
}

/* An asynchronous connection to sentinel i, AUTH queued; NULL (why). */
static redisAsyncContext *
redis_target_open(struct redis_target *t, size_t i,
    redisCallbackFn *reply_cb, char *why, size_t len)
{
	const struct redis_node	*n = &t->addr->sentinels[i];
	redisAsyncContext	*ac;

	ac = redisAsyncConnect(n->host, n->port);
	if (ac == NULL || ac->err) {
		snprintf(why, len, "%s", ac != NULL ? ac->errstr :
		    "out of memory");
		if (ac != NULL)
			redisAsyncFree(ac);
		return (NULL);
	}
	ac->data = t;
	redisLibeventAttach(ac, t->base);
	redisAsyncSetConnectCallback(ac, redis_target_connect_cb);
	redisAsyncSetDisconnectCallback(ac, redis_target_disconnect_cb);
	if (t->cfg->sentinel_password != NULL)
		redisAsyncCommand(ac, reply_cb, (void *)(intptr_t)TAG_AUTH,
		    "AUTH %s", t->cfg->sentinel_password);
	return (ac);
}

static void
redis_target_query_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct redis_target	*t = arg;
	char			 why[256];

	(void)fd;
	(void)what;
	if (t->qfailed[0] != '\0') {
		snprintf(why, sizeof(why), "%s", t->qfailed);
		t->qfailed[0] = '\0';
	} else
		snprintf(why, sizeof(why), "no answer within %lld ms",
		    (long long)t->cfg->redis_timeout_ms);
	redis_target_next(t, why, 1);
}

/* Ask sentinel qat; its answer, or its failure, moves the query on. */
static void
redis_target_query(struct redis_target *t)
{
	struct timeval	tv = { (time_t)(t->cfg->redis_timeout_ms / 1000),
			    (suseconds_t)(t->cfg->redis_timeout_ms % 1000) *
			    1000 };

	t->qac = redis_target_open(t, t->qat, redis_target_query_cb,
	    t->qfailed, sizeof(t->qfailed));
	if (t->qac == NULL) {
		/* Move on from a fresh turn, never from inside ask. */
		event_active(t->q_ev, EV_TIMEOUT, 0);
		return;
	}
	t->qfailed[0] = '\0';
	redisAsyncCommand(t->qac, redis_target_query_cb,
	    (void *)(intptr_t)TAG_MASTER, "SENTINEL get-master-addr-by-name %s",
	    t->addr->master_name);
	evtimer_add(t->q_ev, &tv);
}

void
redis_target_ask(struct redis_target *t, struct redis_target_user *u)
{
	u->waiting = 1;
	if (t->querying)
		return;
	t->querying = 1;
	t->qat = t->first;
	t->qtried = t->qunknown = t->qanswered = 0;
	redis_target_query(t);
}

/* A message of the subscription: "NAME oldip oldport newip newport". */
static void
redis_target_switch(struct redis_target *t, const char *msg, size_t len)
{
	struct redis_target_user	*u;
	char				 name[REDIS_ADDR_NAME_MAX + 1];
	char				 oldh[256], newh[256], line[700];
	int				 oldp, newp;

	if (len >= sizeof(line))
		return;
	memcpy(line, msg, len);
	line[len] = '\0';
	if (sscanf(line, "%128s %255s %d %255s %d", name, oldh, &oldp, newh,
	    &newp) != 5 || strcmp(name, t->addr->master_name) != 0 ||
	    newp <= 0 || newp > 65535)
		return;
	redis_target_set(t, newh, newp, "+switch-master");
	TAILQ_FOREACH(u, &t->users, entry)
		u->moved(u->arg);
}

static void
redis_target_sub_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
	struct redis_target	*t = ac->data;
	const redisReply	*r = reply;

	(void)privdata;
	if (t == NULL || ac != t->sac || r == NULL)
		return;		/* a loss comes to the disconnect callback */
	if (r->type == REDIS_REPLY_ERROR) {
		log_warnx("redis sentinel: subscribing to +switch-master: %s",
		    r->str);
		redis_target_drop(&t->sac, 1);
		redis_target_resubscribe_later(t);
		return;
	}
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "message") == 0 &&
	    r->element[2]->type == REDIS_REPLY_STRING)
		redis_target_switch(t, r->element[2]->str, r->element[2]->len);
}

static void
redis_target_resubscribe_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	redis_target_subscribe(arg);
}

static void
redis_target_subscribe(struct redis_target *t)
{
	char	why[256];

	if ((t->sac = redis_target_open(t, t->sat, redis_target_sub_cb, why,
	    sizeof(why))) == NULL) {
		redis_target_resubscribe_later(t);
		return;
	}
	redisAsyncCommand(t->sac, redis_target_sub_cb,
	    (void *)(intptr_t)TAG_SUBSCRIBE, "SUBSCRIBE +switch-master");
}

/* --- blocking: the start-up check and store-load.c --- */

static redisContext *
redis_target_connect_blocking(const struct config *cfg, const char *host,
    int port, const char *path, char *err, size_t errlen)
{
	struct timeval	 tv = { (time_t)(cfg->redis_timeout_ms / 1000),
			    (suseconds_t)(cfg->redis_timeout_ms % 1000) *
			    1000 };
	redisContext	*c;

	c = path != NULL ? redisConnectUnixWithTimeout(path, tv) :
	    redisConnectWithTimeout(host, port, tv);
	if (c == NULL || c->err) {
		snprintf(err, errlen, "%s", c != NULL ? c->errstr :
		    "out of memory");
		if (c != NULL)
			redisFree(c);
		return (NULL);
	}
	redisSetTimeout(c, tv);
	return (c);
}

int
redis_target_resolve_blocking(struct redis_target *t, int *unknown,
    char *err, size_t errlen)
{
	const struct redis_node	*n;
	redisContext		*c;
	redisReply		*r;
	size_t			 k, i, nunknown = 0, nanswered = 0;
	char			 why[256] = "", host[256], node[300];
	int			 port, got;

	*unknown = 0;
	if (t->known)
		return (0);
	for (k = 0; k < t->addr->nsentinels; k++) {
		i = (t->first + k) % t->addr->nsentinels;
		n = &t->addr->sentinels[i];
		redis_node_format(n->host, n->port, node, sizeof(node));
		if ((c = redis_target_connect_blocking(t->cfg, n->host,
		    n->port, NULL, why, sizeof(why))) == NULL) {
			snprintf(err, errlen, "sentinel %s: %s", node, why);
			continue;
		}
		if (t->cfg->sentinel_password != NULL) {
			r = redisCommand(c, "AUTH %s",
			    t->cfg->sentinel_password);
			if (r == NULL || r->type == REDIS_REPLY_ERROR) {
				snprintf(err, errlen, "sentinel %s: AUTH: %s",
				    node, r != NULL ? r->str : c->errstr);
				freeReplyObject(r);
				redisFree(c);
				continue;
			}
			freeReplyObject(r);
		}
		r = redisCommand(c, "SENTINEL get-master-addr-by-name %s",
		    t->addr->master_name);
		if (r == NULL) {
			snprintf(err, errlen, "sentinel %s: %s", node,
			    c->errstr);
			redisFree(c);
			continue;
		}
		nanswered++;
		got = redis_target_master_reply(r, host, sizeof(host), &port,
		    why, sizeof(why));
		freeReplyObject(r);
		redisFree(c);
		if (got == 1) {
			t->first = i;
			redis_target_set(t, host, port, "asked");
			return (0);
		}
		if (got == 0) {
			nunknown++;
			snprintf(err, errlen, "sentinel %s knows no master "
			    "named %s", node, t->addr->master_name);
		} else
			snprintf(err, errlen, "sentinel %s: %s", node, why);
	}
	if (nanswered > 0 && nunknown == nanswered) {
		*unknown = 1;
		snprintf(err, errlen, "redis %s: no sentinel knows a master "
		    "named %s (%zu of %zu answered)", t->cfg->redis,
		    t->addr->master_name, nanswered, t->addr->nsentinels);
	}
	return (-1);
}

int
redis_target_role_master(const void *reply, char *why, size_t len)
{
	const redisReply	*r = reply;

	if (r == NULL || r->type == REDIS_REPLY_ERROR)
		return (1);
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    strcmp(r->element[0]->str, "master") == 0)
		return (1);
	if (r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
	    r->element[0]->type == REDIS_REPLY_STRING &&
	    r->element[1]->type == REDIS_REPLY_STRING &&
	    r->element[2]->type == REDIS_REPLY_INTEGER)
		snprintf(why, len, "a replica (ROLE: %s of %s:%lld), not the "
		    "master", r->element[0]->str, r->element[1]->str,
		    r->element[2]->integer);
	else
		snprintf(why, len, "not a master (ROLE: %s)",
		    r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
		    r->element[0]->type == REDIS_REPLY_STRING ?
		    r->element[0]->str : "unexpected reply");
	return (0);
}

int
redis_target_check_start(const struct config *cfg, char *err, size_t errlen)
{
	struct redis_target	*t;
	redisContext		*c;
	redisReply		*r;
	const char		*host, *path;
	char			 why[256];
	int			 port, unknown, rc = 0;

	if (cfg->redis_addr.kind == REDIS_ADDR_NONE)
		return (0);
	t = redis_target_new(cfg, NULL);
	if (redis_target_resolve_blocking(t, &unknown, err, errlen) != 0) {
		if (unknown)
			rc = -1;
		else
			log_warnx("redis %s: %s; semd keeps asking",
			    cfg->redis, err);
		goto done;
	}
	(void)redis_target_current(t, &host, &port, &path);
	if ((c = redis_target_connect_blocking(cfg, host, port, path, why,
	    sizeof(why))) == NULL)
		goto done;	/* down now: the store keeps trying */
	if (cfg->redis_password != NULL)
		freeReplyObject(redisCommand(c, "AUTH %s",
		    cfg->redis_password));
	r = redisCommand(c, "ROLE");
	if (r != NULL && !redis_target_role_master(r, why, sizeof(why))) {
		snprintf(err, errlen, "redis %s: %s is %s", cfg->redis,
		    t->name, why);
		rc = -1;
	}
	freeReplyObject(r);
	redisFree(c);
done:
	redis_target_free(t);
	return (rc);
}
