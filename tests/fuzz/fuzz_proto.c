/*
 * fuzz_proto.c: libFuzzer harness for the request parser (proto/parse.c).
 *
 * The input is one request line. Beyond not crashing, proto_parse() must
 * keep its contract: a blank line is EMPTY; an error is ERR PROTO with a
 * printable, NUL-terminated text (a reply never carries raw client bytes);
 * a parsed request has every field in its range, words inside the line,
 * and reads back the same once written out in canonical form.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define CHECK(cond, what) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_proto: %s (%s)\n", (what), #cond); \
		abort();						\
	}								\
} while (0)

static int
word_inside(const struct proto_word *w, const char *line, size_t len)
{
	return (w->p >= line && w->p + w->len <= line + len && w->len > 0);
}

/* req written out canonically into buf, with a final CR; its length. */
static size_t
format_request(const struct proto_request *req, char *buf, size_t size)
{
	const char	*verb = proto_verb_name(req->verb);
	int		 sl = (int)req->sem.len, al = (int)req->arg.len, n;
	uint32_t	 i;

	switch (req->verb) {
	case VERB_AUTH:
	case VERB_NAME:
		/* A password may hold any byte but a blank, NUL included. */
		n = snprintf(buf, size, "%s ", verb);
		CHECK((size_t)n + req->arg.len < size, "a long password");
		memcpy(buf + n, req->arg.p, req->arg.len);
		n += al;
		break;
	case VERB_CREATE:
	case VERB_RESIZE:
		n = snprintf(buf, size, "%s %.*s %u", verb, sl, req->sem.p,
		    req->capacity);
		break;
	case VERB_DELETE:
	case VERB_INFO:
	case VERB_HOLDERS:
	case VERB_WAITERS:
		n = snprintf(buf, size, "%s %.*s", verb, sl, req->sem.p);
		break;
	case VERB_ACQUIRE:
	case VERB_TRY:
		n = snprintf(buf, size, "%s %.*s %u", verb, sl, req->sem.p,
		    req->n);
		if (req->verb == VERB_ACQUIRE && req->timeout_ms >= 0)
			n += snprintf(buf + n, size - (size_t)n, " timeout %lld",
			    (long long)req->timeout_ms);
		if (req->lease_ms >= 0)
			n += snprintf(buf + n, size - (size_t)n, " LEASE %lld",
			    (long long)req->lease_ms);
		if (req->id.len > 0)
			n += snprintf(buf + n, size - (size_t)n, " id %.*s",
			    (int)req->id.len, req->id.p);
		break;
	case VERB_ACQUIREALL:
		n = snprintf(buf, size, "%s", verb);
		for (i = 0; i < req->nparts; i++)
			n += snprintf(buf + n, size - (size_t)n, " %.*s %u",
			    (int)req->parts[i].sem.len, req->parts[i].sem.p,
			    req->parts[i].n);
		if (req->id.len > 0)
			n += snprintf(buf + n, size - (size_t)n, " ID %.*s",
			    (int)req->id.len, req->id.p);
		if (req->timeout_ms >= 0)
			n += snprintf(buf + n, size - (size_t)n, " timeout %lld",
			    (long long)req->timeout_ms);
		if (req->lease_ms >= 0)
			n += snprintf(buf + n, size - (size_t)n, " LEASE %lld",
			    (long long)req->lease_ms);
		break;
	case VERB_RELEASE:
	case VERB_ATTACH:
	case VERB_CHECK:
	case VERB_REVOKE:
		n = snprintf(buf, size, "%s %.*s %llu", verb, sl, req->sem.p,
		    (unsigned long long)req->token);
		break;
	case VERB_REFRESH:
		n = snprintf(buf, size, "%s %.*s %llu %u", verb, sl,
		    req->sem.p, (unsigned long long)req->token, req->ms);
		break;
	case VERB_WATCH:
		n = snprintf(buf, size, "%s\t%.*s %llu", verb, sl, req->sem.p,
		    (unsigned long long)req->token);
		if (req->timeout_ms >= 0)
			n += snprintf(buf + n, size - (size_t)n, " TIMEOUT %lld",
			    (long long)req->timeout_ms);
		break;
	case VERB_KILL:
		n = snprintf(buf, size, "%s %llu", verb,
		    (unsigned long long)req->conn_id);
		break;
	default:
		n = snprintf(buf, size, "%s", verb);
		break;
	}
	/* The tolerated CR, so that a password ending in CR stays whole. */
	CHECK(n > 0 && (size_t)n + 1 < size, "a canonical request overflowed");
	buf[n++] = '\r';
	return ((size_t)n);
}

static void
check_request(const struct proto_request *req, const char *line, size_t len)
{
	uint32_t	i, j;

	CHECK(proto_verb_name(req->verb) != NULL, "a verb out of range");
	switch (req->verb) {
	case VERB_AUTH:
		CHECK(word_inside(&req->arg, line, len), "AUTH's password");
		CHECK(memchr(req->arg.p, ' ', req->arg.len) == NULL &&
		    memchr(req->arg.p, '\t', req->arg.len) == NULL,
		    "a password with a blank");
		return;
	case VERB_NAME:
		CHECK(word_inside(&req->arg, line, len) &&
		    proto_valid_label(req->arg.p, req->arg.len), "a bad label");
		return;
	case VERB_PING: case VERB_LIST: case VERB_STATS: case VERB_QUIT:
	case VERB_ROLE: case VERB_CLIENTS: case VERB_KILL:
		return;
	default:
		break;
	}
	CHECK(word_inside(&req->sem, line, len) &&
	    proto_valid_name(req->sem.p, req->sem.len), "a bad semaphore name");
	switch (req->verb) {
	case VERB_CREATE:
		CHECK(req->capacity >= 1 && req->capacity <= PROTO_INT_MAX,
		    "CREATE's capacity");
		break;
	case VERB_RESIZE:
		CHECK(req->capacity <= PROTO_INT_MAX, "RESIZE's capacity");
		break;
	case VERB_ACQUIRE:
	case VERB_TRY:
		CHECK(req->n >= 1 && req->n <= PROTO_INT_MAX, "n");
		CHECK(req->verb == VERB_ACQUIRE || req->timeout_ms == 0,
		    "TRY waits");
		CHECK(req->timeout_ms >= -1 && req->timeout_ms <= PROTO_INT_MAX,
		    "TIMEOUT");
		CHECK(req->lease_ms >= -1 && req->lease_ms <= PROTO_INT_MAX,
		    "LEASE");
		CHECK(req->id.len == 0 || (req->lease_ms >= 0 &&
		    word_inside(&req->id, line, len) &&
		    proto_valid_id(req->id.p, req->id.len)), "ID");
		CHECK(req->nparts == 1 && req->parts[0].n == req->n,
		    "an ACQUIRE's one part");
		break;
	case VERB_ACQUIREALL:
		CHECK(req->nparts >= PROTO_MULTI_MIN &&
		    req->nparts <= PROTO_MULTI_MAX, "ACQUIREALL's count");
		for (i = 0; i < req->nparts; i++) {
			CHECK(word_inside(&req->parts[i].sem, line, len) &&
			    proto_valid_name(req->parts[i].sem.p,
			    req->parts[i].sem.len), "a part's name");
			CHECK(req->parts[i].n >= 1 &&
			    req->parts[i].n <= PROTO_INT_MAX, "a part's n");
			for (j = 0; j < i; j++)
				CHECK(req->parts[j].sem.len !=
				    req->parts[i].sem.len || memcmp(
				    req->parts[j].sem.p, req->parts[i].sem.p,
				    req->parts[i].sem.len) != 0,
				    "a semaphore twice");
		}
		CHECK(req->id.len == 0 || req->lease_ms >= 0, "ID w/o LEASE");
		break;
	case VERB_REFRESH:
		CHECK(req->ms <= PROTO_INT_MAX, "REFRESH's ms");
		break;
	case VERB_WATCH:
		CHECK(req->timeout_ms >= -1 && req->timeout_ms <= PROTO_INT_MAX,
		    "WATCH's TIMEOUT");
		break;
	default:
		break;
	}
}

static void
check_same(const struct proto_request *a, const struct proto_request *b)
{
	uint32_t	i;

	CHECK(a->verb == b->verb && a->n == b->n &&
	    a->capacity == b->capacity && a->timeout_ms == b->timeout_ms &&
	    a->lease_ms == b->lease_ms && a->token == b->token &&
	    a->ms == b->ms && a->conn_id == b->conn_id,
	    "a canonical request parses differently");
	CHECK(a->sem.len == b->sem.len &&
	    (a->sem.len == 0 || memcmp(a->sem.p, b->sem.p, a->sem.len) == 0),
	    "a canonical request names another semaphore");
	CHECK(a->arg.len == b->arg.len &&
	    (a->arg.len == 0 || memcmp(a->arg.p, b->arg.p, a->arg.len) == 0),
	    "a canonical request has another argument");
	CHECK(a->id.len == b->id.len &&
	    (a->id.len == 0 || memcmp(a->id.p, b->id.p, a->id.len) == 0),
	    "a canonical request has another ID");
	if (a->verb == VERB_ACQUIREALL) {
		CHECK(a->nparts == b->nparts, "another count of semaphores");
		for (i = 0; i < a->nparts; i++)
			CHECK(a->parts[i].n == b->parts[i].n &&
			    a->parts[i].sem.len == b->parts[i].sem.len &&
			    memcmp(a->parts[i].sem.p, b->parts[i].sem.p,
			    a->parts[i].sem.len) == 0, "another part");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char		*line = (const char *)data;
	struct proto_request	 req, again;
	struct proto_error	 err;
	enum proto_parse_result	 rc;
	size_t			 i, len = size, n, bufsize;
	char			*buf;
	int			 blank = 1;

	if (len > 0 && line[len - 1] == '\r')
		len--;
	for (i = 0; i < len; i++) {
		if (line[i] != ' ' && line[i] != '\t')
			blank = 0;
	}
	memset(&err, 0, sizeof(err));
	rc = proto_parse(line, size, &req, &err);
	CHECK((rc == PROTO_PARSE_EMPTY) == blank, "EMPTY iff blank");
	switch (rc) {
	case PROTO_PARSE_EMPTY:
		break;
	case PROTO_PARSE_ERROR:
		CHECK(err.code == PERR_PROTO, "a parse error is not PROTO");
		n = strnlen(err.msg, sizeof(err.msg));
		CHECK(n > 0 && n < sizeof(err.msg), "an empty or open text");
		for (i = 0; i < n; i++) {
			CHECK(err.msg[i] >= 0x20 && err.msg[i] < 0x7f,
			    "an error text with a raw byte");
		}
		break;
	case PROTO_PARSE_OK:
		check_request(&req, line, len);
		/* Canonical numbers add at most a few words to the line. */
		bufsize = size + 128;
		if ((buf = malloc(bufsize)) == NULL)
			abort();
		n = format_request(&req, buf, bufsize);
		CHECK(proto_parse(buf, n, &again, &err) == PROTO_PARSE_OK,
		    "a canonical request does not parse");
		check_same(&req, &again);
		free(buf);
		break;
	}
	return (0);
}
