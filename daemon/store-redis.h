/*
 * store-redis.h: the Redis store's own parts, shared by the files that
 * make it up and by nothing else (persist.c sees store.h only):
 *
 *   store-redis.c   the batch pipeline and store_redis_ops
 *   store-load.c    the blocking connection: start-up load, final write
 *   store-claim.c   the claim connection and its script
 *   store-conn.c    the asynchronous connection both of those use
 *   store-wait.c    replica acknowledgements (WAIT) after every write
 *   store-model.c   keys, encoding and decoding, pure
 */
#ifndef SEMD_STORE_REDIS_H
#define SEMD_STORE_REDIS_H

#include <stdint.h>

#include <event2/event.h>
#include <hiredis/hiredis.h>

#include "config.h"
#include "log.h"
#include "store.h"
#include "store-conn.h"
#include "store-model.h"

/* persistence-pipeline's most batches, and a heartbeat. */
#define STORE_INFLIGHT_MAX	(CONFIG_PIPELINE_MAX + 1)

/* A fenced request in flight: a batch or a heartbeat. */
struct store_req {
	int		 step;		/* STEP_BATCH or STEP_HEARTBEAT */
	uint64_t	 sent_ms;	/* the ownership lease runs from then */
	uint64_t	 deadline_ms;	/* answered by then, or Redis is down */
	int		 written;	/* the master applied it; WAIT is due */
	uint64_t	 tokens;	/* a written heartbeat's token bound */
};

struct store {
	const struct config	*cfg;
	struct event_base	*base;
	struct store_events	 ev;
	void			*ctx;
	struct store_model	 model;		/* prefix, fence, advertise */

	struct redis_target	*target;	/* the master, for every conn */

	/* The batch pipeline (store-redis.c). */
	struct store_conn	 conn;
	int			 ready;		/* handshake done */
	/* Fenced requests in flight, oldest first (a ring): answered in
	 * order, each with its own deadline. */
	struct store_req	 inflight[STORE_INFLIGHT_MAX];
	unsigned		 inflight_head, ninflight;
	unsigned		 nbatches;	/* STEP_BATCH ones among them */
	uint64_t		 hs_tokens;	/* read in the handshake */
	uint64_t		 hs_generation;	/* the master's, at the last */
	struct event		*retry_ev;	/* the next connect */
	struct event		*heartbeat_ev;
	struct event		*write_ev;	/* send what was queued, now */
	int			 wait_due;	/* WAIT goes behind what is queued */
	unsigned		 backoff_ms;	/* reset by a fenced success only */
	int			 ever_connected;
	char			 write_sha[48];	/* SCRIPT LOAD answers */
	char			 renew_sha[48];
	struct log_repeat	 failure;	/* what keeps failing, if so */
	/* The oldest batch's error reply says Redis applied none of it. */
	int			 oldest_refused;

	/* Ownership (store-claim.c). */
	char			 id[24];	/* this process, in the owner key */
	uint64_t		 epoch;		/* 0: not the owner */
	struct store_conn	 claim_conn;
	int			 claiming;	/* claimed() is due */
	int			 claim_queued;	/* its script is sent */
	uint64_t		 claim_resume_epoch; /* store_claim's words */
	int			 claim_resume_only;
	uint64_t		 claim_least_epoch;
	uint64_t		 claim_sent_ms;
	struct store_owner	 claim_own;	/* decoded; WAIT is due */

	char			 address[300];	/* redis as configured */
	char			 master[300];	/* store_master()'s words */
	char			 subject[310];	/* "redis ADDRESS", for the log */
	char			 dataset[400];
	char			 appendonly[16];
	char			 appendfsync[16];
	char			 durability[40];
	uint64_t		 unacked_writes; /* WAITs that found too few */
};

/* store-load.c */
int	store_load(struct store *st, const struct store_loader *ld, void *ctx,
	    uint64_t reserve, uint64_t *tokens, int *repair, char *err,
	    size_t errlen);
int	store_write_blocking(struct store *st, const struct store_change *ch,
	    size_t n);

/* store-claim.c */
void	store_claim_init(struct store *st);
void	store_claim(struct store *st, const char *addr, uint64_t resume_epoch,
	    int resume_only, uint64_t least_epoch);

/* store-wait.c */
/* 1 when redis-min-replicas asks for WAIT after every fenced write. */
int	store_wait_on(const struct store *st);
/* What WAIT may add to a write's answer: redis-replica-timeout, or 0. */
uint64_t store_wait_extra_ms(const struct store *st);
/* Queue WAIT N timeout on sc, right behind a write; its answer as tag. */
void	store_wait_send(struct store *st, struct store_conn *sc, int tag);
/* 1 when WAIT's answer r says enough replicas acknowledged. */
int	store_wait_enough(const struct store *st, const redisReply *r);
/*
 * 1 when WAIT's answer r says enough replicas acknowledged; else 0, why,
 * and the shortfall counted (unacked_writes).
 */
int	store_wait_ok(struct store *st, const redisReply *r, char *why,
	    size_t len);
/* Blocking: WAIT on c after a write; 0, or -1 and err (also counted). */
int	store_wait_blocking(struct store *st, redisContext *c, char *err,
	    size_t errlen);

/* Log the keys a write replaced and report them (events' repaired()). */
void	store_report_repaired(struct store *st, const redisReply *r);

#endif /* SEMD_STORE_REDIS_H */
