/*
 * semc-keeper.c: the lease keeper. One thread, one connection of its own;
 * it REFRESHes each lease it watches a third of the lease after the last
 * REFRESH was sent, so two refreshes can fail in a row to slow I/O before
 * the lease would run out. The first refresh that fails marks the lease
 * lost for good and tells the holder at once: callback, a readable pipe,
 * and semc_keeper_lost(). The keeper's lock is never held over I/O.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "semc-int.h"

struct semc_lease {
	char		sem[SEMC_NAME_MAX + 1];
	uint64_t	token;
	uint32_t	lease_ms;
	int64_t		next_ms;	/* when to REFRESH it next */
	int		lost;
};

struct semc_keeper {
	pthread_mutex_t		 lock;
	pthread_cond_t		 cond;	/* CLOCK_MONOTONIC */
	pthread_t		 thread;
	int			 stop;
	struct semc		*c;	/* the thread's own */
	struct semc_lease	*leases;
	size_t			 nleases;
	int			 pipe[2];
	int			 signalled;
	semc_keeper_fn		*fn;
	void			*arg;
};

static struct semc_lease *
semc_keeper_find(struct semc_keeper *k, const char *sem, uint64_t token)
{
	size_t	i;

	for (i = 0; i < k->nleases; i++) {
		if (k->leases[i].token == token &&
		    strcmp(k->leases[i].sem, sem) == 0)
			return (&k->leases[i]);
	}
	return (NULL);
}

/* The lease to refresh first, or NULL when none is kept. */
static struct semc_lease *
semc_keeper_next(struct semc_keeper *k)
{
	struct semc_lease	*next = NULL;
	size_t			 i;

	for (i = 0; i < k->nleases; i++) {
		if (!k->leases[i].lost &&
		    (next == NULL || k->leases[i].next_ms < next->next_ms))
			next = &k->leases[i];
	}
	return (next);
}

static void
semc_keeper_sleep(struct semc_keeper *k, int64_t until_ms)
{
	struct timespec	ts;

	if (until_ms < 0) {
		pthread_cond_wait(&k->cond, &k->lock);
		return;
	}
	ts.tv_sec = until_ms / 1000;
	ts.tv_nsec = (until_ms % 1000) * 1000000;
	pthread_cond_timedwait(&k->cond, &k->lock, &ts);
}

static int64_t
semc_keeper_interval(uint32_t lease_ms)
{
	return (lease_ms / 3 > 0 ? lease_ms / 3 : 1);
}

/* Refresh one lease (lock held on entry and exit, dropped for the I/O). */
static void
semc_keeper_refresh(struct semc_keeper *k, struct semc_lease *l)
{
	struct semc_lease	 copy = *l;
	enum semc_err		 err;
	char			 msg[SEMC_ERRMSG_MAX];
	int64_t			 sent_ms;
	char			 byte = 'L';

	pthread_mutex_unlock(&k->lock);
	sent_ms = semc_now_ms();
	err = semc_refresh(k->c, copy.sem, copy.token, copy.lease_ms, NULL);
	memcpy(msg, semc_errmsg(k->c), sizeof(msg));
	pthread_mutex_lock(&k->lock);

	/* Removed while we were refreshing it: nobody to tell. */
	if ((l = semc_keeper_find(k, copy.sem, copy.token)) == NULL)
		return;
	if (err == SEMC_OK) {
		l->next_ms = sent_ms + semc_keeper_interval(l->lease_ms);
		return;
	}
	l->lost = 1;
	if (!k->signalled) {
		k->signalled = 1;
		while (write(k->pipe[1], &byte, 1) == -1 && errno == EINTR)
			;
	}
	if (k->fn != NULL) {
		pthread_mutex_unlock(&k->lock);
		k->fn(k->arg, copy.sem, copy.token, err, msg);
		pthread_mutex_lock(&k->lock);
	}
}

static void *
semc_keeper_main(void *arg)
{
	struct semc_keeper	*k = arg;
	struct semc_lease	*l;

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		if ((l = semc_keeper_next(k)) == NULL)
			semc_keeper_sleep(k, -1);
		else if (l->next_ms > semc_now_ms())
			semc_keeper_sleep(k, l->next_ms);
		else
			semc_keeper_refresh(k, l);
	}
	pthread_mutex_unlock(&k->lock);
	return (NULL);
}

struct semc_keeper *
semc_keeper_new(const struct semc_opts *opts, semc_keeper_fn *fn, void *arg)
{
	struct semc_keeper	*k;
	pthread_condattr_t	 attr;
	int			 rc;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return (NULL);
	k->fn = fn;
	k->arg = arg;
	k->pipe[0] = k->pipe[1] = -1;
	if ((k->c = semc_new(opts)) == NULL ||
	    pipe2(k->pipe, O_CLOEXEC | O_NONBLOCK) != 0)
		goto fail;
	pthread_mutex_init(&k->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cond, &attr);
	pthread_condattr_destroy(&attr);
	if ((rc = pthread_create(&k->thread, NULL, semc_keeper_main, k)) !=
	    0) {
		pthread_cond_destroy(&k->cond);
		pthread_mutex_destroy(&k->lock);
		errno = rc;
		goto fail;
	}
	return (k);
fail:
	rc = errno;
	if (k->pipe[0] != -1) {
		close(k->pipe[0]);
		close(k->pipe[1]);
	}
	semc_free(k->c);
	free(k);
	errno = rc;
	return (NULL);
}

void
semc_keeper_free(struct semc_keeper *k)
{
	if (k == NULL)
		return;
	pthread_mutex_lock(&k->lock);
	k->stop = 1;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
	close(k->pipe[0]);
	close(k->pipe[1]);
	semc_free(k->c);
	free(k->leases);
	free(k);
}

enum semc_err
semc_keeper_add(struct semc_keeper *k, const char *sem, uint64_t token,
    uint32_t lease_ms)
{
	struct semc_lease	*l;

	if (sem == NULL || !proto_valid_name(sem, strlen(sem)) ||
	    lease_ms > PROTO_INT_MAX)
		return (SEMC_ERR_INVAL);
	pthread_mutex_lock(&k->lock);
	if (semc_keeper_find(k, sem, token) != NULL) {
		pthread_mutex_unlock(&k->lock);
		return (SEMC_ERR_INVAL);
	}
	l = realloc(k->leases, (k->nleases + 1) * sizeof(*l));
	if (l == NULL) {
		pthread_mutex_unlock(&k->lock);
		return (SEMC_ERR_NOMEM);
	}
	k->leases = l;
	l += k->nleases++;
	memset(l, 0, sizeof(*l));
	memcpy(l->sem, sem, strlen(sem));
	l->token = token;
	l->lease_ms = lease_ms;
	l->next_ms = semc_now_ms() + semc_keeper_interval(lease_ms);
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
	return (SEMC_OK);
}

enum semc_err
semc_keeper_remove(struct semc_keeper *k, const char *sem, uint64_t token)
{
	struct semc_lease	*l;
	enum semc_err		 err = SEMC_ERR_INVAL;
	size_t			 i;

	pthread_mutex_lock(&k->lock);
	if (sem != NULL && (l = semc_keeper_find(k, sem, token)) != NULL) {
		i = (size_t)(l - k->leases);
		memmove(l, l + 1, (k->nleases - i - 1) * sizeof(*l));
		k->nleases--;
		err = SEMC_OK;
	}
	pthread_mutex_unlock(&k->lock);
	return (err);
}

int
semc_keeper_lost(struct semc_keeper *k, const char *sem, uint64_t token)
{
	struct semc_lease	*l;
	int			 lost;

	pthread_mutex_lock(&k->lock);
	l = sem != NULL ? semc_keeper_find(k, sem, token) : NULL;
	lost = l == NULL || l->lost;
	pthread_mutex_unlock(&k->lock);
	return (lost);
}

int
semc_keeper_fd(const struct semc_keeper *k)
{
	return (k->pipe[0]);
}
