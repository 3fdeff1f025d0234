/*
 * semc-acquire.c: the acquires (ACQUIRE, TRY, ACQUIREALL) and their
 * request ids.
 *
 * A leased acquire carries an ID, the caller's or 128 random bits drawn
 * here, so that its reply may be lost without losing the lease: semd
 * answers a repeat with the same id by the token it granted, and grants
 * nothing more (PROTOCOL, "Idempotent lease acquire"). When the reply is
 * lost the request is sent again, on a new connection if need be, with
 * the same id and what is left of the caller's TIMEOUT, for as long as
 * failover_timeout_ms after the first loss. A bound acquire takes no id:
 * its permit dies with the connection, so a lost reply stays
 * SEMC_ERR_LOST, as it always was.
 */
#include <sys/random.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "semc-int.h"

#define SEMC_ID_BYTES		16	/* drawn: 128 bits, 32 hex digits */
#define SEMC_RETRY_FIRST_MS	100	/* pause before the second retry */
#define SEMC_RETRY_MAX_MS	1000	/* doubling up to this */

/* One acquire, as the caller asked for it. */
struct semc_acq {
	const char		*verb;		/* ACQUIRE, TRY, ACQUIREALL */
	const struct semc_want	*want;
	size_t			 count;
	int64_t			 timeout_ms;	/* -1: for ever */
	int64_t			 lease_ms;	/* -1: bound */
	char			 id[SEMC_ID_MAX + 1];	/* "": none */
	int			 drawn;		/* id drawn here, not given */
};

/*
 * The caller's opts into *out, as semc_new takes struct semc_opts: the
 * first size bytes, the rest 0; SEMC_ERR_INVAL for a struct without its
 * size, or one that sets a field this library does not know.
 */
static enum semc_err
semc_acq_opts_take(struct semc *c, const struct semc_acquire_opts *in,
    struct semc_acquire_opts *out)
{
	const unsigned char	*bytes = (const unsigned char *)in;
	size_t			 i;

	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	if (in == NULL)
		return (SEMC_OK);
	if (in->size < offsetof(struct semc_acquire_opts, id) +
	    sizeof(const char *))
		return (semc_seterr(c, SEMC_ERR_INVAL, "struct "
		    "semc_acquire_opts has no size, or too small a one: "
		    "initialise it with SEMC_ACQUIRE_OPTS_INIT"));
	for (i = sizeof(*out); i < in->size; i++) {
		if (bytes[i] != 0)
			return (semc_seterr(c, SEMC_ERR_INVAL, "struct "
			    "semc_acquire_opts sets an option this libsemc "
			    "(" SEMC_VERSION ") does not know: upgrade it"));
	}
	memcpy(out, in, in->size < sizeof(*out) ? in->size : sizeof(*out));
	out->size = sizeof(*out);
	return (SEMC_OK);
}

/* 128 random bits as 32 hex digits into id; -1 with errno. */
static int
semc_acq_draw_id(char *id)
{
	static const char	 hex[] = "0123456789abcdef";
	unsigned char		 bits[SEMC_ID_BYTES];
	size_t			 got = 0, i;
	ssize_t			 n;

	while (got < sizeof(bits)) {
		n = getrandom(bits + got, sizeof(bits) - got, 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return (-1);
		got += (size_t)n;
	}
	for (i = 0; i < sizeof(bits); i++) {
		id[2 * i] = hex[bits[i] >> 4];
		id[2 * i + 1] = hex[bits[i] & 0xf];
	}
	id[2 * sizeof(bits)] = '\0';
	return (0);
}

/*
 * Check everything before anything is sent (a name with a blank would
 * smuggle a second request in), and settle the id.
 */
static enum semc_err
semc_acq_prepare(struct semc *c, struct semc_acq *q,
    const struct semc_acquire_opts *given)
{
	struct semc_acquire_opts	opts;
	enum semc_err			err;
	size_t				i, j;

	/* 0 is no lease, a bound permit: never one already run out. */
	if (q->lease_ms == 0)
		q->lease_ms = SEMC_BOUND;
	if ((err = semc_acq_opts_take(c, given, &opts)) != SEMC_OK)
		return (err);
	for (i = 0; i < q->count; i++) {
		if (q->want[i].sem == NULL || !proto_valid_name(q->want[i].sem,
		    strlen(q->want[i].sem)))
			return (semc_seterr(c, SEMC_ERR_INVAL, "invalid "
			    "semaphore name '%.64s' (1 to %d bytes of A-Z a-z "
			    "0-9 _ . : / -)", q->want[i].sem != NULL ?
			    q->want[i].sem : "(null)", SEMC_NAME_MAX));
		if ((err = semc_check_int(c, "n", q->want[i].n, 1)) !=
		    SEMC_OK)
			return (err);
		for (j = 0; j < i; j++) {
			if (strcmp(q->want[i].sem, q->want[j].sem) == 0)
				return (semc_seterr(c, SEMC_ERR_INVAL,
				    "semaphore '%.64s' named twice",
				    q->want[i].sem));
		}
	}
	if ((err = semc_check_int(c, "timeout_ms", q->timeout_ms, -1)) !=
	    SEMC_OK ||
	    (err = semc_check_int(c, "lease_ms", q->lease_ms, -1)) !=
	    SEMC_OK)
		return (err);
	if (opts.id != NULL) {
		if (q->lease_ms < 0)
			return (semc_seterr(c, SEMC_ERR_INVAL, "a request id "
			    "goes only with a lease"));
		if (strlen(opts.id) > SEMC_ID_MAX ||
		    !proto_valid_name(opts.id, strlen(opts.id)))
			return (semc_seterr(c, SEMC_ERR_INVAL, "invalid request "
			    "id '%.64s' (1 to %d bytes of A-Z a-z 0-9 _ . : / "
			    "-)", opts.id, SEMC_ID_MAX));
		snprintf(q->id, sizeof(q->id), "%s", opts.id);
	} else if (q->lease_ms >= 0) {
		if (semc_acq_draw_id(q->id) != 0)
			return (semc_seterr(c, SEMC_ERR_NOTSENT, "cannot draw "
			    "a request id: getrandom: %s", strerror(errno)));
		q->drawn = 1;
	}
	return (SEMC_OK);
}

/* The request line (no "\n") with this TIMEOUT; -1 when too long. */
static int
semc_acq_format(const struct semc_acq *q, int64_t timeout_ms, int with_id,
    char *buf, size_t size)
{
	size_t	i, off;
	int	len;

	len = snprintf(buf, size, "%s", q->verb);
	for (i = 0; i < q->count && len >= 0 && (size_t)len < size; i++) {
		off = (size_t)len;
		len = snprintf(buf + off, size - off, " %s %u", q->want[i].sem,
		    q->want[i].n);
		len = len < 0 ? -1 : len + (int)off;
	}
	if (len >= 0 && (size_t)len < size && strcmp(q->verb, "TRY") != 0 &&
	    timeout_ms >= 0) {
		off = (size_t)len;
		len = snprintf(buf + off, size - off, " TIMEOUT %lld",
		    (long long)timeout_ms);
		len = len < 0 ? -1 : len + (int)off;
	}
	if (len >= 0 && (size_t)len < size && q->lease_ms >= 0) {
		off = (size_t)len;
		len = snprintf(buf + off, size - off, " LEASE %lld",
		    (long long)q->lease_ms);
		len = len < 0 ? -1 : len + (int)off;
	}
	if (len >= 0 && (size_t)len < size && with_id) {
		off = (size_t)len;
		len = snprintf(buf + off, size - off, " ID %s", q->id);
		len = len < 0 ? -1 : len + (int)off;
	}
	return (len < 0 || (size_t)len >= size ? -1 : len);
}

/*
 * After a loss: may the request be sent again? Pauses first (none before
 * the first retry, then 100 ms doubling up to 1 s), never past the end
 * of the retries, failover_timeout_ms after the loss (-1: one retry).
 */
static int
semc_acq_may_retry(const struct semc *c, int64_t lost_ms, int retries,
    int *delay_ms)
{
	int64_t	now = semc_now_ms(), end, pause;

	if (c->failover_timeout_ms < 0)
		return (retries == 0);
	end = lost_ms + c->failover_timeout_ms;
	if (now >= end)
		return (0);
	if (retries > 0) {
		pause = *delay_ms;
		if (now + pause > end)
			pause = end - now;
		poll(NULL, 0, (int)pause);
		*delay_ms = *delay_ms * 2 > SEMC_RETRY_MAX_MS ?
		    SEMC_RETRY_MAX_MS : *delay_ms * 2;
	}
	return (1);
}

/*
 * Send the acquire and read its reply; with an id, again after a loss
 * (see the top of the file). SEMC_OK leaves the reply in *reply.
 */
static enum semc_err
semc_acq_call(struct semc *c, struct semc_acq *q, struct proto_reply *reply)
{
	char		 line[SEMC_REQ_MAX], what[256];
	enum semc_err	 err;
	int64_t		 start_ms = semc_now_ms(), lost_ms = -1, timeout_ms;
	int		 retries = 0, delay_ms = SEMC_RETRY_FIRST_MS, with_id;

	for (;;) {
		with_id = q->id[0] != '\0' && !(q->drawn && c->ids_refused);
		timeout_ms = q->timeout_ms;
		if (lost_ms >= 0 && timeout_ms >= 0) {
			timeout_ms -= semc_now_ms() - start_ms;
			if (timeout_ms < 0)
				timeout_ms = 0;
		}
		if (semc_acq_format(q, timeout_ms, with_id, line,
		    sizeof(line)) < 0)
			return (semc_seterr(c, SEMC_ERR_INVAL, "request too "
			    "long"));
		c->bound_acquire = q->lease_ms < 0;	/* ROLE goes with it */
		err = semc_call(c, with_id ? SEMC_REQ_PLAIN : SEMC_REQ_ACQUIRE,
		    strcmp(q->verb, "TRY") == 0 ? 0 : timeout_ms, reply, "%s",
		    line);
		c->bound_acquire = 0;
		/* A semd before 1.1 does not know ID: a drawn one goes. */
		if (err == SEMC_ERR_PROTO && with_id && q->drawn &&
		    lost_ms < 0 && q->count == 1 && c->fd != -1) {
			c->ids_refused = 1;
			continue;
		}
		if (!with_id)
			return (err);
		/*
		 * Sent, and its reply lost; or, after that, no connection to
		 * send it again: the outcome is still unknown.
		 */
		if (err != SEMC_ERR_NOREPLY && (lost_ms < 0 ||
		    (err != SEMC_ERR_CONNECT && err != SEMC_ERR_NOTSENT)))
			return (err);
		if (lost_ms < 0)
			lost_ms = semc_now_ms();
		if (!semc_acq_may_retry(c, lost_ms, retries++, &delay_ms)) {
			snprintf(what, sizeof(what), "ID %s: not answered "
			    "when sent again for %d ms (an acquire with this "
			    "ID learns the token while the lease lasts)",
			    q->id, c->failover_timeout_ms);
			return (semc_seterr_again(c, err, SEMC_ERR_NOREPLY,
			    what));
		}
	}
}

/* The shared path: check, send (again if need be), read the token. */
static enum semc_err
semc_acq_run(struct semc *c, struct semc_acq *q,
    const struct semc_acquire_opts *opts, uint64_t *token)
{
	struct proto_reply	reply;
	struct proto_word	w;
	enum semc_err		err;
	size_t			pos = 0;
	uint64_t		t;

	if ((err = semc_acq_prepare(c, q, opts)) != SEMC_OK ||
	    (err = semc_acq_call(c, q, &reply)) != SEMC_OK)
		return (err);
	if (!proto_next_word(reply.rest.p, reply.rest.len, &pos, &w) ||
	    proto_parse_u64(w.p, w.len, UINT64_MAX, &t) != 0) {
		semc_conn_close(c);	/* a bound permit goes with it */
		return (semc_seterr(c, SEMC_ERR_BADREPLY, "expected a number "
		    "after OK: '%.*s'", (int)(reply.rest.len > 80 ? 80 :
		    reply.rest.len), reply.rest.p));
	}
	if (q->lease_ms < 0 &&
	    semc_bound_add(c, q->want[0].sem, t, q->want[0].n) != SEMC_OK) {
		semc_conn_close(c);
		semc_bound_remove(c, q->want[0].sem, t);
		return (semc_seterr(c, SEMC_ERR_NOMEM, "cannot remember the "
		    "bound permit: the connection was closed to free it"));
	}
	*token = t;
	return (SEMC_OK);
}

/* ACQUIRE (TRY when is_try), as semc_acquire and semc_try send them. */
enum semc_err
semc_acquire_one(struct semc *c, int is_try, const char *sem, uint32_t n,
    int64_t timeout_ms, int64_t lease_ms,
    const struct semc_acquire_opts *opts, uint64_t *token)
{
	struct semc_want	want = { sem, n };
	struct semc_acq		q;

	memset(&q, 0, sizeof(q));
	q.verb = is_try ? "TRY" : "ACQUIRE";
	q.want = &want;
	q.count = 1;
	q.timeout_ms = is_try ? 0 : timeout_ms;
	q.lease_ms = lease_ms;
	return (semc_acq_run(c, &q, opts, token));
}

enum semc_err
semc_acquire_with(struct semc *c, const char *sem, uint32_t n,
    int64_t timeout_ms, int64_t lease_ms,
    const struct semc_acquire_opts *opts, uint64_t *token)
{
	return (semc_acquire_one(c, timeout_ms == 0, sem, n, timeout_ms,
	    lease_ms, opts, token));
}

enum semc_err
semc_acquire_all(struct semc *c, const struct semc_want *want, size_t count,
    int64_t timeout_ms, int64_t lease_ms,
    const struct semc_acquire_opts *opts, uint64_t *token)
{
	struct semc_acq	q;

	if (want == NULL || count < 2 || count > SEMC_ACQUIRE_ALL_MAX)
		return (semc_seterr(c, SEMC_ERR_INVAL, "semc_acquire_all: 2 "
		    "to %d semaphores, not %zu", SEMC_ACQUIRE_ALL_MAX,
		    want == NULL ? (size_t)0 : count));
	memset(&q, 0, sizeof(q));
	q.verb = "ACQUIREALL";
	q.want = want;
	q.count = count;
	q.timeout_ms = timeout_ms;
	q.lease_ms = lease_ms;
	return (semc_acq_run(c, &q, opts, token));
}
