/*
 * redis-addr.h: the `redis` directive's address, parsed once, pure.
 *
 *   HOST:PORT | [V6]:PORT | unix:PATH
 *   sentinel://NODE[,NODE...]/MASTER-NAME
 *     NODE: HOST[:PORT] or [V6][:PORT], PORT 26379 when left out
 *     MASTER-NAME: 1 to 128 bytes of A-Z a-z 0-9 _ . : -
 *
 * A sentinel address names no data node: semd asks the sentinels which
 * server is the master (redis-target.c), at start and whenever it is lost.
 */
#ifndef SEMD_REDIS_ADDR_H
#define SEMD_REDIS_ADDR_H

#include <stddef.h>

#define REDIS_ADDR_SENTINEL_PORT	26379
#define REDIS_ADDR_SENTINELS_MAX	16
#define REDIS_ADDR_NAME_MAX		128

enum redis_addr_kind {
	REDIS_ADDR_NONE = 0,	/* no redis directive */
	REDIS_ADDR_TCP,
	REDIS_ADDR_UNIX,
	REDIS_ADDR_SENTINEL
};

/* One TCP server: host without brackets, port 1..65535. */
struct redis_node {
	char	*host;
	int	 port;
};

struct redis_addr {
	enum redis_addr_kind	 kind;
	struct redis_node	 node;		/* REDIS_ADDR_TCP */
	char			*path;		/* REDIS_ADDR_UNIX */
	struct redis_node	 sentinels[REDIS_ADDR_SENTINELS_MAX];
	size_t			 nsentinels;	/* REDIS_ADDR_SENTINEL */
	char			*master_name;	/* REDIS_ADDR_SENTINEL */
};

/*
 * Parse s into *a (zeroed first; free with redis_addr_free even after a
 * failure). 0, or -1 and one line in err.
 */
int	redis_addr_parse(const char *s, struct redis_addr *a, char *err,
	    size_t errlen);
void	redis_addr_free(struct redis_addr *a);
/* "host:port", or "[host]:port" when host holds a ':' (IPv6). */
void	redis_node_format(const char *host, int port, char *buf,
	    size_t len);

#endif /* SEMD_REDIS_ADDR_H */
