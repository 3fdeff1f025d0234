/*
 * hist.h: a latency histogram with log-spaced buckets, for semload.
 *
 * 40 buckets per decade from 100 ns to 1000 s (each bucket about 6%
 * wide), so a percentile is read to within 3%; recording costs one log10.
 * Values are nanoseconds.
 */
#ifndef SEMLOAD_HIST_H
#define SEMLOAD_HIST_H

#include <stdint.h>

#define HIST_PER_DECADE	40
#define HIST_DECADES	10
#define HIST_MIN_NS	100.0
#define HIST_BUCKETS	(HIST_PER_DECADE * HIST_DECADES)

struct hist {
	uint64_t	 count[HIST_BUCKETS];
	uint64_t	 n;
	uint64_t	 min_ns;
	uint64_t	 max_ns;
	double		 sum_ns;
};

void		 hist_init(struct hist *);
void		 hist_add(struct hist *, uint64_t ns);
/* The q-quantile (0 < q <= 1) in ns: its bucket's geometric middle,
 * clipped to the exact min and max; 0 when empty. */
double		 hist_quantile(const struct hist *, double q);
double		 hist_mean(const struct hist *);

#endif /* SEMLOAD_HIST_H */
