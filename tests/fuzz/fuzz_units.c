/*
 * fuzz_units.c: libFuzzer harness for numbers with a unit
 * (proto_parse_units, proto_parse_duration_ms and proto_parse_u64,
 * proto/number.c).
 *
 * The first input byte picks the unit table, the multiplier of a bare
 * number and the maximum, as the callers do (semd.conf, semd-cli, the
 * protocol); the rest is the word. The result is checked against a slow
 * model in 128-bit arithmetic: the grammar digits[.digits][unit] decides
 * acceptance; a whole number must come out exact; a fraction adds less
 * than one unit; nothing above the maximum is ever accepted.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define CHECK(cond, what) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_units: %s (%s)\n", (what), #cond); \
		abort();						\
	}								\
} while (0)

typedef unsigned __int128	u128;

static const uint64_t bare_mults[] = { 1, 1000 };
static const uint64_t maxes[] = {
	UINT64_MAX, INT64_MAX, PROTO_INT_MAX, 86400000
};

static int
lower(int c)
{
	return (c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
}

/* The unit of units named s[0..len) (case-insensitive), or NULL. */
static const struct proto_unit *
model_unit(const struct proto_unit *units, const char *s, size_t len)
{
	size_t	i;

	for (; units->suffix != NULL; units++) {
		if (strlen(units->suffix) != len)
			continue;
		for (i = 0; i < len && lower(s[i]) == units->suffix[i]; i++)
			;
		if (i == len)
			return (units);
	}
	return (NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct proto_unit	*units, *u;
	const char		*s;
	size_t			 len, i, whole_len, frac_len = 0;
	uint64_t		 bare, max, out = 0, w64;
	u128			 whole = 0, base;
	int			 rc, rc2, ok = 1, overflow = 0;
	uint8_t			 sel;

	if (size == 0)
		return (0);
	sel = data[0];
	units = sel & 1 ? proto_size_units : proto_duration_units;
	bare = bare_mults[(sel >> 1) & 1];
	max = maxes[(sel >> 2) & 3];
	s = (const char *)data + 1;
	len = size - 1;

	if (units == proto_duration_units && (sel & 0x10)) {
		rc = proto_parse_duration_ms(s, len, bare, max, &out);
	} else
		rc = proto_parse_units(s, len, units, bare, max, &out);

	/* The model: digits [. digits] [unit]. */
	for (i = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		whole = whole * 10 + (u128)(s[i] - '0');
		if (whole > UINT64_MAX)
			overflow = 1;
		if (overflow)
			whole = (u128)UINT64_MAX + 1;
	}
	whole_len = i;
	if (whole_len == 0)
		ok = 0;
	if (i < len && s[i] == '.') {
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
			frac_len++;
		if (frac_len == 0)
			ok = 0;
	}
	u = NULL;
	if (i < len && (u = model_unit(units, s + i, len - i)) == NULL)
		ok = 0;
	base = whole * (u != NULL ? u->mult : bare);

	/* proto_parse_u64 on the digits alone agrees with the model. */
	if (whole_len > 0) {
		rc2 = proto_parse_u64(s, whole_len, UINT64_MAX, &w64);
		CHECK(overflow ? rc2 == -1 : rc2 == 0 && w64 == (uint64_t)whole,
		    "parse_u64 disagrees");
	}

	if (!ok || overflow || base > max) {
		CHECK(rc == -1, "accepted a word the grammar refuses");
		return (0);
	}
	if (frac_len == 0) {
		CHECK(rc == 0 && out == (uint64_t)base,
		    "a whole number read wrong");
		return (0);
	}
	/* A fraction: less than one more unit, truncated; never over max. */
	if (rc == 0) {
		CHECK(out >= base && out <= max &&
		    (u128)out < base + (u != NULL ? u->mult : bare),
		    "a fraction read wrong");
	} else
		CHECK(base + (u != NULL ? u->mult : bare) > max,
		    "a fraction refused although it is in range");
	return (0);
}
