/* store: content-addressed record files (see store.h).
 *
 * Every path below the cache root is walked one component at a time with
 * O_NOFOLLOW, so a symbolic link planted inside the cache is never
 * followed: not for reading, not for writing, not when cleaning up. */
#define _GNU_SOURCE
#include "store.h"

#include <dirent.h>
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

#include "../../include/taskcache.h"
#include "../util/fs.h"
#include "../util/strbuf.h"
#include "stats.h"

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

tc_status tc_parse_size(const char *s, uint64_t *out)
{
    char *end;
    double v = s ? strtod(s, &end) : -1;
    if (!s || end == s || v < 0)
        return TC_ERR_INVALID;
    while (*end == ' ')
        end++;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return TC_ERR_INVALID;
    *out = (uint64_t)(v * mult);
    return TC_OK;
}

/* <root>/taskcache.conf: "max_size = 10G", "shared = true"; '#' comments. */
static void read_config(tc_store *st)
{
    char *data = NULL;
    size_t len;
    if (st->rootfd < 0 || tc_read_file_at(st->rootfd, "taskcache.conf", 1, &data, &len) != 0)
        return;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char key[64], value[128];
        if (sscanf(line, " %63[a-z_] = %127s", key, value) != 2)
            continue;
        if (!strcmp(key, "max_size"))
            tc_parse_size(value, &st->max_size);
        else if (!strcmp(key, "shared"))
            st->shared = !strcmp(value, "true") || !strcmp(value, "1") || !strcmp(value, "yes");
    }
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
        tc_parse_size(env, &st->max_size);
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

/* Opens dir components one by one under the root, never following links;
 * creates missing ones when asked. Returns a directory fd or -1. */
static int open_chain(tc_store *st, const char *const *parts, int n, int create)
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
    return open_chain(st, parts, 4, create);
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

int tc_store_lock(tc_store *st, const char *target, uint32_t kind, const tc_digest *key, int *fd)
{
    *fd = -1;
    if (st->readonly || fault("lock"))
        return -1;
    char name[TC_DIGEST_HEX_LEN + 8];
    int dfd = record_dir(st, target, kind, key, name, 1);
    if (dfd < 0)
        return -1;
    strcat(name, ".lock");
    int lfd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, file_mode(st));
    close(dfd);
    if (lfd < 0)
        return -1;
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        close(lfd);
        return busy ? 1 : -1;
    }
    *fd = lfd;
    return 0;
}

void tc_store_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock; the kernel does it too if we die */
}

/* ---- walking the store ---------------------------------------------------------------------- */

static int is_record_name(const char *n)
{
    size_t len = strlen(n);
    if (len != TC_DIGEST_HEX_LEN - 2)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
            return 0;
    return 1;
}

typedef struct walk_item {
    int64_t mtime_ns;
    uint64_t size;
    char rel[96];       /* "<target>/<kind>/<shard>/<name>" under v1 */
    int kind;
} walk_item;

typedef struct walk {
    walk_item *items;
    size_t n, cap;
    uint64_t bytes;
    uint64_t counts[4];
    int64_t now_ns;
    uint64_t temps_removed;
    int clean;          /* remove stale temporaries, locks and planted links */
} walk;

static int kind_index(char k)
{
    switch (k) {
    case 'u': return 0;
    case 'm': return 1;
    case 't': return 2;
    case 'g': return 3;
    default: return -1;
    }
}

static void walk_shard(walk *w, int dfd, const char *prefix, int kind)
{
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, ".."))
            continue;
        struct stat s;
        if (fstatat(dirfd(d), n, &s, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        int64_t mt = (int64_t)s.st_mtim.tv_sec * 1000000000 + s.st_mtim.tv_nsec;
        int64_t age_s = (w->now_ns - mt) / 1000000000;
        if (S_ISREG(s.st_mode) && is_record_name(n)) {
            if (w->n == w->cap) {
                size_t nc = w->cap ? w->cap * 2 : 1024;
                walk_item *p = realloc(w->items, nc * sizeof *p);
                if (!p)
                    continue;
                w->items = p;
                w->cap = nc;
            }
            walk_item *it = &w->items[w->n++];
            it->mtime_ns = mt;
            it->size = (uint64_t)s.st_size;
            it->kind = kind;
            snprintf(it->rel, sizeof it->rel, "%s/%s", prefix, n);
            w->bytes += (uint64_t)s.st_size;
            w->counts[kind]++;
        } else if (w->clean) {
            /* a killed writer's temporary (an hour is far longer than any
             * write), a lock nobody used for a day, or a planted link */
            int stale_tmp = !strncmp(n, ".tmp.", 5) && age_s > 3600;
            size_t len = strlen(n);
            int stale_lock = len > 5 && !strcmp(n + len - 5, ".lock") && age_s > 86400;
            if (stale_tmp || stale_lock || S_ISLNK(s.st_mode)) {
                if (unlinkat(dirfd(d), n, 0) == 0 && stale_tmp)
                    w->temps_removed++;
            }
        }
    }
    closedir(d);
}

/* Visits every record under v1/<target>/<kind>/<shard>/. */
static void walk_store(tc_store *st, walk *w)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    w->now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    const char *parts[] = {LAYOUT};
    int v1 = open_chain(st, parts, 1, 0);
    if (v1 < 0)
        return;
    DIR *targets = fdopendir(v1);
    if (!targets) {
        close(v1);
        return;
    }
    struct dirent *t;
    while ((t = readdir(targets)) != NULL) {
        if (t->d_name[0] == '.')
            continue;
        int tfd = openat(dirfd(targets), t->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0)
            continue;
        static const char kinds[] = "umtg";
        for (int k = 0; k < 4; k++) {
            char kd[2] = {kinds[k], 0};
            int kfd = openat(tfd, kd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (kfd < 0)
                continue;
            DIR *shards = fdopendir(kfd);
            if (!shards) {
                close(kfd);
                continue;
            }
            struct dirent *sh;
            while ((sh = readdir(shards)) != NULL) {
                if (sh->d_name[0] == '.')
                    continue;
                int sfd = openat(dirfd(shards), sh->d_name,
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                    continue;
                char prefix[64];
                snprintf(prefix, sizeof prefix, "%.24s/%c/%.8s", t->d_name, kinds[k], sh->d_name);
                walk_shard(w, sfd, prefix, kind_index(kinds[k]));
            }
            closedir(shards);
        }
        close(tfd);
    }
    closedir(targets);
}

void tc_store_count(tc_store *st, uint64_t counts[4], uint64_t *bytes)
{
    walk w;
    memset(&w, 0, sizeof w);
    walk_store(st, &w);
    memcpy(counts, w.counts, sizeof w.counts);
    *bytes = w.bytes;
    free(w.items);
}

static int cmp_mtime(const void *a, const void *b)
{
    const walk_item *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns)
        return x->mtime_ns < y->mtime_ns ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

static int remove_rel(tc_store *st, const char *rel)
{
    /* rel = target/kind/shard/name, every directory opened without links */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", rel);
    char *parts[4];
    int n = 0;
    for (char *save = NULL, *p = strtok_r(buf, "/", &save); p && n < 4;
         p = strtok_r(NULL, "/", &save))
        parts[n++] = p;
    if (n != 4)
        return -1;
    const char *dirs[] = {LAYOUT, parts[0], parts[1], parts[2]};
    int dfd = open_chain(st, dirs, 4, 0);
    if (dfd < 0)
        return -1;
    int rc = unlinkat(dfd, parts[3], 0);
    close(dfd);
    return rc;
}

int tc_store_gc(tc_store *st, uint64_t max_bytes, int64_t older_than_s, tc_gc_result *out)
{
    memset(out, 0, sizeof *out);
    if (st->rootfd < 0 || st->readonly)
        return -1;
    /* one cleaner at a time: another one running means the work is done */
    int lfd = openat(st->rootfd, "gc.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                     file_mode(st));
    if (lfd < 0)
        return -1;
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        close(lfd);
        out->skipped = 1;
        return 0;
    }
    walk w;
    memset(&w, 0, sizeof w);
    w.clean = 1;
    walk_store(st, &w);
    out->files_before = w.n;
    out->bytes_before = w.bytes;
    out->temps_removed = w.temps_removed;
    qsort(w.items, w.n, sizeof *w.items, cmp_mtime);
    uint64_t total = w.bytes;
    /* Over the limit, evict the least recently used down to 90% of it, so
     * the next builds do not each trigger a cleanup. */
    int over = max_bytes && total > max_bytes;
    uint64_t target = max_bytes / 10 * 9;
    int64_t cutoff = older_than_s >= 0 ? w.now_ns - older_than_s * 1000000000 : INT64_MIN;
    for (size_t i = 0; i < w.n; i++) {
        walk_item *it = &w.items[i];
        if (!(it->mtime_ns < cutoff || (over && total > target)))
            continue;
        if (remove_rel(st, it->rel) == 0) {
            total -= it->size;
            out->evicted_files++;
            out->evicted_bytes += it->size;
        }
    }
    out->files_after = w.n - out->evicted_files;
    out->bytes_after = total;
    free(w.items);
    /* the statistics learn the exact size (statistics never fail anything) */
    tc_counters d;
    memset(&d, 0, sizeof d);
    d.v[TC_C_EVICTIONS] = out->evicted_files;
    (void)tc_stats_add(st->root, &d, NULL);
    (void)tc_stats_set(st->root, TC_C_CACHE_BYTES, total);
    close(lfd);
    return 0;
}

int tc_store_verify(tc_store *st, int remove_bad, uint64_t *checked, uint64_t *bad)
{
    *checked = *bad = 0;
    walk w;
    memset(&w, 0, sizeof w);
    walk_store(st, &w);
    static const uint32_t kinds[4] = {TC_REC_UNIT, TC_REC_MODULE, TC_REC_TASK, TC_REC_GROUP};
    for (size_t i = 0; i < w.n; i++) {
        /* rel = target/kind/shard/name: the key is shard + name */
        const char *slash = strrchr(w.items[i].rel, '/');
        char hex[TC_DIGEST_HEX_LEN + 1];
        tc_digest key;
        snprintf(hex, sizeof hex, "%.2s%s", slash - 2, slash + 1);
        char target[32];
        snprintf(target, sizeof target, "%.*s", (int)strcspn(w.items[i].rel, "/"),
                 w.items[i].rel);
        if (tc_digest_from_hex(hex, &key) != 0)
            continue;
        (*checked)++;
        char *p = NULL;
        size_t n;
        int b = 0;
        if (tc_store_get(st, target, kinds[w.items[i].kind], &key, &p, &n, &b)) {
            free(p);
            continue;
        }
        (*bad)++;
        if (remove_bad)
            remove_rel(st, w.items[i].rel);
    }
    free(w.items);
    return 0;
}

int tc_store_clear(tc_store *st)
{
    if (st->rootfd < 0)
        return -1;
    /* Renaming the tree away first makes the clear atomic for readers. */
    char away[64];
    snprintf(away, sizeof away, LAYOUT ".clear.%ld", (long)getpid());
    if (renameat(st->rootfd, LAYOUT, st->rootfd, away) != 0)
        return errno == ENOENT ? 0 : -1;
    char *path = tc_path_join(st->root, away);
    int rc = path ? tc_remove_tree(path) : -1;
    free(path);
    return rc;
}
