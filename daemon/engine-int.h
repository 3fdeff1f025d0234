/*
 * engine-int.h: what the files of the engine share (engine.c, the rules;
 * engine-id.c, request IDs; engine-restore.c, grants put back after a
 * restart), and nobody else: the engine's own state and the steps its
 * files build on. See engine.c for the rules.
 */
#ifndef SEMD_ENGINE_INT_H
#define SEMD_ENGINE_INT_H

#include <stdlib.h>

/* uthash must abort on ENOMEM, as every other allocation here does. */
#define uthash_fatal(msg)	abort()

#include "engine.h"

struct engine {
	struct clock	 clock;
	engine_event_fn		 on_event;
	void			*ctx;
	uint32_t		 max_sems;

	struct sem		*sems;		/* by name, creation order */
	struct grant		*grants;	/* by token */
	uint64_t		 last_token;
	uint64_t		 nwaiters;
	uint64_t		 nowners;
	int			 held;		/* engine_hold_grants() */
	struct engine_sem	*wake;		/* queues to serve, LIFO */
	int			 waking;	/* engine_wake_drain() runs */
	struct engine_stats	 stats;		/* the *_total counters */
};

/*
 * A semaphore as allocated here. Timer callbacks get one argument (the
 * grant or the waiter) and find their engine through its semaphore.
 */
struct engine_sem {
	struct sem	 s;	/* first: a struct sem * is a struct engine_sem * */
	struct engine	*e;
	struct engine_sem *wake_next;	/* on e->wake */
	int		 wake_queued;	/* on e->wake now */
	int		 wake_released;	/* units came back by a release */
};

/* The clock and the observer. */
uint64_t	 engine_now(struct engine *e);
void		*engine_timer_add(struct engine *e, uint64_t delay_ms,
		    void (*fire)(void *), void *arg);
void		 engine_timer_cancel(struct engine *e, void **timer);
void		 engine_emit(struct engine *e, enum engine_event_type type,
		    struct sem *s, struct grant *g, void *cookie);

/*
 * Grants: a new one of n units of s under token (its lead), bound to o
 * or ending ttl_ms from now; a new part of lead's grant on s (lead NULL:
 * the part is a lead). Both link it everywhere and emit nothing.
 */
struct grant	*engine_grant_new(struct engine *e, struct sem *s,
		    uint64_t token, uint32_t n, enum grant_kind kind,
		    struct owner *o, uint64_t ttl_ms);
struct grant	*engine_grant_part_new(struct engine *e, struct grant *lead,
		    struct sem *s, uint32_t n);

/*
 * Waiters (leads): off every queue (the semaphores left into sems, if
 * not NULL; returns how many), freed, a TIMEOUT counted, the timeout's
 * timer callback.
 */
uint32_t	 engine_waiter_dequeue(struct engine *e, struct waiter *w,
		    struct sem **sems);
void		 engine_waiter_free(struct waiter *w);
void		 engine_waiter_count_timeout(struct engine *e,
		    struct waiter *w);
void		 engine_waiter_timer_fired(void *arg);

/* Serve s's queue (and those its grants touch), now or after the wake
 * under way; released: units came back by a release. */
void		 engine_sem_wake(struct engine *e, struct sem *s,
		    int released);

/* engine-id.c: give lead g (no parts yet) a copy of the ID id. */
void		 engine_id_take(struct grant *g, const char *id, size_t len);
/*
 * engine-id.c: the ID rules for r, which has an ID: PERR_EXISTS; or
 * PERR_NONE with *status set when they decided (ACQUIRE_REPEATED and
 * *grant, or a take-over: ACQUIRE_QUEUED or ACQUIRE_TIMEOUT), left as it
 * was when the ID is free.
 */
enum proto_err	 engine_id_rules(struct engine *e,
		    const struct engine_request *r,
		    enum acquire_status *status, struct grant **grant);

#endif /* SEMD_ENGINE_INT_H */
