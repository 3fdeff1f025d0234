/*
 * engine-id.c: request IDs (README "Asking again after a lost reply";
 * doc/protocol.md "Idempotent lease acquire").
 *
 * Each semaphore maps an ID to the part of the lease holding it
 * (sem->grant_ids) or of the request waiting with it (sem->waiter_ids),
 * so that looking an ID up costs O(1) per semaphore of the request. A
 * request with an ID held with the same parts is answered that lease's
 * token and changes nothing; one with an ID waiting with the same parts
 * takes the waiter's place in every queue (the old request is told
 * WAIT_REPLACED); any other part or n is EXISTS. So at most one request
 * per ID waits or holds on a semaphore.
 */
#include <assert.h>
#include <string.h>

#include "engine-int.h"

#include <utlist.h>

/* Give the lead g (no parts yet) the ID id: a copy, in its sem's hash. */
void
engine_id_take(struct grant *g, const char *id, size_t len)
{
	if ((g->id = malloc(len + 1)) == NULL)
		abort();
	memcpy(g->id, id, len);
	g->id[len] = '\0';
	g->id_len = len;
	HASH_ADD_KEYPTR(idh, g->sem->grant_ids, g->id, g->id_len, g);
}

/* 1 when lead g holds exactly the parts of r (any order, same n each). */
static int
grant_matches(const struct grant *g, const struct engine_request *r)
{
	const struct grant	*part;
	uint32_t		 i;

	if (g->nparts != r->nparts)
		return (0);
	for (i = 0; i < r->nparts; i++) {
		for (part = g; part != NULL; part = part->part_next)
			if (part->sem == r->parts[i].sem)
				break;
		if (part == NULL || part->n != r->parts[i].n)
			return (0);
	}
	return (1);
}

/* The same for a waiting request (a lead). */
static int
waiter_matches(const struct waiter *w, const struct engine_request *r)
{
	const struct waiter	*part;
	uint32_t		 i;

	if (w->nparts != r->nparts)
		return (0);
	for (i = 0; i < r->nparts; i++) {
		for (part = w; part != NULL; part = part->part_next)
			if (part->sem == r->parts[i].sem)
				break;
		if (part == NULL || part->n != r->parts[i].n)
			return (0);
	}
	return (1);
}

/*
 * The waiter w (a lead) is taken over by r, which has its ID and parts:
 * the old request hears WAIT_REPLACED; w keeps its place in every queue
 * and becomes r's (owner, cookie, lease, timeout from now).
 */
static void
waiter_take_over(struct engine *e, struct waiter *w,
    const struct engine_request *r, enum acquire_status *status)
{
	struct sem	*sems[ENGINE_PARTS_MAX];
	struct waiter	*part;
	void		*old = w->cookie;
	uint32_t	 i, k;

	engine_timer_cancel(e, &w->timer);
	DL_DELETE2(w->owner->waiters, w, own_prev, own_next);
	w->owner = r->owner;
	for (part = w; part != NULL; part = part->part_next)
		part->owner = r->owner;
	DL_APPEND2(r->owner->waiters, w, own_prev, own_next);
	w->cookie = r->cookie;
	w->lease_ms = r->lease_ms;
	engine_emit(e, ENGINE_EV_WAIT_REPLACED, w->sem, NULL, old);
	if (r->timeout_ms == 0) {
		/* Took its place only to give up at once, as TRY does. */
		engine_waiter_count_timeout(e, w);
		k = engine_waiter_dequeue(e, w, sems);
		engine_waiter_free(w);
		for (i = 0; i < k; i++)
			engine_sem_wake(e, sems[i], 0);
		*status = ACQUIRE_TIMEOUT;
		return;
	}
	if (r->timeout_ms > 0)
		w->timer = engine_timer_add(e, (uint64_t)r->timeout_ms,
		    engine_waiter_timer_fired, w);
	*status = ACQUIRE_QUEUED;
}

/*
 * The ID rules for r (which has an ID): PERR_NONE and *status set when
 * they decided (a repeat, a take-over); PERR_EXISTS; or PERR_NONE with
 * *status left ACQUIRE_GRANTED when the ID is free.
 */
enum proto_err
engine_id_rules(struct engine *e, const struct engine_request *r,
    enum acquire_status *status, struct grant **grant)
{
	struct grant	*g;
	struct waiter	*w;
	uint32_t	 i;

	for (i = 0; i < r->nparts; i++) {
		HASH_FIND(idh, r->parts[i].sem->grant_ids, r->id, r->id_len,
		    g);
		if (g == NULL)
			continue;
		if (!grant_matches(g->lead, r))
			return (PERR_EXISTS);
		*grant = g->lead;
		*status = ACQUIRE_REPEATED;
		return (PERR_NONE);
	}
	for (i = 0; i < r->nparts; i++) {
		HASH_FIND(idh, r->parts[i].sem->waiter_ids, r->id, r->id_len,
		    w);
		if (w == NULL)
			continue;
		if (!waiter_matches(w->lead, r))
			return (PERR_EXISTS);
		waiter_take_over(e, w->lead, r, status);
		return (PERR_NONE);
	}
	return (PERR_NONE);
}

int
engine_grant_set_id(struct engine *e, struct grant *lead, const char *id,
    size_t len)
{
	struct grant	*part, *other;

	(void)e;
	assert(lead == lead->lead && lead->id == NULL);
	for (part = lead; part != NULL; part = part->part_next) {
		HASH_FIND(idh, part->sem->grant_ids, id, len, other);
		if (other != NULL)
			return (-1);
	}
	engine_id_take(lead, id, len);
	for (part = lead->part_next; part != NULL; part = part->part_next) {
		part->id = lead->id;
		part->id_len = lead->id_len;
		HASH_ADD_KEYPTR(idh, part->sem->grant_ids, part->id,
		    part->id_len, part);
	}
	return (0);
}
