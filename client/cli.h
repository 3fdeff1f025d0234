/*
 * cli.h: what the files of semd-cli share.
 */
#ifndef CLI_H
#define CLI_H

#include <stdint.h>
#include <stdio.h>

#include "semc.h"

/* semd-cli's documented exit statuses (semd-cli(1)). */
enum cli_exit {
	CLI_EXIT_OK = 0,	/* done */
	CLI_EXIT_TIMEOUT = 1,	/* not granted in time */
	CLI_EXIT_USAGE = 2,	/* bad command line */
	CLI_EXIT_SERVER = 3,	/* semd refused, or the outcome is unknown */
	CLI_EXIT_CONNECT = 4,	/* semd could not be reached: nothing done */
	CLI_EXIT_TEMPFAIL = 75,	/* run: not granted in time (-E changes it) */
	CLI_EXIT_LOST = 76	/* run: the permit was lost while CMD ran */
};

/* run's own options (cli-run.c). */
struct cli_run_opts {
	int		 conflict_exit;	/* -E, --conflict-exit-code: 75 */
	int64_t		 kill_after_ms;	/* --kill-after: 10 s */
	int		 on_loss_ignore; /* --on-loss ignore */
	const char	*name;		/* --name; NULL: SEMD_NAME, default */
};

struct cli_held;

struct cli {
	struct semc	*c;
	struct semc_opts opts;
	const char	*name;		/* --name or SEMD_NAME; NULL: none */
	char		*password;	/* of a good AUTH at the prompt */
	int		 json;
	int		 interactive;	/* the prompt or a pipe: many commands
					   on one connection, so bound permits
					   are allowed */
	int		 prompt;	/* the prompt (a terminal) */
	int		 from_pipe;	/* commands read from a pipe or file */
	struct cli_held	*held;		/* the prompt's other connections,
					   each holding one bound permit */
};

/* A semaphore and its count, from NAME[:N] (cli-sems.c). */
struct cli_sem {
	char		 name[SEMC_NAME_MAX + 1];
	uint32_t	 n;
	int		 n_given;	/* ":N" was written */
};

/* A command's arguments after its name. */
#define CLI_MAX_POS	3
struct cli_args {
	struct cli_run_opts run;	/* run's options */
	const char	*pos[CLI_MAX_POS];
	int		 npos;
	uint32_t	 n;		/* -n, 1 by default */
	int64_t		 timeout_ms;	/* --timeout; SEMC_FOREVER */
	int64_t		 lease_ms;	/* --lease; SEMC_BOUND */
	char		**argv;		/* after "--" (run); all (top) */
	int		 argc;
	int		 json;		/* --json after the command */
	int		 n_given;	/* -n or the protocol's <n> */
	int		 wire;		/* command typed in upper case, as the
					   protocol spells it: REFRESH's
					   duration is then its <ms> */
	struct cli_sem	 sems[SEMC_ACQUIRE_ALL_MAX];	/* NAME[:N] words
					   (CLI_OPT_SEMS); pos[0] is the
					   first name */
	int		 nsems;
	const char	*id;		/* --id, ID: the request id; NULL */
};

/* Which options a command takes. */
#define CLI_OPT_N	0x1
#define CLI_OPT_TIMEOUT	0x2
#define CLI_OPT_LEASE	0x4
#define CLI_OPT_CMD	0x8		/* "-- CMD ARGS..." */
#define CLI_OPT_WORDS	0x10		/* the protocol's own words too: <n>
					   after SEM, TIMEOUT <ms>, LEASE <ms> */
#define CLI_OPT_ONE_MORE 0x20		/* one optional positional argument */
#define CLI_OPT_OWN	0x40		/* its words are its own, in argv */
#define CLI_OPT_SEMS	0x80		/* SEM is NAME[:N], several allowed */
#define CLI_OPT_ID	0x100		/* --id ID, and the protocol's ID */

/* cli-args.c */
int64_t	 cli_now_ms(void);
extern int cli_errors_in_place;
int	 cli_is_upper(const char *word);
const char *cli_optval(const char *name, int argc, char **argv, int *i);
int	 cli_parse_duration(const char *s, int64_t *ms);
int	 cli_parse_proto_ms(const char *s, int64_t *ms);
int	 cli_parse_u32(const char *s, uint32_t min, uint32_t *out);
int	 cli_parse_token(const char *s, uint64_t *out);
int	 cli_parse_args(const char *cmd, int flags, int argc, char **argv,
	    struct cli_args *a);
void	 cli_usage_error(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));

/* cli-sems.c */
int	 cli_sem_split(const char *cmd, const char *word, struct cli_sem *out);
int	 cli_sem_add(const char *cmd, const char *word, struct cli_args *a);
int	 cli_sems_finish(const char *cmd, struct cli_args *a);

/* cli-cmd.c: run one command line (argv[0] is the command). */
int	 cli_dispatch(struct cli *cli, int argc, char **argv);
int	 cli_fail(struct cli *cli, enum semc_err err);
enum semc_err cli_acquire_call(struct semc *c, const struct cli_args *a,
	    int64_t timeout_ms, uint64_t *token);
int	 cli_fail_on(struct cli *cli, struct semc *c, enum semc_err err);
int	 cli_exit_worse(int a, int b);
int	 cli_watch_done(struct cli *cli, struct semc *c, enum semc_err err,
	    enum semc_watch_reason reason);
void	 cli_help(void);
int	 cli_help_cmd_text(const char *name);
void	 cli_help_prompt(void);

/* cli-out.c */
void	 cli_json_str(const char *s);
void	 cli_out_ok(struct cli *cli, const char *text);
void	 cli_out_token(struct cli *cli, uint64_t token);
void	 cli_out_info(struct cli *cli, const struct semc_info *info, int n);
void	 cli_out_check(struct cli *cli, const struct semc_check *chk);
void	 cli_out_holders(struct cli *cli, const struct semc_holder *h,
	    size_t n);
void	 cli_out_waiters(struct cli *cli, const struct semc_waiter *w,
	    size_t n);
void	 cli_out_clients(struct cli *cli, const struct semc_client *cl,
	    size_t n);
void	 cli_out_reason(struct cli *cli, enum semc_watch_reason reason);
void	 cli_out_kv(struct cli *cli, const struct semc_stat *s, size_t n,
	    int oneline);
void	 cli_out_error(struct cli *cli, enum semc_err err, const char *msg);

/* cli-run.c */
int	 cli_run(struct cli *cli, const struct cli_args *a);
void	 cli_run_defaults(struct cli_args *a);
int	 cli_run_option(int argc, char **argv, int *i, struct cli_args *a);

/* cli-top.c */
int	 cli_top(struct cli *cli, const struct cli_args *a);

/* cli-prompt.c: the prompt, and commands read from a pipe */
int	 cli_prompt(struct cli *cli);
int	 cli_pipe(struct cli *cli, FILE *in);
int	 cli_prompt_acquire(struct cli *cli, const struct cli_args *a);
int	 cli_prompt_watch(struct cli *cli, const char *sem, uint64_t token,
	    int64_t timeout_ms);
struct semc *cli_prompt_conn(struct cli *cli, const char *sem,
	    uint64_t token);
void	 cli_prompt_forget(struct cli *cli, const char *sem, uint64_t token);
void	 cli_prompt_free(struct cli *cli);

#endif /* CLI_H */
