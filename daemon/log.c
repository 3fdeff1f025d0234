/*
 * log.c: timestamped log lines to stderr or a file, filtered by level.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static FILE		*log_fp;
static enum log_level	 log_min = LOG_LEVEL_INFO;

static const char *const log_names[] = {
	"debug", "info", "notice", "warn", "error"
};

int
log_open(const char *logfile, enum log_level level)
{
	FILE	*fp;

	log_min = level;
	if (logfile == NULL || *logfile == '\0')
		return (0);
	if ((fp = fopen(logfile, "a")) == NULL)
		return (-1);
	setvbuf(fp, NULL, _IOLBF, 0);
	if (log_fp != NULL)
		fclose(log_fp);
	log_fp = fp;
	return (0);
}

void
log_close(void)
{
	if (log_fp != NULL)
		fclose(log_fp);
	log_fp = NULL;
}

void
log_set_level(enum log_level level)
{
	log_min = level;
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

	if (level < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (errno_suffix >= 0)
		fprintf(fp, "%s.%03ldZ semd[%ld] %s: %s: %s\n", stamp,
		    ts.tv_nsec / 1000000, (long)getpid(), log_names[level], msg,
		    strerror(errno_suffix));
	else
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
fatal(const char *fmt, ...)
{
	int	saved_errno = errno;
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LEVEL_ERROR, saved_errno, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list	ap;

	va_start(ap, fmt);
	log_vwrite(LOG_LEVEL_ERROR, -1, fmt, ap);
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

	if (strcmp(r->what, why) != 0) {
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
