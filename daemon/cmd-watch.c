/*
 * cmd-watch.c: WATCH <sem> <token> [TIMEOUT <ms>]: block until a grant
 * ends, then answer "OK <reason>"; "TIMEOUT" if it is still held when the
 * wait runs out.
 *
 * Watchers are the server's, not the engine's: the engine only reports
 * that a grant ended and why (ENGINE_EV_RELEASED). srv->watches maps a
 * token to the list of its watchers; a connection has at most one (a WATCH
 * blocks it like a waiting ACQUIRE), which it points to, so a closing or
 * killed connection unlinks its watcher in O(1) and nothing ever answers a
 * freed connection.
 */
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>
#include <utlist.h>

#include "cmd.h"
#include "conn.h"
#include "log.h"
#include "server.h"

/* The watchers of one token. */
struct watch_set {
	uint64_t	 token;
	struct watch	*watchers;	/* utlist DL, in arrival order */
	UT_hash_handle	 hh;		/* srv->watches by token */
};

/* One blocked WATCH. */
struct watch {
	struct conn		*conn;
	struct watch_set	*set;
	struct event		*timer;		/* TIMEOUT; NULL: none */
	struct watch		*prev, *next;
};

/* Unlink w from its set (freed when empty) and from its connection. */
static void
watch_free(struct watch *w)
{
	struct server		*srv = w->conn->srv;
	struct watch_set	*set = w->set;

	DL_DELETE(set->watchers, w);
	if (set->watchers == NULL) {
		HASH_DEL(srv->watches, set);
		free(set);
	}
	if (w->timer != NULL)
		event_free(w->timer);
	w->conn->watch = NULL;
	free(w);
}

/* Answer w's connection with line and let it take its next request. */
static void
watch_answer(struct watch *w, const char *line)
{
	struct conn	*c = w->conn;

	watch_free(w);
	conn_reply(c, "%s", line);
	conn_unblock(c);
}

static void
watch_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	watch_answer(arg, "TIMEOUT");
}

enum cmd_result
cmd_watch(struct cmd_ctx *ctx)
{
	const struct proto_request	*req = ctx->req;
	struct conn			*c = ctx->conn;
	struct server			*srv = c->srv;
	struct watch_set		*set;
	struct watch			*w;
	struct timeval			 tv;

	if (engine_find_grant(srv->engine, ctx->sem, req->token) == NULL) {
		cmd_reply_engine_err(ctx, PERR_NOTHELD);
		return (CMD_DONE);
	}
	if (req->timeout_ms == 0) {
		conn_reply(c, "TIMEOUT");	/* held, and no wait asked */
		return (CMD_DONE);
	}
	HASH_FIND(hh, srv->watches, &req->token, sizeof(req->token), set);
	if (set == NULL) {
		set = xcalloc(1, sizeof(*set));
		set->token = req->token;
		HASH_ADD(hh, srv->watches, token, sizeof(set->token), set);
	}
	w = xcalloc(1, sizeof(*w));
	w->conn = c;
	w->set = set;
	DL_APPEND(set->watchers, w);
	c->watch = w;
	if (req->timeout_ms > 0) {
		tv.tv_sec = req->timeout_ms / 1000;
		tv.tv_usec = (req->timeout_ms % 1000) * 1000;
		if ((w->timer = evtimer_new(srv->base, watch_timeout_cb, w)) ==
		    NULL || evtimer_add(w->timer, &tv) != 0)
			fatalx("cannot arm a WATCH timeout");
	}
	return (CMD_WATCHING);
}

/* The word WATCH answers for a release reason. */
static const char *
watch_reason(enum engine_release_reason reason)
{
	switch (reason) {
	case RELEASE_BY_HOLDER:
		return ("released");
	case RELEASE_EXPIRED:
		return ("expired");
	case RELEASE_CLOSED:
		return ("closed");
	case RELEASE_UNCLAIMED:
		return ("unclaimed");
	case RELEASE_REVOKED:
	case RELEASE_UNDONE:	/* taken back: never acknowledged */
		break;
	}
	return ("revoked");
}

void
cmd_watch_ended(struct server *srv, uint64_t token,
    enum engine_release_reason reason)
{
	struct watch_set	*set;
	char			 line[32];

	HASH_FIND(hh, srv->watches, &token, sizeof(token), set);
	if (set == NULL)
		return;
	snprintf(line, sizeof(line), "OK %s", watch_reason(reason));
	/* The last answer frees the set. */
	while (set->watchers->next != NULL)
		watch_answer(set->watchers, line);
	watch_answer(set->watchers, line);
}

void
cmd_watch_drop(struct conn *c)
{
	if (c->watch != NULL)
		watch_free(c->watch);
}
