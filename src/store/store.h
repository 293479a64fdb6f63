/* store: the on-disk, content-addressed record store.
 *
 *   <root>/v1/<target>/<u|m|t|g>/<2 hex>/<62 hex>   records (record.h):
 *                                                 units, modules, tasks, groups
 *   <root>/toolchain/                            compiler identity memos
 *   <root>/stats, <root>/stats.lock              counters (stats.h)
 *
 * Records are written to a temporary name in their own directory and
 * renamed into place, so readers take no locks and never see a partial
 * record. Nothing here ever fails a build: a record that cannot be read or
 * verified is a miss, one that cannot be written is skipped with a
 * warning. Symbolic links inside the cache are never followed. Every hit
 * refreshes the record's modification time, the clock of LRU eviction. */
#ifndef TC_STORE_STORE_H
#define TC_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "../util/hash.h"
#include "record.h"

typedef struct tc_store tc_store;

/* Opens (creating, mode 0700) the store at root. Never fails for I/O
 * reasons: an unusable directory gives a store that stores nothing, with
 * tc_store_warning() saying why. NULL only when out of memory. */
tc_store *tc_store_open(const char *root);
void tc_store_close(tc_store *st);

const char *tc_store_root(const tc_store *st);
/* Why records cannot be stored, or NULL. */
const char *tc_store_warning(const tc_store *st);

/* Looks a record up. Returns 1 with its payload (malloc'd), or 0 for a
 * miss; *bad is set to 1 when a record was there but did not verify. */
int tc_store_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                 char **payload, size_t *len, int *bad);

/* Whether a valid record exists (reads and verifies it). */
int tc_store_has(tc_store *st, const char *target, uint32_t kind, const tc_digest *key);

/* Stores a record. Returns the number of bytes written, or -1 when it
 * could not be stored (the store's warning then says why). */
long long tc_store_put(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                       const void *payload, size_t len);

/* Reads and verifies every record; counts (and with remove_bad, removes)
 * those that do not verify. */
int tc_store_verify(tc_store *st, int remove_bad, uint64_t *checked, uint64_t *bad);

/* Removes every record. 0 or -1. */
int tc_store_clear(tc_store *st);

/* Counts records on disk: units, modules, tasks, groups; and their bytes. */
void tc_store_count(tc_store *st, uint64_t counts[4], uint64_t *bytes);

/* The size limit: <root>/taskcache.conf "max_size", $TASKCACHE_MAXSIZE, or
 * 5 GiB; the setter overrides them. */
uint64_t tc_store_max_size(const tc_store *st);
void tc_store_set_max_size(tc_store *st, uint64_t bytes);
/* tc_parse_size (taskcache.h) reads the sizes of the configuration. */

/* A compile lease on a record: an flock on <record>.lock, released when
 * the holder unlocks or dies. Returns 0 with *fd when acquired, 1 when
 * another process holds it, -1 when locking is unavailable (proceed
 * without). Never blocks. */
int tc_store_lock(tc_store *st, const char *target, uint32_t kind, const tc_digest *key, int *fd);
void tc_store_unlock(int fd);

typedef struct tc_gc_result {
    uint64_t files_before, bytes_before;
    uint64_t evicted_files, evicted_bytes;
    uint64_t files_after, bytes_after;
    uint64_t temps_removed;   /* temporaries left by killed writers */
    int skipped;              /* another process was cleaning */
} tc_gc_result;

/* Evicts least-recently-used records (by modification time, refreshed on
 * every hit) over all tiers until the cache holds at most 90% of
 * max_bytes (0: no size limit), and every record older than older_than_s
 * seconds (-1: none); removes stale temporaries, stale lock files and
 * planted links. One cleaner at a time (gc.lock); a concurrent call
 * returns at once with skipped set. Updates the statistics (evictions, the
 * size estimate). 0, or -1 when the cache is unusable. */
int tc_store_gc(tc_store *st, uint64_t max_bytes, int64_t older_than_s, tc_gc_result *out);

#endif
