/*
 * semc-conn.c: libsemc's socket. Connects to host:port or a Unix socket
 * within the connect timeout, sends request lines and reads reply lines
 * within deadlines, and tells whether an idle connection was closed by
 * semd. Blocking for the caller, non-blocking underneath (poll).
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "semc-int.h"

/* Milliseconds left before deadline_ms for poll(): -1 for no deadline. */
static int
semc_conn_left(int64_t deadline_ms)
{
	int64_t	left;

	if (deadline_ms < 0)
		return (-1);
	left = deadline_ms - semc_now_ms();
	if (left < 0)
		return (0);
	return (left > 1000000000 ? 1000000000 : (int)left);
}

/* Wait for events on fd until deadline_ms: 1 ready, 0 timed out, -1 errno. */
static int
semc_conn_wait(int fd, short events, int64_t deadline_ms)
{
	struct pollfd	pfd;
	int		rc;

	pfd.fd = fd;
	pfd.events = events;
	for (;;) {
		rc = poll(&pfd, 1, semc_conn_left(deadline_ms));
		if (rc >= 0 || errno != EINTR)
			return (rc > 0 ? 1 : rc);
	}
}

/* Connect fd to sa within the deadline: 0, or -1 with errno. */
static int
semc_conn_connect(int fd, const struct sockaddr *sa, socklen_t salen,
    int64_t deadline_ms)
{
	socklen_t	len = sizeof(int);
	int		err = 0;

	if (connect(fd, sa, salen) == 0)
		return (0);
	if (errno != EINPROGRESS)
		return (-1);
	switch (semc_conn_wait(fd, POLLOUT, deadline_ms)) {
	case 0:
		errno = ETIMEDOUT;
		return (-1);
	case -1:
		return (-1);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
		return (-1);
	if (err != 0) {
		errno = err;
		return (-1);
	}
	return (0);
}

static int
semc_conn_socket(int family)
{
	return (socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
}

static enum semc_err
semc_conn_open_unix(struct semc *c, int64_t deadline_ms)
{
	struct sockaddr_un	sun;
	int			fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(c->unix_path) >= sizeof(sun.sun_path))
		return (semc_seterr(c, SEMC_ERR_CONNECT, "%s: path too long",
		    c->unix_path));
	memcpy(sun.sun_path, c->unix_path, strlen(c->unix_path));
	if ((fd = semc_conn_socket(AF_UNIX)) == -1 ||
	    semc_conn_connect(fd, (struct sockaddr *)&sun, sizeof(sun),
	    deadline_ms) != 0) {
		if (fd != -1)
			close(fd);
		return (semc_seterr(c, SEMC_ERR_CONNECT, "unix:%s: %s",
		    c->unix_path, strerror(errno)));
	}
	c->fd = fd;
	return (SEMC_OK);
}

/* Try each address of host:port in turn, as getaddrinfo orders them. */
static enum semc_err
semc_conn_open_tcp(struct semc *c, const struct semc_addr *a,
    int64_t deadline_ms)
{
	struct addrinfo	 hints, *res, *ai;
	char		 port[16];
	int		 fd = -1, rc, on = 1, saved = 0;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", a->port);
	if ((rc = getaddrinfo(a->host, port, &hints, &res)) != 0)
		return (semc_seterr(c, SEMC_ERR_CONNECT, "%s: %s", a->host,
		    gai_strerror(rc)));
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if ((fd = semc_conn_socket(ai->ai_family)) == -1) {
			saved = errno;
			continue;
		}
		if (semc_conn_connect(fd, ai->ai_addr, ai->ai_addrlen,
		    deadline_ms) == 0)
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd == -1)
		return (semc_seterr(c, SEMC_ERR_CONNECT, "%s port %d: %s",
		    a->host, a->port, strerror(saved)));
	/* As semd does: a vanished peer is noticed, and no Nagle delay. */
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	c->fd = fd;
	return (SEMC_OK);
}

/*
 * Open a new connection to the Unix socket or addrs[cur] (the old one
 * must be closed); no AUTH here.
 */
enum semc_err
semc_conn_open(struct semc *c)
{
	int64_t	deadline_ms = -1;

	if (c->connect_timeout_ms >= 0)
		deadline_ms = semc_now_ms() + c->connect_timeout_ms;
	deadline_ms = semc_bound_clamp(c, deadline_ms);
	c->buflen = c->linelen = 0;
	if (c->unix_path != NULL)
		return (semc_conn_open_unix(c, deadline_ms));
	return (semc_conn_open_tcp(c, &c->addrs[c->cur], deadline_ms));
}

/*
 * Close the connection. What was learnt on it goes with it: whether it
 * holds the bound permits, whether ROLE was asked, a PING awaited,
 * whether semd knows request ids. The
 * bound's reference time stays: it still bounds the permits.
 */
void
semc_conn_close(struct semc *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	c->buflen = c->linelen = 0;
	c->holding = 0;
	c->role_asked = 0;
	c->ping_ms = -1;
	c->ids_refused = 0;	/* the next semd may know ID */
}

/*
 * 1 if the idle connection is unusable: not open, closed or reset by
 * semd, or carrying bytes nobody asked for (then we are out of step).
 */
int
semc_conn_broken(struct semc *c)
{
	char	byte;

	if (c->fd == -1)
		return (1);
	if (c->buflen > c->linelen)
		return (1);
	if (recv(c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == -1 &&
	    (errno == EAGAIN || errno == EWOULDBLOCK))
		return (0);
	return (1);
}

/*
 * Send req whole before deadline_ms. 0 when sent; -1 (with *errnum) when
 * it failed or timed out before the last byte went: semd never saw the
 * end of the line, so it did nothing, once the connection is closed.
 */
int
semc_conn_send(struct semc *c, const char *req, size_t len,
    int64_t deadline_ms, int *errnum)
{
	size_t	off = 0;
	ssize_t	n;

	while (off < len) {
		n = send(c->fd, req + off, len - off, MSG_NOSIGNAL);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			switch (semc_conn_wait(c->fd, POLLOUT, deadline_ms)) {
			case 1:
				continue;
			case 0:
				errno = ETIMEDOUT;
				break;
			}
		}
		*errnum = errno;
		return (-1);
	}
	return (0);
}

/* Make room for more bytes; -1 when the line is over SEMC_LINE_MAX. */
static int
semc_conn_grow(struct semc *c)
{
	char	*p;
	size_t	 size;

	if (c->buflen < c->bufsize)
		return (0);
	if (c->bufsize >= SEMC_LINE_MAX)
		return (-1);
	size = c->bufsize == 0 ? 4096 : c->bufsize * 2;
	if ((p = realloc(c->buf, size)) == NULL)
		return (-1);
	c->buf = p;
	c->bufsize = size;
	return (0);
}

/*
 * Read one reply line before deadline_ms (-1: none). *line points into
 * c's buffer, without "\r\n", until the next read. SEMC_ERR_NOREPLY when
 * the connection closed, failed or timed out first (the caller says what
 * that means for its request); SEMC_ERR_BADREPLY for an endless line.
 */
enum semc_err
semc_conn_readline(struct semc *c, int64_t deadline_ms, const char **line,
    size_t *len)
{
	char	*nl;
	ssize_t	 n;

	/* Drop the line returned last time. */
	if (c->linelen > 0) {
		memmove(c->buf, c->buf + c->linelen, c->buflen - c->linelen);
		c->buflen -= c->linelen;
		c->linelen = 0;
	}
	for (;;) {
		if (c->buflen > 0 &&
		    (nl = memchr(c->buf, '\n', c->buflen)) != NULL) {
			c->linelen = (size_t)(nl - c->buf) + 1;
			*line = c->buf;
			*len = (size_t)(nl - c->buf);
			if (*len > 0 && c->buf[*len - 1] == '\r')
				(*len)--;
			return (SEMC_OK);
		}
		if (semc_conn_grow(c) != 0)
			return (semc_seterr(c, SEMC_ERR_BADREPLY,
			    "a reply line longer than %d bytes",
			    SEMC_LINE_MAX));
		n = recv(c->fd, c->buf + c->buflen, c->bufsize - c->buflen, 0);
		if (n > 0) {
			c->buflen += (size_t)n;
			continue;
		}
		if (n == 0)
			return (semc_seterr(c, SEMC_ERR_NOREPLY,
			    "connection closed by semd"));
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return (semc_seterr(c, SEMC_ERR_NOREPLY, "%s",
			    strerror(errno)));
		switch (semc_conn_wait(c->fd, POLLIN, deadline_ms)) {
		case 0:
			return (semc_seterr(c, SEMC_ERR_NOREPLY,
			    "no reply within the I/O timeout"));
		case -1:
			return (semc_seterr(c, SEMC_ERR_NOREPLY, "poll: %s",
			    strerror(errno)));
		}
	}
}
