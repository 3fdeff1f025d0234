/*
 * fuzz_reply.c: libFuzzer harness for the reply parser libsemc uses
 * (proto_parse_reply and proto_find_kv, proto/reply.c).
 *
 * The input is one reply line, as a daemon (or anything listening on its
 * port) might send. The parser must not read outside the line; the kind
 * must follow from the first word; rest and the ERR code word must lie
 * inside the line; and every key=value that proto_find_kv() finds must be
 * a word of the rest, with the value right after "key=".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define CHECK(cond, what) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_reply: %s (%s)\n", (what), #cond); \
		abort();						\
	}								\
} while (0)

/* The keys libsemc and semd-cli look up, and two odd ones. */
static const char *const keys[] = {
	"token", "n", "lease", "ttl", "capacity", "used", "holders",
	"waiters", "role", "version", "id", "", "="
};

static int
inside(const char *p, size_t n, const char *line, size_t len)
{
	return (p >= line && p + n <= line + len);
}

static int
first_word_is(const char *line, size_t len, const char *kw)
{
	struct proto_word	w;
	size_t			pos = 0;

	return (proto_next_word(line, len, &pos, &w) &&
	    w.len == strlen(kw) && memcmp(w.p, kw, w.len) == 0);
}

static void
check_kv(const struct proto_word *rest, const char *key)
{
	struct proto_word	value;
	size_t			klen = strlen(key);
	const char		*word;

	if (!proto_find_kv(rest->p, rest->len, key, &value))
		return;
	CHECK(inside(value.p, value.len, rest->p, rest->len),
	    "a value outside the reply");
	word = value.p - klen - 1;
	CHECK(word >= rest->p && memcmp(word, key, klen) == 0 &&
	    word[klen] == '=', "a value not after key=");
	CHECK(word == rest->p || word[-1] == ' ' || word[-1] == '\t',
	    "a key=value found inside a word");
	CHECK(value.p + value.len == rest->p + rest->len ||
	    value.p[value.len] == ' ' || value.p[value.len] == '\t',
	    "a value cut short");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char		*line = (const char *)data;
	struct proto_reply	 r;
	enum proto_reply_kind	 kind;
	size_t			 len = size, i;

	kind = proto_parse_reply(line, size, &r);
	CHECK(kind == r.kind, "the kind returned is not the kind set");
	if (len > 0 && line[len - 1] == '\r')
		len--;
	switch (kind) {
	case PROTO_REPLY_OK:
		CHECK(first_word_is(line, len, "OK"), "OK without OK");
		break;
	case PROTO_REPLY_TIMEOUT:
		CHECK(first_word_is(line, len, "TIMEOUT"),
		    "TIMEOUT without TIMEOUT");
		break;
	case PROTO_REPLY_ERR:
		CHECK(first_word_is(line, len, "ERR"), "ERR without ERR");
		CHECK(r.code_word.len > 0 &&
		    inside(r.code_word.p, r.code_word.len, line, len),
		    "the code word outside the reply");
		CHECK(r.code == proto_err_lookup(r.code_word.p,
		    r.code_word.len), "the code is not the code word's");
		CHECK(r.code == PERR_NONE ||
		    strlen(proto_err_name(r.code)) == r.code_word.len,
		    "a code of another name");
		break;
	case PROTO_REPLY_BAD:
		CHECK(!first_word_is(line, len, "OK") &&
		    !first_word_is(line, len, "TIMEOUT"),
		    "a good reply taken for garbage");
		return (0);
	}
	CHECK(inside(r.rest.p, r.rest.len, line, len), "rest outside the reply");
	CHECK(r.rest.len == 0 || (r.rest.p[0] != ' ' && r.rest.p[0] != '\t' &&
	    r.rest.p[r.rest.len - 1] != ' ' && r.rest.p[r.rest.len - 1] != '\t'),
	    "rest not trimmed");
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		check_kv(&r.rest, keys[i]);
	return (0);
}
