/*
 * dirty.h: the sets of objects that changed since they were last written
 * (persist.c's backlog): semaphore names and grant tokens, each at most
 * once, in uthash sets. A batch writes their state as it is then, so many
 * changes to one object cost one write.
 */
#ifndef SEMD_DIRTY_H
#define SEMD_DIRTY_H

#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "proto.h"

struct dirty_sem {
	char		 name[PROTO_NAME_MAX + 1];
	size_t		 len;
	UT_hash_handle	 hh;
};

/*
 * A grant's part on one semaphore: (token, sem) is the key, all the
 * bytes before hh (zero-padded), since a grant of ACQUIREALL has a part,
 * and a field in the grants key, on each of its semaphores.
 */
struct dirty_grant {
	uint64_t	 token;
	size_t		 sem_len;
	char		 sem[PROTO_NAME_MAX + 1];	/* for its removal */
	UT_hash_handle	 hh;
};

/* Add a name, or a token's part on sem, unless the set has it already. */
void	dirty_sem_add(struct dirty_sem **set, const char *name, size_t len);
void	dirty_grant_add(struct dirty_grant **set, uint64_t token,
	    const char *sem, size_t sem_len);
/* Empty both sets, freeing their members. */
void	dirty_clear(struct dirty_sem **sems, struct dirty_grant **grants);

#endif /* SEMD_DIRTY_H */
