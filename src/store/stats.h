/* stats: cache counters shared by every process using a cache directory,
 * kept in <root>/stats as "name value" lines. Each build adds its deltas
 * once, under an flock on <root>/stats.lock, and replaces the file
 * atomically, so readers need no lock and a crash loses at most one
 * build's counts. Statistics never fail a build. */
#ifndef TC_STORE_STATS_H
#define TC_STORE_STATS_H

#include <stdint.h>

enum {
    TC_C_BUILDS,
    TC_C_MODULE_HITS,
    TC_C_MODULE_MISSES,
    TC_C_UNIT_HITS,
    TC_C_UNIT_MISSES,
    TC_C_COMPILES,
    TC_C_COMPILE_ERRORS,
    TC_C_WHOLE_BUILDS,
    TC_C_RECORDS_WRITTEN,
    TC_C_BYTES_WRITTEN,
    TC_C_BAD_RECORDS,
    TC_C_STORE_ERRORS,
    TC_C_TASK_HITS,
    TC_C_TASK_MISSES,
    TC_C_CODEGEN,
    TC_C_GROUP_HITS,
    TC_C_GROUP_MISSES,
    TC_C_EVICTIONS,
    TC_C_CACHE_BYTES,   /* approximate bytes of records on disk; exact after gc */
    TC_C_WAITED,        /* units another process compiled while we waited */
    TC_NCOUNTERS
};

typedef struct tc_counters {
    uint64_t v[TC_NCOUNTERS];
} tc_counters;

const char *tc_counter_name(int i);

/* Adds delta to the counters in root; *after (may be NULL) receives the
 * new totals. 0, or -1 when they could not be updated. */
int tc_stats_add(const char *root, const tc_counters *delta, tc_counters *after);
/* Sets one counter (the cache size after a cleanup). */
int tc_stats_set(const char *root, int counter, uint64_t value);
/* Reads the counters (all zero when there are none yet). */
void tc_stats_read(const char *root, tc_counters *out);
/* Resets the counters. */
int tc_stats_zero(const char *root);

#endif
