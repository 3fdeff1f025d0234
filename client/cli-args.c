/*
 * cli-args.c: semd-cli's values (durations such as 30, 1.5s, 250ms, 5m;
 * counts; tokens) and the options of a command.
 *
 * Two ways to say the same thing are accepted: the CLI's options
 * (acquire jobs -n 2 --timeout 30 --lease 1m, durations in the CLI's
 * grammar, a bare number is seconds) and the protocol's own words after
 * the semaphore (ACQUIRE jobs 2 TIMEOUT 100 LEASE 60000, in the
 * protocol's milliseconds). Keywords are recognised only after the first
 * positional argument, so a semaphore may be named "timeout". acquire,
 * try and run name their semaphores as NAME[:N] (cli-sems.c), one or
 * several.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "cli.h"
#include "proto.h"

/* The monotonic clock, in ms: for waits and rates. */
int64_t
cli_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* Commands from a pipe: errors also on stdout, in place (cli_pipe). */
int	cli_errors_in_place;

void
cli_usage_error(const char *fmt, ...)
{
	va_list	ap;

	fputs("semd-cli: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'semd-cli --help'.\n", stderr);
	if (cli_errors_in_place) {
		fputs("(error) ERR ", stdout);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		putchar('\n');
		fflush(stdout);
	}
}

/*
 * A duration of the command line's options (--timeout 1.5s): a bare
 * number is seconds, as for flock -w, timeout and sleep; with a unit
 * (ms, s, m, h) and maybe a fraction otherwise. At most 2^31-1 ms, the
 * protocol's limit. 0, or -1 when malformed.
 */
int
cli_parse_duration(const char *s, int64_t *ms)
{
	uint64_t	v;

	if (proto_parse_duration_ms(s, strlen(s), 1000, PROTO_INT_MAX,
	    &v) != 0)
		return (-1);
	*ms = (int64_t)v;
	return (0);
}

/* 1 if word has letters and all are upper case: the protocol's spelling. */
int
cli_is_upper(const char *word)
{
	int	letters = 0;

	for (; *word != '\0'; word++) {
		if (*word >= 'a' && *word <= 'z')
			return (0);
		if (*word >= 'A' && *word <= 'Z')
			letters = 1;
	}
	return (letters);
}

/*
 * A duration written as the protocol's <ms> (TIMEOUT 100, REFRESH's
 * value): a bare number is milliseconds, as on the wire; a unit may be
 * added (5m). 0, or -1 when malformed.
 */
int
cli_parse_proto_ms(const char *s, int64_t *ms)
{
	uint64_t	v;

	if (proto_parse_duration_ms(s, strlen(s), 1, PROTO_INT_MAX, &v) != 0)
		return (-1);
	*ms = (int64_t)v;
	return (0);
}

int
cli_parse_u32(const char *s, uint32_t min, uint32_t *out)
{
	uint64_t	v;

	if (proto_parse_u64(s, strlen(s), PROTO_INT_MAX, &v) != 0 || v < min)
		return (-1);
	*out = (uint32_t)v;
	return (0);
}

int
cli_parse_token(const char *s, uint64_t *out)
{
	return (proto_parse_u64(s, strlen(s), UINT64_MAX, out));
}

/* The value of an option given as "--opt V" or "--opt=V"; NULL if none. */
const char *
cli_optval(const char *name, int argc, char **argv, int *i)
{
	size_t	len = strlen(name);

	if (strncmp(argv[*i], name, len) != 0)
		return (NULL);
	if (argv[*i][len] == '=')
		return (argv[*i] + len + 1);
	if (argv[*i][len] != '\0')
		return (NULL);
	if (*i + 1 >= argc)
		return ("");	/* refused as a value by the caller */
	return (argv[++*i]);
}

/* Parse one duration option; -1 after a usage error. */
static int
cli_opt_duration(const char *cmd, const char *name, const char *v,
    int64_t *ms)
{
	if (cli_parse_duration(v, ms) == 0)
		return (0);
	cli_usage_error("%s: %s: invalid duration '%s' (seconds, or a number "
	    "with a unit: 30, 1.5s, 250ms, 5m, 1h; at most 2147483647ms)",
	    cmd, name, v);
	return (-1);
}

/*
 * The value of a protocol keyword (TIMEOUT 100, LEASE 500): in the
 * protocol's own spelling, upper case, it is the protocol's <ms>;
 * otherwise (lease 30) it is a duration as a person types one, a bare
 * number in seconds. -1 after a usage error.
 */
static int
cli_word_duration(const char *cmd, const char *word, const char *v,
    int64_t *ms)
{
	if (cli_is_upper(word)) {
		if (cli_parse_proto_ms(v, ms) == 0)
			return (0);
		cli_usage_error("%s: %s: invalid duration '%s' (milliseconds, "
		    "as the protocol's %s; or with a unit: 1.5s, 5m; at most "
		    "2147483647ms)", cmd, word, v, word);
		return (-1);
	}
	return (cli_opt_duration(cmd, word, v, ms));
}

/* 1 if argv[i] is the keyword kw (any case) and a value follows it. */
static int
cli_keyword(const char *kw, int argc, char **argv, int i)
{
	return (strcasecmp(argv[i], kw) == 0 && i + 1 < argc);
}

/* Set the count once, from -n or the protocol's <n>; -1 after an error. */
static int
cli_set_n(const char *cmd, const char *v, struct cli_args *a)
{
	uint32_t	n;

	if (cli_parse_u32(v, 1, &n) != 0) {
		cli_usage_error("%s: -n: expected 1..%u, not '%s'", cmd,
		    PROTO_INT_MAX, v);
		return (-1);
	}
	if (a->n_given && n != a->n) {
		cli_usage_error("%s: the count is given twice (%u and %u)",
		    cmd, a->n, n);
		return (-1);
	}
	a->n = n;
	a->n_given = 1;
	return (0);
}

/*
 * Split a command's words (after its name) into positional arguments and
 * the options flags allows. 0, or -1 after printing a usage error.
 */
int
cli_parse_args(const char *cmd, int flags, int argc, char **argv,
    struct cli_args *a)
{
	const char	*v;
	int		 i, rc;

	memset(a, 0, sizeof(*a));
	if (flags & CLI_OPT_CMD)
		cli_run_defaults(a);
	a->n = 1;
	a->timeout_ms = SEMC_FOREVER;
	a->lease_ms = SEMC_BOUND;
	if (flags & CLI_OPT_OWN) {
		a->argv = argv;
		a->argc = argc;
		return (0);
	}
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0 && (flags & CLI_OPT_CMD)) {
			a->argv = argv + i + 1;
			a->argc = argc - i - 1;
			return (cli_sems_finish(cmd, a));
		}
		/* run's options, its durations included (cli-run.c). */
		if ((flags & CLI_OPT_CMD) &&
		    (rc = cli_run_option(argc, argv, &i, a)) != 0) {
			if (rc == -1)
				return (-1);
			continue;
		}
		if (strcmp(argv[i], "--json") == 0)
			a->json = 1;
		else if ((flags & CLI_OPT_N) &&
		    ((v = cli_optval("-n", argc, argv, &i)) != NULL ||
		    (v = cli_optval("--n", argc, argv, &i)) != NULL)) {
			if (cli_set_n(cmd, v, a) != 0)
				return (-1);
		} else if ((flags & CLI_OPT_WORDS) &&
		    (a->npos > 0 || a->nsems > 0) &&
		    (flags & CLI_OPT_TIMEOUT) &&
		    cli_keyword("TIMEOUT", argc, argv, i)) {
			i++;
			if (cli_word_duration(cmd, argv[i - 1], argv[i],
			    &a->timeout_ms) != 0)
				return (-1);
		} else if ((flags & CLI_OPT_WORDS) &&
		    (a->npos > 0 || a->nsems > 0) &&
		    (flags & CLI_OPT_LEASE) &&
		    cli_keyword("LEASE", argc, argv, i)) {
			i++;
			if (cli_word_duration(cmd, argv[i - 1], argv[i],
			    &a->lease_ms) != 0)
				return (-1);
		} else if ((flags & CLI_OPT_WORDS) && (flags & CLI_OPT_ID) &&
		    a->nsems > 0 && cli_keyword("ID", argc, argv, i)) {
			a->id = argv[++i];
		} else if ((flags & CLI_OPT_WORDS) && (flags & CLI_OPT_N) &&
		    (a->npos == 1 || (a->nsems == 1 && !a->sems[0].n_given)) &&
		    argv[i][0] >= '0' && argv[i][0] <= '9') {
			if (cli_set_n(cmd, argv[i], a) != 0)
				return (-1);
		} else if ((flags & CLI_OPT_ID) &&
		    (v = cli_optval("--id", argc, argv, &i)) != NULL) {
			a->id = v;
		} else if ((flags & CLI_OPT_TIMEOUT) &&
		    (v = cli_optval("--timeout", argc, argv, &i)) != NULL) {
			if (cli_opt_duration(cmd, "--timeout", v,
			    &a->timeout_ms) != 0)
				return (-1);
		} else if ((flags & CLI_OPT_LEASE) &&
		    (v = cli_optval("--lease", argc, argv, &i)) != NULL) {
			if (cli_opt_duration(cmd, "--lease", v,
			    &a->lease_ms) != 0)
				return (-1);
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			cli_usage_error("%s: unknown option '%s'", cmd,
			    argv[i]);
			return (-1);
		} else if (flags & CLI_OPT_SEMS) {
			if (cli_sem_add(cmd, argv[i], a) != 0)
				return (-1);
		} else if (a->npos == CLI_MAX_POS) {
			cli_usage_error("%s: too many arguments", cmd);
			return (-1);
		} else
			a->pos[a->npos++] = argv[i];
	}
	if (flags & CLI_OPT_CMD) {
		cli_usage_error("%s: expected '-- COMMAND [ARGS...]'", cmd);
		return (-1);
	}
	return (cli_sems_finish(cmd, a));
}
