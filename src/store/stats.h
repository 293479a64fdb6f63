/* stats: the cache's statistics, in one table.
 *
 * TC_STATS_TABLE lists every figure of tc_stats (taskcache.h) once, in the
 * order `taskcache stats` shows them: its id here, its name (the member of
 * tc_stats, the key in <root>/stats, in `taskcache stats --json` and in the
 * Python package), the label `taskcache stats` prints and its flags
 * (TC_STATS_* of taskcache.h). The counters, the stats file, the public
 * struct (api/cache.c checks every member against it), the command line's
 * text and JSON and the Python package all come from it.
 *
 * Counters are shared by every process using a cache directory and kept
 * in <root>/stats as "name value" lines. Each build adds its deltas once,
 * under an flock on <root>/stats.lock, and replaces the file atomically,
 * so readers need no lock and a crash loses at most one build's counts.
 * Statistics never fail a build, nor hold one up: a build that finds the
 * lock held (for long: another member of a shared cache may sit on it)
 * leaves its counts out and appends one byte to <root>/stats.skipped, whose
 * size is the stats_skipped figure. */
#ifndef TC_STORE_STATS_H
#define TC_STORE_STATS_H

#include <stdint.h>

#include "store/store.h"
#include "taskcache.h"

#define TC_S_COUNT TC_STATS_COUNTER
#define TC_S_PAIR (TC_STATS_COUNTER | TC_STATS_SHARE)
#define TC_STATS_TABLE(X)                                                                \
    X(BUILDS, builds, "builds", TC_S_COUNT)                                              \
    X(MODULE_HITS, module_hits, "  module record hits", TC_S_PAIR)                       \
    X(MODULE_MISSES, module_misses, "  module record misses", TC_S_PAIR)                 \
    X(WHOLE_BUILDS, whole_builds, "  compiled whole (not split)", TC_S_COUNT)            \
    X(COMPILE_ERRORS, compile_errors, "  failed", TC_S_COUNT)                            \
    X(UNIT_HITS, unit_hits, "unit hits", TC_S_PAIR)                                      \
    X(UNIT_MISSES, unit_misses, "unit misses", TC_S_PAIR)                                \
    X(TASK_HITS, task_hits, "host task hits", TC_S_PAIR | TC_STATS_HOST)                 \
    X(TASK_MISSES, task_misses, "host task misses", TC_S_PAIR | TC_STATS_HOST)           \
    X(CODEGEN, codegen_calls, "host codegen calls", TC_S_COUNT | TC_STATS_HOST)          \
    X(GROUP_HITS, group_hits, "group manifest hits", TC_S_PAIR | TC_STATS_HOST)          \
    X(GROUP_MISSES, group_misses, "group manifest misses", TC_S_PAIR | TC_STATS_HOST)    \
    X(COMPILES, compiles, "compiler runs", TC_S_COUNT)                                   \
    X(RECORDS_WRITTEN, records_written, "records written", TC_S_COUNT)                   \
    X(BYTES_WRITTEN, bytes_written, NULL, TC_S_COUNT | TC_STATS_BYTES)                   \
    X(BAD_RECORDS, bad_records, "bad records (rebuilt)", TC_S_COUNT)                     \
    X(WAITED, waited, "waited for another process", TC_S_COUNT)                          \
    X(EVICTIONS, evictions, "evicted records", TC_S_COUNT)                               \
    X(STORE_ERRORS, store_errors, "records not written", TC_S_COUNT)                     \
    X(STATS_SKIPPED, stats_skipped, "counts not recorded (lock busy)", TC_S_COUNT)       \
    X(DRIVER_BUILT, driver_built, "driver loads built (taskcache run)",                  \
      TC_S_COUNT | TC_STATS_INTERCEPT)                                                   \
    X(DRIVER_PASSED, driver_passed, "  passed on to the driver",                         \
      TC_S_COUNT | TC_STATS_INTERCEPT)                                                   \
    TC_STATS_REMOTE_ROWS(X)                                                              \
    X(MODULE_RECORDS, module_records, "module records on disk", 0)                       \
    X(UNIT_RECORDS, unit_records, "unit records on disk", 0)                             \
    X(TASK_RECORDS, task_records, "task records on disk", TC_STATS_HOST)                 \
    X(GROUP_RECORDS, group_records, "group manifests on disk", TC_STATS_HOST)            \
    X(DISK_BYTES, disk_bytes, "size on disk", TC_STATS_BYTES)                            \
    X(MAX_SIZE, max_size, "size limit", TC_STATS_BYTES | TC_STATS_LIMIT)

/* The remote tier (src/remote): lookups of local misses (every error and
 * bad record is also a miss), the time they took, and uploads. */
#define TC_S_REMOTE (TC_STATS_COUNTER | TC_STATS_REMOTE)
#define TC_STATS_REMOTE_ROWS(X)                                                          \
    X(REMOTE_HITS, remote_hits, "remote hits", TC_S_REMOTE | TC_STATS_SHARE)             \
    X(REMOTE_MISSES, remote_misses, "remote misses", TC_S_REMOTE | TC_STATS_SHARE)       \
    X(REMOTE_ERRORS, remote_errors, "  errors (down, timeouts, 5xx)", TC_S_REMOTE)       \
    X(REMOTE_BAD, remote_bad, "  bad records (rebuilt)", TC_S_REMOTE)                    \
    X(REMOTE_READ_BYTES, remote_read_bytes, "remote bytes read", TC_S_REMOTE | TC_STATS_BYTES) \
    X(REMOTE_READ_US, remote_read_us, "remote lookup time", TC_S_REMOTE | TC_STATS_MICROS) \
    X(REMOTE_WRITES, remote_writes, "remote records written", TC_S_REMOTE)              \
    X(REMOTE_WRITE_BYTES, remote_write_bytes, NULL, TC_S_REMOTE | TC_STATS_BYTES)        \
    X(REMOTE_WRITE_ERRORS, remote_write_errors, "  not written (errors, full queue)", TC_S_REMOTE)

enum {
#define TC_X(id, name, label, flags) TC_C_##id,
    TC_STATS_TABLE(TC_X)
#undef TC_X
    TC_NSTATS,
    /* kept in the stats file beside the table's counters, not shown: the
     * approximate bytes of records on disk (exact after each gc), which
     * tells a build when a cleanup is due without walking the cache */
    TC_C_CACHE_BYTES = TC_NSTATS,
    TC_NCOUNTERS
};

typedef struct tc_counters {
    uint64_t v[TC_NCOUNTERS];
} tc_counters;

/* Adds delta's counters to the cache's; *after (may be NULL) receives the
 * new totals. 0, or -1 when they could not be updated. */
int tc_stats_add(tc_store *st, const tc_counters *delta, tc_counters *after);
/* Reads the counters (all zero when there are none yet). */
void tc_stats_read(tc_store *st, tc_counters *out);
/* Resets the counters; the size estimate stays, or is set to 0 with
 * forget_size (the cache was emptied). */
int tc_stats_zero(tc_store *st, int forget_size);
/* Records what a cleanup did: its evictions, and the exact size left. */
void tc_stats_after_gc(tc_store *st, const tc_gc_result *g);

#endif
