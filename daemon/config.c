/*
 * config.c: the directive table and the file / command-line loaders.
 *
 * A directive line is "name value...", words split on blanks, '#' starts a
 * comment line. The same directives are accepted as "--name value..." on
 * the command line, where they override the file (as redis-server does).
 */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "log.h"
#include "proto.h"

#define CONFIG_LINE_MAX		4096
#define CONFIG_WORDS_MAX	(CONFIG_MAX_BIND + 1)

enum config_type {
	CONF_INT,	/* plain integer */
	CONF_SIZE,	/* bytes: 1k = 1000, 1kb = 1024, likewise m/mb, g/gb */
	CONF_DURATION,	/* milliseconds: ms, s, m or h suffix, decimals; bare
			   = ms (proto_parse_duration_ms) */
	CONF_BOOL,	/* yes | no */
	CONF_STRING,
	CONF_LOGLEVEL,
	CONF_BIND,	/* one or more addresses */
	CONF_SEMAPHORE,	/* NAME CAPACITY, repeatable */
	CONF_PERSISTENCE /* none | sync | async */
};

/* persistence left unset: none without redis, sync with it. */
#define PERSIST_UNSET	(-1)

static const char *const persist_mode_names[] = { "none", "sync", "async" };

struct config_directive {
	const char		*name;
	enum config_type	 type;
	int64_t			 min, max;
	const char		*default_value;	/* NULL: unset */
	size_t			 offset;
};

#define OFF(f)	offsetof(struct config, f)
static const struct config_directive directives[] = {
	{ "bind",		CONF_BIND, 0, 0, "127.0.0.1", OFF(bind) },
	{ "port",		CONF_INT, 0, 65535, "7313", OFF(port) },
	{ "unixsocket",		CONF_STRING, 0, 0, NULL, OFF(unixsocket) },
	{ "unixsocketperm",	CONF_INT, 0, 0777, "0700", OFF(unixsocketperm) },
	{ "requirepass",	CONF_STRING, 0, 0, NULL, OFF(requirepass) },
	{ "protected-mode",	CONF_BOOL, 0, 1, "yes", OFF(protected_mode) },
	{ "maxclients",		CONF_INT, 1, 1000000, "10000", OFF(maxclients) },
	{ "max-line",		CONF_SIZE, 64, 1 << 20, "4096", OFF(max_line) },
	{ "max-output",		CONF_SIZE, 4096, INT64_C(1) << 32, "8mb",
	    OFF(max_output) },
	{ "max-semaphores",	CONF_INT, 1, UINT32_MAX, "100000",
	    OFF(max_semaphores) },
	{ "tcp-keepalive",	CONF_DURATION, 0, 7200000, "60s",
	    OFF(tcp_keepalive_ms) },
	{ "timeout",		CONF_DURATION, 0, 604800000, "0",
	    OFF(timeout_ms) },
	{ "line-timeout",	CONF_DURATION, 0, 3600000, "10s",
	    OFF(line_timeout_ms) },
	{ "auth-timeout",	CONF_DURATION, 0, 3600000, "10s",
	    OFF(auth_timeout_ms) },
	{ "loglevel",		CONF_LOGLEVEL, 0, 0, "info", OFF(loglevel) },
	{ "logfile",		CONF_STRING, 0, 0, NULL, OFF(logfile) },
	{ "pidfile",		CONF_STRING, 0, 0, NULL, OFF(pidfile) },
	{ "semaphore",		CONF_SEMAPHORE, 1, PROTO_INT_MAX, NULL, 0 },
	{ "persistence",	CONF_PERSISTENCE, 0, 0, NULL, OFF(persistence) },
	{ "redis",		CONF_STRING, 0, 0, NULL, OFF(redis) },
	{ "redis-password",	CONF_STRING, 0, 0, NULL, OFF(redis_password) },
	{ "redis-db",		CONF_INT, 0, 65535, "0", OFF(redis_db) },
	{ "redis-prefix",	CONF_STRING, 0, 0, "semd:", OFF(redis_prefix) },
	{ "redis-timeout",	CONF_DURATION, 10, 60000, "1s",
	    OFF(redis_timeout_ms) },
	{ "reclaim-grace",	CONF_DURATION, 0, 86400000, "10s",
	    OFF(reclaim_grace_ms) },
	{ "persistence-backlog", CONF_INT, 1, 100000000, "100000",
	    OFF(persistence_backlog) },
	{ "owner-lease",	CONF_DURATION, 500, 60000, "3s",
	    OFF(owner_lease_ms) },
	{ "standby",		CONF_BOOL, 0, 1, "no", OFF(standby) },
	{ "advertise",		CONF_STRING, 0, 0, NULL, OFF(advertise) },
};
#undef OFF

static const char usage_text[] =
"usage: semd [-t] [-c FILE] [--DIRECTIVE VALUE...]...\n"
"       semd --version | --help\n"
"\n"
"  -c FILE     read directives from FILE (redis.conf style)\n"
"  -t          check the configuration and exit\n"
"  --NAME V..  set directive NAME, overriding the file; for example\n"
"              semd --port 0 --semaphore jobs 3\n"
"\n"
"directives: bind port unixsocket unixsocketperm requirepass protected-mode\n"
"            maxclients max-line max-output max-semaphores tcp-keepalive\n"
"            timeout line-timeout auth-timeout\n"
"            loglevel logfile pidfile semaphore persistence redis\n"
"            redis-password redis-db redis-prefix redis-timeout\n"
"            reclaim-grace persistence-backlog owner-lease standby\n"
"            advertise\n"
"See semd.conf for each directive, its default and its range.\n";

static const struct config_directive *
config_lookup(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof(directives) / sizeof(directives[0]); i++) {
		if (strcasecmp(directives[i].name, name) == 0)
			return (&directives[i]);
	}
	return (NULL);
}

/* A number with an optional unit (proto_parse_units); -1 when bad. */
static int
config_parse_number(const char *s, const struct proto_unit *units,
    int64_t *out)
{
	uint64_t	v;

	if (proto_parse_units(s, strlen(s), units, 1, INT64_MAX, &v) != 0)
		return (-1);
	*out = (int64_t)v;
	return (0);
}

static int
config_set_sem(struct config *cfg, const char *name, const char *cap,
    char *err, size_t errlen)
{
	uint64_t	v;
	size_t		i;

	if (!proto_valid_name(name, strlen(name))) {
		snprintf(err, errlen, "invalid semaphore name '%.64s'", name);
		return (-1);
	}
	if (proto_parse_u64(cap, strlen(cap), PROTO_INT_MAX, &v) != 0 ||
	    v == 0) {
		snprintf(err, errlen, "semaphore %s: capacity must be "
		    "1..%u, not '%.32s'", name, PROTO_INT_MAX, cap);
		return (-1);
	}
	for (i = 0; i < cfg->nsems; i++) {
		if (strcmp(cfg->sems[i].name, name) != 0)
			continue;
		if (cfg->sems[i].capacity != v) {
			snprintf(err, errlen, "semaphore %s is declared twice "
			    "with different capacities", name);
			return (-1);
		}
		return (0);
	}
	cfg->sems = realloc(cfg->sems, (cfg->nsems + 1) * sizeof(*cfg->sems));
	if (cfg->sems == NULL)
		abort();
	cfg->sems[cfg->nsems].name = xstrdup(name);
	cfg->sems[cfg->nsems].capacity = (uint32_t)v;
	cfg->nsems++;
	return (0);
}

/* Apply one directive with its value words; -1 and a message in err. */
static int
config_apply(struct config *cfg, const struct config_directive *d,
    char **argv, size_t argc, char *err, size_t errlen)
{
	char		**sp;
	int64_t		 v, *ip = (int64_t *)((char *)cfg + d->offset);
	size_t		 i;
	int		 rc = 0;

	if (d->type == CONF_SEMAPHORE) {
		if (argc != 2) {
			snprintf(err, errlen, "semaphore takes NAME CAPACITY");
			return (-1);
		}
		return (config_set_sem(cfg, argv[0], argv[1], err, errlen));
	}
	if (d->type == CONF_BIND) {
		if (argc < 1 || argc > CONFIG_MAX_BIND) {
			snprintf(err, errlen, "bind takes 1 to %d addresses",
			    CONFIG_MAX_BIND);
			return (-1);
		}
		for (i = 0; i < cfg->nbind; i++)
			free(cfg->bind[i]);
		for (i = 0; i < argc; i++)
			cfg->bind[i] = xstrdup(argv[i]);
		cfg->nbind = argc;
		return (0);
	}
	if (argc != 1) {
		snprintf(err, errlen, "%s takes exactly one value", d->name);
		return (-1);
	}
	switch (d->type) {
	case CONF_STRING:
		sp = (char **)((char *)cfg + d->offset);
		free(*sp);
		*sp = argv[0][0] == '\0' ? NULL : xstrdup(argv[0]);
		return (0);
	case CONF_BOOL:
		if (strcasecmp(argv[0], "yes") == 0)
			v = 1;
		else if (strcasecmp(argv[0], "no") == 0)
			v = 0;
		else {
			snprintf(err, errlen, "%s must be yes or no, not "
			    "'%.32s'", d->name, argv[0]);
			return (-1);
		}
		break;
	case CONF_PERSISTENCE:
		for (v = 0; v < 3; v++) {
			if (strcasecmp(argv[0], persist_mode_names[v]) == 0)
				break;
		}
		if (v == 3) {
			snprintf(err, errlen, "persistence must be none, sync "
			    "or async, not '%.32s'", argv[0]);
			return (-1);
		}
		break;
	case CONF_LOGLEVEL:
		if ((v = log_level_parse(argv[0])) < 0) {
			snprintf(err, errlen, "loglevel must be debug, info, "
			    "notice, warn or error, not '%.32s'", argv[0]);
			return (-1);
		}
		break;
	case CONF_INT:
		if (d->offset == offsetof(struct config, unixsocketperm))
			rc = (v = strtol(argv[0], NULL, 8),
			    strspn(argv[0], "01234567") != strlen(argv[0]) ||
			    argv[0][0] == '\0') ? -1 : 0;
		else
			rc = proto_parse_u64(argv[0], strlen(argv[0]),
			    INT64_MAX, (uint64_t *)&v);
		break;
	case CONF_SIZE:
		rc = config_parse_number(argv[0], proto_size_units, &v);
		break;
	case CONF_DURATION:
		rc = config_parse_number(argv[0], proto_duration_units, &v);
		break;
	default:
		abort();
	}
	if (d->type == CONF_INT || d->type == CONF_SIZE ||
	    d->type == CONF_DURATION) {
		if (rc != 0 || v < d->min || v > d->max) {
			snprintf(err, errlen, "%s: invalid value '%.32s' "
			    "(expected %s%lld..%lld%s)", d->name, argv[0],
			    d->type == CONF_INT ? "" : "a ",
			    (long long)d->min, (long long)d->max,
			    d->type == CONF_SIZE ? " bytes, k/kb/m/mb/g/gb "
			    "suffix allowed" : d->type == CONF_DURATION ?
			    " ms, ms/s/m/h suffix and decimals allowed" : "");
			return (-1);
		}
	}
	*ip = v;
	return (0);
}

/* Apply "name value..." given as words; the name may start with "--". */
static int
config_apply_words(struct config *cfg, char **words, size_t nwords,
    char *err, size_t errlen)
{
	const struct config_directive	*d;
	const char			*name = words[0];

	if (strncmp(name, "--", 2) == 0)
		name += 2;
	if ((d = config_lookup(name)) == NULL) {
		snprintf(err, errlen, "unknown directive '%.64s'", name);
		return (-1);
	}
	return (config_apply(cfg, d, words + 1, nwords - 1, err, errlen));
}

/* Split line in place on blanks; returns the word count or -1 if too many. */
static int
config_split(char *line, char **words, size_t max)
{
	size_t	n = 0;
	char	*p = line;

	for (;;) {
		p += strspn(p, " \t\r\n");
		if (*p == '\0')
			return ((int)n);
		if (n == max)
			return (-1);
		words[n++] = p;
		p += strcspn(p, " \t\r\n");
		if (*p != '\0')
			*p++ = '\0';
	}
}

static int
config_load_file(struct config *cfg, const char *path, char *err,
    size_t errlen)
{
	FILE	*fp;
	char	 line[CONFIG_LINE_MAX], msg[256], *words[CONFIG_WORDS_MAX];
	int	 lineno = 0, n, rc = 0;

	if ((fp = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return (-1);
	}
	while (rc == 0 && fgets(line, sizeof(line), fp) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(fp)) {
			snprintf(err, errlen, "%s:%d: line too long", path,
			    lineno);
			rc = -1;
			break;
		}
		if (line[strspn(line, " \t")] == '#')
			continue;
		if ((n = config_split(line, words, CONFIG_WORDS_MAX)) < 0) {
			snprintf(err, errlen, "%s:%d: too many words", path,
			    lineno);
			rc = -1;
		} else if (n > 0 &&
		    config_apply_words(cfg, words, n, msg, sizeof(msg)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
			rc = -1;
		}
	}
	if (rc == 0 && ferror(fp)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		rc = -1;
	}
	fclose(fp);
	return (rc);
}

static void
config_defaults(struct config *cfg)
{
	char	 buf[64], err[128], *words[1];
	size_t	 i;

	memset(cfg, 0, sizeof(*cfg));
	cfg->persistence = PERSIST_UNSET;
	for (i = 0; i < sizeof(directives) / sizeof(directives[0]); i++) {
		if (directives[i].default_value == NULL)
			continue;
		snprintf(buf, sizeof(buf), "%s", directives[i].default_value);
		words[0] = buf;
		if (config_apply(cfg, &directives[i], words, 1, err,
		    sizeof(err)) != 0)
			abort();	/* a bad default is a bug */
	}
}

const char *
config_persist_mode_name(enum persist_mode mode)
{
	return (persist_mode_names[mode]);
}

/* Checks that span directives, once everything is read. */
static int
config_finish(struct config *cfg, char *err, size_t errlen)
{
	const char	*colon;
	uint64_t	 port;

	if (cfg->persistence == PERSIST_UNSET)
		cfg->persistence = cfg->redis != NULL ? PERSIST_SYNC :
		    PERSIST_NONE;
	if (cfg->persistence != PERSIST_NONE && cfg->redis == NULL) {
		snprintf(err, errlen, "persistence %s needs a redis "
		    "HOST:PORT or redis unix:PATH",
		    persist_mode_names[cfg->persistence]);
		return (-1);
	}
	if (cfg->redis != NULL && strncmp(cfg->redis, "unix:", 5) == 0) {
		if (cfg->redis[5] == '\0') {
			snprintf(err, errlen, "redis unix: needs a path");
			return (-1);
		}
	} else if (cfg->redis != NULL) {
		colon = strrchr(cfg->redis, ':');
		if (colon == NULL || colon == cfg->redis ||
		    proto_parse_u64(colon + 1, strlen(colon + 1), 65535,
		    &port) != 0 || port == 0) {
			snprintf(err, errlen, "redis must be HOST:PORT or "
			    "unix:PATH, not '%.64s'", cfg->redis);
			return (-1);
		}
	}
	if (cfg->redis_prefix == NULL)
		cfg->redis_prefix = xstrdup("");
	/* A standby is safe only if no grant is answered before it is owned. */
	if (cfg->standby && cfg->persistence != PERSIST_SYNC) {
		snprintf(err, errlen, "standby yes needs persistence sync: "
		    "with persistence %s a grant is answered before it is "
		    "written, and a standby taking over would not know it",
		    persist_mode_names[cfg->persistence]);
		return (-1);
	}
	if (cfg->advertise != NULL) {
		colon = strrchr(cfg->advertise, ':');
		if (colon == NULL || colon == cfg->advertise ||
		    strlen(cfg->advertise) >= 256 || strpbrk(cfg->advertise,
		    " \t") != NULL || proto_parse_u64(colon + 1,
		    strlen(colon + 1), 65535, &port) != 0 || port == 0) {
			snprintf(err, errlen, "advertise must be HOST:PORT, "
			    "not '%.64s'", cfg->advertise);
			return (-1);
		}
	}
	return (0);
}

/*
 * The index of the last value of the "--name value..." run starting at
 * argv[i]: values run up to the next "--name", "-c" or "-t". Both passes
 * of config_load use it, so they always agree on where a run ends.
 */
static int
config_arg_run_end(int argc, char **argv, int i)
{
	while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0 &&
	    strcmp(argv[i + 1], "-c") != 0 && strcmp(argv[i + 1], "-t") != 0)
		i++;
	return (i);
}

int
config_load(struct config *cfg, int argc, char **argv, int *check_only,
    int *exit_now, char *err, size_t errlen)
{
	const char	*file = NULL;
	char		 msg[256];
	int		 i, start;

	config_defaults(cfg);
	*check_only = *exit_now = 0;

	/* First pass: options, so the file is read before overrides. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			fputs(usage_text, stdout);
			*exit_now = 1;
			return (0);
		}
		if (strcmp(argv[i], "--version") == 0 ||
		    strcmp(argv[i], "-v") == 0) {
			printf("semd %s (protocol %d)\n", PACKAGE_VERSION,
			    PROTO_VERSION);
			*exit_now = 1;
			return (0);
		}
		if (strcmp(argv[i], "-t") == 0)
			*check_only = 1;
		else if (strcmp(argv[i], "-c") == 0) {
			if (++i == argc) {
				snprintf(err, errlen, "-c needs a file name");
				return (-1);
			}
			file = argv[i];
		} else if (strncmp(argv[i], "--", 2) != 0) {
			snprintf(err, errlen, "unexpected argument '%.64s' "
			    "(see semd --help)", argv[i]);
			return (-1);
		} else
			i = config_arg_run_end(argc, argv, i);
	}
	if (file != NULL && config_load_file(cfg, file, err, errlen) != 0)
		return (-1);

	/* Second pass: "--name value..." runs override the file. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0) {
			i++;
			continue;
		}
		if (strncmp(argv[i], "--", 2) != 0)
			continue;
		start = i;
		i = config_arg_run_end(argc, argv, i);
		if (config_apply_words(cfg, argv + start, i - start + 1, msg,
		    sizeof(msg)) != 0) {
			snprintf(err, errlen, "argument %s: %s", argv[start],
			    msg);
			return (-1);
		}
	}
	return (config_finish(cfg, err, errlen));
}

void
config_free(struct config *cfg)
{
	size_t	i;

	for (i = 0; i < cfg->nbind; i++)
		free(cfg->bind[i]);
	for (i = 0; i < cfg->nsems; i++)
		free(cfg->sems[i].name);
	free(cfg->sems);
	free(cfg->unixsocket);
	free(cfg->requirepass);
	free(cfg->logfile);
	free(cfg->pidfile);
	free(cfg->redis);
	free(cfg->redis_password);
	free(cfg->redis_prefix);
	free(cfg->advertise);
	memset(cfg, 0, sizeof(*cfg));
}
