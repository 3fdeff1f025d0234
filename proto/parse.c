/*
 * parse.c: one request line in, one typed request or one ERR PROTO out.
 *
 * Pure: no I/O, no allocation, no locale. Every verb but ACQUIRE, TRY,
 * ACQUIREALL and WATCH takes a fixed list of arguments, declared once in
 * verb_args[]; the optional words and clauses of those get their own small
 * parsers. Errors
 * quote the offending word, made printable and cut short, so a reply line
 * never carries raw client bytes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

/* ACQUIRE <sem> <n> TIMEOUT <ms> LEASE <ms> ID <id> */
#define ACQUIRE_WORDS_MAX	9
/* ACQUIREALL, 16 semaphores and their n, and the three options */
#define PARSE_WORDS_MAX		(1 + 2 * PROTO_MULTI_MAX + 6)
#define ECHO_MAX	40	/* bytes of a client word quoted in an error */
#define ECHO_BUFSIZE	(ECHO_MAX + sizeof("..."))

static const char *const verb_names[VERB__COUNT] = {
#define X(v) #v,
	PROTO_VERBS(X)
#undef X
};

/*
 * Arguments of each verb, one letter per word:
 *   s <sem>	p <password>	c <capacity> 1..	z <capacity> 0..
 *   t <token>	m <ms>		l <label>		i <conn id>
 * NULL means a form with optional words: parse_acquire() for ACQUIRE and
 * TRY, parse_acquireall() for ACQUIREALL, parse_watch() for WATCH.
 */
static const struct {
	const char	*args;
	const char	*usage;		/* after the verb, for error texts */
} verb_args[VERB__COUNT] = {
	[VERB_PING] =		{ "",	 "" },
	[VERB_AUTH] =		{ "p",	 "<password>" },
	[VERB_CREATE] =		{ "sc",	 "<sem> <capacity>" },
	[VERB_RESIZE] =		{ "sz",	 "<sem> <capacity>" },
	[VERB_DELETE] =		{ "s",	 "<sem>" },
	[VERB_ACQUIRE] =	{ NULL,	 "<sem> [<n>] [TIMEOUT <ms>] [LEASE <ms>] "
				    "[ID <id>]" },
	[VERB_TRY] =		{ NULL,	 "<sem> [<n>] [LEASE <ms>] [ID <id>]" },
	[VERB_RELEASE] =	{ "st",	 "<sem> <token>" },
	[VERB_REFRESH] =	{ "stm", "<sem> <token> <ms>" },
	[VERB_ATTACH] =		{ "st",	 "<sem> <token>" },
	[VERB_CHECK] =		{ "st",	 "<sem> <token>" },
	[VERB_REVOKE] =		{ "st",	 "<sem> <token>" },
	[VERB_INFO] =		{ "s",	 "<sem>" },
	[VERB_HOLDERS] =	{ "s",	 "<sem>" },
	[VERB_WAITERS] =	{ "s",	 "<sem>" },
	[VERB_LIST] =		{ "",	 "" },
	[VERB_STATS] =		{ "",	 "" },
	[VERB_QUIT] =		{ "",	 "" },
	[VERB_ROLE] =		{ "",	 "" },
	[VERB_NAME] =		{ "l",	 "<label>" },
	[VERB_CLIENTS] =	{ "",	 "" },
	[VERB_KILL] =		{ "i",	 "<conn id>" },
	[VERB_WATCH] =		{ NULL,	 "<sem> <token> [TIMEOUT <ms>]" },
	[VERB_ACQUIREALL] =	{ NULL,	 "<sem> <n> <sem> <n> [...] [TIMEOUT <ms>] "
				    "[LEASE <ms>] [ID <id>]" },
};

static int
is_blank(char c)
{
	return (c == ' ' || c == '\t');
}

/* ASCII-only upper case: toupper() would depend on the locale. */
static int
ascii_upper(unsigned char c)
{
	return (c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
}

/* 1 if w is the upper-case keyword kw, ignoring ASCII case. */
static int
word_is(const struct proto_word *w, const char *kw)
{
	size_t	i;

	if (w->len != strlen(kw))
		return (0);
	for (i = 0; i < w->len; i++) {
		if (ascii_upper((unsigned char)w->p[i]) != (unsigned char)kw[i])
			return (0);
	}
	return (1);
}

/* w made fit to quote in an error: printable ASCII, at most ECHO_MAX bytes. */
static const char *
echo(const struct proto_word *w, char *buf)
{
	size_t		i, n = w->len > ECHO_MAX ? ECHO_MAX : w->len;
	unsigned char	c;

	for (i = 0; i < n; i++) {
		c = (unsigned char)w->p[i];
		buf[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	buf[n] = '\0';
	if (n < w->len)
		memcpy(buf + n, "...", sizeof("..."));
	return (buf);
}

int
proto_next_word(const char *s, size_t len, size_t *pos, struct proto_word *w)
{
	size_t	i = *pos, start;

	while (i < len && is_blank(s[i]))
		i++;
	if (i >= len) {
		*pos = len;
		return (0);
	}
	start = i;
	while (i < len && !is_blank(s[i]))
		i++;
	w->p = s + start;
	w->len = i - start;
	*pos = i;
	return (1);
}

int
proto_split_words(char *line, char **words, size_t max)
{
	struct proto_word	w;
	size_t			n = 0, i, pos = 0, len = strcspn(line, "\r\n");
	size_t			ends[PROTO_SPLIT_MAX];

	if (max > PROTO_SPLIT_MAX)
		max = PROTO_SPLIT_MAX;
	while (proto_next_word(line, len, &pos, &w)) {
		if (n == max)
			return (-1);
		words[n] = (char *)w.p;
		ends[n++] = (size_t)(w.p - line) + w.len;
	}
	/* Terminate only now: a NUL would be a byte of the next word. */
	for (i = 0; i < n; i++)
		line[ends[i]] = '\0';
	return ((int)n);
}

const char *
proto_verb_name(enum proto_verb verb)
{
	if ((unsigned)verb >= VERB__COUNT)
		return (NULL);
	return (verb_names[verb]);
}

int
proto_valid_name(const char *name, size_t len)
{
	size_t	i;
	char	c;

	if (len == 0 || len > PROTO_NAME_MAX)
		return (0);
	for (i = 0; i < len; i++) {
		c = name[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || memchr("_.:/-", c, 5) != NULL)
			continue;
		return (0);
	}
	return (1);
}

int
proto_valid_id(const char *id, size_t len)
{
	return (len <= PROTO_ID_MAX && proto_valid_name(id, len));
}

int
proto_valid_label(const char *label, size_t len)
{
	size_t	i;

	if (len == 0 || len > PROTO_LABEL_MAX)
		return (0);
	/* The name alphabet, one byte at a time, or '@'. */
	for (i = 0; i < len; i++) {
		if (label[i] != '@' && !proto_valid_name(label + i, 1))
			return (0);
	}
	return (1);
}

int
proto_parse_u64(const char *p, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t	v = 0, d;
	size_t		i;

	if (len == 0)
		return (-1);
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return (-1);
		d = (uint64_t)(p[i] - '0');
		/* v * 10 + d <= max, tested without overflowing. */
		if (d > max || v > (max - d) / 10)
			return (-1);
		v = v * 10 + d;
	}
	*out = v;
	return (0);
}

enum proto_parse_result
proto_set_error(struct proto_error *err, enum proto_err code,
    const char *fmt, ...)
{
	va_list	ap;

	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return (PROTO_PARSE_ERROR);
}

static enum proto_parse_result
parse_arity(const struct proto_request *req, struct proto_error *err)
{
	const char	*usage = verb_args[req->verb].usage;

	return (proto_set_error(err, PERR_PROTO,
	    "wrong number of arguments for '%s' (usage: %s%s%s)",
	    verb_names[req->verb], verb_names[req->verb],
	    *usage != '\0' ? " " : "", usage));
}

static enum proto_parse_result
parse_sem(const struct proto_word *w, struct proto_request *req,
    struct proto_error *err)
{
	char	buf[ECHO_BUFSIZE];

	if (!proto_valid_name(w->p, w->len)) {
		return (proto_set_error(err, PERR_PROTO,
		    "invalid semaphore name '%s' (1..%d bytes of "
		    "A-Z a-z 0-9 _ . : / -)", echo(w, buf), PROTO_NAME_MAX));
	}
	req->sem = *w;
	return (PROTO_PARSE_OK);
}

/* Decimal w in min..max into *out, or an error naming what it was for. */
static enum proto_parse_result
parse_num(const struct proto_word *w, uint64_t min, uint64_t max,
    const char *what, uint64_t *out, struct proto_error *err)
{
	char	buf[ECHO_BUFSIZE];

	if (proto_parse_u64(w->p, w->len, max, out) != 0 || *out < min) {
		return (proto_set_error(err, PERR_PROTO,
		    "invalid %s '%s': must be %llu..%llu", what, echo(w, buf),
		    (unsigned long long)min, (unsigned long long)max));
	}
	return (PROTO_PARSE_OK);
}

/* One fixed argument of kind (a letter of verb_args[].args) into *req. */
static enum proto_parse_result
parse_arg(char kind, const struct proto_word *w, struct proto_request *req,
    struct proto_error *err)
{
	uint64_t	v;
	char		buf[ECHO_BUFSIZE];

	switch (kind) {
	case 's':
		return (parse_sem(w, req, err));
	case 'p':
		req->arg = *w;
		return (PROTO_PARSE_OK);
	case 'c':
	case 'z':
		if (parse_num(w, kind == 'c' ? 1 : 0, PROTO_INT_MAX,
		    "capacity", &v, err) != PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
		req->capacity = (uint32_t)v;
		return (PROTO_PARSE_OK);
	case 't':
		return (parse_num(w, 0, UINT64_MAX, "token", &req->token,
		    err));
	case 'i':
		return (parse_num(w, 0, UINT64_MAX, "connection id",
		    &req->conn_id, err));
	case 'l':
		if (!proto_valid_label(w->p, w->len)) {
			return (proto_set_error(err, PERR_PROTO,
			    "invalid label '%s' (1..%d bytes of "
			    "A-Z a-z 0-9 _ . : / - @)", echo(w, buf),
			    PROTO_LABEL_MAX));
		}
		req->arg = *w;
		return (PROTO_PARSE_OK);
	case 'm':
		if (parse_num(w, 0, PROTO_INT_MAX, "ms", &v, err) !=
		    PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
		req->ms = (uint32_t)v;
		return (PROTO_PARSE_OK);
	}
	return (proto_set_error(err, PERR_PROTO, "internal parser error"));
}

/* 1 if w is one of the option keywords of the acquire forms. */
static int
word_is_option(const struct proto_word *w)
{
	return (word_is(w, "TIMEOUT") || word_is(w, "LEASE") ||
	    word_is(w, "ID"));
}

/*
 * The options of ACQUIRE, TRY and ACQUIREALL, w[i..nw): TIMEOUT <ms>,
 * LEASE <ms> and ID <request-id>, in any order, each at most once. TRY
 * takes no TIMEOUT; ID needs LEASE (a repeat must find a lease that
 * outlived the connection whose reply was lost).
 */
static enum proto_parse_result
parse_options(struct proto_request *req, const struct proto_word *w,
    size_t i, size_t nw, struct proto_error *err)
{
	const char	*verb = verb_names[req->verb];
	const char	*kw;
	int64_t		*clause;
	uint64_t	 v;
	char		 buf[ECHO_BUFSIZE];

	for (; i < nw; i += 2) {
		if (word_is(&w[i], "ID")) {
			if (req->id.len != 0)
				return (proto_set_error(err, PERR_PROTO,
				    "ID given twice"));
			if (i + 1 == nw)
				return (proto_set_error(err, PERR_PROTO,
				    "ID needs a request id"));
			if (!proto_valid_id(w[i + 1].p, w[i + 1].len))
				return (proto_set_error(err, PERR_PROTO,
				    "invalid request id '%s' (1..%d bytes of "
				    "A-Z a-z 0-9 _ . : / -)",
				    echo(&w[i + 1], buf), PROTO_ID_MAX));
			req->id = w[i + 1];
			continue;
		}
		if (word_is(&w[i], "LEASE")) {
			kw = "LEASE";
			clause = &req->lease_ms;
		} else if (word_is(&w[i], "TIMEOUT") &&
		    req->verb != VERB_TRY) {
			kw = "TIMEOUT";
			clause = &req->timeout_ms;
		} else if (word_is(&w[i], "TIMEOUT")) {
			return (proto_set_error(err, PERR_PROTO,
			    "TRY takes no TIMEOUT: it never waits"));
		} else {
			/* Not the usage: ACQUIREALL's would not fit. */
			return (proto_set_error(err, PERR_PROTO,
			    "unexpected '%s' in %s (options: %sLEASE <ms> "
			    "ID <id>)", echo(&w[i], buf), verb,
			    req->verb == VERB_TRY ? "" : "TIMEOUT <ms> "));
		}
		/* -1 (absent) is never a parsed value. */
		if (*clause != -1) {
			return (proto_set_error(err, PERR_PROTO,
			    "%s given twice", kw));
		}
		if (i + 1 == nw) {
			return (proto_set_error(err, PERR_PROTO,
			    "%s needs a value in ms", kw));
		}
		if (parse_num(&w[i + 1], 0, PROTO_INT_MAX, kw, &v, err) !=
		    PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
		*clause = (int64_t)v;
	}
	if (req->id.len != 0 && req->lease_ms == -1)
		return (proto_set_error(err, PERR_PROTO,
		    "ID needs LEASE: only a lease can be asked for again"));
	return (PROTO_PARSE_OK);
}

/*
 * ACQUIRE <sem> [<n>] [TIMEOUT <ms>] [LEASE <ms>] [ID <id>] and TRY <sem>
 * [<n>] [LEASE <ms>] [ID <id>]. The word after <sem> is n unless it is a
 * keyword; the options come in any order, each at most once.
 */
static enum proto_parse_result
parse_acquire(struct proto_request *req, const struct proto_word *w,
    size_t nw, struct proto_error *err)
{
	uint64_t	 v;
	size_t		 i = 2;

	if (nw < 2 || nw > ACQUIRE_WORDS_MAX)
		return (parse_arity(req, err));
	if (parse_sem(&w[1], req, err) != PROTO_PARSE_OK)
		return (PROTO_PARSE_ERROR);
	req->n = 1;
	if (req->verb == VERB_TRY)
		req->timeout_ms = 0;

	if (i < nw && !word_is_option(&w[i])) {
		if (parse_num(&w[i], 1, PROTO_INT_MAX, "n", &v, err) !=
		    PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
		req->n = (uint32_t)v;
		i++;
	}
	if (parse_options(req, w, i, nw, err) != PROTO_PARSE_OK)
		return (PROTO_PARSE_ERROR);
	req->nparts = 1;
	req->parts[0].sem = req->sem;
	req->parts[0].n = req->n;
	return (PROTO_PARSE_OK);
}

/*
 * ACQUIREALL <sem> <n> [<sem> <n>]... [TIMEOUT <ms>] [LEASE <ms>] [ID
 * <id>]: 2 to 16 distinct semaphores, each with its n. In the position of
 * a name, TIMEOUT, LEASE and ID are keywords: the options begin there.
 */
static enum proto_parse_result
parse_acquireall(struct proto_request *req, const struct proto_word *w,
    size_t nw, struct proto_error *err)
{
	uint64_t	 v;
	size_t		 i = 1, j;
	char		 buf[ECHO_BUFSIZE];

	if (nw > PARSE_WORDS_MAX)
		return (proto_set_error(err, PERR_PROTO, "too many words for "
		    "ACQUIREALL: at most %d semaphores", PROTO_MULTI_MAX));
	while (i < nw && !word_is_option(&w[i])) {
		if (req->nparts == PROTO_MULTI_MAX)
			return (proto_set_error(err, PERR_PROTO,
			    "ACQUIREALL takes at most %d semaphores",
			    PROTO_MULTI_MAX));
		if (parse_sem(&w[i], req, err) != PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
		if (i + 1 == nw || word_is_option(&w[i + 1]))
			return (proto_set_error(err, PERR_PROTO,
			    "semaphore '%s' needs its n in ACQUIREALL",
			    echo(&w[i], buf)));
		if (parse_num(&w[i + 1], 1, PROTO_INT_MAX, "n", &v, err) !=
		    PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
		for (j = 0; j < req->nparts; j++) {
			if (req->parts[j].sem.len == w[i].len &&
			    memcmp(req->parts[j].sem.p, w[i].p,
			    w[i].len) == 0)
				return (proto_set_error(err, PERR_PROTO,
				    "semaphore '%s' given twice in "
				    "ACQUIREALL", echo(&w[i], buf)));
		}
		req->parts[req->nparts].sem = w[i];
		req->parts[req->nparts].n = (uint32_t)v;
		req->nparts++;
		i += 2;
	}
	if (req->nparts < PROTO_MULTI_MIN)
		return (proto_set_error(err, PERR_PROTO, "ACQUIREALL needs "
		    "%d to %d semaphores (usage: ACQUIREALL %s)",
		    PROTO_MULTI_MIN, PROTO_MULTI_MAX,
		    verb_args[VERB_ACQUIREALL].usage));
	req->sem = req->parts[0].sem;
	req->n = req->parts[0].n;
	return (parse_options(req, w, i, nw, err));
}

/* WATCH <sem> <token> [TIMEOUT <ms>]. */
static enum proto_parse_result
parse_watch(struct proto_request *req, const struct proto_word *w,
    size_t nw, struct proto_error *err)
{
	uint64_t	v;
	char		buf[ECHO_BUFSIZE];

	if (nw < 3 || nw > 5)
		return (parse_arity(req, err));
	if (parse_arg('s', &w[1], req, err) != PROTO_PARSE_OK ||
	    parse_arg('t', &w[2], req, err) != PROTO_PARSE_OK)
		return (PROTO_PARSE_ERROR);
	if (nw == 3)
		return (PROTO_PARSE_OK);
	if (!word_is(&w[3], "TIMEOUT")) {
		return (proto_set_error(err, PERR_PROTO,
		    "unexpected '%s' in WATCH (usage: WATCH %s)",
		    echo(&w[3], buf), verb_args[VERB_WATCH].usage));
	}
	if (nw == 4) {
		return (proto_set_error(err, PERR_PROTO,
		    "TIMEOUT needs a value in ms"));
	}
	if (parse_num(&w[4], 0, PROTO_INT_MAX, "TIMEOUT", &v, err) !=
	    PROTO_PARSE_OK)
		return (PROTO_PARSE_ERROR);
	req->timeout_ms = (int64_t)v;
	return (PROTO_PARSE_OK);
}

enum proto_parse_result
proto_parse(const char *line, size_t len, struct proto_request *req,
    struct proto_error *err)
{
	struct proto_word	 w[PARSE_WORDS_MAX + 1];
	const char		*args;
	size_t			 nw = 0, pos = 0, i;
	int			 v;
	char			 buf[ECHO_BUFSIZE];

	if (len > 0 && line[len - 1] == '\r')
		len--;
	/* One word past the longest request is enough to know it is too long. */
	while (nw < PARSE_WORDS_MAX + 1 &&
	    proto_next_word(line, len, &pos, &w[nw]))
		nw++;
	if (nw == 0)
		return (PROTO_PARSE_EMPTY);

	memset(req, 0, sizeof(*req));
	req->timeout_ms = -1;
	req->lease_ms = -1;
	for (v = 0; v < VERB__COUNT; v++) {
		if (word_is(&w[0], verb_names[v]))
			break;
	}
	if (v == VERB__COUNT) {
		return (proto_set_error(err, PERR_PROTO,
		    "unknown command '%s'", echo(&w[0], buf)));
	}
	req->verb = (enum proto_verb)v;

	if ((args = verb_args[v].args) == NULL) {
		if (req->verb == VERB_WATCH)
			return (parse_watch(req, w, nw, err));
		if (req->verb == VERB_ACQUIREALL)
			return (parse_acquireall(req, w, nw, err));
		return (parse_acquire(req, w, nw, err));
	}
	if (nw - 1 != strlen(args))
		return (parse_arity(req, err));
	for (i = 1; i < nw; i++) {
		if (parse_arg(args[i - 1], &w[i], req, err) != PROTO_PARSE_OK)
			return (PROTO_PARSE_ERROR);
	}
	return (PROTO_PARSE_OK);
}
