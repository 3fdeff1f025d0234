/*
 * log.h: the daemon's log, in the OpenBSD manner.
 *
 * Lines go to stderr (or the logfile) as
 *   2026-11-22T18:00:00.123Z semd[PID] info: text
 * fatal() and fatalx() are for start-up failures and broken invariants
 * only; client mistakes are answered with ERR and at most logged at debug.
 */
#ifndef SEMD_LOG_H
#define SEMD_LOG_H

#include <stdarg.h>
#include <stdint.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_NOTICE,	/* worth an operator's eye: a failed AUTH */
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR
};

/*
 * Log at level to logfile, or to stderr when it is NULL (without the
 * timestamp and pid, which the journal adds, when stderr is the journal).
 * Returns -1 with errno when the file cannot be opened (nothing changed).
 */
int		 log_open(const char *logfile, enum log_level level);
/* stderr left the starter: fatal errors go there only if a terminal. */
void		 log_detached(void);
/* Open the logfile again (logrotate moved it); -1 with errno, kept open. */
int		 log_reopen(void);
/* The logfile in use, or NULL for stderr. */
const char	*log_file(void);
/* The descriptor lines go to (for a last line from a signal handler). */
int		 log_fd(void);
/* Also send every line to syslog(3) as ident, with that facility. */
void		 log_open_syslog(const char *ident, int facility);
void		 log_close_syslog(void);
/* "user", "daemon" or "local0".."local7" as a LOG_* facility; -1 if not. */
int		 log_facility_parse(const char *name);
void		 log_close(void);
void		 log_set_level(enum log_level level);
/* Parse "debug", "info", "notice", "warn" or "error"; -1 when unknown. */
int		 log_level_parse(const char *name);
/* The name of a level, as log_level_parse takes it. */
const char	*log_level_name(int level);

void		 log_debug(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_info(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_notice(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_warnx(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
/* As log_warnx, with ": strerror(errno)" appended. */
void		 log_warn(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
void		 log_errorx(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2)));
/* Log at error level, with strerror(errno) appended, and exit(1). */
void		 fatal(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2), noreturn));
/* Log at error level and exit(1). */
void		 fatalx(const char *fmt, ...)
		    __attribute__((format(printf, 1, 2), noreturn));

/* Allocation that aborts on failure: limits, not malloc, bound memory. */
void		*xcalloc(size_t n, size_t size);
char		*xstrdup(const char *s);

/*
 * A failure that may recur for a long time (Redis refusing writes): it is
 * logged once, then only counted, and logged again with its count at most
 * once a minute; the end of it is logged once. A flood of identical lines
 * tells an operator nothing more than one line and a count.
 */
struct log_repeat {
	char		what[512];	/* the failure seen last; "" none */
	uint64_t	count;		/* seen again since last logged */
	uint64_t	logged_ms;	/* when it was last logged */
};

/* Log "subject: why" at warn level, or count it (see above). */
void		 log_repeat(struct log_repeat *r, const char *subject,
		    const char *why);
/*
 * The failure is over: log "subject: back (after ...)" at info level if
 * one was seen, and forget it. Returns 1 if one was seen.
 */
int		 log_repeat_end(struct log_repeat *r, const char *subject);

#endif /* SEMD_LOG_H */
