/*
 * sock.h: a client socket's address and options (sock.c).
 */
#ifndef SEMD_SOCK_H
#define SEMD_SOCK_H

#include <sys/socket.h>

#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

/* 1 for a Unix socket or a loopback address (protected mode lets it in). */
int	sock_peer_is_local(const struct sockaddr *sa);
/* "ip:port", "[ip6]:port" or "unix", for CLIENTS and the log. */
void	sock_format_peer(const struct sockaddr *sa, char *buf, size_t len);
/* TCP_NODELAY, and keepalive probes after keepalive_ms idle (0: none). */
void	sock_set_tcp_options(evutil_socket_t fd, int64_t keepalive_ms);

#endif /* SEMD_SOCK_H */
