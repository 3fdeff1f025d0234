/*
 * store_fake.h: a store (store.h's struct store_ops) in memory, for the
 * unit tests of persistence (tests/test_persist.c) and of connections
 * (tests/test_conn.c), beside the fake clock of engine_fake.h.
 *
 * A test scripts what a claim answers (on the next loop turn, or inside
 * claim() with claim_inline: the store may do either), what a load finds,
 * how many batches may be in flight (depth) and whether the asynchronous
 * connection comes up by itself (auto_ready); the fake records every
 * claim and every batch submitted, and the test answers the batches as
 * Redis would (fake_ack, fake_fail, fake_fence, renewed). Time is
 * engine_fake.h's fake_now.
 */
#ifndef SEMD_STORE_FAKE_H
#define SEMD_STORE_FAKE_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "store.h"

#define MAX_CLAIMS	256
#define MAX_BATCHES	1024
#define MAX_LOAD	8

enum fake_claim_answer {
	CLAIM_OURS,		/* ours, with claim_epoch */
	CLAIM_OWNED,		/* claim_addr owns it, with claim_epoch */
	CLAIM_SUPERSEDED,	/* resume only, and the epoch moved on */
	CLAIM_WAIT,		/* our own key, unacknowledged: it expires */
	CLAIM_EPOCH_LOST,	/* the epoch counter is below the least */
	CLAIM_ERROR		/* the store cannot be reached */
};

struct fake_claim {
	char			 addr[STORE_ADDR_MAX];
	uint64_t		 resume_epoch;
	int			 resume_only;
	uint64_t		 least_epoch;
	uint64_t		 at_ms;		/* also the sent_ms of an ours */
	enum fake_claim_answer	 answer;	/* the script's, when made */
	uint64_t		 epoch;
	const char		*owner;
};

struct fake_batch {
	struct store_change	*ch;	/* sem names are copies */
	size_t			 n;
	uint64_t		 sent_ms;
};

struct fake_sem {
	const char	*name;
	uint32_t	 capacity;
	int		 damaged;
};

struct fake_grant {
	const char		*sem;
	uint64_t		 token;
	uint32_t		 n;
	enum store_grant_kind	 kind;
	uint64_t		 lease_left_ms;
	const char		*holder_name;
	const char		*holder_addr;
	uint32_t		 multi;		/* 0, 1: a single semaphore */
	const char		*id;
};

struct store {
	const struct store_events *ev;
	void			*ctx;
	struct event_base	*base;
	char			 advertised[STORE_ADDR_MAX];

	/* The script. */
	enum fake_claim_answer	 claim_answer;
	uint64_t		 claim_epoch;
	const char		*claim_addr;
	uint64_t		 claim_tokens;	/* the bound a claim sees */
	int			 claim_inline;	/* answer inside claim() */
	int			 load_fail;	/* loads fail while set */
	int			 load_repair;	/* loads report damage */
	struct fake_sem		 load_sems[MAX_LOAD];
	size_t			 nload_sems;
	struct fake_grant	 load_grants[MAX_LOAD];
	size_t			 nload_grants;
	int			 auto_ready;	/* connect, then ready */
	unsigned		 depth;		/* batches in flight at most
						 * (0: one) */
	char			**ready_names;	/* the sems ready() reports */
	size_t			 nready_names;

	/* What happened. */
	struct fake_claim	 claims[MAX_CLAIMS];
	size_t			 nclaims;
	struct fake_batch	 batches[MAX_BATCHES];
	size_t			 nbatches;
	size_t			 nacked;	/* batches[nacked..] in flight */
	uint64_t		 bound;		/* Redis's token bound */
	int			 connected, ready;
	unsigned		 ncreates, ndestroys, nloads, nconnects;
	unsigned		 ndisconnects, nreconnects, nblocking;
	unsigned		 nbad;		/* calls against the contract */
};

extern struct store		 fake;
extern const struct store_ops	 fake_ops;

/* Forget the batches recorded (their copies are freed). */
void	fake_free_batches(void);
/* The asynchronous connection is ready (tokens: fake.bound). */
void	fake_ready(void);
/* Redis acknowledges the oldest batch in flight (ok), or fails it. */
void	fake_ack(int ok);
/* The connection failed: every batch in flight fails, then lost(). */
void	fake_fail(const char *why);
/* A fenced request found another owner: the connection is gone. */
void	fake_fence(const char *owner);
/* Does batch i carry a change of that type for sem (and token)? */
int	batch_has(size_t i, enum store_change_type type, const char *sem,
	    uint64_t token);
/* What the next loads find. */
void	script_load_sem(const char *name, uint32_t capacity);
void	script_load_damaged(const char *name);
void	script_load_lease(const char *sem, uint64_t token, uint32_t n,
	    const char *name, const char *addr);

#endif /* SEMD_STORE_FAKE_H */
