/*
 * stats.h: the one table of semd's statistics, as memcached's
 * THREAD_STATS_FIELDS: STATS (cmd-server.c), INFO <sem> (cmd-sem.c) and
 * /metrics (metrics.c) are generated from it, so adding a counter is one
 * line here and the three can never disagree.
 *
 * A daemon-wide row: X(key, metric, type, help, value): key, the STATS
 * key (an identifier); metric, the Prometheus name, or NULL for STATS
 * only; type, COUNTER or GAUGE; help, the metric's HELP text; value, an
 * expression of type uint64_t over `const struct stats_view *v`.
 *
 * A per-semaphore row: X(key, metric, type, help, value), the same over
 * `const struct sem_view *r` (INFO's key, in INFO's order; the metric has
 * a sem= label). A view rather than the semaphore itself, because
 * /metrics folds the semaphores past metrics-max-semaphores into one.
 *
 * States (role, persistence, ownership) are enums with name functions in
 * their own modules (persist.h, owner.h): metrics.c walks the enums, so
 * renaming a state breaks the build, not /healthz.
 */
#ifndef SEMD_STATS_H
#define SEMD_STATS_H

#include <stdint.h>

#include "engine.h"
#include "persist.h"

struct server;

/*
 * What a row reads: taken once per STATS or scrape, before its reply is
 * written (output_bytes must not count the reply that shows it).
 */
struct stats_view {
	const struct server	*srv;
	struct engine_stats	 es;
	struct persist_stats	 ps;
	uint64_t		 pid;
	uint64_t		 connections;
	uint64_t		 output_bytes;	/* before the reply that shows it */
	uint64_t		 uptime_ms;
	uint64_t		 rss_bytes;
	uint64_t		 open_fds;
};

void	stats_view_get(struct stats_view *v, const struct server *srv);

#define STATS_FIELDS(X)							\
	X(pid, NULL, GAUGE, "", v->pid)					\
	X(uptime, "semd_uptime_seconds", GAUGE,				\
	    "Seconds since the daemon started.", v->uptime_ms / 1000)	\
	X(uptime_ms, NULL, GAUGE, "", v->uptime_ms)			\
	X(connections, "semd_connections", GAUGE,			\
	    "Client connections open now.", v->connections)		\
	X(connections_total, "semd_connections_total", COUNTER,		\
	    "Client connections accepted.", stats_server(v)->connections_total) \
	X(rejected_connections, "semd_rejected_connections_total", COUNTER, \
	    "Connections refused (maxclients, protected mode).",	\
	    stats_server(v)->rejected_total)				\
	X(output_bytes, "semd_output_bytes", GAUGE,			\
	    "Replies not yet read by their clients, in bytes.",		\
	    v->output_bytes)						\
	X(commands, NULL, COUNTER, "", stats_server(v)->commands_total) \
	X(errors, NULL, COUNTER, "", stats_server(v)->errors_total)	\
	X(semaphores, "semd_semaphores", GAUGE, "Semaphores now.",	\
	    v->es.sems)							\
	X(grants, "semd_grants", GAUGE, "Grants held now.", v->es.grants) \
	X(waiters, "semd_waiters", GAUGE, "Acquires queued now.",	\
	    v->es.waiters)						\
	X(grants_total, NULL, COUNTER, "", v->es.grants_total)		\
	X(releases, NULL, COUNTER, "", v->es.releases_total)		\
	X(timeouts, NULL, COUNTER, "", v->es.timeouts_total)		\
	X(expired, NULL, COUNTER, "", v->es.expired_total)		\
	X(revoked, NULL, COUNTER, "", v->es.revoked_total)		\
	X(epoch, "semd_epoch", GAUGE,					\
	    "The owner's epoch; 0 when none is known.", v->ps.epoch)	\
	X(owner_lease_ms, NULL, GAUGE, "", stats_owner_lease_ms(v))	\
	X(reclaim_grace_ms, NULL, GAUGE, "", stats_reclaim_grace_ms(v)) \
	X(persistence_backlog, "semd_persistence_backlog", GAUGE,	\
	    "Changes not yet written to Redis.", v->ps.backlog)		\
	X(persistence_resync, NULL, GAUGE, "", (uint64_t)v->ps.resync)	\
	X(persistence_batches, "semd_persistence_batches_total", COUNTER, \
	    "Batches Redis acknowledged.", v->ps.batches)		\
	X(persistence_failures, "semd_persistence_failures_total", COUNTER, \
	    "Batches, Redis connections, ownerships or loads that failed.", \
	    v->ps.failures)						\
	X(redis_min_replicas, "semd_redis_min_replicas", GAUGE,		\
	    "Replicas that must acknowledge a write (0: not asked).",	\
	    stats_redis_min_replicas(v))				\
	X(redis_replica_timeout_ms, NULL, GAUGE, "",			\
	    stats_redis_replica_timeout_ms(v))				\
	X(redis_unacked_writes, "semd_redis_unacked_writes_total", COUNTER, \
	    "WAITs after writes (batches, renewals, claims) that found " \
	    "too few replicas: those writes do not count.",		\
	    v->ps.unacked_writes)					\
	X(used_memory_rss, "process_resident_memory_bytes", GAUGE,	\
	    "Resident memory size in bytes.", v->rss_bytes)		\
	X(open_fds, "process_open_fds", GAUGE, "Open file descriptors.", \
	    v->open_fds)

/* One semaphore's figures, or the sum of several. */
struct sem_view {
	const char		*name;
	uint64_t		 capacity, used, holders, waiters;
	const struct sem_stats	*st;
};

void	sem_view_get(struct sem_view *r, const struct sem *s);

#define SEM_STATS_FIELDS(X)						\
	X(capacity, "semd_semaphore_capacity", GAUGE,			\
	    "Units the semaphore has.", r->capacity)			\
	X(used, "semd_semaphore_used", GAUGE, "Units granted now.",	\
	    r->used)							\
	X(available, "semd_semaphore_available", GAUGE,			\
	    "Units free now: capacity - used, at least 0.",		\
	    r->used >= r->capacity ? 0 : r->capacity - r->used)		\
	X(holders, "semd_semaphore_holders", GAUGE, "Grants held now.", \
	    r->holders)							\
	X(waiters, "semd_semaphore_waiters", GAUGE, "Acquires queued now.", \
	    r->waiters)							\
	X(wait_p50_ms, NULL, GAUGE, "", histo_quantile_ms(&r->st->wait, 0.50)) \
	X(wait_p99_ms, NULL, GAUGE, "", histo_quantile_ms(&r->st->wait, 0.99)) \
	X(grants_total, "semd_grants_total", COUNTER,			\
	    "Grants made, at once or to a queued waiter.",		\
	    r->st->grants_total)					\
	X(timeouts_total, "semd_timeouts_total", COUNTER,		\
	    "Acquires answered TIMEOUT.", r->st->timeouts_total)

/* What the rows above read through, so that this header needs no more. */
uint64_t	stats_owner_lease_ms(const struct stats_view *v);
uint64_t	stats_reclaim_grace_ms(const struct stats_view *v);
uint64_t	stats_redis_min_replicas(const struct stats_view *v);
uint64_t	stats_redis_replica_timeout_ms(const struct stats_view *v);
const struct server_stats *stats_server(const struct stats_view *v);

#endif /* SEMD_STATS_H */
