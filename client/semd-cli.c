/*
 * semd-cli.c: main. Global options (-h -p -s -a --name --json, or
 * SEMD_HOST, SEMD_PORT, SEMD_SOCKET, SEMD_PASSWORD, SEMD_NAME; SEMD_HOSTS
 * is read by libsemc), then one command; with none, the interactive
 * prompt when stdin is a terminal, else commands read from stdin, one a
 * line. -h takes one host or a list (owner and standbys).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "proto.h"

static int
cli_port(const char *s, int *port)
{
	uint32_t	v;

	if (cli_parse_u32(s, 1, &v) != 0 || v > 65535) {
		cli_usage_error("invalid port '%s'", s);
		return (-1);
	}
	*port = (int)v;
	return (0);
}

/* A connection's label for NAME (semd's alphabet or @, 1..64 bytes). */
static int
cli_name(const char *s, const char **name)
{
	if (!proto_valid_label(s, strlen(s))) {
		cli_usage_error("invalid name '%s' (1 to 64 bytes of A-Z a-z "
		    "0-9 _ . : / - @)", s);
		return (-1);
	}
	*name = s;
	return (0);
}

int
main(int argc, char **argv)
{
	struct cli	 cli;
	const char	*env;
	int		 i, rc;

	memset(&cli, 0, sizeof(cli));
	cli.opts.size = sizeof(cli.opts);	/* as SEMC_OPTS_INIT */
	cli.opts.host = getenv("SEMD_HOST");
	cli.opts.unix_path = getenv("SEMD_SOCKET");
	cli.opts.password = getenv("SEMD_PASSWORD");
	if ((env = getenv("SEMD_PORT")) != NULL && *env != '\0' &&
	    cli_port(env, &cli.opts.port) != 0)
		return (CLI_EXIT_USAGE);
	if ((env = getenv("SEMD_NAME")) != NULL && *env != '\0' &&
	    cli_name(env, &cli.name) != 0)
		return (CLI_EXIT_USAGE);

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *opt = argv[i];

		if (strcmp(opt, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(opt, "--json") == 0) {
			cli.json = 1;
			continue;
		}
		if (strncmp(opt, "--name=", 7) == 0) {
			if (cli_name(opt + 7, &cli.name) != 0)
				return (CLI_EXIT_USAGE);
			continue;
		}
		if (strcmp(opt, "--name") == 0) {
			if (++i == argc) {
				cli_usage_error("option --name needs a value");
				return (CLI_EXIT_USAGE);
			}
			if (cli_name(argv[i], &cli.name) != 0)
				return (CLI_EXIT_USAGE);
			continue;
		}
		if (strcmp(opt, "--help") == 0) {
			cli_help();
			return (CLI_EXIT_OK);
		}
		if (strcmp(opt, "--version") == 0) {
			printf("semd-cli %s\n", PACKAGE_VERSION);
			return (CLI_EXIT_OK);
		}
		if (strlen(opt) != 2 || strchr("hpsa", opt[1]) == NULL) {
			cli_usage_error("unknown option '%s'", opt);
			return (CLI_EXIT_USAGE);
		}
		if (++i == argc) {
			cli_usage_error("option %s needs a value", opt);
			return (CLI_EXIT_USAGE);
		}
		switch (opt[1]) {
		case 'h':	/* a list; one host is a list of one */
			cli.opts.hosts = argv[i];
			cli.opts.host = NULL;
			cli.opts.unix_path = NULL;
			break;
		case 'p':
			if (cli_port(argv[i], &cli.opts.port) != 0)
				return (CLI_EXIT_USAGE);
			cli.opts.unix_path = NULL;
			break;
		case 's':
			cli.opts.unix_path = argv[i];
			break;
		case 'a':
			cli.opts.password = argv[i];
			break;
		}
	}
	cli.opts.name = cli.name;
	if (cli.opts.unix_path != NULL && *cli.opts.unix_path == '\0')
		cli.opts.unix_path = NULL;
	if (cli.opts.password != NULL && *cli.opts.password == '\0')
		cli.opts.password = NULL;
	if ((cli.c = semc_new(&cli.opts)) == NULL) {
		fprintf(stderr, "semd-cli: out of memory\n");
		return (CLI_EXIT_SERVER);
	}
	if (i < argc)
		rc = cli_dispatch(&cli, argc - i, argv + i);
	else if (isatty(STDIN_FILENO))
		rc = cli_prompt(&cli);
	else
		rc = cli_pipe(&cli, stdin);
	cli_prompt_free(&cli);
	semc_free(cli.c);
	return (rc);
}
