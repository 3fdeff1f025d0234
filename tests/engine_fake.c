/*
 * engine_fake.c: the fake clock and the semaphore check of engine_fake.h.
 *
 * Timers sit on one unsorted list: tests arm a handful, so finding the
 * next due one by a walk is simplest. A timer_del of a handle that fired
 * or was deleted is an engine bug, and aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <utlist.h>

#include "engine_fake.h"

struct fake_timer {
	uint64_t		 deadline_ms;
	uint64_t		 seq;		/* arming order breaks ties */
	void			 (*fire)(void *);
	void			*arg;
	struct fake_timer	*prev, *next;
};

uint64_t			 fake_now;
unsigned			 fake_ntimers;
uint64_t			 fake_early;
static uint64_t			 fake_seq;
static struct fake_timer	*fake_timers;

static uint64_t
fake_now_ms(void *ctx)
{
	(void)ctx;
	return (fake_now);
}

static void *
fake_timer_add(void *ctx, uint64_t delay_ms, void (*fire)(void *), void *arg)
{
	struct fake_timer	*t;

	(void)ctx;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		abort();
	t->deadline_ms = fake_now + delay_ms -
	    (fake_early < delay_ms / 2 ? fake_early : delay_ms / 2);
	t->seq = ++fake_seq;
	t->fire = fire;
	t->arg = arg;
	DL_APPEND(fake_timers, t);
	fake_ntimers++;
	return (t);
}

static void
fake_timer_del(void *ctx, void *handle)
{
	struct fake_timer	*t;

	(void)ctx;
	DL_FOREACH(fake_timers, t) {
		if (t == handle)
			break;
	}
	if (t == NULL) {
		fprintf(stderr, "engine_fake: timer_del of a dead timer\n");
		abort();
	}
	DL_DELETE(fake_timers, t);
	fake_ntimers--;
	free(t);
}

const struct clock fake_clock = {
	fake_now_ms, fake_timer_add, fake_timer_del, NULL
};

void
fake_reset(uint64_t now_ms)
{
	struct fake_timer	*t, *tmp;

	DL_FOREACH_SAFE(fake_timers, t, tmp) {
		DL_DELETE(fake_timers, t);
		free(t);
	}
	fake_ntimers = 0;
	fake_seq = 0;
	fake_now = now_ms;
	fake_early = 0;
}

/* The earliest timer due by until_ms, or NULL. */
static struct fake_timer *
fake_next_due(uint64_t until_ms)
{
	struct fake_timer	*t, *best = NULL;

	DL_FOREACH(fake_timers, t) {
		if (t->deadline_ms > until_ms)
			continue;
		if (best == NULL || t->deadline_ms < best->deadline_ms ||
		    (t->deadline_ms == best->deadline_ms && t->seq < best->seq))
			best = t;
	}
	return (best);
}

void
fake_advance(uint64_t ms)
{
	uint64_t		 until_ms = fake_now + ms;
	struct fake_timer	*t;
	void			 (*fire)(void *);
	void			*arg;

	while ((t = fake_next_due(until_ms)) != NULL) {
		if (t->deadline_ms > fake_now)
			fake_now = t->deadline_ms;
		fire = t->fire;
		arg = t->arg;
		DL_DELETE(fake_timers, t);
		fake_ntimers--;
		free(t);		/* a fired handle is dead */
		fire(arg);
	}
	fake_now = until_ms;
}

void
fake_jump(uint64_t ms)
{
	fake_now += ms;
}

const char *
fake_check_sem(const struct sem *s)
{
	struct grant	*g;
	struct waiter	*w;
	uint64_t	 used = 0;
	uint32_t	 nholders = 0, nwaiters = 0;

	DL_FOREACH2(s->grants, g, sem_next) {
		if (g->sem != s)
			return ("a grant points to another semaphore");
		used += g->n;
		nholders++;
	}
	DL_FOREACH2(s->queue, w, q_next) {
		if (w->sem != s)
			return ("a waiter points to another semaphore");
		nwaiters++;
	}
	if (s->used != used)
		return ("used is not the sum of n over the grants");
	if (s->nholders != nholders)
		return ("nholders is not the number of grants");
	if (s->nwaiters != nwaiters)
		return ("nwaiters is not the length of the queue");
	return (NULL);
}
