/*
 * redis-addr.c: the `redis` directive's grammar (see redis-addr.h). Pure:
 * no sockets, no name resolution (hiredis resolves a host name when it
 * connects), so a unit test can walk the whole grammar.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "proto.h"
#include "redis-addr.h"

#define SENTINEL_SCHEME	"sentinel://"

/*
 * One node, s[0..len): HOST:PORT, [V6]:PORT, or (when def_port is not 0)
 * HOST or [V6] alone, which takes def_port. 0, or -1 (the caller words
 * the message).
 */
static int
redis_addr_node(const char *s, size_t len, int def_port,
    struct redis_node *n)
{
	const char	*host = s, *colon = NULL, *p;
	size_t		 hlen;
	uint64_t	 port;

	if (len == 0)
		return (-1);
	if (s[0] == '[') {
		if ((p = memchr(s, ']', len)) == NULL || p == s + 1)
			return (-1);
		host = s + 1;
		hlen = (size_t)(p - host);
		if (p + 1 < s + len) {
			if (p[1] != ':')
				return (-1);
			colon = p + 1;
		}
	} else {
		for (p = s; p < s + len; p++)
			if (*p == ':')
				colon = p;
		/*
		 * A bare IPv6 address: HOST:PORT takes the last colon (as
		 * before sentinel:// existed); where the port is optional
		 * the address is ambiguous and needs brackets.
		 */
		if (def_port != 0 && colon != NULL &&
		    memchr(s, ':', (size_t)(colon - s)) != NULL)
			return (-1);
		hlen = colon != NULL ? (size_t)(colon - s) : len;
		if (hlen == 0)
			return (-1);
	}
	if (colon != NULL) {
		if (proto_parse_u64(colon + 1, (size_t)(s + len - colon - 1),
		    65535, &port) != 0 || port == 0)
			return (-1);
	} else if (def_port != 0)
		port = (uint64_t)def_port;
	else
		return (-1);
	for (p = host; p < host + hlen; p++)
		if (*p == ',' || *p == '/' || *p == '[' || *p == ']' ||
		    *p == ' ' || *p == '\t' || *p == '@')
			return (-1);
	n->host = xcalloc(1, hlen + 1);
	memcpy(n->host, host, hlen);
	n->port = (int)port;
	return (0);
}

static int
redis_addr_name_ok(const char *s)
{
	size_t	len = strlen(s), i;

	if (len == 0 || len > REDIS_ADDR_NAME_MAX)
		return (0);
	for (i = 0; i < len; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyz"
		    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:-", s[i]) == NULL)
			return (0);
	return (1);
}

/* sentinel://NODE[,NODE...]/MASTER-NAME, s past the scheme. */
static int
redis_addr_sentinel(const char *s, struct redis_addr *a, char *err,
    size_t errlen)
{
	const char	*slash = strchr(s, '/'), *p, *end;

	a->kind = REDIS_ADDR_SENTINEL;
	if (slash == NULL || slash == s) {
		snprintf(err, errlen, "redis sentinel://: needs "
		    "HOST[:PORT][,HOST[:PORT]...]/MASTER-NAME");
		return (-1);
	}
	if (!redis_addr_name_ok(slash + 1)) {
		snprintf(err, errlen, "redis sentinel://: the master name "
		    "'%.64s' must be 1 to %d bytes of A-Z a-z 0-9 _ . : -",
		    slash + 1, REDIS_ADDR_NAME_MAX);
		return (-1);
	}
	for (p = s;; p = end + 1) {
		if ((end = memchr(p, ',', (size_t)(slash - p))) == NULL)
			end = slash;
		if (a->nsentinels == REDIS_ADDR_SENTINELS_MAX) {
			snprintf(err, errlen, "redis sentinel://: at most %d "
			    "sentinels", REDIS_ADDR_SENTINELS_MAX);
			return (-1);
		}
		if (redis_addr_node(p, (size_t)(end - p),
		    REDIS_ADDR_SENTINEL_PORT,
		    &a->sentinels[a->nsentinels]) != 0) {
			snprintf(err, errlen, "redis sentinel://: '%.*s' is "
			    "not HOST, HOST:PORT, [V6] or [V6]:PORT",
			    (int)(end - p > 64 ? 64 : end - p), p);
			return (-1);
		}
		a->nsentinels++;
		if (end == slash)
			break;
	}
	a->master_name = xstrdup(slash + 1);
	return (0);
}

int
redis_addr_parse(const char *s, struct redis_addr *a, char *err,
    size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (strncmp(s, SENTINEL_SCHEME, strlen(SENTINEL_SCHEME)) == 0)
		return (redis_addr_sentinel(s + strlen(SENTINEL_SCHEME), a,
		    err, errlen));
	if (strncmp(s, "unix:", 5) == 0) {
		a->kind = REDIS_ADDR_UNIX;
		if (s[5] == '\0') {
			snprintf(err, errlen, "redis unix: needs a path");
			return (-1);
		}
		a->path = xstrdup(s + 5);
		return (0);
	}
	a->kind = REDIS_ADDR_TCP;
	if (redis_addr_node(s, strlen(s), 0, &a->node) != 0) {
		snprintf(err, errlen, "redis must be HOST:PORT, unix:PATH or "
		    "sentinel://HOST[:PORT],.../MASTER-NAME, not '%.64s'", s);
		return (-1);
	}
	return (0);
}

void
redis_addr_free(struct redis_addr *a)
{
	size_t	i;

	free(a->node.host);
	free(a->path);
	for (i = 0; i < a->nsentinels; i++)
		free(a->sentinels[i].host);
	free(a->master_name);
	memset(a, 0, sizeof(*a));
}

void
redis_node_format(const char *host, int port, char *buf, size_t len)
{
	snprintf(buf, len, strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d",
	    host, port);
}
