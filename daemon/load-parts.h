/*
 * load-parts.h: at a load, the grants of several semaphores (ACQUIREALL)
 * and how many parts each said it had, to check that each came back
 * whole. A grant is written in one fenced script call, all its parts at
 * once, so a missing part means a damaged data set (a field deleted by
 * hand, a partial restore). Such a grant is restored with the parts that
 * are there: they stay reserved (over-reserved, never over-granted) until
 * it ends, and Redis is rewritten from memory.
 */
#ifndef SEMD_LOAD_PARTS_H
#define SEMD_LOAD_PARTS_H

#include <stdint.h>

#include "engine.h"

struct load_parts;

/* Token's grant says it has multi parts (the first part loaded). */
void		load_parts_add(struct load_parts **set, uint64_t token,
		    uint32_t multi);
/* How many parts token's grant said it had; 0 when it is not in set. */
uint32_t	load_parts_expected(struct load_parts *set, uint64_t token);
/*
 * The load is over: log each grant of set that came back with fewer
 * parts than it said, and return how many did; empties set.
 */
unsigned	load_parts_check(struct load_parts **set, struct engine *e);
/* Empty set (a load that failed). */
void		load_parts_free(struct load_parts **set);

#endif /* SEMD_LOAD_PARTS_H */
