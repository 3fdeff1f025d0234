/*
 * notify.c: sd_notify(3) for a Type=notify unit (see notify.h).
 */
#include <stdarg.h>
#include <stdio.h>

#ifdef HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "log.h"
#include "notify.h"

void
notify_send(const char *fmt, ...)
{
#ifdef HAVE_SYSTEMD
	char	msg[1024];
	va_list	ap;
	int	rc;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* 0: no NOTIFY_SOCKET, not run by a service manager. */
	if ((rc = sd_notify(0, msg)) < 0)
		log_debug("sd_notify: error %d", -rc);
#else
	(void)fmt;
#endif
}
