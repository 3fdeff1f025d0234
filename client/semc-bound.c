/*
 * semc-bound.c: the permits bound to a handle's connection. semd releases
 * them when the connection closes, unless it restarted with persistence
 * or a standby took over: then they wait, unowned, for a reconnect to
 * ATTACH them again. Those semd will not give back are queued as lost
 * and told to the callback.
 */
#include <stdlib.h>
#include <string.h>

#include "semc-int.h"

enum semc_err
semc_bound_add(struct semc *c, const char *sem, uint64_t token, uint32_t n)
{
	struct semc_permit	*p;

	p = realloc(c->bound, (c->nbound + 1) * sizeof(*p));
	if (p == NULL)
		return (SEMC_ERR_NOMEM);
	c->bound = p;
	p += c->nbound++;
	memset(p, 0, sizeof(*p));
	strncpy(p->sem, sem, SEMC_NAME_MAX);
	p->token = token;
	p->n = n;
	return (SEMC_OK);
}

static void
semc_bound_drop(struct semc *c, size_t i)
{
	memmove(&c->bound[i], &c->bound[i + 1],
	    (c->nbound - i - 1) * sizeof(c->bound[0]));
	c->nbound--;
}

void
semc_bound_remove(struct semc *c, const char *sem, uint64_t token)
{
	size_t	i;

	for (i = 0; i < c->nbound; i++) {
		if (c->bound[i].token == token &&
		    strcmp(c->bound[i].sem, sem) == 0) {
			semc_bound_drop(c, i);
			return;
		}
	}
}

void
semc_bound_clear(struct semc *c)
{
	c->nbound = 0;
}

size_t
semc_bound_count(const struct semc *c)
{
	return (c->nbound);
}

/* Queue a lost permit (dropped if memory is short) and tell the callback. */
static void
semc_bound_lose(struct semc *c, const struct semc_permit *permit,
    enum semc_err why)
{
	struct semc_permit	*p;

	p = realloc(c->lost, (c->nlost + 1) * sizeof(*p));
	if (p != NULL) {
		c->lost = p;
		c->lost[c->nlost++] = *permit;
	}
	if (c->lost_fn != NULL)
		c->lost_fn(c->lost_arg, permit, why);
}

/*
 * ATTACH every remembered permit on the new connection. An ERR answer
 * means semd will not give it back: lost. An I/O failure, or a standby's
 * ERR STANDBY (it did nothing), stops here and keeps the rest for the
 * next connection.
 */
enum semc_err
semc_bound_reattach(struct semc *c)
{
	struct semc_permit	permit;
	enum semc_err		err;
	size_t			i = 0;

	while (i < c->nbound) {
		err = semc_call_attach(c, c->bound[i].sem, c->bound[i].token);
		if (err == SEMC_OK) {
			i++;
			continue;
		}
		if (c->fd == -1)	/* the connection failed again */
			return (semc_seterr(c, SEMC_ERR_CONNECT,
			    "connected, then lost the connection while "
			    "re-attaching permits"));
		if (err == SEMC_ERR_STANDBY)	/* did nothing: try the owner */
			return (err);
		permit = c->bound[i];
		semc_bound_drop(c, i);
		semc_bound_lose(c, &permit, err);
	}
	return (SEMC_OK);
}

void
semc_set_lost_cb(struct semc *c, semc_lost_fn *fn, void *arg)
{
	c->lost_fn = fn;
	c->lost_arg = arg;
}

int
semc_next_lost(struct semc *c, struct semc_permit *out)
{
	if (c->nlost == 0)
		return (0);
	*out = c->lost[0];
	memmove(&c->lost[0], &c->lost[1], (c->nlost - 1) * sizeof(c->lost[0]));
	c->nlost--;
	return (1);
}
