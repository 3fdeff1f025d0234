/*
 * load-semd.c: semload's semd target, over semd's text protocol.
 *
 * Closed loop: ACQUIRE <sem>, hold, RELEASE <sem> <token>, think, again.
 * Pipelined (--pipeline K): K pairs in flight per connection; each pair
 * is TRY <sem> then, once granted, RELEASE <sem> <token>, and a new TRY
 * as soon as the RELEASE is answered (a TRY refused with TIMEOUT is sent
 * again). Each connection first sends PING, so "ready" means semd has
 * accepted it and answered. Replies are matched to requests in order,
 * as the protocol answers them.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "semload.h"

#define SEMD_LINE_MAX	512	/* longest reply line taken */

enum sreq_kind { SREQ_PING, SREQ_ACQUIRE, SREQ_TRY, SREQ_RELEASE };

struct sreq {
	uint64_t	 t_ns;		/* when it was sent */
	enum sreq_kind	 kind;
};

struct sconn {
	struct load		*l;
	int			 id;
	struct bufferevent	*bev;
	struct event		*timer;	/* hold and think times */
	int			 timer_release;	/* the timer sends RELEASE */
	uint64_t		 token;	/* closed loop: the held grant */
	struct sreq		*q;	/* requests sent, not answered */
	unsigned		 qhead, qlen, qcap;
};

static struct sconn		*sconns;
static struct sockaddr_storage	 semd_ss;
static socklen_t		 semd_sslen;
static char			 acquire_line[256], try_line[256];
static size_t			 acquire_len, try_len;

static void	semd_send_acquire(struct sconn *, uint64_t);

/* Resolve host:port into semd_ss; -1 after printing why. */
static int
semd_resolve(const struct load_opts *o)
{
	struct addrinfo	 hints, *ai;
	char		 port[16];
	int		 e;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(port, sizeof(port), "%d", o->port);
	if ((e = getaddrinfo(o->host, port, &hints, &ai)) != 0) {
		fprintf(stderr, "semload: %s: %s\n", o->host, gai_strerror(e));
		return (-1);
	}
	memcpy(&semd_ss, ai->ai_addr, ai->ai_addrlen);
	semd_sslen = ai->ai_addrlen;
	freeaddrinfo(ai);
	return (0);
}

/* Send one request line on a blocking socket and read its reply line
 * into reply; -1 after printing why. */
static int
semd_call(const char *req, char *reply, size_t size)
{
	size_t	 n = 0;
	ssize_t	 r;
	int	 fd;

	if ((fd = socket(semd_ss.ss_family, SOCK_STREAM, 0)) == -1 ||
	    connect(fd, (struct sockaddr *)&semd_ss, semd_sslen) == -1) {
		fprintf(stderr, "semload: connect to semd: %s\n",
		    strerror(errno));
		if (fd != -1)
			close(fd);
		return (-1);
	}
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		fprintf(stderr, "semload: write to semd: %s\n",
		    strerror(errno));
		close(fd);
		return (-1);
	}
	while (n < size - 1) {
		if ((r = read(fd, reply + n, 1)) <= 0)
			break;
		if (reply[n] == '\n')
			break;
		n++;
	}
	close(fd);
	if (n > 0 && reply[n - 1] == '\r')
		n--;
	reply[n] = '\0';
	return (0);
}

static int
semd_prepare(struct load *l)
{
	const struct load_opts	*o = &l->o;
	char			 req[512], reply[512];
	int			 i;

	if (semd_resolve(o) == -1)
		return (-1);
	if (strlen(o->sem) > 200) {
		fprintf(stderr, "semload: semaphore name too long\n");
		return (-1);
	}
	acquire_len = (size_t)snprintf(acquire_line, sizeof(acquire_line),
	    "ACQUIRE %s\r\n", o->sem);
	try_len = (size_t)snprintf(try_line, sizeof(try_line), "TRY %s\r\n",
	    o->sem);
	if (o->create) {
		snprintf(req, sizeof(req), "CREATE %s %ld\r\n", o->sem,
		    o->limit);
		if (semd_call(req, reply, sizeof(reply)) == -1)
			return (-1);
		if (strcmp(reply, "OK") != 0) {
			fprintf(stderr, "semload: CREATE %s %ld: %s\n", o->sem,
			    o->limit, reply);
			return (-1);
		}
	}
	if ((sconns = calloc((size_t)o->conns, sizeof(*sconns))) == NULL) {
		fprintf(stderr, "semload: out of memory\n");
		return (-1);
	}
	for (i = 0; i < o->conns; i++) {
		sconns[i].l = l;
		sconns[i].id = i;
		sconns[i].qcap = (unsigned)o->pipeline + 2;
		sconns[i].q = calloc(sconns[i].qcap, sizeof(struct sreq));
		if (sconns[i].q == NULL) {
			fprintf(stderr, "semload: out of memory\n");
			return (-1);
		}
	}
	return (0);
}

static void
semd_push(struct sconn *c, enum sreq_kind kind, uint64_t now)
{
	struct sreq	*r;

	if (c->qlen == c->qcap)
		load_fatal("conn %d: more requests in flight than planned",
		    c->id);
	r = &c->q[(c->qhead + c->qlen) % c->qcap];
	r->t_ns = now;
	r->kind = kind;
	c->qlen++;
}

static void
semd_send(struct sconn *c, enum sreq_kind kind, const char *line,
    size_t len, uint64_t now)
{
	if (bufferevent_write(c->bev, line, len) == -1)
		load_fatal("conn %d: bufferevent_write failed", c->id);
	semd_push(c, kind, now);
}

static void
semd_send_acquire(struct sconn *c, uint64_t now)
{
	if (c->l->phase == PHASE_DONE)
		return;
	load_attempt(c->l, 1);
	semd_send(c, SREQ_ACQUIRE, acquire_line, acquire_len, now);
}

static void
semd_send_try(struct sconn *c, uint64_t now, int first)
{
	if (c->l->phase == PHASE_DONE)
		return;
	load_attempt(c->l, first);
	semd_send(c, SREQ_TRY, try_line, try_len, now);
}

/* "RELEASE <sem> <token>\r\n", the token formatted by hand. */
static void
semd_send_release(struct sconn *c, uint64_t token, uint64_t now)
{
	char	 line[256], digits[24];
	size_t	 n, d = 0;

	do {
		digits[d++] = (char)('0' + token % 10);
		token /= 10;
	} while (token > 0);
	memcpy(line, "RELEASE ", 8);
	n = 8;
	n += (size_t)snprintf(line + n, sizeof(line) - n, "%s ", c->l->o.sem);
	while (d > 0)
		line[n++] = digits[--d];
	line[n++] = '\r';
	line[n++] = '\n';
	load_release_sent(c->l, now);
	semd_send(c, SREQ_RELEASE, line, n, now);
}

static void
semd_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct sconn	*c = arg;

	(void)fd;
	(void)what;
	if (c->timer_release)
		semd_send_release(c, c->token, load_now_ns());
	else
		semd_send_acquire(c, load_now_ns());
}

static void
semd_after(struct sconn *c, int release, double ms, uint64_t now)
{
	struct timeval	tv;

	if (ms <= 0) {
		if (release)
			semd_send_release(c, c->token, now);
		else
			semd_send_acquire(c, now);
		return;
	}
	if (c->l->phase == PHASE_DONE)
		return;
	c->timer_release = release;
	load_tv(ms, &tv);
	evtimer_add(c->timer, &tv);
}

/* The token of "OK <token> ...", or 0 when line is not that. */
static uint64_t
semd_token(const char *line)
{
	char			*end;
	unsigned long long	 v;

	if (strncmp(line, "OK ", 3) != 0)
		return (0);
	errno = 0;
	v = strtoull(line + 3, &end, 10);
	if (errno != 0 || end == line + 3 || (*end != '\0' && *end != ' '))
		return (0);
	return ((uint64_t)v);
}

static void
semd_reply(struct sconn *c, const char *line, uint64_t now)
{
	struct load	*l = c->l;
	struct sreq	 r;
	uint64_t	 token;

	if (c->qlen == 0)
		load_fatal("conn %d: reply without a request: %s", c->id, line);
	r = c->q[c->qhead];
	c->qhead = (c->qhead + 1) % c->qcap;
	c->qlen--;

	switch (r.kind) {
	case SREQ_PING:
		if (strcmp(line, "OK PONG") != 0)
			load_fatal("conn %d: PING: %s", c->id, line);
		load_ready(l);
		return;
	case SREQ_ACQUIRE:
	case SREQ_TRY:
		if (r.kind == SREQ_TRY && strcmp(line, "TIMEOUT") == 0) {
			load_refused(l, 1);
			semd_send_try(c, now, 1);
			return;
		}
		if ((token = semd_token(line)) == 0)
			load_fatal("conn %d: %s %s: %s", c->id, r.kind ==
			    SREQ_TRY ? "TRY" : "ACQUIRE", l->o.sem, line);
		load_granted(l, r.t_ns, now);
		if (r.kind == SREQ_TRY)
			semd_send_release(c, token, now);
		else {
			c->token = token;
			semd_after(c, 1, l->o.hold_ms, now);
		}
		return;
	case SREQ_RELEASE:
		if (strncmp(line, "OK", 2) != 0 ||
		    (line[2] != '\0' && line[2] != ' '))
			load_fatal("conn %d: RELEASE: %s", c->id, line);
		load_released(l, r.t_ns, now);
		if (l->o.pipeline > 0)
			semd_send_try(c, now, 1);
		else
			semd_after(c, 0, l->o.think_ms, now);
		return;
	}
}

static void
semd_read_cb(struct bufferevent *bev, void *arg)
{
	struct sconn		*c = arg;
	struct evbuffer		*in = bufferevent_get_input(bev);
	struct evbuffer_ptr	 eol;
	char			 line[SEMD_LINE_MAX];
	size_t			 eol_len, n;
	uint64_t		 now = load_now_ns();

	for (;;) {
		eol = evbuffer_search_eol(in, NULL, &eol_len,
		    EVBUFFER_EOL_CRLF);
		if (eol.pos < 0) {
			if (evbuffer_get_length(in) >= sizeof(line))
				load_fatal("conn %d: reply line too long",
				    c->id);
			return;
		}
		n = (size_t)eol.pos;
		if (n >= sizeof(line))
			load_fatal("conn %d: reply line too long", c->id);
		evbuffer_remove(in, line, n + eol_len);
		line[n] = '\0';
		semd_reply(c, line, now);
	}
}

static void
semd_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct sconn	*c = arg;
	int		 one = 1;

	if (what & BEV_EVENT_CONNECTED) {
		setsockopt(bufferevent_getfd(bev), IPPROTO_TCP, TCP_NODELAY,
		    &one, sizeof(one));
		semd_send(c, SREQ_PING, "PING\r\n", 6, load_now_ns());
		return;
	}
	if (c->l->phase == PHASE_DONE)
		return;
	load_fatal("conn %d: %s%s", c->id, (what & BEV_EVENT_EOF) ?
	    "semd closed the connection" : "connection error: ",
	    (what & BEV_EVENT_EOF) ? "" : evutil_socket_error_to_string(
	    EVUTIL_SOCKET_ERROR()));
}

static int
semd_connect(struct load *l, int i)
{
	struct sconn	*c = &sconns[i];

	c->bev = bufferevent_socket_new(l->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->bev == NULL)
		load_fatal("bufferevent_socket_new failed");
	if (l->o.hold_ms > 0 || l->o.think_ms > 0)
		c->timer = evtimer_new(l->base, semd_timer_cb, c);
	bufferevent_setcb(c->bev, semd_read_cb, NULL, semd_event_cb, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(c->bev, (struct sockaddr *)&semd_ss,
	    (int)semd_sslen) == -1)
		load_fatal("conn %d: connect: %s", i,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	return (0);
}

static void
semd_start(struct load *l)
{
	uint64_t	now = load_now_ns();
	int		i, k;

	for (i = 0; i < l->o.conns; i++) {
		if (l->o.pipeline == 0) {
			semd_send_acquire(&sconns[i], now);
			continue;
		}
		for (k = 0; k < l->o.pipeline; k++)
			semd_send_try(&sconns[i], now, 1);
	}
}

static int
semd_starved(const struct load *l)
{
	const struct sconn	*c;
	int			 i, n = 0;

	for (i = 0; i < l->o.conns; i++) {
		c = &sconns[i];
		if (c->qlen > 0 && c->q[c->qhead].kind == SREQ_ACQUIRE &&
		    c->q[c->qhead].t_ns < l->t_measure_ns)
			n++;
	}
	return (n);
}

static void
semd_stop(struct load *l)
{
	int	i;

	for (i = 0; i < l->o.conns; i++) {
		if (sconns[i].bev != NULL)
			bufferevent_free(sconns[i].bev);
		if (sconns[i].timer != NULL)
			event_free(sconns[i].timer);
		free(sconns[i].q);
	}
	free(sconns);
	sconns = NULL;
}

const struct load_ops load_semd_ops = {
	"semd", semd_prepare, semd_connect, semd_start, semd_starved,
	semd_stop
};
