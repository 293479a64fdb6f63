/* toolchain: tool discovery and memoized identities (see toolchain.h). */
#define _GNU_SOURCE
#include "toolchain/toolchain.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "toolchain/spawn.h"
#include "util/pool.h"

#ifndef TC_CUDA_BIN_DIR
#define TC_CUDA_BIN_DIR ""
#endif

static int executable(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

static int try_dir(const char *dir, const char *name, char *out, size_t outlen)
{
    if (!dir || !*dir)
        return -1;
    int n = snprintf(out, outlen, "%s/%s", dir, name);
    return n > 0 && (size_t)n < outlen && executable(out) ? 0 : -1;
}

int tc_tool_find(const char *explicit_path, const char *env_var, const char *name,
                 char *out, size_t outlen, int *named)
{
    int dummy;
    named = named ? named : &dummy;
    const char *e = explicit_path && *explicit_path ? explicit_path
                                                   : (env_var ? getenv(env_var) : NULL);
    *named = e && *e;
    if (e && *e) {
        if (strchr(e, '/')) {
            snprintf(out, outlen, "%s", e);
            return executable(out) ? 0 : -1;
        }
        name = e; /* a bare name: search for it below */
    }
    char bin[TC_PATH_MAX];
    const char *homes[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    for (int i = 0; i < 2; i++) {
        if (homes[i] && *homes[i]) {
            snprintf(bin, sizeof bin, "%s/bin", homes[i]);
            if (try_dir(bin, name, out, outlen) == 0) {
                *named = 1;
                return 0;
            }
        }
    }
    if (try_dir(TC_CUDA_BIN_DIR, name, out, outlen) == 0)
        return 0;
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *colon = strchr(path, ':');
        size_t n = colon ? (size_t)(colon - path) : strlen(path);
        if (n && n < sizeof bin) {
            memcpy(bin, path, n);
            bin[n] = '\0';
            if (try_dir(bin, name, out, outlen) == 0)
                return 0;
        }
        path = colon ? colon + 1 : NULL;
    }
    return -1;
}

/* ---- memo ----------------------------------------------------------------- */

/* Identities this process has established. */
typedef struct known_tool {
    char *path;
    struct stat st;
    char id[TC_DIGEST_HEX_LEN + 1];
    char version[160];
    struct known_tool *next;
} known_tool;

static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;
static known_tool *known;

/* A fork while another thread held memo_lock would leave it locked in the
 * child for good (that thread is not there): the fork takes it first. It
 * is only ever held for walks of the list. */
static void memo_lock_take(void) { pthread_mutex_lock(&memo_lock); }
static void memo_lock_give(void) { pthread_mutex_unlock(&memo_lock); }
static void memo_watch_forks(void)
{
    (void)pthread_atfork(memo_lock_take, memo_lock_give, memo_lock_give);
}
static pthread_once_t memo_fork_once = PTHREAD_ONCE_INIT;

/* A file is taken to be unchanged while its device, inode, size, and
 * modification and status-change times are: replacing or rewriting a
 * binary changes at least one of them, so a warm build neither hashes nor
 * spawns anything. */
static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static void stamp(const struct stat *st, char *buf, size_t n)
{
    snprintf(buf, n, "%llu %llu %lld %lld.%09ld %lld.%09ld", (unsigned long long)st->st_dev,
             (unsigned long long)st->st_ino, (long long)st->st_size,
             (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec,
             (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec);
}

/* A memo's name in <root>/toolchain: a hash of the tool's path and of
 * how identities are computed (memos of the whole-file SHA-256 that came
 * before digest_file's chunks, or of a version text without the release
 * line, are not read as today's). */
static void memo_name(const char *path, char name[TC_DIGEST_HEX_LEN + 1])
{
    char text[TC_PATH_MAX + 32];
    int n = snprintf(text, sizeof text, "sha256 of 4 MiB chunks, release line\n%s", path);
    tc_digest d;
    tc_digest_of(text, n > 0 && (size_t)n < sizeof text ? (size_t)n : sizeof text - 1, &d);
    tc_digest_hex(&d, name);
    name[32] = '\0';
}

/* Memos are a few hundred bytes: a larger file is not one. */
#define MAX_MEMO_BYTES 4096

/* The memo's authentication line, for a cache with a secret: a forged
 * memo could otherwise make records of one compiler pass for another's. */
static void memo_mac(const tc_hmac_key *mac, const char *text, size_t len,
                     char hex[TC_DIGEST_HEX_LEN + 1])
{
    tc_digest d;
    memset(&d, 0, sizeof d);
    tc_hash *h = tc_hmac_begin(mac);
    if (h) {
        tc_hash_update(h, text, len);
        tc_hmac_final(mac, h, &d);
    }
    tc_digest_hex(&d, hex);
}

/* Memo format: "<stamp>\n<id>\n<version>\n", then "<hmac>\n" when the
 * cache has a secret. */
static int read_memo(tc_store *memo, const char *name, const struct stat *st, char *id,
                     char *version, size_t vlen)
{
    char *data;
    size_t len;
    if (tc_store_read_file(memo, "toolchain", name, MAX_MEMO_BYTES, &data, &len) != 0)
        return -1;
    char want[160];
    stamp(st, want, sizeof want);
    int rc = -1;
    char *nl1 = strchr(data, '\n');
    char *nl2 = nl1 ? strchr(nl1 + 1, '\n') : NULL;
    char *nl3 = nl2 ? strchr(nl2 + 1, '\n') : NULL;
    const tc_hmac_key *mac = tc_store_mac(memo);
    char sum[TC_DIGEST_HEX_LEN + 1];
    if (nl3 && mac)
        memo_mac(mac, data, (size_t)(nl3 + 1 - data), sum);
    int authentic = !mac || (nl3 && strlen(nl3 + 1) == TC_DIGEST_HEX_LEN + 1 &&
                             !memcmp(nl3 + 1, sum, TC_DIGEST_HEX_LEN));
    if (nl3 && authentic && (size_t)(nl1 - data) == strlen(want) &&
        !memcmp(data, want, strlen(want)) && nl2 - nl1 - 1 == TC_DIGEST_HEX_LEN) {
        memcpy(id, nl1 + 1, TC_DIGEST_HEX_LEN);
        id[TC_DIGEST_HEX_LEN] = '\0';
        snprintf(version, vlen, "%.*s", (int)(nl3 - nl2 - 1), nl2 + 1);
        tc_digest check;
        rc = tc_digest_from_hex(id, &check);
    }
    free(data);
    return rc;
}

static void write_memo(tc_store *memo, const char *name, const struct stat *st, const char *id,
                       const char *version)
{
    tc_sb rec = TC_SB_INIT;
    char s[160], sum[TC_DIGEST_HEX_LEN + 1];
    stamp(st, s, sizeof s);
    tc_sb_printf(&rec, "%s\n%s\n%s\n", s, id, version);
    if (tc_store_mac(memo) && !rec.oom) {
        memo_mac(tc_store_mac(memo), rec.data, rec.len, sum);
        tc_sb_printf(&rec, "%s\n", sum);
    }
    /* best effort: a memo that cannot be written costs one digest */
    if (!rec.oom)
        (void)tc_store_write_file(memo, "toolchain", name, rec.data, rec.len);
    tc_sb_free(&rec);
}

/* The identity of a file is a digest of all its bytes: a wrapper script,
 * a patched build or another release prints the same --version banner as
 * often as not, and only the bytes tell them apart (sccache keys its
 * ptxas step the same way). libnvJitLink is about 100 MB, which takes one
 * core 0.15-0.6 s to hash: a cold build in a new cache would wait that
 * long before its first lookup. So the file is hashed in 4 MiB chunks on
 * as many threads as there are CPUs (at most 16), and its identity is the
 * SHA-256 of its size and its chunks' SHA-256 digests, in order. */
#define DIGEST_CHUNK (4u << 20)
#define DIGEST_THREADS_MAX 16

typedef struct file_digest {
    int fd;
    off_t size;
    tc_digest *chunks;
    int *errors;   /* per chunk: errno of a failed read, else 0 */
} file_digest;

static tc_pool_step digest_chunk(void *ctx, size_t i)
{
    file_digest *f = ctx;
    tc_hash *h = tc_hash_new();
    if (!h) {
        f->errors[i] = ENOMEM;
        return TC_POOL_DONE;
    }
    char buf[1 << 16];
    off_t at = (off_t)i * DIGEST_CHUNK;
    off_t end = at + DIGEST_CHUNK < f->size ? at + DIGEST_CHUNK : f->size;
    while (at < end) {
        size_t want = (size_t)(end - at) < sizeof buf ? (size_t)(end - at) : sizeof buf;
        ssize_t n = pread(f->fd, buf, want, at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            f->errors[i] = n < 0 ? errno : EIO; /* a file that shrank under us */
            break;
        }
        tc_hash_update(h, buf, (size_t)n);
        at += n;
    }
    tc_hash_final(h, &f->chunks[i]);
    tc_hash_free(h);
    return TC_POOL_DONE;
}

static int digest_file(const char *path, char *id, tc_sb *err)
{
    file_digest f = {.fd = open(path, O_RDONLY | O_CLOEXEC)};
    struct stat st;
    if (f.fd < 0 || fstat(f.fd, &st) != 0) {
        tc_sb_printf(err, "cannot read '%s': %s", path, strerror(errno));
        if (f.fd >= 0)
            close(f.fd);
        return -1;
    }
    f.size = st.st_size;
    size_t n = (size_t)((f.size + DIGEST_CHUNK - 1) / DIGEST_CHUNK);
    f.chunks = calloc(n ? n : 1, sizeof *f.chunks);
    f.errors = calloc(n ? n : 1, sizeof *f.errors);
    int error = f.chunks && f.errors ? 0 : ENOMEM;
    if (!error) {
        if (tc_pool_run_range(n, tc_pool_cpus(DIGEST_THREADS_MAX), digest_chunk, &f) != 0)
            error = ENOMEM;
        for (size_t i = 0; i < n && !error; i++)
            error = f.errors[i];
    }
    close(f.fd);
    tc_hash *h = error ? NULL : tc_hash_new();
    if (h) {
        uint64_t size = (uint64_t)f.size;
        tc_hash_field(h, "file size", &size, sizeof size);
        tc_hash_field(h, "chunk digests", f.chunks, n * sizeof *f.chunks);
        tc_digest d;
        tc_hash_final(h, &d);
        tc_hash_free(h);
        tc_digest_hex(&d, id);
    } else {
        tc_sb_printf(err, "cannot read '%s': %s", path, strerror(error ? error : ENOMEM));
    }
    free(f.chunks);
    free(f.errors);
    return h ? 0 : -1;
}

void tc_tool_release(const char *version, char *out, size_t n)
{
    const char *v = strstr(version, ", V");
    size_t len = v ? strspn(v + 3, "0123456789.") : 0;
    snprintf(out, n, "%.*s", (int)len, len ? v + 3 : "");
}

/* `path --version` in one line: the release line where there is one, then
 * the last non-empty line ("Cuda compilation tools, release 13.0,
 * V13.0.88; Build cuda_13.0.r13.0/compiler.36424714_0"). */
static int probe_version(const char *path, char *version, size_t vlen, tc_sb *err)
{
    char *argv[] = {(char *)path, (char *)"--version", NULL};
    tc_sb out = TC_SB_INIT;
    int code = 0;
    if (tc_spawn(argv, NULL, &out, &code) != 0 || code != 0 || !out.len) {
        tc_sb_printf(err, "cannot run '%s --version': %s", path,
                     code ? "it failed" : strerror(errno));
        tc_sb_free(&out);
        return -1;
    }
    char *end = out.data + out.len;
    while (end > out.data && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    *end = '\0';
    char *start = end;
    while (start > out.data && start[-1] != '\n')
        start--;
    char *release = strstr(out.data, "release ");
    size_t rlen = release ? strcspn(release, "\r\n") : 0;
    while (release > out.data && release[-1] != '\n')
        release--, rlen++;
    if (release && release != start)
        snprintf(version, vlen, "%.*s; %s", (int)rlen, release, start);
    else
        snprintf(version, vlen, "%s", start);
    tc_sb_free(&out);
    return 0;
}

/* The memoized identity of a file; with run_version, a program that must
 * answer --version. */
static int identify(const char *path, tc_store *memo, int run_version,
                    char id[TC_DIGEST_HEX_LEN + 1], char *version, size_t vlen, tc_sb *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        tc_sb_printf(err, "cannot find '%s': %s", path, strerror(errno));
        return -1;
    }
    pthread_once(&memo_fork_once, memo_watch_forks);
    pthread_mutex_lock(&memo_lock);
    for (known_tool *m = known; m; m = m->next) {
        if (!strcmp(m->path, path) && same_file(&m->st, &st)) {
            memcpy(id, m->id, TC_DIGEST_HEX_LEN + 1);
            snprintf(version, vlen, "%s", m->version);
            pthread_mutex_unlock(&memo_lock);
            return 0;
        }
    }
    pthread_mutex_unlock(&memo_lock);

    char name[TC_DIGEST_HEX_LEN + 1];
    memo_name(path, name);
    if (!memo || read_memo(memo, name, &st, id, version, vlen) != 0) {
        version[0] = '\0';
        if ((run_version && probe_version(path, version, vlen, err) != 0) ||
            digest_file(path, id, err) != 0)
            return -1;
        if (memo)
            write_memo(memo, name, &st, id, version);
    }
    known_tool *m = calloc(1, sizeof *m);
    if (m && (m->path = strdup(path)) != NULL) {
        m->st = st;
        memcpy(m->id, id, TC_DIGEST_HEX_LEN + 1);
        snprintf(m->version, sizeof m->version, "%s", version);
        pthread_mutex_lock(&memo_lock);
        m->next = known;
        known = m;
        pthread_mutex_unlock(&memo_lock);
    } else {
        free(m);
    }
    return 0;
}

int tc_tool_identity(const char *path, tc_store *memo, char id[TC_DIGEST_HEX_LEN + 1],
                     char *version, size_t vlen, tc_sb *err)
{
    return identify(path, memo, 1, id, version, vlen, err);
}

int tc_file_identity(const char *path, tc_store *memo, char id[TC_DIGEST_HEX_LEN + 1],
                     tc_sb *err)
{
    char version[8];
    return identify(path, memo, 0, id, version, sizeof version, err);
}
