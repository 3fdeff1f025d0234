/*
 * semc-keeper.c: the lease keeper. One thread; one connection for
 * REFRESH, and one more per kept lease, blocked in WATCH (semd 1.1).
 *
 * It REFRESHes each lease a third of the lease after the last REFRESH
 * was sent, so two refreshes can fail in a row to slow I/O before the
 * lease would run out. The lease is lost for good, and the holder told
 * at once (callback, a readable pipe, semc_keeper_lost()), when a refresh
 * fails or when its WATCH answers that the grant ended (revoked, expired,
 * released by someone else): the WATCH tells within a round trip of the
 * end, where a refresh would tell only up to a third of the lease later.
 * A WATCH connection that fails is opened again (after a pause), so the
 * keeper follows a restart or a failover; a semd that does not know
 * WATCH leaves the keeper refreshing only, as before.
 *
 * The watches are the thread's alone; the leases are shared, under the
 * lock, which is never held over I/O. A pipe wakes the thread's poll()
 * when a lease is added or removed, or the keeper is freed.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "semc-int.h"

#define SEMC_KEEPER_RETRY_MS	500	/* between attempts to WATCH again */

struct semc_lease {
	char		sem[SEMC_NAME_MAX + 1];
	uint64_t	token;
	uint32_t	lease_ms;
	int64_t		next_ms;	/* when to REFRESH it next */
	int		lost;
};

/* One lease's WATCH, on a connection of its own (the thread's). */
struct semc_kwatch {
	char		 sem[SEMC_NAME_MAX + 1];
	uint64_t	 token;
	struct semc	*w;
	int		 pending;	/* WATCH sent, its reply awaited */
	int		 off;		/* semd refused WATCH: refresh only */
	int64_t		 retry_ms;	/* when to send WATCH again */
};

struct semc_keeper {
	pthread_mutex_t		 lock;
	pthread_t		 thread;
	int			 stop;
	struct semc		*c;	/* the thread's own, for REFRESH */
	struct semc_opts	 opts;	/* for the WATCH connections */
	char			*strs[5];	/* what opts points to */
	struct semc_lease	*leases;
	size_t			 nleases;
	struct semc_kwatch	*watches;	/* the thread's alone */
	size_t			 nwatches;
	int			 pipe[2];	/* readable from the first loss */
	int			 wake[2];	/* wakes the thread's poll */
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

static int64_t
semc_keeper_interval(uint32_t lease_ms)
{
	return (lease_ms / 3 > 0 ? lease_ms / 3 : 1);
}

static void
semc_keeper_poke(struct semc_keeper *k)
{
	char	byte = 'W';

	while (write(k->wake[1], &byte, 1) == -1 && errno == EINTR)
		;
}

/*
 * Mark the lease (sem, token) lost and tell the holder, unless it was
 * removed meanwhile or is lost already (lock held; dropped for fn): the
 * callback runs before the pipe becomes readable.
 */
static void
semc_keeper_lose(struct semc_keeper *k, const char *sem, uint64_t token,
    enum semc_err why, const char *msg)
{
	struct semc_lease	*l;
	char			 byte = 'L';

	if ((l = semc_keeper_find(k, sem, token)) == NULL || l->lost)
		return;
	l->lost = 1;
	/* The callback first: a holder woken by the pipe finds it done. */
	if (k->fn != NULL) {
		pthread_mutex_unlock(&k->lock);
		k->fn(k->arg, sem, token, why, msg);
		pthread_mutex_lock(&k->lock);
	}
	if (!k->signalled) {
		k->signalled = 1;
		while (write(k->pipe[1], &byte, 1) == -1 && errno == EINTR)
			;
	}
}

/* Refresh one lease (lock held on entry and exit, dropped for the I/O). */
static void
semc_keeper_refresh(struct semc_keeper *k, struct semc_lease *l)
{
	struct semc_lease	 copy = *l;
	enum semc_err		 err;
	char			 msg[SEMC_ERRMSG_MAX];
	int64_t			 sent_ms;

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
	semc_keeper_lose(k, copy.sem, copy.token, err, msg);
}

static void
semc_keeper_unwatch(struct semc_keeper *k, size_t i)
{
	semc_free(k->watches[i].w);
	memmove(&k->watches[i], &k->watches[i + 1],
	    (k->nwatches - i - 1) * sizeof(k->watches[0]));
	k->nwatches--;
}

/*
 * Make the watches match the leases kept (lock held): a watch for each
 * lease not lost, none for the others. No I/O: a new watch is sent by
 * semc_keeper_send_watches(); closing a socket does not block.
 */
static void
semc_keeper_sync(struct semc_keeper *k)
{
	struct semc_lease	*l;
	struct semc_kwatch	*kw;
	size_t			 i;

	for (i = 0; i < k->nwatches; ) {
		l = semc_keeper_find(k, k->watches[i].sem,
		    k->watches[i].token);
		if (l == NULL || l->lost)
			semc_keeper_unwatch(k, i);
		else
			i++;
	}
	for (i = 0; i < k->nleases; i++) {
		l = &k->leases[i];
		if (l->lost)
			continue;
		for (kw = k->watches; kw < k->watches + k->nwatches; kw++) {
			if (kw->token == l->token &&
			    strcmp(kw->sem, l->sem) == 0)
				break;
		}
		if (kw < k->watches + k->nwatches)
			continue;
		kw = realloc(k->watches, (k->nwatches + 1) * sizeof(*kw));
		if (kw == NULL)
			return;		/* refreshes still tell; try later */
		k->watches = kw;
		kw += k->nwatches;
		memset(kw, 0, sizeof(*kw));
		if ((kw->w = semc_new(&k->opts)) == NULL)
			return;
		memcpy(kw->sem, l->sem, sizeof(kw->sem));
		kw->token = l->token;
		k->nwatches++;
	}
}

/* Send WATCH on each watch that is due (no lock: the watches are ours). */
static void
semc_keeper_send_watches(struct semc_keeper *k, int64_t now_ms)
{
	struct semc_kwatch	*kw;
	size_t			 i;

	for (i = 0; i < k->nwatches; i++) {
		kw = &k->watches[i];
		if (kw->pending || kw->off || kw->retry_ms > now_ms)
			continue;
		if (semc_call_send(kw->w, "WATCH %s %llu", kw->sem,
		    (unsigned long long)kw->token) == SEMC_OK)
			kw->pending = 1;
		else
			kw->retry_ms = semc_now_ms() + SEMC_KEEPER_RETRY_MS;
	}
}

/*
 * Read the answer of a watch whose socket became readable. 1 with *why
 * and msg when it says the lease is gone; 0 when it says nothing (the
 * connection failed: WATCH again later; semd does not know WATCH).
 */
static int
semc_keeper_answer(struct semc_kwatch *kw, enum semc_err *why, char *msg,
    size_t len)
{
	struct proto_reply	reply;
	enum semc_err		err;

	kw->pending = 0;
	err = semc_call_reply(kw->w, SEMC_REQ_PLAIN, 0, &reply);
	switch (err) {
	case SEMC_OK:
		*why = SEMC_ERR_NOTHELD;
		snprintf(msg, len, "the lease ended: %s (WATCH)",
		    semc_reasonname(semc_watch_reason_of(&reply)));
		return (1);
	case SEMC_ERR_NOTHELD:
	case SEMC_ERR_NOSEM:
		*why = err;
		snprintf(msg, len, "%s (WATCH)", semc_errmsg(kw->w));
		return (1);
	case SEMC_ERR_PROTO:		/* a semd before 1.1 */
	case SEMC_ERR_AUTH:
		kw->off = 1;
		semc_close(kw->w);
		return (0);
	default:			/* I/O, a standby, TIMEOUT: again */
		semc_close(kw->w);
		kw->retry_ms = semc_now_ms() + SEMC_KEEPER_RETRY_MS;
		return (0);
	}
}

/*
 * Wait until until_ms (-1: no limit) for a wake-up or a watch's answer,
 * WATCHing what is due first; the leases whose watch says they ended
 * are lost. Lock held on entry and exit, dropped while waiting.
 */
static void
semc_keeper_wait(struct semc_keeper *k, int64_t until_ms)
{
	struct pollfd	*pfd;
	struct {
		char		sem[SEMC_NAME_MAX + 1];
		uint64_t	token;
		enum semc_err	why;
		char		msg[SEMC_ERRMSG_MAX];
	}		 gone;
	int64_t		 now_ms, timeout_ms;
	size_t		 i, n;
	char		 drain[64];

	semc_keeper_sync(k);
	pthread_mutex_unlock(&k->lock);
	now_ms = semc_now_ms();
	semc_keeper_send_watches(k, now_ms);
	for (i = 0; i < k->nwatches; i++) {
		if (!k->watches[i].pending && !k->watches[i].off &&
		    (until_ms < 0 || k->watches[i].retry_ms < until_ms))
			until_ms = k->watches[i].retry_ms;
	}
	timeout_ms = -1;
	if (until_ms >= 0) {
		now_ms = semc_now_ms();
		timeout_ms = until_ms > now_ms ? until_ms - now_ms : 0;
		if (timeout_ms > 1000000000)
			timeout_ms = 1000000000;
	}
	n = k->nwatches;
	if ((pfd = calloc(n + 1, sizeof(*pfd))) == NULL) {
		poll(NULL, 0, 10);
		pthread_mutex_lock(&k->lock);
		return;
	}
	pfd[0].fd = k->wake[0];
	pfd[0].events = POLLIN;
	for (i = 0; i < n; i++) {
		pfd[i + 1].fd = k->watches[i].pending ?
		    semc_fd(k->watches[i].w) : -1;
		pfd[i + 1].events = POLLIN;
	}
	if (poll(pfd, (nfds_t)(n + 1), (int)timeout_ms) > 0) {
		if (pfd[0].revents & POLLIN)
			while (read(k->wake[0], drain, sizeof(drain)) > 0)
				;
		for (i = 0; i < n; i++) {
			if (pfd[i + 1].fd == -1 || pfd[i + 1].revents == 0 ||
			    !semc_keeper_answer(&k->watches[i], &gone.why,
			    gone.msg, sizeof(gone.msg)))
				continue;
			memcpy(gone.sem, k->watches[i].sem, sizeof(gone.sem));
			gone.token = k->watches[i].token;
			pthread_mutex_lock(&k->lock);
			semc_keeper_lose(k, gone.sem, gone.token, gone.why,
			    gone.msg);
			pthread_mutex_unlock(&k->lock);
		}
	}
	free(pfd);
	pthread_mutex_lock(&k->lock);
}

static void *
semc_keeper_main(void *arg)
{
	struct semc_keeper	*k = arg;
	struct semc_lease	*l;

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		if ((l = semc_keeper_next(k)) == NULL)
			semc_keeper_wait(k, -1);
		else if (l->next_ms > semc_now_ms())
			semc_keeper_wait(k, l->next_ms);
		else
			semc_keeper_refresh(k, l);
	}
	pthread_mutex_unlock(&k->lock);
	return (NULL);
}

/* Copy opts, and the strings it points to, for the WATCH connections. */
static int
semc_keeper_copy_opts(struct semc_keeper *k, const struct semc_opts *opts)
{
	const char	**str[5];
	size_t		  i;

	if (opts != NULL)
		k->opts = *opts;
	str[0] = &k->opts.host;
	str[1] = &k->opts.unix_path;
	str[2] = &k->opts.password;
	str[3] = &k->opts.hosts;
	str[4] = &k->opts.name;
	for (i = 0; i < 5; i++) {
		if (*str[i] == NULL)
			continue;
		if ((k->strs[i] = strdup(*str[i])) == NULL)
			return (-1);
		*str[i] = k->strs[i];
	}
	/* One pass over the addresses: a failed WATCH is sent again. */
	k->opts.failover_timeout_ms = -1;
	return (0);
}

static void
semc_keeper_drop(struct semc_keeper *k)
{
	size_t	i;

	for (i = 0; i < 2; i++) {
		if (k->pipe[i] != -1)
			close(k->pipe[i]);
		if (k->wake[i] != -1)
			close(k->wake[i]);
	}
	for (i = 0; i < 5; i++) {
		if (k->strs[i] != NULL && i == 2)
			explicit_bzero(k->strs[i], strlen(k->strs[i]));
		free(k->strs[i]);
	}
	while (k->nwatches > 0)
		semc_keeper_unwatch(k, k->nwatches - 1);
	free(k->watches);
	semc_free(k->c);
	free(k->leases);
	free(k);
}

struct semc_keeper *
semc_keeper_new(const struct semc_opts *opts, semc_keeper_fn *fn, void *arg)
{
	struct semc_keeper	*k;
	int			 rc;

	if ((k = calloc(1, sizeof(*k))) == NULL)
		return (NULL);
	k->fn = fn;
	k->arg = arg;
	k->pipe[0] = k->pipe[1] = k->wake[0] = k->wake[1] = -1;
	if (semc_keeper_copy_opts(k, opts) != 0 ||
	    (k->c = semc_new(opts)) == NULL ||
	    pipe2(k->pipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
	    pipe2(k->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		goto fail;
	pthread_mutex_init(&k->lock, NULL);
	if ((rc = pthread_create(&k->thread, NULL, semc_keeper_main, k)) !=
	    0) {
		pthread_mutex_destroy(&k->lock);
		errno = rc;
		goto fail;
	}
	return (k);
fail:
	rc = errno;
	semc_keeper_drop(k);
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
	semc_keeper_poke(k);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->lock);
	semc_keeper_drop(k);
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
	semc_keeper_poke(k);
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
		semc_keeper_poke(k);	/* its WATCH connection goes */
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
