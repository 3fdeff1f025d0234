/*
 * semc.h: libsemc, the blocking C client of semd (protocol version 1).
 *
 * Guard a resource in five lines:
 *
 *	struct semc *c = semc_new(NULL);		// 127.0.0.1:7313
 *	uint64_t token;
 *	if (semc_acquire(c, "db-pool", 1, 30000, SEMC_BOUND, &token) != SEMC_OK)
 *		errx(1, "db-pool: %s", semc_errmsg(c));
 *	use_the_pool(token);  semc_release(c, "db-pool", token);  semc_free(c);
 *
 * Build with cc prog.c $(pkg-config --cflags --libs libsemc), or against
 * a build tree not installed, with PKG_CONFIG_PATH=$builddir/client and
 * the package libsemc-uninstalled.
 *
 * Results. Every call returns an enum semc_err: SEMC_OK, SEMC_TIMEOUT (an
 * acquire not granted in time), one value per protocol ERR code, or one
 * value per way the call itself failed. semc_errmsg() gives the last
 * outcome in words, with the server's text for an ERR.
 *
 * Lost replies. A reply that never comes (connection dropped, I/O timeout)
 * after the request was sent is never taken for a refusal: a bound
 * ACQUIRE or TRY without its reply gives SEMC_ERR_LOST ("a permit may
 * have been granted and lost"), any other request SEMC_ERR_NOREPLY
 * (outcome unknown). The library re-sends a request whose reply was lost
 * only when that is safe: a leased acquire, which carries a request id
 * (semc_acquire_with()), so that semd answers the repeat with the token
 * it granted. Any other request it re-sends only when it could not send
 * it at all.
 *
 * Connections. semc_new() does not connect: the first call does, or
 * semc_connect(). A call that finds its connection closed (semd restarted,
 * a network failure) reconnects once, with the configured timeouts, sends
 * AUTH again, and ATTACHes again every permit bound to the old connection
 * that this handle still holds. Permits that cannot be taken back (semd
 * without persistence forgets them; a reclaim-grace that ran out) are
 * reported through the lost callback and semc_next_lost().
 *
 * Several semd: an owner and standbys (semd 1.1). Give every address in
 * opts.hosts ("h1:7313,h2:7313"), or in the environment variable
 * SEMD_HOSTS when the options name no address at all. A request that a
 * standby refuses (ERR STANDBY owner=X: it did nothing) is sent again to
 * X. When the connection is lost, or a standby knows no owner, the call
 * searches: it tries the addresses in turn, pausing after each round
 * (100 ms, doubling up to 1 s), until one serves as owner, for at most
 * opts.failover_timeout_ms (15 s; plus one connect timeout under way),
 * then gives SEMC_ERR_CONNECT. On the new owner it sends AUTH and
 * ATTACHes its bound permits exactly as after a restart: a standby that
 * took over keeps them unowned for its reclaim-grace (10 s by default),
 * so a holder that waits for its next call to notice the failover should
 * poll semc_fd() and call semc_reconnect(), and keep the bound of its
 * bound permits (semc_bound_keep(), below). The lost-reply rules above
 * hold as ever: a request whose reply was lost is never sent again
 * (except a leased acquire, with its request id), only one a standby
 * refused or one that could not be sent. A handle with a
 * single address searches too once it has met a standby; until then it
 * makes one attempt, as above. A Unix socket is a single address.
 *
 * Threads. A struct semc must not be used by two threads at once; distinct
 * handles are independent and may be used from different threads. The
 * lease keeper (struct semc_keeper) runs its own thread with its own
 * connection, and its functions may be called from any thread. The
 * library installs no signal handlers; it sends with MSG_NOSIGNAL, so a
 * closed peer never raises SIGPIPE.
 */
#ifndef SEMC_H
#define SEMC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* This header's version; semc_version() gives the library's. */
#define SEMC_VERSION_MAJOR	0
#define SEMC_VERSION_MINOR	1
#define SEMC_VERSION_PATCH	0
#define SEMC_VERSION		"0.1.0"

#define SEMC_NAME_MAX		200	/* bytes in a semaphore name */
#define SEMC_LABEL_MAX		64	/* bytes in a connection's NAME label */
#define SEMC_ADDR_MAX		63	/* bytes in a peer address semd shows */
#define SEMC_DEFAULT_PORT	7313
#define SEMC_FOREVER		(-1)	/* timeout_ms: wait for ever */
#define SEMC_BOUND		(-1)	/* lease_ms: bound to the connection;
					   0 means the same, never a lease
					   that has already run out */

/*
 * Outcomes, X(name, message). The protocol's ERR codes come first, in the
 * order of the protocol, so SEMC_ERR_PROTO .. SEMC_ERR_NOCONN.
 */
#define SEMC_ERRORS(X)							\
	X(OK,		"success")					\
	X(ERR_PROTO,	"the server refused the request as malformed")	\
	X(ERR_TOOLONG,	"the request line is too long for the server")	\
	X(ERR_AUTH,	"authentication needed or refused")		\
	X(ERR_NOSEM,	"no semaphore of that name")			\
	X(ERR_EXISTS,	"the semaphore exists with another capacity, "	\
			"or the request id is in use with another n")	\
	X(ERR_RANGE,	"n is larger than the capacity")		\
	X(ERR_NOTHELD,	"the permit is not held")			\
	X(ERR_NOTOWNER,	"the permit is bound to another connection")	\
	X(ERR_NOTLEASE,	"the permit is not a lease")			\
	X(ERR_BUSY,	"the semaphore has holders or waiters")		\
	X(ERR_LIMIT,	"a server limit was reached")			\
	X(ERR_UNAVAILABLE, "the server's store is unavailable; nothing "	\
			"was granted")					\
	X(ERR_STANDBY,	"the server is a standby; another semd owns "	\
			"the data")					\
	X(ERR_NOCONN,	"no connection of that id")			\
	X(TIMEOUT,	"not granted within the timeout")		\
	X(ERR_SERVER,	"the server sent an error this library does "	\
			"not know")					\
	X(ERR_CONNECT,	"cannot connect to semd")			\
	X(ERR_NOTSENT,	"the connection failed before the request was "	\
			"sent: nothing was done")			\
	X(ERR_NOREPLY,	"the request was sent but its reply was lost: "	\
			"outcome unknown")				\
	X(ERR_LOST,	"the acquire was sent but its reply was lost: a "	\
			"permit may have been granted and lost")	\
	X(ERR_BADREPLY,	"the server's reply could not be understood")	\
	X(ERR_INVAL,	"invalid argument; nothing was sent")		\
	X(ERR_NOMEM,	"out of memory")				\
	X(ERR_BOUND,	"bound permits lost: semd answered nothing "	\
			"within their bound")

enum semc_err {
#define SEMC_X(name, msg) SEMC_##name,
	SEMC_ERRORS(SEMC_X)
#undef SEMC_X
	SEMC__COUNT
};

/*
 * Connection settings; NULL means every default. Initialise a struct with
 * SEMC_OPTS_INIT, which sets size and leaves every other field 0 (its
 * default), then set the fields you need:
 *
 *	struct semc_opts opts = SEMC_OPTS_INIT;
 *	opts.hosts = "a:7313,b:7313";
 *
 * size lets later versions add fields without a new soname: the library
 * reads only the first size bytes, and refuses (SEMC_ERR_INVAL on every
 * call, saying why) a struct whose size is 0 or too small, or that sets a
 * field this library does not know.
 * Where to connect, first match: unix_path; hosts; host; SEMD_HOSTS
 * from the environment; "127.0.0.1". port is the port of every address
 * given without one. A host list that cannot be parsed makes every call
 * give SEMC_ERR_INVAL, saying why.
 */
struct semc_opts {
	size_t		 size;		/* sizeof(struct semc_opts), as set
					   by SEMC_OPTS_INIT */
	const char	*host;		/* NULL: "127.0.0.1"; a name or address */
	int		 port;		/* 0: 7313 */
	const char	*unix_path;	/* a Unix socket instead of host:port */
	const char	*password;	/* sent with AUTH on every connect */
	int		 connect_timeout_ms;	/* 0: 5000; -1: none */
	int		 io_timeout_ms;	/* 0: 10000; -1: none; an ACQUIRE
					   waits its own timeout on top */
	const char	*hosts;		/* "h1:7313,h2,[::1]:7313": owner and
					   standbys, tried in turn; a bare
					   host takes port; a bare IPv6
					   address has no port */
	int		 failover_timeout_ms;	/* 0: 15000; -1: one pass over
					   the addresses, no pauses */
	const char	*name;		/* NULL: none; a label (1 to 64 bytes
					   of A-Z a-z 0-9 _ . : / - @) sent
					   with NAME on every connect */
	/* New fields go here, at the end, and only here. */
};

#define SEMC_OPTS_INIT	{ .size = sizeof(struct semc_opts) }

struct semc;

/* A permit bound to a connection, as reported lost. */
struct semc_permit {
	char		sem[SEMC_NAME_MAX + 1];
	uint64_t	token;
	uint32_t	n;
};

struct semc_info {		/* INFO, and each line of LIST */
	char		name[SEMC_NAME_MAX + 1];
	uint32_t	capacity;
	uint64_t	used;
	uint64_t	available;
	uint64_t	holders;
	uint64_t	waiters;
};

/*
 * name and addr (semd 1.1) are those of the holder's or waiter's
 * connection ("ip:port", "[ip6]:port", "unix"); for a lease, those of
 * the connection that acquired it; "" when semd shows "-" (no label, or
 * unknown) or is older.
 */
struct semc_holder {		/* each line of HOLDERS */
	uint64_t	token;
	uint32_t	n;
	int		lease;		/* 1: a lease, 0: bound */
	uint64_t	owner;		/* connection id; 0: none */
	int64_t		ttl_ms;		/* lease time left; -1 for bound */
	char		name[SEMC_LABEL_MAX + 1];
	char		addr[SEMC_ADDR_MAX + 1];
};

struct semc_waiter {		/* each line of WAITERS, in queue order */
	uint32_t	n;
	uint64_t	waited_ms;
	uint64_t	owner;
	char		name[SEMC_LABEL_MAX + 1];
	char		addr[SEMC_ADDR_MAX + 1];
};

struct semc_client {		/* each line of CLIENTS (semd 1.1) */
	uint64_t	id;		/* as owner= of HOLDERS, for KILL */
	char		addr[SEMC_ADDR_MAX + 1];
	char		name[SEMC_LABEL_MAX + 1];	/* "" when none */
	uint64_t	age_ms;		/* since it connected */
	uint64_t	idle_ms;	/* since its last request */
	uint64_t	grants;		/* permits bound to it */
	int		waiting;	/* an ACQUIRE or WATCH of it waits */
	char		cmd[16];	/* its last verb, lower case; "-" */
};

/* How a watched grant ended (semc_watch). */
enum semc_watch_reason {
	SEMC_WATCH_RELEASED,	/* RELEASE, by anyone */
	SEMC_WATCH_EXPIRED,	/* its lease ran out */
	SEMC_WATCH_REVOKED,	/* REVOKE */
	SEMC_WATCH_CLOSED,	/* its connection closed or was killed */
	SEMC_WATCH_UNCLAIMED,	/* unowned after a restart, not ATTACHed */
	SEMC_WATCH_OTHER,	/* a reason this library does not know */
	SEMC_WATCH_TIMEOUT	/* still held when the wait ran out */
};

struct semc_check {		/* CHECK of a held grant */
	uint32_t	n;
	int		lease;
	int64_t		ttl_ms;		/* -1 for bound */
};

struct semc_stat {		/* each line of STATS, each word of
				   semc_info_all: strings, as sent */
	const char	*key;
	const char	*value;
};

/* Called for each bound permit a reconnect could not take back. */
typedef void	semc_lost_fn(void *arg, const struct semc_permit *permit,
		    enum semc_err why);

/* SEMC_VERSION of the library at run time (static). */
const char	*semc_version(void);
/* The message of an outcome (static); "unknown error" when out of range. */
const char	*semc_strerror(enum semc_err err);
/* "OK", "ERR_NOSEM", "TIMEOUT", ...: the outcome's name (static). */
const char	*semc_errname(enum semc_err err);

/* A handle with a copy of opts (NULL: defaults); NULL only without memory. */
struct semc	*semc_new(const struct semc_opts *opts);
/* Close the connection (its bound permits are released by semd) and free. */
void		 semc_free(struct semc *c);
/* The last outcome in words, with the server's text; never NULL. */
const char	*semc_errmsg(const struct semc *c);

/* Connect now (and AUTH) if not connected. */
enum semc_err	 semc_connect(struct semc *c);
/*
 * Drop the connection and connect again (to the owner, searching as a
 * call does), re-attaching the bound permits this handle holds; those
 * not taken back are reported as lost. For a caller that saw semc_fd()
 * become readable (semd closed it, or died) while idle.
 */
enum semc_err	 semc_reconnect(struct semc *c);
/* Close the connection; semd releases its bound permits, as forgotten. */
void		 semc_close(struct semc *c);
/* The socket, to poll for readability (semd closing it) while idle; -1. */
int		 semc_fd(const struct semc *c);

/* Report lost bound permits to fn(arg, ...) as well as queueing them. */
void		 semc_set_lost_cb(struct semc *c, semc_lost_fn *fn, void *arg);
/* Pop the oldest permit reported lost into *out: 1, or 0 when none. */
int		 semc_next_lost(struct semc *c, struct semc_permit *out);
/* How many permits bound to this handle's connection it holds. */
size_t		 semc_bound_count(const struct semc *c);
/*
 * The bound of bound permits (semd 1.1 with persistence; since
 * libsemc.so.1.2). A semd that stops answering without closing the
 * connection (stopped, stalled, cut off) cannot release our permits, but
 * a standby that takes over releases those nobody ATTACHed after its
 * reclaim-grace. The library learns semd's reclaim-grace with ROLE (sent
 * in the same write as the first bound acquire, or ATTACH, on each
 * connection) and keeps t_s, the send time of the latest request
 * answered on the connection that holds the permits. They may be trusted
 * until t_s + reclaim-grace - margin, the margin being reclaim-grace/5
 * (at least 500 ms, or half the grace if less) for clock rates and the
 * time to stop the work they guard.
 *
 * semc_bound_left_ms: ms left of that bound (0 once it passed), or -1
 * when no bound applies: none held, semd without persistence (only a
 * closed connection loses them), or a semd that does not tell its
 * reclaim-grace. *margin_ms (may be NULL) gets the margin, or -1.
 *
 * semc_bound_keep: call it while holding bound permits, whenever
 * semc_fd() becomes readable and at the latest after *next_ms ms (-1:
 * nothing to wait for). It sends a PING every quarter of the bound and
 * reads its answer. SEMC_OK: kept. SEMC_ERR_BOUND: the bound passed; the
 * permits were reported lost (lost callback and semc_next_lost(), why
 * SEMC_ERR_BOUND) and
 * forgotten, and the connection closed: stop using what they guard now.
 * SEMC_ERR_NOREPLY: the connection closed or failed; the permits are
 * kept for semc_reconnect(), which ATTACHes them again unless the bound
 * passed meanwhile (then it reports them lost instead). Any other call
 * on the handle counts as well: an answered request moves t_s to its
 * send time. A handle blocked in a long ACQUIRE cannot ping: hold bound
 * permits and wait for others on distinct handles.
 */
int64_t		 semc_bound_left_ms(const struct semc *c, int64_t *margin_ms);
enum semc_err	 semc_bound_keep(struct semc *c, int64_t *next_ms);

enum semc_err	 semc_ping(struct semc *c);
/* AUTH now; on success the password is kept for later reconnects. */
enum semc_err	 semc_auth(struct semc *c, const char *password);
enum semc_err	 semc_create(struct semc *c, const char *sem, uint32_t capacity);
enum semc_err	 semc_resize(struct semc *c, const char *sem, uint32_t capacity);
enum semc_err	 semc_delete(struct semc *c, const char *sem);

/*
 * ACQUIRE n permits of sem, waiting timeout_ms (SEMC_FOREVER: no limit;
 * 0: don't wait). lease_ms > 0 asks for a lease; SEMC_BOUND (or 0: no
 * lease) binds the permit to this handle's connection, which then remembers it for
 * re-attaching. SEMC_OK sets *token; SEMC_TIMEOUT: not granted;
 * SEMC_ERR_LOST: the reply of a bound acquire was lost, a permit may be
 * held by nobody you know until the connection closes. A leased acquire
 * carries a request id and is asked again when its reply is lost (see
 * semc_acquire_with() below).
 */
enum semc_err	 semc_acquire(struct semc *c, const char *sem, uint32_t n,
		    int64_t timeout_ms, int64_t lease_ms, uint64_t *token);
/* TRY: semc_acquire() with timeout 0, sent as the TRY command. */
enum semc_err	 semc_try(struct semc *c, const char *sem, uint32_t n,
		    int64_t lease_ms, uint64_t *token);

/*
 * Request ids and several semaphores at once (semd 1.1; since
 * libsemc.so.4.1).
 *
 * Every leased acquire carries an ID (PROTOCOL: "Idempotent lease
 * acquire"): opts->id when given, else 128 random bits in hex drawn for
 * the call. semd remembers it with the lease, and answers a repeat of the
 * request with the same id by the lease's token, granting nothing. So a
 * leased acquire whose reply is lost (the connection closed, semd
 * restarted, a failover, an I/O timeout) is not SEMC_ERR_LOST: the
 * library connects again and sends the same request with the same id,
 * the TIMEOUT cut to what is left of the caller's, and returns the token
 * semd answers. It keeps trying for failover_timeout_ms after the loss
 * (100 ms between tries, doubling up to 1 s; once when it is -1); if semd
 * answers none of them, SEMC_ERR_NOREPLY, and semc_errmsg() names the id:
 * an acquire with that id learns the token while the lease lasts. A semd
 * older than 1.1 refuses ID (ERR PROTO): a drawn id is then left out, and
 * a lost reply is SEMC_ERR_LOST as before. A bound acquire (no lease)
 * takes no id, and a lost reply stays SEMC_ERR_LOST: the permit dies with
 * the connection.
 *
 * opts may be NULL: every default. Initialise it with
 * SEMC_ACQUIRE_OPTS_INIT (size set, every other field 0, its default);
 * the size rules of struct semc_opts apply.
 */
#define SEMC_ID_MAX		64	/* bytes in a request id */
#define SEMC_ACQUIRE_ALL_MAX	16	/* semaphores in one acquire */

struct semc_acquire_opts {
	size_t		 size;		/* sizeof(struct semc_acquire_opts),
					   as set by SEMC_ACQUIRE_OPTS_INIT */
	const char	*id;		/* NULL: drawn for a lease; else 1 to
					   64 bytes of A-Z a-z 0-9 _ . : / -,
					   only with a lease */
	/* New fields go here, at the end, and only here. */
};

#define SEMC_ACQUIRE_OPTS_INIT	{ .size = sizeof(struct semc_acquire_opts) }

/* One semaphore of semc_acquire_all(), and how many of its permits. */
struct semc_want {
	const char	*sem;
	uint32_t	 n;
};

/*
 * semc_acquire() with options: timeout_ms 0 is sent as TRY, any other
 * as ACQUIRE.
 */
enum semc_err	 semc_acquire_with(struct semc *c, const char *sem,
		    uint32_t n, int64_t timeout_ms, int64_t lease_ms,
		    const struct semc_acquire_opts *opts, uint64_t *token);
/*
 * ACQUIREALL: count (2 to SEMC_ACQUIRE_ALL_MAX) distinct semaphores, n
 * of each, in one grant, all or nothing: nothing is held while it
 * waits, and two callers naming the same semaphores in different orders
 * never deadlock. One token for the grant: RELEASE, REFRESH, CHECK,
 * WATCH, ATTACH and REVOKE take it with any of its semaphores and act on
 * the whole grant. A bound grant is remembered (and re-attached) under
 * want[0].sem. timeout_ms and lease_ms as for semc_acquire().
 */
enum semc_err	 semc_acquire_all(struct semc *c,
		    const struct semc_want *want, size_t count,
		    int64_t timeout_ms, int64_t lease_ms,
		    const struct semc_acquire_opts *opts, uint64_t *token);
/* RELEASE; a bound permit is forgotten on SEMC_OK or SEMC_ERR_NOTHELD. */
enum semc_err	 semc_release(struct semc *c, const char *sem, uint64_t token);
/* REFRESH a lease to end lease_ms from now; *left_ms (may be NULL) = reply. */
enum semc_err	 semc_refresh(struct semc *c, const char *sem, uint64_t token,
		    uint32_t lease_ms, uint64_t *left_ms);
/* ATTACH a permit left unowned by a restart; it becomes bound to c. */
enum semc_err	 semc_attach(struct semc *c, const char *sem, uint64_t token);
/* CHECK whether a grant is held (for fencing); out may be NULL. */
enum semc_err	 semc_check(struct semc *c, const char *sem, uint64_t token,
		    struct semc_check *out);
/* REVOKE any grant (operators). */
enum semc_err	 semc_revoke(struct semc *c, const char *sem, uint64_t token);
enum semc_err	 semc_info(struct semc *c, const char *sem,
		    struct semc_info *out);

/*
 * Listings: *out is one malloc'ed block of *count entries (NULL when 0),
 * freed with free(); for semc_stats the strings live in the same block.
 */
enum semc_err	 semc_holders(struct semc *c, const char *sem,
		    struct semc_holder **out, size_t *count);
enum semc_err	 semc_waiters(struct semc *c, const char *sem,
		    struct semc_waiter **out, size_t *count);
enum semc_err	 semc_list(struct semc *c, struct semc_info **out,
		    size_t *count);
enum semc_err	 semc_stats(struct semc *c, struct semc_stat **out,
		    size_t *count);
/*
 * INFO, every key=value of the reply as sent (semd 1.1's wait_p50_ms,
 * wait_p99_ms, grants_total, timeouts_total, and any later key), as
 * semc_stats gives STATS: one block, free(*out). (Since libsemc.so.1.1.)
 */
enum semc_err	 semc_info_all(struct semc *c, const char *sem,
		    struct semc_stat **out, size_t *count);
/*
 * ROLE: role (owner, standby or single), epoch, owner and any later key,
 * as strings, one block, free(*out). A standby answers it too.
 * (Since libsemc.so.4.)
 */
enum semc_err	 semc_role(struct semc *c, struct semc_stat **out,
		    size_t *count);
/*
 * NAME: label this handle's connection (1 to SEMC_LABEL_MAX bytes of
 * A-Z a-z 0-9 _ . : / - @, e.g. "billing@web3:4121"), now and again on
 * every later connect, as opts.name does; HOLDERS, WAITERS and CLIENTS
 * show it. The label is kept whatever semd answers now.
 */
enum semc_err	 semc_name(struct semc *c, const char *label);
/* CLIENTS: every open connection, as semc_holders (free(*out)). */
enum semc_err	 semc_clients(struct semc *c, struct semc_client **out,
		    size_t *count);
/* KILL a connection by id, as if its client had gone; SEMC_ERR_NOCONN. */
enum semc_err	 semc_kill(struct semc *c, uint64_t id);
/*
 * WATCH a grant until it ends, waiting timeout_ms (SEMC_FOREVER: no
 * limit; 0: ask once). SEMC_OK: it ended, *reason (may be NULL) says
 * why; SEMC_TIMEOUT: still held (*reason = SEMC_WATCH_TIMEOUT);
 * SEMC_ERR_NOTHELD at once if it is not held. The connection is blocked
 * meanwhile, as by a waiting acquire: use a handle of its own.
 */
enum semc_err	 semc_watch(struct semc *c, const char *sem, uint64_t token,
		    int64_t timeout_ms, enum semc_watch_reason *reason);
/* "released", "expired", ..., "timeout" (static). */
const char	*semc_reasonname(enum semc_watch_reason reason);
/* QUIT, then close (bound permits are released by semd, and forgotten). */
enum semc_err	 semc_quit(struct semc *c);

/*
 * The lease keeper: a thread with its own connection (opts as for
 * semc_new) that REFRESHes each lease it watches about every third of
 * its length, measured from when the last REFRESH was sent, and, on one
 * more connection per lease, WATCHes it (semd 1.1). The first refresh
 * that fails, for any reason, and a WATCH that answers that the grant
 * ended (revoked, expired, released by someone else), mark the lease
 * lost at once: fn is called on the keeper's thread, then
 * semc_keeper_fd() becomes readable, and semc_keeper_lost() answers 1. Through WATCH a
 * revoked lease is known within a round trip, not at the next refresh.
 * The keeper never guesses that a lease it could not refresh is still
 * held: the holder must stop trusting it (and the resource should check
 * the fencing token). Give the keeper an io_timeout_ms well under a
 * third of its shortest lease, so a refresh that hangs is noticed before
 * the lease runs out. Remove a lease from the keeper before releasing
 * it, or the WATCH reports the release as a loss.
 */
struct semc_keeper;
typedef void	semc_keeper_fn(void *arg, const char *sem, uint64_t token,
		    enum semc_err why, const char *msg);

/* Start the keeper thread; NULL on failure (errno set). fn may be NULL. */
struct semc_keeper *semc_keeper_new(const struct semc_opts *opts,
		    semc_keeper_fn *fn, void *arg);
/* Stop the thread and free; leases are left to run out (not released). */
void		 semc_keeper_free(struct semc_keeper *k);
/* Watch the lease (sem, token) of lease_ms, granted just now. */
enum semc_err	 semc_keeper_add(struct semc_keeper *k, const char *sem,
		    uint64_t token, uint32_t lease_ms);
/* Stop watching it (before releasing it); SEMC_ERR_INVAL if unknown. */
enum semc_err	 semc_keeper_remove(struct semc_keeper *k, const char *sem,
		    uint64_t token);
/* 1 if the lease was lost (or is unknown to the keeper), 0 while kept. */
int		 semc_keeper_lost(struct semc_keeper *k, const char *sem,
		    uint64_t token);
/* Readable from the first loss on (never drained by the library). */
int		 semc_keeper_fd(const struct semc_keeper *k);

#ifdef __cplusplus
}
#endif

#endif /* SEMC_H */
