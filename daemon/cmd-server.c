/*
 * cmd-server.c: commands about the connection and the server:
 * PING, AUTH, QUIT, STATS, ROLE.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "conn.h"
#include "log.h"
#include "persist.h"
#include "proc.h"
#include "server.h"
#include "stats.h"
#include "timers.h"

enum cmd_result
cmd_ping(struct cmd_ctx *ctx)
{
	conn_reply(ctx->conn, "OK PONG");
	return (CMD_DONE);
}

/*
 * Compare in time that depends on the attempt's length only, never on
 * where the first difference is nor on the secret's length.
 */
static int
cmd_password_equal(const char *secret, const char *attempt, size_t len)
{
	size_t			i, slen = strlen(secret);
	volatile unsigned char	diff = (slen != len);

	for (i = 0; i < len; i++)
		diff |= (unsigned char)(attempt[i] ^ secret[i % slen]);
	return (diff == 0);
}

enum cmd_result
cmd_auth(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	const char	*secret = c->srv->cfg->requirepass;

	if (secret == NULL) {
		conn_reply_err(c, PERR_AUTH, "no password is configured");
		return (CMD_DONE);
	}
	if (!cmd_password_equal(secret, ctx->req->arg.p, ctx->req->arg.len)) {
		c->authed = 0;
		/* Worth an operator's eye (a guessing client?); never the text. */
		log_notice("connection %llu from %s: AUTH failed",
		    (unsigned long long)c->id, c->peer);
		conn_reply_err(c, PERR_AUTH, "invalid password");
		return (CMD_DONE);
	}
	c->authed = 1;
	conn_reply(c, "OK");
	return (CMD_DONE);
}

enum cmd_result
cmd_quit(struct cmd_ctx *ctx)
{
	conn_reply(ctx->conn, "OK");
	conn_close_after_flush(ctx->conn);
	return (CMD_DONE);
}

/*
 * ROLE: "OK role=owner|standby|single epoch=<n> owner=<addr or ->
 * owner_lease_ms=<n> reclaim_grace_ms=<n>". The two durations are what a
 * client needs to bound how long it may trust a bound permit when this
 * daemon stops answering (README, "Ownership and standby"); they are
 * shown with persistence off too, where no standby exists to act on them.
 */
enum cmd_result
cmd_role(struct cmd_ctx *ctx)
{
	const struct config	*cfg = ctx->conn->srv->cfg;
	struct persist_stats	 ps;

	persist_get_stats(ctx->conn->srv->persist, &ps);
	conn_reply(ctx->conn, "OK role=%s epoch=%llu owner=%s "
	    "owner_lease_ms=%lld reclaim_grace_ms=%lld", ps.role,
	    (unsigned long long)ps.epoch, ps.owner,
	    (long long)cfg->owner_lease_ms, (long long)cfg->reclaim_grace_ms);
	return (CMD_DONE);
}

/* A text as one key=value word: blanks become '_', empty becomes '-'. */
static void
cmd_stats_word(char *buf, size_t len, const char *text)
{
	size_t	i;

	snprintf(buf, len, "%s", text[0] != '\0' ? text : "-");
	for (i = 0; buf[i] != '\0'; i++) {
		if (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '=')
			buf[i] = '_';
	}
}

/* "commands_acquire", "errors_notheld": prefix and a lower-case name. */
static void
cmd_stats_key(char *buf, size_t len, const char *prefix, const char *name)
{
	size_t	i;

	snprintf(buf, len, "%s%s", prefix, name);
	for (i = 0; buf[i] != '\0'; i++)
		buf[i] = (char)tolower((unsigned char)buf[i]);
}

/* One STATS line per row of stats.h's table. */
static void
cmd_stats_numbers(struct conn *c, const struct stats_view *v)
{
#define STATS_LINE(key, metric, type, help, value)			\
	conn_reply(c, #key "=%llu", (unsigned long long)(value));
	STATS_FIELDS(STATS_LINE)
#undef STATS_LINE
}

/* commands_<verb> for every verb, errors_<code> for every error code. */
static void
cmd_stats_calls(struct conn *c, const struct server_stats *st)
{
	char		 key[64];
	const char	*name;
	size_t		 i;

	for (i = 0; i < VERB__COUNT; i++) {
		cmd_stats_key(key, sizeof(key), "commands_",
		    proto_verb_name((enum proto_verb)i));
		conn_reply(c, "%s=%llu", key, (unsigned long long)st->calls[i]);
	}
	for (i = 1; i < PERR__COUNT; i++) {
		if ((name = proto_err_name((enum proto_err)i)) == NULL)
			continue;
		cmd_stats_key(key, sizeof(key), "errors_", name);
		conn_reply(c, "%s=%llu", key,
		    (unsigned long long)st->errors[i]);
	}
}

/*
 * STATS: "OK k", then the words (version, role, persistence, ...), then
 * every row of stats.h's table, then commands_<verb> and errors_<code>
 * (names in lower case).
 */
enum cmd_result
cmd_stats(struct cmd_ctx *ctx)
{
	struct conn		*c = ctx->conn;
	struct stats_view	 v;
	char			 error[512];
	size_t			 i, nerrs = 0, nnumbers = 0;

	stats_view_get(&v, c->srv);
	cmd_stats_word(error, sizeof(error), v.ps.last_error);
	const struct {
		const char	*key;
		const char	*value;
	} texts[] = {
		{ "version",			PACKAGE_VERSION },
		{ "protocol",			PROTO_VERSION_STR },
		{ "role",			v.ps.role },
		{ "ownership",			v.ps.ownership },
		{ "owner",			v.ps.owner },
		{ "persistence",		v.ps.state },
		{ "persistence_mode",		v.ps.mode },
		{ "persistence_last_error",	error },
		{ "redis_durability",		v.ps.durability },
		{ "redis_master",		v.ps.master },
	};
	const size_t ntexts = sizeof(texts) / sizeof(texts[0]);

#define STATS_COUNT(key, metric, type, help, value)	nnumbers++;
	STATS_FIELDS(STATS_COUNT)
#undef STATS_COUNT
	for (i = 1; i < PERR__COUNT; i++)
		nerrs += proto_err_name((enum proto_err)i) != NULL;
	conn_reply(c, "OK %zu", ntexts + nnumbers + VERB__COUNT + nerrs);
	for (i = 0; i < ntexts; i++)
		conn_reply(c, "%s=%s", texts[i].key, texts[i].value);
	cmd_stats_numbers(c, &v);
	cmd_stats_calls(c, &c->srv->stats);
	return (CMD_DONE);
}
