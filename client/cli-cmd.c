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

/* Report a failed call; returns its exit status. */
int
cli_fail(struct cli *cli, enum semc_err err)
{
	cli_out_error(cli, err, semc_errmsg(cli->c));
	return (cli_exit_of(err));
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

static int
cli_auth(struct cli *cli, const struct cli_args *a)
{
	return (cli_done(cli, semc_auth(cli->c, a->pos[0]), "OK"));
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
	if (is_try)
		err = semc_try(cli->c, a->pos[0], a->n, a->lease_ms, &token);
	else
		err = semc_acquire(cli->c, a->pos[0], a->n, a->timeout_ms,
		    a->lease_ms, &token);
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

static int
cli_release(struct cli *cli, const struct cli_args *a)
{
	return (cli_sem_token(cli, a, semc_release));
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
	if (cli_parse_duration(a->pos[2], &ms) != 0) {
		cli_usage_error("refresh: invalid duration '%s' (e.g. 500ms, "
		    "30s, 5m)", a->pos[2]);
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

static int
cli_info(struct cli *cli, const struct cli_args *a)
{
	struct semc_info	info;
	enum semc_err		err;

	if ((err = semc_info(cli->c, a->pos[0], &info)) != SEMC_OK)
		return (cli_fail(cli, err));
	cli_out_info(cli, &info, -1);
	return (CLI_EXIT_OK);
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
	cli_out_stats(cli, s, n);
	free(s);
	return (CLI_EXIT_OK);
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
	(void)cli;
	(void)a;
	cli_help();
	return (CLI_EXIT_OK);
}

static const struct cli_cmd cli_cmds[] = {
	{ "ping", 0, 0, "ping", cli_ping },
	{ "auth", 1, 0, "auth PASSWORD", cli_auth },
	{ "create", 2, 0, "create SEM CAPACITY", cli_create },
	{ "resize", 2, 0, "resize SEM CAPACITY", cli_resize },
	{ "delete", 1, 0, "delete SEM", cli_delete },
	{ "acquire", 1, CLI_OPT_N | CLI_OPT_TIMEOUT | CLI_OPT_LEASE,
	    "acquire SEM [-n N] [--timeout D] --lease D", cli_acquire },
	{ "try", 1, CLI_OPT_N | CLI_OPT_LEASE, "try SEM [-n N] --lease D",
	    cli_try },
	{ "release", 2, 0, "release SEM TOKEN", cli_release },
	{ "refresh", 3, 0, "refresh SEM TOKEN D", cli_refresh },
	{ "attach", 2, 0, "attach SEM TOKEN", cli_attach },
	{ "check", 2, 0, "check SEM TOKEN", cli_check },
	{ "revoke", 2, 0, "revoke SEM TOKEN", cli_revoke },
	{ "info", 1, 0, "info SEM", cli_info },
	{ "holders", 1, 0, "holders SEM", cli_holders },
	{ "waiters", 1, 0, "waiters SEM", cli_waiters },
	{ "list", 0, 0, "list", cli_list },
	{ "stats", 0, 0, "stats", cli_stats },
	{ "quit", 0, 0, "quit", cli_quit },
	{ "run", 1, CLI_OPT_N | CLI_OPT_TIMEOUT | CLI_OPT_CMD,
	    "run SEM [-n N] [--timeout D] -- CMD [ARGS...]", cli_run },
	{ "help", 0, 0, "help", cli_help_cmd },
};

void
cli_help(void)
{
	size_t	i;

	printf("usage: semd-cli [-h HOST[:PORT][,HOST[:PORT]...]] [-p PORT] "
	    "[-s SOCKET]\n"
	    "                [-a PASSWORD] [--json] COMMAND ...\n"
	    "       semd-cli [OPTIONS]          (a prompt, on a terminal)\n"
	    "commands:\n");
	for (i = 0; i < sizeof(cli_cmds) / sizeof(cli_cmds[0]); i++)
		printf("  %s\n", cli_cmds[i].usage);
	printf("durations: 500ms, 30s, 5m, 1h (a bare number is ms)\n"
	    "exit status: 0 done, 1 not granted in time, 2 usage, "
	    "3 server error or unknown outcome, 4 cannot connect\n"
	    "environment: SEMD_HOSTS, SEMD_HOST, SEMD_PORT, SEMD_SOCKET, "
	    "SEMD_PASSWORD\n");
}

int
cli_dispatch(struct cli *cli, int argc, char **argv)
{
	const struct cli_cmd	*cmd = NULL;
	struct cli_args		 a;
	size_t			 i;
	int			 rc, json = cli->json;

	for (i = 0; i < sizeof(cli_cmds) / sizeof(cli_cmds[0]); i++) {
		if (strcasecmp(argv[0], cli_cmds[i].name) == 0)
			cmd = &cli_cmds[i];
	}
	if (cmd == NULL) {
		cli_usage_error("unknown command '%s'", argv[0]);
		return (CLI_EXIT_USAGE);
	}
	if (cli_parse_args(cmd->name, cmd->flags, argc - 1, argv + 1, &a) != 0)
		return (CLI_EXIT_USAGE);
	if (a.npos != cmd->npos) {
		cli_usage_error("usage: %s", cmd->usage);
		return (CLI_EXIT_USAGE);
	}
	if (cmd->flags & CLI_OPT_CMD && a.argc == 0) {
		cli_usage_error("usage: %s", cmd->usage);
		return (CLI_EXIT_USAGE);
	}
	cli->json |= a.json;
	rc = cmd->fn(cli, &a);
	cli->json = json;
	fflush(stdout);
	return (rc);
}
