/*
 * cli-prompt.c: many commands on one connection, as redis-cli does: the
 * prompt (semd-cli with no command on a terminal; libedit line editing,
 * history saved after every line) and commands read one a line from a
 * pipe or a file. In both, a permit acquired without --lease is held
 * until it is released or the input ends.
 *
 * At the prompt an acquire that has to wait does so on a connection of
 * its own, so Ctrl-C can cancel it by cutting that connection (semd then
 * drops the waiter) while the permits of the prompt's main connection
 * stay held. A bound permit granted after such a wait stays bound to the
 * connection that waited, which stays open (cli->held) until the permit
 * is released there or the prompt ends. Ctrl-C while typing drops the
 * line; Ctrl-D on an empty line, quit or exit leave.
 */
#include <sys/socket.h>
#include <sys/time.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef HAVE_LIBEDIT
#include <editline/readline.h>
#else
/*
 * Without libedit (configure --without-libedit, or no libedit-dev): the
 * prompt reads plain lines through the same getc hook, so Ctrl-C and
 * Ctrl-D behave alike, and keeps the same history file; there is no line
 * editing.
 */
static int	  rl_catch_signals;
static int	(*rl_getc_function)(FILE *);
static char	**hist_lines;		/* oldest first */
static size_t	  hist_n, hist_max = 1000;

static void
using_history(void)
{
}

static void
stifle_history(int max)
{
	hist_max = max > 0 ? (size_t)max : 1;
}

static void
add_history(const char *line)
{
	char	**grown;

	if (hist_n == hist_max) {
		free(hist_lines[0]);
		memmove(hist_lines, hist_lines + 1,
		    (hist_n - 1) * sizeof(*hist_lines));
		hist_n--;
	}
	if ((grown = realloc(hist_lines, (hist_n + 1) *
	    sizeof(*hist_lines))) == NULL)
		return;
	hist_lines = grown;
	if ((hist_lines[hist_n] = strdup(line)) != NULL)
		hist_n++;
}

static int
read_history(const char *path)
{
	FILE	*fp;
	char	 buf[8192];

	if ((fp = fopen(path, "r")) == NULL)
		return (-1);
	while (fgets(buf, sizeof(buf), fp) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		add_history(buf);
	}
	fclose(fp);
	return (0);
}

static int
write_history(const char *path)
{
	FILE	*fp;
	size_t	 i;

	if ((fp = fopen(path, "w")) == NULL)
		return (-1);
	for (i = 0; i < hist_n; i++)
		fprintf(fp, "%s\n", hist_lines[i]);
	return (fclose(fp) == 0 ? 0 : -1);
}

/* The prompt, then one line without its newline; NULL at end of input. */
static char *
readline(const char *prompt)
{
	char	*line = NULL, *grown;
	size_t	 len = 0, size = 0;
	int	 ch;

	(void)rl_catch_signals;
	fputs(prompt, stdout);
	fflush(stdout);
	while ((ch = rl_getc_function(stdin)) != EOF && ch != '\n') {
		if (len + 2 > size) {
			size = size == 0 ? 128 : size * 2;
			if ((grown = realloc(line, size)) == NULL) {
				free(line);
				return (NULL);
			}
			line = grown;
		}
		line[len++] = (char)ch;
	}
	if (ch == EOF && len == 0) {
		free(line);
		return (NULL);
	}
	if (line == NULL && (line = malloc(1)) == NULL)
		return (NULL);
	line[len] = '\0';
	return (line);
}
#endif

#include "cli.h"
#include "proto.h"

#define CLI_WORDS_MAX		64
#define CLI_LINE_MAX		8192	/* bytes in a line of a pipe */
#define CLI_HISTORY_MAX		1000	/* lines kept in the history file */
#define CLI_CUT_INTERVAL_MS	100	/* cutting again, see below */

/* A bound permit held by a connection of its own (see above). */
struct cli_held {
	struct cli_held	*next;
	struct semc	*c;
	struct cli_sem	*sems;		/* its semaphores: one, or the
					   several of one ACQUIREALL grant */
	int		 nsems;
	uint64_t	 token;
};

/* Set by SIGINT; the pipe wakes the line reader. */
static volatile sig_atomic_t	 cli_prompt_intr;
static int			 cli_prompt_pipe[2] = { -1, -1 };
/* No key read yet on this line (a Ctrl-D now leaves). */
static int			 cli_prompt_fresh;
#define CLI_CTRL_D		 0x04
/* The connection that waits, cut by SIGINT; NULL when none waits. */
static struct semc *volatile	 cli_prompt_waiting;

/* Shut the waiting connection down (async-signal-safe: shutdown(2)). */
static void
cli_prompt_cut(void)
{
	struct semc	*w = cli_prompt_waiting;
	int		 fd;

	if (w != NULL && (fd = semc_fd(w)) != -1)
		(void)shutdown(fd, SHUT_RDWR);
}

/*
 * SIGINT, and SIGALRM every CLI_CUT_INTERVAL_MS while a connection waits:
 * a cancel that came before the request was sent makes libsemc reconnect
 * and send it again, so the new connection is cut again at the next tick.
 */
static void
cli_prompt_signal(int sig)
{
	int	saved = errno;

	if (sig == SIGINT) {
		cli_prompt_intr = 1;
		(void)!write(cli_prompt_pipe[1], "", 1);
	}
	if (cli_prompt_intr)
		cli_prompt_cut();
	errno = saved;
}

static void
cli_prompt_drain(void)
{
	char	buf[64];

	while (read(cli_prompt_pipe[0], buf, sizeof(buf)) > 0)
		;
	cli_prompt_intr = 0;
}

/* Our handlers, without SA_RESTART (again after each command: run). */
static void
cli_prompt_signals(void)
{
	struct sigaction	sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cli_prompt_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGALRM, &sa, NULL);
}

/*
 * libedit reads its characters here: a byte of the terminal, or, once
 * Ctrl-C came, a newline that ends the line the usual way (so libedit
 * puts the terminal back as it found it); cli_prompt_intr tells the
 * caller to drop that line. EOF when the terminal is gone, or for Ctrl-D
 * as the first key of a line, also when typed ahead while the terminal
 * was still in cooked mode: Linux then keeps it as a NUL byte, which
 * libedit would take for a key, and the line would no longer be empty.
 */
static int
cli_prompt_getc(FILE *f)
{
	struct pollfd	pfd[2];
	unsigned char	ch;
	ssize_t		n;

	pfd[0].fd = fileno(f);
	pfd[0].events = POLLIN;
	pfd[1].fd = cli_prompt_pipe[0];
	pfd[1].events = POLLIN;
	for (;;) {
		if (cli_prompt_intr || (poll(pfd, 2, -1) > 0 &&
		    pfd[1].revents != 0)) {
			cli_prompt_intr = 1;
			(void)!write(STDOUT_FILENO, "^C", 2);
			return ('\n');
		}
		if (pfd[0].revents == 0)
			continue;	/* EINTR */
		if ((n = read(pfd[0].fd, &ch, 1)) == 1) {
			/* Ctrl-D first thing on a line: leave. */
			if ((ch == CLI_CTRL_D || ch == '\0') &&
			    cli_prompt_fresh)
				return (EOF);
			cli_prompt_fresh = 0;
			return (ch);
		}
		if (n == -1 && (errno == EINTR || errno == EAGAIN))
			continue;
		return (EOF);
	}
}

/* The history file: SEMD_CLI_HISTFILE, else ~/.semd_cli_history; NULL. */
static char *
cli_prompt_histfile(void)
{
	const char	*env = getenv("SEMD_CLI_HISTFILE");
	const char	*home = getenv("HOME");
	char		*path;

	if (env != NULL && *env != '\0') {
		if (strcmp(env, "/dev/null") == 0)
			return (NULL);
		return (strdup(env));
	}
	if (home == NULL || *home == '\0')
		return (NULL);
	if (asprintf(&path, "%s/.semd_cli_history", home) == -1)
		return (NULL);
	return (path);
}

/*
 * Split line in place into blank-separated words; returns how many, or
 * -1 when there are more than max.
 */
static int
cli_split(char *line, char **words, int max)
{
	return (proto_split_words(line, words, (size_t)max));
}

/*
 * Run one line (blank, or starting with #: nothing); *leave is set for
 * quit and exit. Returns its exit status.
 */
static int
cli_line(struct cli *cli, char *line, int *leave)
{
	char	*words[CLI_WORDS_MAX + 1];
	int	 n;

	*leave = 0;
	if ((n = cli_split(line, words, CLI_WORDS_MAX)) == -1) {
		cli_usage_error("more than %d words on a line",
		    CLI_WORDS_MAX);
		return (CLI_EXIT_USAGE);
	}
	words[n] = NULL;	/* as main's argv: run hands it to execvp */
	if (n == 0 || words[0][0] == '#')
		return (CLI_EXIT_OK);
	if (n == 1 && (strcasecmp(words[0], "quit") == 0 ||
	    strcasecmp(words[0], "exit") == 0)) {
		*leave = 1;
		return (CLI_EXIT_OK);
	}
	return (cli_dispatch(cli, n, words));
}

/*
 * Commands from in, one a line, each reply printed as on the command
 * line; quit or exit ends. Returns the worst exit status of all
 * (cli_exit_worse()), 0 for no commands.
 */
int
cli_pipe(struct cli *cli, FILE *in)
{
	char	 line[CLI_LINE_MAX];
	size_t	 len;
	int	 rc = CLI_EXIT_OK, c, leave = 0;

	cli->interactive = 1;
	cli->from_pipe = 1;
	cli_errors_in_place = 1;
	while (!leave && fgets(line, sizeof(line), in) != NULL) {
		len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			while ((c = getc(in)) != EOF && c != '\n')
				;
			cli_usage_error("a line longer than %d bytes",
			    CLI_LINE_MAX - 2);
			rc = cli_exit_worse(rc, CLI_EXIT_USAGE);
			continue;
		}
		rc = cli_exit_worse(rc, cli_line(cli, line, &leave));
	}
	return (rc);
}

/*
 * A new connection with the prompt's settings and password; or NULL.
 * cancellable: for a leased acquire, whose lost reply libsemc asks for
 * again with its id for failover_timeout_ms; Ctrl-C cuts the connection
 * (cli_prompt_cut), so there it asks once more at most (-1), and a
 * cancel ends the wait at once.
 */
static struct semc *
cli_prompt_side(struct cli *cli, int cancellable)
{
	struct semc_opts	opts = cli->opts;

	if (cli->password != NULL)
		opts.password = cli->password;
	if (cancellable)
		opts.failover_timeout_ms = -1;
	return (semc_new(&opts));
}

/*
 * A connection of its own for a wait, connected; NULL after reporting
 * why not (*rc is then the exit status).
 */
static struct semc *
cli_prompt_side_connect(struct cli *cli, int cancellable, int *rc)
{
	enum semc_err	 err;
	struct semc	*side;

	if ((side = cli_prompt_side(cli, cancellable)) == NULL) {
		fprintf(stderr, "semd-cli: out of memory\n");
		*rc = CLI_EXIT_SERVER;
		return (NULL);
	}
	if ((err = semc_connect(side)) != SEMC_OK) {
		*rc = cli_fail_on(cli, side, err);
		semc_free(side);
		return (NULL);
	}
	return (side);
}

/* From now on until cli_prompt_wait_end(), Ctrl-C cuts side. */
static void
cli_prompt_wait_begin(struct semc *side)
{
	struct itimerval	tick;

	cli_prompt_drain();
	memset(&tick, 0, sizeof(tick));
	tick.it_interval.tv_usec = CLI_CUT_INTERVAL_MS * 1000;
	tick.it_value = tick.it_interval;
	cli_prompt_waiting = side;
	setitimer(ITIMER_REAL, &tick, NULL);
}

/* The wait is over; returns 1 if Ctrl-C cancelled it. */
static int
cli_prompt_wait_end(void)
{
	struct itimerval	tick;
	int			cancelled;

	memset(&tick, 0, sizeof(tick));
	setitimer(ITIMER_REAL, &tick, NULL);
	cli_prompt_waiting = NULL;
	cancelled = cli_prompt_intr;
	cli_prompt_drain();
	return (cancelled);
}

static int
cli_prompt_cancelled(struct cli *cli, const char *what)
{
	fprintf(stderr, "semd-cli: %s cancelled\n", what);
	if (cli->json)
		printf("{\"error\":\"CANCELLED\",\"message\":\"%s "
		    "cancelled\"}\n", what);
	return (CLI_EXIT_TIMEOUT);
}

/*
 * acquire at the prompt: TRY on the main connection (granted at once if
 * there is room and nobody waits), else wait on a connection of its own
 * that Ctrl-C cuts. Prints the token or why not; returns the exit status.
 */
int
cli_prompt_acquire(struct cli *cli, const struct cli_args *a)
{
	struct cli_held		*h;
	struct semc		*side;
	enum semc_err		 err;
	uint64_t		 token;
	int			 rc, cancelled, lease = a->lease_ms != SEMC_BOUND;

	err = cli_acquire_call(cli->c, a, 0, &token);
	if (err == SEMC_OK) {
		cli_out_token(cli, token);
		return (CLI_EXIT_OK);
	}
	if (err != SEMC_TIMEOUT)
		return (cli_fail(cli, err));
	if ((side = cli_prompt_side_connect(cli, lease, &rc)) == NULL)
		return (rc);
	cli_prompt_wait_begin(side);
	err = cli_acquire_call(side, a, a->timeout_ms, &token);
	cancelled = cli_prompt_wait_end();

	if (err == SEMC_OK && (lease || !cancelled)) {
		/* Granted (a lease granted as Ctrl-C came stands). */
		cli_out_token(cli, token);
		if (lease || (h = calloc(1, sizeof(*h))) == NULL) {
			if (!lease)
				fprintf(stderr, "semd-cli: out of memory: "
				    "the permit is released\n");
			semc_free(side);
			return (lease ? CLI_EXIT_OK : CLI_EXIT_SERVER);
		}
		h->c = side;
		h->nsems = a->nsems > 0 ? a->nsems : 1;
		if ((h->sems = calloc((size_t)h->nsems,
		    sizeof(*h->sems))) == NULL) {
			fprintf(stderr, "semd-cli: out of memory: the permit is "
			    "released\n");
			semc_free(side);
			free(h);
			return (CLI_EXIT_SERVER);
		}
		if (a->nsems > 0)
			memcpy(h->sems, a->sems, (size_t)h->nsems *
			    sizeof(*h->sems));
		else
			snprintf(h->sems[0].name, sizeof(h->sems[0].name), "%s",
			    a->pos[0]);
		h->token = token;
		h->next = cli->held;
		cli->held = h;
		return (CLI_EXIT_OK);
	}
	if (!cancelled) {
		rc = cli_fail_on(cli, side, err);
		semc_free(side);
		return (rc);
	}
	if (lease && (err == SEMC_ERR_LOST || err == SEMC_ERR_NOREPLY))
		fprintf(stderr, "semd-cli: if semd granted the lease just "
		    "before the cancel, it runs out by itself (%s)\n",
		    semc_errmsg(side));
	semc_free(side);
	return (cli_prompt_cancelled(cli, "acquire"));
}

/* watch at the prompt: on a connection of its own, that Ctrl-C cuts. */
int
cli_prompt_watch(struct cli *cli, const char *sem, uint64_t token,
    int64_t timeout_ms)
{
	enum semc_watch_reason	 reason = SEMC_WATCH_OTHER;
	struct semc		*side;
	enum semc_err		 err;
	int			 rc;

	if ((side = cli_prompt_side_connect(cli, 0, &rc)) == NULL)
		return (rc);
	cli_prompt_wait_begin(side);
	err = semc_watch(side, sem, token, timeout_ms, &reason);
	if (cli_prompt_wait_end() && err != SEMC_OK) {
		semc_free(side);
		return (cli_prompt_cancelled(cli, "watch"));
	}
	rc = cli_watch_done(cli, side, err, reason);
	semc_free(side);
	return (rc);
}

static struct cli_held **
cli_prompt_find(struct cli *cli, const char *sem, uint64_t token)
{
	struct cli_held	**hp;

	int		  i;

	/* A grant of several semaphores is named through any of them. */
	for (hp = &cli->held; *hp != NULL; hp = &(*hp)->next) {
		for (i = 0; (*hp)->token == token && i < (*hp)->nsems; i++) {
			if (strcmp((*hp)->sems[i].name, sem) == 0)
				return (hp);
		}
	}
	return (NULL);
}

/* The connection a bound permit is held by: its own, or the main one. */
struct semc *
cli_prompt_conn(struct cli *cli, const char *sem, uint64_t token)
{
	struct cli_held	**hp = cli_prompt_find(cli, sem, token);

	return (hp != NULL ? (*hp)->c : cli->c);
}

/* The permit is released: close the connection that held it. */
void
cli_prompt_forget(struct cli *cli, const char *sem, uint64_t token)
{
	struct cli_held	**hp = cli_prompt_find(cli, sem, token), *h;

	if (hp == NULL)
		return;
	h = *hp;
	*hp = h->next;
	semc_free(h->c);
	free(h->sems);
	free(h);
}

/* Close every connection of the prompt but the main one. */
void
cli_prompt_free(struct cli *cli)
{
	struct cli_held	*h;

	while ((h = cli->held) != NULL) {
		cli->held = h->next;
		semc_free(h->c);
		free(h->sems);
		free(h);
	}
	free(cli->password);
	cli->password = NULL;
}

/* 1 if the line goes to the history: not blank, not an AUTH line. */
static int
cli_prompt_keep(const char *line)
{
	line += strspn(line, " \t");
	if (*line == '\0')
		return (0);
	return (strncasecmp(line, "auth", 4) != 0 ||
	    (line[4] != '\0' && strchr(" \t", line[4]) == NULL));
}

int
cli_prompt(struct cli *cli)
{
	char	*line, prompt[300];
	char	*hist = cli_prompt_histfile();
	int	 rc = CLI_EXIT_OK, leave = 0;

	cli->interactive = 1;
	cli->prompt = 1;
	if (pipe(cli_prompt_pipe) == -1 ||
	    fcntl(cli_prompt_pipe[0], F_SETFL, O_NONBLOCK) == -1 ||
	    fcntl(cli_prompt_pipe[1], F_SETFL, O_NONBLOCK) == -1) {
		fprintf(stderr, "semd-cli: pipe: %s\n", strerror(errno));
		free(hist);
		return (CLI_EXIT_SERVER);
	}
	if (cli->opts.unix_path != NULL)
		snprintf(prompt, sizeof(prompt), "semd unix:%.200s> ",
		    cli->opts.unix_path);
	else
		snprintf(prompt, sizeof(prompt), "semd %.200s:%d> ",
		    cli->opts.host != NULL ? cli->opts.host : "127.0.0.1",
		    cli->opts.port > 0 ? cli->opts.port : SEMC_DEFAULT_PORT);
	rl_catch_signals = 0;
	rl_getc_function = cli_prompt_getc;
	using_history();
	stifle_history(CLI_HISTORY_MAX);
	if (hist != NULL)
		read_history(hist);
	while (!leave) {
		cli_prompt_signals();
		cli_prompt_drain();
		cli_prompt_fresh = 1;
		if ((line = readline(prompt)) == NULL)
			break;			/* Ctrl-D */
		if (cli_prompt_intr) {		/* Ctrl-C: drop the line */
			free(line);
			continue;
		}
		if (cli_prompt_keep(line)) {
			add_history(line);
			if (hist != NULL)
				write_history(hist);
		}
		rc = cli_line(cli, line, &leave);
		free(line);
	}
	signal(SIGINT, SIG_DFL);
	signal(SIGALRM, SIG_DFL);
	close(cli_prompt_pipe[0]);
	close(cli_prompt_pipe[1]);
	free(hist);
	return (rc);
}
