/*
 * config.h: semd's configuration, from a redis.conf-style file and from
 * "--directive value..." arguments, which override the file.
 *
 * Every directive is declared once, in the table in config.c, with its
 * type, bounds and default; the shipped semd.conf documents each one.
 */
#ifndef SEMD_CONFIG_H
#define SEMD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "redis-addr.h"

#define CONFIG_MAX_BIND		16
#define CONFIG_PIPELINE_MAX	64	/* persistence-pipeline's range */

/* persistence: what a grant's reply waits for. */
enum persist_mode {
	PERSIST_NONE,	/* memory only */
	PERSIST_SYNC,	/* a grant is answered once Redis has it */
	PERSIST_ASYNC	/* answered at once, written behind in order */
};

/* persistence left unset: none without redis, sync with it. */
#define PERSIST_UNSET	(-1)

/* A "semaphore NAME CAPACITY" line: created at start-up. */
struct config_sem {
	char		*name;
	uint32_t	 capacity;
};

struct config {
	char			*bind[CONFIG_MAX_BIND];
	size_t			 nbind;
	int64_t			 port;
	char			*unixsocket;
	int64_t			 unixsocketperm;
	char			*requirepass;	/* NULL: no password */
	int64_t			 protected_mode;
	int64_t			 maxclients;
	int64_t			 max_line;
	int64_t			 max_output;
	int64_t			 max_output_total; /* of all connections */
	int64_t			 max_semaphores;
	int64_t			 tcp_keepalive_ms;
	int64_t			 timeout_ms;	/* idle; 0: off */
	int64_t			 line_timeout_ms; /* to finish a line */
	int64_t			 auth_timeout_ms; /* to AUTH, with requirepass */
	int64_t			 loglevel;
	char			*logfile;
	int64_t			 syslog;
	char			*syslog_ident;
	char			*syslog_facility;
	char			*pidfile;
	int64_t			 daemonize;
	struct config_sem	*sems;
	size_t			 nsems;

	int64_t			 persistence;	/* enum persist_mode */
	char			*redis;		/* as typed: see redis-addr.h */
	struct redis_addr	 redis_addr;	/* redis, parsed */
	char			*redis_password;
	char			*sentinel_password; /* of sentinel:// nodes */
	int64_t			 redis_db;
	char			*redis_prefix;
	int64_t			 redis_timeout_ms;
	int64_t			 redis_min_replicas; /* WAIT for them; 0: off */
	int64_t			 redis_replica_timeout_ms; /* WAIT's bound */
	int64_t			 reclaim_grace_ms;
	int64_t			 persistence_backlog;
	int64_t			 persistence_pipeline; /* batches in flight */
	int64_t			 owner_lease_ms;
	int64_t			 standby;	/* wait while another owns */
	char			*advertise;	/* NULL: first bind and port */

	int64_t			 metrics_port;	/* 0: no metrics endpoint */
	char			*metrics_bind;
	int64_t			 metrics_max_semaphores; /* then "_other" */
};

/* "none", "sync" or "async". */
const char	*config_persist_mode_name(enum persist_mode mode);

/* What the command line asks for, besides the configuration. */
enum config_action {
	CONFIG_RUN,	/* start the daemon */
	CONFIG_TEST,	/* -t: check and exit */
	CONFIG_DUMP,	/* -T: check, print the configuration, exit */
	CONFIG_EXIT	/* --help or --version, already printed */
};

/*
 * Fill *cfg from defaults, then the file given with -c (if any), then the
 * "--directive value..." words of argv. On a bad file or argument, write
 * one message to errbuf and return -1. Relative paths (logfile, pidfile,
 * unixsocket) are made absolute.
 */
int	config_load(struct config *cfg, int argc, char **argv,
	    enum config_action *action, char *errbuf, size_t errlen);
/*
 * What a start needs of the file system, short of taking the port: the
 * logfile, pidfile and unixsocket can be created. -1 and a message.
 */
int	config_check(const struct config *cfg, char *errbuf, size_t errlen);
/* Print every directive's effective value, as a loadable file (-T). */
void	config_dump(const struct config *cfg, FILE *fp);
/*
 * SIGHUP: move every reloadable directive whose value differs from next
 * into cur, and call note(arg, name, applied) for each directive that
 * differs (applied 0: it needs a restart, cur keeps its value). The
 * semaphore lists are swapped: cur gets the new one. next keeps what cur
 * gave up, for the caller to compare and then config_free.
 */
void	config_reload(struct config *cur, struct config *next,
	    void (*note)(void *arg, const char *name, int applied), void *arg);
/* Free everything config_load allocated. */
void	config_free(struct config *cfg);

/*
 * config-redis.c, for config.c: persistence's default and the checks that
 * span the Redis directives; 0, or -1 with a message in err.
 */
int	config_finish_redis(struct config *cfg, char *err, size_t errlen);

#endif /* SEMD_CONFIG_H */
