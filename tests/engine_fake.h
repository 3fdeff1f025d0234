/*
 * engine_fake.h: what the engine's tests share (tests/test_engine.c and
 * the engine fuzzer tests/fuzz/fuzz_engine.c, and the persistence tests
 * tests/test_persist.c): a fake clock whose timers
 * fire only when the test moves time with fake_advance(), and a check of
 * one semaphore's counters against its lists.
 */
#ifndef SEMD_ENGINE_FAKE_H
#define SEMD_ENGINE_FAKE_H

#include <stdint.h>

#include "engine.h"

/* The clock to give engine_new(). */
extern const struct clock	 fake_clock;
/* Read-only for tests: the time now and the timers armed. */
extern uint64_t				 fake_now;
extern unsigned				 fake_ntimers;
/*
 * Set by tests: timers fire this many ms early (at most half their wait),
 * as libevent's can, counting from a time it cached.
 */
extern uint64_t				 fake_early;

/* Forget every timer (freeing them), set the time to now_ms, no early. */
void		 fake_reset(uint64_t now_ms);
/*
 * Move the clock ms forward, firing every timer that falls due in deadline
 * order (ties in arming order), timers armed by a fired callback included.
 */
void		 fake_advance(uint64_t ms);
/*
 * Move the clock ms forward and fire nothing, as for a process that was
 * stopped: what fell due fires at the next fake_advance().
 */
void		 fake_jump(uint64_t ms);

/*
 * NULL if s->used, s->nholders and s->nwaiters agree with its lists and
 * every grant and waiter on them points back to s; else what is wrong.
 */
const char	*fake_check_sem(const struct sem *s);

#endif /* SEMD_ENGINE_FAKE_H */
