/*
 * owner.c: ownership of the data set, as a state machine (see owner.h and
 * README "Ownership and standby").
 *
 * The claim, and every acknowledged write or heartbeat after it, proves
 * that the owner key names us for owner-lease from the moment it was
 * sent, so we may act as owner until then, less a margin for clock-rate
 * drift (until_ms, on the injected monotonic clock). Past that moment
 * another daemon may take over, so we stop first: persistence drops what
 * it had pending, every client connection is closed (their bound permits
 * are then unowned in Redis, and only the next owner's reclaim-grace,
 * which starts after its claim, can release them), memory is dropped, and
 * we claim again one owner-lease later (our key has expired by then, and
 * a standby, which claims every poll, comes first). The timer at the
 * deadline can run late (a stopped process, a busy loop), so the deadline
 * is also checked before anything is answered or written
 * (ownership_check) and when an acknowledgement arrives: one that comes
 * after the deadline proves nothing.
 *
 * A daemon remembers the highest epoch and token bound it has seen in
 * Redis. It never claims a data set whose epoch counter went below that
 * (Redis lost its data: the owner, if alive, restores its claim and
 * rewrites Redis from memory), and its tokens continue above every bound
 * it saw, so tokens never repeat across a flush.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "owner.h"

/* A standby claims this often at the most (owner-lease / 4 if less). */
#define OWN_POLL_MAX_MS		500
/* Starting up: claims and loads are retried after this, at first. */
#define OWN_RETRY_MS		1000
#define OWN_CLAIM_BACKOFF_MAX_MS 2000
#define OWN_LOAD_BACKOFF_MAX_MS	30000

struct ownership {
	const struct config	*cfg;
	const struct clock	*clock;
	const struct store_ops	*ops;
	struct store		*st;
	const struct ownership_hooks *hooks;
	void			*arg;
	char			*err;		/* the caller's, for STATS */
	size_t			 errlen;

	enum own_state		 state;
	int			 listening;	/* the server listens */
	uint64_t		 epoch;		/* the owner's, as last seen */
	char			 owner_addr[STORE_ADDR_MAX];
	char			 advertise[STORE_ADDR_MAX];
	uint64_t		 until_ms;	/* act as owner until then */
	uint64_t		 held_epoch;	/* ours before we lost it */
	uint64_t		 owned_seen_ms;	/* standby no: saw another owner */
	uint64_t		 seen_epoch;	/* the highest seen in Redis */
	uint64_t		 seen_tokens;	/* the highest token bound seen */
	uint64_t		 claim_backoff_ms;
	uint64_t		 load_backoff_ms;
	void			*claim_timer;	/* the next claim */
	void			*deadline_timer; /* at until_ms, or before */
	struct log_repeat	 claim_failure;
	struct log_repeat	 load_failure;
	struct log_repeat	 epoch_wait;	/* Redis lost its epoch counter */
	char			 subject[320];	/* "redis ADDRESS", for the log */
	uint64_t		 failures;
};

static const char *const state_names[OWN__COUNT] = {
	[OWN_OFF] = "off",
	[OWN_CLAIMING] = "claiming",
	[OWN_WAITING] = "waiting",
	[OWN_STANDBY] = "standby",
	[OWN_LOADING] = "loading",
	[OWN_OWNER] = "owner",
	[OWN_LOST] = "lost",
	[OWN_EXITING] = "exiting",
};

#define TO(s)	(1u << (s))
/* Every transition there is: from a state, the states it may go to. */
static const unsigned transitions[OWN__COUNT] = {
	[OWN_OFF] = 0,
	[OWN_CLAIMING] = TO(OWN_LOADING) | TO(OWN_STANDBY) | TO(OWN_WAITING) |
	    TO(OWN_EXITING),
	[OWN_WAITING] = TO(OWN_LOADING) | TO(OWN_EXITING),
	[OWN_STANDBY] = TO(OWN_LOADING),
	[OWN_LOADING] = TO(OWN_OWNER) | TO(OWN_CLAIMING) | TO(OWN_STANDBY),
	[OWN_OWNER] = TO(OWN_LOST),
	[OWN_LOST] = TO(OWN_LOADING) | TO(OWN_STANDBY) | TO(OWN_WAITING) |
	    TO(OWN_EXITING),
	[OWN_EXITING] = 0,
};

const char *
ownership_state_name(enum own_state state)
{
	return (state < OWN__COUNT ? state_names[state] : "?");
}

/* The one place the state changes: only along the table. */
static void
ownership_set_state(struct ownership *o, enum own_state to)
{
	if (to == o->state)
		return;
	if ((transitions[o->state] & TO(to)) == 0)
		fatalx("ownership: no transition from %s to %s",
		    state_names[o->state], state_names[to]);
	log_debug("ownership: %s -> %s", state_names[o->state],
	    state_names[to]);
	o->state = to;
}

static uint64_t
own_now(const struct ownership *o)
{
	return (clock_now(o->clock));
}

/* How long before the owner key can expire we stop acting as owner. */
static uint64_t
own_margin_ms(const struct ownership *o)
{
	uint64_t	lease = (uint64_t)o->cfg->owner_lease_ms;

	return (lease / 10 > 50 ? lease / 10 : 50);
}

static uint64_t
own_poll_ms(const struct ownership *o)
{
	uint64_t	ms = (uint64_t)o->cfg->owner_lease_ms / 4;

	return (ms < OWN_POLL_MAX_MS ? ms : OWN_POLL_MAX_MS);
}

static void
own_error(struct ownership *o, const char *what)
{
	snprintf(o->err, o->errlen, "%s", what);
}

/* --- timers --- */

static void
own_claim_fire(void *arg)
{
	struct ownership	*o = arg;

	o->claim_timer = NULL;
	o->ops->claim(o->st, o->advertise, o->held_epoch,
	    !o->cfg->standby && o->held_epoch != 0, o->seen_epoch);
}

/* Claim ms from now (ownership_claimed() follows the claim). */
static void
own_claim_in(struct ownership *o, uint64_t ms)
{
	if (o->claim_timer != NULL)
		o->clock->timer_del(o->clock->ctx, o->claim_timer);
	o->claim_timer = o->clock->timer_add(o->clock->ctx, ms,
	    own_claim_fire, o);
}

static void
own_cancel_deadline(struct ownership *o)
{
	if (o->deadline_timer != NULL)
		o->clock->timer_del(o->clock->ctx, o->deadline_timer);
	o->deadline_timer = NULL;
	o->until_ms = 0;
}

static void	own_arm_deadline(struct ownership *);

/* At until_ms as it was armed: renewals since moved it on, or not. */
static void
own_deadline_fire(void *arg)
{
	struct ownership	*o = arg;

	o->deadline_timer = NULL;
	if (ownership_check(o) && o->state == OWN_OWNER)
		own_arm_deadline(o);
}

static void
own_arm_deadline(struct ownership *o)
{
	uint64_t	now = own_now(o);

	o->deadline_timer = o->clock->timer_add(o->clock->ctx,
	    o->until_ms > now ? o->until_ms - now : 0, own_deadline_fire, o);
}

/*
 * What the owner key proved: we own the data set until then. The timer is
 * not moved at each renewal; when it fires, it looks again.
 */
static void
own_extend(struct ownership *o, uint64_t sent_ms)
{
	uint64_t	until = sent_ms + (uint64_t)o->cfg->owner_lease_ms -
			    own_margin_ms(o);

	if (until <= o->until_ms)
		return;
	o->until_ms = until;
	if (o->deadline_timer == NULL)
		own_arm_deadline(o);
}

/* --- losing it --- */

/*
 * Stop acting as owner, at once: persistence stops and drops its pending
 * work, every client connection goes, memory with them; claim again one
 * owner-lease later.
 */
static void
own_lose(struct ownership *o, const char *why)
{
	log_warnx("lost ownership of %s (epoch %llu): %s; closing every "
	    "client connection and %s", o->ops->dataset(o->st),
	    (unsigned long long)o->epoch, why, o->cfg->standby ?
	    "serving as a standby" : "trying to resume this epoch");
	own_cancel_deadline(o);
	ownership_set_state(o, OWN_LOST);
	o->hooks->drop(o->arg);
	o->held_epoch = o->epoch;
	snprintf(o->owner_addr, sizeof(o->owner_addr), "-");
	own_error(o, why);
	o->failures++;
	o->hooks->lost(o->arg);
	own_claim_in(o, (uint64_t)o->cfg->owner_lease_ms);
}

int
ownership_check(struct ownership *o)
{
	char	why[128];

	if (o->state != OWN_OWNER || own_now(o) < o->until_ms)
		return (1);
	snprintf(why, sizeof(why), "could not renew it within owner-lease "
	    "(%lld ms)", (long long)o->cfg->owner_lease_ms);
	own_lose(o, why);
	return (0);
}

/*
 * A fenced request was acknowledged. If our deadline passed before it
 * arrived, we may already have been replaced, whatever it says: give up
 * (ownership_check) instead of extending.
 */
void
ownership_renewed(struct ownership *o, uint64_t sent_ms)
{
	if (o->state == OWN_OWNER && ownership_check(o))
		own_extend(o, sent_ms);
}

void
ownership_fenced(struct ownership *o, const char *owner)
{
	char	why[STORE_ADDR_MAX + 64];

	if (o->state != OWN_OWNER)
		return;
	snprintf(why, sizeof(why), "another daemon owns it (owner key: %s)",
	    owner);
	own_lose(o, why);
}

/* --- claims --- */

/* A claim failed to run: back off and say it once, then how often. */
static void
own_claim_failed(struct ownership *o, const char *err)
{
	uint64_t	retry_ms;
	char		msg[300];

	/*
	 * Redis is unreachable or refuses: back off from the poll (a standby)
	 * or 1 s (starting up) to at most 2 s.
	 */
	retry_ms = o->claim_backoff_ms * 2;
	if (retry_ms == 0)
		retry_ms = o->listening ? own_poll_ms(o) : OWN_RETRY_MS;
	if (retry_ms > OWN_CLAIM_BACKOFF_MAX_MS)
		retry_ms = OWN_CLAIM_BACKOFF_MAX_MS;
	o->claim_backoff_ms = retry_ms;
	snprintf(msg, sizeof(msg), "cannot load: %.200s", err);
	own_error(o, msg);
	log_repeat(&o->claim_failure, o->subject, msg);
	own_claim_in(o, retry_ms);
}

/*
 * Redis's epoch counter went below what we saw: it lost its data. Wait
 * (claiming every poll) for the owner to restore its claim, or for an
 * operator to set the counter; say so once, then how often.
 */
static void
own_epoch_lost(struct ownership *o, const struct store_owner *own)
{
	char	msg[600];

	snprintf(msg, sizeof(msg), "its epoch counter %sepoch is %llu, below "
	    "epoch %llu which this daemon has seen: Redis lost its data. Not "
	    "claiming it (tokens and epochs would start again); waiting for "
	    "the owner to restore its claim, or, if no owner is left, for an "
	    "operator to run: redis-cli SET %sepoch %llu (and SET %stokens "
	    "%llu if that is higher than what it holds)",
	    o->cfg->redis_prefix, (unsigned long long)own->epoch,
	    (unsigned long long)o->seen_epoch, o->cfg->redis_prefix,
	    (unsigned long long)o->seen_epoch, o->cfg->redis_prefix,
	    (unsigned long long)o->seen_tokens);
	own_error(o, msg);
	log_repeat(&o->epoch_wait, o->subject, msg);
	own_claim_in(o, own_poll_ms(o));
}

/* Someone else owns the data set: wait as a standby, or exit. */
static void
own_not_owner(struct ownership *o, const struct store_owner *own)
{
	const char	*dataset = o->ops->dataset(o->st);

	if (own->superseded) {
		ownership_set_state(o, OWN_EXITING);
		fatalx("%s was taken over (epoch %llu) since this daemon lost "
		    "it; exiting (standby no)", dataset,
		    (unsigned long long)own->epoch);
	}
	if (!o->cfg->standby) {
		/*
		 * The key may be a crashed predecessor's (kill -9, then a
		 * restart): only a key still held after a whole lease belongs
		 * to a live owner.
		 */
		if (o->owned_seen_ms == 0) {
			o->owned_seen_ms = own_now(o);
			log_info("%s is owned by %s (epoch %llu); waiting up to "
			    "owner-lease (%lld ms) to see whether that owner is "
			    "alive", dataset, own->addr,
			    (unsigned long long)own->epoch,
			    (long long)o->cfg->owner_lease_ms);
		}
		if (own_now(o) - o->owned_seen_ms <=
		    (uint64_t)o->cfg->owner_lease_ms + own_poll_ms(o)) {
			ownership_set_state(o, OWN_WAITING);
			own_claim_in(o, own_poll_ms(o));
			return;
		}
		ownership_set_state(o, OWN_EXITING);
		fatalx("%s is owned by %s (epoch %llu); exiting: a second "
		    "owner could over-grant (set \"standby yes\" to wait as "
		    "its standby)", dataset, own->addr,
		    (unsigned long long)own->epoch);
	}
	o->epoch = own->epoch;
	snprintf(o->owner_addr, sizeof(o->owner_addr), "%s", own->addr);
	ownership_set_state(o, OWN_STANDBY);
	if (ownership_start_listening(o))
		o->hooks->standby(o->arg);
	own_claim_in(o, own_poll_ms(o));
}

/*
 * The load failed: the server drops what was read with every connection
 * (a standby has some), the reason is said once, then how often, and the
 * data set is claimed again after a backoff that grows to 30 s.
 */
static void
own_load_failed(struct ownership *o, const char *err)
{
	uint64_t	retry = o->load_backoff_ms * 2;
	char		msg[512];

	if (retry == 0)
		retry = OWN_RETRY_MS;
	if (retry > OWN_LOAD_BACKOFF_MAX_MS)
		retry = OWN_LOAD_BACKOFF_MAX_MS;
	o->load_backoff_ms = retry;
	snprintf(msg, sizeof(msg), "cannot load: %.400s", err);
	own_error(o, msg);
	log_repeat(&o->load_failure, o->subject, msg);
	own_cancel_deadline(o);
	o->hooks->lost(o->arg);
	ownership_set_state(o, o->listening ? OWN_STANDBY : OWN_CLAIMING);
	own_claim_in(o, retry);
}

/* The claim is ours: load the data set and serve it. */
static void
own_take(struct ownership *o, const struct store_owner *own)
{
	const char	*how = !o->listening ? "owner of" :
			    own->epoch == o->held_epoch ? "resumed" :
			    "took over";
	uint64_t	 tokens = o->seen_tokens;
	char		 err[400];

	o->epoch = own->epoch;
	o->held_epoch = own->epoch;
	o->owned_seen_ms = 0;	/* the next owner is watched anew */
	snprintf(o->owner_addr, sizeof(o->owner_addr), "%s", o->advertise);
	own_extend(o, own->sent_ms);
	if (own_now(o) >= o->until_ms) {
		/* Answered too late to act on: let the key expire. */
		own_cancel_deadline(o);
		own_claim_in(o, own_poll_ms(o));
		return;
	}
	ownership_set_state(o, OWN_LOADING);
	if (o->hooks->load(o->arg, how, &tokens, err, sizeof(err)) != 0) {
		own_load_failed(o, err);
		return;
	}
	o->load_backoff_ms = 0;
	log_repeat_end(&o->load_failure, o->subject);
	if (tokens > o->seen_tokens)
		o->seen_tokens = tokens;
	o->err[0] = '\0';
	ownership_set_state(o, OWN_OWNER);
	o->hooks->serve(o->arg);
}

void
ownership_claimed(struct ownership *o, const struct store_owner *own,
    const char *err)
{
	if (own == NULL) {
		own_claim_failed(o, err);
		return;
	}
	o->claim_backoff_ms = 0;
	/* Our own key, unanswered or unreplicated: not over yet. */
	if (!own->wait)
		log_repeat_end(&o->claim_failure, o->subject);
	if (own->tokens > o->seen_tokens)
		o->seen_tokens = own->tokens;
	if (own->epoch_lost) {
		own_epoch_lost(o, own);
		return;
	}
	log_repeat_end(&o->epoch_wait, o->subject);
	if (own->epoch > o->seen_epoch)
		o->seen_epoch = own->epoch;
	if (own->wait) {
		/* Our own key, from a claim we saw no answer to: it expires. */
		own_claim_in(o, own_poll_ms(o));
		return;
	}
	if (!own->ours)
		own_not_owner(o, own);
	else
		own_take(o, own);
}

/* --- the rest --- */

void
ownership_start(struct ownership *o)
{
	if (o->state == OWN_CLAIMING)
		own_claim_in(o, 0);
}

void
ownership_set_advertise(struct ownership *o, const char *addr)
{
	snprintf(o->advertise, sizeof(o->advertise), "%s", addr);
	if (o->state == OWN_OWNER)
		snprintf(o->owner_addr, sizeof(o->owner_addr), "%s", addr);
}

int
ownership_start_listening(struct ownership *o)
{
	if (o->listening)
		return (0);
	o->listening = 1;
	return (1);
}

enum own_state
ownership_state(const struct ownership *o)
{
	return (o->state);
}

uint64_t
ownership_epoch(const struct ownership *o)
{
	return (o->epoch);
}

const char *
ownership_owner_addr(const struct ownership *o)
{
	return (o->owner_addr);
}

uint64_t
ownership_failures(const struct ownership *o)
{
	return (o->failures);
}

struct ownership *
ownership_new(const struct config *cfg, const struct clock *clock,
    const struct store_ops *ops, struct store *st,
    const struct ownership_hooks *hooks, void *arg, char *errbuf,
    size_t errlen)
{
	struct ownership	*o = xcalloc(1, sizeof(*o));

	o->cfg = cfg;
	o->clock = clock;
	o->ops = ops;
	o->st = st;
	o->hooks = hooks;
	o->arg = arg;
	o->err = errbuf;
	o->errlen = errlen;
	o->state = cfg->persistence == PERSIST_NONE ? OWN_OFF : OWN_CLAIMING;
	snprintf(o->owner_addr, sizeof(o->owner_addr), "-");
	snprintf(o->advertise, sizeof(o->advertise), "-");
	if (st != NULL)
		snprintf(o->subject, sizeof(o->subject), "redis %s",
		    ops->address(st));
	return (o);
}

void
ownership_free(struct ownership *o)
{
	if (o == NULL)
		return;
	if (o->claim_timer != NULL)
		o->clock->timer_del(o->clock->ctx, o->claim_timer);
	own_cancel_deadline(o);
	free(o);
}
