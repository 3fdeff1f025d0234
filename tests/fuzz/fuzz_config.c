/*
 * fuzz_config.c: libFuzzer harness for semd's configuration loader
 * (config_load, daemon/config.c), through its real entry point.
 *
 * The input up to its first NUL byte becomes the file given with -c (a
 * temporary file, rewritten for each input); the bytes after it, split on
 * NUL, become "--directive value..." words of the command line, which
 * override the file. Words that would make config_load print (--help,
 * --version, -T) or read another file (-c) are left out. A load must
 * either fail with a message, or give a configuration whose every
 * value is in its directive's range and whose cross-checks hold; either
 * way config_free() must leave nothing behind.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "proto.h"

#define ARGS_MAX	32

#define CHECK(cond, what) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_config: %s (%s)\n", (what), #cond); \
		abort();						\
	}								\
} while (0)

static char	conf_path[64];
static int	conf_fd = -1;

static void
conf_remove(void)
{
	unlink(conf_path);
}

/* Make the temporary file once; every input reuses it; exit removes it. */
static void
conf_open(void)
{
	const char	*dir = getenv("TMPDIR");

	if (conf_fd != -1)
		return;
	snprintf(conf_path, sizeof(conf_path), "%s/semd-fuzz-XXXXXX",
	    dir != NULL && strlen(dir) < 40 ? dir : "/tmp");
	if ((conf_fd = mkstemp(conf_path)) == -1) {
		perror("fuzz_config: mkstemp");
		abort();
	}
	atexit(conf_remove);
}

static void
conf_write(const uint8_t *p, size_t len)
{
	if (ftruncate(conf_fd, 0) != 0 ||
	    pwrite(conf_fd, p, len, 0) != (ssize_t)len) {
		perror("fuzz_config: write");
		abort();
	}
}

static int
skipped(const char *w)
{
	return (strcmp(w, "-c") == 0 || strcmp(w, "-T") == 0 ||
	    strcmp(w, "-h") == 0 ||
	    strcmp(w, "--help") == 0 || strcmp(w, "-v") == 0 ||
	    strcmp(w, "--version") == 0);
}

static void
check_config(const struct config *cfg)
{
	size_t	i, j;

	CHECK(cfg->nbind >= 1 && cfg->nbind <= CONFIG_MAX_BIND, "nbind");
	for (i = 0; i < cfg->nbind; i++)
		CHECK(cfg->bind[i] != NULL && cfg->bind[i][0] != '\0', "bind");
	CHECK(cfg->port >= 0 && cfg->port <= 65535, "port");
	CHECK(cfg->unixsocketperm >= 0 && cfg->unixsocketperm <= 0777,
	    "unixsocketperm");
	CHECK(cfg->maxclients >= 1 && cfg->maxclients <= 1000000,
	    "maxclients");
	CHECK(cfg->max_line >= 64 && cfg->max_line <= 1 << 20, "max-line");
	CHECK(cfg->max_output >= 4096 && cfg->max_output <= INT64_C(1) << 32,
	    "max-output");
	CHECK(cfg->max_semaphores >= 1 && cfg->max_semaphores <= UINT32_MAX,
	    "max-semaphores");
	CHECK(cfg->tcp_keepalive_ms >= 0 && cfg->tcp_keepalive_ms <= 7200000,
	    "tcp-keepalive");
	CHECK(cfg->timeout_ms >= 0 && cfg->timeout_ms <= 604800000, "timeout");
	CHECK(cfg->line_timeout_ms >= 0 && cfg->line_timeout_ms <= 3600000,
	    "line-timeout");
	CHECK(cfg->auth_timeout_ms >= 0 && cfg->auth_timeout_ms <= 3600000,
	    "auth-timeout");
	CHECK(cfg->syslog == 0 || cfg->syslog == 1, "syslog");
	CHECK(cfg->daemonize == 0 || cfg->daemonize == 1, "daemonize");
	CHECK(cfg->persistence_pipeline >= 1 &&
	    cfg->persistence_pipeline <= CONFIG_PIPELINE_MAX,
	    "persistence-pipeline");
	CHECK(cfg->redis_db >= 0 && cfg->redis_db <= 65535, "redis-db");
	CHECK(cfg->redis_timeout_ms >= 10 && cfg->redis_timeout_ms <= 60000,
	    "redis-timeout");
	CHECK(cfg->reclaim_grace_ms >= 0 && cfg->reclaim_grace_ms <= 86400000,
	    "reclaim-grace");
	CHECK(cfg->persistence_backlog >= 1 &&
	    cfg->persistence_backlog <= 100000000, "persistence-backlog");
	CHECK(cfg->owner_lease_ms >= 500 && cfg->owner_lease_ms <= 60000,
	    "owner-lease");
	CHECK(cfg->persistence >= PERSIST_NONE &&
	    cfg->persistence <= PERSIST_ASYNC, "persistence");
	CHECK(cfg->persistence == PERSIST_NONE || cfg->redis != NULL,
	    "persistence without redis");
	CHECK(!cfg->standby || cfg->persistence == PERSIST_SYNC,
	    "standby without persistence sync");
	CHECK(cfg->redis_prefix != NULL, "redis-prefix");
	for (i = 0; i < cfg->nsems; i++) {
		CHECK(proto_valid_name(cfg->sems[i].name,
		    strlen(cfg->sems[i].name)), "a semaphore's name");
		CHECK(cfg->sems[i].capacity >= 1 &&
		    cfg->sems[i].capacity <= PROTO_INT_MAX,
		    "a semaphore's capacity");
		for (j = 0; j < i; j++) {
			CHECK(strcmp(cfg->sems[i].name, cfg->sems[j].name) != 0,
			    "a semaphore declared twice");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config		 cfg;
	const uint8_t		*nul = memchr(data, '\0', size);
	size_t			 flen = nul != NULL ? (size_t)(nul - data) : size;
	char			*args = NULL, *argv[ARGS_MAX + 4], err[512];
	char			*w, *end;
	enum config_action	 action = CONFIG_RUN;
	int			 argc = 0, rc;

	conf_open();
	conf_write(data, flen);
	argv[argc++] = (char *)"semd";
	argv[argc++] = (char *)"-c";
	argv[argc++] = conf_path;
	if (nul != NULL) {
		/* The words after the NUL, each NUL-terminated in a copy. */
		if ((args = malloc(size - flen)) == NULL)
			abort();
		memcpy(args, nul + 1, size - flen - 1);
		args[size - flen - 1] = '\0';
		end = args + (size - flen - 1);
		for (w = args; w <= end && argc < ARGS_MAX; w += strlen(w) + 1) {
			if (!skipped(w))
				argv[argc++] = w;
		}
	}
	argv[argc] = NULL;

	memset(err, 0, sizeof(err));
	rc = config_load(&cfg, argc, argv, &action, err, sizeof(err));
	CHECK(action != CONFIG_EXIT && action != CONFIG_DUMP,
	    "config_load printed for --help, --version or -T");
	if (rc == 0)
		check_config(&cfg);
	else {
		CHECK(rc == -1, "config_load returned neither 0 nor -1");
		CHECK(err[0] != '\0' && strnlen(err, sizeof(err)) <
		    sizeof(err), "a failed load without a message");
	}
	config_free(&cfg);
	free(args);
	return (0);
}
