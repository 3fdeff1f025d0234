/*
 * cmd.c: the command table and the dispatcher.
 *
 * Order of checks, as Redis does it: the parser has already refused
 * malformed requests (ERR PROTO); then auth (ERR AUTH); then a standby
 * refuses what only the owner may answer (ERR STANDBY); then the named
 * semaphore must exist (ERR NOSEM); only then does the handler run.
 */
#include <stdio.h>

#include "cmd.h"
#include "conn.h"
#include "server.h"

#define CMD_F_NOAUTH	0x1	/* allowed before AUTH */
#define CMD_F_SEM	0x2	/* names an existing semaphore */
#define CMD_F_STANDBY	0x4	/* served by a standby too */

struct cmd_entry {
	cmd_fn	fn;
	int	flags;
};

static const struct cmd_entry cmd_table[VERB__COUNT] = {
	[VERB_PING] =		{ cmd_ping, CMD_F_NOAUTH | CMD_F_STANDBY },
	[VERB_AUTH] =		{ cmd_auth, CMD_F_NOAUTH | CMD_F_STANDBY },
	[VERB_QUIT] =		{ cmd_quit, CMD_F_NOAUTH | CMD_F_STANDBY },
	[VERB_STATS] =		{ cmd_stats, CMD_F_STANDBY },
	[VERB_ROLE] =		{ cmd_role, CMD_F_STANDBY },
	[VERB_CREATE] =		{ cmd_create, 0 },
	[VERB_RESIZE] =		{ cmd_resize, CMD_F_SEM },
	[VERB_DELETE] =		{ cmd_delete, CMD_F_SEM },
	[VERB_INFO] =		{ cmd_info, CMD_F_SEM },
	[VERB_HOLDERS] =	{ cmd_holders, CMD_F_SEM },
	[VERB_WAITERS] =	{ cmd_waiters, CMD_F_SEM },
	[VERB_LIST] =		{ cmd_list, 0 },
	[VERB_ACQUIRE] =	{ cmd_acquire, CMD_F_SEM },
	[VERB_TRY] =		{ cmd_acquire, CMD_F_SEM },
	[VERB_RELEASE] =	{ cmd_release, CMD_F_SEM },
	[VERB_REFRESH] =	{ cmd_refresh, CMD_F_SEM },
	[VERB_ATTACH] =		{ cmd_attach, CMD_F_SEM },
	[VERB_CHECK] =		{ cmd_check, CMD_F_SEM },
	[VERB_REVOKE] =		{ cmd_revoke, CMD_F_SEM },
	[VERB_NAME] =		{ cmd_name, 0 },
	[VERB_CLIENTS] =	{ cmd_clients, 0 },
	[VERB_KILL] =		{ cmd_kill, 0 },
	[VERB_WATCH] =		{ cmd_watch, CMD_F_SEM },
	/* Its names are looked up by cmd_acquire: NOSEM for any of them. */
	[VERB_ACQUIREALL] =	{ cmd_acquire, 0 },
};

enum cmd_result
cmd_dispatch(struct conn *c, const struct proto_request *req)
{
	const struct cmd_entry	*ce = &cmd_table[req->verb];
	struct server		*srv = c->srv;
	struct cmd_ctx		 ctx = { c, req, NULL };

	srv->stats.commands_total++;
	srv->stats.calls[req->verb]++;
	if (srv->cfg->requirepass != NULL && !c->authed &&
	    !(ce->flags & CMD_F_NOAUTH)) {
		conn_reply_err(c, PERR_AUTH, "authentication required");
		return (CMD_DONE);
	}
	if (!(ce->flags & CMD_F_STANDBY) &&
	    persist_role(srv->persist) == ROLE_STANDBY) {
		cmd_reply_standby(c);
		return (CMD_DONE);
	}
	if (ce->flags & CMD_F_SEM) {
		ctx.sem = engine_find(srv->engine, req->sem.p, req->sem.len);
		if (ctx.sem == NULL) {
			conn_reply_err(c, PERR_NOSEM, "no semaphore '%.*s'",
			    (int)req->sem.len, req->sem.p);
			return (CMD_DONE);
		}
	}
	return (ce->fn(&ctx));
}

void
cmd_reply_standby(struct conn *c)
{
	struct persist_stats	ps;

	persist_get_stats(c->srv->persist, &ps);
	conn_reply_err(c, PERR_STANDBY, "owner=%s epoch=%llu this semd is a "
	    "standby; the owner serves the data", ps.owner,
	    (unsigned long long)ps.epoch);
}

void
cmd_reply_engine_err(struct cmd_ctx *ctx, enum proto_err code)
{
	const struct proto_request	*req = ctx->req;
	const char			*text = "request failed";

	switch (code) {
	case PERR_NOTHELD:
		text = "is not held (released, expired, revoked or never "
		    "granted)";
		break;
	case PERR_NOTOWNER:
		text = "is bound to another connection";
		break;
	case PERR_NOTLEASE:
		text = req->verb == VERB_ATTACH ? "is a lease, which no "
		    "connection owns" : "is bound to its connection, not leased";
		break;
	case PERR_BUSY:
		conn_reply_err(ctx->conn, code, "semaphore '%.*s' has holders "
		    "or waiters", (int)req->sem.len, req->sem.p);
		return;
	default:
		break;
	}
	conn_reply_err(ctx->conn, code, "token %llu of '%.*s' %s",
	    (unsigned long long)req->token, (int)req->sem.len, req->sem.p,
	    text);
}
