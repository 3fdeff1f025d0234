/*
 * stats.c: what the rows of stats.h read (see there).
 */
#include <unistd.h>

#include "conn.h"
#include "proc.h"
#include "server.h"
#include "stats.h"

void
stats_view_get(struct stats_view *v, const struct server *srv)
{
	v->srv = srv;
	engine_get_stats(srv->engine, &v->es);
	persist_get_stats(srv->persist, &v->ps);
	v->pid = (uint64_t)getpid();
	v->connections = conn_count(srv);
	v->output_bytes = conn_output_bytes(srv);
	v->uptime_ms = clock_now(&srv->clock) - srv->start_ms;
	v->rss_bytes = proc_rss_bytes();
	v->open_fds = proc_open_fds();
}

void
sem_view_get(struct sem_view *r, const struct sem *s)
{
	r->name = s->name;
	r->capacity = s->capacity;
	r->used = s->used;
	r->holders = s->nholders;
	r->waiters = s->nwaiters;
	r->st = &s->stats;
}

uint64_t
stats_owner_lease_ms(const struct stats_view *v)
{
	return ((uint64_t)v->srv->cfg->owner_lease_ms);
}

uint64_t
stats_reclaim_grace_ms(const struct stats_view *v)
{
	return ((uint64_t)v->srv->cfg->reclaim_grace_ms);
}

uint64_t
stats_redis_min_replicas(const struct stats_view *v)
{
	return ((uint64_t)v->srv->cfg->redis_min_replicas);
}

uint64_t
stats_redis_replica_timeout_ms(const struct stats_view *v)
{
	return ((uint64_t)v->srv->cfg->redis_replica_timeout_ms);
}

const struct server_stats *
stats_server(const struct stats_view *v)
{
	return (&v->srv->stats);
}
