/*
 * cli-args.c: semd-cli's values (durations such as 500ms, 30s, 5m;
 * counts; tokens) and the options of a command.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "proto.h"

void
cli_usage_error(const char *fmt, ...)
{
	va_list	ap;

	fputs("semd-cli: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'semd-cli --help'.\n", stderr);
}

static const struct {
	const char	*suffix;
	uint64_t	 ms;
} cli_units[] = {
	{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60 * 1000 },
	{ "h", 60 * 60 * 1000 }
};

/*
 * A duration: decimal digits and a unit, ms (also none), s, m or h;
 * at most 2^31-1 ms, the protocol's limit. 0, or -1 when malformed.
 */
int
cli_parse_duration(const char *s, int64_t *ms)
{
	size_t		digits = strspn(s, "0123456789"), i;
	uint64_t	v;

	if (digits == 0 || proto_parse_u64(s, digits, PROTO_INT_MAX, &v) != 0)
		return (-1);
	for (i = 0; i < sizeof(cli_units) / sizeof(cli_units[0]); i++) {
		if (strcmp(s + digits, cli_units[i].suffix) != 0)
			continue;
		if (v > PROTO_INT_MAX / cli_units[i].ms)
			return (-1);
		*ms = (int64_t)(v * cli_units[i].ms);
		return (0);
	}
	return (-1);
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
	cli_usage_error("%s: %s: invalid duration '%s' (e.g. 500ms, 30s, 5m; "
	    "at most 2147483647ms)", cmd, name, v);
	return (-1);
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
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0 && (flags & CLI_OPT_CMD)) {
			a->argv = argv + i + 1;
			a->argc = argc - i - 1;
			return (0);
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
			if (cli_parse_u32(v, 1, &a->n) != 0) {
				cli_usage_error("%s: -n: expected 1..%u, not "
				    "'%s'", cmd, PROTO_INT_MAX, v);
				return (-1);
			}
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
	return (0);
}
