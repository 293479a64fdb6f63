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
 * warning. Symbolic links inside the cache are never followed. */
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

/* Removes every record. 0 or -1. */
int tc_store_clear(tc_store *st);

/* Counts records on disk: units, modules, tasks, groups; and their bytes. */
void tc_store_count(tc_store *st, uint64_t counts[4], uint64_t *bytes);

#endif
