/*
 * cmd-sem.c: commands about semaphores as a whole:
 * CREATE, RESIZE, DELETE, INFO, HOLDERS, WAITERS, LIST.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utlist.h>

#include "cmd.h"
#include "conn.h"
#include "histo.h"
#include "log.h"
#include "server.h"
#include "stats.h"

enum cmd_result
cmd_create(struct cmd_ctx *ctx)
{
	const struct proto_request	*req = ctx->req;
	struct sem			*s;
	enum proto_err			 err;

	err = engine_create(ctx->conn->srv->engine, req->sem.p, req->sem.len,
	    req->capacity, &s);
	if (err == PERR_EXISTS)
		conn_reply_err(ctx->conn, err, "semaphore '%s' exists with "
		    "capacity %u", s->name, s->capacity);
	else if (err == PERR_LIMIT)
		conn_reply_err(ctx->conn, err, "max-semaphores (%lld) reached",
		    (long long)ctx->conn->srv->cfg->max_semaphores);
	else
		conn_reply(ctx->conn, "OK");
	return (CMD_DONE);
}

enum cmd_result
cmd_resize(struct cmd_ctx *ctx)
{
	engine_resize(ctx->conn->srv->engine, ctx->sem, ctx->req->capacity);
	conn_reply(ctx->conn, "OK");
	return (CMD_DONE);
}

enum cmd_result
cmd_delete(struct cmd_ctx *ctx)
{
	enum proto_err	err;

	if ((err = engine_delete(ctx->conn->srv->engine, ctx->sem)) != PERR_NONE)
		cmd_reply_engine_err(ctx, err);
	else
		conn_reply(ctx->conn, "OK");
	return (CMD_DONE);
}

/* One INFO line's words, shared by INFO and LIST. */
#define SEM_INFO_FMT	"name=%s capacity=%u used=%llu available=%llu " \
			"holders=%u waiters=%u"
#define SEM_INFO_ARGS(s) (s)->name, (s)->capacity,			\
			(unsigned long long)(s)->used,			\
			(unsigned long long)((s)->used >= (s)->capacity ? 0 : \
			    (s)->capacity - (s)->used),			\
			(s)->nholders, (s)->nwaiters

/*
 * INFO: the LIST line, then what the histograms say: the median and 99th
 * percentile of the acquire wait (ms, interpolated in the histogram's
 * buckets), the grants ever made and the acquires answered TIMEOUT.
 */
enum cmd_result
cmd_info(struct cmd_ctx *ctx)
{
	struct sem_view	 view, *r = &view;
	char		 line[1024];
	size_t		 len;

	sem_view_get(r, ctx->sem);
	len = (size_t)snprintf(line, sizeof(line), "OK name=%s", r->name);
	/* Every row of stats.h's per-semaphore table, in its order. */
#define INFO_WORD(key, metric, type, help, value)			\
	if (len < sizeof(line))						\
		len += (size_t)snprintf(line + len, sizeof(line) - len,	\
		    " " #key "=%llu", (unsigned long long)(value));
	SEM_STATS_FIELDS(INFO_WORD)
#undef INFO_WORD
	conn_reply(ctx->conn, "%s", line);
	return (CMD_DONE);
}

/*
 * The name and address a HOLDERS line shows: those of a bound grant's
 * connection now, those a lease kept from the connection that acquired
 * it, "-" for an unowned grant (its connection was lost in a restart).
 */
static void
cmd_holder_label(struct server *srv, const struct grant *g, char *buf,
    size_t len)
{
	g = g->lead;
	if (g->owner != NULL)
		cmd_conn_label(srv, g->owner->id, buf, len);
	else
		snprintf(buf, len, "name=%s addr=%s",
		    g->holder_name != NULL ? g->holder_name : "-",
		    g->holder_addr != NULL ? g->holder_addr : "-");
}

/*
 * " multi=<k>" for a grant or waiter of k > 1 semaphores, "" for one of
 * a single semaphore (which has no multi= key).
 */
static void
cmd_multi_word(uint32_t nparts, char *buf, size_t len)
{
	if (nparts > 1)
		snprintf(buf, len, " multi=%u", nparts);
	else
		buf[0] = '\0';
}

enum cmd_result
cmd_holders(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	struct engine	*e = c->srv->engine;
	struct grant	*g;
	char		 owner[24], ttl[24], label[CMD_LABEL_MAX], multi[24];
	int64_t		 ttl_ms;

	conn_reply(c, "OK %u", ctx->sem->nholders);
	DL_FOREACH2(ctx->sem->grants, g, sem_next) {
		if (g->owner != NULL)
			snprintf(owner, sizeof(owner), "%llu",
			    (unsigned long long)g->owner->id);
		else
			snprintf(owner, sizeof(owner), "-");
		if ((ttl_ms = engine_grant_ttl_ms(e, g)) >= 0)
			snprintf(ttl, sizeof(ttl), "%lld", (long long)ttl_ms);
		else
			snprintf(ttl, sizeof(ttl), "-");
		cmd_holder_label(c->srv, g, label, sizeof(label));
		cmd_multi_word(g->lead->nparts, multi, sizeof(multi));
		conn_reply(c, "token=%llu n=%u kind=%s owner=%s ttl_ms=%s %s%s",
		    (unsigned long long)g->token, g->n,
		    engine_kind_name(g->kind), owner, ttl, label, multi);
	}
	return (CMD_DONE);
}

enum cmd_result
cmd_waiters(struct cmd_ctx *ctx)
{
	struct conn	*c = ctx->conn;
	struct waiter	*w;
	char		 label[CMD_LABEL_MAX], multi[24];

	conn_reply(c, "OK %u", ctx->sem->nwaiters);
	DL_FOREACH2(ctx->sem->queue, w, q_next) {
		cmd_conn_label(c->srv, w->owner->id, label, sizeof(label));
		cmd_multi_word(w->lead->nparts, multi, sizeof(multi));
		conn_reply(c, "n=%u waited_ms=%llu owner=%llu %s%s", w->n,
		    (unsigned long long)engine_waited_ms(c->srv->engine, w),
		    (unsigned long long)w->owner->id, label, multi);
	}
	return (CMD_DONE);
}

static int
cmd_sem_cmp(const void *a, const void *b)
{
	const struct sem	*sa = *(const struct sem *const *)a;
	const struct sem	*sb = *(const struct sem *const *)b;

	return (strcmp(sa->name, sb->name));
}

/* LIST: every semaphore's INFO line, sorted by name. */
enum cmd_result
cmd_list(struct cmd_ctx *ctx)
{
	struct conn		*c = ctx->conn;
	struct sem		*s, **all;
	struct engine_stats	 es;
	size_t			 i = 0;

	engine_get_stats(c->srv->engine, &es);
	all = xcalloc(es.sems + 1, sizeof(*all));
	for (s = engine_sem_first(c->srv->engine); s != NULL;
	    s = engine_sem_next(s))
		all[i++] = s;
	qsort(all, i, sizeof(*all), cmd_sem_cmp);
	conn_reply(c, "OK %zu", i);
	for (i = 0; i < es.sems; i++)
		conn_reply(c, SEM_INFO_FMT, SEM_INFO_ARGS(all[i]));
	free(all);
	return (CMD_DONE);
}
