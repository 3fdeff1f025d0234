/*
 * accept-guard.h: listeners that pause together when accept() runs out of
 * file descriptors.
 *
 * On EMFILE, ENFILE and the like, the connection that could not be taken
 * stays in the backlog and an enabled listener is told of it again at
 * once, for ever (99% CPU, a log line each time). So every guarded
 * listener (the client port's, the metrics port's) pauses for
 * ACCEPT_GUARD_PAUSE_MS, and the error is logged once, then counted.
 */
#ifndef SEMD_ACCEPT_GUARD_H
#define SEMD_ACCEPT_GUARD_H

#include <stddef.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "log.h"

#define ACCEPT_GUARD_PAUSE_MS	100
#define ACCEPT_GUARD_MAX	16	/* listeners, at most */

struct accept_guard {
	struct event		*resume;	/* after a pause */
	struct log_repeat	 failure;	/* EMFILE, logged once */
	struct evconnlistener	*listeners[ACCEPT_GUARD_MAX];
	size_t			 n;
};

/*
 * Guard listeners of base with g (one guard per process: libevent gives
 * an accept error callback its listener's argument, which for evhttp's
 * listener is not ours, so the guard is found through a static pointer).
 */
void	accept_guard_init(struct accept_guard *g, struct event_base *base);
void	accept_guard_free(struct accept_guard *g);
/* Watch l's accept errors; undo with accept_guard_remove before freeing l. */
void	accept_guard_add(struct accept_guard *g, struct evconnlistener *l);
void	accept_guard_remove(struct accept_guard *g, struct evconnlistener *l);
/* An accept succeeded: a failure that was being counted is over. */
void	accept_guard_ok(struct accept_guard *g);

#endif /* SEMD_ACCEPT_GUARD_H */
