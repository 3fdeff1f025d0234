/*
 * semc-bound.c: the permits bound to a handle's connection. semd releases
 * them when the connection closes, unless it restarted with persistence
 * or a standby took over: then they wait, unowned, for a reconnect to
 * ATTACH them again. Those semd will not give back are queued as lost
 * and told to the callback.
 *
 * The bound. An owner that stops answering (stopped, stalled, cut off)
 * cannot close our connection, and a standby that takes over releases
 * the permits nobody ATTACHed reclaim-grace after its claim. Its claim
 * comes after the old owner's last reply (semd writes no reply past its
 * ownership deadline), so if a request sent at t_s on the connection
 * that holds the permits was answered, nobody else can be granted them
 * before t_s + reclaim-grace. The handle keeps t_s (ref_ms, the send time
 * of the latest answered request) and learns reclaim-grace with ROLE,
 * pipelined with the first bound acquire or ATTACH on each connection;
 * semc_bound_keep() PINGs while they are held, and once now passes
 * t_s + reclaim-grace - margin they are reported lost. The margin
 * (reclaim-grace/5, at least 500 ms or half the grace if that is less)
 * covers clock-rate differences and the time to stop the guarded work.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "semc-int.h"

#define SEMC_BOUND_MARGIN_MIN_MS	500
#define SEMC_BOUND_PINGS		4	/* per bound: one may be slow */

/* The margin kept before t_s + grace (see above). */
static int64_t
semc_bound_margin(int64_t grace_ms)
{
	int64_t	floor_ms = grace_ms / 2 < SEMC_BOUND_MARGIN_MIN_MS ?
		    grace_ms / 2 : SEMC_BOUND_MARGIN_MIN_MS;

	return (grace_ms / 5 > floor_ms ? grace_ms / 5 : floor_ms);
}

/* When the bound permits stop being trusted (monotonic ms); -1: never. */
static int64_t
semc_bound_end(const struct semc *c)
{
	if (c->nbound == 0 || c->grace_ms < 0 || c->ref_ms < 0)
		return (-1);
	return (c->ref_ms + c->grace_ms - semc_bound_margin(c->grace_ms));
}

int
semc_bound_expired(const struct semc *c)
{
	int64_t	end = semc_bound_end(c);

	return (end >= 0 && semc_now_ms() >= end);
}

/*
 * deadline_ms (-1: none), cut to the end of the bound while the handle
 * re-attaches or searches for the owner with bound permits whose bound
 * is still running: a reconnect then returns by the time they must be
 * taken as lost, so that a caller such as semd-cli run can stop the work
 * they guard in time. Once the bound passed nothing is cut: a caller
 * that did not keep it still gets its permits back if ATTACH succeeds
 * (which proves nobody else was granted them meanwhile).
 */
int64_t
semc_bound_clamp(const struct semc *c, int64_t deadline_ms)
{
	int64_t	end = semc_bound_end(c);

	if (c->holding || end < 0 || end <= semc_now_ms())
		return (deadline_ms);
	return (deadline_ms < 0 || deadline_ms > end ? end : deadline_ms);
}

/*
 * ROLE's reply (err its outcome): an owner's reclaim_grace_ms sets the
 * bound; role=single (no persistence: a closed connection is the only
 * way to lose them), a refusal (a semd before 1.1) or a reply without
 * the key leaves no bound, as before. A standby's answer changes
 * nothing: it holds none of our permits, and the bound learnt from the
 * owner still runs while the handle searches for the next one.
 */
void
semc_bound_role(struct semc *c, enum semc_err err,
    const struct proto_reply *reply)
{
	struct proto_word	role;
	uint64_t		v;

	if (err == SEMC_OK &&
	    proto_find_kv(reply->rest.p, reply->rest.len, "role", &role) &&
	    role.len == 7 && memcmp(role.p, "standby", 7) == 0)
		return;
	c->grace_ms = c->owner_lease_ms = -1;
	if (err != SEMC_OK ||
	    !proto_find_kv(reply->rest.p, reply->rest.len, "role", &role) ||
	    role.len != 5 || memcmp(role.p, "owner", 5) != 0)
		return;
	if (proto_find_kv(reply->rest.p, reply->rest.len, "owner_lease_ms",
	    &role) && proto_parse_u64(role.p, role.len, PROTO_INT_MAX,
	    &v) == 0)
		c->owner_lease_ms = (int64_t)v;
	if (proto_find_kv(reply->rest.p, reply->rest.len, "reclaim_grace_ms",
	    &role) && proto_parse_u64(role.p, role.len, PROTO_INT_MAX,
	    &v) == 0)
		c->grace_ms = (int64_t)v;
}

enum semc_err
semc_bound_add(struct semc *c, const char *sem, uint64_t token, uint32_t n)
{
	struct semc_permit	*p;

	p = realloc(c->bound, (c->nbound + 1) * sizeof(*p));
	if (p == NULL)
		return (SEMC_ERR_NOMEM);
	c->bound = p;
	p += c->nbound++;
	memset(p, 0, sizeof(*p));
	strncpy(p->sem, sem, SEMC_NAME_MAX);
	p->token = token;
	p->n = n;
	return (SEMC_OK);
}

static void
semc_bound_drop(struct semc *c, size_t i)
{
	memmove(&c->bound[i], &c->bound[i + 1],
	    (c->nbound - i - 1) * sizeof(c->bound[0]));
	c->nbound--;
}

void
semc_bound_remove(struct semc *c, const char *sem, uint64_t token)
{
	size_t	i;

	for (i = 0; i < c->nbound; i++) {
		if (c->bound[i].token == token &&
		    strcmp(c->bound[i].sem, sem) == 0) {
			semc_bound_drop(c, i);
			return;
		}
	}
}

/*
 * Forget the permit of that token, under whichever semaphore it is
 * remembered: semd released it (a grant of several semaphores is
 * remembered under its first, and released through any of them). Tokens
 * are daemon-wide, so the token alone names the grant.
 */
void
semc_bound_remove_token(struct semc *c, uint64_t token)
{
	size_t	i;

	for (i = 0; i < c->nbound; i++) {
		if (c->bound[i].token == token) {
			semc_bound_drop(c, i);
			return;
		}
	}
}

void
semc_bound_clear(struct semc *c)
{
	c->nbound = 0;
}

size_t
semc_bound_count(const struct semc *c)
{
	return (c->nbound);
}

/* Queue a lost permit (dropped if memory is short) and tell the callback. */
static void
semc_bound_lose(struct semc *c, const struct semc_permit *permit,
    enum semc_err why)
{
	struct semc_permit	*p;

	p = realloc(c->lost, (c->nlost + 1) * sizeof(*p));
	if (p != NULL) {
		c->lost = p;
		c->lost[c->nlost++] = *permit;
	}
	if (c->lost_fn != NULL)
		c->lost_fn(c->lost_arg, permit, why);
}

/* Report every bound permit lost (why for the callback) and forget them. */
void
semc_bound_lose_all(struct semc *c, enum semc_err why)
{
	struct semc_permit	permit;

	while (c->nbound > 0) {
		permit = c->bound[0];
		semc_bound_drop(c, 0);
		semc_bound_lose(c, &permit, why);
	}
}

int64_t
semc_bound_left_ms(const struct semc *c, int64_t *margin_ms)
{
	int64_t	end = semc_bound_end(c), now = semc_now_ms();

	if (margin_ms != NULL)
		*margin_ms = end < 0 ? -1 : semc_bound_margin(c->grace_ms);
	if (end < 0)
		return (-1);
	return (end > now ? end - now : 0);
}

/* 1 when fd has bytes (or EOF) to read now. */
static int
semc_bound_readable(int fd)
{
	struct pollfd	pfd = { .fd = fd, .events = POLLIN };

	return (poll(&pfd, 1, 0) > 0);
}

enum semc_err
semc_bound_keep(struct semc *c, int64_t *next_ms)
{
	int64_t	end, now, due, every;

	*next_ms = -1;
	if (c->ping_ms >= 0 && c->fd != -1 && semc_bound_readable(c->fd))
		(void)semc_call_ping_settle(c);	/* a failure closes it */
	if (c->nbound == 0)		/* nothing to keep */
		return (semc_seterr(c, SEMC_OK, NULL));
	if (semc_bound_expired(c)) {
		semc_conn_close(c);
		semc_bound_lose_all(c, SEMC_ERR_BOUND);
		return (semc_seterr(c, SEMC_ERR_BOUND, "no request sent in "
		    "the last %lld ms was answered "
		    "(reclaim-grace %lld ms less a margin of %lld ms)",
		    (long long)(semc_now_ms() - c->ref_ms),
		    (long long)c->grace_ms,
		    (long long)semc_bound_margin(c->grace_ms)));
	}
	if (c->ping_ms < 0 && (c->fd == -1 || semc_conn_broken(c))) {
		semc_conn_close(c);
		return (semc_seterr(c, SEMC_ERR_NOREPLY, "the connection was "
		    "closed: reconnect to take the bound permits back"));
	}
	if ((end = semc_bound_end(c)) < 0)
		return (semc_seterr(c, SEMC_OK, NULL));
	now = semc_now_ms();
	if (c->ping_ms < 0) {
		every = (end - c->ref_ms) / SEMC_BOUND_PINGS;
		due = c->ref_ms + (every > 0 ? every : 1);
		if (due <= now) {
			if (semc_call_ping_send(c) != SEMC_OK)
				return (semc_seterr(c, SEMC_ERR_NOREPLY, "the "
				    "connection failed: reconnect to take the "
				    "bound permits back"));
			due = end;
		}
	} else
		due = end;
	if (due > end)
		due = end;
	*next_ms = due > now ? due - now : 0;
	return (semc_seterr(c, SEMC_OK, NULL));
}

/*
 * ATTACH every remembered permit on the new connection. An ERR answer
 * means semd will not give it back: lost. An I/O failure, or a standby's
 * ERR STANDBY (it did nothing), stops here and keeps the rest for the
 * next connection.
 */
enum semc_err
semc_bound_reattach(struct semc *c)
{
	struct semc_permit	permit;
	enum semc_err		err;
	size_t			i = 0;

	while (i < c->nbound) {
		err = semc_call_attach(c, c->bound[i].sem, c->bound[i].token);
		if (err == SEMC_OK) {
			i++;
			continue;
		}
		if (c->fd == -1)	/* the connection failed again */
			return (semc_seterr(c, SEMC_ERR_CONNECT,
			    "connected, then lost the connection while "
			    "re-attaching permits"));
		if (err == SEMC_ERR_STANDBY)	/* did nothing: try the owner */
			return (err);
		permit = c->bound[i];
		semc_bound_drop(c, i);
		semc_bound_lose(c, &permit, err);
	}
	return (SEMC_OK);
}

void
semc_set_lost_cb(struct semc *c, semc_lost_fn *fn, void *arg)
{
	c->lost_fn = fn;
	c->lost_arg = arg;
}

int
semc_next_lost(struct semc *c, struct semc_permit *out)
{
	if (c->nlost == 0)
		return (0);
	*out = c->lost[0];
	memmove(&c->lost[0], &c->lost[1], (c->nlost - 1) * sizeof(c->lost[0]));
	c->nlost--;
	return (1);
}
