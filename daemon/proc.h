/*
 * proc.h: what the process costs, from /proc (Linux); 0 where unknown.
 */
#ifndef SEMD_PROC_H
#define SEMD_PROC_H

#include <stdint.h>

/* Resident set size in bytes (/proc/self/statm). */
uint64_t	proc_rss_bytes(void);
/* Open file descriptors (/proc/self/fd). */
uint64_t	proc_open_fds(void);

#endif /* SEMD_PROC_H */
