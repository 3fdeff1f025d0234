/*
 * store-wait.c: replica acknowledgements (redis-min-replicas, README
 * "Replicas"). With N > 0, every fenced write (a batch, a heartbeat, a
 * claim, the load's token bound, the final write) is followed on its own
 * connection by WAIT N redis-replica-timeout, and counts only once WAIT
 * says N replicas have it: a write the master applied but too few
 * replicas acknowledged is an outcome unknown (a failover could promote a
 * replica without it), so the caller treats it as a write whose answer
 * was lost: the batch's grants are undone and their removal written, a
 * renewal extends nothing, a claim takes nothing.
 *
 * WAIT waits for every write of its connection so far, so one WAIT right
 * behind each script call covers exactly what that call wrote and what
 * went before it on the connection.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "store-redis.h"

int
store_wait_on(const struct store *st)
{
	return (st->cfg->redis_min_replicas > 0);
}

uint64_t
store_wait_extra_ms(const struct store *st)
{
	return (store_wait_on(st) ?
	    (uint64_t)st->cfg->redis_replica_timeout_ms : 0);
}

void
store_wait_send(struct store *st, struct store_conn *sc, int tag)
{
	store_conn_command(sc, tag, "WAIT %lld %lld",
	    (long long)st->cfg->redis_min_replicas,
	    (long long)st->cfg->redis_replica_timeout_ms);
}

int
store_wait_enough(const struct store *st, const redisReply *r)
{
	return (r != NULL && r->type == REDIS_REPLY_INTEGER &&
	    r->integer >= st->cfg->redis_min_replicas);
}

int
store_wait_ok(struct store *st, const redisReply *r, char *why, size_t len)
{
	if (store_wait_enough(st, r))
		return (1);
	st->unacked_writes++;
	if (r == NULL || r->type != REDIS_REPLY_INTEGER)
		snprintf(why, len, "WAIT: %s (redis-min-replicas %lld needs "
		    "it)", r != NULL && r->type == REDIS_REPLY_ERROR ? r->str :
		    "no answer", (long long)st->cfg->redis_min_replicas);
	else
		snprintf(why, len, "only %lld of the %lld replicas "
		    "redis-min-replicas asks for acknowledged a write within "
		    "%lld ms: not counted as written", r->integer,
		    (long long)st->cfg->redis_min_replicas,
		    (long long)st->cfg->redis_replica_timeout_ms);
	return (0);
}

int
store_wait_blocking(struct store *st, redisContext *c, char *err,
    size_t errlen)
{
	uint64_t	 ms;
	struct timeval	 tv;
	redisReply	*r;
	int		 ok;

	if (!store_wait_on(st))
		return (0);
	/* WAIT may take its timeout, on top of a command's own bound. */
	ms = (uint64_t)st->cfg->redis_timeout_ms + store_wait_extra_ms(st);
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	redisSetTimeout(c, tv);
	r = redisCommand(c, "WAIT %lld %lld",
	    (long long)st->cfg->redis_min_replicas,
	    (long long)st->cfg->redis_replica_timeout_ms);
	if (r == NULL) {
		snprintf(err, errlen, "WAIT: %s", c->errstr);
		st->unacked_writes++;
		return (-1);
	}
	ok = store_wait_ok(st, r, err, errlen);
	freeReplyObject(r);
	return (ok ? 0 : -1);
}
