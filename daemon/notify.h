/*
 * notify.h: telling systemd how semd is doing (sd_notify(3)), so that a
 * Type=notify unit is "started" only once semd listens, and "reloading"
 * while it reads its file again.
 *
 * Built without libsystemd (configure without --with-systemd), or run
 * without NOTIFY_SOCKET, every call does nothing: the unit is then
 * Type=simple.
 */
#ifndef SEMD_NOTIFY_H
#define SEMD_NOTIFY_H

/* Send "KEY=value" lines, one per "\n", to the service manager. */
void	notify_send(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));

#endif /* SEMD_NOTIFY_H */
