/*
 * conn.h: one client connection: framing, in-order replies, closing.
 *
 * Lines are taken from the input buffer one at a time and handed to the
 * command dispatcher. A blocked ACQUIRE stops the taking; its pipelined
 * successors stay in the buffer until the engine answers it, which gives
 * the protocol's strict reply order for free.
 */
#ifndef SEMD_CONN_H
#define SEMD_CONN_H

#include <stdint.h>

#include <event2/bufferevent.h>
#include <uthash.h>

#include "proto.h"

struct server;

/* Unprocessed pipelined input a blocked connection may queue up. */
#define CONN_BACKLOG_MAX	(1024 * 1024)
/* Lines taken per turn, so one busy client cannot starve the others. */
#define CONN_LINES_PER_TURN	64

enum conn_state {
	CONN_READY,	/* taking lines */
	CONN_BLOCKED,	/* an ACQUIRE waits in the engine */
	CONN_CLOSING,	/* flushing its last replies, then closes */
	CONN_DEAD	/* torn down at the next loop turn */
};

struct conn {
	uint64_t		 id;
	struct server		*srv;
	struct bufferevent	*bev;
	struct owner		*owner;		/* its grants and waiter */
	struct event		*resume_ev;	/* take lines on a later turn */
	enum conn_state		 state;
	int			 authed;
	int			 peer_eof;	/* the peer will send no more */
	int			 awaiting_store; /* blocked on a write, not a wait */
	char			*line;		/* max-line + 2 bytes */
	char			 peer[64];
	UT_hash_handle		 hh;		/* srv->conns by id */
};

/* Adopt an accepted socket; returns NULL if it was rejected and closed. */
struct conn	*conn_accept(struct server *srv, evutil_socket_t fd,
		    const struct sockaddr *sa, int socklen);
/* Tear down at once (shutdown): owner freed, socket closed, c freed. */
void		 conn_free(struct conn *c);

/* Append one reply line (CRLF added). */
void		 conn_reply(struct conn *c, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
/* Append "ERR CODE text". */
void		 conn_reply_err(struct conn *c, enum proto_err code,
		    const char *fmt, ...)
		    __attribute__((format(printf, 3, 4)));
/* Flush what is queued, then close (QUIT, TOOLONG). */
void		 conn_close_after_flush(struct conn *c);
/* Drop the connection at the next loop turn, unsent replies included. */
void		 conn_close_now(struct conn *c);
/* A blocked ACQUIRE was answered: take the next lines on a later turn. */
void		 conn_unblock(struct conn *c);

#endif /* SEMD_CONN_H */
