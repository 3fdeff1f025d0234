/*
 * histo.c: fixed-bucket latency histograms (see histo.h).
 */
#include "histo.h"

/* 100 us to 60 s, roughly 1-2.5-5 per decade. */
static const uint32_t histo_bounds_us[HISTO_NBOUNDS] = {
	100, 250, 500,
	1000, 2500, 5000,
	10000, 25000, 50000,
	100000, 250000, 500000,
	1000000, 2500000, 5000000,
	10000000, 30000000, 60000000
};

uint32_t
histo_bound_us(int i)
{
	return (histo_bounds_us[i]);
}

void
histo_observe(struct histo *h, uint64_t ms)
{
	uint64_t	us;
	int		i;

	us = ms > UINT64_MAX / 1000 ? UINT64_MAX : ms * 1000;
	for (i = 0; i < HISTO_NBOUNDS && histo_bounds_us[i] < us; i++)
		continue;
	h->counts[i]++;
	h->count++;
	h->sum_ms += ms;
}

void
histo_add(struct histo *to, const struct histo *from)
{
	int	i;

	for (i = 0; i <= HISTO_NBOUNDS; i++)
		to->counts[i] += from->counts[i];
	to->count += from->count;
	to->sum_ms += from->sum_ms;
}

uint64_t
histo_quantile_ms(const struct histo *h, double q)
{
	double		rank, lo, hi;
	uint64_t	cum = 0;
	int		i;

	if (h->count == 0)
		return (0);
	rank = q * (double)h->count;
	for (i = 0; i <= HISTO_NBOUNDS; i++) {
		if (h->counts[i] == 0 || (double)(cum + h->counts[i]) < rank) {
			cum += h->counts[i];
			continue;
		}
		/* Beyond the last bound: its bound is all we know. */
		if (i == HISTO_NBOUNDS)
			return (histo_bounds_us[HISTO_NBOUNDS - 1] / 1000);
		lo = i == 0 ? 0 : histo_bounds_us[i - 1];
		hi = histo_bounds_us[i];
		return ((uint64_t)((lo + (hi - lo) * (rank - (double)cum) /
		    (double)h->counts[i]) / 1000.0 + 0.5));
	}
	return (histo_bounds_us[HISTO_NBOUNDS - 1] / 1000);
}
