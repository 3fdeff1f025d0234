/*
 * hist.c: log-spaced latency histogram (see hist.h).
 */
#include <math.h>
#include <string.h>

#include "hist.h"

void
hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min_ns = UINT64_MAX;
}

/* The bucket of ns: values below HIST_MIN_NS go to the first, values past
 * the last decade to the last. */
static int
hist_bucket(uint64_t ns)
{
	double	 d;
	int	 i;

	if ((double)ns <= HIST_MIN_NS)
		return (0);
	d = log10((double)ns / HIST_MIN_NS) * HIST_PER_DECADE;
	i = (int)d;
	if (i >= HIST_BUCKETS)
		i = HIST_BUCKETS - 1;
	return (i);
}

void
hist_add(struct hist *h, uint64_t ns)
{
	h->count[hist_bucket(ns)]++;
	h->n++;
	h->sum_ns += (double)ns;
	if (ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

double
hist_quantile(const struct hist *h, double q)
{
	uint64_t	 rank, seen = 0;
	double		 v;
	int		 i;

	if (h->n == 0)
		return (0);
	rank = (uint64_t)ceil(q * (double)h->n);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank)
			break;
	}
	if (i == HIST_BUCKETS)
		i = HIST_BUCKETS - 1;
	v = HIST_MIN_NS * pow(10.0, (i + 0.5) / HIST_PER_DECADE);
	if (v < (double)h->min_ns)
		v = (double)h->min_ns;
	if (v > (double)h->max_ns)
		v = (double)h->max_ns;
	return (v);
}

double
hist_mean(const struct hist *h)
{
	return (h->n ? h->sum_ns / (double)h->n : 0);
}
