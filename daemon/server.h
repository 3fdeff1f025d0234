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
#include "log.h"
#include "proto.h"

struct conn;
struct metrics;
struct persist;
struct timers;
struct watch_set;

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
	struct log_repeat	 accept_failure; /* EMFILE, logged once */
	struct evconnlistener	*guarded[SERVER_MAX_LISTENERS + 1];
	size_t			 nguarded;	/* ...pauses these listeners */
	void			*sweep_timer;	/* conn.c's time limits */
	struct event		*flush_ev;	/* conn.c's end-of-turn writes */
	struct conn_queue	 flushq;	/* ...of these connections */
	struct conn		*conns;		/* by id (uthash) */
	uint32_t		 nconns;
	uint64_t		 output_bytes;	/* unread replies, all of them */
	struct log_repeat	 output_trim;	/* over max-output-total */
	struct log_repeat	 http_seen;	/* HTTP-looking requests */
	uint64_t		 http_last_ms;	/* ...the last one, or 0 */
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
/*
 * Watch l's accept errors as the client port's: on EMFILE, ENFILE and the
 * like every guarded listener pauses for a moment instead of spinning on
 * a connection it cannot take (metrics.c's listener uses this). Undo it
 * with server_unguard_listener before l is freed.
 */
void	server_guard_listener(struct server *srv, struct evconnlistener *l);
void	server_unguard_listener(struct server *srv, struct evconnlistener *l);

#endif /* SEMD_SERVER_H */
