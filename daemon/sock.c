/*
 * sock.c: what semd needs to know and set on a client's socket: where it
 * comes from, and the TCP options every client socket gets.
 */
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "sock.h"

/* 1 for loopback and Unix-socket peers, which protected mode admits. */
int
sock_peer_is_local(const struct sockaddr *sa)
{
	const struct sockaddr_in	*sin;
	const struct sockaddr_in6	*sin6;
	const uint8_t			*a;

	switch (sa->sa_family) {
	case AF_UNIX:
		return (1);
	case AF_INET:
		sin = (const struct sockaddr_in *)sa;
		return ((ntohl(sin->sin_addr.s_addr) >> 24) == 127);
	case AF_INET6:
		sin6 = (const struct sockaddr_in6 *)sa;
		a = sin6->sin6_addr.s6_addr;
		if (IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
			return (1);
		return (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && a[12] == 127);
	default:
		return (0);
	}
}

void
sock_format_peer(const struct sockaddr *sa, char *buf, size_t len)
{
	char	host[INET6_ADDRSTRLEN];

	switch (sa->sa_family) {
	case AF_INET:
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr,
		    host, sizeof(host));
		snprintf(buf, len, "%s:%u", host,
		    ntohs(((const struct sockaddr_in *)sa)->sin_port));
		break;
	case AF_INET6:
		inet_ntop(AF_INET6,
		    &((const struct sockaddr_in6 *)sa)->sin6_addr, host,
		    sizeof(host));
		snprintf(buf, len, "[%s]:%u", host,
		    ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
		break;
	default:
		snprintf(buf, len, "unix");
		break;
	}
}

/*
 * No Nagle: a reply that follows another before the client answered
 * (pipelining, a grant written behind an earlier reply, WATCH) must not
 * wait for its ACK. Keepalive lets a vanished client host be noticed, so
 * that its bound permits are released: after idle + 3 * interval at the
 * most.
 */
void
sock_set_tcp_options(evutil_socket_t fd, int64_t keepalive_ms)
{
	int	on = 1, idle, intvl, cnt = 3;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)) != 0)
		log_warn("setsockopt TCP_NODELAY");
	if (keepalive_ms <= 0)
		return;
	idle = (int)(keepalive_ms / 1000);
	if (idle < 1)
		idle = 1;
	intvl = idle / 3 > 0 ? idle / 3 : 1;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl,
	    sizeof(intvl)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0)
		log_warn("setsockopt keepalive");
}
