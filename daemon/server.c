/*
 * server.c: listening sockets, accepting, the server's lifetime, and
 * applying a reloaded configuration (SIGHUP).
 */
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "cmd.h"
#include "conn.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "persist.h"
#include "server.h"
#include "store.h"
#include "timers.h"

/* File descriptors kept for listeners, logs and the like. */
#define SERVER_RESERVED_FDS	32
/* How long to stop accepting after EMFILE, instead of spinning. */
/* How often semaphores removed from the file are tried again. */
#define SERVER_DOOMED_RETRY_MS	1000

static void	server_doomed_cb(evutil_socket_t, short, void *);

static void
server_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int socklen, void *arg)
{
	struct server	*srv = arg;

	(void)l;
	accept_guard_ok(&srv->guard);
	conn_accept(srv, fd, sa, socklen);
}

static struct evconnlistener *
server_listen_sa(struct server *srv, struct sockaddr *sa, int salen)
{
	struct evconnlistener	*l;

	l = evconnlistener_new_bind(srv->base, server_accept_cb, srv,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    511, sa, salen);
	if (l != NULL) {
		accept_guard_add(&srv->guard, l);
		srv->listeners[srv->nlisteners++] = l;
	}
	return (l);
}

/*
 * Fill *ss with the numeric IPv4 or IPv6 address addr and port; returns
 * its length, or 0 when addr is not numeric. (evutil_parse_sockaddr_port
 * refuses port 0, which we need for "port 0".)
 */
static int
server_sockaddr(const char *addr, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in	*sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6	*sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		return ((int)sizeof(*sin));
	}
	if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		return ((int)sizeof(*sin6));
	}
	return (0);
}

/* "addr:port", or "[addr]:port" for IPv6, for the log. */
static void
server_format_addr(char *buf, size_t len, const char *addr, int port)
{
	snprintf(buf, len, strchr(addr, ':') != NULL ? "[%s]:%d" : "%s:%d",
	    addr, port);
}

/* Listen on addr:*port; with port 0, *port becomes the one picked. */
static void
server_listen_tcp(struct server *srv, const char *addr, int *port)
{
	struct sockaddr_storage	 ss;
	socklen_t		 len = sizeof(ss);
	struct evconnlistener	*l;
	char			 spec[128];
	int			 sslen;

	server_format_addr(spec, sizeof(spec), addr, *port);
	if ((sslen = server_sockaddr(addr, *port, &ss)) == 0)
		fatalx("bind %s: not a numeric IPv4 or IPv6 address", addr);
	if ((l = server_listen_sa(srv, (struct sockaddr *)&ss, sslen)) == NULL)
		fatal("cannot listen on %s", spec);
	if (getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&ss,
	    &len) != 0)
		fatal("getsockname");
	*port = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	server_format_addr(spec, sizeof(spec), addr, *port);
	log_info("listening on %s", spec);
}

static void
server_listen_unix(struct server *srv, const char *path, mode_t perm)
{
	struct sockaddr_un	sun;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		fatalx("unixsocket %s: path too long", path);
	memcpy(sun.sun_path, path, strlen(path));
	/* A stale socket from a previous run would make bind() fail. */
	if (unlink(path) != 0 && errno != ENOENT)
		fatal("unixsocket %s", path);
	if (server_listen_sa(srv, (struct sockaddr *)&sun, sizeof(sun)) == NULL)
		fatal("cannot listen on unix:%s", path);
	srv->unix_bound = 1;
	if (chmod(path, perm) != 0)
		fatal("chmod %s", path);
	log_info("listening on unix:%s", path);
}

/* maxclients cannot exceed what the file-descriptor limit allows. */
static void
server_clip_maxclients(struct config *cfg)
{
	struct rlimit	rl;
	rlim_t		want = (rlim_t)cfg->maxclients + SERVER_RESERVED_FDS;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ||
		    rl.rlim_max >= want ? want : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want) {
		cfg->maxclients = rl.rlim_cur > SERVER_RESERVED_FDS ?
		    (int64_t)(rl.rlim_cur - SERVER_RESERVED_FDS) : 1;
		log_warnx("maxclients clipped to %lld by the file-descriptor "
		    "limit (%llu); raise it (LimitNOFILE=, ulimit -n)",
		    (long long)cfg->maxclients,
		    (unsigned long long)rl.rlim_cur);
	}
}

/*
 * The engine observer: persistence records the change first, then the
 * commands answer the waiters it concerns.
 */
static void
server_engine_event(void *ctx, const struct engine_event *ev)
{
	struct server	*srv = ctx;

	if (srv->persist != NULL)
		persist_observe(srv->persist, ev);
	cmd_engine_event(srv, ev);
}

/*
 * The state is loaded: create the config file's semaphores. The file is
 * the authority for the semaphores it names: a capacity changed since by
 * RESIZE goes back to the file's, with a notice.
 */
static void
server_loaded_cb(void *arg)
{
	struct server	*srv = arg;
	struct config	*cfg = srv->cfg;
	struct sem	*s;
	size_t		 i;
	enum proto_err	 err;

	srv->loaded = 1;
	for (i = 0; i < cfg->nsems; i++) {
		err = engine_create(srv->engine, cfg->sems[i].name,
		    strlen(cfg->sems[i].name), cfg->sems[i].capacity, &s);
		if (err == PERR_EXISTS) {
			log_info("semaphore %s: capacity %u from the "
			    "configuration replaces the stored %u", s->name,
			    cfg->sems[i].capacity, s->capacity);
			engine_resize(srv->engine, s, cfg->sems[i].capacity);
		} else if (err != PERR_NONE)
			fatalx("cannot create semaphore %s (max-semaphores?)",
			    cfg->sems[i].name);
	}
}

/*
 * Open the listeners, once, and tell persistence the address clients
 * should use (advertise, else the first bind address and its port).
 */
static void
server_listen(struct server *srv)
{
	struct config	*cfg = srv->cfg;
	int		 port = (int)cfg->port;
	char		 addr[128];
	size_t		 i;

	if (srv->nlisteners > 0)
		return;
	for (i = 0; i < cfg->nbind; i++)
		server_listen_tcp(srv, cfg->bind[i], &port);
	if (cfg->unixsocket != NULL)
		server_listen_unix(srv, cfg->unixsocket,
		    (mode_t)cfg->unixsocketperm);
	if (srv->nlisteners == 0)
		fatalx("nothing to listen on: set bind or unixsocket");
	if (cfg->advertise != NULL)
		persist_set_advertise(srv->persist, cfg->advertise);
	else if (cfg->nbind > 0) {
		server_format_addr(addr, sizeof(addr), cfg->bind[0], port);
		persist_set_advertise(srv->persist, addr);
		if (cfg->persistence != PERSIST_NONE &&
		    (strcmp(cfg->bind[0], "0.0.0.0") == 0 ||
		    strcmp(cfg->bind[0], "::") == 0))
			log_warnx("advertising %s to clients that a standby "
			    "sends here, which they cannot reach: set "
			    "advertise HOST:PORT", addr);
	}
}

/* Persistence is ready: serve. */
static void
server_ready_cb(void *arg)
{
	server_listen(arg);
	log_info("ready to accept connections");
	((struct server *)arg)->ready = 1;
	notify_send("READY=1\nSTATUS=serving");
}

/* Another daemon owns the data: listen, answering ERR STANDBY. */
static void
server_standby_cb(void *arg)
{
	struct server		*srv = arg;
	struct persist_stats	 ps;

	server_listen(srv);
	persist_get_stats(srv->persist, &ps);
	log_info("ready to accept connections as a standby (owner %s, epoch "
	    "%llu)", ps.owner, (unsigned long long)ps.epoch);
	srv->ready = 1;
	notify_send("READY=1\nSTATUS=standby: %s owns the data set (epoch "
	    "%llu)", ps.owner, (unsigned long long)ps.epoch);
}

/*
 * Ownership is lost: no client may go on believing it holds a permit that
 * another daemon could grant again, so every connection goes now.
 */
static void
server_lost_cb(void *arg)
{
	struct server	*srv = arg;

	conn_free_all(srv);
	engine_clear(srv->engine);
	srv->loaded = 0;
	notify_send("STATUS=lost the data set; claiming it again");
}

void
server_init(struct server *srv, struct config *cfg, struct event_base *base)
{
	static const struct persist_hooks hooks = {
		.loaded = server_loaded_cb,
		.ready = server_ready_cb,
		.standby = server_standby_cb,
		.lost = server_lost_cb,
	};
	static const struct server_hooks conn_hooks = {
		.dispatch = cmd_dispatch,
		.closing = cmd_watch_drop,
	};
	memset(srv, 0, sizeof(*srv));
	srv->hooks = &conn_hooks;
	srv->cfg = cfg;
	srv->base = base;
	srv->timers = timers_new(base, &srv->clock);
	srv->start_ms = clock_now(&srv->clock);
	srv->engine = engine_new(&srv->clock, server_engine_event, srv,
	    (uint32_t)cfg->max_semaphores);
	srv->persist = persist_new(cfg, base, &srv->clock, srv->engine,
	    &store_redis_ops, cmd_persisted, srv);
	accept_guard_init(&srv->guard, base);
	srv->doomed_ev = evtimer_new(base, server_doomed_cb, srv);
	if (srv->doomed_ev == NULL)
		fatalx("evtimer_new");
	server_clip_maxclients(cfg);
	conn_service_start(srv);
	/*
	 * Before the state is loaded, so that /healthz can say "loading" or
	 * "standby" while the line protocol is not listening yet.
	 */
	srv->metrics = metrics_start(srv);
	if (cfg->persistence != PERSIST_NONE)
		notify_send("STATUS=loading from redis %s", cfg->redis);
	persist_start(srv->persist, &hooks, srv);
}

/*
 * Tell every client waiting in an ACQUIRE that it will not be granted,
 * and write it at once, with the replies before it: the connections are
 * closed right after.
 */
static void
server_tell_waiter(struct conn *c, void *arg)
{
	(void)arg;
	if (c->owner == NULL || c->owner->waiters == NULL)
		return;
	conn_reply_err(c, PERR_UNAVAILABLE, "shutting down");
	conn_flush_now(c);
}

static void
server_tell_waiters(struct server *srv)
{
	conn_foreach(srv, server_tell_waiter, NULL);
}

void
server_shutdown(struct server *srv)
{
	size_t		 i;

	for (i = 0; i < srv->nlisteners; i++)
		evconnlistener_free(srv->listeners[i]);
	srv->nlisteners = 0;
	metrics_stop(srv->metrics);
	srv->metrics = NULL;
	if (srv->unix_bound)
		unlink(srv->cfg->unixsocket);
	server_tell_waiters(srv);
	/*
	 * Grant nothing more: a closing connection's permits must not go to
	 * waiters that are closing too. Then persistence goes, before the
	 * connections: their bound grants must survive a clean restart.
	 */
	engine_hold_grants(srv->engine, 1);
	persist_free(srv->persist);
	srv->persist = NULL;
	conn_free_all(srv);
	conn_service_stop(srv);
	engine_free(srv->engine);
	timers_free(srv->timers);
	accept_guard_free(&srv->guard);
	event_free(srv->doomed_ev);
	for (i = 0; i < srv->ndoomed; i++)
		free(srv->doomed[i]);
	free(srv->doomed);
}

/* Is name among the semaphores of cfg? */
static int
server_cfg_has_sem(const struct config *cfg, const char *name)
{
	size_t	i;

	for (i = 0; i < cfg->nsems; i++) {
		if (strcmp(cfg->sems[i].name, name) == 0)
			return (1);
	}
	return (0);
}

/*
 * Delete the semaphores removed from the file that are idle now; keep
 * the others for a later try. A name given back to the file since, or
 * one that is gone already, is forgotten.
 */
static void
server_delete_doomed(struct server *srv)
{
	struct timeval	 tv = { SERVER_DOOMED_RETRY_MS / 1000,
			    (SERVER_DOOMED_RETRY_MS % 1000) * 1000 };
	struct sem	*s;
	size_t		 i, kept = 0;

	for (i = 0; i < srv->ndoomed; i++) {
		s = engine_find(srv->engine, srv->doomed[i],
		    strlen(srv->doomed[i]));
		if (s != NULL && srv->loaded &&
		    !server_cfg_has_sem(srv->cfg, srv->doomed[i]) &&
		    s->nholders == 0 && s->nwaiters == 0 &&
		    engine_delete(srv->engine, s) == PERR_NONE)
			log_info("semaphore %s: removed from the configuration "
			    "and idle: deleted", srv->doomed[i]);
		else if (s != NULL && srv->loaded &&
		    !server_cfg_has_sem(srv->cfg, srv->doomed[i])) {
			srv->doomed[kept++] = srv->doomed[i];
			continue;
		}
		free(srv->doomed[i]);
	}
	srv->ndoomed = kept;
	if (kept > 0 && !evtimer_pending(srv->doomed_ev, NULL))
		evtimer_add(srv->doomed_ev, &tv);
}

static void
server_doomed_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	server_delete_doomed(arg);
}

/* Semaphores after a reload: create the new, resize, doom the removed. */
static void
server_reload_sems(struct server *srv, const struct config *old)
{
	struct config	*cfg = srv->cfg;
	struct sem	*s;
	size_t		 i;
	enum proto_err	 err;

	for (i = 0; i < old->nsems; i++) {
		if (server_cfg_has_sem(cfg, old->sems[i].name))
			continue;
		srv->doomed = realloc(srv->doomed, (srv->ndoomed + 1) *
		    sizeof(*srv->doomed));
		if (srv->doomed == NULL)
			abort();
		srv->doomed[srv->ndoomed++] = xstrdup(old->sems[i].name);
		log_info("semaphore %s: removed from the configuration; "
		    "deleted once idle", old->sems[i].name);
	}
	/* Not loaded (standby, loading): the load creates them. */
	for (i = 0; srv->loaded && i < cfg->nsems; i++) {
		err = engine_create(srv->engine, cfg->sems[i].name,
		    strlen(cfg->sems[i].name), cfg->sems[i].capacity, &s);
		if (err == PERR_NONE && s->capacity == cfg->sems[i].capacity &&
		    !server_cfg_has_sem(old, s->name))
			log_info("semaphore %s: created with capacity %u",
			    s->name, s->capacity);
		else if (err == PERR_EXISTS) {
			log_info("semaphore %s: capacity %u -> %u", s->name,
			    s->capacity, cfg->sems[i].capacity);
			engine_resize(srv->engine, s, cfg->sems[i].capacity);
		} else if (err != PERR_NONE)
			log_warnx("semaphore %s: cannot create it "
			    "(max-semaphores %lld reached)", cfg->sems[i].name,
			    (long long)cfg->max_semaphores);
	}
	server_delete_doomed(srv);
}

/* config_reload's note: say what changed, and what waits for a restart. */
static void
server_reload_note(void *arg, const char *name, int applied)
{
	int	*changed = arg;

	if (applied) {
		log_notice("reload: %s changed", name);
		(*changed)++;
	} else
		log_warnx("reload: %s changed; ignored until a restart", name);
}

void
server_reload(struct server *srv, struct config *next)
{
	struct config	*cfg = srv->cfg;
	const char	*logfile = log_file();
	int		 changed = 0, facility;

	/* Then cfg has the new semaphores, next the old ones. */
	config_reload(cfg, next, server_reload_note, &changed);
	log_set_level((enum log_level)cfg->loglevel);
	if ((cfg->logfile == NULL) != (logfile == NULL) ||
	    (logfile != NULL && strcmp(cfg->logfile, logfile) != 0)) {
		if (log_open(cfg->logfile, (enum log_level)cfg->loglevel) != 0)
			log_warn("reload: logfile %s; logging on to %s",
			    cfg->logfile, logfile != NULL ? logfile : "stderr");
	}
	facility = log_facility_parse(cfg->syslog_facility);
	if (cfg->syslog)
		log_open_syslog(cfg->syslog_ident, facility);
	else
		log_close_syslog();
	engine_set_max_sems(srv->engine, (uint32_t)cfg->max_semaphores);
	server_clip_maxclients(cfg);
	server_reload_sems(srv, next);
	/* notice: a reload that raises loglevel to notice still reports. */
	log_notice("configuration reloaded (%d directive%s changed, %zu "
	    "semaphore%s in the file)", changed, changed == 1 ? "" : "s",
	    cfg->nsems, cfg->nsems == 1 ? "" : "s");
}
