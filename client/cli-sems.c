/*
 * cli-sems.c: NAME[:N], the way semd-cli names a semaphore with its
 * count where several may be taken at once (acquire gpu:1 db:2, try,
 * run -s gpu:1 -s db:2).
 *
 * A semaphore name may contain ':', so a word splits at its last colon
 * only when a name comes before it and only digits (one at least)
 * follow it:
 *
 *	db:2	the semaphore db, 2 permits
 *	db	db, 1 (or -n N when it is the only one)
 *	a:b	the name "a:b", 1: letters follow the colon
 *	x:5:1	the name "x:5", 1: how to name a semaphore that ends in
 *		:digits (alone, "x:5" would be x with 5)
 *	db:	the name "db:", 1; and ":5" the name ":5", 1
 *	db:0	refused: a count is 1..2^31-1, as the protocol's <n>
 *
 * TIMEOUT, LEASE and ID are ACQUIREALL's keywords in any position of a
 * name, so they name no semaphore of several (one alone still may be
 * called "timeout", as before).
 */
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "proto.h"

/*
 * Split word into name and count: 0 (*n_given says whether a count was
 * written), or -1 after a usage error for cmd.
 */
int
cli_sem_split(const char *cmd, const char *word, struct cli_sem *out)
{
	const char	*colon = strrchr(word, ':');
	size_t		 len = strlen(word), digits;
	uint64_t	 n;

	memset(out, 0, sizeof(*out));
	out->n = 1;
	if (colon != NULL && colon > word) {
		digits = len - (size_t)(colon + 1 - word);
		if (digits > 0 && strspn(colon + 1, "0123456789") == digits) {
			if (proto_parse_u64(colon + 1, digits, PROTO_INT_MAX,
			    &n) != 0 || n < 1) {
				cli_usage_error("%s: '%s': the count after the "
				    "last ':' must be 1..%u (a name that ends "
				    "in :digits takes its count: '%s:1')", cmd,
				    word, PROTO_INT_MAX, word);
				return (-1);
			}
			out->n = (uint32_t)n;
			out->n_given = 1;
			len = (size_t)(colon - word);
		}
	}
	if (len > PROTO_NAME_MAX || !proto_valid_name(word, len)) {
		cli_usage_error("%s: invalid semaphore name '%.*s' (1 to %d "
		    "bytes of A-Z a-z 0-9 _ . : / -)", cmd, (int)(len > 64 ?
		    64 : len), word, PROTO_NAME_MAX);
		return (-1);
	}
	memcpy(out->name, word, len);
	out->name[len] = '\0';
	return (0);
}

/* 1 if name is one of ACQUIREALL's keywords (any case). */
static int
cli_sem_keyword(const char *name)
{
	return (strcasecmp(name, "TIMEOUT") == 0 ||
	    strcasecmp(name, "LEASE") == 0 || strcasecmp(name, "ID") == 0);
}

/*
 * Add NAME[:N] to the command's semaphores; -1 after a usage error. A
 * keyword after the first name is an option without its value (the
 * protocol's words take it, cli_parse_args): refused.
 */
int
cli_sem_add(const char *cmd, const char *word, struct cli_args *a)
{
	struct cli_sem	s;
	int		i;

	if (a->nsems > 0 && cli_sem_keyword(word)) {
		cli_usage_error("%s: %s without its value", cmd, word);
		return (-1);
	}
	if (cli_sem_split(cmd, word, &s) != 0)
		return (-1);
	if (a->nsems == SEMC_ACQUIRE_ALL_MAX) {
		cli_usage_error("%s: at most %d semaphores at once", cmd,
		    SEMC_ACQUIRE_ALL_MAX);
		return (-1);
	}
	for (i = 0; i < a->nsems; i++) {
		if (strcmp(a->sems[i].name, s.name) == 0) {
			cli_usage_error("%s: semaphore '%s' named twice", cmd,
			    s.name);
			return (-1);
		}
	}
	a->sems[a->nsems++] = s;
	return (0);
}

/*
 * After the words: one semaphore is the command's SEM (pos[0]) with its
 * count from NAME:N, -n or the protocol's <n> (given twice, they must
 * agree); several each have their own, so -n is refused. -1 after a
 * usage error.
 */
int
cli_sems_finish(const char *cmd, struct cli_args *a)
{
	int	i;

	if (a->nsems == 0)
		return (0);
	if (a->nsems == 1 && a->sems[0].n_given) {
		if (a->n_given && a->n != a->sems[0].n) {
			cli_usage_error("%s: the count is given twice (%u and "
			    "%u)", cmd, a->sems[0].n, a->n);
			return (-1);
		}
		a->n = a->sems[0].n;
		a->n_given = 1;
	} else if (a->nsems == 1)
		a->sems[0].n = a->n;
	else if (a->n_given) {
		cli_usage_error("%s: with several semaphores give each its "
		    "count as NAME:N (gpu:1 db:2), not -n", cmd);
		return (-1);
	}
	for (i = 0; a->nsems > 1 && i < a->nsems; i++) {
		/* ACQUIREALL reads them as keywords wherever a name goes. */
		if (cli_sem_keyword(a->sems[i].name)) {
			cli_usage_error("%s: '%s' is a keyword of ACQUIREALL, "
			    "so it cannot be one of several semaphores", cmd,
			    a->sems[i].name);
			return (-1);
		}
	}
	a->pos[0] = a->sems[0].name;
	a->npos = 1;
	return (0);
}
