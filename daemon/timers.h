/*
 * timers.h: the engine's clock and one-shot timers, on libevent.
 *
 * Many waiters and leases share a handful of durations (every client of a
 * pool asks for the same TIMEOUT and LEASE), so durations seen before are
 * put on libevent "common timeouts": one queue per duration, O(1) to add
 * and remove, instead of the general O(log n) timer heap.
 */
#ifndef SEMD_TIMERS_H
#define SEMD_TIMERS_H

#include <event2/event.h>

#include "engine.h"

struct timers;

/* Timers on base; fill *clock for engine_new(). */
struct timers	*timers_new(struct event_base *base,
		    struct clock *clock);
/* Free the provider; every timer must have been deleted or fired. */
void		 timers_free(struct timers *t);
/* The monotonic clock in milliseconds, as the engine sees it. */
uint64_t	 timers_now_ms(void);
/*
 * The wall clock in Unix milliseconds: only for what must outlive the
 * process (a lease's end stored in Redis), never for deciding anything.
 */
uint64_t	 timers_wall_ms(void);

#endif /* SEMD_TIMERS_H */
