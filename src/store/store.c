/* store: opening the store, and reading and writing its files: records,
 * leases and the few other files of a cache (see store.h).
 *
 * Every path below the cache root is walked one component at a time with
 * O_NOFOLLOW, so a symbolic link planted inside the cache is never
 * followed: not for reading, not for writing, not when cleaning up. */
#define _GNU_SOURCE
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/config.h"
#include "util/fs.h"
#include "util/strbuf.h"

#define LAYOUT "v1"
#define DEFAULT_MAX_SIZE ((uint64_t)5 << 30)

struct tc_store {
    char *root;
    int rootfd;              /* -1 when the root could not be opened */
    pthread_mutex_t lock;    /* guards warning */
    char warning[512];
    int readonly;
    int shared;              /* group-shared cache: 2770 dirs, 0660 files */
    uint64_t max_size;
};

static void set_warning(tc_store *st, const char *what, const char *path, int err)
{
    pthread_mutex_lock(&st->lock);
    if (!st->warning[0])
        snprintf(st->warning, sizeof st->warning, "cannot %s %s (%s); results are not cached",
                 what, path, strerror(err));
    pthread_mutex_unlock(&st->lock);
}

/* ---- test hook -------------------------------------------------------------------- */

/* TASKCACHE_TEST_FAULTS="write:ENOSPC,read:EIO,lock:EACCES" makes the store
 * fail those operations with that errno, to test degraded storage where a
 * real full disk or read-only mount cannot be arranged. Test use only. */
static int fault(const char *op)
{
    const char *f = getenv("TASKCACHE_TEST_FAULTS");
    if (!f || !*f)
        return 0;
    size_t n = strlen(op);
    for (const char *p = f; (p = strstr(p, op)) != NULL; p += n) {
        if ((p != f && p[-1] != ',') || p[n] != ':')
            continue;
        const char *e = p + n + 1;
        if (!strncmp(e, "ENOSPC", 6))
            return ENOSPC;
        if (!strncmp(e, "EACCES", 6))
            return EACCES;
        if (!strncmp(e, "EROFS", 5))
            return EROFS;
        if (!strncmp(e, "EIO", 3))
            return EIO;
        return EIO;
    }
    return 0;
}

/* ---- configuration ------------------------------------------------------------------- */

/* <root>/taskcache.conf (config.h) */
static void read_config(tc_store *st)
{
    char *data = NULL;
    size_t len;
    if (st->rootfd < 0 || tc_read_file_at(st->rootfd, "taskcache.conf", 1, &data, &len) != 0)
        return;
    tc_config cfg = {st->max_size, st->shared};
    tc_config_parse(data, len, &cfg);
    st->max_size = cfg.max_size;
    st->shared = cfg.shared;
    free(data);
}

static mode_t dir_mode(const tc_store *st) { return st->shared ? 02770 : 0700; }

/* For calls whose failure changes nothing that matters (a permission
 * refresh, a timestamp): glibc marks some of them warn_unused_result. */
static void best_effort(int rc) { (void)rc; }
static mode_t file_mode(const tc_store *st) { return st->shared ? 0660 : 0600; }

tc_store *tc_store_open(const char *root)
{
    tc_store *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->rootfd = -1;
    st->max_size = DEFAULT_MAX_SIZE;
    st->root = strdup(root);
    if (!st->root) {
        free(st);
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    const char *sh = getenv("TASKCACHE_SHARED");
    if (sh && *sh && strcmp(sh, "0"))
        st->shared = 1;
    if (tc_mkdir_p(root, 0700) != 0) {
        set_warning(st, "create the cache directory", root, errno);
        st->readonly = 1;
        return st;
    }
    st->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->rootfd < 0) {
        set_warning(st, "open the cache directory", root, errno);
        st->readonly = 1;
        return st;
    }
    read_config(st);
    const char *env = getenv("TASKCACHE_MAXSIZE");
    if (env && *env)
        tc_config_parse_size(env, &st->max_size);
    if (st->shared)
        best_effort(fchmod(st->rootfd, dir_mode(st)));
    if (access(root, W_OK) != 0 || fault("write")) {
        set_warning(st, "write to the cache directory", root, fault("write") ? fault("write")
                                                                             : errno);
        st->readonly = 1;
    } else {
        struct stat s;
        if (fstatat(st->rootfd, "CACHEDIR.TAG", &s, AT_SYMLINK_NOFOLLOW) != 0) {
            static const char text[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
                                       "# This directory is a cache made by taskcache.\n";
            (void)tc_write_atomic_at(st->rootfd, "CACHEDIR.TAG", text, sizeof text - 1,
                                     file_mode(st));
        }
    }
    return st;
}

void tc_store_close(tc_store *st)
{
    if (!st)
        return;
    if (st->rootfd >= 0)
        close(st->rootfd);
    free(st->root);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

const char *tc_store_root(const tc_store *st) { return st->root; }

const char *tc_store_warning(const tc_store *st) { return st->warning[0] ? st->warning : NULL; }

uint64_t tc_store_max_size(const tc_store *st) { return st->max_size; }

void tc_store_set_max_size(tc_store *st, uint64_t bytes) { st->max_size = bytes; }

/* ---- paths ------------------------------------------------------------------------------ */

static char kind_dir(uint32_t kind)
{
    switch (kind) {
    case TC_REC_MODULE: return 'm';
    case TC_REC_TASK: return 't';
    case TC_REC_GROUP: return 'g';
    default: return 'u';
    }
}

int tc_store_writable(const tc_store *st) { return st->rootfd >= 0 && !st->readonly; }

int tc_store_open_dir(tc_store *st, const char *const *parts, int n, int create)
{
    if (st->rootfd < 0) {
        errno = EBADF;
        return -1;
    }
    int fd = st->rootfd;
    for (int i = 0; i < n; i++) {
        int next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat ls;
        if (next < 0 && (errno == ELOOP || errno == ENOTDIR) && create &&
            fstatat(fd, parts[i], &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(ls.st_mode) &&
            unlinkat(fd, parts[i], 0) == 0)
            errno = ENOENT; /* a link planted where our directory belongs: replace it */
        if (next < 0 && errno == ENOENT && create) {
            if (mkdirat(fd, parts[i], dir_mode(st)) == 0 && st->shared) {
                int d = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (d >= 0) {
                    best_effort(fchmod(d, dir_mode(st))); /* umask dropped group bits? */
                    close(d);
                }
            }
            next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        int e = errno;
        if (fd != st->rootfd)
            close(fd);
        if (next < 0) {
            errno = e;
            return -1;
        }
        fd = next;
    }
    return fd == st->rootfd ? dup(fd) : fd;
}

/* The shard directory of a record and its file name. */
static int record_dir(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                      char name[TC_DIGEST_HEX_LEN + 1], int create)
{
    char hex[TC_DIGEST_HEX_LEN + 1], kd[2] = {kind_dir(kind), 0}, shard[3];
    tc_digest_hex(key, hex);
    memcpy(shard, hex, 2);
    shard[2] = '\0';
    memcpy(name, hex + 2, TC_DIGEST_HEX_LEN - 1);
    const char *parts[] = {LAYOUT, target, kd, shard};
    return tc_store_open_dir(st, parts, 4, create);
}

/* ---- records ------------------------------------------------------------------------------ */

/* Reads a file in dirfd (no links), refreshing its modification time when
 * it is more than a minute old: the time of last use, for LRU eviction. */
static int read_record(int dirfd, const char *name, char **data, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat s;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    char *buf = malloc((size_t)s.st_size + 1);
    size_t n = 0;
    while (buf && n < (size_t)s.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)s.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    if (!buf || n != (size_t)s.st_size) {
        free(buf);
        close(fd);
        errno = buf ? EIO : ENOMEM;
        return -1;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec - s.st_mtim.tv_sec > 60)
        best_effort(futimens(fd, NULL)); /* a read-only cache still serves */
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int tc_store_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                 char **payload, size_t *len, int *bad)
{
    char name[TC_DIGEST_HEX_LEN + 1];
    if (fault("read"))
        return 0;
    int dfd = record_dir(st, target, kind, key, name, 0);
    if (dfd < 0) {
        if ((errno == ELOOP || errno == ENOTDIR) && bad)
            *bad = 1; /* a planted link where a directory should be */
        return 0;
    }
    char *data = NULL;
    size_t n = 0;
    int hit = 0;
    if (read_record(dfd, name, &data, &n) == 0) {
        if (tc_record_decode(data, n, kind, key, payload, len) == 0)
            hit = 1;
        else if (bad)
            *bad = 1;
        free(data);
    } else if ((errno == ELOOP || errno == EINVAL) && bad) {
        *bad = 1; /* a planted link or something that is not a file */
    }
    close(dfd);
    return hit;
}

int tc_store_has(tc_store *st, const char *target, uint32_t kind, const tc_digest *key)
{
    char *p = NULL;
    size_t n;
    int hit = tc_store_get(st, target, kind, key, &p, &n, NULL);
    free(p);
    return hit;
}

long long tc_store_put(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                       const void *payload, size_t len)
{
    if (st->readonly)
        return -1;
    tc_sb rec = TC_SB_INIT;
    long long rc = -1;
    char name[TC_DIGEST_HEX_LEN + 1];
    int dfd = -1;
    if (tc_record_encode(kind, key, payload, len, &rec) != 0)
        goto done;
    int f = fault("write");
    if (f) {
        errno = f;
        set_warning(st, "write records in", st->root, f);
        goto done;
    }
    dfd = record_dir(st, target, kind, key, name, 1);
    if (dfd < 0) {
        set_warning(st, "create a record directory in", st->root, errno);
        goto done;
    }
    if (tc_write_atomic_at(dfd, name, rec.data, rec.len, file_mode(st)) != 0) {
        set_warning(st, "write records in", st->root, errno);
        goto done;
    }
    if (st->shared)
        best_effort(fchmodat(dfd, name, file_mode(st), 0));
    rc = (long long)rec.len;
done:
    if (dfd >= 0)
        close(dfd);
    tc_sb_free(&rec);
    return rc;
}

/* ---- leases ------------------------------------------------------------------------------- */

/* An exclusive flock on name in dirfd, created with the store's mode. 0
 * taken (*fd), 1 held by another process, -1 unavailable. */
static int lock_at(tc_store *st, int dirfd, const char *name, int wait, int *fd)
{
    *fd = -1;
    int lfd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, file_mode(st));
    if (lfd < 0)
        return -1;
    if (flock(lfd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
        int busy = errno == EWOULDBLOCK;
        close(lfd);
        return busy ? 1 : -1;
    }
    *fd = lfd;
    return 0;
}

tc_lease tc_store_lock(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                       int *fd)
{
    *fd = -1;
    if (st->readonly || fault("lock"))
        return TC_LEASE_NONE;
    char name[TC_DIGEST_HEX_LEN + 8];
    int dfd = record_dir(st, target, kind, key, name, 1);
    if (dfd < 0)
        return TC_LEASE_NONE;
    strcat(name, ".lock");
    int rc = lock_at(st, dfd, name, 0, fd);
    close(dfd);
    return rc == 0 ? TC_LEASE_TAKEN : rc == 1 ? TC_LEASE_BUSY : TC_LEASE_NONE;
}

void tc_store_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock; the kernel does it too if we die */
}


/* ---- the other files of the cache --------------------------------------------------------- */

/* The directory a file lives in: the root, or dir below it. */
static int file_dir(tc_store *st, const char *dir, int create)
{
    const char *parts[1] = {dir};
    return tc_store_open_dir(st, parts, dir ? 1 : 0, create);
}

int tc_store_read_file(tc_store *st, const char *dir, const char *name, char **data,
                       size_t *len)
{
    int dfd = file_dir(st, dir, 0);
    if (dfd < 0)
        return -1;
    int rc = tc_read_file_at(dfd, name, 1, data, len);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

int tc_store_write_file(tc_store *st, const char *dir, const char *name, const void *data,
                        size_t len)
{
    int dfd = file_dir(st, dir, 1);
    if (dfd < 0)
        return -1;
    int rc = tc_write_atomic_at(dfd, name, data, len, file_mode(st));
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

int tc_store_lock_file(tc_store *st, const char *name, int wait, int *fd)
{
    *fd = -1;
    if (st->rootfd < 0)
        return -1;
    return lock_at(st, st->rootfd, name, wait, fd);
}
