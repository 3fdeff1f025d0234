/*
 * dirty.c: the sets of changed objects that persistence writes (dirty.h).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dirty.h"
#include "log.h"

/* The key of a dirty grant: token, sem_len and sem, padding zeroed. */
#define DIRTY_GRANT_KEYLEN	offsetof(struct dirty_grant, hh)

void
dirty_clear(struct dirty_sem **sems, struct dirty_grant **grants)
{
	struct dirty_sem	*ds, *dstmp;
	struct dirty_grant	*dg, *dgtmp;

	HASH_ITER(hh, *sems, ds, dstmp) {
		HASH_DEL(*sems, ds);
		free(ds);
	}
	HASH_ITER(hh, *grants, dg, dgtmp) {
		HASH_DEL(*grants, dg);
		free(dg);
	}
}

void
dirty_sem_add(struct dirty_sem **set, const char *name, size_t len)
{
	struct dirty_sem	*ds;

	HASH_FIND(hh, *set, name, len, ds);
	if (ds != NULL)
		return;
	ds = xcalloc(1, sizeof(*ds));
	memcpy(ds->name, name, len);
	ds->len = len;
	HASH_ADD_KEYPTR(hh, *set, ds->name, ds->len, ds);
}

void
dirty_grant_add(struct dirty_grant **set, uint64_t token, const char *sem,
    size_t sem_len)
{
	struct dirty_grant	 key, *dg;

	memset(&key, 0, sizeof(key));
	key.token = token;
	key.sem_len = sem_len;
	memcpy(key.sem, sem, sem_len);
	HASH_FIND(hh, *set, &key.token, DIRTY_GRANT_KEYLEN, dg);
	if (dg != NULL)
		return;
	dg = xcalloc(1, sizeof(*dg));
	memcpy(dg, &key, DIRTY_GRANT_KEYLEN);
	HASH_ADD(hh, *set, token, DIRTY_GRANT_KEYLEN, dg);
}
