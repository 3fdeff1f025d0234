/*
 * semc-int.h: what the files of libsemc share and callers never see.
 */
#ifndef SEMC_INT_H
#define SEMC_INT_H

#include <stdint.h>

#include "proto.h"
#include "semc.h"

/*
 * The size of the first struct semc_opts that had a size (libsemc 0.1,
 * version-info 4): no caller's struct is smaller. Never changes.
 */
#define SEMC_OPTS_SIZE_MIN \
	(offsetof(struct semc_opts, name) + sizeof(const char *))

#define SEMC_ERRMSG_MAX		320
#define SEMC_LINE_MAX		65536	/* longest reply line accepted */
#define SEMC_REQ_MAX		4096	/* our requests: ACQUIREALL of 16
					   names of 200 bytes fits */
#define SEMC_HOST_MAX		255	/* bytes in a host name or address */
#define SEMC_ADDRS_MAX		64	/* addresses in a host list */

struct semc_addr {
	char		*host;		/* a name, IPv4 or IPv6 (no brackets) */
	int		 port;
};

struct semc {
	struct semc_addr *addrs;	/* the caller's list, then maybe the
					   owner a standby named */
	size_t		 nlist;		/* addresses the caller gave */
	size_t		 naddrs;	/* nlist, or nlist + 1 */
	size_t		 cur;		/* connected to, or to try next */
	int		 owner_hint;	/* addrs[] index a standby named; -1 */
	int		 seen_standby;	/* a standby answered: wait for owners */
	char		*addr_problem;	/* why the host list is unusable */
	char		*opts_problem;	/* why struct semc_opts was refused */
	char		*unix_path;
	char		*password;
	char		*name;		/* sent with NAME on connect; NULL */
	int		 connect_timeout_ms;
	int		 io_timeout_ms;
	int		 failover_timeout_ms;	/* -1: one pass over addrs */

	int		 fd;		/* -1 when not connected */
	int		 ever_connected;
	char		*buf;		/* bytes read, not yet taken */
	size_t		 buflen;
	size_t		 bufsize;
	size_t		 linelen;	/* the line taken last, at buf[0] */

	struct semc_permit *bound;	/* permits bound to the connection */
	size_t		 nbound;
	struct semc_permit *lost;	/* reported lost, not yet popped */
	size_t		 nlost;
	semc_lost_fn	*lost_fn;
	void		*lost_arg;

	/* The bound of the bound permits (semc-bound.c). */
	int		 holding;	/* the open connection holds them all
					   (0 while re-attaching) */
	int		 role_asked;	/* ROLE was sent on this connection */
	int		 bound_acquire;	/* a bound acquire is under way */
	int64_t		 grace_ms;	/* semd's reclaim-grace; -1: no bound
					   applies (no persistence, or not
					   told) */
	int64_t		 owner_lease_ms;	/* semd's owner-lease; -1 */
	int64_t		 sent_ms;	/* when the request in flight was
					   sent (the last one read) */
	int64_t		 ref_ms;	/* t_s: the send time of the latest
					   request answered on a connection
					   holding the bound permits; -1 */
	int64_t		 ping_ms;	/* a keep-alive PING sent then awaits
					   its reply; -1: none */

	int		 ids_refused;	/* this connection's semd refused ID
					   (older than 1.1): drawn ids are
					   left out (semc-acquire.c) */

	char		 errmsg[SEMC_ERRMSG_MAX];
};

/* How a request's lost reply is reported. */
enum semc_req_kind {
	SEMC_REQ_PLAIN,		/* SEMC_ERR_NOREPLY */
	SEMC_REQ_ACQUIRE	/* SEMC_ERR_LOST */
};

/* semc-err.c */
enum semc_err	 semc_seterr(struct semc *c, enum semc_err err,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
enum semc_err	 semc_seterr_again(struct semc *c, enum semc_err was,
		    enum semc_err err, const char *what);
enum semc_err	 semc_err_from_proto(enum proto_err code);
int64_t		 semc_now_ms(void);

/* semc-addr.c: the host list. */
int		 semc_addr_parse(const char *s, size_t len, int default_port,
		    struct semc_addr *out, char *why, size_t whylen);
int		 semc_addr_set_list(struct semc *c, const char *list,
		    int default_port, char *why, size_t whylen);
int		 semc_addr_set_one(struct semc *c, const char *host, int port);
int		 semc_addr_learn(struct semc *c, const char *s, size_t len);
void		 semc_addr_free(struct semc *c);

/* semc-conn.c: the socket, lines both ways, with deadlines. */
enum semc_err	 semc_conn_open(struct semc *c);
void		 semc_conn_close(struct semc *c);
int		 semc_conn_broken(struct semc *c);
/* 0: all sent; 1: nothing sent (peer gone); -1: failed part way or timed out. */
int		 semc_conn_send(struct semc *c, const char *req, size_t len,
		    int64_t deadline_ms, int *errnum);
enum semc_err	 semc_conn_readline(struct semc *c, int64_t deadline_ms,
		    const char **line, size_t *len);

/*
 * semc.c: send req (a line without "\n") and read its reply into
 * *reply (words point into c's buffer until the next call). wait_ms is
 * how long the server may take on top of the I/O timeout (-1: for ever).
 * SEMC_OK for an OK reply; an ERR or TIMEOUT reply gives its outcome.
 */
enum semc_err	 semc_call(struct semc *c, enum semc_req_kind kind,
		    int64_t wait_ms, struct proto_reply *reply,
		    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/*
 * The two halves of semc_call, for a caller that polls semc_fd() in
 * between (the keeper's WATCHes): send the request, connecting first if
 * needed (SEMC_ERR_NOTSENT: nothing was sent, try again later), then,
 * once the fd is readable, read its reply. No retries, no redirects: a
 * standby's refusal is returned (and remembered for the next connect).
 */
enum semc_err	 semc_call_send(struct semc *c, const char *fmt, ...)
		    __attribute__((format(printf, 2, 3)));
enum semc_err	 semc_call_reply(struct semc *c, enum semc_req_kind kind,
		    int64_t wait_ms, struct proto_reply *reply);
/* ATTACH on the connection as it is (while re-attaching). */
enum semc_err	 semc_call_attach(struct semc *c, const char *sem,
		    uint64_t token);
/*
 * The keep-alive PING of semc-bound.c, on the connection as it is (no
 * reconnect): send it, or read its reply if one is awaited (SEMC_OK when
 * none is). A failure closes the connection.
 */
enum semc_err	 semc_call_ping_send(struct semc *c);
enum semc_err	 semc_call_ping_settle(struct semc *c);

/*
 * semc-failover.c: finding the owner. A search lasts one call; it tries
 * the addresses in turn (the owner a standby named first) with a pause
 * between rounds, until failover_timeout_ms have passed.
 */
struct semc_search {
	int64_t		 deadline_ms;	/* -1: one attempt only */
	int		 delay_ms;	/* the next pause between rounds */
	size_t		 left;		/* attempts left in this round */
	int		 redirects;	/* to a named owner, this round */
	int		 rounds;	/* rounds that found no owner */
};
void		 semc_search_start(struct semc *c, struct semc_search *s);
int		 semc_search_many(const struct semc *c);
enum semc_err	 semc_search_again(struct semc *c, struct semc_search *s,
		    enum semc_err err);
void		 semc_failover_standby(struct semc *c,
		    const struct proto_reply *reply);

/* semc-cmd.c: an integer argument in min..PROTO_INT_MAX. */
enum semc_err	 semc_check_int(struct semc *, const char *, int64_t,
		    int64_t);

/* semc-cmd.c: the reason word of WATCH's "OK <reason>". */
enum semc_watch_reason semc_watch_reason_of(const struct proto_reply *reply);

/* semc-acquire.c: ACQUIRE (TRY when is_try), with its request id. */
enum semc_err	 semc_acquire_one(struct semc *c, int is_try, const char *sem,
		    uint32_t n, int64_t timeout_ms, int64_t lease_ms,
		    const struct semc_acquire_opts *opts, uint64_t *token);

/* semc-bound.c: the permits bound to the connection. */
enum semc_err	 semc_bound_add(struct semc *c, const char *sem,
		    uint64_t token, uint32_t n);
void		 semc_bound_remove(struct semc *c, const char *sem,
		    uint64_t token);
void		 semc_bound_remove_token(struct semc *c, uint64_t token);
enum semc_err	 semc_bound_reattach(struct semc *c);
void		 semc_bound_clear(struct semc *c);
void		 semc_bound_role(struct semc *c, enum semc_err err,
		    const struct proto_reply *reply);
int		 semc_bound_expired(const struct semc *c);
int64_t		 semc_bound_clamp(const struct semc *c, int64_t deadline_ms);
void		 semc_bound_lose_all(struct semc *c, enum semc_err why);

#endif /* SEMC_INT_H */
