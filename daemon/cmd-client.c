/*
 * cmd-client.c: commands about client connections: NAME, CLIENTS, KILL.
 *
 * They answer "who holds what": a connection may label itself, an
 * operator lists the open connections and closes one as if its client
 * had gone. The label and address of a connection also show in HOLDERS
 * and WAITERS (cmd_conn_label), and a lease keeps those of the
 * connection that acquired it (cmd-grant.c).
 */
#include <stdio.h>
#include <string.h>

#include <utlist.h>

#include "cmd.h"
#include "conn.h"
#include "server.h"
#include "timers.h"

enum cmd_result
cmd_name(struct cmd_ctx *ctx)
{
	const struct proto_word	*w = &ctx->req->arg;

	/* The parser allows 1..PROTO_LABEL_MAX bytes of the label alphabet. */
	memcpy(ctx->conn->name, w->p, w->len);
	ctx->conn->name[w->len] = '\0';
	conn_reply(ctx->conn, "OK");
	return (CMD_DONE);
}

void
cmd_conn_label(struct server *srv, uint64_t id, char *buf, size_t len)
{
	struct conn	*c;

	/* Closing ones too: their permits go when they are torn down. */
	if ((c = conn_find(srv, id)) == NULL)
		snprintf(buf, len, "name=- addr=-");
	else
		snprintf(buf, len, "name=%s addr=%s",
		    c->name[0] != '\0' ? c->name : "-", c->peer);
}

/* The bound grants c holds now (its leases belong to nobody). */
static unsigned
cmd_client_grants(const struct conn *c)
{
	const struct grant	*g;
	unsigned		 n = 0;

	if (c->owner == NULL)
		return (0);
	DL_FOREACH2(c->owner->grants, g, own_next)
		n++;
	return (n);
}

/* "acquire": the verb in lower case, as Redis shows cmd=; "-" for none. */
static void
cmd_client_verb(int verb, char *buf, size_t len)
{
	const char	*name = verb >= 0 ? proto_verb_name(verb) : NULL;
	size_t		 i;

	snprintf(buf, len, "%s", name != NULL ? name : "-");
	for (i = 0; buf[i] != '\0'; i++) {
		if (buf[i] >= 'A' && buf[i] <= 'Z')
			buf[i] = (char)(buf[i] - 'A' + 'a');
	}
}

static void
cmd_clients_count(struct conn *c, void *arg)
{
	(void)c;
	(*(unsigned *)arg)++;
}

/* One CLIENTS line about c, sent to the connection arg. */
static void
cmd_clients_line(struct conn *c, void *arg)
{
	struct conn	*to = arg;
	uint64_t	 now = clock_now(&c->srv->clock);
	int		 waiting;
	char		 verb[16];

	waiting = c->watch != NULL ||
	    (c->owner != NULL && c->owner->waiters != NULL);
	cmd_client_verb(c->last_verb, verb, sizeof(verb));
	conn_reply(to, "id=%llu addr=%s name=%s age_ms=%llu idle_ms=%llu "
	    "grants=%u waiting=%d cmd=%s", (unsigned long long)c->id, c->peer,
	    c->name[0] != '\0' ? c->name : "-",
	    (unsigned long long)(now - c->created_ms),
	    (unsigned long long)(now - c->last_ms), cmd_client_grants(c),
	    waiting, verb);
}

/*
 * CLIENTS: "OK <k>", then one line per open connection, by id (the order
 * they connected in).
 */
enum cmd_result
cmd_clients(struct cmd_ctx *ctx)
{
	struct server	*srv = ctx->conn->srv;
	unsigned	 k = 0;

	conn_foreach(srv, cmd_clients_count, &k);
	conn_reply(ctx->conn, "OK %u", k);
	conn_foreach(srv, cmd_clients_line, ctx->conn);
	return (CMD_DONE);
}

/* KILL <id>: as Redis CLIENT KILL; killing oneself answers, then closes. */
enum cmd_result
cmd_kill(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	struct conn	*victim = conn_find(c->srv, ctx->req->conn_id);

	if (victim == NULL || victim->state == CONN_DEAD) {
		conn_reply_err(c, PERR_NOCONN, "no open connection %llu",
		    (unsigned long long)ctx->req->conn_id);
		return (CMD_DONE);
	}
	conn_reply(c, "OK");
	conn_kill(victim, c);
	return (CMD_DONE);
}
