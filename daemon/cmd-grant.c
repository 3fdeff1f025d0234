/*
 * cmd-grant.c: commands about permits: ACQUIRE, TRY, ACQUIREALL, RELEASE,
 * REFRESH, ATTACH, CHECK, REVOKE (those of a multi-grant act on the whole
 * grant through any of its semaphores: the engine's rule); and the engine
 * observer that answers a blocked ACQUIRE once the engine grants it or its
 * wait runs out, and the WATCHes of a grant once it ends.
 *
 * In sync persistence a grant (and a REFRESH) is answered only once it is
 * written: the connection stays blocked and persist calls cmd_persisted().
 */
#include <stdio.h>

#include "cmd.h"
#include "conn.h"
#include "persist.h"
#include "server.h"

#define UNAVAILABLE_TEXT	"persistence is required but redis is " \
				"unreachable; nothing was granted"
/*
 * Redis did not answer the write of a grant: it was taken back here and
 * its removal is written once Redis answers again, but if Redis had
 * applied it, a daemon that takes over before that honours it (a lease
 * to its end, a bound permit for reclaim-grace). Over-reserved, never
 * over-granted; the client must not use it.
 */
#define UNKNOWN_TEXT		"redis did not confirm the grant in time; " \
				"it was withdrawn, do not use it (outcome " \
				"unknown: if redis stored it, a daemon that " \
				"takes over may hold it until its lease ends)"

/*
 * A lease outlives c: it keeps the name and address c had when it was
 * granted, for HOLDERS (and persistence). A bound grant shows its
 * connection's own, live.
 */
static void
cmd_label_lease(struct conn *c, struct grant *g)
{
	g = g->lead;
	if (g->kind == GRANT_LEASE)
		engine_grant_set_holder(g, c->name[0] != '\0' ? c->name : NULL,
		    c->peer);
}

/* The one place a grant's answer is formatted. */
static void
cmd_reply_granted(struct conn *c, uint64_t token)
{
	conn_reply(c, "OK %llu", (unsigned long long)token);
}

/* A grant for c: answer it now, or once it is written (sync mode). */
static enum cmd_result
cmd_granted(struct conn *c, uint64_t token)
{
	if (persist_defers_replies(c->srv->persist)) {
		persist_await(c->srv->persist, c->id, AWAIT_GRANT, token, 0);
		return (CMD_WAIT_STORE);
	}
	cmd_reply_granted(c, token);
	return (CMD_DONE);
}

/*
 * The request's semaphores into parts, in its order: 0, or -1 once the
 * first unknown name is answered ERR NOSEM (the dispatcher's check, for
 * each name of an ACQUIREALL).
 */
static int
cmd_acquire_parts(struct cmd_ctx *ctx, struct engine_part *parts)
{
	const struct proto_request	*req = ctx->req;
	uint32_t			 i;

	for (i = 0; i < req->nparts; i++) {
		parts[i].n = req->parts[i].n;
		parts[i].sem = i == 0 && ctx->sem != NULL ? ctx->sem :
		    engine_find(ctx->conn->srv->engine, req->parts[i].sem.p,
		    req->parts[i].sem.len);
		if (parts[i].sem == NULL) {
			conn_reply_err(ctx->conn, PERR_NOSEM, "no semaphore "
			    "'%.*s'", (int)req->parts[i].sem.len,
			    req->parts[i].sem.p);
			return (-1);
		}
	}
	return (0);
}

/* ERR RANGE for the first part of r whose n exceeds its capacity. */
static void
cmd_reply_range(struct conn *c, const struct engine_request *r)
{
	uint32_t	i;

	for (i = 0; i < r->nparts; i++) {
		if (r->parts[i].n > r->parts[i].sem->capacity)
			break;
	}
	if (i == r->nparts)
		i = 0;
	conn_reply_err(c, PERR_RANGE, "n=%u exceeds the capacity %u of '%s'",
	    r->parts[i].n, r->parts[i].sem->capacity, r->parts[i].sem->name);
}

/*
 * A repeat of a request whose lease is held: its token, once the write
 * of that lease is acknowledged in sync mode (the repeat may come before
 * the first answer), but never undone if the write fails: the first
 * request's answer does that.
 */
static enum cmd_result
cmd_repeated(struct conn *c, uint64_t token)
{
	if (persist_defers_replies(c->srv->persist)) {
		persist_await(c->srv->persist, c->id, AWAIT_REPEAT, token, 0);
		return (CMD_WAIT_STORE);
	}
	cmd_reply_granted(c, token);
	return (CMD_DONE);
}

/* ACQUIRE, TRY (which the parser gave timeout_ms 0) and ACQUIREALL. */
enum cmd_result
cmd_acquire(struct cmd_ctx *ctx)
{
	const struct proto_request	*req = ctx->req;
	struct conn			*c = ctx->conn;
	struct engine_part		 parts[PROTO_MULTI_MAX];
	struct engine_request		 r = { .owner = c->owner, .parts = parts,
					    .nparts = req->nparts,
					    .timeout_ms = req->timeout_ms,
					    .lease_ms = req->lease_ms,
					    .cookie = c };
	enum acquire_status		 status;
	struct grant			*g = NULL;
	enum proto_err			 err;

	if (cmd_acquire_parts(ctx, parts) != 0)
		return (CMD_DONE);
	if (req->id.len > 0) {
		r.id = req->id.p;
		r.id_len = req->id.len;
	}
	err = engine_acquire_req(c->srv->engine, &r, &status, &g);
	if (err == PERR_RANGE) {
		cmd_reply_range(c, &r);
		return (CMD_DONE);
	}
	if (err == PERR_EXISTS) {
		conn_reply_err(c, err, "request id '%.*s' names a lease held, "
		    "or a request waiting, with other semaphores or another n",
		    (int)req->id.len, req->id.p);
		return (CMD_DONE);
	}
	if (err == PERR_UNAVAILABLE) {
		conn_reply_err(c, err, UNAVAILABLE_TEXT);
		return (CMD_DONE);
	}
	switch (status) {
	case ACQUIRE_REPEATED:
		return (cmd_repeated(c, g->token));
	case ACQUIRE_GRANTED:
		cmd_label_lease(c, g);
		return (cmd_granted(c, g->token));
	case ACQUIRE_TIMEOUT:
		conn_reply(c, "TIMEOUT");
		return (CMD_DONE);
	case ACQUIRE_QUEUED:
		break;
	}
	return (CMD_WAIT_ENGINE);
}

/* "OK", or the engine's error for the request. */
static enum cmd_result
cmd_reply_result(struct cmd_ctx *ctx, enum proto_err err)
{
	if (err != PERR_NONE)
		cmd_reply_engine_err(ctx, err);
	else
		conn_reply(ctx->conn, "OK");
	return (CMD_DONE);
}

enum cmd_result
cmd_release(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;

	return (cmd_reply_result(ctx, engine_release(c->srv->engine, ctx->sem,
	    ctx->req->token, c->owner)));
}

enum cmd_result
cmd_refresh(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	struct persist	*p = c->srv->persist;
	enum proto_err	 err;

	/* A longer lease is a promise: like a grant, it must be written. */
	if (persist_unavailable(p)) {
		conn_reply_err(c, PERR_UNAVAILABLE, "persistence is required "
		    "but redis is unreachable; the lease was not extended");
		return (CMD_DONE);
	}
	err = engine_refresh(c->srv->engine, ctx->sem, ctx->req->token,
	    ctx->req->ms);
	if (err != PERR_NONE) {
		cmd_reply_engine_err(ctx, err);
		return (CMD_DONE);
	}
	if (persist_defers_replies(p)) {
		persist_await(p, c->id, AWAIT_REFRESH, ctx->req->token,
		    ctx->req->ms);
		return (CMD_WAIT_STORE);
	}
	conn_reply(c, "OK %u", ctx->req->ms);
	return (CMD_DONE);
}

enum cmd_result
cmd_attach(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;

	return (cmd_reply_result(ctx, engine_attach(c->srv->engine, ctx->sem,
	    ctx->req->token, c->owner)));
}

enum cmd_result
cmd_check(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	struct grant	*g;
	int64_t		 ttl_ms;

	g = engine_find_grant(c->srv->engine, ctx->sem, ctx->req->token);
	if (g == NULL) {
		cmd_reply_engine_err(ctx, PERR_NOTHELD);
		return (CMD_DONE);
	}
	if ((ttl_ms = engine_grant_ttl_ms(c->srv->engine, g)) >= 0)
		conn_reply(c, "OK n=%u kind=%s ttl_ms=%lld", g->n,
		    engine_kind_name(g->kind), (long long)ttl_ms);
	else
		conn_reply(c, "OK n=%u kind=%s ttl_ms=-", g->n,
		    engine_kind_name(g->kind));
	return (CMD_DONE);
}

enum cmd_result
cmd_revoke(struct cmd_ctx *ctx)
{
	return (cmd_reply_result(ctx, engine_revoke(ctx->conn->srv->engine,
	    ctx->sem, ctx->req->token)));
}

/*
 * The engine observer (ctx is the server). A waiter's cookie is its
 * connection: the engine drops a connection's waiter before the
 * connection is freed, so the pointer is always live here.
 */
void
cmd_engine_event(void *ctx, const struct engine_event *ev)
{
	struct conn	*c = ev->cookie;

	switch (ev->type) {
	case ENGINE_EV_GRANTED:
		if (c == NULL)
			break;
		cmd_label_lease(c, ev->grant);
		if (cmd_granted(c, ev->grant->token) == CMD_DONE)
			conn_unblock(c);
		else
			conn_wait_store(c);
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
		conn_reply(c, "TIMEOUT");
		conn_unblock(c);
		break;
	case ENGINE_EV_WAIT_REPLACED:
		conn_reply_err(c, PERR_EXISTS, "a newer request with this "
		    "request id took this one's place in the queue");
		conn_unblock(c);
		break;
	case ENGINE_EV_RELEASED:
		cmd_watch_ended(ctx, ev->grant->token, ev->reason);
		break;
	default:
		break;
	}
}

/*
 * Persistence wrote (ok) or failed to write the change behind a held-back
 * reply. The connection may be gone by now: it is looked up by id.
 */
void
cmd_persisted(void *ctx, uint64_t conn_id, enum persist_await_kind kind,
    uint64_t token, uint32_t ms, enum persist_outcome outcome)
{
	struct conn	*c;

	if ((c = conn_find(ctx, conn_id)) == NULL)
		return;
	if (outcome != PERSIST_OK)
		conn_reply_err(c, PERR_UNAVAILABLE, kind == AWAIT_REFRESH ?
		    "redis failed to store the refresh; do not trust the "
		    "lease beyond its previous end" : outcome == PERSIST_FAILED ?
		    UNAVAILABLE_TEXT : UNKNOWN_TEXT);
	else if (kind != AWAIT_REFRESH)
		cmd_reply_granted(c, token);
	else
		conn_reply(c, "OK %u", ms);
	conn_unblock(c);
}
