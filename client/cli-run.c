/*
 * cli-run.c: semd-cli run SEM -- CMD ARGS..., flock(1) across hosts.
 *
 * The permit is bound to semd-cli's connection, so however semd-cli ends,
 * even by SIGKILL, closing the connection gives it back. While CMD runs,
 * semd-cli forwards the signals a supervisor sends (SIGINT SIGTERM SIGHUP
 * SIGQUIT SIGUSR1 SIGUSR2) to it, watches the connection, and if semd
 * goes away reconnects and ATTACHes the permit again (semd with
 * persistence keeps it through a restart, and a standby that takes over
 * keeps it too; libsemc finds the new owner); a permit it cannot take back
 * is reported on stderr, and CMD keeps running. When CMD ends, the permit
 * is released and semd-cli exits with CMD's status, 128 + N if a signal
 * N killed it.
 */
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define CLI_RUN_RETRY_MS	1000	/* between reconnects */

static const int cli_run_forwarded[] = {
	SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2
};
#define CLI_RUN_NSIGS	(sizeof(cli_run_forwarded) / sizeof(int))

static int		cli_run_pipe[2] = { -1, -1 };
static struct sigaction	cli_run_saved[CLI_RUN_NSIGS + 1];

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

/* fork and exec argv with the signal mask and handlers semd-cli found. */
static pid_t
cli_run_spawn(char **argv, const sigset_t *blocked, const sigset_t *old)
{
	pid_t	pid;
	size_t	i;
	int	err;

	sigprocmask(SIG_BLOCK, blocked, NULL);
	if ((pid = fork()) != 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		return (pid);
	}
	signal(SIGCHLD, SIG_DFL);
	for (i = 0; i < CLI_RUN_NSIGS; i++)
		signal(cli_run_forwarded[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, old, NULL);
	execvp(argv[0], argv);
	err = errno;
	fprintf(stderr, "semd-cli: %s: %s\n", argv[0], strerror(err));
	_exit(err == ENOENT ? 127 : 126);
}

/*
 * semd closed the connection while CMD runs: connect again, and ATTACH
 * the permit. 1 while it is still ours (or may be, until semd answers),
 * 0 once semd said it is gone.
 */
static int
cli_run_reattach(struct cli *cli, const char *sem, int *warned)
{
	struct semc_permit	lost;
	enum semc_err		err;

	if (!*warned) {
		fprintf(stderr, "semd-cli: warning: lost the connection to "
		    "semd while holding %s; reconnecting\n", sem);
		*warned = 1;
	}
	if ((err = semc_reconnect(cli->c)) != SEMC_OK)
		return (1);
	*warned = 0;
	if (semc_next_lost(cli->c, &lost)) {
		fprintf(stderr, "semd-cli: warning: the permit on %s (token "
		    "%llu) is lost: semd did not give it back; %s keeps "
		    "running unguarded\n", sem,
		    (unsigned long long)lost.token, "the command");
		return (0);
	}
	fprintf(stderr, "semd-cli: reconnected; the permit on %s is held "
	    "again\n", sem);
	return (1);
}

/* Wait for CMD, forwarding signals and guarding the permit. */
static int
cli_run_wait(struct cli *cli, const char *sem, pid_t pid, int *held)
{
	struct pollfd	pfd[2];
	unsigned char	sigs[64];
	ssize_t		n, i;
	int		status, nfds, warned = 0, broken = 0;

	for (;;) {
		pfd[0].fd = cli_run_pipe[0];
		pfd[0].events = POLLIN;
		pfd[1].fd = semc_fd(cli->c);
		pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		nfds = *held && !broken && pfd[1].fd != -1 ? 2 : 1;
		if (poll(pfd, (nfds_t)nfds, broken ? CLI_RUN_RETRY_MS : -1) ==
		    -1) {
			if (errno != EINTR)
				return (-1);
			continue;
		}
		if (pfd[0].revents & POLLIN) {
			n = read(cli_run_pipe[0], sigs, sizeof(sigs));
			for (i = 0; i < n; i++) {
				if (sigs[i] != SIGCHLD)
					kill(pid, sigs[i]);
			}
		}
		if (waitpid(pid, &status, WNOHANG) == pid)
			return (status);
		/* Readable while idle: semd closed it (or broke step). */
		if (nfds == 2 && (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))
			broken = 1;
		if (broken && *held) {
			*held = cli_run_reattach(cli, sem, &warned);
			broken = *held && semc_fd(cli->c) == -1;
		}
	}
}

int
cli_run(struct cli *cli, const struct cli_args *a)
{
	const char	*sem = a->pos[0];
	sigset_t	 blocked, old;
	enum semc_err	 err;
	uint64_t	 token;
	pid_t		 pid;
	int		 status, held = 1;

	err = semc_acquire(cli->c, sem, a->n, a->timeout_ms, SEMC_BOUND,
	    &token);
	if (err != SEMC_OK)
		return (cli_fail(cli, err));
	if (pipe2(cli_run_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		perror("semd-cli: run");
		semc_release(cli->c, sem, token);
		return (CLI_EXIT_SERVER);
	}
	if (cli_run_handlers() != 0) {
		perror("semd-cli: run");
		cli_run_restore();
		semc_release(cli->c, sem, token);
		return (CLI_EXIT_SERVER);
	}
	cli_run_sigset(&blocked);
	sigprocmask(SIG_SETMASK, NULL, &old);
	if ((pid = cli_run_spawn(a->argv, &blocked, &old)) == -1) {
		perror("semd-cli: fork");
		cli_run_restore();
		semc_release(cli->c, sem, token);
		return (CLI_EXIT_SERVER);
	}
	if ((status = cli_run_wait(cli, sem, pid, &held)) == -1) {
		perror("semd-cli: run");
		kill(pid, SIGTERM);
		while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
			;
	}
	cli_run_restore();
	if (held && semc_release(cli->c, sem, token) != SEMC_OK)
		fprintf(stderr, "semd-cli: warning: release of %s failed: "
		    "%s\n", sem, semc_errmsg(cli->c));
	if (WIFSIGNALED(status))
		return (128 + WTERMSIG(status));
	return (WEXITSTATUS(status));
}
