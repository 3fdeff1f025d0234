/*
 * semc.c: a libsemc handle: options and addresses, connecting (AUTH,
 * re-attaching bound permits, searching for the owner with
 * semc-failover.c), and semc_call(), the one place a request meets the
 * network, which decides what a failure means for the request.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "semc-int.h"

#define SEMC_CONNECT_TIMEOUT_MS	5000
#define SEMC_IO_TIMEOUT_MS	10000
#define SEMC_FAILOVER_TIMEOUT_MS 15000

static char *
semc_strdup_or_null(const char *s, int *failed)
{
	char	*p;

	if (s == NULL)
		return (NULL);
	if ((p = strdup(s)) == NULL)
		*failed = 1;
	return (p);
}

/*
 * Where to connect: a Unix socket; else opts->hosts; else opts->host;
 * else SEMD_HOSTS; else 127.0.0.1. opts->port (or 7313) is the port of
 * every address given without one. 0, or -1 without memory.
 */
static int
semc_new_addrs(struct semc *c, const struct semc_opts *opts)
{
	const char	*list = opts->hosts, *env;
	char		 why[SEMC_ERRMSG_MAX];
	int		 port;

	port = opts->port > 0 ? opts->port : SEMC_DEFAULT_PORT;
	if (list == NULL && opts->host == NULL && opts->unix_path == NULL &&
	    (env = getenv("SEMD_HOSTS")) != NULL && *env != '\0')
		list = env;
	if (list == NULL)
		return (semc_addr_set_one(c, opts->host != NULL ? opts->host :
		    "127.0.0.1", port));
	if (semc_addr_set_list(c, list, port, why, sizeof(why)) == 0)
		return (0);
	if ((c->addr_problem = strdup(why)) == NULL)
		return (-1);
	return (0);
}

/*
 * The caller's opts as this library's struct, in *out: the first
 * in->size bytes, the rest 0 (defaults). NULL, or a message when the
 * struct cannot be trusted: size unset (no SEMC_OPTS_INIT), too small for
 * the first struct with a size, or a field set beyond the ones this
 * library knows (a newer header's option it would silently ignore).
 */
static const char *
semc_opts_take(const struct semc_opts *in, struct semc_opts *out)
{
	const unsigned char	*extra = (const unsigned char *)in;
	size_t			 i;

	memset(out, 0, sizeof(*out));
	if (in == NULL) {
		out->size = sizeof(*out);
		return (NULL);
	}
	if (in->size == 0)
		return ("struct semc_opts has no size: initialise it with "
		    "SEMC_OPTS_INIT");
	if (in->size < SEMC_OPTS_SIZE_MIN)
		return ("struct semc_opts: size too small (initialise it with "
		    "SEMC_OPTS_INIT)");
	for (i = sizeof(*out); i < in->size; i++) {
		if (extra[i] != 0)
			return ("struct semc_opts sets an option this libsemc "
			    "(" SEMC_VERSION ") does not know: upgrade it");
	}
	memcpy(out, in, in->size < sizeof(*out) ? in->size : sizeof(*out));
	out->size = sizeof(*out);
	return (NULL);
}

struct semc *
semc_new(const struct semc_opts *given)
{
	struct semc_opts	 o, *opts = &o;
	struct semc		*c;
	const char		*problem;
	int			 failed = 0;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return (NULL);
	if ((problem = semc_opts_take(given, &o)) != NULL &&
	    (c->opts_problem = strdup(problem)) == NULL) {
		free(c);
		return (NULL);
	}
	c->fd = -1;
	c->owner_hint = -1;
	c->grace_ms = c->owner_lease_ms = -1;
	c->ref_ms = c->ping_ms = c->sent_ms = -1;
	c->unix_path = semc_strdup_or_null(opts->unix_path, &failed);
	c->password = semc_strdup_or_null(opts->password, &failed);
	c->name = semc_strdup_or_null(opts->name, &failed);
	if (semc_new_addrs(c, opts) != 0)
		failed = 1;
	c->connect_timeout_ms = opts->connect_timeout_ms != 0 ?
	    opts->connect_timeout_ms : SEMC_CONNECT_TIMEOUT_MS;
	c->io_timeout_ms = opts->io_timeout_ms != 0 ? opts->io_timeout_ms :
	    SEMC_IO_TIMEOUT_MS;
	c->failover_timeout_ms = opts->failover_timeout_ms != 0 ?
	    opts->failover_timeout_ms : SEMC_FAILOVER_TIMEOUT_MS;
	if (failed) {
		semc_free(c);
		return (NULL);
	}
	semc_seterr(c, SEMC_OK, NULL);
	return (c);
}

void
semc_free(struct semc *c)
{
	if (c == NULL)
		return;
	semc_conn_close(c);
	semc_addr_free(c);
	free(c->addr_problem);
	free(c->opts_problem);
	free(c->unix_path);
	if (c->password != NULL)
		explicit_bzero(c->password, strlen(c->password));
	free(c->password);
	free(c->name);
	free(c->buf);
	free(c->bound);
	free(c->lost);
	free(c);
}

int
semc_fd(const struct semc *c)
{
	return (c->fd);
}

void
semc_close(struct semc *c)
{
	semc_conn_close(c);
	semc_bound_clear(c);
}

/* The I/O deadline from now, extended by wait_ms (-1: for ever). */
static int64_t
semc_deadline(const struct semc *c, int64_t wait_ms)
{
	if (c->io_timeout_ms < 0 || wait_ms < 0)
		return (semc_bound_clamp(c, -1));
	return (semc_bound_clamp(c, semc_now_ms() + c->io_timeout_ms +
	    wait_ms));
}

/* Send one whole line on the connection as it is; closes it on failure. */
static enum semc_err
semc_send(struct semc *c, const char *req, size_t len)
{
	int	errnum;

	c->sent_ms = semc_now_ms();
	if (semc_conn_send(c, req, len, semc_deadline(c, 0), &errnum) != 0) {
		semc_conn_close(c);
		return (semc_seterr(c, SEMC_ERR_NOTSENT, "%s",
		    strerror(errnum)));
	}
	return (SEMC_OK);
}

/*
 * Read the reply of the request sent last. Every failure closes the
 * connection, so that semd drops whatever part of the line it got and
 * we never read a reply meant for another request.
 */
static enum semc_err
semc_reply(struct semc *c, enum semc_req_kind kind, int64_t wait_ms,
    struct proto_reply *reply)
{
	enum proto_reply_kind	 rk;
	enum semc_err		 err;
	const char		*line;
	size_t			 linelen;

	err = semc_conn_readline(c, semc_deadline(c, wait_ms), &line,
	    &linelen);
	if (err != SEMC_OK) {
		semc_conn_close(c);
		if (err == SEMC_ERR_NOREPLY && kind == SEMC_REQ_ACQUIRE)
			return (semc_seterr_again(c, err, SEMC_ERR_LOST,
			    "the reply"));
		return (err);
	}
	rk = proto_parse_reply(line, linelen, reply);
	/* Answered: semd was still serving after sent_ms (semc-bound.c). */
	if (rk != PROTO_REPLY_BAD && c->holding)
		c->ref_ms = c->sent_ms;
	switch (rk) {
	case PROTO_REPLY_OK:
		return (semc_seterr(c, SEMC_OK, NULL));
	case PROTO_REPLY_TIMEOUT:
		return (semc_seterr(c, SEMC_TIMEOUT, NULL));
	case PROTO_REPLY_ERR:
		err = semc_err_from_proto(reply->code);
		if (err == SEMC_ERR_TOOLONG)
			semc_conn_close(c);	/* semd closes it too */
		if (err == SEMC_ERR_STANDBY)
			semc_failover_standby(c, reply);
		if (err == SEMC_ERR_SERVER || reply->rest.len == 0)
			return (semc_seterr(c, err, "ERR %.*s %.*s",
			    (int)reply->code_word.len, reply->code_word.p,
			    (int)reply->rest.len, reply->rest.p));
		/* semd's own words say it best: "no semaphore 'x'". */
		snprintf(c->errmsg, sizeof(c->errmsg), "%.*s (ERR %.*s)",
		    (int)reply->rest.len, reply->rest.p,
		    (int)reply->code_word.len, reply->code_word.p);
		return (err);
	default:
		semc_conn_close(c);
		return (semc_seterr(c, SEMC_ERR_BADREPLY, "'%.*s'",
		    (int)(linelen > 60 ? 60 : linelen), line));
	}
}

/* Send one line and read its reply, on the connection as it is. */
static enum semc_err
semc_roundtrip(struct semc *c, enum semc_req_kind kind, int64_t wait_ms,
    const char *req, size_t len, struct proto_reply *reply)
{
	enum semc_err	err;

	if ((err = semc_send(c, req, len)) != SEMC_OK)
		return (err);
	return (semc_reply(c, kind, wait_ms, reply));
}

/*
 * semc_roundtrip(), with ROLE sent first in the same write when this
 * connection has not been asked yet and bound permits are held or being
 * acquired: the bound needs semd's reclaim-grace (semc-bound.c), and
 * pipelining costs no round trip. ROLE's reply is read first; if it is
 * lost the request's reply is lost too.
 */
static enum semc_err
semc_roundtrip_role(struct semc *c, enum semc_req_kind kind,
    int64_t wait_ms, const char *req, size_t len, struct proto_reply *reply)
{
	char		both[SEMC_REQ_MAX + 8];
	enum semc_err	err;

	if (c->role_asked || (c->nbound == 0 && !c->bound_acquire) ||
	    len > sizeof(both) - 5)
		return (semc_roundtrip(c, kind, wait_ms, req, len, reply));
	memcpy(both, "ROLE\n", 5);
	memcpy(both + 5, req, len);
	if ((err = semc_send(c, both, len + 5)) != SEMC_OK)
		return (err);
	c->role_asked = 1;
	err = semc_reply(c, kind, 0, reply);
	if (c->fd == -1)
		return (err);
	semc_bound_role(c, err, reply);
	return (semc_reply(c, kind, wait_ms, reply));
}

/*
 * While connecting: NAME, if this handle has a label. A standby refuses
 * it (then the caller looks for the owner); any other refusal (a semd
 * older than 1.1) is ignored, since a label only helps operators.
 */
static enum semc_err
semc_open_name(struct semc *c)
{
	struct proto_reply	reply;
	char			req[SEMC_LABEL_MAX + 16];
	enum semc_err		err;
	int			len;

	if (!proto_valid_label(c->name, strlen(c->name))) {
		semc_conn_close(c);
		return (semc_seterr(c, SEMC_ERR_INVAL, "invalid name '%.64s' "
		    "(1 to %d bytes of A-Z a-z 0-9 _ . : / - @)", c->name,
		    SEMC_LABEL_MAX));
	}
	len = snprintf(req, sizeof(req), "NAME %s\n", c->name);
	err = semc_roundtrip(c, SEMC_REQ_PLAIN, 0, req, (size_t)len, &reply);
	if (err == SEMC_OK || (err != SEMC_ERR_STANDBY && c->fd != -1))
		return (semc_seterr(c, SEMC_OK, NULL));
	semc_conn_close(c);
	if (err == SEMC_ERR_STANDBY)
		return (err);
	return (semc_seterr_again(c, err, SEMC_ERR_CONNECT, "during NAME"));
}

/*
 * A new connection to addrs[cur]: AUTH if we have a password, then ATTACH
 * again the permits bound to the connection we lost. The permits semd
 * refuses are reported lost; an I/O failure, or a standby's refusal,
 * keeps them all for the next attempt.
 */
static enum semc_err
semc_open(struct semc *c)
{
	struct proto_reply	reply;
	char			req[SEMC_REQ_MAX + 64];
	enum semc_err		err;
	int			len;

	semc_conn_close(c);
	if (c->opts_problem != NULL)
		return (semc_seterr(c, SEMC_ERR_INVAL, "%s", c->opts_problem));
	if (c->addr_problem != NULL && c->unix_path == NULL)
		return (semc_seterr(c, SEMC_ERR_INVAL, "%s", c->addr_problem));
	if ((err = semc_conn_open(c)) != SEMC_OK)
		return (err);
	if (c->password != NULL) {
		len = snprintf(req, sizeof(req), "AUTH %s\n", c->password);
		if (len < 0 || (size_t)len >= sizeof(req)) {
			semc_conn_close(c);
			return (semc_seterr(c, SEMC_ERR_INVAL,
			    "password too long"));
		}
		err = semc_roundtrip(c, SEMC_REQ_PLAIN, 0, req, (size_t)len,
		    &reply);
		explicit_bzero(req, sizeof(req));
		if (err != SEMC_OK) {
			semc_conn_close(c);
			/* The caller's request was not sent: say "connect". */
			if (err == SEMC_ERR_NOTSENT ||
			    err == SEMC_ERR_NOREPLY ||
			    err == SEMC_ERR_BADREPLY)
				return (semc_seterr_again(c, err,
				    SEMC_ERR_CONNECT, "during AUTH"));
			return (err);
		}
	}
	if (c->name != NULL && (err = semc_open_name(c)) != SEMC_OK)
		return (err);
	if (c->ever_connected && c->nbound > 0) {
		if ((err = semc_bound_reattach(c)) != SEMC_OK) {
			semc_conn_close(c);
			return (err);
		}
		/* Each is bound here since its ATTACH; the last was sent last. */
		c->ref_ms = c->sent_ms;
	}
	c->holding = 1;
	c->ever_connected = 1;
	return (semc_seterr(c, SEMC_OK, NULL));
}

/*
 * Open a connection to the owner: attempts as the search allows (one,
 * for a single address that never met a standby).
 */
static enum semc_err
semc_open_owner(struct semc *c, struct semc_search *s)
{
	enum semc_err	err;

	for (;;) {
		err = semc_open(c);
		if (err != SEMC_ERR_CONNECT && err != SEMC_ERR_STANDBY)
			return (err);
		if ((err = semc_search_again(c, s, err)) != SEMC_OK)
			return (err);
	}
}

enum semc_err
semc_connect(struct semc *c)
{
	struct semc_search	s;

	(void)semc_call_ping_settle(c);
	if (!semc_conn_broken(c))
		return (semc_seterr(c, SEMC_OK, NULL));
	semc_search_start(c, &s);
	return (semc_open_owner(c, &s));
}

enum semc_err
semc_reconnect(struct semc *c)
{
	struct semc_search	s;

	semc_conn_close(c);
	semc_search_start(c, &s);
	return (semc_open_owner(c, &s));
}

static int	semc_format_req(char *, size_t, const char *, va_list)
		    __attribute__((format(printf, 3, 0)));

/* The request line, "\n" included, into req; its length, or -1. */
static int
semc_format_req(char *req, size_t size, const char *fmt, va_list ap)
{
	int	len = vsnprintf(req, size - 1, fmt, ap);

	if (len < 0 || (size_t)len >= size - 1)
		return (-1);
	req[len++] = '\n';
	return (len);
}

/*
 * Send the formatted request and read its reply. A connection found
 * closed before sending is opened again first; a send that fails is
 * sent again on a new connection, because semd never saw a whole line;
 * a request a standby refused (it did nothing) is sent again to the
 * owner. With one address and no standby met, that is once; else as
 * long as the search for the owner lasts. A reply that does not come is
 * never retried.
 */
enum semc_err
semc_call(struct semc *c, enum semc_req_kind kind, int64_t wait_ms,
    struct proto_reply *reply, const char *fmt, ...)
{
	struct semc_search	 s;
	char			 req[SEMC_REQ_MAX];
	enum semc_err		 err;
	va_list			 ap;
	int			 len, reopened = 0;

	va_start(ap, fmt);
	len = semc_format_req(req, sizeof(req), fmt, ap);
	va_end(ap);
	if (len < 0)
		return (semc_seterr(c, SEMC_ERR_INVAL, "request too long"));

	semc_search_start(c, &s);
	(void)semc_call_ping_settle(c);		/* a failure closes it */
	if (semc_conn_broken(c)) {
		if ((err = semc_open_owner(c, &s)) != SEMC_OK)
			return (err);
		reopened = 1;
	}
	for (;;) {
		err = semc_roundtrip_role(c, kind, wait_ms, req, (size_t)len,
		    reply);
		if (err == SEMC_ERR_STANDBY || (err == SEMC_ERR_NOTSENT &&
		    semc_search_many(c))) {
			/* Nothing was done: on to the next address. */
			semc_conn_close(c);
			if ((err = semc_search_again(c, &s, err)) != SEMC_OK)
				return (err);
		} else if (err != SEMC_ERR_NOTSENT || reopened)
			return (err);
		if ((err = semc_open_owner(c, &s)) != SEMC_OK)
			return (err);
		reopened = 1;
	}
}

enum semc_err
semc_call_send(struct semc *c, const char *fmt, ...)
{
	struct semc_search	 s;
	char			 req[SEMC_REQ_MAX];
	enum semc_err		 err;
	va_list			 ap;
	int			 len;

	va_start(ap, fmt);
	len = semc_format_req(req, sizeof(req), fmt, ap);
	va_end(ap);
	if (len < 0)
		return (semc_seterr(c, SEMC_ERR_INVAL, "request too long"));
	(void)semc_call_ping_settle(c);
	if (semc_conn_broken(c)) {
		semc_search_start(c, &s);
		if ((err = semc_open_owner(c, &s)) != SEMC_OK)
			return (err);
	}
	return (semc_send(c, req, (size_t)len));
}

enum semc_err
semc_call_reply(struct semc *c, enum semc_req_kind kind, int64_t wait_ms,
    struct proto_reply *reply)
{
	return (semc_reply(c, kind, wait_ms, reply));
}

/* For semc-bound.c: one ATTACH on the connection being opened. */
enum semc_err
semc_call_attach(struct semc *c, const char *sem, uint64_t token)
{
	struct proto_reply	reply;
	char			req[SEMC_REQ_MAX];
	int			len;

	len = snprintf(req, sizeof(req), "ATTACH %s %llu\n", sem,
	    (unsigned long long)token);
	if (len < 0 || (size_t)len >= sizeof(req))
		return (semc_seterr(c, SEMC_ERR_INVAL, "request too long"));
	return (semc_roundtrip_role(c, SEMC_REQ_PLAIN, 0, req, (size_t)len,
	    &reply));
}

enum semc_err
semc_call_ping_send(struct semc *c)
{
	enum semc_err	err;

	if (c->fd == -1)
		return (semc_seterr(c, SEMC_ERR_NOTSENT, "not connected"));
	if ((err = semc_send(c, "PING\n", 5)) == SEMC_OK)
		c->ping_ms = c->sent_ms;
	return (err);
}

enum semc_err
semc_call_ping_settle(struct semc *c)
{
	struct proto_reply	reply;

	if (c->ping_ms < 0 || c->fd == -1)
		return (SEMC_OK);
	c->ping_ms = -1;
	return (semc_reply(c, SEMC_REQ_PLAIN, 0, &reply));
}
