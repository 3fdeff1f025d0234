/*
 * semc-failover.c: finding the owner among several semd. A handle given
 * several addresses, or one that met a standby, searches when it has no
 * connection to the owner: it goes first where a standby's
 * "ERR STANDBY owner=X" points, else tries the addresses in turn, and
 * after each round that found no owner pauses (100 ms, doubling up to
 * 1 s) until failover_timeout_ms have passed. A handle with one address
 * that never met a standby makes one attempt, as it always did.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "semc-int.h"

#define SEMC_BACKOFF_MIN_MS	100
#define SEMC_BACKOFF_MAX_MS	1000
#define SEMC_REDIRECTS_MAX	2	/* per round: standbys may disagree */

/* 1 when a failed attempt is followed by a search, 0 for one attempt. */
int
semc_search_many(const struct semc *c)
{
	return (c->unix_path == NULL && (c->nlist > 1 || c->seen_standby));
}

void
semc_search_start(struct semc *c, struct semc_search *s)
{
	memset(s, 0, sizeof(*s));
	s->deadline_ms = -1;
	if (c->failover_timeout_ms >= 0)
		s->deadline_ms = semc_bound_clamp(c, semc_now_ms() +
		    c->failover_timeout_ms);
	s->delay_ms = SEMC_BACKOFF_MIN_MS;
	s->left = c->naddrs;
}

/* An ERR STANDBY reply: remember that standbys exist, and the owner. */
void
semc_failover_standby(struct semc *c, const struct proto_reply *reply)
{
	struct proto_word	owner;

	c->seen_standby = 1;
	c->owner_hint = -1;
	if (proto_find_kv(reply->rest.p, reply->rest.len, "owner", &owner))
		c->owner_hint = semc_addr_learn(c, owner.p, owner.len);
}

/* The search ends without an owner: SEMC_ERR_CONNECT, with the last why. */
static enum semc_err
semc_search_give_up(struct semc *c, struct semc_search *s,
    enum semc_err err, const struct semc_addr *last)
{
	char	what[SEMC_HOST_MAX + 128], at[SEMC_HOST_MAX + 32] = "";

	/* A connect failure names its address already; a refusal does not. */
	if (err != SEMC_ERR_CONNECT)
		snprintf(at, sizeof(at), ", %s port %d", last->host,
		    last->port);
	if (s->deadline_ms < 0)
		snprintf(what, sizeof(what), "no owner among %zu "
		    "addresses (one pass); last%s", c->naddrs, at);
	else
		snprintf(what, sizeof(what), "no owner within %d ms "
		    "(%d rounds over %zu addresses); last%s",
		    c->failover_timeout_ms, s->rounds, c->naddrs, at);
	return (semc_seterr_again(c, err, SEMC_ERR_CONNECT, what));
}

/*
 * The attempt at addrs[cur] failed with err (SEMC_ERR_CONNECT, or
 * SEMC_ERR_STANDBY: nothing was done there). Choose the next address,
 * pausing after a round; SEMC_OK to try it, else the call's outcome.
 */
enum semc_err
semc_search_again(struct semc *c, struct semc_search *s, enum semc_err err)
{
	struct semc_addr	last;
	int64_t			now_ms, pause_ms;

	if (!semc_search_many(c) || c->naddrs == 0)
		return (err);
	last = c->addrs[c->cur];
	now_ms = semc_now_ms();
	if (s->deadline_ms >= 0 && now_ms >= s->deadline_ms) {
		s->rounds++;
		return (semc_search_give_up(c, s, err, &last));
	}
	if (err == SEMC_ERR_STANDBY && c->owner_hint >= 0 &&
	    (size_t)c->owner_hint != c->cur &&
	    s->redirects < SEMC_REDIRECTS_MAX) {
		c->cur = (size_t)c->owner_hint;
		s->redirects++;
		return (SEMC_OK);
	}
	c->cur = (c->cur + 1) % c->naddrs;
	if (s->left > 1) {
		s->left--;
		return (SEMC_OK);
	}
	/* A whole round and no owner: pause, then go round again. */
	s->rounds++;
	if (s->deadline_ms < 0)
		return (semc_search_give_up(c, s, err, &last));
	pause_ms = s->deadline_ms - now_ms;
	if (pause_ms > s->delay_ms)
		pause_ms = s->delay_ms;
	poll(NULL, 0, (int)pause_ms);
	s->delay_ms = s->delay_ms * 2 > SEMC_BACKOFF_MAX_MS ?
	    SEMC_BACKOFF_MAX_MS : s->delay_ms * 2;
	s->left = c->naddrs;
	s->redirects = 0;
	return (SEMC_OK);
}
