/*
 * cli-run.c: semd-cli run SEM -- CMD ARGS..., flock(1) across hosts.
 *
 * The permit lives as long as CMD. By default it is bound to semd-cli's
 * connection, and CMD inherits that connection's descriptor (flock's
 * child inherits the locked file the same way): semd sees the connection
 * close, and releases the permit, only once both semd-cli and CMD have
 * closed it. So killing semd-cli, even by SIGKILL, leaves CMD running and
 * the permit held until CMD ends. With --lease the permit is a lease that
 * semd-cli's lease keeper refreshes while CMD runs, and that the watcher
 * (below) keeps refreshing if semd-cli is killed, until CMD ends.
 *
 * CMD runs in a process group of its own, as under timeout(1): every
 * signal goes to the group, so what CMD started stops with it. While CMD
 * runs, semd-cli forwards the signals a supervisor sends (SIGINT SIGTERM
 * SIGHUP SIGQUIT SIGUSR1 SIGUSR2) to it, and notices at once a permit
 * lost: a watcher process blocks in WATCH on a connection of its own
 * (the keeper WATCHes a lease too), and outlives a killed semd-cli to
 * stop CMD itself if the permit is lost then, and if semd closes the holding
 * connection semd-cli reconnects and ATTACHes the permit again (semd with
 * persistence keeps it through a restart, a standby that takes over keeps
 * it too). A permit revoked, expired or refused on ATTACH is lost.
 *
 * A bound permit is also lost when its bound passes (libsemc's
 * semc_bound_keep(): semd's reclaim-grace, learnt with ROLE, after the
 * send time of the latest answered request, less a margin): semd-cli
 * PINGs on the holding connection while CMD runs, so a semd that stops
 * answering (stopped, stalled, cut off) without closing it, or stays out
 * of reach after closing it, cannot leave CMD running past the moment a
 * standby may grant the permit again. CMD then gets SIGTERM at once and
 * SIGKILL after --kill-after or half the margin, whichever comes first,
 * so that it is dead before t_s + reclaim-grace. A semd that does not
 * tell its reclaim-grace (older, or without persistence) is given
 * CLI_RUN_UNBOUNDED_MS out of reach.
 *
 * Several semaphores (run -s gpu:1 -s db:2) are one grant of ACQUIREALL,
 * with one token: everything above (RELEASE, REFRESH, WATCH, ATTACH)
 * names it through its first semaphore and acts on the whole grant.
 *
 * On a loss CMD gets SIGTERM, SIGKILL --kill-after later (--on-loss
 * ignore: it goes on), and run exits 76. Otherwise the permit is released
 * when CMD ends, and run exits with CMD's status, 128 + N if a signal N
 * killed it.
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "proto.h"

#define CLI_RUN_RETRY_MS	1000	/* between reconnects */
/*
 * Out of reach this long, a permit without a bound is lost: the default
 * reclaim-grace (10 s) less its margin (2 s), as if semd had told it.
 */
#define CLI_RUN_UNBOUNDED_MS	8000
#define CLI_RUN_KILL_AFTER_MS	10000	/* SIGTERM, then SIGKILL */

/* How the watcher process ends (its exit status). */
#define CLI_WATCH_ENDED		10	/* + enum semc_watch_reason */
#define CLI_WATCH_NOTHELD	30	/* ERR NOTHELD or NOSEM */
#define CLI_WATCH_UNKNOWN	31	/* semd does not know WATCH (1.0) */

extern char	**environ;

static const int cli_run_forwarded[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2
};
#define CLI_RUN_NSIGS	(sizeof(cli_run_forwarded) / sizeof(int))

static int		cli_run_pipe[2] = { -1, -1 };
static struct sigaction	cli_run_saved[CLI_RUN_NSIGS + 1];

/* One run: the permit, CMD, and how the permit is watched. */
struct cli_run {
	struct cli		*cli;
	const struct cli_args	*a;
	const char		*sem;
	uint64_t		 token;
	char			 label[PROTO_LABEL_MAX + 1];
	int			 lease;		/* a lease, kept by keeper */
	struct semc_keeper	*keeper;
	pid_t			 pid;		/* CMD */
	pid_t			 watcher;	/* -1: none */
	int64_t			 watcher_next_ms; /* may start it again */
	int			 watch_unknown;	/* semd 1.0: no WATCH */
	int			 broken;	/* holding connection closed */
	int64_t			 broken_ms;	/* since when */
	int64_t			 keep_ms;	/* semc_bound_keep due; -1 */
	int64_t			 margin_ms;	/* the bound's margin; -1 */
	int			 warned;
	int			 lost;
	int64_t			 kill_ms;	/* SIGKILL due; -1: none */
	char			*vars[4];	/* SEMD_SEM=.. SEMD_TOKEN=.. */
};

void
cli_run_defaults(struct cli_args *a)
{
	a->run.conflict_exit = CLI_EXIT_TEMPFAIL;
	a->run.kill_after_ms = CLI_RUN_KILL_AFTER_MS;
}

/* A duration of run's: a bare number is seconds, as flock -w. */
static int
cli_run_duration(const char *name, const char *v, int64_t *ms)
{
	uint64_t	u;

	if (proto_parse_duration_ms(v, strlen(v), 1000, PROTO_INT_MAX,
	    &u) == 0) {
		*ms = (int64_t)u;
		return (0);
	}
	cli_usage_error("run: %s: invalid duration '%s' (seconds, or a number "
	    "with a unit: 30, 1.5s, 250ms, 5m, 1h; at most 2147483647ms)",
	    name, v);
	return (-1);
}

/*
 * One of run's own options at argv[*i]: 1 when taken (its value too),
 * 0 when it is not one of them, -1 after a usage error.
 */
int
cli_run_option(int argc, char **argv, int *i, struct cli_args *a)
{
	const char	*v;
	uint32_t	 code;

	if ((v = cli_optval("-s", argc, argv, i)) != NULL ||
	    (v = cli_optval("--sem", argc, argv, i)) != NULL)
		return (cli_sem_add("run", v, a) == 0 ? 1 : -1);
	if ((v = cli_optval("--timeout", argc, argv, i)) != NULL)
		return (cli_run_duration("--timeout", v, &a->timeout_ms) == 0 ?
		    1 : -1);
	if ((v = cli_optval("--lease", argc, argv, i)) != NULL) {
		if (cli_run_duration("--lease", v, &a->lease_ms) != 0)
			return (-1);
		if (a->lease_ms < 3) {
			cli_usage_error("run: --lease: at least 3ms");
			return (-1);
		}
		return (1);
	}
	if ((v = cli_optval("--kill-after", argc, argv, i)) != NULL)
		return (cli_run_duration("--kill-after", v,
		    &a->run.kill_after_ms) == 0 ? 1 : -1);
	if ((v = cli_optval("-E", argc, argv, i)) != NULL ||
	    (v = cli_optval("--conflict-exit-code", argc, argv, i)) != NULL) {
		if (cli_parse_u32(v, 0, &code) != 0 || code > 255) {
			cli_usage_error("run: -E: expected an exit status "
			    "0..255, not '%s'", v);
			return (-1);
		}
		a->run.conflict_exit = (int)code;
		return (1);
	}
	if ((v = cli_optval("--on-loss", argc, argv, i)) != NULL) {
		if (strcmp(v, "kill") != 0 && strcmp(v, "ignore") != 0) {
			cli_usage_error("run: --on-loss: 'kill' or 'ignore', "
			    "not '%s'", v);
			return (-1);
		}
		a->run.on_loss_ignore = strcmp(v, "ignore") == 0;
		return (1);
	}
	if ((v = cli_optval("--name", argc, argv, i)) != NULL) {
		if (!proto_valid_label(v, strlen(v))) {
			cli_usage_error("run: --name: invalid label '%s' (1 to "
			    "%d bytes of A-Z a-z 0-9 _ . : / - @)", v,
			    PROTO_LABEL_MAX);
			return (-1);
		}
		a->run.name = v;
		return (1);
	}
	return (0);
}

/*
 * The connection's label: --name, else SEMD_NAME, else the global name,
 * else semd-cli@<hostname>:<pid> (the host cut to fit in 64 bytes, any
 * byte outside the label alphabet made '_').
 */
static void
cli_run_label(struct cli_run *r)
{
	const char	*env = getenv("SEMD_NAME");
	char		 host[256], pid[24];
	size_t		 i, room;

	if (r->a->run.name != NULL)
		env = r->a->run.name;
	else if (env == NULL || !proto_valid_label(env, strlen(env)))
		env = r->cli->opts.name;
	if (env != NULL && proto_valid_label(env, strlen(env))) {
		snprintf(r->label, sizeof(r->label), "%s", env);
		return;
	}
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "unknown");
	host[sizeof(host) - 1] = '\0';
	snprintf(pid, sizeof(pid), ":%ld", (long)getpid());
	room = PROTO_LABEL_MAX - strlen("semd-cli@") - strlen(pid);
	if (strlen(host) > room)
		host[room] = '\0';
	for (i = 0; host[i] != '\0'; i++) {
		if (!proto_valid_label(&host[i], 1))
			host[i] = '_';
	}
	if (host[0] == '\0')
		snprintf(host, sizeof(host), "unknown");
	snprintf(r->label, sizeof(r->label), "semd-cli@%s%s", host, pid);
}

/*
 * Signals go through a pipe to the loop. A signal the terminal sent
 * (SI_KERNEL) already reached CMD, in the same process group: it is not
 * sent twice.
 */
static void
cli_run_signal(int sig, siginfo_t *si, void *ctx)
{
	unsigned char	byte = (unsigned char)sig;
	int		saved = errno;

	(void)ctx;
	if (sig == SIGCHLD || si == NULL || si->si_code != SI_KERNEL)
		(void)!write(cli_run_pipe[1], &byte, 1);
	errno = saved;
}

static void
cli_run_sigset(sigset_t *set)
{
	size_t	i;

	sigemptyset(set);
	sigaddset(set, SIGCHLD);
	for (i = 0; i < CLI_RUN_NSIGS; i++)
		sigaddset(set, cli_run_forwarded[i]);
}

static int
cli_run_handlers(void)
{
	struct sigaction	sa;
	size_t			i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = cli_run_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, &cli_run_saved[CLI_RUN_NSIGS]) != 0)
		return (-1);
	for (i = 0; i < CLI_RUN_NSIGS; i++) {
		if (sigaction(cli_run_forwarded[i], &sa, &cli_run_saved[i]) !=
		    0)
			return (-1);
	}
	return (0);
}

/* Put back the handlers cli_run_handlers() replaced (for the prompt). */
static void
cli_run_restore(void)
{
	size_t	i;

	sigaction(SIGCHLD, &cli_run_saved[CLI_RUN_NSIGS], NULL);
	for (i = 0; i < CLI_RUN_NSIGS; i++)
		sigaction(cli_run_forwarded[i], &cli_run_saved[i], NULL);
	close(cli_run_pipe[0]);
	close(cli_run_pipe[1]);
	cli_run_pipe[0] = cli_run_pipe[1] = -1;
}

/* In a child: the signal handlers and mask semd-cli found. */
static void
cli_run_child_signals(const sigset_t *old)
{
	size_t	i;

	signal(SIGCHLD, SIG_DFL);
	for (i = 0; i < CLI_RUN_NSIGS; i++)
		signal(cli_run_forwarded[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, old, NULL);
}

/*
 * SEMD_SEMS=gpu:1 db:2: every semaphore of the grant as NAME:N, which
 * cli_sem_split reads back whatever the name (the count is always
 * there). NULL without memory.
 */
static char *
cli_run_env_sems(const struct cli_run *r)
{
	size_t	 size = sizeof("SEMD_SEMS="), off;
	char	*s;
	int	 i;

	for (i = 0; i < r->a->nsems; i++)
		size += strlen(r->a->sems[i].name) + 13;
	if ((s = malloc(size)) == NULL)
		return (NULL);
	off = (size_t)snprintf(s, size, "SEMD_SEMS=");
	for (i = 0; i < r->a->nsems; i++)
		off += (size_t)snprintf(s + off, size - off, "%s%s:%u",
		    i > 0 ? " " : "", r->a->sems[i].name, r->a->sems[i].n);
	return (s);
}

#define CLI_RUN_NVARS	4

/*
 * CMD's environment: semd-cli's, with SEMD_SEM, SEMD_TOKEN and SEMD_N
 * set to the permit's (its first semaphore's, when it has several) and
 * SEMD_SEMS to all of them (replacing any already there); r->vars holds
 * the new strings. NULL without memory.
 */
static char **
cli_run_env(struct cli_run *r)
{
	static const char	*const names[CLI_RUN_NVARS] = {
		"SEMD_SEM=", "SEMD_TOKEN=", "SEMD_N=", "SEMD_SEMS="
	};
	char			**env, **e;
	size_t			  n = 0, i;
	int			  ours;

	if (asprintf(&r->vars[0], "SEMD_SEM=%s", r->sem) == -1)
		r->vars[0] = NULL;
	if (asprintf(&r->vars[1], "SEMD_TOKEN=%llu",
	    (unsigned long long)r->token) == -1)
		r->vars[1] = NULL;
	if (asprintf(&r->vars[2], "SEMD_N=%u", r->a->sems[0].n) == -1)
		r->vars[2] = NULL;
	r->vars[3] = cli_run_env_sems(r);
	for (i = 0; i < CLI_RUN_NVARS; i++) {
		if (r->vars[i] == NULL)
			return (NULL);
	}
	for (e = environ; *e != NULL; e++)
		n++;
	if ((env = calloc(n + CLI_RUN_NVARS + 1, sizeof(*env))) == NULL)
		return (NULL);
	n = 0;
	for (e = environ; *e != NULL; e++) {
		for (i = 0, ours = 0; i < CLI_RUN_NVARS; i++)
			ours |= strncmp(*e, names[i], strlen(names[i])) == 0;
		if (!ours)
			env[n++] = *e;
	}
	for (i = 0; i < CLI_RUN_NVARS; i++)
		env[n++] = r->vars[i];
	return (env);
}

static void
cli_run_env_free(struct cli_run *r, char **env)
{
	size_t	i;

	for (i = 0; i < CLI_RUN_NVARS; i++)
		free(r->vars[i]);
	free(env);
}

/*
 * Signal CMD's process group, as timeout(1) does: what CMD started (a
 * shell's children) is guarded by the permit too, and must stop with it.
 * The group is CMD's pid (cli_run_spawn); if it is gone, CMD alone.
 */
static void
cli_run_kill(pid_t pid, int sig)
{
	if (kill(-pid, sig) == -1)
		kill(pid, sig);
}

/* 1 while CMD or anything left in its process group runs. */
static int
cli_run_group_alive(pid_t pid)
{
	return (kill(-pid, 0) == 0 || kill(pid, 0) == 0);
}

/*
 * fork and exec CMD, in a process group of its own (signalled whole on
 * loss, as timeout(1) does), with the signal mask and handlers semd-cli
 * found, the permit in its environment, and, for a bound permit, the
 * holding connection's descriptor left open across exec.
 */
static pid_t
cli_run_spawn(struct cli_run *r, char **env, const sigset_t *blocked,
    const sigset_t *old)
{
	pid_t	pid;
	int	err, fd;

	sigprocmask(SIG_BLOCK, blocked, NULL);
	if ((pid = fork()) != 0) {
		/* Both sides set the group, so it exists before either acts. */
		if (pid > 0)
			setpgid(pid, pid);
		sigprocmask(SIG_SETMASK, old, NULL);
		return (pid);
	}
	setpgid(0, 0);
	cli_run_child_signals(old);
	if (!r->lease && (fd = semc_fd(r->cli->c)) != -1)
		fcntl(fd, F_SETFD, 0);		/* no FD_CLOEXEC */
	execvpe(r->a->argv[0], r->a->argv, env);
	err = errno;
	fprintf(stderr, "semd-cli: %s: %s\n", r->a->argv[0], strerror(err));
	_exit(err == ENOENT ? 127 : 126);
}

/*
 * The watcher, orphaned (semd-cli was killed, even by SIGKILL) while CMD
 * runs on with the permit: it stops CMD itself when semd says the permit
 * is gone (code, as the watcher would exit with), as semd-cli would have.
 * The permit ending because its connection closed means CMD has exited.
 */
static void __attribute__((noreturn))
cli_run_watcher_orphaned(struct cli_run *r, int code)
{
	int64_t	 until;
	int	 lost;

	lost = code == CLI_WATCH_NOTHELD ||
	    (code >= CLI_WATCH_ENDED && code <= CLI_WATCH_ENDED +
	    SEMC_WATCH_OTHER && code != CLI_WATCH_ENDED + SEMC_WATCH_CLOSED &&
	    code != CLI_WATCH_ENDED + SEMC_WATCH_RELEASED);
	if (!lost || r->a->run.on_loss_ignore || kill(r->pid, 0) == -1)
		_exit(0);
	fprintf(stderr, "semd-cli: the permit on %s (token %llu) is lost: %s; "
	    "semd-cli is gone, its watcher stops %s: SIGTERM, then SIGKILL "
	    "after %lld ms\n", r->sem, (unsigned long long)r->token,
	    code == CLI_WATCH_NOTHELD ? "semd says it is not held" :
	    semc_reasonname(code - CLI_WATCH_ENDED), r->a->argv[0],
	    (long long)r->a->run.kill_after_ms);
	cli_run_kill(r->pid, SIGTERM);
	until = cli_now_ms() + r->a->run.kill_after_ms;
	while (cli_run_group_alive(r->pid) && cli_now_ms() < until)
		poll(NULL, 0, 50);
	if (cli_run_group_alive(r->pid))
		cli_run_kill(r->pid, SIGKILL);
	_exit(0);
}

/* How often the watcher looks at a lease: a third of it. */
static int64_t
cli_run_lease_every_ms(const struct cli_run *r)
{
	return (r->a->lease_ms / 3 > 0 ? r->a->lease_ms / 3 : 1);
}

/*
 * A lease is still held. While semd-cli lives its keeper refreshes it;
 * once semd-cli is gone (killed, even by SIGKILL) the watcher keeps it
 * while CMD (or anything in its group) runs, and releases it after.
 */
static void
cli_run_watcher_keep_lease(struct cli_run *r, pid_t parent, struct semc *w)
{
	if (getppid() == parent)
		return;
	if (!cli_run_group_alive(r->pid)) {
		semc_release(w, r->sem, r->token);
		_exit(0);
	}
	(void)semc_refresh(w, r->sem, r->token, (uint32_t)r->a->lease_ms,
	    NULL);
}

/*
 * The watcher process: WATCH the permit on a connection of its own until
 * semd says it ended; its exit status says how. A connection that fails
 * is opened again (following a restart or a failover) every second. It is
 * in a process group of its own, so that a terminal's Ctrl-C meant for
 * CMD does not end it, and it outlives semd-cli as long as CMD does: if
 * semd-cli is killed, the watcher still stops CMD when its permit is lost
 * (and ends when CMD ends, which closes the inherited connection). A
 * lease it WATCHes a third of the lease at a time, and keeps it once
 * semd-cli is gone (cli_run_watcher_keep_lease).
 */
static void __attribute__((noreturn))
cli_run_watcher(struct cli_run *r, pid_t parent, const sigset_t *old)
{
	struct semc_opts	 opts = r->cli->opts;
	struct semc		*w;
	enum semc_watch_reason	 reason;
	enum semc_err		 err;
	int			 code;

	if (getppid() != parent)
		_exit(1);
	setpgid(0, 0);
	cli_run_child_signals(old);
	if (semc_fd(r->cli->c) != -1)
		close(semc_fd(r->cli->c));	/* semd-cli's, not ours */
	opts.name = r->label;
	if ((w = semc_new(&opts)) == NULL)
		_exit(1);
	for (;;) {
		err = semc_watch(w, r->sem, r->token, r->lease ?
		    cli_run_lease_every_ms(r) : SEMC_FOREVER, &reason);
		if (err == SEMC_TIMEOUT) {
			cli_run_watcher_keep_lease(r, parent, w);
			continue;
		}
		if (err == SEMC_OK)
			code = CLI_WATCH_ENDED + (int)reason;
		else if (err == SEMC_ERR_NOTHELD || err == SEMC_ERR_NOSEM)
			code = CLI_WATCH_NOTHELD;
		else if (err == SEMC_ERR_PROTO)
			code = CLI_WATCH_UNKNOWN;
		else {
			/* Orphaned, and CMD gone too: nothing left to guard. */
			if (getppid() != parent && kill(r->pid, 0) == -1)
				_exit(0);
			poll(NULL, 0, CLI_RUN_RETRY_MS);
			continue;
		}
		if (getppid() != parent)
			cli_run_watcher_orphaned(r, code);
		_exit(code);
	}
}

static void
cli_run_start_watcher(struct cli_run *r, const sigset_t *blocked,
    const sigset_t *old)
{
	pid_t	parent = getpid(), pid;

	r->watcher_next_ms = cli_now_ms() + CLI_RUN_RETRY_MS;
	sigprocmask(SIG_BLOCK, blocked, NULL);
	pid = fork();
	if (pid == 0)
		cli_run_watcher(r, parent, old);
	sigprocmask(SIG_SETMASK, old, NULL);
	r->watcher = pid;
	if (pid == -1)
		fprintf(stderr, "semd-cli: warning: cannot start the watcher "
		    "(%s); trying again\n", strerror(errno));
}

/*
 * The permit is lost (why says how): say so, and stop CMD unless told
 * to ignore it: SIGTERM now, SIGKILL --kill-after later, or sooner when
 * the bound passed (half its margin: CMD must be dead before a standby
 * may grant the permit again).
 */
static void
cli_run_lose_bound(struct cli_run *r, const char *why, int bound)
{
	int64_t	kill_after_ms = r->a->run.kill_after_ms;

	if (r->lost)
		return;
	r->lost = 1;
	fprintf(stderr, "semd-cli: the permit on %s (token %llu) is lost: "
	    "%s\n", r->sem, (unsigned long long)r->token, why);
	if (r->a->run.on_loss_ignore) {
		fprintf(stderr, "semd-cli: %s keeps running unguarded "
		    "(--on-loss ignore); exit status 76 when it ends\n",
		    r->a->argv[0]);
		return;
	}
	if (bound && r->margin_ms >= 0 && kill_after_ms > r->margin_ms / 2)
		kill_after_ms = r->margin_ms / 2;
	fprintf(stderr, "semd-cli: stopping %s: SIGTERM, then SIGKILL after "
	    "%lld ms\n", r->a->argv[0], (long long)kill_after_ms);
	cli_run_kill(r->pid, SIGTERM);
	r->kill_ms = cli_now_ms() + kill_after_ms;
	if (kill_after_ms == 0) {
		cli_run_kill(r->pid, SIGKILL);
		r->kill_ms = -1;
	}
}

static void
cli_run_lose(struct cli_run *r, const char *why)
{
	cli_run_lose_bound(r, why, 0);
}

/*
 * Keep the bound of the held permit (semc_bound_keep: PINGs, and reads
 * their answers or notices the connection closed): lost when it passed,
 * broken when the connection closed.
 */
static void
cli_run_keep(struct cli_run *r)
{
	char		why[512];
	int64_t		next_ms, margin_ms;
	enum semc_err	err;

	if (semc_bound_left_ms(r->cli->c, &margin_ms) >= 0)
		r->margin_ms = margin_ms;
	err = semc_bound_keep(r->cli->c, &next_ms);
	r->keep_ms = next_ms < 0 ? -1 : cli_now_ms() + next_ms;
	if (err == SEMC_OK)
		return;
	r->keep_ms = -1;
	if (err == SEMC_ERR_BOUND) {
		snprintf(why, sizeof(why), "%s", semc_errmsg(r->cli->c));
		cli_run_lose_bound(r, why, 1);
		return;
	}
	r->broken = 1;
	r->broken_ms = cli_now_ms();
}

/* The watcher ended with status: what semd said about the permit. */
static void
cli_run_watcher_ended(struct cli_run *r, int status)
{
	char	why[64];
	int	code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;

	r->watcher = -1;
	if (code >= CLI_WATCH_ENDED && code <= CLI_WATCH_ENDED +
	    SEMC_WATCH_OTHER) {
		snprintf(why, sizeof(why), "semd says it was %s",
		    semc_reasonname(code - CLI_WATCH_ENDED));
		cli_run_lose(r, why);
	} else if (code == CLI_WATCH_NOTHELD)
		cli_run_lose(r, "semd says it is not held");
	else if (code == CLI_WATCH_UNKNOWN) {
		r->watch_unknown = 1;
		fprintf(stderr, "semd-cli: warning: this semd does not know "
		    "WATCH: a revoked permit is not noticed\n");
	}
	/* Else it died (killed, out of memory): started again later. */
}

/*
 * The holding connection closed while CMD runs (semd restarted, a
 * failover, KILL): connect again and ATTACH the permit. Lost when semd
 * refuses it, or stays out of reach CLI_RUN_LOST_MS.
 */
static void
cli_run_reattach(struct cli_run *r)
{
	struct semc_permit	lost;
	enum semc_err		err;
	char			why[SEMC_NAME_MAX + 400];
	int64_t			left;

	if (!r->warned) {
		fprintf(stderr, "semd-cli: warning: lost the connection to "
		    "semd while holding %s; reconnecting\n", r->sem);
		r->warned = 1;
	}
	if (semc_bound_left_ms(r->cli->c, NULL) >= 0)
		(void)semc_bound_left_ms(r->cli->c, &r->margin_ms);
	/* A reconnect within the bound returns by its end (libsemc). */
	if ((err = semc_reconnect(r->cli->c)) != SEMC_OK) {
		left = semc_bound_left_ms(r->cli->c, NULL);
		if (left == 0) {
			snprintf(why, sizeof(why), "semd out of reach until "
			    "the bound passed (%s)", semc_errmsg(r->cli->c));
			cli_run_lose_bound(r, why, 1);
		} else if (left < 0 && cli_now_ms() - r->broken_ms >=
		    CLI_RUN_UNBOUNDED_MS) {
			snprintf(why, sizeof(why), "semd out of reach for %d "
			    "s (%s)", CLI_RUN_UNBOUNDED_MS / 1000,
			    semc_errmsg(r->cli->c));
			cli_run_lose(r, why);
		}
		return;
	}
	r->broken = r->warned = 0;
	r->keep_ms = 0;
	if (semc_next_lost(r->cli->c, &lost)) {
		cli_run_lose(r, "semd did not give it back on ATTACH");
		return;
	}
	fprintf(stderr, "semd-cli: reconnected; the permit on %s is held "
	    "again\n", r->sem);
}

/* The next poll timeout (ms; -1: none) for the timers that run. */
static int
cli_run_timeout(const struct cli_run *r)
{
	int64_t	now = cli_now_ms(), next = -1, left;

	if (r->broken && !r->lost) {
		next = now + CLI_RUN_RETRY_MS;
		left = semc_bound_left_ms(r->cli->c, NULL);
		if (left >= 0 && now + left < next)
			next = now + left;
	}
	if (!r->lease && !r->lost && !r->broken && r->keep_ms >= 0 &&
	    (next == -1 || r->keep_ms < next))
		next = r->keep_ms;
	if (!r->lost && !r->watch_unknown && r->watcher == -1 &&
	    (next == -1 || r->watcher_next_ms < next))
		next = r->watcher_next_ms;
	if (r->kill_ms >= 0 && (next == -1 || r->kill_ms < next))
		next = r->kill_ms;
	if (next == -1)
		return (-1);
	return (next > now ? (int)(next - now) : 0);
}

/* Wait for CMD, forwarding signals and guarding the permit. */
static int
cli_run_wait(struct cli_run *r, const sigset_t *blocked, const sigset_t *old)
{
	struct pollfd	pfd[3];
	unsigned char	sigs[64];
	ssize_t		n, i;
	int		status, nfds;

	for (;;) {
		nfds = 0;
		pfd[nfds].fd = cli_run_pipe[0];
		pfd[nfds++].events = POLLIN;
		pfd[1].fd = pfd[2].fd = -1;
		if (!r->lease && !r->lost && !r->broken)
			pfd[1].fd = semc_fd(r->cli->c);
		if (r->lease && !r->lost)
			pfd[2].fd = semc_keeper_fd(r->keeper);
		pfd[1].events = pfd[2].events = POLLIN;
		pfd[0].revents = pfd[1].revents = pfd[2].revents = 0;
		nfds = 3;
		if (poll(pfd, (nfds_t)nfds, cli_run_timeout(r)) == -1) {
			if (errno != EINTR)
				return (-1);
			continue;
		}
		if (pfd[0].revents & POLLIN) {
			n = read(cli_run_pipe[0], sigs, sizeof(sigs));
			for (i = 0; i < n; i++) {
				if (sigs[i] != SIGCHLD)
					cli_run_kill(r->pid, sigs[i]);
			}
		}
		if (waitpid(r->pid, &status, WNOHANG) == r->pid) {
			/*
			 * CMD ended after its permit was lost: what it left
			 * in its group ignored SIGTERM and runs unguarded.
			 */
			if (r->lost && !r->a->run.on_loss_ignore)
				cli_run_kill(r->pid, SIGKILL);
			return (status);
		}
		if (r->watcher != -1 &&
		    waitpid(r->watcher, &status, WNOHANG) == r->watcher)
			cli_run_watcher_ended(r, status);
		/*
		 * Readable: a PING's answer, or semd closed it (or broke
		 * step); and the PINGs are due now and then.
		 */
		if (pfd[1].fd != -1 && ((pfd[1].revents & (POLLIN | POLLHUP |
		    POLLERR)) || (r->keep_ms >= 0 &&
		    cli_now_ms() >= r->keep_ms)))
			cli_run_keep(r);
		if (r->broken && !r->lost)
			cli_run_reattach(r);
		if (pfd[2].fd != -1 && (pfd[2].revents & POLLIN))
			cli_run_lose(r, "the lease keeper lost the lease "
			    "(revoked, expired, or not refreshed in time)");
		if (!r->lost && !r->watch_unknown &&
		    r->watcher == -1 && cli_now_ms() >= r->watcher_next_ms)
			cli_run_start_watcher(r, blocked, old);
		if (r->kill_ms >= 0 && cli_now_ms() >= r->kill_ms) {
			fprintf(stderr, "semd-cli: %s did not end within "
			    "--kill-after: SIGKILL\n", r->a->argv[0]);
			cli_run_kill(r->pid, SIGKILL);
			r->kill_ms = -1;
		}
	}
}

/* Take the permit: 0, or the exit status after reporting why not. */
static int
cli_run_take(struct cli_run *r)
{
	struct semc_opts	opts;
	enum semc_err		err;

	/* A refusal shows below, on ACQUIRE; the label is kept anyway. */
	(void)semc_name(r->cli->c, r->label);
	err = cli_acquire_call(r->cli->c, r->a, r->a->timeout_ms, &r->token);
	if (err == SEMC_TIMEOUT) {
		cli_fail(r->cli, err);
		return (r->a->run.conflict_exit);
	}
	if (err != SEMC_OK)
		return (cli_fail(r->cli, err));
	if (!r->lease)
		return (0);
	opts = r->cli->opts;
	opts.name = r->label;
	/* A refresh that hangs must fail well before the lease ends. */
	if (opts.io_timeout_ms == 0 || opts.io_timeout_ms < 0 ||
	    opts.io_timeout_ms > r->a->lease_ms / 3)
		opts.io_timeout_ms = r->a->lease_ms / 3 > 0 ?
		    (int)(r->a->lease_ms / 3) : 1;
	if ((r->keeper = semc_keeper_new(&opts, NULL, NULL)) == NULL ||
	    (err = semc_keeper_add(r->keeper, r->sem, r->token,
	    (uint32_t)r->a->lease_ms)) != SEMC_OK) {
		fprintf(stderr, "semd-cli: run: cannot start the lease keeper: "
		    "%s\n", r->keeper == NULL ? strerror(errno) :
		    semc_strerror(err));
		semc_keeper_free(r->keeper);
		r->keeper = NULL;
		semc_release(r->cli->c, r->sem, r->token);
		return (CLI_EXIT_SERVER);
	}
	return (0);
}

int
cli_run(struct cli *cli, const struct cli_args *a)
{
	struct cli_run	 r;
	sigset_t	 blocked, old;
	char		**env;
	int		 status, rc;

	memset(&r, 0, sizeof(r));
	r.cli = cli;
	r.a = a;
	r.sem = a->pos[0];
	r.lease = a->lease_ms != SEMC_BOUND;
	r.watcher = -1;
	r.kill_ms = -1;
	r.keep_ms = 0;		/* the first PING's time, at once */
	r.margin_ms = -1;
	cli_run_label(&r);
	if ((rc = cli_run_take(&r)) != 0)
		return (rc);
	env = cli_run_env(&r);
	if (env == NULL || pipe2(cli_run_pipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    cli_run_handlers() != 0) {
		perror("semd-cli: run");
		if (cli_run_pipe[0] != -1)
			cli_run_restore();
		semc_keeper_free(r.keeper);
		semc_release(cli->c, r.sem, r.token);
		cli_run_env_free(&r, env);
		return (CLI_EXIT_SERVER);
	}
	cli_run_sigset(&blocked);
	sigprocmask(SIG_SETMASK, NULL, &old);
	if ((r.pid = cli_run_spawn(&r, env, &blocked, &old)) == -1) {
		perror("semd-cli: fork");
		cli_run_restore();
		semc_keeper_free(r.keeper);
		semc_release(cli->c, r.sem, r.token);
		cli_run_env_free(&r, env);
		return (CLI_EXIT_SERVER);
	}
	cli_run_start_watcher(&r, &blocked, &old);
	if ((status = cli_run_wait(&r, &blocked, &old)) == -1) {
		perror("semd-cli: run");
		kill(r.pid, SIGTERM);
		while (waitpid(r.pid, &status, 0) == -1 && errno == EINTR)
			;
	}
	if (r.watcher != -1) {
		kill(r.watcher, SIGKILL);
		while (waitpid(r.watcher, NULL, 0) == -1 && errno == EINTR)
			;
	}
	cli_run_restore();
	if (r.keeper != NULL)
		semc_keeper_remove(r.keeper, r.sem, r.token);
	if (!r.lost && semc_release(cli->c, r.sem, r.token) != SEMC_OK)
		fprintf(stderr, "semd-cli: warning: release of %s failed: "
		    "%s\n", r.sem, semc_errmsg(cli->c));
	semc_keeper_free(r.keeper);
	cli_run_env_free(&r, env);
	if (r.lost) {
		if (WIFSIGNALED(status))
			fprintf(stderr, "semd-cli: %s was killed by signal %d; "
			    "exit status 76: the permit was lost\n",
			    a->argv[0], WTERMSIG(status));
		else
			fprintf(stderr, "semd-cli: %s exited %d; exit status "
			    "76: the permit was lost\n", a->argv[0],
			    WEXITSTATUS(status));
		return (CLI_EXIT_LOST);
	}
	if (WIFSIGNALED(status))
		return (128 + WTERMSIG(status));
	return (WEXITSTATUS(status));
}
