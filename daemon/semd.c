/*
 * semd.c: main: configuration, daemonizing, the pidfile, signals, the
 * event loop, clean shutdown.
 *
 * semd runs in the foreground (as under systemd or a supervisor) unless
 * "daemonize yes", and logs to stderr unless "logfile" is set. Signals:
 * SIGINT and SIGTERM stop it cleanly; SIGHUP reloads the configuration
 * and reopens the logfile; SIGUSR1 reopens the logfile only. Every other
 * signal that would end the process by default is either ignored with a
 * log line or, for the crash signals, logged before semd dies of it.
 */
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "config.h"
#include "log.h"
#include "notify.h"
#include "redis-target.h"
#include "server.h"

/* Signals that end a process by default and that semd ignores, logged. */
static const int semd_ignored[] = {
	SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO, SIGPWR,
#ifdef SIGSTKFLT
	SIGSTKFLT,
#endif
};

/* Signals semd dies of, after a last log line. */
static const struct {
	int		 sig;
	const char	*name;
} semd_fatal[] = {
	{ SIGQUIT, "SIGQUIT" }, { SIGABRT, "SIGABRT" }, { SIGXCPU, "SIGXCPU" },
	{ SIGXFSZ, "SIGXFSZ" }, { SIGSYS, "SIGSYS" }, { SIGTRAP, "SIGTRAP" },
	{ SIGSEGV, "SIGSEGV" }, { SIGBUS, "SIGBUS" }, { SIGFPE, "SIGFPE" },
	{ SIGILL, "SIGILL" },
};

#define SEMD_MAX_SIGNALS	64

struct semd {
	struct config		 cfg;
	struct server		 srv;
	struct event_base	*base;
	int			 argc;
	char			**argv;		/* -c FILE made absolute */
	struct event		*sigev[SEMD_MAX_SIGNALS];
	size_t			 nsigev;
	int			 pidfd;		/* locked while we run */
};

/* "semd[PID] error: " for the crash handler, built before any crash. */
static char	semd_crash_prefix[64];

static void
semd_write_all(int fd, const char *s)
{
	size_t	len = strlen(s);
	ssize_t	n;

	while (len > 0 && (n = write(fd, s, len)) > 0) {
		s += n;
		len -= (size_t)n;
	}
}

/* A crash signal: one line, by async-signal-safe means, then die of it. */
static void
semd_crash_handler(int sig)
{
	const char	*name = "a signal";
	size_t		 i;
	int		 fd = log_fd();

	for (i = 0; i < sizeof(semd_fatal) / sizeof(semd_fatal[0]); i++) {
		if (semd_fatal[i].sig == sig)
			name = semd_fatal[i].name;
	}
	semd_write_all(fd, semd_crash_prefix);
	semd_write_all(fd, "killed by ");
	semd_write_all(fd, name);
	semd_write_all(fd, "\n");
	/* SA_RESETHAND put the default action back: die of it. */
	raise(sig);
}

/*
 * Log the crash signals before dying of them, where nothing else (the
 * sanitizers) handles them already.
 */
static void
semd_install_crash_handlers(void)
{
	struct sigaction	sa, old;
	size_t			i;

	snprintf(semd_crash_prefix, sizeof(semd_crash_prefix),
	    "semd[%ld] error: ", (long)getpid());
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = semd_crash_handler;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(semd_fatal) / sizeof(semd_fatal[0]); i++) {
		/*
		 * Keep a sanitizer's handler; but not an inherited SIG_IGN
		 * (make check run in the background ignores SIGQUIT): the
		 * signals semd documents act as documented whatever it
		 * inherited.
		 */
		if (sigaction(semd_fatal[i].sig, NULL, &old) != 0 ||
		    (old.sa_flags & SA_SIGINFO) ||
		    (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
			continue;
		sigaction(semd_fatal[i].sig, &sa, NULL);
	}
}

static const char *
semd_signame(int sig)
{
	static char	buf[32];

	switch (sig) {
	case SIGHUP: return ("SIGHUP");
	case SIGINT: return ("SIGINT");
	case SIGTERM: return ("SIGTERM");
	case SIGUSR1: return ("SIGUSR1");
	case SIGUSR2: return ("SIGUSR2");
	case SIGALRM: return ("SIGALRM");
	case SIGVTALRM: return ("SIGVTALRM");
	case SIGPROF: return ("SIGPROF");
	case SIGIO: return ("SIGIO");
	case SIGPWR: return ("SIGPWR");
	}
	if (sig >= SIGRTMIN && sig <= SIGRTMAX)
		snprintf(buf, sizeof(buf), "SIGRTMIN+%d", sig - SIGRTMIN);
	else
		snprintf(buf, sizeof(buf), "signal %d", sig);
	return (buf);
}

static void
semd_stop_cb(evutil_socket_t sig, short what, void *arg)
{
	struct semd	*d = arg;

	(void)what;
	log_info("received %s; shutting down", semd_signame(sig));
	notify_send("STOPPING=1\nSTATUS=shutting down");
	event_base_loopbreak(d->base);
}

/* Reopen the logfile; a failure keeps the old one. */
static void
semd_reopen_log(void)
{
	if (log_reopen() != 0)
		log_warn("cannot reopen logfile %s; logging on to the old "
		    "file", log_file());
}

static void
semd_usr1_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	semd_reopen_log();
	log_info("received SIGUSR1; logfile reopened");
}

/*
 * SIGHUP: reopen the log, read the configuration again as at start-up
 * (same file, same command-line overrides) and apply it, or keep the
 * running one whole if the new one has any error.
 */
static void
semd_hup_cb(evutil_socket_t sig, short what, void *arg)
{
	struct semd		*d = arg;
	struct config		 next;
	enum config_action	 action;
	char			 err[512];
	struct timespec		 ts;

	(void)sig;
	(void)what;
	semd_reopen_log();
	log_info("received SIGHUP; reloading the configuration");
	if (d->srv.ready) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		notify_send("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS="
		    "reloading", (unsigned long long)ts.tv_sec * 1000000 +
		    (unsigned long long)ts.tv_nsec / 1000);
	}
	if (config_load(&next, d->argc, d->argv, &action, err,
	    sizeof(err)) != 0 || config_check(&next, err, sizeof(err)) != 0)
		log_errorx("reload failed, the running configuration is kept: "
		    "%s", err);
	else
		server_reload(&d->srv, &next);
	config_free(&next);
	if (d->srv.ready)
		notify_send("READY=1\nSTATUS=%s", d->srv.loaded ? "serving" :
		    "standby");
}

static void
semd_ignore_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	(void)arg;
	log_warnx("received %s; ignored", semd_signame(sig));
}

static void
semd_add_signal(struct semd *d, int sig, event_callback_fn cb)
{
	struct event	*ev;

	if (d->nsigev == SEMD_MAX_SIGNALS)
		fatalx("too many signal handlers");
	if ((ev = evsignal_new(d->base, sig, cb, d)) == NULL ||
	    evsignal_add(ev, NULL) != 0)
		fatalx("cannot handle %s", semd_signame(sig));
	d->sigev[d->nsigev++] = ev;
}

static void
semd_noop_handler(int sig)
{
	(void)sig;
}

/*
 * 1 when this process may catch sig. valgrind, for one, keeps some
 * real-time signals for itself and refuses a handler for them (EINVAL,
 * while SIG_DFL is accepted): try one, then put the old one back.
 */
static int
semd_signal_catchable(int sig)
{
	struct sigaction	sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = semd_noop_handler;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old) != 0)
		return (0);
	sigaction(sig, &old, NULL);
	return (1);
}

static void
semd_signals(struct semd *d)
{
	size_t	i;
	int	sig;

	/* A client that vanishes mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	semd_add_signal(d, SIGINT, semd_stop_cb);
	semd_add_signal(d, SIGTERM, semd_stop_cb);
	semd_add_signal(d, SIGHUP, semd_hup_cb);
	semd_add_signal(d, SIGUSR1, semd_usr1_cb);
	for (i = 0; i < sizeof(semd_ignored) / sizeof(semd_ignored[0]); i++)
		semd_add_signal(d, semd_ignored[i], semd_ignore_cb);
	/* Real-time signals that are not ours to catch are left alone. */
	for (sig = SIGRTMIN; sig <= SIGRTMAX; sig++) {
		if (semd_signal_catchable(sig))
			semd_add_signal(d, sig, semd_ignore_cb);
		else
			log_debug("%s is reserved (valgrind?); not handled",
			    semd_signame(sig));
	}
	semd_install_crash_handlers();
}

/*
 * Take the pidfile: a lock held for semd's lifetime says that it runs
 * (the lock goes with the process, even on kill -9). A pidfile locked by
 * another process refuses the start. The pid is written in one write(2).
 */
static int
semd_pidfile(const char *path)
{
	char	buf[32];
	ssize_t	n;
	int	fd;

	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
		fatal("pidfile %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		if (errno != EWOULDBLOCK)
			fatal("pidfile %s: lock", path);
		n = read(fd, buf, sizeof(buf) - 1);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		fatalx("pidfile %s is held by a running semd (pid %s); not "
		    "starting", path, buf[0] != '\0' ? buf : "unknown");
	}
	snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 ||
	    pwrite(fd, buf, strlen(buf), 0) != (ssize_t)strlen(buf))
		fatal("pidfile %s", path);
	return (fd);
}

/*
 * daemonize: fork; the parent waits until the child has taken its
 * pidfile (or failed) and exits 0 (or with the child's status), so that
 * "semd" returning means semd runs. Returns the pipe end the child
 * closes once started.
 */
static int
semd_daemonize(void)
{
	char	c;
	int	fds[2], status;
	pid_t	pid;

	if (pipe(fds) != 0)
		fatal("pipe");
	if ((pid = fork()) < 0)
		fatal("fork");
	if (pid > 0) {
		close(fds[1]);
		if (read(fds[0], &c, 1) == 1)
			_exit(0);
		if (waitpid(pid, &status, 0) == pid && WIFEXITED(status))
			_exit(WEXITSTATUS(status));
		_exit(1);
	}
	close(fds[0]);
	if (setsid() < 0)
		fatal("setsid");
	if (chdir("/") != 0)
		fatal("chdir /");
	return (fds[1]);
}

/* The daemon is started: release the parent, leave the terminal. */
static void
semd_detach(int fd)
{
	int	null;

	if ((null = open("/dev/null", O_RDWR)) < 0)
		fatal("/dev/null");
	dup2(null, STDIN_FILENO);
	dup2(null, STDOUT_FILENO);
	dup2(null, STDERR_FILENO);
	if (null > STDERR_FILENO)
		close(null);
	log_detached();
	if (write(fd, "", 1) != 1)
		log_warn("cannot tell the parent process semd started");
	close(fd);
}

/* argv with the argument of -c made absolute, for reloads after chdir. */
static char **
semd_absolute_argv(int argc, char **argv)
{
	char	**out = xcalloc((size_t)argc + 1, sizeof(*out));
	char	  path[PATH_MAX];
	int	  i;

	for (i = 0; i < argc; i++) {
		if (i > 0 && strcmp(argv[i - 1], "-c") == 0 &&
		    realpath(argv[i], path) != NULL)
			out[i] = xstrdup(path);
		else
			out[i] = xstrdup(argv[i]);
	}
	return (out);
}

static int
semd_start_check(struct semd *d, int argc, char **argv)
{
	enum config_action	action;
	char			err[512];

	if (config_load(&d->cfg, argc, argv, &action, err, sizeof(err)) != 0 ||
	    (action != CONFIG_EXIT &&
	    config_check(&d->cfg, err, sizeof(err)) != 0)) {
		fprintf(stderr, "semd: %s\n", err);
		return (1);
	}
	switch (action) {
	case CONFIG_EXIT:
		return (0);
	case CONFIG_TEST:
		printf("semd: configuration OK\n");
		return (0);
	case CONFIG_DUMP:
		config_dump(&d->cfg, stdout);
		return (0);
	case CONFIG_RUN:
		break;
	}
	return (-1);
}

/*
 * The event loop. The changelist folds an EV_WRITE added and deleted in
 * one turn (store-redis.c's same-turn writes) into no epoll_ctl at all. It
 * mishandles descriptors that are dup()s of one another, which semd never
 * registers: keep it so (socket activation, say). Clients' work runs at
 * the lowest priority and for at most SERVER_CLIENT_PASS_US a pass before
 * the loop polls again, so that timers and Redis replies are never stuck
 * behind it (server.h).
 */
static struct event_base *
semd_event_base(void)
{
	struct event_config	*ecfg;
	struct event_base	*base;

	if ((ecfg = event_config_new()) == NULL)
		fatalx("event_config_new");
	event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	if (event_config_set_max_dispatch_interval(ecfg,
	    &(struct timeval){ 0, SERVER_CLIENT_PASS_US }, -1,
	    SERVER_PRIORITIES - 1) != 0)
		fatalx("event_config_set_max_dispatch_interval");
	if ((base = event_base_new_with_config(ecfg)) == NULL ||
	    event_base_priority_init(base, SERVER_PRIORITIES) != 0)
		fatalx("event_base_new");
	event_config_free(ecfg);
	return (base);
}

/*
 * Jitter for reconnection backoff: instances must not align, so the seed
 * comes from the kernel (pid ^ time repeats across daemons started
 * together).
 */
static void
semd_seed_random(void)
{
	unsigned	seed;

	if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
		seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	srandom(seed);
}

int
main(int argc, char **argv)
{
	struct semd	 d;
	size_t		 i;
	int		 rc, started_fd = -1;
	char		 err[512];

	memset(&d, 0, sizeof(d));
	d.pidfd = -1;
	if ((rc = semd_start_check(&d, argc, argv)) >= 0) {
		config_free(&d.cfg);
		return (rc);
	}
	d.argc = argc;
	d.argv = semd_absolute_argv(argc, argv);
	if (log_open(d.cfg.logfile, (enum log_level)d.cfg.loglevel) != 0) {
		fprintf(stderr, "semd: logfile %s: %s\n", d.cfg.logfile,
		    strerror(errno));
		config_free(&d.cfg);
		return (1);
	}
	if (d.cfg.syslog)
		log_open_syslog(d.cfg.syslog_ident,
		    log_facility_parse(d.cfg.syslog_facility));
	/* A master name no sentinel knows, or a replica: a typo, not an
	 * outage to wait out. */
	if (d.cfg.persistence != PERSIST_NONE &&
	    redis_target_check_start(&d.cfg, err, sizeof(err)) != 0)
		fatalx("%s", err);
	if (d.cfg.daemonize) {
		if (d.cfg.logfile == NULL && !d.cfg.syslog)
			log_warnx("daemonize yes without logfile or syslog: "
			    "the log goes to /dev/null");
		started_fd = semd_daemonize();
	}
	if (d.cfg.pidfile != NULL)
		d.pidfd = semd_pidfile(d.cfg.pidfile);

	d.base = semd_event_base();
	semd_signals(&d);
	log_info("semd %s starting (pid %ld, %s)", PACKAGE_VERSION,
	    (long)getpid(), event_base_get_method(d.base));
	semd_seed_random();
	server_init(&d.srv, &d.cfg, d.base);
	/* Listening: detach only now, so that a start-up error shows. */
	if (started_fd >= 0)
		semd_detach(started_fd);

	event_base_dispatch(d.base);

	server_shutdown(&d.srv);
	if (d.cfg.pidfile != NULL) {
		unlink(d.cfg.pidfile);
		close(d.pidfd);
	}
	for (i = 0; i < d.nsigev; i++)
		event_free(d.sigev[i]);
	event_base_free(d.base);
	log_info("bye");
	log_close();
	config_free(&d.cfg);
	for (i = 0; i < (size_t)argc; i++)
		free(d.argv[i]);
	free(d.argv);
	libevent_global_shutdown();
	return (0);
}
