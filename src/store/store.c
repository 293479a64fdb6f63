/* store: content-addressed record files (see store.h). */
#define _GNU_SOURCE
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../util/fs.h"
#include "../util/strbuf.h"

#define LAYOUT "v1"

struct tc_store {
    char *root;
    char *records;           /* <root>/v1 */
    pthread_mutex_t lock;    /* guards warning */
    char warning[512];
    int readonly;
};

static void set_warning(tc_store *st, const char *what, const char *path, int err)
{
    pthread_mutex_lock(&st->lock);
    if (!st->warning[0])
        snprintf(st->warning, sizeof st->warning, "cannot %s %s (%s); results are not cached",
                 what, path, strerror(err));
    pthread_mutex_unlock(&st->lock);
}

tc_store *tc_store_open(const char *root)
{
    tc_store *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->root = strdup(root);
    st->records = tc_path_join(root, LAYOUT);
    if (!st->root || !st->records) {
        tc_store_close(st);
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    if (tc_mkdir_p(root, 0700) != 0) {
        set_warning(st, "create the cache directory", root, errno);
        st->readonly = 1;
    } else if (access(root, W_OK) != 0) {
        set_warning(st, "write to the cache directory", root, errno);
        st->readonly = 1;
    } else {
        char *tag = tc_path_join(root, "CACHEDIR.TAG");
        struct stat s;
        if (tag && lstat(tag, &s) != 0) {
            static const char text[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
                                       "# This directory is a cache made by taskcache.\n";
            (void)tc_write_atomic(tag, text, sizeof text - 1, 0600);
        }
        free(tag);
    }
    return st;
}

void tc_store_close(tc_store *st)
{
    if (!st)
        return;
    free(st->root);
    free(st->records);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

const char *tc_store_root(const tc_store *st) { return st->root; }

const char *tc_store_warning(const tc_store *st) { return st->warning[0] ? st->warning : NULL; }

static char kind_dir(uint32_t kind)
{
    switch (kind) {
    case TC_REC_MODULE: return 'm';
    case TC_REC_TASK: return 't';
    case TC_REC_GROUP: return 'g';
    default: return 'u';
    }
}

static void record_path(const tc_store *st, const char *target, uint32_t kind,
                        const tc_digest *key, tc_sb *out)
{
    char hex[TC_DIGEST_HEX_LEN + 1];
    tc_digest_hex(key, hex);
    tc_sb_printf(out, "%s/%s/%c/%.2s/%s", st->records, target, kind_dir(kind), hex, hex + 2);
}

int tc_store_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                 char **payload, size_t *len, int *bad)
{
    tc_sb path = TC_SB_INIT;
    record_path(st, target, kind, key, &path);
    char *data = NULL;
    size_t n = 0;
    int hit = 0;
    if (!path.oom && tc_read_file(path.data, 1, &data, &n) == 0) {
        if (tc_record_decode(data, n, kind, key, payload, len) == 0)
            hit = 1;
        else if (bad)
            *bad = 1;
        free(data);
    } else if (errno == ELOOP && bad) {
        *bad = 1; /* a planted symbolic link */
    }
    tc_sb_free(&path);
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
    tc_sb rec = TC_SB_INIT, path = TC_SB_INIT;
    long long rc = -1;
    if (tc_record_encode(kind, key, payload, len, &rec) != 0)
        goto done;
    record_path(st, target, kind, key, &path);
    if (path.oom)
        goto done;
    if (tc_write_atomic(path.data, rec.data, rec.len, 0600) != 0) {
        if (errno == ENOENT) {
            char *slash = strrchr(path.data, '/');
            *slash = '\0';
            int ok = tc_mkdir_p(path.data, 0700) == 0;
            *slash = '/';
            if (ok && tc_write_atomic(path.data, rec.data, rec.len, 0600) == 0)
                rc = (long long)rec.len;
        }
        if (rc < 0)
            set_warning(st, "write", path.data, errno);
    } else {
        rc = (long long)rec.len;
    }
done:
    tc_sb_free(&rec);
    tc_sb_free(&path);
    return rc;
}

int tc_store_clear(tc_store *st)
{
    /* Renaming the tree away first makes the clear atomic for readers. */
    char *away = NULL;
    if (asprintf(&away, "%s.clear.%ld", st->records, (long)getpid()) < 0)
        return -1;
    int rc = 0;
    if (rename(st->records, away) == 0)
        rc = tc_remove_tree(away);
    else if (errno != ENOENT)
        rc = -1;
    free(away);
    return rc;
}

static void count_dir(const char *dir, int depth, uint64_t *files, uint64_t *bytes)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and temporaries ".tmp.*" are not records */
        char *p = tc_path_join(dir, de->d_name);
        struct stat s;
        if (p && lstat(p, &s) == 0) {
            if (S_ISDIR(s.st_mode) && depth > 0)
                count_dir(p, depth - 1, files, bytes);
            else if (S_ISREG(s.st_mode) && depth == 0) {
                (*files)++;
                *bytes += (uint64_t)s.st_size;
            }
        }
        free(p);
    }
    closedir(d);
}

void tc_store_count(tc_store *st, uint64_t counts[4], uint64_t *bytes)
{
    static const char dirs[4] = {'u', 'm', 't', 'g'};
    memset(counts, 0, 4 * sizeof *counts);
    *bytes = 0;
    DIR *d = opendir(st->records);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        tc_sb p = TC_SB_INIT;
        for (int k = 0; k < 4; k++) {
            tc_sb_reset(&p);
            tc_sb_printf(&p, "%s/%s/%c", st->records, de->d_name, dirs[k]);
            count_dir(p.data, 1, &counts[k], bytes);
        }
        tc_sb_free(&p);
    }
    closedir(d);
}
