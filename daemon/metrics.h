/*
 * metrics.h: the HTTP endpoint for monitoring (README "Monitoring"):
 * GET /metrics in the Prometheus text format 0.0.4, GET /healthz.
 *
 * It runs on the daemon's own event loop (libevent's evhttp) and reads
 * the engine, the server's counters and persistence when scraped; it
 * changes nothing. requirepass does not apply: keep it on a private
 * address.
 */
#ifndef SEMD_METRICS_H
#define SEMD_METRICS_H

struct evbuffer;
struct metrics;
struct server;

/*
 * Listen on metrics-bind:metrics-port; NULL when metrics-port is 0.
 * Fatal when it cannot listen.
 */
struct metrics	*metrics_start(struct server *srv);
/* Close the port and every scrape in progress. */
void		 metrics_stop(struct metrics *m);

/* Append the exposition of srv to buf (what GET /metrics answers). */
void		 metrics_render(struct server *srv, struct evbuffer *buf);
/*
 * 1 when srv serves grants (owner or single, loaded, listening); else 0
 * and a one-line reason in buf (what GET /healthz answers).
 */
int		 metrics_healthy(struct server *srv, char *buf, size_t len);

#endif /* SEMD_METRICS_H */
