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

/* ROLE: "OK role=owner|standby|single epoch=<n> owner=<addr or ->". */
enum cmd_result
cmd_role(struct cmd_ctx *ctx)
{
	struct persist_stats	ps;

	persist_get_stats(ctx->conn->srv->persist, &ps);
	conn_reply(ctx->conn, "OK role=%s epoch=%llu owner=%s", ps.role,
	    (unsigned long long)ps.epoch, ps.owner);
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

/*
 * STATS: "OK k", then version, persistence and the counters below, then
 * used_memory_rss, commands_<verb> for every verb and errors_<code> for
 * every error code (names in lower case).
 */
enum cmd_result
cmd_stats(struct cmd_ctx *ctx)
{
	struct conn		*c = ctx->conn;
	struct server		*srv = c->srv;
	struct engine_stats	 es;
	struct persist_stats	 ps;
	uint64_t		 uptime_ms = timers_now_ms() - srv->start_ms;
	size_t			 i;
	char			 error[512], key[64];
	const char		*name;
	size_t			 nerrs = 0;

	engine_get_stats(srv->engine, &es);
	persist_get_stats(srv->persist, &ps);
	cmd_stats_word(error, sizeof(error), ps.last_error);
	const struct {
		const char	*key;
		uint64_t	 value;
	} counters[] = {
		{ "pid",		(uint64_t)getpid() },
		{ "uptime",		uptime_ms / 1000 },
		{ "uptime_ms",		uptime_ms },
		{ "connections",	srv->nconns },
		{ "connections_total",	srv->stats.connections_total },
		{ "rejected_connections", srv->stats.rejected_total },
		{ "commands",		srv->stats.commands_total },
		{ "errors",		srv->stats.errors_total },
		{ "semaphores",		es.sems },
		{ "grants",		es.grants },
		{ "waiters",		es.waiters },
		{ "grants_total",	es.grants_total },
		{ "releases",		es.releases_total },
		{ "timeouts",		es.timeouts_total },
		{ "expired",		es.expired_total },
		{ "revoked",		es.revoked_total },
		{ "epoch",		ps.epoch },
		{ "persistence_backlog", ps.backlog },
		{ "persistence_resync",	(uint64_t)ps.resync },
		{ "persistence_batches", ps.batches },
		{ "persistence_failures", ps.failures },
	};
	const size_t ncounters = sizeof(counters) / sizeof(counters[0]);

	const struct {
		const char	*key;
		const char	*value;
	} texts[] = {
		{ "version",			PACKAGE_VERSION },
		{ "protocol",			PROTO_VERSION_STR },
		{ "role",			ps.role },
		{ "ownership",			ps.ownership },
		{ "owner",			ps.owner },
		{ "persistence",		ps.state },
		{ "persistence_mode",		ps.mode },
		{ "persistence_last_error",	error },
		{ "redis_durability",		ps.durability },
	};
	const size_t ntexts = sizeof(texts) / sizeof(texts[0]);

	for (i = 1; i < PERR__COUNT; i++)
		nerrs += proto_err_name((enum proto_err)i) != NULL;
	conn_reply(c, "OK %zu", ntexts + ncounters + 1 + VERB__COUNT + nerrs);
	for (i = 0; i < ntexts; i++)
		conn_reply(c, "%s=%s", texts[i].key, texts[i].value);
	for (i = 0; i < ncounters; i++)
		conn_reply(c, "%s=%llu", counters[i].key,
		    (unsigned long long)counters[i].value);
	conn_reply(c, "used_memory_rss=%llu",
	    (unsigned long long)proc_rss_bytes());
	for (i = 0; i < VERB__COUNT; i++) {
		cmd_stats_key(key, sizeof(key), "commands_",
		    proto_verb_name((enum proto_verb)i));
		conn_reply(c, "%s=%llu", key,
		    (unsigned long long)srv->stats.calls[i]);
	}
	for (i = 1; i < PERR__COUNT; i++) {
		if ((name = proto_err_name((enum proto_err)i)) == NULL)
			continue;
		cmd_stats_key(key, sizeof(key), "errors_", name);
		conn_reply(c, "%s=%llu", key,
		    (unsigned long long)srv->stats.errors[i]);
	}
	return (CMD_DONE);
}
