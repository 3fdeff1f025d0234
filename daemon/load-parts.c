/*
 * load-parts.c: are the ACQUIREALL grants of a load whole (load-parts.h)?
 */
#include <stdlib.h>

#include <uthash.h>

#include "load-parts.h"
#include "log.h"

struct load_parts {
	uint64_t	 token;
	uint32_t	 multi;
	UT_hash_handle	 hh;
};

void
load_parts_add(struct load_parts **set, uint64_t token, uint32_t multi)
{
	struct load_parts	*lp;

	HASH_FIND(hh, *set, &token, sizeof(token), lp);
	if (lp != NULL)
		return;
	lp = xcalloc(1, sizeof(*lp));
	lp->token = token;
	lp->multi = multi;
	HASH_ADD(hh, *set, token, sizeof(lp->token), lp);
}

uint32_t
load_parts_expected(struct load_parts *set, uint64_t token)
{
	struct load_parts	*lp;

	HASH_FIND(hh, set, &token, sizeof(token), lp);
	return (lp != NULL ? lp->multi : 0);
}

unsigned
load_parts_check(struct load_parts **set, struct engine *e)
{
	struct load_parts	*lp, *tmp;
	struct grant		*g;
	unsigned		 damaged = 0;

	HASH_ITER(hh, *set, lp, tmp) {
		g = engine_grant_by_token(e, lp->token);
		if (g != NULL && g->nparts != lp->multi) {
			log_warnx("redis: grant %llu holds %u semaphores but "
			    "only %u of its parts were found (the first on "
			    "%s): restored with those, which stay held until "
			    "it ends", (unsigned long long)lp->token,
			    lp->multi, g->nparts, g->sem->name);
			damaged++;
		}
		HASH_DEL(*set, lp);
		free(lp);
	}
	return (damaged);
}

void
load_parts_free(struct load_parts **set)
{
	struct load_parts	*lp, *tmp;

	HASH_ITER(hh, *set, lp, tmp) {
		HASH_DEL(*set, lp);
		free(lp);
	}
}
