/*
 * proc.c: resident memory and open descriptors of this process, read
 * from /proc for STATS and the metrics endpoint (see proc.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "proc.h"

uint64_t
proc_rss_bytes(void)
{
	FILE			*fp;
	unsigned long long	 size, resident;
	long			 page = sysconf(_SC_PAGESIZE);
	int			 n;

	if ((fp = fopen("/proc/self/statm", "r")) == NULL)
		return (0);
	n = fscanf(fp, "%llu %llu", &size, &resident);
	fclose(fp);
	if (n != 2 || page <= 0)
		return (0);
	return ((uint64_t)resident * (uint64_t)page);
}

uint64_t
proc_open_fds(void)
{
	DIR		*dir;
	struct dirent	*de;
	uint64_t	 n = 0;

	if ((dir = opendir("/proc/self/fd")) == NULL)
		return (0);
	while ((de = readdir(dir)) != NULL) {
		if (de->d_name[0] != '.')
			n++;
	}
	closedir(dir);
	/* Less the one opendir() holds. */
	return (n > 0 ? n - 1 : 0);
}
