/*
 * accept-guard.c: listeners that pause together on fd exhaustion (see
 * accept-guard.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/util.h>

#include "accept-guard.h"

static struct accept_guard	*accept_guard_current;

static void
accept_guard_resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct accept_guard	*g = arg;
	size_t			 i;

	(void)fd;
	(void)what;
	for (i = 0; i < g->n; i++)
		evconnlistener_enable(g->listeners[i]);
}

/*
 * accept() failed: on fd exhaustion, pause every guarded listener for a
 * moment; any other error is logged and the listener goes on.
 */
static void
accept_guard_error_cb(struct evconnlistener *l, void *arg)
{
	struct accept_guard	*g = accept_guard_current;
	struct timeval		 tv = { 0, ACCEPT_GUARD_PAUSE_MS * 1000 };
	int			 err = EVUTIL_SOCKET_ERROR();
	char			 why[128];
	size_t			 i;

	(void)l;
	(void)arg;
	if (g == NULL || (err != EMFILE && err != ENFILE && err != ENOBUFS &&
	    err != ENOMEM)) {
		log_warnx("accept: %s", evutil_socket_error_to_string(err));
		return;
	}
	/* Once, then counted: it recurs every pause while it lasts. */
	snprintf(why, sizeof(why), "%s; pausing for %d ms",
	    evutil_socket_error_to_string(err), ACCEPT_GUARD_PAUSE_MS);
	log_repeat(&g->failure, "accept", why);
	for (i = 0; i < g->n; i++)
		evconnlistener_disable(g->listeners[i]);
	evtimer_add(g->resume, &tv);
}

void
accept_guard_init(struct accept_guard *g, struct event_base *base)
{
	if ((g->resume = evtimer_new(base, accept_guard_resume_cb, g)) == NULL)
		fatalx("evtimer_new");
	g->n = 0;
	accept_guard_current = g;
}

void
accept_guard_free(struct accept_guard *g)
{
	if (g->resume != NULL)
		event_free(g->resume);
	g->resume = NULL;
	g->n = 0;
	if (accept_guard_current == g)
		accept_guard_current = NULL;
}

void
accept_guard_add(struct accept_guard *g, struct evconnlistener *l)
{
	if (g->n == ACCEPT_GUARD_MAX)
		fatalx("too many listeners");
	evconnlistener_set_error_cb(l, accept_guard_error_cb);
	g->listeners[g->n++] = l;
}

void
accept_guard_remove(struct accept_guard *g, struct evconnlistener *l)
{
	size_t	i;

	for (i = 0; i < g->n; i++) {
		if (g->listeners[i] == l) {
			g->listeners[i] = g->listeners[--g->n];
			return;
		}
	}
}

void
accept_guard_ok(struct accept_guard *g)
{
	log_repeat_end(&g->failure, "accept");
}
