/*
 * reply.c: reply lines both ways, and the names of the error codes.
 *
 * The daemon formats "ERR CODE text"; the client library parses every
 * reply line and picks key=value fields out of it. Parsing is lenient
 * where the protocol (doc/protocol.md) asks clients to be (extra words, unknown codes and
 * keys) and strict about the first word, so garbage is never taken for
 * a reply. Words are split by proto_next_word(), as requests are.
 */
#include <string.h>

#include "proto.h"

static const char *const err_names[PERR__COUNT] = {
	NULL,
#define X(c) #c,
	PROTO_ERRORS(X)
#undef X
};

const char *
proto_err_name(enum proto_err code)
{
	if ((unsigned)code >= PERR__COUNT)
		return (NULL);
	return (err_names[code]);
}

/* Codes are matched exactly: the daemon always sends them in upper case. */
enum proto_err
proto_err_lookup(const char *name, size_t len)
{
	int	i;

	for (i = PERR_NONE + 1; i < PERR__COUNT; i++) {
		if (strlen(err_names[i]) == len &&
		    memcmp(err_names[i], name, len) == 0)
			return ((enum proto_err)i);
	}
	return (PERR_NONE);
}

static int
word_eq(const struct proto_word *w, const char *s)
{
	return (w->len == strlen(s) && memcmp(w->p, s, w->len) == 0);
}

/*
 * The first word decides the kind; rest runs from the next word to the
 * end of the last one, inner blanks kept. TIMEOUT may carry words too:
 * later versions may add some, as they may on OK.
 */
enum proto_reply_kind
proto_parse_reply(const char *line, size_t len, struct proto_reply *reply)
{
	struct proto_word	w;
	size_t			pos = 0;

	memset(reply, 0, sizeof(*reply));
	reply->kind = PROTO_REPLY_BAD;
	reply->code = PERR_NONE;
	if (len > 0 && line[len - 1] == '\r')
		len--;
	reply->rest.p = line + len;

	if (!proto_next_word(line, len, &pos, &w))
		return (PROTO_REPLY_BAD);
	if (word_eq(&w, "OK"))
		reply->kind = PROTO_REPLY_OK;
	else if (word_eq(&w, "TIMEOUT"))
		reply->kind = PROTO_REPLY_TIMEOUT;
	else if (word_eq(&w, "ERR")) {
		if (!proto_next_word(line, len, &pos, &reply->code_word))
			return (PROTO_REPLY_BAD);
		reply->code = proto_err_lookup(reply->code_word.p,
		    reply->code_word.len);
		reply->kind = PROTO_REPLY_ERR;
	} else
		return (PROTO_REPLY_BAD);

	if (proto_next_word(line, len, &pos, &w)) {
		reply->rest.p = w.p;
		do
			reply->rest.len = (size_t)(w.p + w.len - reply->rest.p);
		while (proto_next_word(line, len, &pos, &w));
	}
	return (reply->kind);
}

int
proto_find_kv(const char *s, size_t len, const char *key,
    struct proto_word *value)
{
	struct proto_word	w;
	size_t			pos = 0, klen = strlen(key);

	while (proto_next_word(s, len, &pos, &w)) {
		if (w.len > klen && w.p[klen] == '=' &&
		    memcmp(w.p, key, klen) == 0) {
			value->p = w.p + klen + 1;
			value->len = w.len - klen - 1;
			return (1);
		}
	}
	return (0);
}
