/* stats: the persistent counters (see stats.h), kept in the store's
 * "stats" file and updated under its "stats.lock". */
#define _GNU_SOURCE
#include "store/stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/strbuf.h"

/* The name of counter i in the stats file. */
static const char *counter_name(int i)
{
    static const char *const names[TC_NCOUNTERS] = {
#define TC_X(id, name, label, flags) [TC_C_##id] = #name,
        TC_STATS_TABLE(TC_X)
#undef TC_X
        [TC_C_CACHE_BYTES] = "cache_bytes",
    };
    return names[i];
}

#define SKIPPED_FILE "stats.skipped"
/* The stats file holds a few hundred bytes: anything larger is not ours. */
#define MAX_STATS_BYTES (64 << 10)
/* How long a build tries for the lock before it leaves its counts out:
 * updates take microseconds, so a longer hold is a stuck or hostile
 * holder. Resetting, which a person asks for, waits longer. */
#define LOCK_TRIES 10
#define ZERO_LOCK_TRIES 400
#define LOCK_PAUSE_NS (5 * 1000 * 1000)

/* Whether counter i lives in the stats file (the table's other figures are
 * measured on disk when asked for). */
static int stored(int i)
{
    static const unsigned flags[TC_NSTATS] = {
#define TC_X(id, name, label, f) [TC_C_##id] = (f),
        TC_STATS_TABLE(TC_X)
#undef TC_X
    };
    return i == TC_C_CACHE_BYTES || (i != TC_C_STATS_SKIPPED && (flags[i] & TC_STATS_COUNTER));
}

/* Reads the stats file into out. 0, also when there is none yet or what
 * is there is no stats file (a FIFO, a huge file: an update replaces it);
 * -1 when the file cannot be read now (an update must not replace it with
 * counts that start from zero). */
static int read_counters(tc_store *st, tc_counters *out)
{
    memset(out, 0, sizeof *out);
    int64_t skipped = tc_store_file_size(st, SKIPPED_FILE);
    out->v[TC_C_STATS_SKIPPED] = skipped > 0 ? (uint64_t)skipped : 0;
    char *data = NULL;
    size_t len;
    if (tc_store_read_file(st, NULL, "stats", MAX_STATS_BYTES, &data, &len) != 0)
        return errno == ENOENT || errno == EINVAL || errno == EFBIG ? 0 : -1;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        *sp = '\0';
        for (int i = 0; i < TC_NCOUNTERS; i++)
            if (stored(i) && !strcmp(line, counter_name(i)))
                out->v[i] = strtoull(sp + 1, NULL, 10);
    }
    free(data);
    return 0;
}

void tc_stats_read(tc_store *st, tc_counters *out)
{
    (void)read_counters(st, out);
}

/* The statistics' lock, tried `tries` times a few milliseconds apart. 0
 * with *fd, 1 still held by another process, -1 unavailable. */
static int take_lock(tc_store *st, int tries, int *fd)
{
    for (int i = 0;; i++) {
        int rc = tc_store_lock_file(st, "stats.lock", 0, fd);
        if (rc != 1 || i + 1 >= tries)
            return rc;
        struct timespec pause = {0, LOCK_PAUSE_NS};
        nanosleep(&pause, NULL);
    }
}

/* Under the lock (tried `tries` times): reads the counters, lets change()
 * alter them, writes them back. A build that finds the lock held says so
 * in stats.skipped instead of waiting. */
static int update(tc_store *st, int tries, void (*change)(tc_counters *c, const void *arg),
                  const void *arg, tc_counters *after)
{
    int fd;
    int lock = take_lock(st, tries, &fd);
    if (lock == 1 && tries == LOCK_TRIES)
        (void)tc_store_append_file(st, SKIPPED_FILE, "\n", 1);
    if (lock != 0)
        return -1;
    tc_counters c;
    int rc = read_counters(st, &c);
    if (rc == 0) {
        change(&c, arg);
        tc_sb text = TC_SB_INIT;
        for (int i = 0; i < TC_NCOUNTERS; i++)
            if (stored(i))
                tc_sb_printf(&text, "%s %llu\n", counter_name(i), (unsigned long long)c.v[i]);
        rc = text.oom ? -1 : tc_store_write_file(st, NULL, "stats", text.data, text.len);
        tc_sb_free(&text);
    }
    if (rc == 0 && after)
        *after = c;
    tc_store_unlock(fd);
    return rc;
}

static void add(tc_counters *c, const void *arg)
{
    const tc_counters *delta = arg;
    for (int i = 0; i < TC_NCOUNTERS; i++)
        c->v[i] += delta->v[i];
}

int tc_stats_add(tc_store *st, const tc_counters *delta, tc_counters *after)
{
    return update(st, LOCK_TRIES, add, delta, after);
}

static void zero(tc_counters *c, const void *arg)
{
    /* the size estimate is a property of the disk, not a statistic */
    uint64_t size = *(const int *)arg ? 0 : c->v[TC_C_CACHE_BYTES];
    memset(c, 0, sizeof *c);
    c->v[TC_C_CACHE_BYTES] = size;
}

int tc_stats_zero(tc_store *st, int forget_size)
{
    if (update(st, ZERO_LOCK_TRIES, zero, &forget_size, NULL) != 0)
        return -1;
    return tc_store_remove_file(st, SKIPPED_FILE);
}

static void after_gc(tc_counters *c, const void *arg)
{
    const tc_gc_result *g = arg;
    c->v[TC_C_EVICTIONS] += g->evicted_files;
    c->v[TC_C_CACHE_BYTES] = g->bytes_after;
}

void tc_stats_after_gc(tc_store *st, const tc_gc_result *g)
{
    if (!g->skipped)
        (void)update(st, LOCK_TRIES, after_gc, g, NULL); /* statistics never fail anything */
}
