/*
 * semc-addr.c: the addresses a handle may connect to. A list such as
 * "h1:7313,h2,[::1]:7400" (from semc_opts.hosts or SEMD_HOSTS) becomes an
 * array of host and port; the owner a standby names joins it in one
 * extra slot, so a reconnect later starts there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "semc-int.h"

/* Why the text is no address: a message into why; returns -1. */
static int
semc_addr_bad(char *why, size_t whylen, const char *s, size_t len,
    const char *what)
{
	snprintf(why, whylen, "invalid address '%.*s' in the host list: %s",
	    (int)(len > 80 ? 80 : len), s, what);
	return (-1);
}

/* A port of 1 to 65535 in decimal: 0, or -1. */
static int
semc_addr_port(const char *p, size_t len, int *port)
{
	uint64_t	v;

	if (len == 0 || proto_parse_u64(p, len, 65535, &v) != 0 || v == 0)
		return (-1);
	*port = (int)v;
	return (0);
}

/*
 * One address: NAME or IPv4 with an optional ":PORT", "[IPv6]" with an
 * optional ":PORT", or a bare IPv6 address (two colons or more: no port).
 * default_port for none. 0 with out->host malloc'ed, or -1 and why.
 */
int
semc_addr_parse(const char *s, size_t len, int default_port,
    struct semc_addr *out, char *why, size_t whylen)
{
	const char	*host = s, *colon, *end;
	size_t		 hostlen = len;
	int		 port = default_port;

	if (len == 0)
		return (semc_addr_bad(why, whylen, s, len, "empty"));
	if (len > SEMC_HOST_MAX + 8)
		return (semc_addr_bad(why, whylen, s, len, "too long"));
	if (memchr(s, ' ', len) != NULL || memchr(s, '\t', len) != NULL)
		return (semc_addr_bad(why, whylen, s, len, "a blank inside"));
	if (s[0] == '[') {
		if ((end = memchr(s, ']', len)) == NULL)
			return (semc_addr_bad(why, whylen, s, len,
			    "'[' without ']'"));
		host = s + 1;
		hostlen = (size_t)(end - host);
		if (end + 1 < s + len) {
			if (end[1] != ':' || semc_addr_port(end + 2,
			    (size_t)(s + len - end - 2), &port) != 0)
				return (semc_addr_bad(why, whylen, s, len,
				    "expected ]:PORT, PORT 1 to 65535"));
		}
	} else if ((colon = memchr(s, ':', len)) != NULL &&
	    memchr(colon + 1, ':', (size_t)(s + len - colon - 1)) == NULL) {
		hostlen = (size_t)(colon - s);
		if (semc_addr_port(colon + 1, (size_t)(s + len - colon - 1),
		    &port) != 0)
			return (semc_addr_bad(why, whylen, s, len,
			    "the port is not 1 to 65535"));
	}
	if (hostlen == 0 || hostlen > SEMC_HOST_MAX)
		return (semc_addr_bad(why, whylen, s, len,
		    hostlen == 0 ? "no host" : "host too long"));
	if ((out->host = strndup(host, hostlen)) == NULL) {
		snprintf(why, whylen, "out of memory");
		return (-1);
	}
	out->port = port;
	return (0);
}

void
semc_addr_free(struct semc *c)
{
	size_t	i;

	for (i = 0; i < c->naddrs; i++)
		free(c->addrs[i].host);
	free(c->addrs);
	c->addrs = NULL;
	c->naddrs = c->nlist = c->cur = 0;
}

/* Append a copy of one parsed address; -1 without memory. */
static int
semc_addr_push(struct semc *c, const struct semc_addr *a)
{
	struct semc_addr	*p;

	p = reallocarray(c->addrs, c->naddrs + 1, sizeof(*p));
	if (p == NULL)
		return (-1);
	c->addrs = p;
	c->addrs[c->naddrs++] = *a;
	return (0);
}

/*
 * Set the handle's list from the comma-separated text (blanks around an
 * entry are ignored). 0; -1 with the reason in why (the list is empty
 * then, and every call will say why).
 */
int
semc_addr_set_list(struct semc *c, const char *list, int default_port,
    char *why, size_t whylen)
{
	struct semc_addr	 a;
	const char		*p = list, *comma, *end;

	semc_addr_free(c);
	for (;;) {
		if ((comma = strchr(p, ',')) == NULL)
			comma = p + strlen(p);
		end = comma;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		if (c->naddrs == SEMC_ADDRS_MAX) {
			snprintf(why, whylen, "more than %d addresses in the "
			    "host list", SEMC_ADDRS_MAX);
			semc_addr_free(c);
			return (-1);
		}
		if (semc_addr_parse(p, (size_t)(end - p), default_port, &a,
		    why, whylen) != 0) {
			semc_addr_free(c);
			return (-1);
		}
		if (semc_addr_push(c, &a) != 0) {
			free(a.host);
			snprintf(why, whylen, "out of memory");
			semc_addr_free(c);
			return (-1);
		}
		if (*comma == '\0')
			break;
		p = comma + 1;
	}
	c->nlist = c->naddrs;
	return (0);
}

/* The list of one host as given (a name, IPv4 or bare IPv6; no port). */
int
semc_addr_set_one(struct semc *c, const char *host, int port)
{
	struct semc_addr	a;

	semc_addr_free(c);
	if ((a.host = strdup(host)) == NULL)
		return (-1);
	a.port = port;
	if (semc_addr_push(c, &a) != 0) {
		free(a.host);
		return (-1);
	}
	c->nlist = c->naddrs;
	return (0);
}

/*
 * The index of the owner a standby named in "host:port" form: its place
 * in the list, else the extra slot after the list (replacing the owner
 * named before). -1 when the text is "-", unusable, or memory is short.
 */
int
semc_addr_learn(struct semc *c, const char *s, size_t len)
{
	struct semc_addr	a;
	char			why[128];
	size_t			i;

	if (len == 1 && s[0] == '-')
		return (-1);
	if (semc_addr_parse(s, len, SEMC_DEFAULT_PORT, &a, why,
	    sizeof(why)) != 0)
		return (-1);
	for (i = 0; i < c->naddrs; i++) {
		if (c->addrs[i].port == a.port &&
		    strcmp(c->addrs[i].host, a.host) == 0) {
			free(a.host);
			return ((int)i);
		}
	}
	if (c->naddrs > c->nlist) {	/* replace the owner learned before */
		free(c->addrs[c->nlist].host);
		c->addrs[c->nlist] = a;
		return ((int)c->nlist);
	}
	if (semc_addr_push(c, &a) != 0) {
		free(a.host);
		return (-1);
	}
	return ((int)c->nlist);
}
