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
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "remote/remote.h"
#include "store/config.h"
#include "store/stats.h"
#include "store/trust.h"
#include "util/fs.h"
#include "util/strbuf.h"

#define LAYOUT "v1"
#define DEFAULT_MAX_SIZE ((uint64_t)5 << 30)

/* Sizes past which the cache's small files are not read: a 5 GB sparse
 * file planted in their place costs nothing. */
#define MAX_CONFIG_BYTES (64 << 10)

struct tc_store {
    char *root;
    int rootfd;              /* -1 when the root could not be opened or is not trusted */
    pthread_mutex_t lock;    /* guards warning */
    char warning[640];
    int readonly;
    int shared;              /* group-shared cache: 2770 dirs, 0660 files */
    uint64_t max_size;
    int authenticated;       /* records carry an HMAC under mac */
    tc_hmac_key mac;
    char auth_id[24];        /* names the secret in keys; "" without one */
    tc_remote *remote;       /* the remote tier behind this store, or NULL */
    char remote_problem[800];  /* why the remote configured is not used (guarded by lock) */
    tc_counters remote_counts; /* what lookups in the remote did (guarded by lock) */
};

static void set_warning_why(tc_store *st, const char *what, const char *path, const char *why)
{
    pthread_mutex_lock(&st->lock);
    if (!st->warning[0])
        snprintf(st->warning, sizeof st->warning, "cannot %s %s (%s); results are not cached",
                 what, path, why);
    pthread_mutex_unlock(&st->lock);
}

static void set_warning(tc_store *st, const char *what, const char *path, int err)
{
    set_warning_why(st, what, path, strerror(err));
}

/* Uses no cache at all from here on: neither reads nor writes. */
static void bypass(tc_store *st)
{
    if (st->rootfd >= 0)
        close(st->rootfd);
    st->rootfd = -1;
    st->readonly = 1;
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

/* <root>/taskcache.conf (config.h), applied; cfg keeps what is applied
 * later (the remote, once the directory is trusted). */
static void read_config(tc_store *st, tc_config *cfg)
{
    char *data = NULL;
    size_t len;
    cfg->max_size = st->max_size;
    cfg->shared = st->shared;
    if (st->rootfd < 0 ||
        tc_read_file_at(st->rootfd, "taskcache.conf", MAX_CONFIG_BYTES, &data, &len) != 0)
        return;
    tc_config_parse(data, len, cfg);
    st->max_size = cfg->max_size;
    st->shared = cfg->shared;
    free(data);
}

static mode_t dir_mode(const tc_store *st) { return st->shared ? 02770 : 0700; }

/* ---- the remote tier: configuration ------------------------------------------------ */

/* Uploads and lookups not yet in the statistics: the store's counts and
 * the remote's writes, moved into delta. */
static void take_counts(tc_store *st, tc_counters *delta)
{
    tc_remote_writes w = {0, 0, 0};
    if (st->remote)
        tc_remote_take_writes(st->remote, &w);
    pthread_mutex_lock(&st->lock);
    for (int i = 0; i < TC_NCOUNTERS; i++)
        delta->v[i] += st->remote_counts.v[i];
    memset(&st->remote_counts, 0, sizeof st->remote_counts);
    pthread_mutex_unlock(&st->lock);
    delta->v[TC_C_REMOTE_WRITES] += w.written;
    delta->v[TC_C_REMOTE_WRITE_BYTES] += w.bytes;
    delta->v[TC_C_REMOTE_WRITE_ERRORS] += w.failed;
}

/* Flushes and frees the remote; its last writes join the counts that
 * tc_store_take_counts hands out. */
static void close_remote(tc_store *st)
{
    if (!st->remote)
        return;
    tc_remote_writes w;
    tc_remote_close(st->remote, &w);
    st->remote = NULL;
    pthread_mutex_lock(&st->lock);
    st->remote_counts.v[TC_C_REMOTE_WRITES] += w.written;
    st->remote_counts.v[TC_C_REMOTE_WRITE_BYTES] += w.bytes;
    st->remote_counts.v[TC_C_REMOTE_WRITE_ERRORS] += w.failed;
    pthread_mutex_unlock(&st->lock);
}

/* The first line of the spec's password-file into spec->password: a
 * password there stays out of the environment and command lines that
 * every process of the build and `ps` can read. 0, or -1 with why. */
static int read_password(tc_remote_spec *spec, const char *where, char *why, size_t n)
{
    char *data = NULL;
    size_t len = 0;
    if (tc_read_file(spec->password_file, 0, &data, &len) != 0) {
        snprintf(why, n, "%s: cannot read password-file %s: %s", where, spec->password_file,
                 strerror(errno));
        return -1;
    }
    size_t line = strcspn(data, "\r\n");
    int ok = line > 0 && line < sizeof spec->password;
    for (size_t i = 0; ok && i < line; i++)
        ok = (unsigned char)data[i] >= ' ' && (unsigned char)data[i] != 0x7f;
    if (ok) {
        memcpy(spec->password, data, line);
        spec->password[line] = '\0';
    } else {
        snprintf(why, n, "%s: password-file %s does not hold a password (one line of printable "
                         "characters, at most %zu)", where, spec->password_file,
                 sizeof spec->password - 1);
    }
    memset(data, 0, len);
    free(data);
    return ok ? 0 : -1;
}

/* Puts the remote of spec text behind the store (none for "none"); where:
 * where the text came from, for messages. A taskcache.conf is written by
 * whoever may write the cache: in a shared one, a member could make others
 * send a file of theirs to a server of the member's choosing, so there it
 * may not name a bearer-token-file or a password-file. 0, -1 with why
 * filled (a bad spec), or -2 (its password-file cannot be read: the store
 * then has no remote). */
static int set_remote(tc_store *st, const char *text, const char *where, int from_shared_file,
                      char *why, size_t n)
{
    tc_remote_spec *spec = malloc(sizeof *spec);
    char reason[512];
    int rc = -1;
    if (!spec) {
        snprintf(why, n, "%s: out of memory", where);
        return -1;
    }
    if (tc_config_parse_remote(text, spec, reason, sizeof reason) != 0) {
        snprintf(why, n, "%s: %s", where, reason);
    } else if (from_shared_file && (spec->bearer_file[0] || spec->password_file[0])) {
        snprintf(why, n, "%s: %s is not taken from the taskcache.conf of a shared cache (a "
                         "member could have it send one of your files to their server); set "
                         "it in TASKCACHE_REMOTE", where,
                 spec->bearer_file[0] ? "bearer-token-file" : "password-file");
    } else if (spec->password_file[0] && read_password(spec, where, why, n) != 0) {
        /* a spec that is right, and a file it names that is not there (a
         * secret a CI runner did not mount): no remote, rather than the
         * one configured before */
        close_remote(st);
        rc = -2;
    } else {
        close_remote(st);
        if (spec->kind && !(st->remote = tc_remote_new(spec)))
            snprintf(why, n, "%s: out of memory", where);
        else
            rc = 0;
    }
    memset(spec->password, 0, sizeof spec->password);
    free(spec);
    return rc;
}

/* The remote of $TASKCACHE_REMOTE, else of the configuration's "remote =";
 * a bad spec leaves the store without one, and every build says why. */
static void configure_remote(tc_store *st, const tc_config *cfg)
{
    const char *env = getenv("TASKCACHE_REMOTE");
    char where[PATH_MAX + 64], why[sizeof st->remote_problem - 64];
    int rc = 0;
    if (env && *env) {
        rc = set_remote(st, env, "TASKCACHE_REMOTE", 0, why, sizeof why);
    } else if (cfg->remote[0]) {
        snprintf(where, sizeof where, "%s/taskcache.conf:%u", st->root, cfg->remote_line);
        rc = set_remote(st, cfg->remote, where, st->shared, why, sizeof why);
    }
    if (rc != 0)
        snprintf(st->remote_problem, sizeof st->remote_problem,
                 "%s; no remote storage is used", why);
}

int tc_store_set_remote(tc_store *st, const char *text, char *why, size_t n)
{
    int rc = set_remote(st, text, "remote", 0, why, n);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&st->lock);
    st->remote_problem[0] = '\0'; /* this one replaces whatever was configured */
    pthread_mutex_unlock(&st->lock);
    return 0;
}

const char *tc_store_remote(const tc_store *st)
{
    return st->remote ? tc_remote_spec_of(st->remote)->description : NULL;
}

const char *tc_store_remote_problem(const tc_store *st)
{
    return st->remote_problem[0] ? st->remote_problem : NULL;
}

int tc_store_take_remote_warning(tc_store *st, char *buf, size_t n)
{
    return st->remote ? tc_remote_take_warning(st->remote, buf, n) : 0;
}

void tc_store_take_counts(tc_store *st, tc_counters *delta) { take_counts(st, delta); }

int tc_store_flush(tc_store *st, double timeout_s, char *why, size_t n)
{
    return st->remote ? tc_remote_flush(st->remote, timeout_s, why, n) : 0;
}

void tc_store_end_remote(tc_store *st) { close_remote(st); }

int tc_store_check_remote(tc_store *st, tc_remote_check_result *out)
{
    if (!st->remote)
        return -1;
    tc_remote_check(st->remote, out);
    return 0;
}

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
    tc_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        tc_store_close(st);
        return NULL;
    }
    read_config(st, cfg);
    const char *env = getenv("TASKCACHE_MAXSIZE");
    if (env && *env)
        tc_config_parse_size(env, &st->max_size);
    /* judged as it was found: a shared cache's mode is set only after, or
     * a taskcache.conf planted in a directory every user can write would
     * have it made group-only, and trusted */
    struct stat rs;
    const char *why = fstat(st->rootfd, &rs) == 0 ? tc_trust_directory(&rs, st->shared)
                                                  : "it cannot be examined";
    if (why) {
        set_warning_why(st, "trust the cache directory", root, why);
        bypass(st);
        free(cfg);
        return st;
    }
    if (st->shared)
        best_effort(fchmod(st->rootfd, dir_mode(st)));
    const char *secret = getenv(TC_SECRET_ENV);
    if (secret && *secret) {
        char reason[512];
        if (tc_trust_load_secret(secret, &st->mac, st->auth_id, reason, sizeof reason) != 0) {
            /* without its secret the cache would serve what anyone wrote */
            set_warning_why(st, "authenticate the records of", root, reason);
            bypass(st);
            free(cfg);
            return st;
        }
        st->authenticated = 1;
    }
    configure_remote(st, cfg);
    free(cfg);
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
                                     file_mode(st), st->shared);
        }
    }
    return st;
}

void tc_store_close(tc_store *st)
{
    if (!st)
        return;
    close_remote(st);
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

const char *tc_store_auth_id(const tc_store *st) { return st->authenticated ? st->auth_id : NULL; }

const tc_hmac_key *tc_store_mac(const tc_store *st) { return st->authenticated ? &st->mac : NULL; }

int tc_store_shared(const tc_store *st) { return st->shared; }

/* ---- paths ------------------------------------------------------------------------------ */

static char kind_dir(uint32_t kind)
{
    return kind >= 1 && kind <= TC_REC_KINDS ? TC_STORE_KIND_DIRS[kind - 1] : 'u';
}

int tc_store_writable(const tc_store *st) { return st->rootfd >= 0 && !st->readonly; }

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

/* Creates the directory name in fd with the store's mode, exactly. */
static void make_dir(tc_store *st, int fd, const char *name)
{
    if (mkdirat(fd, name, dir_mode(st)) == 0 && st->shared) {
        int d = openat(fd, name, DIR_FLAGS);
        if (d >= 0) {
            best_effort(fchmod(d, dir_mode(st))); /* the umask dropped group bits */
            close(d);
        }
    }
}

int tc_store_open_dir(tc_store *st, const char *const *parts, int n, int create)
{
    if (st->rootfd < 0) {
        errno = EBADF;
        return -1;
    }
    int fd = st->rootfd;
    for (int i = 0; i < n; i++) {
        int next = openat(fd, parts[i], DIR_FLAGS);
        struct stat ls;
        if (next < 0 && (errno == ELOOP || errno == ENOTDIR) && create &&
            fstatat(fd, parts[i], &ls, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(ls.st_mode) &&
            unlinkat(fd, parts[i], 0) == 0)
            errno = ENOENT; /* a link or special file planted where our directory belongs */
        if (next < 0 && errno == ENOENT && create) {
            make_dir(st, fd, parts[i]);
            next = openat(fd, parts[i], DIR_FLAGS);
        }
        /* a directory others may write is someone else's: never trusted */
        if (next >= 0 && (fstat(next, &ls) != 0 || tc_trust_directory(&ls, st->shared))) {
            close(next);
            next = -1;
            errno = ELOOP; /* reported like a planted link */
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

/* Where a record of kind/key lives: LAYOUT/target/kd/shard/name. */
static void record_names(uint32_t kind, const tc_digest *key, char kd[2], char shard[3],
                         char name[TC_DIGEST_HEX_LEN + 1])
{
    char hex[TC_DIGEST_HEX_LEN + 1];
    tc_digest_hex(key, hex);
    kd[0] = kind_dir(kind);
    kd[1] = '\0';
    memcpy(shard, hex, 2);
    shard[2] = '\0';
    memcpy(name, hex + 2, TC_DIGEST_HEX_LEN - 1);
}

/* The shard directory of a record and its file name. */
static int record_dir(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                      char name[TC_DIGEST_HEX_LEN + 1], int create)
{
    char kd[2], shard[3];
    record_names(kind, key, kd, shard, name);
    const char *parts[] = {LAYOUT, target, kd, shard};
    return tc_store_open_dir(st, parts, 4, create);
}

/* ---- records ------------------------------------------------------------------------------ */

/* Reads a record file in dirfd: a regular file this cache trusts, no
 * larger than its kind can be (checked before reading), never through a
 * link and never blocking on a FIFO. With `use`, refreshes its
 * modification time when it is more than a minute old: the time of last
 * use, for LRU eviction. EINVAL: something is there that is not a record. */
static int read_record(tc_store *st, int dirfd, const char *name, uint32_t kind, int use,
                       char **data, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat s;
    if (fstat(fd, &s) != 0 || !tc_trust_file(&s, st->shared) ||
        (uint64_t)s.st_size > tc_record_max_file(kind)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (tc_read_fd(fd, (size_t)tc_record_max_file(kind), data, len) != 0) {
        int e = errno;
        close(fd);
        errno = e == ENOMEM ? ENOMEM : EINVAL;
        return -1;
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (use && now.tv_sec - s.st_mtim.tv_sec > 60)
        best_effort(futimens(fd, NULL)); /* a read-only cache still serves */
    close(fd);
    return 0;
}

/* The bytes of the local record file of kind/key, unverified (read_record,
 * `use` as there): 0, or -1 with *planted set when a link or something
 * that is not a file stands where its directory or the record should. */
static int read_local(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                      int use, char **data, size_t *len, int *planted)
{
    char name[TC_DIGEST_HEX_LEN + 1];
    *planted = 0;
    int dfd = record_dir(st, target, kind, key, name, 0);
    if (dfd < 0) {
        *planted = errno == ELOOP || errno == ENOTDIR;
        return -1;
    }
    int rc = read_record(st, dfd, name, kind, use, data, len);
    if (rc != 0)
        *planted = errno == ELOOP || errno == EINVAL;
    close(dfd);
    return rc;
}

/* The local record file of kind/key, verified. 1 hit, 0 miss. */
static int local_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                     char **payload, size_t *len, int *bad)
{
    char *data = NULL;
    size_t n = 0;
    int planted, got = read_local(st, target, kind, key, 1, &data, &n, &planted) == 0;
    int hit = got && tc_record_decode(data, n, kind, key, tc_store_mac(st), payload, len) == 0;
    free(data);
    if (!hit && bad && (got || planted))
        *bad = 1; /* read but not valid, or planted */
    return hit;
}

int tc_store_check(tc_store *st, const char *target, uint32_t kind, const tc_digest *key)
{
    char *data = NULL;
    size_t n = 0;
    int planted, rc = 0;
    if (read_local(st, target, kind, key, 0, &data, &n, &planted) == 0) {
        rc = tc_record_check(data, n, kind, key, tc_store_mac(st));
        free(data);
    }
    return rc;
}

/* Writes the complete record rec (len bytes) as the file of kind/key. 0,
 * or -1 with the store's warning saying why. */
static int write_record(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                        const void *rec, size_t len)
{
    char name[TC_DIGEST_HEX_LEN + 1];
    int f = fault("write");
    if (f) {
        errno = f;
        set_warning(st, "write records in", st->root, f);
        return -1;
    }
    int dfd = record_dir(st, target, kind, key, name, 1);
    if (dfd < 0) {
        set_warning(st, "create a record directory in", st->root, errno);
        return -1;
    }
    int rc = tc_write_atomic_at(dfd, name, rec, len, file_mode(st), st->shared);
    if (rc != 0)
        set_warning(st, "write records in", st->root, errno);
    close(dfd);
    return rc;
}

/* A record's name on a remote server: "<target>/<kind>/<64 hex>". */
static void remote_name(const char *target, uint32_t kind, const tc_digest *key, char *out,
                        size_t n)
{
    char hex[TC_DIGEST_HEX_LEN + 1];
    tc_digest_hex(key, hex);
    snprintf(out, n, "%s/%c/%s", target, kind_dir(kind), hex);
}

/* Whether the remote tier is in use: there is one, behind a store that
 * is in use (a cache refused for its trust or a missing secret uses no
 * storage at all). */
static int remote_on(const tc_store *st) { return st->remote && st->rootfd >= 0; }

/* A local miss, asked of the remote. Its record is verified exactly as a
 * local one (the one record reader: checksum or HMAC, key, kind) and, when
 * it verifies, kept in the local store, byte for byte. 1 hit, 0 miss:
 * whatever went wrong (the server, or the record it sent) is a miss,
 * counted. */
static int remote_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                      const volatile sig_atomic_t *cancel, char **payload, size_t *len)
{
    char name[128];
    remote_name(target, kind, key, name, sizeof name);
    tc_sb rec = TC_SB_INIT;
    double seconds;
    tc_remote_outcome o = tc_remote_get(st->remote, name, tc_record_max_file(kind), &rec,
                                        cancel, &seconds);
    int hit = o == TC_REMOTE_OK &&
              tc_record_decode(rec.data, rec.len, kind, key, tc_store_mac(st), payload, len) == 0;
    int kept = hit && tc_store_writable(st) &&
               write_record(st, target, kind, key, rec.data, rec.len) == 0;
    if (o != TC_REMOTE_OFF && o != TC_REMOTE_CANCELLED) { /* not asked, or given up */
        pthread_mutex_lock(&st->lock);
        uint64_t *c = st->remote_counts.v;
        c[hit ? TC_C_REMOTE_HITS : TC_C_REMOTE_MISSES]++;
        c[TC_C_REMOTE_ERRORS] += o == TC_REMOTE_FAILED || o == TC_REMOTE_REFUSED ||
                                 o == TC_REMOTE_DOWN;
        c[TC_C_REMOTE_BAD] += o == TC_REMOTE_OK && !hit;
        c[TC_C_REMOTE_READ_BYTES] += rec.len;
        c[TC_C_REMOTE_READ_US] += (uint64_t)(seconds * 1e6);
        c[TC_C_CACHE_BYTES] += kept ? rec.len : 0;
        pthread_mutex_unlock(&st->lock);
    }
    tc_sb_free(&rec);
    return hit;
}

int tc_store_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                 int ask_remote, const volatile sig_atomic_t *cancel, char **payload,
                 size_t *len, int *bad)
{
    if (fault("read"))
        return 0;
    if (local_get(st, target, kind, key, payload, len, bad))
        return 1;
    return ask_remote && remote_on(st) && remote_get(st, target, kind, key, cancel, payload, len);
}

/* Whether the local store holds a file for kind/key (not verified: the
 * read that follows does that). */
static int local_exists(tc_store *st, const char *target, uint32_t kind, const tc_digest *key)
{
    char name[TC_DIGEST_HEX_LEN + 1];
    int dfd = record_dir(st, target, kind, key, name, 0);
    if (dfd < 0)
        return 0;
    struct stat sb;
    int found = fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode);
    close(dfd);
    return found;
}

int tc_store_probe(tc_store *st, const char *target, uint32_t kind, const tc_digest *key)
{
    char kd[2], shard[3], name[TC_DIGEST_HEX_LEN + 1], path[256];
    struct stat sb;
    if (st->rootfd < 0)
        return 0;
    record_names(kind, key, kd, shard, name);
    snprintf(path, sizeof path, "%s/%s/%s/%s/%s", LAYOUT, target, kd, shard, name);
    return fstatat(st->rootfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode);
}

typedef struct prefetch {
    tc_store *st;
    const char *target;
    uint32_t kind;
    const tc_digest *keys;
    const volatile sig_atomic_t *cancel;
    uint8_t *state;
    size_t n, next;
    pthread_mutex_t lock;
} prefetch;

static void *prefetch_thread(void *arg)
{
    prefetch *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->next < p->n && p->state[p->next] != TC_PREFETCH_ASKED)
            p->next++;
        size_t i = p->next++;
        pthread_mutex_unlock(&p->lock);
        if (i >= p->n)
            return NULL;
        char *payload = NULL;
        size_t len = 0;
        if (remote_get(p->st, p->target, p->kind, &p->keys[i], p->cancel, &payload, &len))
            p->state[i] = TC_PREFETCH_FETCHED;
        free(payload);
    }
}

size_t tc_store_prefetch(tc_store *st, const char *target, uint32_t kind, const tc_digest *keys,
                         size_t n, const volatile sig_atomic_t *cancel, uint8_t *state)
{
    size_t ask = 0;
    int remote_reads = remote_on(st) && !fault("read");
    for (size_t i = 0; i < n; i++) {
        int remote = remote_reads && !local_exists(st, target, kind, &keys[i]);
        state[i] = remote ? TC_PREFETCH_ASKED : TC_PREFETCH_LOCAL;
        ask += (size_t)remote;
    }
    if (!ask)
        return 0;
    prefetch p = {st, target, kind, keys, cancel, state, n, 0, PTHREAD_MUTEX_INITIALIZER};
    pthread_t t[TC_REMOTE_READERS];
    size_t nt = 0, want = ask < TC_REMOTE_READERS ? ask : TC_REMOTE_READERS;
    while (nt + 1 < want && pthread_create(&t[nt], NULL, prefetch_thread, &p) == 0)
        nt++;
    prefetch_thread(&p); /* this thread too */
    for (size_t k = 0; k < nt; k++)
        pthread_join(t[k], NULL);
    pthread_mutex_destroy(&p.lock);
    return ask;
}

int tc_store_has(tc_store *st, const char *target, uint32_t kind, const tc_digest *key)
{
    char *p = NULL;
    size_t n;
    int hit = tc_store_get(st, target, kind, key, 1, NULL, &p, &n, NULL);
    free(p);
    return hit;
}

long long tc_store_put(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                       const void *payload, size_t len)
{
    /* canonical texts are made again from any input that needs them: not
     * worth a remote's bandwidth */
    int upload = kind != TC_REC_CANON && remote_on(st) && !tc_remote_spec_of(st->remote)->read_only;
    if (st->readonly && !upload)
        return -1;
    tc_sb rec = TC_SB_INIT;
    long long rc = -1;
    if (tc_record_encode(kind, key, payload, len, tc_store_mac(st), &rec) != 0) {
        tc_sb_free(&rec);
        return -1;
    }
    if (!st->readonly && write_record(st, target, kind, key, rec.data, rec.len) == 0)
        rc = (long long)rec.len;
    if (upload) {
        /* the same bytes as the local file; the queue takes them */
        char name[128];
        remote_name(target, kind, key, name, sizeof name);
        size_t n;
        char *bytes = tc_sb_take(&rec, &n);
        /* the buffer was reserved for the worst compression; the queue's
         * limit counts n, so it holds no more than n */
        char *fit = bytes && n ? realloc(bytes, n) : NULL;
        if (fit)
            bytes = fit;
        if (bytes)
            (void)tc_remote_put(st->remote, name, bytes, n); /* counted by the remote */
    }
    tc_sb_free(&rec);
    return rc;
}

/* ---- leases ------------------------------------------------------------------------------- */

/* Opens (creating) the lock file name in dirfd with the store's mode,
 * exactly, so that every member of a shared cache can lock it: read-only,
 * which is all flock needs. Something planted there that is not a
 * regular file is replaced, and so, in a shared cache, is a lock file
 * this member may not read (made private by an older taskcache). */
static int open_lock(tc_store *st, int dirfd, const char *name)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = openat(dirfd, name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                        file_mode(st));
        struct stat s;
        if (fd >= 0 && fstat(fd, &s) == 0 && S_ISREG(s.st_mode)) {
            if (st->shared && s.st_uid == geteuid() && (s.st_mode & 0777) != file_mode(st))
                best_effort(fchmod(fd, file_mode(st)));
            return fd;
        }
        if (fd >= 0)
            close(fd);
        else if (errno != ELOOP && !(errno == EACCES && st->shared))
            return -1;
        if (unlinkat(dirfd, name, 0) != 0)
            return -1;
    }
    return -1;
}

/* An exclusive flock on name in dirfd. 0 taken (*fd), 1 held by another
 * process, -1 unavailable. */
static int lock_at(tc_store *st, int dirfd, const char *name, int wait, int *fd)
{
    *fd = -1;
    int lfd = open_lock(st, dirfd, name);
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

int tc_store_read_file(tc_store *st, const char *dir, const char *name, size_t max, char **data,
                       size_t *len)
{
    int dfd = file_dir(st, dir, 0);
    if (dfd < 0)
        return -1;
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    int e = errno, rc = -1;
    close(dfd);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    struct stat s;
    if (fstat(fd, &s) != 0 || !tc_trust_file(&s, st->shared))
        e = EINVAL;
    else if ((rc = tc_read_fd(fd, max, data, len)) != 0)
        e = errno;
    close(fd);
    errno = e;
    return rc;
}

int tc_store_write_file(tc_store *st, const char *dir, const char *name, const void *data,
                        size_t len)
{
    int dfd = file_dir(st, dir, 1);
    if (dfd < 0)
        return -1;
    int rc = tc_write_atomic_at(dfd, name, data, len, file_mode(st), st->shared);
    int e = errno;
    close(dfd);
    errno = e;
    return rc;
}

int tc_store_append_file(tc_store *st, const char *name, const void *data, size_t len)
{
    if (st->rootfd < 0)
        return -1;
    int fd = openat(st->rootfd, name,
                    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                    file_mode(st));
    struct stat s;
    int rc = -1;
    if (fd >= 0 && fstat(fd, &s) == 0 && S_ISREG(s.st_mode)) {
        if (st->shared && s.st_uid == geteuid())
            best_effort(fchmod(fd, file_mode(st)));
        rc = write(fd, data, len) == (ssize_t)len ? 0 : -1;
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

int64_t tc_store_file_size(tc_store *st, const char *name)
{
    struct stat s;
    if (st->rootfd < 0 || fstatat(st->rootfd, name, &s, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(s.st_mode))
        return -1;
    return (int64_t)s.st_size;
}

int tc_store_remove_file(tc_store *st, const char *name)
{
    if (st->rootfd < 0)
        return -1;
    return unlinkat(st->rootfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
}

int tc_store_lock_file(tc_store *st, const char *name, int wait, int *fd)
{
    *fd = -1;
    if (st->rootfd < 0)
        return -1;
    return lock_at(st, st->rootfd, name, wait, fd);
}
