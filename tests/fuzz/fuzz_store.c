/*
 * fuzz_store.c: libFuzzer harness for the decoders of semd's data model
 * in Redis (daemon/store-model.c): whatever Redis holds reaches them, and
 * anyone with access to Redis can write it.
 *
 * The first byte picks a prefix (some with glob characters); the rest is
 * one value, given to every decoder: a grant's value, the owner key's
 * value, a key name, a script's error text. None may read outside it;
 * what they return must be what the rest of semd relies on (a name that
 * is a valid label, bounded printable strings fit for a reply line, n
 * within 1..PROTO_INT_MAX,
 * a key's name that makes the same key again); and a grant that decodes
 * must encode (as a write would) and decode again to the same grant.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store-model.h"

#define CHECK(cond, what) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "fuzz_store: %s (%s)\n", (what), #cond); \
		abort();						\
	}								\
} while (0)

static const char *const prefixes[] = {
	"semd:", "", "a*b?[c]\\:", "{", "}:", "semd:{x}:"
};

/* The grant as encoded: the value of the command's HSET. */
static char	encoded[512];

static void
capture(void *arg, int argc, const char **argv, const size_t *lens)
{
	(void)arg;
	CHECK(argc == 4 && strcmp(argv[0], "HSET") == 0, "not one HSET");
	CHECK(lens[3] < sizeof(encoded), "a grant's value too long");
	memcpy(encoded, argv[3], lens[3]);
	encoded[lens[3]] = '\0';
}

/*
 * A NUL-terminated string of at most max - 1 bytes, printable ASCII
 * without blanks: fit for a reply line.
 */
static void
check_string(const char *s, size_t max, const char *what)
{
	size_t	len = strnlen(s, max), i;

	CHECK(len < max, what);
	for (i = 0; i < len; i++)
		CHECK((unsigned char)s[i] > 0x20 && (unsigned char)s[i] < 0x7f,
		    what);
}

/* Encode a decoded grant as a write would, decode it again: the same. */
static void
check_grant_roundtrip(const struct store_model *m, uint32_t n,
    enum store_grant_kind kind, uint64_t deadline, const char *name,
    const char *addr)
{
	struct store_change	 ch;
	uint32_t		 n2;
	enum store_grant_kind	 kind2;
	uint64_t		 deadline2;
	char			 name2[PROTO_LABEL_MAX + 1];
	char			 addr2[STORE_HOLDER_ADDR_MAX], *plus;

	memset(&ch, 0, sizeof(ch));
	ch.type = STORE_GRANT_PUT;
	ch.sem = "s";
	ch.sem_len = 1;
	ch.token = 1;
	ch.n = n;
	ch.kind = kind;
	ch.lease_ms = deadline;
	ch.holder_name = name[0] != '\0' ? name : NULL;
	ch.holder_addr = addr[0] != '\0' ? addr : NULL;
	store_encode(m, &ch, capture, NULL);
	/*
	 * The script turns a lease's "+T" into an end; here T stands. The
	 * word, not a holder's address that ends the same.
	 */
	if (kind == STORE_KIND_LEASE) {
		plus = strstr(encoded, " deadline_ms=+");
		CHECK(plus != NULL, "a lease without deadline_ms=+");
		memmove(plus + 13, plus + 14, strlen(plus + 14) + 1);
	}
	CHECK(store_decode_grant(encoded, strlen(encoded), &n2, &kind2,
	    &deadline2, name2, addr2) == 0, "an encoded grant does not decode");
	CHECK(n2 == n && kind2 == kind, "n or kind changed");
	CHECK(deadline2 == (kind == STORE_KIND_LEASE ? deadline : 0),
	    "the deadline changed");
	CHECK(strcmp(name2, name) == 0, "the holder's name changed");
	CHECK(strcmp(addr2, addr) == 0, "the holder's address changed");
}

static void
check_grant(const struct store_model *m, const char *s, size_t len)
{
	uint32_t		n = 0;
	enum store_grant_kind	kind = STORE_KIND_CONN;
	uint64_t		deadline = 0;
	char			name[PROTO_LABEL_MAX + 1];
	char			addr[STORE_HOLDER_ADDR_MAX];
	uint32_t		multi;
	char			id[PROTO_ID_MAX + 1];

	if (store_decode_grant_set(s, len, &multi, id) == 0) {
		CHECK(multi >= 1 && multi <= PROTO_MULTI_MAX, "multi range");
		CHECK(id[0] == '\0' || proto_valid_id(id, strlen(id)),
		    "an invalid request id");
	}
	if (store_decode_grant(s, len, &n, &kind, &deadline, name, addr) != 0)
		return;
	CHECK(n >= 1 && n <= PROTO_INT_MAX, "n out of range");
	CHECK(kind == STORE_KIND_CONN || kind == STORE_KIND_LEASE,
	    "a kind of neither");
	check_string(name, sizeof(name), "a bad holder name");
	check_string(addr, sizeof(addr), "a bad holder address");
	CHECK(name[0] == '\0' || proto_valid_label(name, strlen(name)),
	    "a name that is not a valid label");
	CHECK(strcmp(name, "-") != 0 && strcmp(addr, "-") != 0,
	    "\"-\" taken for a holder");
	check_grant_roundtrip(m, n, kind, deadline, name, addr);
}

static void
check_key(const struct store_model *m, const char *s, size_t len)
{
	const char	*name;
	size_t		 nlen;
	char		 key[STORE_KEY_MAX], key2[STORE_KEY_MAX];

	if (!store_key_sem_name(m, s, len, &name, &nlen))
		return;
	CHECK(name >= s && name + nlen <= s + len, "a name outside the key");
	CHECK(proto_valid_name(name, nlen), "an invalid semaphore name");
	store_key(m, key, name, nlen, "sem");
	store_key(m, key2, name, nlen, "grants");
	CHECK((strlen(key) == len && memcmp(key, s, len) == 0) ||
	    (strlen(key2) == len && memcmp(key2, s, len) == 0),
	    "the name does not make the same key again");
}

static void
check_errors(const char *s, size_t len)
{
	const char	*owner;
	size_t		 olen;

	if (store_is_fenced(s, len, &owner, &olen))
		CHECK(owner >= s && owner + olen == s + len &&
		    owner - s >= 11 && memcmp(owner - 11, "SEMDFENCED ", 11) ==
		    0, "the owner is not what follows SEMDFENCED");
	(void)store_applied_nothing(s, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_model	 m;
	struct store_owner	 own;
	const char		*s;
	size_t			 len;

	if (size == 0)
		return (0);
	memset(&m, 0, sizeof(m));
	m.prefix = prefixes[data[0] % (sizeof(prefixes) /
	    sizeof(prefixes[0]))];
	m.owner_lease_ms = 3000;
	s = (const char *)data + 1;
	len = size - 1;

	check_grant(&m, s, len);
	check_key(&m, s, len);
	check_errors(s, len);
	memset(&own, 0, sizeof(own));
	store_parse_owner(s, len, &own);
	check_string(own.addr, sizeof(own.addr), "a bad owner address");
	CHECK(own.addr[0] != '\0', "an empty owner address");
	return (0);
}
