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
struct watch;

/* Unprocessed pipelined input a blocked connection may queue up. */
#define CONN_BACKLOG_MAX	(1024 * 1024)
/* Lines taken per turn, so one busy client cannot starve the others. */
#define CONN_LINES_PER_TURN	64

enum conn_state {
	CONN_READY,	/* taking lines */
	CONN_BLOCKED,	/* an ACQUIRE or a WATCH waits, or a write */
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
	char			 peer[64];	/* "ip:port", "[ip6]:port", "unix" */
	char			 name[PROTO_LABEL_MAX + 1]; /* NAME; "" if none */
	uint64_t		 created_ms;	/* monotonic, as timers_now_ms */
	uint64_t		 last_ms;	/* when its last line came */
	int			 last_verb;	/* enum proto_verb; -1: none yet */
	struct watch		*watch;		/* its blocked WATCH (cmd-watch.c) */
	UT_hash_handle		 hh;		/* srv->conns by id */
};

/* Adopt an accepted socket; returns NULL if it was rejected and closed. */
struct conn	*conn_accept(struct server *srv, evutil_socket_t fd,
		    const struct sockaddr *sa, int socklen);
/* Tear down at once (shutdown): owner freed, socket closed, c freed. */
void		 conn_free(struct conn *c);
/* The open connection of that id (CONN_DEAD ones excluded), or NULL. */
struct conn	*conn_find(struct server *srv, uint64_t id);
/*
 * KILL: close c as if its client had gone. Its watch and waiter are
 * dropped and its bound permits released now, so the killer's OK means it
 * is done; c closes at once, or after flushing its replies if it is the
 * killer itself (its OK must reach it).
 */
void		 conn_kill(struct conn *c, struct conn *killer);

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
