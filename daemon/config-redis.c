/*
 * config-redis.c: the checks of the persistence and Redis directives
 * (persistence, redis, sentinel-password, redis-min-replicas, standby),
 * once everything is read: a bad combination is refused at start (and by
 * semd -t) with one line, never found by the store at run time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "log.h"
#include "redis-addr.h"

/* redis into redis_addr (redis-addr.c), for the store to connect with. */
static int
config_redis_addr(struct config *cfg, char *err, size_t errlen)
{
	redis_addr_free(&cfg->redis_addr);
	if (cfg->redis == NULL)
		return (0);
	return (redis_addr_parse(cfg->redis, &cfg->redis_addr, err, errlen));
}

/*
 * redis-min-replicas needs a redis, and a renewal counts once replicas
 * acknowledged it: waiting as long as half the lease would let the lease
 * run out between two of them.
 */
static int
config_check_replicas(const struct config *cfg, char *err, size_t errlen)
{
	if (cfg->redis_min_replicas > 0 && cfg->persistence == PERSIST_NONE) {
		snprintf(err, errlen, "redis-min-replicas %lld needs "
		    "persistence (a redis to write to)",
		    (long long)cfg->redis_min_replicas);
		return (-1);
	}
	if (cfg->redis_min_replicas > 0 && cfg->redis_replica_timeout_ms >=
	    cfg->owner_lease_ms / 2) {
		snprintf(err, errlen, "redis-replica-timeout (%lld ms) must be "
		    "below half of owner-lease (%lld ms): every renewal of the "
		    "ownership waits for the replicas",
		    (long long)cfg->redis_replica_timeout_ms,
		    (long long)cfg->owner_lease_ms);
		return (-1);
	}
	return (0);
}

int
config_finish_redis(struct config *cfg, char *err, size_t errlen)
{
	if (cfg->persistence == PERSIST_UNSET)
		cfg->persistence = cfg->redis != NULL ? PERSIST_SYNC :
		    PERSIST_NONE;
	if (cfg->persistence != PERSIST_NONE && cfg->redis == NULL) {
		snprintf(err, errlen, "persistence %s needs a redis "
		    "HOST:PORT, unix:PATH or sentinel://HOST[:PORT],.../NAME",
		    config_persist_mode_name(cfg->persistence));
		return (-1);
	}
	if (config_redis_addr(cfg, err, errlen) != 0)
		return (-1);
	if (config_check_replicas(cfg, err, errlen) != 0)
		return (-1);
	if (cfg->sentinel_password != NULL &&
	    cfg->redis_addr.kind != REDIS_ADDR_SENTINEL) {
		snprintf(err, errlen, "sentinel-password needs a redis "
		    "sentinel://... address");
		return (-1);
	}
	if (cfg->redis_prefix == NULL)
		cfg->redis_prefix = xstrdup("");
	/* A standby is safe only if no grant is answered before it is owned. */
	if (cfg->standby && cfg->persistence != PERSIST_SYNC) {
		snprintf(err, errlen, "standby yes needs persistence sync: "
		    "with persistence %s a grant is answered before it is "
		    "written, and a standby taking over would not know it",
		    config_persist_mode_name(cfg->persistence));
		return (-1);
	}
	return (0);
}
