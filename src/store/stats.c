/* stats: the persistent counters (see stats.h), kept in the store's
 * "stats" file and updated under its "stats.lock". */
#define _GNU_SOURCE
#include "store/stats.h"

#include <stdlib.h>
#include <string.h>

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

/* Whether counter i lives in the stats file (the table's other figures are
 * measured on disk when asked for). */
static int stored(int i)
{
    static const unsigned flags[TC_NSTATS] = {
#define TC_X(id, name, label, f) [TC_C_##id] = (f),
        TC_STATS_TABLE(TC_X)
#undef TC_X
    };
    return i == TC_C_CACHE_BYTES || (flags[i] & TC_STATS_COUNTER);
}

void tc_stats_read(tc_store *st, tc_counters *out)
{
    memset(out, 0, sizeof *out);
    char *data = NULL;
    size_t len;
    if (tc_store_read_file(st, NULL, "stats", &data, &len) == 0) {
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
    }
    free(data);
}

/* Under the lock: reads the counters, lets change() alter them, writes
 * them back. */
static int update(tc_store *st, void (*change)(tc_counters *c, const void *arg), const void *arg,
                  tc_counters *after)
{
    int fd;
    if (tc_store_lock_file(st, "stats.lock", 1, &fd) != 0)
        return -1;
    tc_counters c;
    tc_stats_read(st, &c);
    change(&c, arg);
    tc_sb text = TC_SB_INIT;
    for (int i = 0; i < TC_NCOUNTERS; i++)
        if (stored(i))
            tc_sb_printf(&text, "%s %llu\n", counter_name(i), (unsigned long long)c.v[i]);
    int rc = text.oom ? -1 : tc_store_write_file(st, NULL, "stats", text.data, text.len);
    tc_sb_free(&text);
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
    return update(st, add, delta, after);
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
    return update(st, zero, &forget_size, NULL);
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
        (void)update(st, after_gc, g, NULL); /* statistics never fail anything */
}
