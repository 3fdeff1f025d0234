/*
 * server.h: the daemon's one server: listeners, connections, the engine.
 */
#ifndef SEMD_SERVER_H
#define SEMD_SERVER_H

#include <sys/queue.h>

#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "config.h"
#include "engine.h"
#include "proto.h"

struct conn;
struct metrics;
struct persist;
struct timers;
struct watch_set;

#define SERVER_MAX_LISTENERS	(CONFIG_MAX_BIND + 1)

struct server_stats {
	uint64_t	connections_total;
	uint64_t	rejected_total;		/* maxclients, protected mode */
	uint64_t	commands_total;
	uint64_t	errors_total;		/* ERR replies */
	uint64_t	calls[VERB__COUNT];
	uint64_t	errors[PERR__COUNT];	/* ERR replies by code */
};

struct conn;
TAILQ_HEAD(conn_queue, conn);

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
	struct event		*accept_resume;	/* after EMFILE */
	struct event		*sweep_ev;	/* conn.c's time limits */
	struct event		*flush_ev;	/* conn.c's end-of-turn writes */
	struct conn_queue	 flushq;	/* ...of these connections */
	struct conn		*conns;		/* by id (uthash) */
	uint32_t		 nconns;
	uint64_t		 next_conn_id;
	struct watch_set	*watches;	/* WATCHes by token (cmd-watch.c) */
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
