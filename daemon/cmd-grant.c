/*
 * cmd-grant.c: commands about permits: ACQUIRE, TRY, RELEASE, REFRESH,
 * ATTACH, CHECK, REVOKE; and the engine observer that answers a blocked
 * ACQUIRE once the engine grants it or its wait runs out.
 */
#include <stdio.h>

#include "cmd.h"
#include "conn.h"
#include "server.h"

/* ACQUIRE and TRY (which the parser gave timeout_ms 0). */
enum cmd_result
cmd_acquire(struct cmd_ctx *ctx)
{
	const struct proto_request	*req = ctx->req;
	struct conn			*c = ctx->conn;
	enum acquire_status		 status;
	struct grant			*g = NULL;
	enum proto_err			 err;

	err = engine_acquire(c->srv->engine, ctx->sem, c->owner, req->n,
	    req->timeout_ms, req->lease_ms, c, &status, &g);
	if (err == PERR_RANGE) {
		conn_reply_err(c, err, "n=%u exceeds the capacity %u of '%s'",
		    req->n, ctx->sem->capacity, ctx->sem->name);
		return (CMD_DONE);
	}
	switch (status) {
	case ACQUIRE_GRANTED:
		conn_reply(c, "OK %llu", (unsigned long long)g->token);
		return (CMD_DONE);
	case ACQUIRE_TIMEOUT:
		conn_reply(c, "TIMEOUT");
		return (CMD_DONE);
	case ACQUIRE_QUEUED:
		break;
	}
	return (CMD_BLOCKED);
}

enum cmd_result
cmd_release(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	enum proto_err	 err;

	err = engine_release(c->srv->engine, ctx->sem, ctx->req->token,
	    c->owner);
	if (err != PERR_NONE)
		cmd_reply_engine_err(ctx, err);
	else
		conn_reply(c, "OK");
	return (CMD_DONE);
}

enum cmd_result
cmd_refresh(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	enum proto_err	 err;

	err = engine_refresh(c->srv->engine, ctx->sem, ctx->req->token,
	    ctx->req->ms);
	if (err != PERR_NONE)
		cmd_reply_engine_err(ctx, err);
	else
		conn_reply(c, "OK %u", ctx->req->ms);
	return (CMD_DONE);
}

enum cmd_result
cmd_attach(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	enum proto_err	 err;

	err = engine_attach(c->srv->engine, ctx->sem, ctx->req->token,
	    c->owner);
	if (err != PERR_NONE)
		cmd_reply_engine_err(ctx, err);
	else
		conn_reply(c, "OK");
	return (CMD_DONE);
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
	struct conn	*c = ctx->conn;
	enum proto_err	 err;

	err = engine_revoke(c->srv->engine, ctx->sem, ctx->req->token);
	if (err != PERR_NONE)
		cmd_reply_engine_err(ctx, err);
	else
		conn_reply(c, "OK");
	return (CMD_DONE);
}

/*
 * The engine observer. A waiter's cookie is its connection: the engine
 * drops a connection's waiter before the connection is freed, so the
 * pointer is always live here.
 */
void
cmd_engine_event(void *ctx, const struct engine_event *ev)
{
	struct conn	*c = ev->cookie;

	(void)ctx;
	switch (ev->type) {
	case ENGINE_EV_GRANTED:
		if (c == NULL)
			break;
		conn_reply(c, "OK %llu", (unsigned long long)ev->grant->token);
		conn_unblock(c);
		break;
	case ENGINE_EV_WAIT_TIMEOUT:
		conn_reply(c, "TIMEOUT");
		conn_unblock(c);
		break;
	default:
		break;
	}
}
