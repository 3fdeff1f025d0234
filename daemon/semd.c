/*
 * semd.c: main: configuration, signals, the event loop, clean shutdown.
 *
 * semd runs in the foreground (as under systemd or a supervisor) and
 * logs to stderr unless "logfile" is set. SIGINT and SIGTERM stop it
 * cleanly: listeners closed, connections dropped, memory freed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "config.h"
#include "log.h"
#include "server.h"

static void
semd_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	struct event_base	*base = arg;

	(void)what;
	log_info("received %s; shutting down",
	    sig == SIGINT ? "SIGINT" : "SIGTERM");
	event_base_loopbreak(base);
}

/* Write the pidfile atomically: a reader never sees half a number. */
static void
semd_write_pidfile(const char *path)
{
	char	 tmp[4096];
	FILE	*fp;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if ((fp = fopen(tmp, "w")) == NULL)
		fatal("pidfile %s", tmp);
	fprintf(fp, "%ld\n", (long)getpid());
	if (fclose(fp) != 0 || rename(tmp, path) != 0)
		fatal("pidfile %s", path);
}

int
main(int argc, char **argv)
{
	struct config		 cfg;
	struct server		 srv;
	struct event_base	*base;
	struct event		*sigint_ev, *sigterm_ev;
	char			 err[512];
	int			 check_only, exit_now;

	if (config_load(&cfg, argc, argv, &check_only, &exit_now, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "semd: %s\n", err);
		config_free(&cfg);
		return (1);
	}
	if (exit_now) {
		config_free(&cfg);
		return (0);
	}
	if (check_only) {
		printf("semd: configuration OK\n");
		config_free(&cfg);
		return (0);
	}
	if (log_open(cfg.logfile, (enum log_level)cfg.loglevel) != 0) {
		fprintf(stderr, "semd: logfile %s: %s\n", cfg.logfile,
		    strerror(errno));
		config_free(&cfg);
		return (1);
	}

	/* A client that vanishes mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	if ((base = event_base_new()) == NULL)
		fatalx("event_base_new");
	sigint_ev = evsignal_new(base, SIGINT, semd_signal_cb, base);
	sigterm_ev = evsignal_new(base, SIGTERM, semd_signal_cb, base);
	if (sigint_ev == NULL || sigterm_ev == NULL ||
	    evsignal_add(sigint_ev, NULL) != 0 ||
	    evsignal_add(sigterm_ev, NULL) != 0)
		fatalx("cannot install signal handlers");

	log_info("semd %s starting (pid %ld, %s)", PACKAGE_VERSION,
	    (long)getpid(), event_base_get_method(base));
	/* Jitter for reconnection backoff: instances must not align. */
	srandom((unsigned)getpid() ^ (unsigned)time(NULL));
	server_init(&srv, &cfg, base);
	if (cfg.pidfile != NULL)
		semd_write_pidfile(cfg.pidfile);

	event_base_dispatch(base);

	server_shutdown(&srv);
	if (cfg.pidfile != NULL)
		unlink(cfg.pidfile);
	event_free(sigint_ev);
	event_free(sigterm_ev);
	event_base_free(base);
	log_info("bye");
	log_close();
	config_free(&cfg);
	libevent_global_shutdown();
	return (0);
}
