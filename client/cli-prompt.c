/*
 * cli-prompt.c: semd-cli with no command, on a terminal: a prompt with
 * line editing and history (libedit). Every command of the command line
 * works here on one connection, so a permit acquired without --lease is
 * held until it is released, the prompt ends, or the connection closes.
 * History is kept in ~/.semd_cli_history, without AUTH lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <editline/readline.h>

#include "cli.h"

#define CLI_PROMPT_WORDS	64

static char *
cli_prompt_histfile(void)
{
	const char	*home = getenv("HOME");
	char		*path;

	if (home == NULL || *home == '\0')
		return (NULL);
	if (asprintf(&path, "%s/.semd_cli_history", home) == -1)
		return (NULL);
	return (path);
}

/* Split line in place into blank-separated words; returns how many. */
static int
cli_prompt_split(char *line, char **words, int max)
{
	char	*save = NULL, *w;
	int	 n = 0;

	for (w = strtok_r(line, " \t", &save); w != NULL && n < max;
	    w = strtok_r(NULL, " \t", &save))
		words[n++] = w;
	return (n);
}

int
cli_prompt(struct cli *cli)
{
	char	*line, *copy, *words[CLI_PROMPT_WORDS], prompt[300];
	char	*hist = cli_prompt_histfile();
	int	 n, rc = CLI_EXIT_OK;

	cli->interactive = 1;
	if (cli->opts.unix_path != NULL)
		snprintf(prompt, sizeof(prompt), "semd unix:%.200s> ",
		    cli->opts.unix_path);
	else
		snprintf(prompt, sizeof(prompt), "semd %.200s:%d> ",
		    cli->opts.host != NULL ? cli->opts.host : "127.0.0.1",
		    cli->opts.port > 0 ? cli->opts.port : SEMC_DEFAULT_PORT);
	using_history();
	if (hist != NULL)
		read_history(hist);
	while ((line = readline(prompt)) != NULL) {
		if ((copy = strdup(line)) == NULL)
			break;
		n = cli_prompt_split(copy, words, CLI_PROMPT_WORDS);
		if (n > 0 && strcasecmp(words[0], "auth") != 0)
			add_history(line);
		if (n > 0 && (strcasecmp(words[0], "exit") == 0 ||
		    strcasecmp(words[0], "quit") == 0)) {
			free(copy);
			free(line);
			break;
		}
		if (n > 0)
			rc = cli_dispatch(cli, n, words);
		free(copy);
		free(line);
	}
	if (hist != NULL)
		write_history(hist);
	free(hist);
	return (rc);
}
