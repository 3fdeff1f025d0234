/*
 * owner.h: this daemon's ownership of the data set (README "Ownership and
 * standby"), as one state machine.
 *
 *   CLAIMING  -> LOADING (ours), STANDBY (owned, standby yes),
 *                WAITING (owned, standby no), EXITING
 *   WAITING   -> LOADING (the key lapsed: ours), EXITING (it was renewed
 *                for a whole lease: a live owner)
 *   STANDBY   -> LOADING (the owner's key lapsed: ours)
 *   LOADING   -> OWNER (loaded), CLAIMING or STANDBY (the load failed:
 *                claimed again after a backoff)
 *   OWNER     -> LOST (the deadline passed, or the fence refused us)
 *   LOST      -> LOADING (resumed or taken again), STANDBY, WAITING,
 *                EXITING (standby no, and another daemon took it)
 *
 * It is driven by events: a claim's outcome, a renewal (an acknowledged
 * fenced request), the fence refusing us, and the clock (the deadline; a
 * check before anything is answered: ownership_check). Every transition
 * goes through ownership_set_state(), which checks it against a table, as
 * conn_set_state() does for connections.
 *
 * It knows the store's claim (store.h) and the injected clock, and
 * nothing of batches: persistence loads the data set and drops its
 * pending work through the hooks it is handed, so persist.c calls this
 * file and this file never calls persist.c.
 */
#ifndef SEMD_OWNER_H
#define SEMD_OWNER_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "config.h"
#include "store.h"

enum own_state {
	OWN_OFF,	/* persistence none: nothing to own ("single") */
	OWN_CLAIMING,	/* start-up: claiming, not listening yet */
	OWN_WAITING,	/* standby no, another daemon's key: waiting up to
			 * a lease to see whether its owner is alive */
	OWN_STANDBY,	/* listening as a standby, claiming every poll */
	OWN_LOADING,	/* the claim is ours: loading */
	OWN_OWNER,	/* serving, until the deadline */
	OWN_LOST,	/* gave the data set up; claims again after a lease */
	OWN_EXITING,	/* cannot serve and must not wait: exits */
	OWN__COUNT
};

struct ownership;

struct ownership_hooks {
	/*
	 * The data set is ours: load it into the engine (how: "owner of",
	 * "took over" or "resumed"). *tokens comes in as the least token
	 * bound seen and goes back as the bound written. 0, or -1 with err
	 * (lost() then clears the engine).
	 */
	int	(*load)(void *arg, const char *how, uint64_t *tokens, char *err,
		    size_t errlen);
	/* Loaded, and now the owner: serve (connect the store for writes). */
	void	(*serve)(void *arg);
	/* Ownership is given up: hold grants, stop writing, drop pending. */
	void	(*drop)(void *arg);
	/* Another daemon owns the data set: listen as a standby (once). */
	void	(*standby)(void *arg);
	/* Close every client connection and clear the engine. */
	void	(*lost)(void *arg);
};

/*
 * Ownership of st's data set, claimed through ops, timed on clock. Errors
 * worth showing in STATS are written to errbuf (errlen bytes), which the
 * caller owns and shares with its own.
 */
struct ownership *ownership_new(const struct config *cfg,
		    const struct clock *clock, const struct store_ops *ops,
		    struct store *st, const struct ownership_hooks *hooks,
		    void *arg, char *errbuf, size_t errlen);
void		 ownership_free(struct ownership *o);

/* Claim now (CLAIMING). */
void		 ownership_start(struct ownership *o);
/* The address clients should use (the port is known once bound). */
void		 ownership_set_advertise(struct ownership *o,
		    const char *addr);
/* 1 the first time the server should start listening, else 0. */
int		 ownership_start_listening(struct ownership *o);

/* The store's reports (store.h), forwarded by persist. */
void		 ownership_claimed(struct ownership *o,
		    const struct store_owner *own, const char *err);
void		 ownership_renewed(struct ownership *o, uint64_t sent_ms);
void		 ownership_fenced(struct ownership *o, const char *owner);

/*
 * 1 while this daemon may answer as what it is; an owner past its
 * deadline gives the data set up first and returns 0 (persist.h).
 */
int		 ownership_check(struct ownership *o);

enum own_state	 ownership_state(const struct ownership *o);
const char	*ownership_state_name(enum own_state state);
/* The owner's epoch (0: none known) and advertised address ("-"). */
uint64_t	 ownership_epoch(const struct ownership *o);
const char	*ownership_owner_addr(const struct ownership *o);
/* Losses and failed loads, for STATS's persistence_failures. */
uint64_t	 ownership_failures(const struct ownership *o);

#endif /* SEMD_OWNER_H */
