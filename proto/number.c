/*
 * number.c: decimal numbers with a unit, for durations and sizes: one
 * grammar for semd.conf, the command line and semd-cli.
 *
 *   number   = digits [ "." digits ] [ unit ]
 *   duration units: ms s m h        size units: k kb m mb g gb
 *
 * A bare number is in a unit the caller chooses: seconds for everything a
 * person types (semd.conf, semd's flags, semd-cli: PROTO_BARE_DURATION_MULT),
 * milliseconds only for the protocol's own <ms>. Units are case-insensitive. A fraction is kept to the base unit
 * (1.5s is 1500 ms; 0.0001s is 0 ms). Pure: no locale, no allocation.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto.h"

const struct proto_unit proto_duration_units[] = {
	{ "ms", 1 }, { "s", 1000 }, { "m", 60 * 1000 },
	{ "h", 60 * 60 * 1000 }, { NULL, 0 }
};

const struct proto_unit proto_size_units[] = {
	{ "k", 1000 }, { "kb", 1024 }, { "m", 1000 * 1000 },
	{ "mb", 1024 * 1024 }, { "g", 1000 * 1000 * 1000 },
	{ "gb", 1024 * 1024 * 1024 }, { NULL, 0 }
};

static int
unit_is(const char *s, size_t len, const char *suffix)
{
	size_t	i;
	char	c;

	if (len != strlen(suffix))
		return (0);
	for (i = 0; i < len; i++) {
		c = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
		if (c != suffix[i])
			return (0);
	}
	return (1);
}

int
proto_parse_units(const char *s, size_t len, const struct proto_unit *units,
    uint64_t bare_mult, uint64_t max, uint64_t *out)
{
	size_t		 i = 0, whole_end, frac_start, frac_len;
	uint64_t	 whole, mult = bare_mult, frac = 0, scale = 1, v;

	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++;
	whole_end = i;
	if (whole_end == 0 ||
	    proto_parse_u64(s, whole_end, UINT64_MAX, &whole) != 0)
		return (-1);
	frac_start = frac_len = 0;
	if (i < len && s[i] == '.') {
		frac_start = ++i;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++;
		frac_len = i - frac_start;
		if (frac_len == 0)
			return (-1);
	}
	if (i < len) {
		for (; units != NULL && units->suffix != NULL; units++) {
			if (unit_is(s + i, len - i, units->suffix))
				break;
		}
		if (units == NULL || units->suffix == NULL)
			return (-1);
		mult = units->mult;
	}
	if (mult != 0 && whole > UINT64_MAX / mult)
		return (-1);
	v = whole * mult;
	/* The fraction, digit by digit, to the base unit (truncated). */
	for (i = 0; i < frac_len && scale <= UINT64_MAX / 10 / (mult + 1);
	    i++) {
		frac = frac * 10 + (uint64_t)(s[frac_start + i] - '0');
		scale *= 10;
	}
	v += frac * mult / scale;
	if (v < whole * mult || v > max)
		return (-1);
	*out = v;
	return (0);
}

int
proto_parse_duration_ms(const char *s, size_t len, uint64_t bare_mult,
    uint64_t max_ms, uint64_t *out_ms)
{
	return (proto_parse_units(s, len, proto_duration_units, bare_mult,
	    max_ms, out_ms));
}
