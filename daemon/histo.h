/*
 * histo.h: fixed-bucket latency histograms, as Prometheus exposes them.
 *
 * Observations are whole milliseconds (the daemon's clock ticks in ms);
 * the bucket bounds run from 100 us to 60 s. An observation costs one
 * short loop over the fixed bounds and no allocation. Counts are kept per
 * bucket; the exposition makes them cumulative.
 */
#ifndef SEMD_HISTO_H
#define SEMD_HISTO_H

#include <stdint.h>

/* Finite upper bounds; bucket HISTO_NBOUNDS is +Inf. */
#define HISTO_NBOUNDS	18

struct histo {
	uint64_t	 counts[HISTO_NBOUNDS + 1];	/* per bucket */
	uint64_t	 count;
	uint64_t	 sum_ms;
};

/* The upper bound of bucket i (< HISTO_NBOUNDS), in microseconds. */
uint32_t	 histo_bound_us(int i);
/* Count one observation of ms milliseconds. */
void		 histo_observe(struct histo *h, uint64_t ms);
/* Add every count of from to to (the "_other" aggregate). */
void		 histo_add(struct histo *to, const struct histo *from);
/*
 * The q-quantile (0 < q <= 1) in milliseconds, interpolated linearly in
 * its bucket as Prometheus' histogram_quantile() does; 0 when empty.
 */
uint64_t	 histo_quantile_ms(const struct histo *h, double q);

#endif /* SEMD_HISTO_H */
