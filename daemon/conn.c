/*
 * conn.c: one client connection.
 *
 * Framing: a request is the bytes up to "\n". We look for it within the
 * first max-line + 2 bytes only (the line, an optional "\r", the "\n"), so
 * a client that never sends a newline costs us max-line bytes, not its
 * whole stream: it gets ERR TOOLONG and is closed.
 *
 * Order: lines are taken one at a time; a request that must wait moves
 * the connection to WAIT_ENGINE, WAIT_STORE or WATCHING and the rest of
 * its input waits in the buffer (bounded by CONN_BACKLOG_MAX) until the
 * answer comes.
 *
 *   READY ---> WAIT_ENGINE ---> WAIT_STORE ---> READY
 *     |  \          |  \___________________/^  ^
 *     |   +-------> WATCHING ------------------+ |
 *     |   +----------------------> WAIT_STORE --+
 *     +--> CLOSING --> DEAD   (and any state --> DEAD)
 *
 * Output: replies go to the output buffer, and once per loop turn, after
 * every callback that may add to it, conn_flush_cb() writes each buffer
 * that grew straight to its socket, as Redis writes its replies before it
 * sleeps: one write per connection per turn, and no write event unless
 * the socket is full (only then is the bufferevent's EV_WRITE enabled, to
 * finish the job; it is disabled again once the buffer is empty). A
 * bufferevent's own way (enable EV_WRITE on every reply, write on the
 * next turn, disable) costs a turn and two epoll_ctl calls per reply.
 * While more than max-output bytes of them are unread, no more requests
 * are taken (a reply larger than max-output, a long listing, still goes
 * out whole to a client that reads it); a connection whose unread output
 * stays over max-output without draining for a whole sweep is closed:
 * its client does not read. Its input is bounded too (a read watermark
 * stops reading, so TCP pushes back on the client). The unread replies
 * of all connections are counted (output_bytes, from a callback on each
 * output buffer); over max-output-total, the connections with the
 * most are closed, as Redis's client output limits do, so that many
 * clients that do not read cannot add up to more memory than that.
 *
 * Turns: a connection's read callback runs at most CONN_LINES_PER_TURN
 * lines and CONN_TURN_US of them, then yields to the loop (resume_ev), and
 * every event of a client runs at the loop's lowest priority, bounded per
 * pass (server.h), so that timers and Redis are served in between.
 * The end-of-turn write (flush_ev) is not client work in that sense: it
 * runs at the default priority, so replies go out at the next pass, not
 * after every other client's turn, and it costs no more than copying the
 * bytes those budgeted turns made (a socket takes what fits, no more).
 * Replies stay in order: a connection's lines are taken one at a time.
 *
 * Time limits are checked once a second by one sweep over every
 * connection, not by a timer each: idle (timeout, 0 = off), a line that
 * takes too long to complete (line-timeout), and a connection that does
 * not authenticate in time (auth-timeout, with requirepass).
 *
 * Lifetime: nothing frees a connection from inside its own callbacks or
 * from inside an engine event. conn_close_now() marks it DEAD and the
 * teardown runs from resume_ev on the next loop turn.
 */
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "conn.h"
#include "log.h"
#include "persist.h"
#include "server.h"
#include "sock.h"
#include "timers.h"

/* How long a closing connection may take to read its last replies. */
#define CONN_FLUSH_TIMEOUT_S	10
#define CONN_SWEEP_MS		1000

TAILQ_HEAD(conn_queue, conn);

/*
 * Every connection, and what conn.c keeps about them all: only this file
 * reads or writes it (struct server holds a pointer to it).
 */
struct conn_table {
	struct conn		*by_id;		/* uthash */
	uint32_t		 nconns;
	uint64_t		 next_conn_id;
	struct event		*flush_ev;	/* end-of-turn writes */
	struct conn_queue	 flushq;	/* ...of these connections */
	void			*sweep_timer;	/* the time limits */
	uint64_t		 output_bytes;	/* unread replies, all of them */
	struct log_repeat	 output_trim;	/* over max-output-total */
	struct log_repeat	 http_seen;	/* HTTP-looking requests */
	uint64_t		 http_last_ms;	/* ...the last one, or 0 */
};

static void	conn_take_lines(struct conn *c);
static void	conn_vreply(struct conn *, const char *, va_list)
		    __attribute__((format(printf, 2, 0)));

static const char *const conn_state_names[CONN__COUNT] = {
#define X(name, text) text,
	CONN_STATES(X)
#undef X
};

/* The transitions there are, [from][to]; DEAD is reachable from all. */
static const unsigned char conn_transitions[CONN__COUNT][CONN__COUNT] = {
	[CONN_READY] = {
		[CONN_WAIT_ENGINE] = 1, [CONN_WAIT_STORE] = 1,
		[CONN_WATCHING] = 1, [CONN_CLOSING] = 1, [CONN_DEAD] = 1 },
	[CONN_WAIT_ENGINE] = {
		[CONN_WAIT_STORE] = 1, [CONN_READY] = 1, [CONN_DEAD] = 1 },
	[CONN_WAIT_STORE] = { [CONN_READY] = 1, [CONN_DEAD] = 1 },
	[CONN_WATCHING] = { [CONN_READY] = 1, [CONN_DEAD] = 1 },
	[CONN_CLOSING] = { [CONN_DEAD] = 1 },
	[CONN_DEAD] = { 0 },
};

const char *
conn_state_name(enum conn_state state)
{
	return ((unsigned)state < CONN__COUNT ? conn_state_names[state] :
	    "?");
}

void
conn_set_state(struct conn *c, enum conn_state state)
{
	if (c->state == state)
		return;
	if (!conn_transitions[c->state][state])
		fatalx("connection %llu: no transition from %s to %s",
		    (unsigned long long)c->id, conn_state_name(c->state),
		    conn_state_name(state));
	log_debug("connection %llu: %s -> %s", (unsigned long long)c->id,
	    conn_state_name(c->state), conn_state_name(state));
	c->state = state;
}

/* The state a request left c waiting in. */
static void
conn_block(struct conn *c, enum cmd_result why)
{
	static const enum conn_state states[] = {
		[CMD_WAIT_ENGINE] = CONN_WAIT_ENGINE,
		[CMD_WAIT_STORE] = CONN_WAIT_STORE,
		[CMD_WATCHING] = CONN_WATCHING,
	};

	/* A reply may have closed it (max-output, KILL of itself). */
	if (why != CMD_DONE && c->state == CONN_READY)
		conn_set_state(c, states[why]);
}

/* The server's clock (clock.h): time limits, ages, idle times. */
static uint64_t
conn_now_ms(const struct server *srv)
{
	return (clock_now(&srv->clock));
}

/* The monotonic clock in microseconds, for the turn budgets. */
static uint64_t
conn_now_us(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
}

/* The loop priority of clients' work: the lowest there is (server.h). */
static int
conn_priority(struct server *srv)
{
	return (event_base_get_npriorities(srv->base) - 1);
}

/* 1 when more than max-output bytes of replies are unread. */
static int
conn_output_full(struct conn *c)
{
	return (evbuffer_get_length(bufferevent_get_output(c->bev)) >
	    (size_t)c->srv->cfg->max_output);
}

/*
 * Turn a new socket away with one ERR line, before any buffer exists for
 * it. Best effort: a full socket buffer just loses the line.
 */
static void
conn_reject(struct server *srv, evutil_socket_t fd, const char *line)
{
	ssize_t	n;

	n = send(fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL);
	(void)n;
	shutdown(fd, SHUT_WR);
	evutil_closesocket(fd);
	srv->stats.rejected_total++;
}

/*
 * Find the next complete line: copy it to c->line, drain it and return 1
 * with *len its length (the bytes before "\n", a "\r" included); 0 when
 * more bytes are needed; -1 when the line is over max-line.
 */
static int
conn_next_line(struct conn *c, size_t *len)
{
	struct evbuffer	*in = bufferevent_get_input(c->bev);
	size_t		 avail = evbuffer_get_length(in);
	size_t		 max = (size_t)c->srv->cfg->max_line, look, n;
	const char	*p, *nl;

	if (avail == 0)
		return (0);
	look = avail < max + 2 ? avail : max + 2;
	if ((p = (const char *)evbuffer_pullup(in, (ev_ssize_t)look)) == NULL)
		return (-1);
	if ((nl = memchr(p, '\n', look)) == NULL) {
		/* After max bytes, only a "\r" may still come before "\n". */
		if (avail > max + 1 || (avail == max + 1 && p[max] != '\r'))
			return (-1);
		return (0);
	}
	n = (size_t)(nl - p);
	if (n - (n > 0 && p[n - 1] == '\r') > max)
		return (-1);
	memcpy(c->line, p, n);
	evbuffer_drain(in, n + 1);
	*len = n;
	return (1);
}

/* Cross-protocol attack: a browser made to POST to us. */
static int
conn_looks_like_http(const char *line, size_t len)
{
	static const char *const prefixes[] = {
		"GET ", "POST ", "HEAD ", "PUT ", "Host:"
	};
	size_t	i, plen;

	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		plen = strlen(prefixes[i]);
		if (len >= plen && strncasecmp(line, prefixes[i], plen) == 0)
			return (1);
	}
	return (0);
}

/* Parse and run one request line. */
static void
conn_handle_line(struct conn *c, size_t len)
{
	struct proto_request	req;
	struct proto_error	err;
	char			subject[128];

	c->last_ms = conn_now_ms(c->srv);
	if (conn_looks_like_http(c->line, len)) {
		/* Logged once, then counted: a browser may send thousands. */
		snprintf(subject, sizeof(subject), "connection %llu from %s",
		    (unsigned long long)c->id, c->peer);
		log_repeat(&c->srv->conns->http_seen, subject, "sent what looks "
		    "like HTTP; closing it (cross-protocol attack?)");
		c->srv->conns->http_last_ms = c->last_ms;
		/* Replies to the requests before it still go out; no more. */
		conn_close_after_flush(c);
		return;
	}
	switch (proto_parse(c->line, len, &req, &err)) {
	case PROTO_PARSE_EMPTY:
		return;
	case PROTO_PARSE_ERROR:
		c->srv->stats.commands_total++;
		conn_reply_err(c, err.code, "%s", err.msg);
		return;
	case PROTO_PARSE_OK:
		break;
	}
	c->last_verb = (int)req.verb;
	conn_block(c, c->srv->hooks->dispatch(c, &req));
}

/*
 * Take lines while the connection is ready and its client reads its
 * replies, for one turn: up to CONN_LINES_PER_TURN lines, and no new one
 * once CONN_TURN_US have gone by (one request always runs).
 */
static void
conn_take_lines(struct conn *c)
{
	uint64_t	end_us = conn_now_us() + CONN_TURN_US;
	size_t		len;
	int		i, rc = 0;

	for (i = 0; i < CONN_LINES_PER_TURN && c->state == CONN_READY; i++) {
		if (i > 0 && conn_now_us() >= end_us)
			break;		/* rc is 1: resume_ev comes back */
		if (conn_output_full(c))
			return;		/* conn_write_cb comes back */
		if ((rc = conn_next_line(c, &len)) == 0)
			break;
		if (rc < 0) {
			conn_reply_err(c, PERR_TOOLONG, "request line exceeds "
			    "max-line (%lld bytes)",
			    (long long)c->srv->cfg->max_line);
			conn_close_after_flush(c);
			return;
		}
		c->partial_ms = 0;
		conn_handle_line(c, len);
	}
	if (c->peer_eof && (c->state == CONN_WAIT_ENGINE ||
	    c->state == CONN_WATCHING)) {
		/*
		 * Its EOF came before this request (a turn ended between
		 * its lines) and will not come again: as conn_event_cb does
		 * for an EOF while waiting, the waiter goes too.
		 */
		conn_close_now(c);
		return;
	}
	if (c->state != CONN_READY)
		return;
	if (rc != 0) {
		/* The budget ran out; more may be buffered: come back later. */
		event_active(c->resume_ev, 0, 0);
	} else if (c->peer_eof) {
		/* The peer sent its last request and has been answered. */
		conn_close_after_flush(c);
	} else if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0 &&
	    c->partial_ms == 0)
		c->partial_ms = conn_now_ms(c->srv);	/* line-timeout runs */
}

static void
conn_read_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;

	if (c->state != CONN_READY &&
	    evbuffer_get_length(bufferevent_get_input(bev)) >
	    CONN_BACKLOG_MAX) {
		log_warnx("connection %llu from %s: over %d bytes pipelined "
		    "behind a request that waits; closing it",
		    (unsigned long long)c->id, c->peer, CONN_BACKLOG_MAX);
		conn_close_now(c);
		return;
	}
	conn_take_lines(c);
}

/* Some output went out (all of it when left is 0). */
static void
conn_wrote(struct conn *c, size_t left)
{
	if (c->state == CONN_CLOSING && left == 0) {
		conn_close_now(c);
		return;
	}
	if (c->out_over_ms != 0 && !conn_output_full(c)) {
		/* The client read its replies: take its requests again. */
		c->out_over_ms = 0;
		if (c->state == CONN_READY)
			event_active(c->resume_ev, 0, 0);
	}
}

/* The bufferevent wrote what conn_flush() left: it is drained. */
static void
conn_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn	*c = arg;
	size_t		 left = evbuffer_get_length(bufferevent_get_output(bev));

	if (left == 0)
		bufferevent_disable(bev, EV_WRITE);
	conn_wrote(c, left);
}

/*
 * Write c's output to its socket now; what the socket does not take is
 * left to the bufferevent (EV_WRITE), which calls conn_write_cb() once it
 * is all out. A bufferevent without a socket (a pair, in the unit tests)
 * always takes that way. A write error is left to the bufferevent too,
 * which reports it to conn_event_cb() and so closes c.
 */
static void
conn_flush(struct conn *c)
{
	struct evbuffer	*out = bufferevent_get_output(c->bev);
	evutil_socket_t	 fd = bufferevent_getfd(c->bev);
	int		 n;

	if (c->state == CONN_DEAD || evbuffer_get_length(out) == 0)
		return;
	if (fd >= 0) {
		/* A bufferevent keeps its output's start frozen but for its
		 * own writes, as this one is. */
		evbuffer_unfreeze(out, 1);
		n = evbuffer_write(out, fd);
		evbuffer_freeze(out, 1);
		if (n > 0 && evbuffer_get_length(out) == 0) {
			conn_wrote(c, 0);
			return;
		}
	}
	bufferevent_enable(c->bev, EV_WRITE);
}

/*
 * flush_ev, once a turn after the replies were made: write them. An owner
 * whose ownership deadline passed meanwhile writes nothing: it gives the
 * data set up first, which closes every connection (persist.h).
 */
static void
conn_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server	*srv = arg;
	struct conn	*c;

	(void)fd;
	(void)what;
	if (srv->persist != NULL && !persist_owner_check(srv->persist))
		return;
	while ((c = TAILQ_FIRST(&srv->conns->flushq)) != NULL) {
		TAILQ_REMOVE(&srv->conns->flushq, c, flush_entry);
		c->flush_queued = 0;
		conn_flush(c);
	}
}

/* c has new output: write it at the end of this turn. */
static void
conn_queue_flush(struct conn *c)
{
	struct server	*srv = c->srv;

	if (c->flush_queued)
		return;
	c->flush_queued = 1;
	TAILQ_INSERT_TAIL(&srv->conns->flushq, c, flush_entry);
	event_active(srv->conns->flush_ev, 0, 0);
}

static void
conn_unqueue_flush(struct conn *c)
{
	if (!c->flush_queued)
		return;
	TAILQ_REMOVE(&c->srv->conns->flushq, c, flush_entry);
	c->flush_queued = 0;
}

static void
conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn	*c = arg;

	(void)bev;
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
	    (c->state == CONN_READY || c->state == CONN_WAIT_STORE)) {
		/*
		 * The peer finished sending (perhaps only half-closed, as
		 * "nc -q1" does): answer what it sent, then close. A grant
		 * already made and only being written is answered too.
		 */
		c->peer_eof = 1;
		if (c->state == CONN_READY)
			conn_take_lines(c);
		return;
	}
	/* Errors, timeouts, and EOF while waiting: the waiter goes too. */
	conn_close_now(c);
}

/* resume_ev: take more lines, or tear a dead connection down. */
static void
conn_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct conn	*c = arg;

	(void)fd;
	(void)what;
	if (c->state == CONN_DEAD)
		conn_free(c);
	else
		conn_take_lines(c);
}

struct conn *
conn_accept(struct server *srv, evutil_socket_t fd, const struct sockaddr *sa,
    int socklen)
{
	struct config		*cfg = srv->cfg;
	struct bufferevent	*bev;
	char			 peer[64];

	(void)socklen;
	sock_format_peer(sa, peer, sizeof(peer));
	if (srv->conns->nconns >= (uint32_t)cfg->maxclients) {
		log_warnx("rejecting %s: maxclients (%lld) reached", peer,
		    (long long)cfg->maxclients);
		conn_reject(srv, fd, "ERR LIMIT max number of clients "
		    "reached\r\n");
		return (NULL);
	}
	if (cfg->protected_mode && cfg->requirepass == NULL &&
	    !sock_peer_is_local(sa)) {
		log_warnx("rejecting %s: protected mode", peer);
		conn_reject(srv, fd, "ERR AUTH protected mode: no password "
		    "is set, so only loopback clients are served; set "
		    "requirepass, or protected-mode no\r\n");
		return (NULL);
	}
	if (sa->sa_family != AF_UNIX)
		sock_set_tcp_options(fd, cfg->tcp_keepalive_ms);
	bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL)
		fatalx("cannot set up a connection");
	return (conn_new(srv, bev, peer));
}

/* The output buffer of a connection grew or shrank: keep the total. */
static void
conn_output_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct server	*srv = arg;

	(void)buf;
	srv->conns->output_bytes += info->n_added;
	srv->conns->output_bytes -= info->n_deleted;
}

struct conn *
conn_new(struct server *srv, struct bufferevent *bev, const char *peer)
{
	struct conn	*c;
	int		 prio = conn_priority(srv);

	c = xcalloc(1, sizeof(*c));
	c->srv = srv;
	c->id = ++srv->conns->next_conn_id;
	c->state = CONN_READY;
	c->created_ms = c->last_ms = conn_now_ms(c->srv);
	c->last_verb = -1;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	c->line = xcalloc(1, (size_t)srv->cfg->max_line + 2);
	c->owner = engine_owner_new(srv->engine, c->id);
	c->bev = bev;
	c->resume_ev = event_new(srv->base, -1, 0, conn_resume_cb, c);
	c->out_cb = evbuffer_add_cb(bufferevent_get_output(bev),
	    conn_output_cb, srv);
	/* (A bufferevent pair, in the unit tests, has no events.) */
	if (c->resume_ev == NULL || c->out_cb == NULL ||
	    event_priority_set(c->resume_ev, prio) != 0 ||
	    (bufferevent_getfd(bev) >= 0 &&
	    bufferevent_priority_set(bev, prio) != 0))
		fatalx("cannot set up a connection");
	bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb,
	    c);
	/*
	 * Stop reading past a whole line over the backlog a waiting request
	 * may have (conn_read_cb closes such a connection), or, for one
	 * whose replies are unread, as far: TCP then pushes back.
	 */
	bufferevent_setwatermark(c->bev, EV_READ, 0,
	    CONN_BACKLOG_MAX + (size_t)srv->cfg->max_line + 2);
	/* EV_WRITE only while a write waits for room: see the top. */
	bufferevent_disable(c->bev, EV_WRITE);
	bufferevent_enable(c->bev, EV_READ);

	HASH_ADD(hh, srv->conns->by_id, id, sizeof(c->id), c);
	srv->conns->nconns++;
	srv->stats.connections_total++;
	log_debug("connection %llu from %s", (unsigned long long)c->id, peer);
	return (c);
}

/* Release what the connection held and free it. */
void
conn_free(struct conn *c)
{
	struct server	*srv = c->srv;

	log_debug("connection %llu closed", (unsigned long long)c->id);
	HASH_DEL(srv->conns->by_id, c);
	srv->conns->nconns--;
	c->srv->hooks->closing(c);
	conn_unqueue_flush(c);
	if (c->owner != NULL)	/* NULL once KILLed */
		engine_owner_free(srv->engine, c->owner);
	evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	srv->conns->output_bytes -= evbuffer_get_length(bufferevent_get_output(
	    c->bev));
	event_free(c->resume_ev);
	bufferevent_free(c->bev);
	free(c->line);
	free(c);
}

struct conn *
conn_find(struct server *srv, uint64_t id)
{
	struct conn	*c;

	HASH_FIND(hh, srv->conns->by_id, &id, sizeof(id), c);
	return (c);
}

void
conn_kill(struct conn *c, struct conn *killer)
{
	struct owner	*o = c->owner;

	log_info("connection %llu from %s killed by connection %llu from %s",
	    (unsigned long long)c->id, c->peer,
	    (unsigned long long)killer->id, killer->peer);
	c->srv->hooks->closing(c);
	if (c == killer)
		conn_close_after_flush(c);
	else
		conn_close_now(c);
	if (o != NULL) {
		c->owner = NULL;
		engine_owner_free(c->srv->engine, o);
	}
}

/*
 * The unread replies of all connections are over max-output-total: close
 * the connections with the most until they are not (conn_close_now drops
 * a connection's replies at once). Logged once, then counted (log.h).
 */
static void
conn_trim_output(struct server *srv)
{
	struct conn	*c, *tmp, *most;
	size_t		 out, most_out;

	while (srv->conns->output_bytes > (uint64_t)srv->cfg->max_output_total) {
		most = NULL;
		most_out = 0;
		HASH_ITER(hh, srv->conns->by_id, c, tmp) {
			if (c->state == CONN_DEAD)
				continue;
			out = evbuffer_get_length(bufferevent_get_output(
			    c->bev));
			if (out > most_out) {
				most = c;
				most_out = out;
			}
		}
		if (most == NULL)
			return;
		log_repeat(&srv->conns->output_trim, "connections", "the unread "
		    "replies of all connections exceed max-output-total; "
		    "closing the connection with the most");
		log_debug("closing connection %llu from %s: %zu bytes of "
		    "replies unread, over max-output-total in all",
		    (unsigned long long)most->id, most->peer, most_out);
		conn_close_now(most);
	}
}

static void
conn_vreply(struct conn *c, const char *fmt, va_list ap)
{
	struct evbuffer	*out;

	if (c->state == CONN_DEAD)
		return;
	out = bufferevent_get_output(c->bev);
	evbuffer_add_vprintf(out, fmt, ap);
	evbuffer_add(out, "\r\n", 2);
	conn_queue_flush(c);
	/* Over max-output: no more requests until it drains (see top). */
	if (c->out_over_ms == 0 && conn_output_full(c)) {
		c->out_over_ms = conn_now_ms(c->srv);
		c->out_seen = evbuffer_get_length(out);
	}
	if (c->srv->conns->output_bytes > (uint64_t)c->srv->cfg->max_output_total)
		conn_trim_output(c->srv);
}

void
conn_reply(struct conn *c, const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	conn_vreply(c, fmt, ap);
	va_end(ap);
}

void
conn_reply_err(struct conn *c, enum proto_err code, const char *fmt, ...)
{
	char	text[PROTO_ERRMSG_MAX + 64];
	va_list	ap;

	c->srv->stats.errors_total++;
	if ((unsigned)code < PERR__COUNT)
		c->srv->stats.errors[code]++;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	conn_reply(c, "ERR %s %s", proto_err_name(code), text);
}

void
conn_close_after_flush(struct conn *c)
{
	struct timeval	tv = { CONN_FLUSH_TIMEOUT_S, 0 };

	if (c->state == CONN_DEAD || c->state == CONN_CLOSING)
		return;
	if (c->state != CONN_READY) {
		conn_close_now(c);	/* a waiter has nothing to flush */
		return;
	}
	conn_set_state(c, CONN_CLOSING);
	bufferevent_disable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		conn_close_now(c);
	else	/* counts only while EV_WRITE waits for room */
		bufferevent_set_timeouts(c->bev, NULL, &tv);
}

void
conn_close_now(struct conn *c)
{
	struct evbuffer	*out = bufferevent_get_output(c->bev);

	if (c->state == CONN_DEAD)
		return;
	conn_set_state(c, CONN_DEAD);
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	/* Its replies will never be sent: give their memory back now. */
	evbuffer_unfreeze(out, 1);
	evbuffer_drain(out, evbuffer_get_length(out));
	evbuffer_freeze(out, 1);
	/*
	 * The client sees the end now, before any reply this turn writes
	 * (KILL's OK to the killer, say): c is freed, and its socket closed,
	 * only when resume_ev runs, at the client priority, after them.
	 */
	if (bufferevent_getfd(c->bev) >= 0)
		shutdown(bufferevent_getfd(c->bev), SHUT_RDWR);
	event_active(c->resume_ev, 0, 0);
}

void
conn_wait_store(struct conn *c)
{
	if (c->state == CONN_WAIT_ENGINE)
		conn_set_state(c, CONN_WAIT_STORE);
}

void
conn_unblock(struct conn *c)
{
	if (c->state != CONN_WAIT_ENGINE && c->state != CONN_WAIT_STORE &&
	    c->state != CONN_WATCHING)
		return;
	conn_set_state(c, CONN_READY);
	event_active(c->resume_ev, 0, 0);
}

void
conn_foreach(struct server *srv, void (*fn)(struct conn *, void *),
    void *arg)
{
	struct conn	*c, *tmp;

	HASH_ITER(hh, srv->conns->by_id, c, tmp) {
		if (c->state != CONN_DEAD)
			fn(c, arg);
	}
}

void
conn_free_all(struct server *srv)
{
	struct conn	*c, *tmp;

	HASH_ITER(hh, srv->conns->by_id, c, tmp)
		conn_free(c);
}

/* --- the sweep: time limits and clients that do not read --- */

/* Why c must go now, or NULL; *warn when that is the client's fault. */
static const char *
conn_overdue(struct conn *c, uint64_t now, int *warn)
{
	struct config	*cfg = c->srv->cfg;
	size_t		 out;

	if (c->state == CONN_DEAD || c->state == CONN_CLOSING)
		return (NULL);
	if (c->out_over_ms != 0) {
		/* Over max-output: closed if nothing drained since then. */
		out = evbuffer_get_length(bufferevent_get_output(c->bev));
		if (out >= c->out_seen &&
		    now - c->out_over_ms >= CONN_SWEEP_MS) {
			*warn = 1;
			return ("its unread replies exceed max-output and it "
			    "does not read them");
		}
		if (out < c->out_seen) {
			c->out_seen = out;
			c->out_over_ms = now;
		}
	}
	if (cfg->line_timeout_ms > 0 && c->partial_ms != 0 &&
	    c->state == CONN_READY &&
	    now - c->partial_ms >= (uint64_t)cfg->line_timeout_ms)
		return ("a request line took longer than line-timeout");
	if (cfg->auth_timeout_ms > 0 && cfg->requirepass != NULL &&
	    !c->authed &&
	    now - c->created_ms >= (uint64_t)cfg->auth_timeout_ms)
		return ("it did not authenticate within auth-timeout");
	/* Idle: not waiting, holding no bound permit, no request for long. */
	if (cfg->timeout_ms > 0 && c->state == CONN_READY &&
	    (c->owner == NULL || c->owner->grants == NULL) &&
	    now - c->last_ms >= (uint64_t)cfg->timeout_ms)
		return ("it was idle for longer than timeout");
	return (NULL);
}

static void
conn_sweep_one(struct conn *c, void *arg)
{
	int		 warn = 0;
	const char	*why = conn_overdue(c, *(uint64_t *)arg, &warn);

	if (why == NULL)
		return;
	(warn ? log_warnx : log_info)("closing connection %llu from %s: %s",
	    (unsigned long long)c->id, c->peer, why);
	conn_close_now(c);
}

/* The sweep: every CONN_SWEEP_MS on the server's clock (clock.h). */
static void
conn_sweep_fire(void *arg)
{
	struct server	*srv = arg;
	uint64_t	 now = conn_now_ms(srv);

	srv->conns->sweep_timer = NULL;
	conn_foreach(srv, conn_sweep_one, &now);
	if (srv->conns->output_bytes <= (uint64_t)srv->cfg->max_output_total)
		log_repeat_end(&srv->conns->output_trim, "connections");
	/* A minute without HTTP-looking requests: say how many there were. */
	if (srv->conns->http_last_ms != 0 && now - srv->conns->http_last_ms >= 60000) {
		log_repeat_end(&srv->conns->http_seen, "connections");
		srv->conns->http_last_ms = 0;
	}
	srv->conns->sweep_timer = srv->clock.timer_add(srv->clock.ctx, CONN_SWEEP_MS,
	    conn_sweep_fire, srv);
}

void
conn_service_start(struct server *srv)
{
	srv->conns = xcalloc(1, sizeof(*srv->conns));
	TAILQ_INIT(&srv->conns->flushq);
	srv->conns->flush_ev = event_new(srv->base, -1, 0, conn_flush_cb, srv);
	if (srv->conns->flush_ev == NULL)
		fatalx("cannot set up the connections' events");
	srv->conns->sweep_timer = srv->clock.timer_add(srv->clock.ctx, CONN_SWEEP_MS,
	    conn_sweep_fire, srv);
}

void
conn_service_stop(struct server *srv)
{
	if (srv->conns->sweep_timer != NULL)
		srv->clock.timer_del(srv->clock.ctx, srv->conns->sweep_timer);
	srv->conns->sweep_timer = NULL;
	if (srv->conns->flush_ev != NULL)
		event_free(srv->conns->flush_ev);
	free(srv->conns);
	srv->conns = NULL;
}

uint32_t
conn_count(const struct server *srv)
{
	return (srv->conns->nconns);
}

uint64_t
conn_output_bytes(const struct server *srv)
{
	return (srv->conns->output_bytes);
}

/*
 * Write what c's output holds to its socket now, as far as the socket
 * takes it without waiting (shutdown: the connection is freed next).
 */
void
conn_flush_now(struct conn *c)
{
	struct evbuffer	*out = bufferevent_get_output(c->bev);
	evutil_socket_t	 fd = bufferevent_getfd(c->bev);

	if (fd < 0)
		return;
	evbuffer_unfreeze(out, 1);
	while (evbuffer_get_length(out) > 0 && evbuffer_write(out, fd) > 0)
		continue;
	evbuffer_freeze(out, 1);
}
