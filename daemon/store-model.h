/*
 * store-model.h: semd's data model in Redis, as pure code: key names, the
 * commands a change becomes, the fenced script's words, and the decoding
 * of what Redis holds (README "Data model"). No I/O and no hiredis, so
 * that it is unit-tested (tests/test_store_model.c) and fuzzed
 * (tests/fuzz/fuzz_store.c) on its own.
 *
 * Keys, with prefix P ("semd:" by default; {NAME} is a Redis Cluster hash
 * tag, so all of a semaphore's keys share one slot):
 *
 *   P tokens          string  every token ever issued is <= this
 *   P sems            set     the semaphore names
 *   P {NAME}:sem      hash    capacity
 *   P {NAME}:grants   hash    TOKEN -> "n=N kind=conn|lease deadline_ms=D
 *                             name=L addr=A [multi=K] [id=I]" (D: Unix ms
 *                             when a lease ends, 0 for conn; L, A: the
 *                             NAME and address of the connection that
 *                             acquired a lease, or "-"; values without
 *                             them load as "-"; K: the count of
 *                             semaphores of an ACQUIREALL grant, which
 *                             has a field under TOKEN in the grants key
 *                             of each, with that one's N; I: the request
 *                             ID of a lease)
 *   P owner           string  "EPOCH ID ADDR", expires owner-lease after
 *                             the owner's last renewal
 *   P epoch           string  the last epoch handed out
 */
#ifndef SEMD_STORE_MODEL_H
#define SEMD_STORE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "store.h"

#define STORE_KEY_MAX		(PROTO_NAME_MAX + 256)
#define STORE_HOLDER_ADDR_MAX	64	/* a holder's address, NUL included */
#define STORE_FENCE_MAX		64	/* "EPOCH ID ", NUL included */
#define STORE_GRANT_VALUE_MAX	384	/* a grant's value, NUL included */

/* What the model needs to know of the store: not the whole store. */
struct store_model {
	const char	*prefix;		/* redis-prefix */
	int64_t		 owner_lease_ms;
	char		 fence[STORE_FENCE_MAX];   /* "EPOCH ID " once claimed */
	char		 advertise[STORE_ADDR_MAX]; /* HOST:PORT, in the owner key */
};

/*
 * The key "P what" (sem NULL) or "P {sem}:what" into buf, STORE_KEY_MAX
 * bytes (a longer one is cut short: prefixes are not that long).
 */
void	store_key(const struct store_model *m, char *buf, const char *sem,
	    size_t len, const char *what);
/*
 * The SCAN pattern of P's semaphore keys: P with its glob characters
 * escaped, then suffix, into buf (size bytes).
 */
void	store_glob(const struct store_model *m, char *buf, size_t size,
	    const char *suffix);
/*
 * The semaphore NAME of a key "P{NAME}:sem" or "P{NAME}:grants" (len
 * bytes): 1 and *name, *namelen pointing into key, or 0 when it is not
 * one of those or NAME is not a valid semaphore name.
 */
int	store_key_sem_name(const struct store_model *m, const char *key,
	    size_t len, const char **name, size_t *namelen);

/* One Redis command: argc words (at most 4) with their lengths. */
typedef void (*store_emit_fn)(void *arg, int argc, const char **argv,
    const size_t *lens);
/* Emit the Redis commands that make ch true, in order. */
void	store_encode(const struct store_model *m,
	    const struct store_change *ch, store_emit_fn emit, void *arg);

/* The words of one script call, each a copy, NUL-terminated. */
struct store_argv {
	char		**argv;
	size_t		 *lens;
	size_t		  n, cap;
};
void	store_argv_push(struct store_argv *a, const char *w, size_t len);
void	store_argv_pushs(struct store_argv *a, const char *w);
/* Free the words; a is empty (and reusable) after. */
void	store_argv_free(struct store_argv *a);

/* The owner key's value, "EPOCH ID ADDR": the fence, then advertise. */
void	store_owner_value(const struct store_model *m, char *buf, size_t len);
/*
 * Append the words of a fenced script call: verb ("EVAL" or "EVALSHA")
 * and script (its text or SHA1), the key count, the keys owner and epoch,
 * then extra_key if not NULL, then the fence's arguments (fence, owner
 * value, owner-lease ms). store-scripts.h reads them in that order.
 */
void	store_fenced_call(const struct store_model *m, struct store_argv *a,
	    const char *verb, const char *script, const char *extra_key);
/*
 * A write of n changes as one fenced script call: the fenced call, then
 * each command as its word count and its words.
 */
void	store_batch_argv(const struct store_model *m, struct store_argv *a,
	    const char *verb, const char *script,
	    const struct store_change *ch, size_t n);

/*
 * The optional word key=V of s (len bytes) into buf (size bytes), ""
 * when absent, "-", too long, not printable ASCII (a NUL, a control
 * character), or, for "name", not a valid label.
 */
void	store_decode_label(const char *s, size_t len, const char *key,
	    char *buf, size_t size);
/*
 * A grant's value "n=N kind=K deadline_ms=D [name=L addr=A]" into its
 * parts: 0, or -1 when malformed (n missing, 0 or above PROTO_INT_MAX,
 * kind not conn or lease, D not a number). name and addr are
 * PROTO_LABEL_MAX + 1 and STORE_HOLDER_ADDR_MAX bytes, "" when unknown.
 */
int	store_decode_grant(const char *s, size_t len, uint32_t *n,
	    enum store_grant_kind *kind, uint64_t *deadline, char *name,
	    char *addr);
/*
 * The 1.1 words of a grant's value: *multi (1 when absent; 2..16) and
 * the request ID into id (PROTO_ID_MAX + 1 bytes, "" when absent).
 * 0, or -1 when either is there but malformed.
 */
int	store_decode_grant_set(const char *s, size_t len, uint32_t *multi,
	    char *id);
/*
 * The owner key's value "EPOCH ID ADDR" into out->epoch (left as it is
 * when not a number) and out->addr ("-" when absent or not printable
 * ASCII: it goes on ROLE's reply line), for the log and ROLE.
 */
void	store_parse_owner(const char *value, size_t len,
	    struct store_owner *out);

/*
 * 1 when a script's error text (len bytes) is the fence refusing us;
 * *owner and *owner_len then give the owner key's value, inside err.
 */
int	store_is_fenced(const char *err, size_t len, const char **owner,
	    size_t *owner_len);
/*
 * 1 when a write script's error text means it changed nothing: the
 * errors Redis gives before a script runs, or at its first write, which
 * is the fence's own (store-scripts.h). Any other error may have come
 * after some of the batch was applied: its outcome is unknown.
 */
int	store_applied_nothing(const char *err, size_t len);

#endif /* SEMD_STORE_MODEL_H */
