/*
 * guard.c: a job that must not run more often at once than semd allows.
 *
 *	guard SEM [STEPS]	(SEMD_PORT, SEMD_HOST as for semd-cli)
 *
 * It takes a 3-second lease on SEM, lets the lease keeper refresh it while
 * it works, and before each step checks the lease is still kept: a holder
 * must stop acting as soon as its lease is lost. Each step hands the
 * token to the guarded resource, which refuses tokens lower than the
 * highest it has seen (the fencing-token pattern), so a holder that
 * was paused and lost its lease cannot do harm when it wakes up.
 */
#include <err.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <semc.h>

/* The guarded resource: it remembers the highest token it accepted. */
static uint64_t	resource_highest;

static int
resource_write(uint64_t token, int step)
{
	struct timespec	ts = { 0, 100 * 1000 * 1000 };

	if (token < resource_highest)
		return (-1);		/* a stale holder: refused */
	resource_highest = token;
	printf("step %d with token %" PRIu64 "\n", step, token);
	fflush(stdout);
	nanosleep(&ts, NULL);		/* the work */
	return (0);
}

int
main(int argc, char **argv)
{
	struct semc_opts	 opts = SEMC_OPTS_INIT;
	struct semc_keeper	*keeper;
	struct semc		*c;
	const char		*sem;
	uint64_t		 token;
	int			 step, steps;

	if (argc < 2 || argc > 3)
		errx(2, "usage: guard SEM [STEPS]");
	sem = argv[1];
	steps = argc == 3 ? atoi(argv[2]) : 5;
	opts.host = getenv("SEMD_HOST");
	opts.port = getenv("SEMD_PORT") != NULL ? atoi(getenv("SEMD_PORT")) : 0;

	if ((c = semc_new(&opts)) == NULL ||
	    (keeper = semc_keeper_new(&opts, NULL, NULL)) == NULL)
		err(1, "semc");
	if (semc_acquire(c, sem, 1, 30000, 3000, &token) != SEMC_OK)
		errx(1, "%s: %s", sem, semc_errmsg(c));
	semc_keeper_add(keeper, sem, token, 3000);

	for (step = 1; step <= steps; step++) {
		if (semc_keeper_lost(keeper, sem, token))
			errx(1, "%s: lease lost: stopping", sem);
		if (resource_write(token, step) != 0)
			errx(1, "%s: the resource refused token %" PRIu64,
			    sem, token);
	}

	semc_keeper_remove(keeper, sem, token);
	if (semc_release(c, sem, token) != SEMC_OK)
		warnx("%s: release: %s", sem, semc_errmsg(c));
	semc_keeper_free(keeper);
	semc_free(c);
	return (0);
}
