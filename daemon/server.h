/*
 * server.h: the daemon's one server: listeners, connections, the engine.
 */
#ifndef SEMD_SERVER_H
#define SEMD_SERVER_H

#include <sys/queue.h>

#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "accept-guard.h"
#include "cmd.h"
#include "config.h"
#include "engine.h"
#include "log.h"
#include "proto.h"

struct conn;
struct metrics;
struct persist;
struct timers;

#define SERVER_MAX_LISTENERS	(CONFIG_MAX_BIND + 1)

/*
 * The event loop's priorities. The daemon's own work (timers: leases,
 * timeouts, the ownership lease; Redis; signals; accepting) runs at the
 * default, SERVER_PRIORITIES / 2 = 1. What clients ask for (their
 * requests, replies, metrics scrapes) runs at the lowest, 2, and the loop
 * stops running it after SERVER_CLIENT_PASS_US in one pass to look at its
 * sockets and timers again; each connection's turn is bounded too
 * (CONN_TURN_US). So no client work delays a timer or a Redis reply by
 * more than about SERVER_CLIENT_PASS_US + CONN_TURN_US + one command.
 */
#define SERVER_PRIORITIES	3
#define SERVER_CLIENT_PASS_US	2000

struct server_stats {
	uint64_t	connections_total;
	uint64_t	rejected_total;		/* maxclients, protected mode */
	uint64_t	commands_total;
	uint64_t	errors_total;		/* ERR replies */
	uint64_t	calls[VERB__COUNT];
	uint64_t	errors[PERR__COUNT];	/* ERR replies by code */
};

struct conn;
struct conn_table;
struct watch_set;
struct proto_request;

/*
 * What conn.c calls back, set by server_init (and by the unit tests), so
 * that conn.c calls no command code directly: the commands call conn.c.
 */
struct server_hooks {
	/* Run a parsed request (cmd_dispatch). */
	enum cmd_result	(*dispatch)(struct conn *c,
			    const struct proto_request *req);
	/* c is closing: drop what it waits on (cmd_watch_drop). */
	void		(*closing)(struct conn *c);
};

struct server {
	struct config		*cfg;
	struct event_base	*base;
	struct engine		*engine;
	struct timers		*timers;
	struct clock		 clock;		/* timers's, for everyone */
	struct persist		*persist;	/* always set; may be "none" */
	struct metrics		*metrics;	/* NULL: metrics-port 0 */
	struct evconnlistener	*listeners[SERVER_MAX_LISTENERS];
	size_t			 nlisteners;
	int			 unix_bound;	/* ours to unlink at exit */
	struct accept_guard	 guard;		/* the listeners' EMFILE pause */
	struct conn_table	*conns;		/* conn.c's, every connection */
	struct watch_set	*watches;	/* cmd-watch.c's, by token */
	const struct server_hooks *hooks;	/* what conn.c calls back */
	uint64_t		 start_ms;
	struct server_stats	 stats;
	int			 loaded;	/* the engine holds the state */
	int			 ready;		/* listening; READY=1 was sent */
	char			**doomed;	/* removed from the file, busy */
	size_t			 ndoomed;
	struct event		*doomed_ev;	/* retry deleting them */
};

/*
 * Engine and persistence on base; fatal on failure. The state is loaded,
 * the config semaphores created and the listeners opened from the event
 * loop, once persistence is ready (at once with persistence none).
 */
void	server_init(struct server *srv, struct config *cfg,
	    struct event_base *base);
/*
 * Close every listener, answer every waiting ACQUIRE "ERR UNAVAILABLE
 * shutting down", close every connection and free the engine.
 */
void	server_shutdown(struct server *srv);
/*
 * SIGHUP: apply the reloadable directives of next (a configuration loaded
 * whole and without error) to the running one: log level, log file,
 * syslog, password, limits; create the new semaphores, resize the
 * changed, delete the removed once idle. Logs what needs a restart.
 * next is left with the old values, for config_free.
 */
void	server_reload(struct server *srv, struct config *next);
#endif /* SEMD_SERVER_H */
