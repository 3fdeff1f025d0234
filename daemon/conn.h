/*
 * conn.h: one client connection: framing, in-order replies, limits,
 * closing.
 *
 * Lines are taken from the input buffer one at a time and handed to the
 * command dispatcher. A request that cannot be answered yet (a queued
 * ACQUIRE, a grant being written, a WATCH) moves the connection out of
 * READY; its pipelined successors stay in the buffer until it is
 * answered, which gives the protocol's strict reply order for free.
 *
 * The state is conn.c's alone: other files say what they wait for
 * (enum cmd_result, conn_wait_store, conn_unblock) and conn.c changes
 * the state through conn_set_state(), which refuses any transition that
 * is not in its table and logs each one at debug.
 */
#ifndef SEMD_CONN_H
#define SEMD_CONN_H

#include <sys/queue.h>

#include <stdint.h>

#include <event2/bufferevent.h>
#include <uthash.h>

#include "cmd.h"
#include "proto.h"

struct server;
struct watch;

/* Unprocessed pipelined input a blocked connection may queue up. */
#define CONN_BACKLOG_MAX	(1024 * 1024)
/*
 * A connection's turn: at most this many lines and, past the first, this
 * many microseconds of running them, so one busy client cannot starve the
 * others, timers or Redis (server.h: the loop's priorities).
 */
#define CONN_LINES_PER_TURN	64
#define CONN_TURN_US		500

/* The states of a connection, X(name, text). */
#define CONN_STATES(X)							\
	X(READY,	"ready")	/* taking lines */		\
	X(WAIT_ENGINE,	"wait-engine")	/* an ACQUIRE is queued */	\
	X(WAIT_STORE,	"wait-store")	/* a grant or REFRESH is being	\
					   written (persistence sync) */ \
	X(WATCHING,	"watching")	/* a WATCH waits for its grant */ \
	X(CLOSING,	"closing")	/* flushing its last replies */	\
	X(DEAD,		"dead")		/* torn down at the next turn */

enum conn_state {
#define X(name, text) CONN_##name,
	CONN_STATES(X)
#undef X
	CONN__COUNT
};

struct conn {
	uint64_t		 id;
	struct server		*srv;
	struct bufferevent	*bev;
	struct owner		*owner;		/* its grants and waiter */
	struct event		*resume_ev;	/* take lines on a later turn */
	enum conn_state		 state;		/* conn_set_state() only */
	int			 authed;
	int			 peer_eof;	/* the peer will send no more */
	uint64_t		 partial_ms;	/* an unfinished line began; 0 */
	uint64_t		 out_over_ms;	/* output over max-output since */
	size_t			 out_seen;	/* ...and its length then */
	char			*line;		/* max-line + 2 bytes */
	char			 peer[64];	/* "ip:port", "[ip6]:port", "unix" */
	char			 name[PROTO_LABEL_MAX + 1]; /* NAME; "" if none */
	uint64_t		 created_ms;	/* monotonic, as timers_now_ms */
	uint64_t		 last_ms;	/* when its last line came */
	int			 last_verb;	/* enum proto_verb; -1: none yet */
	struct watch		*watch;		/* its blocked WATCH (cmd-watch.c) */
	int			 flush_queued;	/* on srv->flushq */
	struct evbuffer_cb_entry *out_cb;	/* counts srv->output_bytes */
	TAILQ_ENTRY(conn)	 flush_entry;
	UT_hash_handle		 hh;		/* srv->conns by id */
};

/* Adopt an accepted socket; returns NULL if it was rejected and closed. */
struct conn	*conn_accept(struct server *srv, evutil_socket_t fd,
		    const struct sockaddr *sa, int socklen);
/*
 * A connection over bev (which it owns from now on), from peer, local or
 * not (protected mode): what conn_accept builds on, and what the unit tests
 * use with bufferevent_pair_new().
 */
struct conn	*conn_new(struct server *srv, struct bufferevent *bev,
		    const char *peer);
/* Tear down at once (shutdown): owner freed, socket closed, c freed. */
void		 conn_free(struct conn *c);
/* The connection of that id (DEAD ones too, until torn down), or NULL. */
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
/* "ready", "wait-engine", ... */
const char	*conn_state_name(enum conn_state state);
/* Move c to state; a transition not in conn.c's table is a bug (fatal). */
void		 conn_set_state(struct conn *c, enum conn_state state);
/* c's granted ACQUIRE (queued until now) is being written: wait for it. */
void		 conn_wait_store(struct conn *c);
/* What c waited for is answered: take the next lines on a later turn. */
void		 conn_unblock(struct conn *c);

/* Call fn for every connection that is not being torn down. */
void		 conn_foreach(struct server *srv,
		    void (*fn)(struct conn *c, void *arg), void *arg);
/* Free every connection now (shutdown, lost ownership). */
void		 conn_free_all(struct server *srv);
/*
 * Start what conn.c runs for all of srv's connections: the end-of-turn
 * write of their replies, and the once-a-second sweep that enforces
 * timeout, line-timeout, auth-timeout and max-output; stop it.
 */
void		 conn_service_start(struct server *srv);
void		 conn_service_stop(struct server *srv);
/* How many connections are open. */
uint32_t	 conn_count(const struct server *srv);
/* The bytes of replies not yet read by their clients, all together. */
uint64_t	 conn_output_bytes(const struct server *srv);
/* Write c's pending replies to its socket now (shutdown). */
void		 conn_flush_now(struct conn *c);

#endif /* SEMD_CONN_H */
