/*
 * proto.h: the semd wire protocol, version 1 (see README "Protocol").
 *
 * Pure code shared by the daemon and the client library: it turns one
 * request line into a typed request, and formats and parses reply lines.
 * Nothing here does I/O or allocates; parsed words point into the caller's
 * line, which must outlive the request.
 */
#ifndef SEMD_PROTO_H
#define SEMD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_VERSION		1
#define PROTO_VERSION_STR	"1.1"		/* with the 1.1 additions */
#define PROTO_NAME_MAX		200		/* bytes in a semaphore name */
#define PROTO_LABEL_MAX		64		/* bytes in a NAME label */
#define PROTO_ID_MAX		64		/* bytes in a request ID */
#define PROTO_MULTI_MIN		2		/* semaphores of an ACQUIREALL */
#define PROTO_MULTI_MAX		16
#define PROTO_INT_MAX		2147483647u	/* 2^31-1: n, capacity, ms */
#define PROTO_ERRMSG_MAX	160		/* human text after ERR CODE */
#define PROTO_DEFAULT_PORT	7313

/*
 * Error codes, in the order doc/protocol.md lists them (1.0, then 1.1).
 * X(code)
 */
#define PROTO_ERRORS(X)	\
	X(PROTO)	\
	X(TOOLONG)	\
	X(AUTH)		\
	X(NOSEM)	\
	X(EXISTS)	\
	X(RANGE)	\
	X(NOTHELD)	\
	X(NOTOWNER)	\
	X(NOTLEASE)	\
	X(BUSY)		\
	X(LIMIT)	\
	X(UNAVAILABLE)	\
	X(STANDBY)	\
	X(NOCONN)

enum proto_err {
	PERR_NONE = 0,
#define X(c) PERR_##c,
	PROTO_ERRORS(X)
#undef X
	PERR__COUNT
};

/* Request verbs. X(VERB) */
#define PROTO_VERBS(X)	\
	X(PING)		\
	X(AUTH)		\
	X(CREATE)	\
	X(RESIZE)	\
	X(DELETE)	\
	X(ACQUIRE)	\
	X(TRY)		\
	X(RELEASE)	\
	X(REFRESH)	\
	X(ATTACH)	\
	X(CHECK)	\
	X(REVOKE)	\
	X(INFO)		\
	X(HOLDERS)	\
	X(WAITERS)	\
	X(LIST)		\
	X(STATS)	\
	X(QUIT)		\
	X(ROLE)		\
	X(NAME)		\
	X(CLIENTS)	\
	X(KILL)		\
	X(WATCH)	\
	X(ACQUIREALL)

enum proto_verb {
#define X(v) VERB_##v,
	PROTO_VERBS(X)
#undef X
	VERB__COUNT
};

/* A word of the request line: not NUL-terminated, may contain NUL bytes. */
struct proto_word {
	const char	*p;
	size_t		 len;
};

/* One semaphore of an ACQUIREALL and the units it asks of it. */
struct proto_part {
	struct proto_word	 sem;
	uint32_t		 n;
};

/*
 * A parsed request. Only the fields the verb takes are meaningful:
 *   sem       CREATE RESIZE DELETE ACQUIRE TRY RELEASE REFRESH ATTACH
 *             CHECK REVOKE INFO HOLDERS WAITERS WATCH; ACQUIREALL: the
 *             first of its semaphores
 *   arg       AUTH (the password, any bytes but blanks), NAME (the label)
 *   n         ACQUIRE TRY (1 when omitted); ACQUIREALL: parts[0].n
 *   parts     ACQUIREALL: nparts (2..16) distinct semaphores, in the
 *             order given; ACQUIRE TRY: nparts 1, parts[0] = sem, n
 *   id        ACQUIRE TRY ACQUIREALL: the request ID (len 0: none; only
 *             with a lease)
 *   capacity  CREATE (1..2^31-1) RESIZE (0..2^31-1)
 *   timeout_ms ACQUIRE ACQUIREALL WATCH (-1: wait for ever; TRY sets 0)
 *   lease_ms  ACQUIRE TRY ACQUIREALL (-1: no lease, bound to the connection)
 *   token     RELEASE REFRESH ATTACH CHECK REVOKE WATCH
 *   ms        REFRESH
 *   conn_id   KILL
 */
struct proto_request {
	enum proto_verb		 verb;
	struct proto_word	 sem;
	struct proto_word	 arg;
	uint32_t		 n;
	uint32_t		 nparts;
	struct proto_part	 parts[PROTO_MULTI_MAX];
	struct proto_word	 id;
	uint32_t		 capacity;
	int64_t			 timeout_ms;
	int64_t			 lease_ms;
	uint64_t		 token;
	uint32_t		 ms;
	uint64_t		 conn_id;
};

/* Why a request was refused: a code and a one-line human text. */
struct proto_error {
	enum proto_err	code;
	char		msg[PROTO_ERRMSG_MAX];
};

enum proto_parse_result {
	PROTO_PARSE_OK,		/* *req is filled in */
	PROTO_PARSE_EMPTY,	/* blank line: ignore it, send no reply */
	PROTO_PARSE_ERROR	/* *err is filled in */
};

/*
 * Parse one request line of len bytes, without its "\n" (a trailing "\r"
 * is tolerated and dropped). Words in *req point into line.
 */
enum proto_parse_result	 proto_parse(const char *line, size_t len,
			    struct proto_request *req, struct proto_error *err);

/*
 * Find the next word of s[0..len) at or after *pos. Words are separated by
 * runs of ' ' and '\t' only; any other byte (NUL, '\r', 0xff) belongs to a
 * word. Returns 1, sets *w and moves *pos past the word; 0 when none is left.
 * The one tokenizer of requests, replies and key=value lists.
 */
int			 proto_next_word(const char *s, size_t len, size_t *pos,
			    struct proto_word *w);

#define PROTO_SPLIT_MAX	64	/* words proto_split_words() returns */

/*
 * Split a NUL-terminated line in place into NUL-terminated words (by
 * proto_next_word, up to the first "\r" or "\n"): for the config file
 * and semd-cli's lines. Returns how many, or -1 when more than max (at
 * most PROTO_SPLIT_MAX).
 */
int			 proto_split_words(char *line, char **words,
			    size_t max);

/* "PROTO", "TOOLONG", ...; NULL for PERR_NONE or out of range. */
const char		*proto_err_name(enum proto_err code);
/* The code named by name[0..len), or PERR_NONE. */
enum proto_err		 proto_err_lookup(const char *name, size_t len);
/* "PING", "ACQUIRE", ...; NULL when out of range. */
const char		*proto_verb_name(enum proto_verb verb);

/* 1 if name[0..len) is a valid semaphore name (1..200 bytes of the alphabet). */
int			 proto_valid_name(const char *name, size_t len);

/* 1 if id[0..len) is a valid request ID (1..64 bytes of the name alphabet). */
int			 proto_valid_id(const char *id, size_t len);

/* 1 if label[0..len) is a valid NAME label (1..64 bytes, the alphabet or @). */
int			 proto_valid_label(const char *label, size_t len);

/*
 * Parse a whole decimal word (digits only, no sign, no blanks) of at most
 * max; returns 0 and sets *out, or -1 when malformed or above max.
 */
int			 proto_parse_u64(const char *p, size_t len, uint64_t max,
			    uint64_t *out);

/* A unit suffix and what it multiplies by (number.c). */
struct proto_unit {
	const char	*suffix;	/* lower case; NULL ends a table */
	uint64_t	 mult;
};

extern const struct proto_unit proto_duration_units[];	/* ms s m h */
extern const struct proto_unit proto_size_units[];	/* k kb m mb g gb */

/*
 * Parse "digits[.digits][unit]" (the whole word) with a unit from units
 * (case-insensitive); a bare number is multiplied by bare_mult. A fraction
 * is kept to the base unit, truncated. Returns 0 and sets *out, or -1 when
 * malformed, overflowing or above max.
 */
int			 proto_parse_units(const char *s, size_t len,
			    const struct proto_unit *units, uint64_t bare_mult,
			    uint64_t max, uint64_t *out);
/*
 * The one rule for a duration a person types (semd.conf, semd's flags,
 * semd-cli's options and arguments): a bare number is seconds, as Redis's
 * "timeout 300"; a suffix gives other units. Only the protocol's own words
 * (ACQUIRE ... LEASE 500, typed in upper case) keep milliseconds.
 */
#define PROTO_BARE_DURATION_MULT	1000

/*
 * A duration in milliseconds: "250ms", "1.5s", "2m", "24h"; a bare number
 * is in bare_mult ms (PROTO_BARE_DURATION_MULT for what a person types;
 * 1 for the protocol's <ms>).
 */
int			 proto_parse_duration_ms(const char *s, size_t len,
			    uint64_t bare_mult, uint64_t max_ms,
			    uint64_t *out_ms);

/* Fill *err with code and a printf-formatted text; returns PROTO_PARSE_ERROR. */
enum proto_parse_result	 proto_set_error(struct proto_error *err,
			    enum proto_err code, const char *fmt, ...)
			    __attribute__((format(printf, 3, 4)));

/* A reply line as seen by a client. */
enum proto_reply_kind {
	PROTO_REPLY_OK,		/* "OK ..."; rest holds the words after OK */
	PROTO_REPLY_TIMEOUT,	/* "TIMEOUT" */
	PROTO_REPLY_ERR,	/* "ERR CODE text"; code, and rest = text */
	PROTO_REPLY_BAD		/* not a reply line */
};

struct proto_reply {
	enum proto_reply_kind	 kind;
	enum proto_err		 code;	/* for ERR; PERR_NONE if unknown code */
	struct proto_word	 code_word; /* the CODE word as sent */
	struct proto_word	 rest;	/* after "OK " or "ERR CODE " */
};

/* Parse one reply line (without "\n"; a trailing "\r" is dropped). */
enum proto_reply_kind	 proto_parse_reply(const char *line, size_t len,
			    struct proto_reply *reply);

/*
 * Find key=value among the blank-separated words of s[0..len); returns 1
 * and sets *value to point into s, or 0 when absent.
 */
int			 proto_find_kv(const char *s, size_t len, const char *key,
			    struct proto_word *value);

#endif /* SEMD_PROTO_H */
