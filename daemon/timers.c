/*
 * timers.c: engine timers on libevent, with common timeouts per duration.
 */
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>
#include <uthash.h>

#include "log.h"
#include "timers.h"

/* libevent allows 256 common timeouts per base; keep a margin. */
#define TIMERS_COMMON_MAX	200

struct common_timeout {
	uint64_t		 ms;
	const struct timeval	*tv;	/* libevent's magic timeval */
	UT_hash_handle		 hh;
};

struct timers {
	struct event_base	*base;
	struct common_timeout	*common;	/* by ms */
	unsigned		 ncommon;
};

struct timer {
	struct event	*ev;
	void		 (*fire)(void *);
	void		*arg;
};

static uint64_t
timers_clock_ms(clockid_t id)
{
	struct timespec	ts;

	clock_gettime(id, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

uint64_t
timers_now_ms(void)
{
	return (timers_clock_ms(CLOCK_MONOTONIC));
}

uint64_t
timers_wall_ms(void)
{
	return (timers_clock_ms(CLOCK_REALTIME));
}

static uint64_t
timers_clock_now(void *ctx)
{
	(void)ctx;
	return (timers_now_ms());
}

/* The timeval to arm a delay of ms with: a common one when there is room. */
static const struct timeval *
timers_timeval(struct timers *t, uint64_t ms, struct timeval *plain)
{
	struct common_timeout	*ct;
	struct timeval		 tv;

	plain->tv_sec = (time_t)(ms / 1000);
	plain->tv_usec = (suseconds_t)((ms % 1000) * 1000);
	HASH_FIND(hh, t->common, &ms, sizeof(ms), ct);
	if (ct != NULL)
		return (ct->tv);
	if (t->ncommon >= TIMERS_COMMON_MAX || ms == 0)
		return (plain);
	tv = *plain;
	ct = xcalloc(1, sizeof(*ct));
	ct->ms = ms;
	if ((ct->tv = event_base_init_common_timeout(t->base, &tv)) == NULL) {
		free(ct);
		return (plain);
	}
	HASH_ADD(hh, t->common, ms, sizeof(ct->ms), ct);
	t->ncommon++;
	return (ct->tv);
}

/* A timer fired: free it first, so fire() may arm new timers freely. */
static void
timers_fire(evutil_socket_t fd, short what, void *arg)
{
	struct timer	*tm = arg;
	void		 (*fire)(void *) = tm->fire;
	void		*fire_arg = tm->arg;

	(void)fd;
	(void)what;
	event_free(tm->ev);
	free(tm);
	fire(fire_arg);
}

static void *
timers_add(void *ctx, uint64_t delay_ms, void (*fire)(void *), void *arg)
{
	struct timers	*t = ctx;
	struct timer	*tm = xcalloc(1, sizeof(*tm));
	struct timeval	 plain;

	tm->fire = fire;
	tm->arg = arg;
	if ((tm->ev = evtimer_new(t->base, timers_fire, tm)) == NULL)
		abort();
	/*
	 * Never early: libevent counts from the time it cached when this
	 * loop turn began, which may be well before now on a busy turn, and
	 * the engine's millisecond clock truncates. A lease must end late,
	 * never early (doc/protocol.md, "Semantics"), so count from now and round up.
	 */
	event_base_update_cache_time(t->base);
	if (evtimer_add(tm->ev, timers_timeval(t, delay_ms + 1, &plain)) != 0)
		fatalx("cannot arm a timer of %llu ms",
		    (unsigned long long)delay_ms);
	return (tm);
}

static void
timers_del(void *ctx, void *handle)
{
	struct timer	*tm = handle;

	(void)ctx;
	event_free(tm->ev);
	free(tm);
}

struct timers *
timers_new(struct event_base *base, struct clock *clock)
{
	struct timers	*t = xcalloc(1, sizeof(*t));

	t->base = base;
	clock->now_ms = timers_clock_now;
	clock->timer_add = timers_add;
	clock->timer_del = timers_del;
	clock->ctx = t;
	return (t);
}

void
timers_free(struct timers *t)
{
	struct common_timeout	*ct, *tmp;

	HASH_ITER(hh, t->common, ct, tmp) {
		HASH_DEL(t->common, ct);
		free(ct);
	}
	free(t);
}
