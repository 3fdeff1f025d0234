/*
 * metrics.c: the monitoring endpoint (see metrics.h): an evhttp server on
 * the daemon's loop, the Prometheus text exposition (format 0.0.4) and
 * the health check.
 *
 * A scrape walks the semaphores once per metric family (the format wants
 * each family's samples together); the first metrics-max-semaphores
 * semaphores, in creation order, get their own "sem" label, the rest are
 * summed under sem="_other", so a scrape stays bounded whatever the
 * number of semaphores. Histograms are kept in milliseconds by the engine
 * (histo.h) and printed in seconds, cumulative, as the format wants.
 *
 * A slow or hostile client is bounded by evhttp: a read or write that
 * stalls for METRICS_TIMEOUT_S closes it, headers are capped at
 * METRICS_MAX_HEADERS bytes, bodies at METRICS_MAX_BODY. evhttp (libevent
 * 2.1) has no cap on connections, so we keep one: evhttp asks us for each
 * new connection's bufferevent (metrics_bev_cb), and once evhttp has set
 * it up, metrics_adopt_cb either counts it, with a close callback that
 * uncounts it, or, over METRICS_MAX_CONNS, closes it at once. Accept
 * errors (EMFILE) pause this listener with the client port's (server.c).
 * Scrapes run at the loop's lowest priority, as clients' requests do.
 * requirepass does not apply: the port must stay private (README
 * "Monitoring").
 */
#include <sys/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/keyvalq_struct.h>

#include "conn.h"
#include "histo.h"
#include "log.h"
#include "metrics.h"
#include "persist.h"
#include "proc.h"
#include "owner.h"
#include "server.h"
#include "stats.h"
#include "timers.h"

#define METRICS_TIMEOUT_S	10
#define METRICS_MAX_HEADERS	8192
#define METRICS_MAX_BODY	1024
/* Connections served at once; those over it are closed when accepted. */
#define METRICS_MAX_CONNS	16
/* The label of the semaphores over metrics-max-semaphores. */
#define METRICS_OTHER		"_other"
#define METRICS_COUNTER		"counter"
#define METRICS_GAUGE		"gauge"
#define METRICS_CONTENT_TYPE	"text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct server			*srv;
	struct evhttp			*http;
	struct evhttp_bound_socket	*sock;
	struct evconnlistener		*listener;	/* sock's */
	struct bufferevent		**fresh;	/* accepted, not yet */
	size_t				 nfresh, fresh_cap; /* ...adopted */
	struct event			*adopt_ev;
	unsigned			 nconns;	/* adopted, open */
	struct log_repeat		 over_cap;
};


/* Append s with '\', '"' and newline escaped, as label values want. */
static void
metrics_escape(struct evbuffer *buf, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\\')
			evbuffer_add(buf, "\\\\", 2);
		else if (*s == '"')
			evbuffer_add(buf, "\\\"", 2);
		else if (*s == '\n')
			evbuffer_add(buf, "\\n", 2);
		else
			evbuffer_add(buf, s, 1);
	}
}

static void
metrics_family(struct evbuffer *buf, const char *name, const char *type,
    const char *help)
{
	evbuffer_add_printf(buf, "# HELP %s %s\n# TYPE %s %s\n", name, help,
	    name, type);
}

/* name{sem="..."} value */
static void
metrics_sem_sample(struct evbuffer *buf, const char *name,
    const struct sem_view *r, uint64_t value)
{
	evbuffer_add_printf(buf, "%s{sem=\"", name);
	metrics_escape(buf, r->name);
	evbuffer_add_printf(buf, "\"} %llu\n", (unsigned long long)value);
}

/* A daemon-wide sample with one label, or none when label is NULL. */
static void
metrics_sample(struct evbuffer *buf, const char *name, const char *label,
    const char *value_of_label, uint64_t value)
{
	if (label == NULL) {
		evbuffer_add_printf(buf, "%s %llu\n", name,
		    (unsigned long long)value);
		return;
	}
	evbuffer_add_printf(buf, "%s{%s=\"", name, label);
	metrics_escape(buf, value_of_label);
	evbuffer_add_printf(buf, "\"} %llu\n", (unsigned long long)value);
}

/* Milliseconds as seconds, exactly: "1.234". */
static void
metrics_seconds(char *out, size_t len, uint64_t ms)
{
	snprintf(out, len, "%llu.%03llu", (unsigned long long)(ms / 1000),
	    (unsigned long long)(ms % 1000));
}

/* A bucket bound in seconds: "0.0001", "2.5", "60". */
static void
metrics_bound(char *out, size_t len, uint32_t us)
{
	int	n;

	n = snprintf(out, len, "%u.%06u", us / 1000000, us % 1000000);
	/* Trim trailing zeros, then a trailing point. */
	while (n > 1 && out[n - 1] == '0')
		out[--n] = '\0';
	if (n > 1 && out[n - 1] == '.')
		out[--n] = '\0';
}

/*
 * A histogram line's name and labels: name_suffix{sem="...",le="..."},
 * without sem when r is NULL, without le when le is NULL (and without
 * braces when neither is there).
 */
static void
metrics_histo_head(struct evbuffer *buf, const char *name,
    const char *suffix, const struct sem_view *r, const char *le)
{
	evbuffer_add_printf(buf, "%s%s", name, suffix);
	if (r == NULL && le == NULL)
		return;
	evbuffer_add(buf, "{", 1);
	if (r != NULL) {
		evbuffer_add(buf, "sem=\"", 5);
		metrics_escape(buf, r->name);
		evbuffer_add(buf, "\"", 1);
	}
	if (le != NULL)
		evbuffer_add_printf(buf, "%sle=\"%s\"", r != NULL ? "," : "",
		    le);
	evbuffer_add(buf, "}", 1);
}

/*
 * One histogram: cumulative buckets, _sum, _count; a semaphore's, or the
 * daemon's when r is NULL.
 */
static void
metrics_histo(struct evbuffer *buf, const char *name,
    const struct sem_view *r, const struct histo *h)
{
	uint64_t	cum = 0;
	char		le[32], sum[32];
	int		i;

	for (i = 0; i <= HISTO_NBOUNDS; i++) {
		cum += h->counts[i];
		if (i < HISTO_NBOUNDS)
			metrics_bound(le, sizeof(le), histo_bound_us(i));
		else
			snprintf(le, sizeof(le), "+Inf");
		metrics_histo_head(buf, name, "_bucket", r, le);
		evbuffer_add_printf(buf, " %llu\n", (unsigned long long)cum);
	}
	metrics_seconds(sum, sizeof(sum), h->sum_ms);
	metrics_histo_head(buf, name, "_sum", r, NULL);
	evbuffer_add_printf(buf, " %s\n", sum);
	metrics_histo_head(buf, name, "_count", r, NULL);
	evbuffer_add_printf(buf, " %llu\n", (unsigned long long)h->count);
}

/* Add s to the "_other" row. */
static void
metrics_fold(struct sem_view *other, struct sem_stats *sum,
    const struct sem *s)
{
	int	i;

	other->capacity += s->capacity;
	other->used += s->used;
	other->holders += s->nholders;
	other->waiters += s->nwaiters;
	sum->grants_total += s->stats.grants_total;
	for (i = 0; i < RELEASE_NREASONS; i++)
		sum->releases_total[i] += s->stats.releases_total[i];
	sum->timeouts_total += s->stats.timeouts_total;
	histo_add(&sum->wait, &s->stats.wait);
	histo_add(&sum->handoff, &s->stats.handoff);
	histo_add(&sum->hold, &s->stats.hold);
}

/*
 * The rows of a scrape: one per semaphore up to the cap, then "_other"
 * (also for a semaphore that is itself named "_other"). *nrows is set;
 * the caller frees the rows and *sum.
 */
static struct sem_view *
metrics_rows(struct server *srv, size_t *nrows, struct sem_stats **sum)
{
	struct engine_stats	 es;
	struct sem_view	*rows;
	struct sem		*s;
	size_t			 n = 0, cap = (size_t)srv->cfg->metrics_max_semaphores;
	int			 folded = 0;
	struct sem_view	 other = { .name = METRICS_OTHER };

	engine_get_stats(srv->engine, &es);
	if ((rows = calloc((es.sems < cap ? es.sems : cap) + 1,
	    sizeof(*rows))) == NULL || (*sum = calloc(1, sizeof(**sum))) ==
	    NULL)
		fatalx("out of memory");
	for (s = engine_sem_first(srv->engine); s != NULL;
	    s = engine_sem_next(s)) {
		if (n >= cap || strcmp(s->name, METRICS_OTHER) == 0) {
			metrics_fold(&other, *sum, s);
			folded = 1;
			continue;
		}
		sem_view_get(&rows[n++], s);
	}
	if (folded) {
		other.st = *sum;
		rows[n++] = other;
	}
	*nrows = n;
	return (rows);
}

/* The per-semaphore families. */
static void
metrics_render_sems(struct server *srv, struct evbuffer *buf)
{
	struct sem_view	*rows;
	struct sem_stats	*sum;
	size_t			 n, i;
	int			 k;

	rows = metrics_rows(srv, &n, &sum);
	/* Every row of stats.h's per-semaphore table that has a metric. */
#define SEM_FAMILY(key, metric, type, help, value) do {			\
	const struct sem_view	*r;					\
									\
	if ((metric) == NULL)						\
		break;							\
	metrics_family(buf, (metric), METRICS_##type, (help));		\
	for (i = 0; i < n; i++) {					\
		r = &rows[i];						\
		metrics_sem_sample(buf, (metric), r, (value));		\
	}								\
} while (0);
	SEM_STATS_FIELDS(SEM_FAMILY)
#undef SEM_FAMILY
	metrics_family(buf, "semd_releases_total", "counter",
	    "Grants ended, by reason.");
	for (i = 0; i < n; i++) {
		for (k = 0; k < RELEASE_NREASONS; k++) {
			evbuffer_add(buf, "semd_releases_total{sem=\"", 25);
			metrics_escape(buf, rows[i].name);
			evbuffer_add_printf(buf, "\",reason=\"%s\"} %llu\n",
			    engine_release_reason_name(
			    (enum engine_release_reason)k),
			    (unsigned long long)rows[i].st->releases_total[k]);
		}
	}
	metrics_family(buf, "semd_acquire_wait_seconds", "histogram",
	    "From an acquire to its grant, granted acquires only.");
	for (i = 0; i < n; i++)
		metrics_histo(buf, "semd_acquire_wait_seconds", &rows[i],
		    &rows[i].st->wait);
	metrics_family(buf, "semd_handoff_seconds", "histogram",
	    "From the release that freed the units to a queued waiter's "
	    "grant.");
	for (i = 0; i < n; i++)
		metrics_histo(buf, "semd_handoff_seconds", &rows[i],
		    &rows[i].st->handoff);
	metrics_family(buf, "semd_hold_seconds", "histogram",
	    "From a grant to its release.");
	for (i = 0; i < n; i++)
		metrics_histo(buf, "semd_hold_seconds", &rows[i],
		    &rows[i].st->hold);
	free(rows);
	free(sum);
}

/* The daemon-wide families. */
static void
metrics_render_daemon(struct server *srv, struct evbuffer *buf)
{
	struct stats_view	 view, *v = &view;
	const char		*name;
	size_t			 i;

	stats_view_get(v, srv);
	/* Every row of stats.h's table that has a metric. */
#define DAEMON_FAMILY(key, metric, type, help, value) do {		\
	if ((metric) == NULL)						\
		break;							\
	metrics_family(buf, (metric), METRICS_##type, (help));		\
	metrics_sample(buf, (metric), NULL, NULL, (value));		\
} while (0);
	STATS_FIELDS(DAEMON_FAMILY)
#undef DAEMON_FAMILY
	metrics_family(buf, "semd_commands_total", "counter",
	    "Requests run, by verb.");
	for (i = 0; i < VERB__COUNT; i++)
		metrics_sample(buf, "semd_commands_total", "verb",
		    proto_verb_name((enum proto_verb)i),
		    stats_server(v)->calls[i]);
	metrics_family(buf, "semd_errors_total", "counter",
	    "ERR replies, by code.");
	for (i = 1; i < PERR__COUNT; i++) {
		if ((name = proto_err_name((enum proto_err)i)) != NULL)
			metrics_sample(buf, "semd_errors_total", "code", name,
			    stats_server(v)->errors[i]);
	}
	/* States: one sample per value of the enum, 1 for the current. */
	metrics_family(buf, "semd_persistence_state", "gauge",
	    "1 for the persistence state now, 0 for the others.");
	for (i = 0; i < PST__COUNT; i++)
		metrics_sample(buf, "semd_persistence_state", "state",
		    persist_state_name((enum persist_state)i),
		    v->ps.state_id == (enum persist_state)i);
	metrics_family(buf, "semd_role", "gauge",
	    "1 for this daemon's role now, 0 for the others.");
	/*
	 * waiting_for_redis: no standby, still claiming because Redis does
	 * not answer; persist.h counts it as ROLE_STANDBY, said apart here.
	 */
	for (i = 0; i < ROLE__COUNT; i++)
		metrics_sample(buf, "semd_role", "role",
		    persist_role_name((enum persist_role)i),
		    !v->ps.waiting_redis && v->ps.role_id == (enum persist_role)i);
	metrics_sample(buf, "semd_role", "role", "waiting_for_redis",
	    v->ps.waiting_redis != 0);
	metrics_family(buf, "semd_ownership_state", "gauge",
	    "1 for the ownership state machine's state now, 0 for the "
	    "others.");
	for (i = 0; i < OWN__COUNT; i++)
		metrics_sample(buf, "semd_ownership_state", "state",
		    ownership_state_name((enum own_state)i),
		    v->ps.ownership_id == (int)i);
	metrics_family(buf, "semd_redis_batch_seconds", "histogram",
	    "From sending a batch to Redis to its acknowledgement.");
	metrics_histo(buf, "semd_redis_batch_seconds", NULL, v->ps.batch_ms);
}

void
metrics_render(struct server *srv, struct evbuffer *buf)
{
	metrics_render_sems(srv, buf);
	metrics_render_daemon(srv, buf);
}

int
metrics_healthy(struct server *srv, char *buf, size_t len)
{
	struct persist_stats	ps;

	persist_get_stats(srv->persist, &ps);
	switch (ps.role_id) {
	case ROLE__COUNT:
	case ROLE_STANDBY:
		/* Not a standby: still claiming, Redis does not answer. */
		if (ps.waiting_redis) {
			snprintf(buf, len, "waiting for redis: %s",
			    ps.last_error[0] != '\0' ? ps.last_error :
			    "claiming the data set");
			return (0);
		}
		snprintf(buf, len, "standby: owner %s, epoch %llu", ps.owner,
		    (unsigned long long)ps.epoch);
		return (0);
	case ROLE_OWNER:
		if (ps.state_id == PST_DOWN) {
			snprintf(buf, len, "waiting for redis: %s",
			    ps.last_error[0] != '\0' ? ps.last_error :
			    "unreachable");
			return (0);
		}
		if (ps.state_id != PST_UP) {
			snprintf(buf, len, "loading");
			return (0);
		}
		break;
	case ROLE_SINGLE:
		break;
	}
	if (!srv->loaded || !srv->ready) {
		snprintf(buf, len, "loading");
		return (0);
	}
	snprintf(buf, len, "ok");
	return (1);
}

/* Answer code with a one-line text body. */
static void
metrics_reply_text(struct evhttp_request *req, int code, const char *reason,
    const char *text)
{
	struct evbuffer	*body;

	if ((body = evbuffer_new()) == NULL)
		fatalx("out of memory");
	evbuffer_add_printf(body, "%s\n", text);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, code, reason, body);
	evbuffer_free(body);
}

static void
metrics_request_cb(struct evhttp_request *req, void *arg)
{
	struct metrics		*m = arg;
	const struct evhttp_uri	*uri = evhttp_request_get_evhttp_uri(req);
	const char		*path = uri != NULL ? evhttp_uri_get_path(uri) :
				    NULL;
	enum evhttp_cmd_type	 cmd = evhttp_request_get_command(req);
	struct evbuffer		*body;
	char			 reason[256];
	int			 metrics;

	if (path == NULL || ((metrics = strcmp(path, "/metrics") == 0) == 0 &&
	    strcmp(path, "/healthz") != 0)) {
		metrics_reply_text(req, HTTP_NOTFOUND, "Not Found",
		    "not found: try /metrics or /healthz");
		return;
	}
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", "GET, HEAD");
		metrics_reply_text(req, 405, "Method Not Allowed",
		    "method not allowed: use GET");
		return;
	}
	if (!metrics) {
		if (metrics_healthy(m->srv, reason, sizeof(reason)))
			metrics_reply_text(req, HTTP_OK, "OK", reason);
		else
			metrics_reply_text(req, 503, "Service Unavailable",
			    reason);
		return;
	}
	if ((body = evbuffer_new()) == NULL)
		fatalx("out of memory");
	metrics_render(m->srv, body);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", METRICS_CONTENT_TYPE);
	evhttp_send_reply(req, HTTP_OK, "OK", body);
	evbuffer_free(body);
}

/* A connection counted by metrics_adopt_cb is closed. */
static void
metrics_closed_cb(struct evhttp_connection *evcon, void *arg)
{
	struct metrics	*m = arg;

	(void)evcon;
	m->nconns--;
	if (m->nconns < METRICS_MAX_CONNS)
		log_repeat_end(&m->over_cap, "metrics");
}

/* Count a new connection, or close it when METRICS_MAX_CONNS are open. */
static void
metrics_adopt(struct metrics *m, struct evhttp_connection *evcon)
{
	if (m->nconns >= METRICS_MAX_CONNS) {
		log_repeat(&m->over_cap, "metrics", "too many connections "
		    "open; closing the new ones");
		evhttp_connection_free(evcon);
		return;
	}
	m->nconns++;
	evhttp_connection_set_closecb(evcon, metrics_closed_cb, m);
}

/*
 * evhttp has set up the connections accepted since the last call (each
 * bufferevent's callback argument is now its evhttp_connection): adopt
 * each. One that evhttp has freed already has no callbacks left; our
 * reference kept it readable.
 */
static void
metrics_adopt_cb(evutil_socket_t fd, short what, void *arg)
{
	struct metrics		*m = arg;
	bufferevent_event_cb	 eventcb;
	void			*evcon;
	size_t			 i;

	(void)fd;
	(void)what;
	for (i = 0; i < m->nfresh; i++) {
		bufferevent_getcb(m->fresh[i], NULL, NULL, &eventcb, &evcon);
		if (eventcb != NULL && evcon != NULL)
			metrics_adopt(m, evcon);
		bufferevent_decref(m->fresh[i]);
	}
	m->nfresh = 0;
}

/* evhttp accepted a connection: its bufferevent, adopted next. */
static struct bufferevent *
metrics_bev_cb(struct event_base *base, void *arg)
{
	struct metrics		*m = arg;
	struct bufferevent	*bev;

	/* evhttp closes the socket itself when the options lack CLOSE. */
	if ((bev = bufferevent_socket_new(base, -1, 0)) == NULL ||
	    bufferevent_priority_set(bev,
	    event_base_get_npriorities(base) - 1) != 0)
		fatalx("metrics: cannot set up a connection");
	if (m->nfresh == m->fresh_cap) {
		m->fresh_cap = m->fresh_cap ? 2 * m->fresh_cap : 16;
		if ((m->fresh = reallocarray(m->fresh, m->fresh_cap,
		    sizeof(*m->fresh))) == NULL)
			fatalx("out of memory");
	}
	bufferevent_incref(bev);	/* until metrics_adopt_cb saw it */
	m->fresh[m->nfresh++] = bev;
	event_active(m->adopt_ev, 0, 0);
	return (bev);
}

struct metrics *
metrics_start(struct server *srv)
{
	struct config	*cfg = srv->cfg;
	struct metrics	*m;
	char		 spec[128];

	if (cfg->metrics_port == 0)
		return (NULL);
	if ((m = calloc(1, sizeof(*m))) == NULL)
		fatalx("out of memory");
	m->srv = srv;
	if ((m->http = evhttp_new(srv->base)) == NULL)
		fatalx("evhttp_new");
	/* Every method reaches the callback, which answers 405. */
	evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
	    EVHTTP_REQ_PATCH);
	evhttp_set_timeout(m->http, METRICS_TIMEOUT_S);
	evhttp_set_max_headers_size(m->http, METRICS_MAX_HEADERS);
	evhttp_set_max_body_size(m->http, METRICS_MAX_BODY);
	evhttp_set_gencb(m->http, metrics_request_cb, m);
	evhttp_set_bevcb(m->http, metrics_bev_cb, m);
	if ((m->adopt_ev = event_new(srv->base, -1, 0, metrics_adopt_cb,
	    m)) == NULL)
		fatalx("metrics: event_new");
	if (strchr(cfg->metrics_bind, ':') != NULL)
		snprintf(spec, sizeof(spec), "[%s]:%lld", cfg->metrics_bind,
		    (long long)cfg->metrics_port);
	else
		snprintf(spec, sizeof(spec), "%s:%lld", cfg->metrics_bind,
		    (long long)cfg->metrics_port);
	m->sock = evhttp_bind_socket_with_handle(m->http, cfg->metrics_bind,
	    (uint16_t)cfg->metrics_port);
	if (m->sock == NULL)
		fatal("metrics: cannot listen on %s", spec);
	m->listener = evhttp_bound_socket_get_listener(m->sock);
	accept_guard_add(&srv->guard, m->listener);
	log_info("metrics on http://%s/metrics", spec);
	return (m);
}

void
metrics_stop(struct metrics *m)
{
	if (m == NULL)
		return;
	accept_guard_remove(&m->srv->guard, m->listener);
	evhttp_free(m->http);
	metrics_adopt_cb(-1, 0, m);	/* drops our references */
	event_free(m->adopt_ev);
	free(m->fresh);
	free(m);
}
