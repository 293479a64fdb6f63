/* scratch: build scratch directories and their cleanup (see scratch.h). */
#define _GNU_SOURCE
#include "util/scratch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"

#define LOCK_NAME ".owner"
/* A directory from before scratch locks, or whose lock file could not be
 * made, is taken for abandoned after this long: no build runs that long
 * without touching it. */
#define UNLOCKED_STALE_SECONDS 3600
/* A directory is never taken for abandoned this young: its owner may be
 * between creating it and taking its lock. */
#define YOUNG_SECONDS 10

char *tc_scratch_create(const char *prefix, int *lock)
{
    *lock = -1;
    char *dir = tc_make_temp_dir(prefix);
    if (!dir)
        return NULL;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int fd = dfd >= 0 ? openat(dfd, LOCK_NAME, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                      : -1;
    if (dfd >= 0)
        close(dfd);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        fd = -1;
    }
    *lock = fd; /* without a lock the directory is only ever removed by its age */
    return dir;
}

void tc_scratch_remove(char *path, int lock)
{
    if (path)
        tc_remove_tree(path);
    if (lock >= 0)
        close(lock); /* after the removal: a cleaner never sees it unlocked and present */
    free(path);
}

/* Whether the scratch directory dfd's owner is gone. */
static int abandoned(int dfd, const struct stat *st, time_t now)
{
    if (now - st->st_mtime < YOUNG_SECONDS)
        return 0;
    int fd = openat(dfd, LOCK_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT && now - st->st_mtime > UNLOCKED_STALE_SECONDS;
    struct stat ls;
    int free_lock = fstat(fd, &ls) == 0 && S_ISREG(ls.st_mode) &&
                    flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return free_lock;
}

unsigned tc_scratch_remove_stale(const char *prefix)
{
    const char *tmp = tc_temp_root();
    int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = tfd >= 0 ? fdopendir(tfd) : NULL;
    if (!d) {
        if (tfd >= 0)
            close(tfd);
        return 0;
    }
    size_t plen = strlen(prefix);
    time_t now = time(NULL);
    unsigned removed = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strncmp(n, prefix, plen) != 0 || n[plen] != '.' || strlen(n + plen + 1) != 6)
            continue;
        int dfd = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK |
                                          O_CLOEXEC);
        if (dfd < 0)
            continue;
        struct stat st;
        /* only this user's own directories, as mkdtemp made them */
        int ours = fstat(dfd, &st) == 0 && st.st_uid == geteuid() &&
                   (st.st_mode & 07777) == 0700;
        int gone = ours && abandoned(dfd, &st, now);
        close(dfd);
        if (gone && tc_remove_tree_at(dirfd(d), n, 16) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}
