/*
 * log.c: timestamped log lines to stderr or a file, filtered by level,
 * and to syslog when asked. The file can be reopened (after logrotate
 * moved it away), and under systemd's journal (JOURNAL_STREAM names our
 * stderr) lines carry a "<N>" priority instead of a timestamp and pid,
 * which the journal adds itself.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static FILE		*log_fp;
static char		*log_path;	/* the logfile, for log_reopen */
static enum log_level	 log_min = LOG_LEVEL_INFO;
static int		 log_journal;	/* stderr is the journal */
static int		 log_fatal_stderr = 1;	/* stderr is still the
					   starter's (not detached yet) */
static int		 log_syslog;
static char		*log_ident;

static const char *const log_names[] = {
	"debug", "info", "notice", "warn", "error"
};
/* syslog(3) and journal priorities of each level. */
static const int log_prio[] = {
	LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING, LOG_ERR
};

static const struct {
	const char	*name;
	int		 facility;
} log_facilities[] = {
	{ "user", LOG_USER }, { "daemon", LOG_DAEMON },
	{ "local0", LOG_LOCAL0 }, { "local1", LOG_LOCAL1 },
	{ "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 },
	{ "local4", LOG_LOCAL4 }, { "local5", LOG_LOCAL5 },
	{ "local6", LOG_LOCAL6 }, { "local7", LOG_LOCAL7 },
};

/*
 * Is stderr the journal? systemd sets JOURNAL_STREAM to "DEV:INODE" of
 * the stream it connected; a child whose stderr was redirected elsewhere
 * inherits the variable, hence the comparison.
 */
static int
log_stderr_is_journal(void)
{
	const char		*env = getenv("JOURNAL_STREAM");
	struct stat		 st;
	unsigned long long	 dev, ino;

	if (env == NULL || sscanf(env, "%llu:%llu", &dev, &ino) != 2)
		return (0);
	if (fstat(STDERR_FILENO, &st) != 0)
		return (0);
	return ((unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino);
}

int
log_open(const char *logfile, enum log_level level)
{
	FILE	*fp = NULL;

	log_min = level;
	log_journal = log_stderr_is_journal();
	if (logfile != NULL && *logfile != '\0') {
		if ((fp = fopen(logfile, "a")) == NULL)
			return (-1);
		setvbuf(fp, NULL, _IOLBF, 0);
	}
	if (log_fp != NULL)
		fclose(log_fp);
	log_fp = fp;
	free(log_path);
	log_path = fp != NULL ? xstrdup(logfile) : NULL;
	return (0);
}

int
log_reopen(void)
{
	FILE	*fp;

	if (log_path == NULL)
		return (0);
	if ((fp = fopen(log_path, "a")) == NULL)
		return (-1);
	setvbuf(fp, NULL, _IOLBF, 0);
	fclose(log_fp);
	log_fp = fp;
	return (0);
}

const char *
log_file(void)
{
	return (log_path);
}

int
log_facility_parse(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof(log_facilities) / sizeof(log_facilities[0]);
	    i++) {
		if (strcasecmp(name, log_facilities[i].name) == 0)
			return (log_facilities[i].facility);
	}
	return (-1);
}

void
log_open_syslog(const char *ident, int facility)
{
	log_close_syslog();
	log_ident = xstrdup(ident);
	openlog(log_ident, LOG_PID | LOG_NDELAY, facility);
	log_syslog = 1;
}

void
log_close_syslog(void)
{
	if (!log_syslog)
		return;
	closelog();
	free(log_ident);
	log_ident = NULL;
	log_syslog = 0;
}

void
log_close(void)
{
	if (log_fp != NULL)
		fclose(log_fp);
	log_fp = NULL;
	free(log_path);
	log_path = NULL;
	log_close_syslog();
}

int
log_fd(void)
{
	return (log_fp != NULL ? fileno(log_fp) : STDERR_FILENO);
}

void
log_set_level(enum log_level level)
{
	log_min = level;
}

const char *
log_level_name(int level)
{
	return (log_names[level]);
}

int
log_level_parse(const char *name)
{
	size_t	i;

	for (i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++) {
		if (strcasecmp(name, log_names[i]) == 0)
			return ((int)i);
	}
	if (strcasecmp(name, "warning") == 0)
		return (LOG_LEVEL_WARN);
	return (-1);
}

static void	log_vwrite(enum log_level, int, const char *, va_list)
		    __attribute__((format(printf, 3, 0)));

/* Write one line; errno_suffix >= 0 appends strerror(errno_suffix). */
static void
log_vwrite(enum log_level level, int errno_suffix, const char *fmt, va_list ap)
{
	FILE		*fp = log_fp != NULL ? log_fp : stderr;
	struct timespec	 ts;
	struct tm	 tm;
	char		 stamp[32], msg[1024];
	size_t		 len;

	if (level < log_min)
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (errno_suffix >= 0) {
		len = strlen(msg);
		snprintf(msg + len, sizeof(msg) - len, ": %s",
		    strerror(errno_suffix));
	}
	if (log_syslog)
		syslog(log_prio[level], "%s: %s", log_names[level], msg);
	if (log_fp == NULL && log_journal) {
		/* The journal stamps the time and pid itself. */
		fprintf(fp, "<%d>%s: %s\n", log_prio[level], log_names[level],
		    msg);
		fflush(fp);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(fp, "%s.%03ldZ semd[%ld] %s: %s\n", stamp,
	    ts.tv_nsec / 1000000, (long)getpid(), log_names[level], msg);
	fflush(fp);
}

#define LOG_FN(fn, level, with_errno)					\
void									\
fn(const char *fmt, ...)						\
{									\
	int	saved_errno = errno;					\
	va_list	ap;							\
									\
	va_start(ap, fmt);						\
	log_vwrite(level, with_errno ? saved_errno : -1, fmt, ap);	\
	va_end(ap);							\
	errno = saved_errno;						\
}

LOG_FN(log_debug, LOG_LEVEL_DEBUG, 0)
LOG_FN(log_info, LOG_LEVEL_INFO, 0)
LOG_FN(log_notice, LOG_LEVEL_NOTICE, 0)
LOG_FN(log_warnx, LOG_LEVEL_WARN, 0)
LOG_FN(log_warn, LOG_LEVEL_WARN, 1)
LOG_FN(log_errorx, LOG_LEVEL_ERROR, 0)

void
log_detached(void)
{
	log_fatal_stderr = isatty(STDERR_FILENO);
}

/*
 * A fatal error, logged, and with a logfile also on stderr while that is
 * still whoever started semd (not detached yet) or a terminal, as nginx's
 * "[emerg]": the reason must not hide in a log nobody is reading.
 */
static void	fatal_vwrite(int, const char *, va_list)
		    __attribute__((format(printf, 2, 0)));

static void
fatal_vwrite(int errno_suffix, const char *fmt, va_list ap)
{
	va_list	ap2;

	va_copy(ap2, ap);
	log_vwrite(LOG_LEVEL_ERROR, errno_suffix, fmt, ap);
	if (log_fp != NULL && log_fatal_stderr) {
		fputs("semd: [emerg] ", stderr);
		vfprintf(stderr, fmt, ap2);
		if (errno_suffix >= 0)
			fprintf(stderr, ": %s", strerror(errno_suffix));
		fputc('\n', stderr);
		fflush(stderr);
	}
	va_end(ap2);
}

void
fatal(const char *fmt, ...)
{
	int	saved_errno = errno;
	va_list	ap;

	va_start(ap, fmt);
	fatal_vwrite(saved_errno, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	fatal_vwrite(-1, fmt, ap);
	va_end(ap);
	exit(1);
}

void *
xcalloc(size_t n, size_t size)
{
	void	*p;

	if ((p = calloc(n, size)) == NULL && n != 0 && size != 0)
		abort();
	return (p);
}

char *
xstrdup(const char *s)
{
	char	*p;

	if ((p = strdup(s)) == NULL)
		abort();
	return (p);
}

#define LOG_REPEAT_MS	60000

static uint64_t
log_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
}

void
log_repeat(struct log_repeat *r, const char *subject, const char *why)
{
	uint64_t	now = log_now_ms();

	/* A long why is kept cut: compare what was kept. */
	if (strncmp(r->what, why, sizeof(r->what) - 1) != 0) {
		if (r->count > 0)
			log_warnx("%s: '%s' happened %llu more times", subject,
			    r->what, (unsigned long long)r->count);
		snprintf(r->what, sizeof(r->what), "%s", why);
		r->count = 0;
		r->logged_ms = now;
		log_warnx("%s: %s", subject, why);
		return;
	}
	r->count++;
	if (now - r->logged_ms >= LOG_REPEAT_MS) {
		log_warnx("%s: still failing: %s (%llu times in the last %llu "
		    "s)", subject, why, (unsigned long long)r->count,
		    (unsigned long long)(now - r->logged_ms) / 1000);
		r->count = 0;
		r->logged_ms = now;
	}
}

int
log_repeat_end(struct log_repeat *r, const char *subject)
{
	if (r->what[0] == '\0')
		return (0);
	log_info("%s: back (after '%s', seen %llu more times)", subject,
	    r->what, (unsigned long long)r->count);
	memset(r, 0, sizeof(*r));
	return (1);
}
