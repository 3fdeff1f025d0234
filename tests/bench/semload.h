/*
 * semload.h: the load generator's run state, shared by semload.c (options,
 * phases, report) and its targets: load-semd.c (semd's text protocol) and
 * load-redis.c (Redis PING and the Lua sorted-set semaphore, over hiredis).
 *
 * One thread, one libevent loop, a closed loop per connection: a
 * connection sends its next request only when the previous one (or, in
 * pipelined mode, one of its K pairs) is answered. A target connects
 * connection i in its connect(), calls load_ready() once it can send,
 * and from start() on reports each event below; semload.c counts only
 * what completes inside the measured window.
 */
#ifndef SEMLOAD_H
#define SEMLOAD_H

#include <stdint.h>

#include <event2/event.h>

#include "hist.h"

enum load_target {
	TARGET_SEMD,		/* ACQUIRE/RELEASE, or TRY/RELEASE pipelined */
	TARGET_PING,		/* Redis PING (hiredis) */
	TARGET_LUA		/* Redis sorted-set semaphore (hiredis, Lua) */
};

enum load_phase {
	PHASE_CONNECT,		/* connecting; nothing sent but handshakes */
	PHASE_WARMUP,		/* load on, not counted */
	PHASE_MEASURE,		/* counted */
	PHASE_DONE		/* stop sending; the loop is leaving */
};

struct load_opts {
	enum load_target	 target;
	const char		*host;
	int			 port;
	int			 conns;
	int			 pipeline;	/* semd: K TRY+RELEASE pairs */
	double			 hold_ms;	/* grant read -> RELEASE sent */
	double			 think_ms;	/* RELEASE answered -> next */
	double			 retry_ms;	/* lua: pause after a refusal */
	double			 warmup_s;
	double			 duration_s;
	double			 connect_timeout_s;
	const char		*sem;		/* semaphore name / ZSET key */
	long			 limit;		/* capacity */
	long			 lock_timeout_ms; /* lua: holder expiry */
	int			 create;	/* semd: CREATE sem limit first */
	int			 rss_pid;	/* read this pid's VmRSS */
	const char		*label;
};

struct load {
	struct event_base	*base;
	struct load_opts	 o;
	enum load_phase		 phase;
	uint64_t		 t_measure_ns;	/* start of the window */
	uint64_t		 t_end_ns;	/* its end */

	int			 next_connect;	/* next connection to open */
	int			 connecting;	/* opened, not ready */
	int			 ready;

	/* Counted in the window. */
	uint64_t		 pairs;		/* grant + release answered */
	uint64_t		 ops;		/* PINGs answered */
	uint64_t		 refusals;	/* TRY TIMEOUT, Lua 0 */
	uint64_t		 attempts;	/* acquire requests sent */
	struct hist		 acquire;	/* first send -> grant read */
	struct hist		 release;	/* RELEASE sent -> its reply */
	struct hist		 handoff;	/* RELEASE sent -> waiter's grant */
	struct hist		 ping;

	/* Over the whole run, for the contention bookkeeping. */
	int			 acquiring;	/* acquires under way */
	int			 held;		/* grants read, RELEASE not sent */
	int			 max_held;
	uint64_t		 grants;	/* all grants read */
	uint64_t		 handoff_skipped; /* went to a newcomer */
	uint64_t		*relq;		/* RELEASE send times, FIFO */
	unsigned		 relq_head, relq_len, relq_cap;
	uint64_t		 relq_dropped;

	long			 rss_before_kb, rss_ready_kb, rss_end_kb;
};

/* A target: prepare() runs blocking before the loop (CREATE, SCRIPT
 * LOAD) and returns -1 after printing why; connect() opens connection i;
 * start() begins the load on every connection; starved() counts the
 * connections whose acquire began before the measured window and was
 * still not granted at its end; stop() frees them. */
struct load_ops {
	const char	*name;
	int		 (*prepare)(struct load *);
	int		 (*connect)(struct load *, int i);
	void		 (*start)(struct load *);
	int		 (*starved)(const struct load *);
	void		 (*stop)(struct load *);
};

extern const struct load_ops load_semd_ops;
extern const struct load_ops load_ping_ops;
extern const struct load_ops load_lua_ops;

uint64_t	 load_now_ns(void);
int		 load_counting(const struct load *);
/* Connection i can send: open the next one; start when all are. */
void		 load_ready(struct load *);
/* An acquire request is about to go out; first: a new acquire begins
 * (not a retry of a refused one). */
void		 load_attempt(struct load *, int first);
/* An acquire request was refused (TRY TIMEOUT, Lua 0); gave_up: the
 * acquire ends there (TRY), else it will be retried (Lua). */
void		 load_refused(struct load *, int gave_up);
/* Granted: t0 is when its first request went out. */
void		 load_granted(struct load *, uint64_t t0, uint64_t now);
/* A RELEASE is about to go out at now (the grant is given up). */
void		 load_release_sent(struct load *, uint64_t now);
/* A RELEASE sent at t0 is answered: one pair done. */
void		 load_released(struct load *, uint64_t t0, uint64_t now);
/* ms as a timeval for a timer. */
void		 load_tv(double ms, struct timeval *);
/* Print why and exit 1: the run cannot be trusted. */
void		 load_fatal(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2), noreturn));

#endif /* SEMLOAD_H */
