/*
 * config.c: the directive table and the file / command-line loaders, the
 * checks of -t and the dump of -T.
 *
 * A directive line is "name value...", words split on blanks; a word that
 * starts with '#' starts a comment, on a line of its own or after a value.
 * The same directives are accepted as "--name value..." on the command
 * line, where they override the file (as redis-server does).
 */

#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "proto.h"

#define CONFIG_LINE_MAX		4096
#define CONFIG_WORDS_MAX	(CONFIG_MAX_BIND + 1)

enum config_type {
	CONF_INT,	/* plain integer */
	CONF_OCTAL,	/* file mode: octal digits, as chmod(1) */
	CONF_SIZE,	/* bytes: 1k = 1000, 1kb = 1024, likewise m/mb, g/gb */
	CONF_DURATION,	/* kept in ms; typed with an ms, s, m or h suffix
			   and decimals; a bare number is seconds, as
			   Redis's timeout 300 (PROTO_BARE_DURATION_MULT) */
	CONF_BOOL,	/* yes | no */
	CONF_STRING,
	CONF_LOGLEVEL,
	CONF_BIND,	/* one or more addresses */
	CONF_SEMAPHORE,	/* NAME CAPACITY, repeatable */
	CONF_PERSISTENCE, /* none | sync | async */
	CONF_FACILITY	/* a syslog facility */
};

static const char *const persist_mode_names[] = { "none", "sync", "async" };

struct config_directive {
	const char		*name;
	enum config_type	 type;
	int64_t			 min, max;
	const char		*default_value;	/* NULL: unset */
	size_t			 offset;
	int			 reload;	/* applied by SIGHUP */
};

#define OFF(f)	offsetof(struct config, f)
static const struct config_directive directives[] = {
	{ "bind",		CONF_BIND, 0, 0, "127.0.0.1", OFF(bind), 0 },
	{ "port",		CONF_INT, 0, 65535, "7313", OFF(port), 0 },
	{ "unixsocket",		CONF_STRING, 0, 0, NULL, OFF(unixsocket), 0 },
	{ "unixsocketperm",	CONF_OCTAL, 0, 0777, "0700", OFF(unixsocketperm),
	    0 },
	{ "requirepass",	CONF_STRING, 0, 0, NULL, OFF(requirepass), 1 },
	{ "protected-mode",	CONF_BOOL, 0, 1, "yes", OFF(protected_mode), 1 },
	{ "maxclients",		CONF_INT, 1, 1000000, "10000", OFF(maxclients),
	    1 },
	/* Each connection's line buffer is sized at accept: restart only. */
	{ "max-line",		CONF_SIZE, 64, 1 << 20, "4096", OFF(max_line),
	    0 },
	{ "max-output",		CONF_SIZE, 4096, INT64_C(1) << 32, "8mb",
	    OFF(max_output), 1 },
	{ "max-output-total",	CONF_SIZE, 65536, INT64_C(1) << 40, "256mb",
	    OFF(max_output_total), 1 },
	{ "max-semaphores",	CONF_INT, 1, UINT32_MAX, "100000",
	    OFF(max_semaphores), 1 },
	{ "tcp-keepalive",	CONF_DURATION, 0, 7200000, "60s",
	    OFF(tcp_keepalive_ms), 1 },
	{ "timeout",		CONF_DURATION, 0, 604800000, "0",
	    OFF(timeout_ms), 1 },
	{ "line-timeout",	CONF_DURATION, 0, 3600000, "10s",
	    OFF(line_timeout_ms), 1 },
	{ "auth-timeout",	CONF_DURATION, 0, 3600000, "10s",
	    OFF(auth_timeout_ms), 1 },
	{ "loglevel",		CONF_LOGLEVEL, 0, 0, "info", OFF(loglevel), 1 },
	{ "logfile",		CONF_STRING, 0, 0, NULL, OFF(logfile), 1 },
	{ "syslog",		CONF_BOOL, 0, 1, "no", OFF(syslog), 1 },
	{ "syslog-ident",	CONF_STRING, 0, 0, "semd", OFF(syslog_ident), 1 },
	{ "syslog-facility",	CONF_FACILITY, 0, 0, "daemon",
	    OFF(syslog_facility), 1 },
	{ "pidfile",		CONF_STRING, 0, 0, NULL, OFF(pidfile), 0 },
	{ "daemonize",		CONF_BOOL, 0, 1, "no", OFF(daemonize), 0 },
	{ "semaphore",		CONF_SEMAPHORE, 1, PROTO_INT_MAX, NULL, 0, 1 },
	{ "persistence",	CONF_PERSISTENCE, 0, 0, NULL, OFF(persistence),
	    0 },
	{ "redis",		CONF_STRING, 0, 0, NULL, OFF(redis), 0 },
	{ "redis-password",	CONF_STRING, 0, 0, NULL, OFF(redis_password),
	    0 },
	{ "sentinel-password",	CONF_STRING, 0, 0, NULL,
	    OFF(sentinel_password), 0 },
	{ "redis-db",		CONF_INT, 0, 65535, "0", OFF(redis_db), 0 },
	{ "redis-prefix",	CONF_STRING, 0, 0, "semd:", OFF(redis_prefix),
	    0 },
	{ "redis-timeout",	CONF_DURATION, 10, 60000, "1s",
	    OFF(redis_timeout_ms), 0 },
	/* WAIT after every fenced write: 0 (off) to Redis's replica limit. */
	{ "redis-min-replicas",	CONF_INT, 0, 64, "0", OFF(redis_min_replicas),
	    0 },
	{ "redis-replica-timeout", CONF_DURATION, 10, 60000, "1s",
	    OFF(redis_replica_timeout_ms), 0 },
	{ "reclaim-grace",	CONF_DURATION, 0, 86400000, "10s",
	    OFF(reclaim_grace_ms), 0 },
	{ "persistence-backlog", CONF_INT, 1, 100000000, "100000",
	    OFF(persistence_backlog), 0 },
	{ "persistence-pipeline", CONF_INT, 1, CONFIG_PIPELINE_MAX, "8",
	    OFF(persistence_pipeline), 0 },
	{ "owner-lease",	CONF_DURATION, 500, 60000, "3s",
	    OFF(owner_lease_ms), 0 },
	{ "standby",		CONF_BOOL, 0, 1, "no", OFF(standby), 0 },
	{ "advertise",		CONF_STRING, 0, 0, NULL, OFF(advertise), 0 },
	{ "metrics-port",	CONF_INT, 0, 65535, "0", OFF(metrics_port), 0 },
	{ "metrics-bind",	CONF_STRING, 0, 0, "127.0.0.1",
	    OFF(metrics_bind), 0 },
	{ "metrics-max-semaphores", CONF_INT, 0, 1000000, "1000",
	    OFF(metrics_max_semaphores), 1 },
};
#undef OFF

static const char usage_text[] =
"usage: semd [-t | -T] [-c FILE] [--DIRECTIVE VALUE...]...\n"
"       semd --version | --help\n"
"\n"
"  -c FILE     read directives from FILE (redis.conf style)\n"
"  -t          check the configuration as a start would, and exit\n"
"  -T          check it, print the effective configuration, and exit\n"
"  --NAME V..  set directive NAME, overriding the file; for example\n"
"              semd --port 0 --semaphore jobs 3\n"
"\n"
"directives: bind port unixsocket unixsocketperm requirepass protected-mode\n"
"            maxclients max-line max-output max-output-total max-semaphores\n"
"            tcp-keepalive timeout line-timeout auth-timeout\n"
"            loglevel logfile syslog syslog-ident syslog-facility\n"
"            pidfile daemonize semaphore persistence redis\n"
"            redis-password sentinel-password redis-db redis-prefix\n"
"            redis-timeout\n"
"            reclaim-grace persistence-backlog persistence-pipeline\n"
"            owner-lease standby redis-min-replicas redis-replica-timeout\n"
"            advertise metrics-port metrics-bind metrics-max-semaphores\n"
"durations: a bare number is seconds (--timeout 300); or give a unit:\n"
"            250ms, 1.5s, 5m, 1h\n"
"See semd.conf(5) for each directive, its default and its range.\n";

#define NDIRECTIVES	(sizeof(directives) / sizeof(directives[0]))

static const struct config_directive *
config_lookup(const char *name)
{
	size_t	i;

	for (i = 0; i < NDIRECTIVES; i++) {
		if (strcasecmp(directives[i].name, name) == 0)
			return (&directives[i]);
	}
	return (NULL);
}

/* Edit distance between a and b (case-insensitive), capped at 64 bytes. */
static size_t
config_distance(const char *a, const char *b)
{
	size_t	la = strlen(a), lb = strlen(b), i, j, prev, tmp, cost;
	size_t	row[65];

	if (la > 64 || lb > 64)
		return (SIZE_MAX);
	for (j = 0; j <= lb; j++)
		row[j] = j;
	for (i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (j = 1; j <= lb; j++) {
			tmp = row[j];
			cost = tolower((unsigned char)a[i - 1]) ==
			    tolower((unsigned char)b[j - 1]) ? 0 : 1;
			row[j] = prev + cost;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			if (tmp + 1 < row[j])
				row[j] = tmp + 1;
			prev = tmp;
		}
	}
	return (row[lb]);
}

/* The known directive closest to an unknown name, or NULL if none is. */
static const char *
config_suggest(const char *name)
{
	const char	*best = NULL;
	size_t		 i, d, best_d = SIZE_MAX, limit;

	limit = strlen(name) / 3 > 2 ? strlen(name) / 3 : 2;
	for (i = 0; i < NDIRECTIVES; i++) {
		d = config_distance(name, directives[i].name);
		/* "pid" for "pidfile", "keepalive" for "tcp-keepalive". */
		if (strlen(name) >= 3 &&
		    strcasestr(directives[i].name, name) != NULL)
			d = 1;
		if (d < best_d) {
			best_d = d;
			best = directives[i].name;
		}
	}
	return (best_d <= limit ? best : NULL);
}

/*
 * A number with an optional unit (proto_parse_units), bare_mult the unit of
 * a bare number; -1 when bad.
 */
static int
config_parse_number(const char *s, const struct proto_unit *units,
    uint64_t bare_mult, int64_t *out)
{
	uint64_t	v;

	if (proto_parse_units(s, strlen(s), units, bare_mult, INT64_MAX,
	    &v) != 0)
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

/* bind ADDRESS...: replaces the addresses given before. */
static int
config_set_bind(struct config *cfg, char **argv, size_t argc, char *err,
    size_t errlen)
{
	size_t	i;

	if (argc < 1 || argc > CONFIG_MAX_BIND) {
		snprintf(err, errlen, "bind takes 1 to %d addresses",
		    CONFIG_MAX_BIND);
		return (-1);
	}
	/* Only the command line can give one ("--bind ''"). */
	for (i = 0; i < argc; i++) {
		if (argv[i][0] == '\0') {
			snprintf(err, errlen, "bind: empty address");
			return (-1);
		}
	}
	for (i = 0; i < cfg->nbind; i++)
		free(cfg->bind[i]);
	for (i = 0; i < argc; i++)
		cfg->bind[i] = xstrdup(argv[i]);
	cfg->nbind = argc;
	return (0);
}

/* A yes/no, persistence mode or log level into *v; -1 and err if not. */
static int
config_parse_keyword(const struct config_directive *d, const char *word,
    int64_t *v, char *err, size_t errlen)
{
	switch (d->type) {
	case CONF_BOOL:
		if (strcasecmp(word, "yes") == 0)
			*v = 1;
		else if (strcasecmp(word, "no") == 0)
			*v = 0;
		else {
			snprintf(err, errlen, "%s must be yes or no, not "
			    "'%.32s'", d->name, word);
			return (-1);
		}
		return (0);
	case CONF_PERSISTENCE:
		for (*v = 0; *v < 3; (*v)++) {
			if (strcasecmp(word, persist_mode_names[*v]) == 0)
				return (0);
		}
		snprintf(err, errlen, "persistence must be none, sync or "
		    "async, not '%.32s'", word);
		return (-1);
	default:	/* CONF_LOGLEVEL */
		if ((*v = log_level_parse(word)) < 0) {
			snprintf(err, errlen, "loglevel must be debug, info, "
			    "notice, warn or error, not '%.32s'", word);
			return (-1);
		}
		return (0);
	}
}

/*
 * A number of d's (parsed from word with result rc into v) within d's
 * range: 0, or -1 and a message that says what is expected.
 */
static void	config_format_ms(char *, size_t, int64_t);

static int
config_check_range(const struct config_directive *d, const char *word,
    int rc, int64_t v, char *err, size_t errlen)
{
	char	lo[32], hi[32];

	if (d->type == CONF_DURATION && (rc != 0 || v < d->min ||
	    v > d->max)) {
		config_format_ms(lo, sizeof(lo), d->min);
		config_format_ms(hi, sizeof(hi), d->max);
		snprintf(err, errlen, "%s: invalid value '%.32s' (expected a "
		    "duration %s..%s: a bare number is seconds, or add a unit "
		    "ms/s/m/h, decimals allowed: 300, 1.5s, 250ms)", d->name,
		    word, lo, hi);
		return (-1);
	}
	if (d->type == CONF_OCTAL && (rc != 0 || v < d->min || v > d->max)) {
		snprintf(err, errlen, "%s: invalid value '%.32s' (expected an "
		    "octal mode %04llo..%04llo)", d->name, word,
		    (unsigned long long)d->min, (unsigned long long)d->max);
		return (-1);
	}
	if ((d->type == CONF_INT || d->type == CONF_SIZE) && (rc != 0 ||
	    v < d->min || v > d->max)) {
		snprintf(err, errlen, "%s: invalid value '%.32s' "
		    "(expected %s%lld..%lld%s)", d->name, word,
		    d->type == CONF_INT ? "" : "a ",
		    (long long)d->min, (long long)d->max,
		    d->type == CONF_SIZE ? " bytes, k/kb/m/mb/g/gb "
		    "suffix allowed" : "");
		return (-1);
	}
	return (0);
}

/* Apply one directive with its value words; -1 and a message in err. */
static int
config_apply(struct config *cfg, const struct config_directive *d,
    char **argv, size_t argc, char *err, size_t errlen)
{
	char		**sp;
	int64_t		 v, *ip = (int64_t *)((char *)cfg + d->offset);
	int		 rc = 0;

	if (d->type == CONF_SEMAPHORE) {
		if (argc != 2) {
			snprintf(err, errlen, "semaphore takes NAME CAPACITY");
			return (-1);
		}
		return (config_set_sem(cfg, argv[0], argv[1], err, errlen));
	}
	if (d->type == CONF_BIND)
		return (config_set_bind(cfg, argv, argc, err, errlen));
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
	case CONF_PERSISTENCE:
	case CONF_LOGLEVEL:
		if (config_parse_keyword(d, argv[0], &v, err, errlen) != 0)
			return (-1);
		break;
	case CONF_FACILITY:
		if (log_facility_parse(argv[0]) < 0) {
			snprintf(err, errlen, "syslog-facility must be user, "
			    "daemon or local0..local7, not '%.32s'", argv[0]);
			return (-1);
		}
		sp = (char **)((char *)cfg + d->offset);
		free(*sp);
		*sp = xstrdup(argv[0]);
		return (0);
	case CONF_INT:
		rc = proto_parse_u64(argv[0], strlen(argv[0]), INT64_MAX,
		    (uint64_t *)&v);
		break;
	case CONF_OCTAL:
		rc = argv[0][0] == '\0' || strlen(argv[0]) > 6 ||
		    strspn(argv[0], "01234567") != strlen(argv[0]) ? -1 : 0;
		v = rc == 0 ? strtol(argv[0], NULL, 8) : 0;
		break;
	case CONF_SIZE:
		rc = config_parse_number(argv[0], proto_size_units, 1, &v);
		break;
	case CONF_DURATION:
		rc = config_parse_number(argv[0], proto_duration_units,
		    PROTO_BARE_DURATION_MULT, &v);
		break;
	default:
		abort();
	}
	if (config_check_range(d, argv[0], rc, v, err, errlen) != 0)
		return (-1);
	*ip = v;
	return (0);
}

/* Apply "name value..." given as words; the name may start with "--". */
static int
config_apply_words(struct config *cfg, char **words, size_t nwords,
    char *err, size_t errlen)
{
	const struct config_directive	*d;
	const char			*name = words[0], *near;

	if (strncmp(name, "--", 2) == 0)
		name += 2;
	if ((d = config_lookup(name)) == NULL) {
		if ((near = config_suggest(name)) != NULL)
			snprintf(err, errlen, "unknown directive '%.64s' "
			    "(did you mean '%s'?)", name, near);
		else
			snprintf(err, errlen, "unknown directive '%.64s'",
			    name);
		return (-1);
	}
	return (config_apply(cfg, d, words + 1, nwords - 1, err, errlen));
}

/*
 * Split line in place on blanks, up to a word starting with '#' (a
 * comment); returns the word count or -1 if too many.
 */
static int
config_split(char *line, char **words, size_t max)
{
	struct proto_word	w;
	size_t			pos = 0, len = strcspn(line, "\r\n");

	/* A word starting with '#' begins a comment, to the end of line. */
	while (proto_next_word(line, len, &pos, &w)) {
		if (w.p[0] == '#') {
			line[w.p - line] = '\0';
			break;
		}
	}
	return (proto_split_words(line, words, max));
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
	for (i = 0; i < NDIRECTIVES; i++) {
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

/* Is addr a numeric IPv4 or IPv6 address, as the listeners need? */
static int
config_numeric_addr(const char *addr)
{
	struct in6_addr	a6;
	struct in_addr	a4;

	return (inet_pton(AF_INET, addr, &a4) == 1 ||
	    inet_pton(AF_INET6, addr, &a6) == 1);
}

/*
 * Make a relative path absolute against the working directory, so that
 * it still names the same file after daemonize's chdir("/") and a reload.
 */
static int
config_absolute(char **path, char *err, size_t errlen)
{
	char	cwd[PATH_MAX], *abs;
	size_t	len;

	if (*path == NULL || (*path)[0] == '/')
		return (0);
	if (getcwd(cwd, sizeof(cwd)) == NULL) {
		snprintf(err, errlen, "%s: cannot make it absolute: %s", *path,
		    strerror(errno));
		return (-1);
	}
	len = strlen(cwd) + strlen(*path) + 2;
	abs = xcalloc(1, len);
	snprintf(abs, len, "%s/%s", cwd, *path);
	free(*path);
	*path = abs;
	return (0);
}

/* Checks that span directives, once everything is read. */
static int
config_finish(struct config *cfg, char *err, size_t errlen)
{
	const char	*colon;
	uint64_t	 port;
	size_t		 i;

	for (i = 0; i < cfg->nbind; i++) {
		if (!config_numeric_addr(cfg->bind[i])) {
			snprintf(err, errlen, "bind %.64s: not a numeric IPv4 "
			    "or IPv6 address (semd resolves no names: use "
			    "127.0.0.1, ::1 or 0.0.0.0)", cfg->bind[i]);
			return (-1);
		}
	}
	if (!config_numeric_addr(cfg->metrics_bind)) {
		snprintf(err, errlen, "metrics-bind %.64s: not a numeric IPv4 "
		    "or IPv6 address", cfg->metrics_bind);
		return (-1);
	}
	if (cfg->metrics_port != 0 && cfg->metrics_port == cfg->port) {
		snprintf(err, errlen, "metrics-port %lld is the port of the "
		    "line protocol", (long long)cfg->metrics_port);
		return (-1);
	}
	if (config_absolute(&cfg->logfile, err, errlen) != 0 ||
	    config_absolute(&cfg->pidfile, err, errlen) != 0 ||
	    config_absolute(&cfg->unixsocket, err, errlen) != 0)
		return (-1);
	if (config_finish_redis(cfg, err, errlen) != 0)
		return (-1);
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
	    strcmp(argv[i + 1], "-c") != 0 && strcmp(argv[i + 1], "-t") != 0 &&
	    strcmp(argv[i + 1], "-T") != 0)
		i++;
	return (i);
}

int
config_load(struct config *cfg, int argc, char **argv,
    enum config_action *action, char *err, size_t errlen)
{
	const char	*file = NULL;
	char		 msg[256];
	int		 i, start;

	config_defaults(cfg);
	*action = CONFIG_RUN;

	/* First pass: options, so the file is read before overrides. */
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			fputs(usage_text, stdout);
			*action = CONFIG_EXIT;
			return (0);
		}
		if (strcmp(argv[i], "--version") == 0 ||
		    strcmp(argv[i], "-v") == 0) {
			printf("semd %s (protocol %s)\n", PACKAGE_VERSION,
			    PROTO_VERSION_STR);
			*action = CONFIG_EXIT;
			return (0);
		}
		if (strcmp(argv[i], "-t") == 0)
			*action = CONFIG_TEST;
		else if (strcmp(argv[i], "-T") == 0)
			*action = CONFIG_DUMP;
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

/*
 * Can semd create (or append to) path? access(2) answers for the real
 * user, which is who runs semd; for root only a read-only file system
 * or a missing directory says no.
 */
static int
config_check_writable(const char *what, const char *path, char *err,
    size_t errlen)
{
	char		 dir[PATH_MAX];
	const char	*slash;
	struct stat	 st;

	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode)) {
			errno = EISDIR;
			goto fail;
		}
		if (access(path, W_OK) != 0)
			goto fail;
	}
	slash = strrchr(path, '/');
	if (slash == NULL || (size_t)(slash - path) >= sizeof(dir))
		return (0);	/* config_finish made it absolute */
	if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
		errno = ENOTDIR;
	else if (access(dir, W_OK | X_OK) == 0)
		return (0);
	path = dir;
fail:
	snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
	return (-1);
}

int
config_check(const struct config *cfg, char *err, size_t errlen)
{
	if (cfg->logfile != NULL && config_check_writable("logfile",
	    cfg->logfile, err, errlen) != 0)
		return (-1);
	if (cfg->pidfile != NULL && config_check_writable("pidfile",
	    cfg->pidfile, err, errlen) != 0)
		return (-1);
	if (cfg->unixsocket != NULL && config_check_writable("unixsocket",
	    cfg->unixsocket, err, errlen) != 0)
		return (-1);
	return (0);
}

/* "60s" for 60000, "1500ms" for 1500: the largest exact unit. */
static void
config_format_ms(char *buf, size_t len, int64_t ms)
{
	if (ms != 0 && ms % 3600000 == 0)
		snprintf(buf, len, "%lldh", (long long)(ms / 3600000));
	else if (ms != 0 && ms % 60000 == 0)
		snprintf(buf, len, "%lldm", (long long)(ms / 60000));
	else if (ms != 0 && ms % 1000 == 0)
		snprintf(buf, len, "%llds", (long long)(ms / 1000));
	else
		snprintf(buf, len, "%lldms", (long long)ms);
}

/*
 * The value of a directive (not "semaphore") as the file would spell it;
 * "" when unset.
 */
static void
config_format_value(const struct config *cfg, const struct config_directive *d,
    char *buf, size_t len)
{
	const int64_t	*ip = (const int64_t *)((const char *)cfg + d->offset);
	char *const	*sp = (char *const *)((const char *)cfg + d->offset);
	size_t		 i, used;

	buf[0] = '\0';
	switch (d->type) {
	case CONF_BIND:
		for (i = 0, used = 0; i < cfg->nbind && used < len; i++) {
			snprintf(buf + used, len - used, "%s%s",
			    i > 0 ? " " : "", cfg->bind[i]);
			used = strlen(buf);
		}
		break;
	case CONF_STRING:
	case CONF_FACILITY:
		if (*sp != NULL)
			snprintf(buf, len, "%s", *sp);
		break;
	case CONF_BOOL:
		snprintf(buf, len, "%s", *ip ? "yes" : "no");
		break;
	case CONF_LOGLEVEL:
		snprintf(buf, len, "%s", log_level_name((int)*ip));
		break;
	case CONF_PERSISTENCE:
		snprintf(buf, len, "%s", persist_mode_names[*ip]);
		break;
	case CONF_DURATION:
		config_format_ms(buf, len, *ip);
		break;
	case CONF_OCTAL:
		snprintf(buf, len, "0%03llo", (unsigned long long)*ip);
		break;
	case CONF_INT:
		snprintf(buf, len, "%lld", (long long)*ip);
		break;
	case CONF_SIZE:
		snprintf(buf, len, "%lld", (long long)*ip);
		break;
	case CONF_SEMAPHORE:
		break;
	}
}

void
config_dump(const struct config *cfg, FILE *fp)
{
	const struct config_directive	*d;
	char				 buf[2048];
	size_t				 i;

	fprintf(fp, "# semd %s: the effective configuration\n",
	    PACKAGE_VERSION);
	for (i = 0; i < NDIRECTIVES; i++) {
		d = &directives[i];
		if (d->type == CONF_SEMAPHORE)
			continue;
		config_format_value(cfg, d, buf, sizeof(buf));
		if ((d->offset == offsetof(struct config, requirepass) ||
		    d->offset == offsetof(struct config, redis_password) ||
		    d->offset == offsetof(struct config, sentinel_password)) &&
		    buf[0] != '\0')
			fprintf(fp, "# %s (set, not shown)\n", d->name);
		else if (buf[0] == '\0')
			fprintf(fp, "# %s (unset)\n", d->name);
		else
			fprintf(fp, "%s %s\n", d->name, buf);
	}
	for (i = 0; i < cfg->nsems; i++)
		fprintf(fp, "semaphore %s %u\n", cfg->sems[i].name,
		    cfg->sems[i].capacity);
}

/* Move the value of directive d from next to cur (next gets cur's). */
static void
config_swap_value(struct config *cur, struct config *next,
    const struct config_directive *d)
{
	char	tmp[sizeof(int64_t) > sizeof(char *) ? sizeof(int64_t) :
		    sizeof(char *)];
	size_t	size;

	switch (d->type) {
	case CONF_STRING:
	case CONF_FACILITY:
		size = sizeof(char *);
		break;
	case CONF_BIND:
	case CONF_SEMAPHORE:
		abort();	/* not reloadable field by field */
	default:
		size = sizeof(int64_t);
		break;
	}
	memcpy(tmp, (char *)cur + d->offset, size);
	memcpy((char *)cur + d->offset, (char *)next + d->offset, size);
	memcpy((char *)next + d->offset, tmp, size);
}

void
config_reload(struct config *cur, struct config *next,
    void (*note)(void *arg, const char *name, int applied), void *arg)
{
	const struct config_directive	*d;
	struct config_sem		*sems;
	char				 a[2048], b[2048];
	size_t				 i, nsems;

	for (i = 0; i < NDIRECTIVES; i++) {
		d = &directives[i];
		if (d->type == CONF_SEMAPHORE)
			continue;
		config_format_value(cur, d, a, sizeof(a));
		config_format_value(next, d, b, sizeof(b));
		if (strcmp(a, b) == 0)
			continue;
		if (d->reload)
			config_swap_value(cur, next, d);
		note(arg, d->name, d->reload);
	}
	sems = cur->sems;
	nsems = cur->nsems;
	cur->sems = next->sems;
	cur->nsems = next->nsems;
	next->sems = sems;
	next->nsems = nsems;
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
	free(cfg->syslog_ident);
	free(cfg->syslog_facility);
	free(cfg->pidfile);
	free(cfg->redis);
	redis_addr_free(&cfg->redis_addr);
	free(cfg->redis_password);
	free(cfg->sentinel_password);
	free(cfg->redis_prefix);
	free(cfg->advertise);
	free(cfg->metrics_bind);
	memset(cfg, 0, sizeof(*cfg));
}
