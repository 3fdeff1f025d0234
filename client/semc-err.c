/*
 * semc-err.c: libsemc's outcomes, their names and messages, and the last
 * outcome of a handle in words.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "semc-int.h"

/* The protocol's codes and ours line up one to one (see semc.h). */
_Static_assert((int)SEMC_ERR_PROTO == (int)PERR_PROTO &&
    (int)SEMC_ERR_NOCONN == (int)PERR_NOCONN &&
    (int)SEMC_TIMEOUT == (int)PERR__COUNT,
    "semc_err and proto_err disagree");

static const char *const semc_messages[SEMC__COUNT] = {
#define SEMC_X(name, msg) msg,
	SEMC_ERRORS(SEMC_X)
#undef SEMC_X
};

static const char *const semc_names[SEMC__COUNT] = {
#define SEMC_X(name, msg) #name,
	SEMC_ERRORS(SEMC_X)
#undef SEMC_X
};

const char *
semc_version(void)
{
	return (SEMC_VERSION);
}

const char *
semc_strerror(enum semc_err err)
{
	if ((unsigned)err >= SEMC__COUNT)
		return ("unknown error");
	return (semc_messages[err]);
}

const char *
semc_errname(enum semc_err err)
{
	if ((unsigned)err >= SEMC__COUNT)
		return ("UNKNOWN");
	return (semc_names[err]);
}

/* A code from an ERR reply; SEMC_ERR_SERVER for a code we do not know. */
enum semc_err
semc_err_from_proto(enum proto_err code)
{
	if (code <= PERR_NONE || code >= PERR__COUNT)
		return (SEMC_ERR_SERVER);
	return ((enum semc_err)code);
}

/* Record err with its message and details; returns err. */
enum semc_err
semc_seterr(struct semc *c, enum semc_err err, const char *fmt, ...)
{
	va_list	ap;
	int	len;

	len = snprintf(c->errmsg, sizeof(c->errmsg), "%s", semc_strerror(err));
	if (fmt != NULL && len >= 0 && (size_t)len < sizeof(c->errmsg) - 2) {
		c->errmsg[len++] = ':';
		c->errmsg[len++] = ' ';
		va_start(ap, fmt);
		vsnprintf(c->errmsg + len, sizeof(c->errmsg) - (size_t)len,
		    fmt, ap);
		va_end(ap);
	}
	return (err);
}

/* Turn the outcome was (recorded last) into err, keeping its details. */
enum semc_err
semc_seterr_again(struct semc *c, enum semc_err was, enum semc_err err,
    const char *what)
{
	const char	*old = semc_strerror(was);
	char		 why[SEMC_ERRMSG_MAX];
	size_t		 skip = 0;

	if (strncmp(c->errmsg, old, strlen(old)) == 0 &&
	    strncmp(c->errmsg + strlen(old), ": ", 2) == 0)
		skip = strlen(old) + 2;
	snprintf(why, sizeof(why), "%s", c->errmsg + skip);
	return (semc_seterr(c, err, "%s: %s", what, why));
}

const char *
semc_errmsg(const struct semc *c)
{
	return (c->errmsg);
}

int64_t
semc_now_ms(void)
{
	struct timespec	ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}
