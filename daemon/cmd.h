/*
 * cmd.h: the command table and the one dispatcher every request goes
 * through: auth, then the semaphore lookup, then the handler.
 *
 * Handlers hold only the semantics of their command. They live in
 * cmd-server.c (PING AUTH STATS QUIT ROLE), cmd-sem.c (CREATE RESIZE DELETE
 * INFO HOLDERS WAITERS LIST), cmd-grant.c (ACQUIRE TRY RELEASE REFRESH
 * ATTACH CHECK REVOKE), cmd-client.c (NAME CLIENTS KILL) and cmd-watch.c
 * (WATCH).
 */
#ifndef SEMD_CMD_H
#define SEMD_CMD_H

#include "engine.h"
#include "persist.h"
#include "proto.h"

struct conn;
struct server;

/* What a request left its connection waiting for (conn.c's states). */
enum cmd_result {
	CMD_DONE,		/* the reply is written */
	CMD_WAIT_ENGINE,	/* queued in the engine: GRANTED or TIMEOUT */
	CMD_WAIT_STORE,		/* answered once persistence has written it */
	CMD_WATCHING		/* a WATCH: answered when its grant ends */
};

struct cmd_ctx {
	struct conn			*conn;
	const struct proto_request	*req;
	struct sem			*sem;	/* resolved for CMD_F_SEM */
};

typedef enum cmd_result (*cmd_fn)(struct cmd_ctx *ctx);

/* Run one parsed request on c. */
enum cmd_result	 cmd_dispatch(struct conn *c, const struct proto_request *req);

/*
 * The engine observer: answers waiters when they are granted or time out
 * (in sync mode, a grant's answer waits for persistence: cmd_persisted).
 */
void		 cmd_engine_event(void *ctx, const struct engine_event *ev);
/* persist_answer_fn: a held-back grant or REFRESH is written, or not. */
void		 cmd_persisted(void *ctx, uint64_t conn_id,
		    enum persist_await_kind kind, uint64_t token, uint32_t ms,
		    enum persist_outcome outcome);

enum cmd_result	 cmd_ping(struct cmd_ctx *);
enum cmd_result	 cmd_auth(struct cmd_ctx *);
enum cmd_result	 cmd_stats(struct cmd_ctx *);
enum cmd_result	 cmd_quit(struct cmd_ctx *);
enum cmd_result	 cmd_role(struct cmd_ctx *);
enum cmd_result	 cmd_create(struct cmd_ctx *);
enum cmd_result	 cmd_resize(struct cmd_ctx *);
enum cmd_result	 cmd_delete(struct cmd_ctx *);
enum cmd_result	 cmd_info(struct cmd_ctx *);
enum cmd_result	 cmd_holders(struct cmd_ctx *);
enum cmd_result	 cmd_waiters(struct cmd_ctx *);
enum cmd_result	 cmd_list(struct cmd_ctx *);
enum cmd_result	 cmd_acquire(struct cmd_ctx *);
enum cmd_result	 cmd_release(struct cmd_ctx *);
enum cmd_result	 cmd_refresh(struct cmd_ctx *);
enum cmd_result	 cmd_attach(struct cmd_ctx *);
enum cmd_result	 cmd_check(struct cmd_ctx *);
enum cmd_result	 cmd_revoke(struct cmd_ctx *);
enum cmd_result	 cmd_name(struct cmd_ctx *);
enum cmd_result	 cmd_clients(struct cmd_ctx *);
enum cmd_result	 cmd_kill(struct cmd_ctx *);
enum cmd_result	 cmd_watch(struct cmd_ctx *);

/* A grant ended: answer "OK <reason>" to every connection watching it. */
void		 cmd_watch_ended(struct server *srv, uint64_t token,
		    enum engine_release_reason reason);
/* c closes or is killed: forget its WATCH, if any, without answering. */
void		 cmd_watch_drop(struct conn *c);
/* Bytes of "name=<label> addr=<addr>": labels, peers ("[ip6]:port") */
#define CMD_LABEL_MAX	(PROTO_LABEL_MAX + 64 + 16)
/* "name=<label or -> addr=<addr>" of connection id, into buf. */
void		 cmd_conn_label(struct server *srv, uint64_t id, char *buf,
		    size_t len);

/* Reply "ERR STANDBY owner=<addr> epoch=<n> ...". */
void		 cmd_reply_standby(struct conn *c);
/* Reply "ERR code" with the engine's standard text for that code. */
void		 cmd_reply_engine_err(struct cmd_ctx *ctx, enum proto_err code);

#endif /* SEMD_CMD_H */
