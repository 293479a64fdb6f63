/* walk: visiting every record of the store (see store.h): counting them,
 * evicting the least recently used, verifying them, clearing the cache.
 * Every directory is opened below the root without following links. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "util/fs.h"

#define LAYOUT "v1"

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
    char rel[128];      /* "<target>/<kind>/<shard>/<name>" under v1 */
    int kind;           /* TC_REC_* - 1 */
    int planted;        /* named like a record, but a link or special file */
} walk_item;

typedef struct walk {
    walk_item *items;
    size_t n, cap;
    uint64_t bytes;
    uint64_t counts[TC_REC_KINDS];
    int64_t now_ns;
    uint64_t temps_removed;
    int clean;          /* remove stale temporaries, locks, planted links and special files */
} walk;

/* Neither a regular file nor a directory: a link, FIFO, socket or device,
 * which taskcache never makes inside a cache. */
static int planted(const struct stat *s) { return !S_ISREG(s->st_mode) && !S_ISDIR(s->st_mode); }

static walk_item *add_item(walk *w)
{
    if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 1024;
        walk_item *p = realloc(w->items, nc * sizeof *p);
        if (!p)
            return NULL;
        w->items = p;
        w->cap = nc;
    }
    walk_item *it = &w->items[w->n++];
    memset(it, 0, sizeof *it);
    return it;
}

/* Opens the directory name in fd; when cleaning, removes what stands
 * there in its place (a planted link or special file). */
static int open_sub(const walk *w, int fd, const char *name)
{
    int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat s;
    if (sub < 0 && w->clean && fstatat(fd, name, &s, AT_SYMLINK_NOFOLLOW) == 0 && planted(&s))
        unlinkat(fd, name, 0);
    return sub;
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
        walk_item *it;
        if (S_ISREG(s.st_mode) && is_record_name(n)) {
            if (!(it = add_item(w)))
                continue;
            it->mtime_ns = mt;
            it->size = (uint64_t)s.st_size;
            it->kind = kind;
            snprintf(it->rel, sizeof it->rel, "%s/%.62s", prefix, n); /* a record name */
            w->bytes += (uint64_t)s.st_size;
            w->counts[kind]++;
        } else if (w->clean) {
            /* a killed writer's temporary (an hour is far longer than any
             * write), a lock nobody used for a day, or a planted link or
             * special file (a FIFO would stop every reader in open) */
            int stale_tmp = !strncmp(n, ".tmp.", 5) && age_s > 3600;
            size_t len = strlen(n);
            int stale_lock = len > 5 && !strcmp(n + len - 5, ".lock") && age_s > 86400;
            if (stale_tmp || stale_lock || planted(&s)) {
                if (unlinkat(dirfd(d), n, 0) == 0 && stale_tmp)
                    w->temps_removed++;
            }
        } else if (planted(&s) && is_record_name(n) && (it = add_item(w)) != NULL) {
            it->planted = 1; /* verify reports it */
            it->kind = kind;
            snprintf(it->rel, sizeof it->rel, "%s/%.62s", prefix, n); /* a record name */
        }
    }
    closedir(d);
}

/* Visits every record under v1/<target>/<kind>/<shard>/. 0, or -1 when
 * the records cannot be listed (no records yet is not an error). */
static int walk_store(tc_store *st, walk *w)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    w->now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    const char *parts[] = {LAYOUT};
    int v1 = tc_store_open_dir(st, parts, 1, 0);
    if (v1 < 0)
        return errno == ENOENT ? 0 : -1;
    DIR *targets = fdopendir(v1);
    if (!targets) {
        close(v1);
        return -1;
    }
    struct dirent *t;
    while ((t = readdir(targets)) != NULL) {
        if (t->d_name[0] == '.')
            continue;
        int tfd = open_sub(w, dirfd(targets), t->d_name);
        if (tfd < 0)
            continue;
        for (int k = 0; k < TC_REC_KINDS; k++) { /* kind k + 1 */
            char kd[2] = {TC_STORE_KIND_DIRS[k], 0};
            int kfd = open_sub(w, tfd, kd);
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
                int sfd = open_sub(w, dirfd(shards), sh->d_name);
                if (sfd < 0)
                    continue;
                char prefix[64];
                snprintf(prefix, sizeof prefix, "%.24s/%s/%.8s", t->d_name, kd, sh->d_name);
                walk_shard(w, sfd, prefix, k);
            }
            closedir(shards);
        }
        close(tfd);
    }
    closedir(targets);
    return 0;
}

void tc_store_count(tc_store *st, uint64_t counts[TC_REC_KINDS], uint64_t *bytes)
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
    int dfd = tc_store_open_dir(st, dirs, 4, 0);
    if (dfd < 0)
        return -1;
    int rc = unlinkat(dfd, parts[3], 0);
    close(dfd);
    return rc;
}

static void clean_root(tc_store *st);

int tc_store_gc(tc_store *st, uint64_t max_bytes, int64_t older_than_s, tc_gc_result *out)
{
    memset(out, 0, sizeof *out);
    if (!tc_store_writable(st))
        return -1;
    /* one cleaner at a time: another one running means the work is done */
    int lfd;
    int lock = tc_store_lock_file(st, "gc.lock", 0, &lfd);
    if (lock < 0)
        return -1;
    if (lock == 1) {
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
    if (w.n)
        qsort(w.items, w.n, sizeof *w.items, cmp_mtime);
    uint64_t total = w.bytes;
    /* Over the limit, evict the least recently used down to 90% of it, so
     * the next builds do not each trigger a cleanup. */
    int over = max_bytes && total > max_bytes;
    uint64_t target = max_bytes / 10 * 9;
    /* none given, or an age reaching back past 1970 (its nanoseconds
     * would overflow): nothing is old enough */
    int64_t cutoff = INT64_MIN;
    if (older_than_s >= 0 && older_than_s <= w.now_ns / 1000000000)
        cutoff = w.now_ns - older_than_s * 1000000000;
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
    clean_root(st);
    tc_store_unlock(lfd);
    return 0;
}

int tc_store_verify(tc_store *st, int remove_bad, uint64_t *checked, uint64_t *bad)
{
    *checked = *bad = 0;
    walk w;
    memset(&w, 0, sizeof w);
    if (walk_store(st, &w) != 0)
        return -1;
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
        int ok = w.items[i].planted ? 0
                                    : tc_store_check(st, target, (uint32_t)w.items[i].kind + 1, &key);
        if (ok < 0)
            continue;
        (*checked)++;
        if (ok)
            continue;
        (*bad)++;
        if (remove_bad)
            remove_rel(st, w.items[i].rel);
    }
    free(w.items);
    return 0;
}

/* Directories below a cleared tree: v1.clear.<pid>.<time>/<target>/<kind>/<shard>,
 * with room to spare; anything nested deeper was not made by taskcache. */
#define TREE_DEPTH 8

int tc_store_clear(tc_store *st)
{
    const char *none[1] = {NULL};
    int rootfd = tc_store_open_dir(st, none, 0, 0);
    if (rootfd < 0)
        return -1;
    /* Renaming the tree away first makes the clear atomic for readers; it
     * is then removed through directory descriptors only, so a directory
     * swapped for a link while the walk runs is never followed. The name
     * is the pid and the time: a tree an interrupted clear left (gc
     * removes it after an hour) may hold this pid's name, as pid 1 of
     * every container run does, and a rename onto it fails. */
    char away[64];
    int rc = -1;
    for (int attempt = 0; attempt < 8 && rc != 0; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(away, sizeof away, LAYOUT ".clear.%ld.%lx", (long)getpid(),
                 (unsigned long)ts.tv_nsec + (unsigned long)attempt);
        rc = renameat(rootfd, LAYOUT, rootfd, away);
        if (rc != 0 && errno != EEXIST && errno != ENOTEMPTY)
            break;
    }
    if (rc == 0)
        rc = tc_remove_tree_at(rootfd, away, TREE_DEPTH);
    else if (errno == ENOENT)
        rc = 0;
    int e = errno;
    close(rootfd);
    errno = e;
    return rc;
}

/* Removes what is planted in the directory fd (links, FIFOs, sockets,
 * devices) and, with tree_prefix, the directories named so that are older
 * than an hour (what an interrupted clear left). */
static void clean_dir(int fd, const char *tree_prefix, int64_t now_s)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    size_t plen = tree_prefix ? strlen(tree_prefix) : 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        struct stat s;
        if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
            continue;
        if (fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (planted(&s))
            unlinkat(dirfd(d), de->d_name, 0);
        else if (S_ISDIR(s.st_mode) && plen && !strncmp(de->d_name, tree_prefix, plen) &&
                 now_s - s.st_mtime > 3600)
            tc_remove_tree_at(dirfd(d), de->d_name, TREE_DEPTH);
    }
    closedir(d);
}

/* The cache's other files: its root and toolchain/. */
static void clean_root(tc_store *st)
{
    const char *none[1] = {NULL}, *memos[1] = {"toolchain"};
    int64_t now = (int64_t)time(NULL);
    int fd = tc_store_open_dir(st, none, 0, 0);
    if (fd >= 0)
        clean_dir(fd, LAYOUT ".clear.", now);
    if ((fd = tc_store_open_dir(st, memos, 1, 0)) >= 0)
        clean_dir(fd, NULL, now);
}
