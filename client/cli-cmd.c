/*
 * cli-cmd.c: semd-cli's commands, one table entry and one handler each,
 * and the mapping of libsemc's outcomes to the documented exit statuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

struct cli_cmd {
	const char	*name;
	int		 npos;		/* positional arguments, exactly */
	int		 flags;		/* CLI_OPT_* */
	const char	*usage;
	const char	*summary;	/* one line, for the lists of help */
	const char	*help;		/* the rest, for help CMD; or NULL */
	int		(*fn)(struct cli *, const struct cli_args *);
};

static int
cli_exit_of(enum semc_err err)
{
	switch (err) {
	case SEMC_OK:
		return (CLI_EXIT_OK);
	case SEMC_TIMEOUT:
		return (CLI_EXIT_TIMEOUT);
	case SEMC_ERR_INVAL:
		return (CLI_EXIT_USAGE);
	case SEMC_ERR_CONNECT:
	case SEMC_ERR_NOTSENT:
		return (CLI_EXIT_CONNECT);
	default:
		return (CLI_EXIT_SERVER);
	}
}

/*
 * The severity of an exit status, for a pipe's commands: 0 done, then 1
 * not granted, any other status (a command's own), 2 usage, 3 server
 * error or unknown outcome, 4 cannot connect.
 */
static int
cli_exit_rank(int status)
{
	if (status >= CLI_EXIT_OK && status <= CLI_EXIT_CONNECT)
		return (status * 2);
	return (CLI_EXIT_TIMEOUT * 2 + 1);
}

/* The worse of two exit statuses (the first when equally bad). */
int
cli_exit_worse(int a, int b)
{
	return (cli_exit_rank(b) > cli_exit_rank(a) ? b : a);
}

/* Report a call that failed on c; returns its exit status. */
int
cli_fail_on(struct cli *cli, struct semc *c, enum semc_err err)
{
	cli_out_error(cli, err, semc_errmsg(c));
	return (cli_exit_of(err));
}

/* Report a failed call of the main connection; returns its exit status. */
int
cli_fail(struct cli *cli, enum semc_err err)
{
	return (cli_fail_on(cli, cli->c, err));
}

/* OK for a command without a value, else report. */
static int
cli_done(struct cli *cli, enum semc_err err, const char *text)
{
	if (err != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_ok(cli, text);
	return (CLI_EXIT_OK);
}

/* A token argument, or a usage error (-1). */
static int
cli_token_arg(const char *s, uint64_t *token)
{
	if (cli_parse_token(s, token) == 0)
		return (0);
	cli_usage_error("invalid token '%s' (a decimal number)", s);
	return (-1);
}

static int
cli_capacity_arg(const char *s, uint32_t min, uint32_t *cap)
{
	if (cli_parse_u32(s, min, cap) == 0)
		return (0);
	cli_usage_error("invalid capacity '%s' (%u..2147483647)", s, min);
	return (-1);
}

static int
cli_ping(struct cli *cli, const struct cli_args *a)
{
	(void)a;
	return (cli_done(cli, semc_ping(cli->c), "PONG"));
}

/* At the prompt, the password is kept for the connections that wait. */
static int
cli_auth(struct cli *cli, const struct cli_args *a)
{
	enum semc_err	err = semc_auth(cli->c, a->pos[0]);

	if (err == SEMC_OK && cli->prompt) {
		free(cli->password);
		cli->password = strdup(a->pos[0]);
	}
	return (cli_done(cli, err, "OK"));
}

static int
cli_create(struct cli *cli, const struct cli_args *a)
{
	uint32_t	cap;

	if (cli_capacity_arg(a->pos[1], 1, &cap) != 0)
		return (CLI_EXIT_USAGE);
	return (cli_done(cli, semc_create(cli->c, a->pos[0], cap), "OK"));
}

static int
cli_resize(struct cli *cli, const struct cli_args *a)
{
	uint32_t	cap;

	if (cli_capacity_arg(a->pos[1], 0, &cap) != 0)
		return (CLI_EXIT_USAGE);
	return (cli_done(cli, semc_resize(cli->c, a->pos[0], cap), "OK"));
}

static int
cli_delete(struct cli *cli, const struct cli_args *a)
{
	return (cli_done(cli, semc_delete(cli->c, a->pos[0]), "OK"));
}

/*
 * The acquire of a command's semaphores on c, waiting timeout_ms (0:
 * sent as TRY): ACQUIRE of one, ACQUIREALL of several; with --id as its
 * request id (else libsemc draws one for a lease).
 */
enum semc_err
cli_acquire_call(struct semc *c, const struct cli_args *a, int64_t timeout_ms,
    uint64_t *token)
{
	struct semc_acquire_opts	 opts = SEMC_ACQUIRE_OPTS_INIT;
	struct semc_want		 want[SEMC_ACQUIRE_ALL_MAX];
	int				 i;

	opts.id = a->id;
	if (a->nsems < 2)
		return (semc_acquire_with(c, a->pos[0], a->n, timeout_ms,
		    a->lease_ms, &opts, token));
	for (i = 0; i < a->nsems; i++) {
		want[i].sem = a->sems[i].name;
		want[i].n = a->sems[i].n;
	}
	return (semc_acquire_all(c, want, (size_t)a->nsems, timeout_ms,
	    a->lease_ms, &opts, token));
}

/*
 * ACQUIRE and TRY. A permit bound to the connection would be released
 * the moment semd-cli exits, so outside the prompt they need --lease.
 */
static int
cli_take(struct cli *cli, const struct cli_args *a, int is_try)
{
	enum semc_err	err;
	uint64_t	token;

	if (a->lease_ms == SEMC_BOUND && !cli->interactive) {
		cli_usage_error("%s: --lease is needed: a permit without a "
		    "lease is released as soon as semd-cli exits (use 'run' "
		    "to hold one while a command runs)",
		    is_try ? "try" : "acquire");
		return (CLI_EXIT_USAGE);
	}
	if (!is_try && cli->prompt && a->timeout_ms != 0)
		return (cli_prompt_acquire(cli, a));
	err = cli_acquire_call(cli->c, a, is_try ? 0 : a->timeout_ms, &token);
	if (err != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_token(cli, token);
	return (CLI_EXIT_OK);
}

static int
cli_acquire(struct cli *cli, const struct cli_args *a)
{
	return (cli_take(cli, a, 0));
}

static int
cli_try(struct cli *cli, const struct cli_args *a)
{
	return (cli_take(cli, a, 1));
}

/* The commands that take SEM TOKEN and answer OK. */
static int
cli_sem_token(struct cli *cli, const struct cli_args *a,
    enum semc_err (*fn)(struct semc *, const char *, uint64_t))
{
	uint64_t	token;

	if (cli_token_arg(a->pos[1], &token) != 0)
		return (CLI_EXIT_USAGE);
	return (cli_done(cli, fn(cli->c, a->pos[0], token), "OK"));
}

/* At the prompt, a permit may be held by a connection of its own. */
static int
cli_release(struct cli *cli, const struct cli_args *a)
{
	enum semc_err	 err;
	struct semc	*c;
	uint64_t	 token;
	int		 rc;

	if (cli_token_arg(a->pos[1], &token) != 0)
		return (CLI_EXIT_USAGE);
	c = cli->prompt ? cli_prompt_conn(cli, a->pos[0], token) : cli->c;
	err = semc_release(c, a->pos[0], token);
	rc = err == SEMC_OK ? CLI_EXIT_OK : cli_fail_on(cli, c, err);
	if (err == SEMC_OK)
		cli_out_ok(cli, "OK");
	if (c != cli->c && (err == SEMC_OK || err == SEMC_ERR_NOTHELD))
		cli_prompt_forget(cli, a->pos[0], token);
	return (rc);
}

static int
cli_attach(struct cli *cli, const struct cli_args *a)
{
	return (cli_sem_token(cli, a, semc_attach));
}

static int
cli_revoke(struct cli *cli, const struct cli_args *a)
{
	return (cli_sem_token(cli, a, semc_revoke));
}

static int
cli_refresh(struct cli *cli, const struct cli_args *a)
{
	enum semc_err	err;
	uint64_t	token, left;
	int64_t		ms;

	if (cli_token_arg(a->pos[1], &token) != 0)
		return (CLI_EXIT_USAGE);
	/* REFRESH sem token 500 is the protocol's <ms>; refresh ... 30 is s. */
	if (a->wire ? cli_parse_proto_ms(a->pos[2], &ms) != 0 :
	    cli_parse_duration(a->pos[2], &ms) != 0) {
		cli_usage_error("refresh: invalid duration '%s' (%s; or with a "
		    "unit: 250ms, 30s, 1.5m, 1h; at most 2147483647ms)",
		    a->pos[2], a->wire ? "milliseconds, as the protocol's "
		    "REFRESH" : "a bare number is seconds");
		return (CLI_EXIT_USAGE);
	}
	err = semc_refresh(cli->c, a->pos[0], token, (uint32_t)ms, &left);
	if (err != SEMC_OK)
		return (cli_fail(cli, err));
	if (cli->json)
		printf("{\"ttl_ms\":%llu}\n", (unsigned long long)left);
	else
		printf("%llu\n", (unsigned long long)left);
	return (CLI_EXIT_OK);
}

static int
cli_check(struct cli *cli, const struct cli_args *a)
{
	struct semc_check	chk;
	enum semc_err		err;
	uint64_t		token;

	if (cli_token_arg(a->pos[1], &token) != 0)
		return (CLI_EXIT_USAGE);
	if ((err = semc_check(cli->c, a->pos[0], token, &chk)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_check(cli, &chk);
	return (CLI_EXIT_OK);
}

/* Every key INFO sends (wait_p99_ms, timeouts_total, later ones too). */
static int
cli_info(struct cli *cli, const struct cli_args *a)
{
	struct semc_stat	*s;
	enum semc_err		 err;
	size_t			 n;

	if ((err = semc_info_all(cli->c, a->pos[0], &s, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_kv(cli, s, n, 1);
	free(s);
	return (CLI_EXIT_OK);
}

static int
cli_role(struct cli *cli, const struct cli_args *a)
{
	struct semc_stat	*s;
	enum semc_err		 err;
	size_t			 n;

	(void)a;
	if ((err = semc_role(cli->c, &s, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_kv(cli, s, n, 1);
	free(s);
	return (CLI_EXIT_OK);
}

static int
cli_name(struct cli *cli, const struct cli_args *a)
{
	return (cli_done(cli, semc_name(cli->c, a->pos[0]), "OK"));
}

static int
cli_holders(struct cli *cli, const struct cli_args *a)
{
	struct semc_holder	*h;
	enum semc_err		 err;
	size_t			 n;

	if ((err = semc_holders(cli->c, a->pos[0], &h, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_holders(cli, h, n);
	free(h);
	return (CLI_EXIT_OK);
}

static int
cli_waiters(struct cli *cli, const struct cli_args *a)
{
	struct semc_waiter	*w;
	enum semc_err		 err;
	size_t			 n;

	if ((err = semc_waiters(cli->c, a->pos[0], &w, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_waiters(cli, w, n);
	free(w);
	return (CLI_EXIT_OK);
}

static int
cli_list(struct cli *cli, const struct cli_args *a)
{
	struct semc_info	*s;
	enum semc_err		 err;
	size_t			 n;

	(void)a;
	if ((err = semc_list(cli->c, &s, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_info(cli, s, (int)n);
	free(s);
	return (CLI_EXIT_OK);
}

static int
cli_stats(struct cli *cli, const struct cli_args *a)
{
	struct semc_stat	*s;
	enum semc_err		 err;
	size_t			 n;

	(void)a;
	if ((err = semc_stats(cli->c, &s, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_kv(cli, s, n, 0);
	free(s);
	return (CLI_EXIT_OK);
}

static int
cli_clients(struct cli *cli, const struct cli_args *a)
{
	struct semc_client	*cl;
	enum semc_err		 err;
	size_t			 n;

	(void)a;
	if ((err = semc_clients(cli->c, &cl, &n)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_clients(cli, cl, n);
	free(cl);
	return (CLI_EXIT_OK);
}

static int
cli_kill(struct cli *cli, const struct cli_args *a)
{
	uint64_t	id;

	if (cli_parse_token(a->pos[0], &id) != 0 || id == 0) {
		cli_usage_error("kill: invalid connection id '%s' (the id of "
		    "clients, or owner= of holders)", a->pos[0]);
		return (CLI_EXIT_USAGE);
	}
	return (cli_done(cli, semc_kill(cli->c, id), "OK"));
}

/*
 * WATCH: print how the grant ended. Still held when the timeout ran out
 * is exit 1, as a wait that was not granted. At the prompt it waits on a
 * connection of its own, which Ctrl-C cuts.
 */
int
cli_watch_done(struct cli *cli, struct semc *c, enum semc_err err,
    enum semc_watch_reason reason)
{
	if (err == SEMC_TIMEOUT) {
		cli_out_error(cli, err, "still held when the timeout ran out");
		return (CLI_EXIT_TIMEOUT);
	}
	if (err != SEMC_OK)
		return (cli_fail_on(cli, c, err));
	cli_out_reason(cli, reason);
	return (CLI_EXIT_OK);
}

static int
cli_watch(struct cli *cli, const struct cli_args *a)
{
	enum semc_watch_reason	reason;
	enum semc_err		err;
	uint64_t		token;

	if (cli_token_arg(a->pos[1], &token) != 0)
		return (CLI_EXIT_USAGE);
	if (cli->prompt)
		return (cli_prompt_watch(cli, a->pos[0], token,
		    a->timeout_ms));
	err = semc_watch(cli->c, a->pos[0], token, a->timeout_ms, &reason);
	return (cli_watch_done(cli, cli->c, err, reason));
}

static int
cli_quit(struct cli *cli, const struct cli_args *a)
{
	(void)a;
	return (cli_done(cli, semc_quit(cli->c), "OK"));
}

static int
cli_help_cmd(struct cli *cli, const struct cli_args *a)
{
	if (a->npos == 1)
		return (cli_help_cmd_text(a->pos[0]));
	if (cli->prompt)
		cli_help_prompt();
	else
		cli_help();
	return (CLI_EXIT_OK);
}

#define CLI_D_OPT \
	"D is a duration: a bare number is seconds (30), or a number with a\n" \
	"unit, ms s m h, maybe with a fraction (250ms, 1.5s, 5m).\n"
#define CLI_D_WORDS \
	"The protocol's own words are accepted too; typed in upper case, as\n" \
	"the protocol spells them, their bare numbers are its milliseconds:\n"

static const struct cli_cmd cli_cmds[] = {
	{ "ping", 0, 0, "ping", "check that semd answers (PONG)",
	    NULL, cli_ping },
	{ "auth", 1, 0, "auth PASSWORD", "authenticate this connection",
	    "For the prompt and pipes; on the command line use -a or\n"
	    "SEMD_PASSWORD. The prompt does not save auth lines in its history.\n",
	    cli_auth },
	{ "create", 2, 0, "create SEM CAPACITY",
	    "create a semaphore",
	    "OK also when it exists with that capacity.\n", cli_create },
	{ "resize", 2, 0, "resize SEM CAPACITY",
	    "change a capacity",
	    "0 admits nobody new. Holders keep their permits when it shrinks; growing wakes waiters.\n",
	    cli_resize },
	{ "delete", 1, 0, "delete SEM",
	    "delete an idle semaphore", NULL,
	    cli_delete },
	{ "acquire", 1, CLI_OPT_N | CLI_OPT_TIMEOUT | CLI_OPT_LEASE |
	    CLI_OPT_WORDS | CLI_OPT_SEMS | CLI_OPT_ID,
	    "acquire SEM[:N]... [-n N] [--timeout D] --lease D [--id ID]",
	    "wait for N permits; print token",
	    "Prints the token alone on a line. Waits for ever without --timeout;\n"
	    "exit 1 if not granted in time.\n"
	    "Several semaphores (gpu:1 db:2, up to 16) are taken all at once or\n"
	    "not at all, as one grant with one token. SEM:N splits at the last\n"
	    "':' when only digits follow it; a name that ends in :digits takes\n"
	    "its count (x:5:1 is x:5, 1 permit).\n"
	    "A permit without a lease is bound to the connection, so --lease is\n"
	    "needed except at the prompt or in a pipe (released when they end).\n"
	    "A lease is asked with a request id (--id, else a random one): a\n"
	    "reply lost on the way is asked for again, and the same id always\n"
	    "answers the same lease's token.\n"
	    "At the prompt, Ctrl-C cancels a waiting acquire.\n"
	    CLI_D_OPT CLI_D_WORDS
	    "  acquire SEM [N] [TIMEOUT ms] [LEASE ms] [ID id]    e.g. ACQUIRE "
	    "jobs 2 TIMEOUT 100\n", cli_acquire },
	{ "try", 1, CLI_OPT_N | CLI_OPT_LEASE | CLI_OPT_WORDS | CLI_OPT_SEMS |
	    CLI_OPT_ID, "try SEM[:N]... [-n N] --lease D [--id ID]",
	    "take N permits if free now",
	    "Exit 1 if they are not free. SEM:N, --lease and --id as for\n"
	    "acquire.\n"
	    CLI_D_OPT CLI_D_WORDS "  try SEM [N] [LEASE ms] [ID id]\n", cli_try },
	{ "release", 2, 0, "release SEM TOKEN", "release a permit", NULL,
	    cli_release },
	{ "refresh", 3, 0, "refresh SEM TOKEN D",
	    "extend a lease; print ms left",
	    CLI_D_OPT
	    "Typed as the protocol spells it (REFRESH jobs 7 500), a bare number\n"
	    "is the protocol's milliseconds.\n", cli_refresh },
	{ "attach", 2, 0, "attach SEM TOKEN",
	    "re-own a permit after a restart",
	    "Takes back a permit left unowned by a semd restart; it becomes\n"
	    "bound to this connection.\n",
	    cli_attach },
	{ "check", 2, 0, "check SEM TOKEN",
	    "is a permit held? (fencing)",
	    "Prints n=.. kind=conn|lease ttl_ms=.. while it is held; exit 3 (ERR NOTHELD) when it is not held: for fencing.\n",
	    cli_check },
	{ "revoke", 2, 0, "revoke SEM TOKEN",
	    "free any permit (operators)",
	    "Frees a permit, bound or leased, whoever holds it.\n", cli_revoke },
	{ "info", 1, 0, "info SEM", "a semaphore's counters",
	    "Prints every key=value semd sends on one line (numbers stay\n"
	    "numbers with --json).\n", cli_info },
	{ "holders", 1, 0, "holders SEM",
	    "its grants, oldest first", NULL, cli_holders },
	{ "waiters", 1, 0, "waiters SEM",
	    "its waiters, in queue order", NULL, cli_waiters },
	{ "list", 0, 0, "list", "the semaphores, by name", NULL,
	    cli_list },
	{ "stats", 0, 0, "stats", "semd's counters",
	    "Prints key=value lines (numbers stay numbers with --json).\n", cli_stats },
	{ "role", 0, 0, "role", "owner, standby or single; epoch, owner",
	    "Prints role=owner|standby|single epoch=N owner=HOST:PORT|- (and\n"
	    "any key a later semd adds). A standby answers it too.\n",
	    cli_role },
	{ "name", 1, 0, "name LABEL", "label this connection",
	    "Labels the connection (1 to 64 bytes of A-Z a-z 0-9 _ . : / - @)\n"
	    "as holders, waiters and clients show it; at the prompt and in a\n"
	    "pipe, for the commands that follow (on the command line, --name).\n",
	    cli_name },
	{ "clients", 0, 0, "clients", "semd's connections",
	    "One line each: id, address, name (--name), age, idle time, bound\n"
	    "permits, whether it waits, its last command. The id is owner= of\n"
	    "holders and what kill takes.\n", cli_clients },
	{ "kill", 1, 0, "kill ID", "close a connection (operators)",
	    "Closes connection ID (see clients) as if its client had gone: its\n"
	    "bound permits are released, its waiter dropped. Exit 3 (ERR\n"
	    "NOCONN) when no connection has that id.\n", cli_kill },
	{ "watch", 2, CLI_OPT_TIMEOUT | CLI_OPT_WORDS,
	    "watch SEM TOKEN [--timeout D]", "wait until a grant ends",
	    "Prints how it ended: released, expired, revoked, closed (its\n"
	    "connection closed) or unclaimed (not attached after a restart).\n"
	    "Exit 1 if it is still held when the timeout runs out, 3 (ERR\n"
	    "NOTHELD) at once if it is not held. At the prompt Ctrl-C cancels.\n"
	    CLI_D_OPT CLI_D_WORDS "  watch SEM TOKEN [TIMEOUT ms]\n",
	    cli_watch },
	{ "quit", 0, 0, "quit", "send QUIT (prompt: leave)", NULL,
	    cli_quit },
	{ "run", 1, CLI_OPT_N | CLI_OPT_TIMEOUT | CLI_OPT_CMD | CLI_OPT_SEMS,
	    "run SEM[:N] [-n N] [--timeout D] [OPTIONS] -- CMD...",
	    "hold permits while CMD runs",
	    "Options: -s|--sem SEM[:N] (again for each more semaphore: all are\n"
	    "taken at once, or none), --lease D, -E|--conflict-exit-code N (75),\n"
	    "--kill-after D (10), --on-loss kill|ignore, --name LABEL. CMD gets\n"
	    "SEMD_SEM, SEMD_TOKEN and SEMD_N (of the first semaphore) and\n"
	    "SEMD_SEMS (each SEM:N). Exits with CMD's status; 75 not granted in\n"
	    "time, 76 the permit was lost while CMD ran; see semd-cli(1).\n"
	    "  run -s gpu:1 -s db:2 -- ./job\n"
	    CLI_D_OPT, cli_run },
	{ "top", 0, CLI_OPT_OWN, "top [-i D] [-n N]",
	    "a live view of the semaphores",
	    "Full screen, refreshed every D (-i, --interval; 1 s): connections,\n"
	    "role, persistence and commands/s, then one row per semaphore,\n"
	    "busiest first: capacity, used, holders, waiters, grants/s, the\n"
	    "acquire wait's p50 and p99 (since semd started), timeouts/s.\n"
	    "Keys: q quits, s changes the sort, / filters by name. When stdout\n"
	    "is not a terminal, prints one frame as text (two samples D apart,\n"
	    "for the rates); -n N (--iterations) stops after N frames.\n"
	    CLI_D_OPT, cli_top },
	{ "help", 0, CLI_OPT_ONE_MORE, "help [COMMAND]",
	    "list commands, or explain one", NULL, cli_help_cmd },
};
#define CLI_NCMDS	(sizeof(cli_cmds) / sizeof(cli_cmds[0]))

static const struct cli_cmd *
cli_cmd_find(const char *name)
{
	size_t	i;

	for (i = 0; i < CLI_NCMDS; i++) {
		if (strcasecmp(name, cli_cmds[i].name) == 0)
			return (&cli_cmds[i]);
	}
	return (NULL);
}

void
cli_help(void)
{
	size_t	i;

	printf("usage: semd-cli [-h HOST[:PORT][,HOST[:PORT]...]] [-p PORT] "
	    "[-s SOCKET]\n"
	    "                [-a PASSWORD] [--name LABEL] [--json] COMMAND "
	    "...\n"
	    "       semd-cli [OPTIONS]          (a prompt on a terminal; "
	    "else one command\n"
	    "                                    a line from standard input)\n"
	    "commands (semd-cli help COMMAND, or COMMAND --help, says more):\n");
	for (i = 0; i < CLI_NCMDS; i++)
		printf("  %s\n", cli_cmds[i].usage);
	printf("durations: 30 (seconds), 1.5s, 250ms, 5m, 1h; the protocol's "
	    "own words typed\n"
	    "  in upper case (ACQUIRE jobs 2 TIMEOUT 100) keep its milliseconds\n"
	    "exit status: 0 done, 1 not granted in time, 2 usage, 3 server "
	    "error or\n"
	    "  unknown outcome, 4 cannot connect (from a pipe: the highest)\n"
	    "environment: SEMD_HOSTS, SEMD_HOST, SEMD_PORT, SEMD_SOCKET, "
	    "SEMD_PASSWORD,\n"
	    "  SEMD_NAME, SEMD_CLI_HISTFILE\n");
}

/* The prompt's help: its commands and keys. */
void
cli_help_prompt(void)
{
	size_t	i;

	printf("commands (help COMMAND says more):\n");
	for (i = 0; i < CLI_NCMDS; i++) {
		if (strcmp(cli_cmds[i].name, "quit") == 0)
			continue;
		printf("  %-45s %s\n", cli_cmds[i].usage, cli_cmds[i].summary);
	}
	printf("  %-45s %s\n", "quit, exit", "leave (also Ctrl-D)");
	printf("keys: Ctrl-C cancels a waiting acquire or watch, or the line "
	    "being typed;\n"
	    "  Ctrl-D on an empty line leaves; permits acquired here without a "
	    "lease\n"
	    "  are held until released or the prompt ends\n");
}

/* help NAME: its usage and explanation; 0, or 2 if there is none. */
int
cli_help_cmd_text(const char *name)
{
	const struct cli_cmd	*cmd;

	if ((cmd = cli_cmd_find(name)) == NULL) {
		cli_usage_error("help: unknown command '%s'", name);
		return (CLI_EXIT_USAGE);
	}
	printf("usage: %s\n  %s.\n", cmd->usage, cmd->summary);
	if (cmd->help != NULL)
		fputs(cmd->help, stdout);
	fflush(stdout);
	return (CLI_EXIT_OK);
}

int
cli_dispatch(struct cli *cli, int argc, char **argv)
{
	const struct cli_cmd	*cmd;
	struct cli_args		 a;
	int			 i, rc, json = cli->json;

	if ((cmd = cli_cmd_find(argv[0])) == NULL) {
		cli_usage_error("unknown command '%s'", argv[0]);
		return (CLI_EXIT_USAGE);
	}
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--help") == 0)
			return (cli_help_cmd_text(cmd->name));
	}
	if (cli->from_pipe && (cmd->flags & CLI_OPT_CMD)) {
		cli_usage_error("%s: not from a pipe (its command would share "
		    "the input); give it on the command line", cmd->name);
		return (CLI_EXIT_USAGE);
	}
	if (cli_parse_args(cmd->name, cmd->flags, argc - 1, argv + 1, &a) != 0)
		return (CLI_EXIT_USAGE);
	if (a.npos != cmd->npos && !((cmd->flags & CLI_OPT_ONE_MORE) &&
	    a.npos == cmd->npos + 1)) {
		cli_usage_error("usage: %s", cmd->usage);
		return (CLI_EXIT_USAGE);
	}
	if (cmd->flags & CLI_OPT_CMD && a.argc == 0) {
		cli_usage_error("usage: %s", cmd->usage);
		return (CLI_EXIT_USAGE);
	}
	a.wire = cli_is_upper(argv[0]);
	if (a.lease_ms == 0)		/* --lease 0: no lease, as libsemc */
		a.lease_ms = SEMC_BOUND;
	cli->json |= a.json;
	rc = cmd->fn(cli, &a);
	cli->json = json;
	fflush(stdout);
	return (rc);
}
