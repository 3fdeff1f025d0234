/*
 * clock.h: time and one-shot timers, injected.
 *
 * Everything in semd that decides by time (the engine's waits and leases,
 * persistence's batches, the ownership lease, conn.c's time limits) reads
 * one monotonic clock through this table, so that the unit tests can move
 * time by hand (tests/engine_fake.h) instead of waiting for it. The daemon
 * fills it from libevent (timers.h).
 */
#ifndef SEMD_CLOCK_H
#define SEMD_CLOCK_H

#include <stdint.h>

struct clock {
	/* Milliseconds of a monotonic clock. */
	uint64_t	 (*now_ms)(void *ctx);
	/*
	 * Arm a one-shot timer: fire(arg) runs once, delay_ms from now, from
	 * the event loop (never from inside timer_add). Returns a handle for
	 * timer_del. A fired handle is dead: it must not be deleted.
	 */
	void		*(*timer_add)(void *ctx, uint64_t delay_ms,
			    void (*fire)(void *arg), void *arg);
	/* Cancel a timer that has not fired yet. */
	void		 (*timer_del)(void *ctx, void *handle);
	void		*ctx;
};

static inline uint64_t
clock_now(const struct clock *c)
{
	return (c->now_ms(c->ctx));
}

#endif /* SEMD_CLOCK_H */
