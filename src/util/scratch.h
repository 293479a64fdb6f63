/* scratch: the private temporary directories of builds (ptxas's inputs
 * and outputs, nvlink's), and the cleanup of those whose owner died: a
 * build killed by SIGKILL cannot remove its own. Each directory holds a
 * lock file that its owner keeps locked while it lives, which tells a dead
 * owner's directory from a live one in any process (PIDs would not: they
 * are reused and differ between containers sharing one /tmp). */
#ifndef TC_UTIL_SCRATCH_H
#define TC_UTIL_SCRATCH_H

/* Builds' scratch directories: $TMPDIR/taskcache.XXXXXX */
#define TC_SCRATCH_PREFIX "taskcache"

/* Creates <$TMPDIR or /tmp>/<prefix>.XXXXXX (mode 0700) with its lock
 * taken; *lock is the lock's descriptor, to close once the directory is
 * removed. The path is malloc'd; NULL on failure with errno. */
char *tc_scratch_create(const char *prefix, int *lock);
/* Removes the directory and releases its lock. */
void tc_scratch_remove(char *path, int lock);
/* Removes this user's <prefix>.* directories under $TMPDIR whose owner is
 * gone: their lock is free, or, for one without a lock file, it is more
 * than an hour old. Returns how many it removed. */
unsigned tc_scratch_remove_stale(const char *prefix);

#endif
