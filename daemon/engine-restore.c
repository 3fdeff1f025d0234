/*
 * engine-restore.c: grants put back after a restart or a takeover
 * (persistence loads them; engine.h says how), part by part for those
 * of several semaphores.
 */
#include <assert.h>

#include "engine-int.h"

struct grant *
engine_restore_grant(struct engine *e, struct sem *s, uint64_t token,
    uint32_t n, enum grant_kind kind, uint64_t ttl_ms)
{
	struct grant	*g;

	assert(kind != GRANT_CONN && token != 0);
	if (token > ENGINE_TOKEN_MAX)
		return (NULL);
	HASH_FIND(hh, e->grants, &token, sizeof(token), g);
	if (g != NULL)
		return (NULL);
	engine_raise_token_floor(e, token);
	return (engine_grant_new(e, s, token, n, kind, NULL, ttl_ms));
}

struct grant *
engine_restore_part(struct engine *e, struct grant *lead, struct sem *s,
    uint32_t n)
{
	struct grant	*part;

	assert(lead == lead->lead);
	if (lead->nparts >= ENGINE_PARTS_MAX)
		return (NULL);
	for (part = lead; part != NULL; part = part->part_next)
		if (part->sem == s)
			return (NULL);
	return (engine_grant_part_new(e, lead, s, n));
}
