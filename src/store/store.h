/* store: the on-disk, content-addressed record store, and the only code
 * that touches files inside a cache directory.
 *
 *   <root>/v1/<target>/<u|m|t|g>/<2 hex>/<62 hex>   records (record.h):
 *                                                 units, modules, tasks, groups
 *   <root>/toolchain/<32 hex>                    compiler identity memos
 *   <root>/stats, <root>/stats.lock              counters (stats.h)
 *   <root>/taskcache.conf                        configuration (config.h)
 *   <root>/gc.lock, <root>/CACHEDIR.TAG
 *
 * Records are written to a temporary name in their own directory and
 * renamed into place, so readers take no locks and never see a partial
 * record. Nothing here ever fails a build: a record that cannot be read or
 * verified is a miss, one that cannot be written is skipped with a
 * warning. Every path below the root is opened one component at a time
 * without following symbolic links. Every hit refreshes the record's
 * modification time, the clock of LRU eviction.
 *
 * A remote tier (remote storage servers, src/remote) may stand behind the
 * records: a local miss is asked of the remote, whose record is verified
 * exactly like a local file and then kept locally; every record stored is
 * also queued for upload. Only records go to the remote: leases, gc,
 * verify and clear are local.
 *
 * store.c opens the store and reads and writes single files; walk.c visits
 * every record (count, gc, verify, clear). */
#ifndef TC_STORE_STORE_H
#define TC_STORE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "remote/remote.h"
#include "store/record.h"
#include "util/hash.h"

struct tc_counters;


typedef struct tc_store tc_store;

/* Opens (creating, mode 0700) the store at root. Never fails for I/O
 * reasons: an unusable directory gives a store that stores nothing, with
 * tc_store_warning() saying why. NULL only when out of memory. */
tc_store *tc_store_open(const char *root);
void tc_store_close(tc_store *st);

const char *tc_store_root(const tc_store *st);
/* Why records cannot be stored, or NULL. */
const char *tc_store_warning(const tc_store *st);

/* ---- records ---- */

/* Looks a record up locally and, on a miss when ask_remote, in the remote
 * tier. Returns 1 with its payload (malloc'd), or 0 for a miss; *bad is
 * set to 1 when a local record was there but did not verify (a remote one
 * is counted in the remote's figures). cancel (may be NULL): the build's
 * cancel flag; once raised, a remote lookup gives up (a miss, not counted
 * against the server) instead of waiting out a slow server's timeout. */
int tc_store_get(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                 int ask_remote, const volatile sig_atomic_t *cancel, char **payload,
                 size_t *len, int *bad);

/* Whether a valid record exists, locally or in the remote tier (reads and
 * verifies it). */
int tc_store_has(tc_store *st, const char *target, uint32_t kind, const tc_digest *key);

/* Whether a local record file of kind/key seems to be there: one stat,
 * reading and verifying nothing, for a build to order its work by (a
 * probable hit is read first, a probable miss compiled first). A wrong
 * answer costs time, never correctness: the read still decides. */
int tc_store_probe(tc_store *st, const char *target, uint32_t kind, const tc_digest *key);

/* Looks up in the remote, several at once (TC_REMOTE_READERS), the records
 * of keys[0..n) the local store lacks, keeping those that verify locally
 * (as tc_store_get does one at a time): a machine with an empty cache pays
 * about one round trip per TC_REMOTE_READERS records instead of one per
 * record. state[i] receives TC_PREFETCH_LOCAL (a local file: not asked),
 * TC_PREFETCH_FETCHED (now local) or TC_PREFETCH_ASKED (not found, or the
 * remote failed: a miss, which tc_store_get need not ask again). Returns
 * how many were asked (0 without a remote). cancel: as for tc_store_get. */
enum { TC_PREFETCH_LOCAL = 0, TC_PREFETCH_FETCHED = 1, TC_PREFETCH_ASKED = 2 };
size_t tc_store_prefetch(tc_store *st, const char *target, uint32_t kind, const tc_digest *keys,
                         size_t n, const volatile sig_atomic_t *cancel, uint8_t *state);

/* Stores a record, and queues it for the remote tier. Returns the number
 * of bytes written locally, or -1 when it could not be stored there (the
 * store's warning then says why). */
long long tc_store_put(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                       const void *payload, size_t len);

/* The size limit: <root>/taskcache.conf "max_size", $TASKCACHE_MAXSIZE, or
 * 5 GiB; the setter overrides them. */
uint64_t tc_store_max_size(const tc_store *st);
void tc_store_set_max_size(tc_store *st, uint64_t bytes);

/* Whether the cache is shared by a group (taskcache.conf: shared = true). */
int tc_store_shared(const tc_store *st);
/* With a secret (trust.h): the key every record is authenticated with,
 * and the secret's name, which keys carry. NULL without one. */
const tc_hmac_key *tc_store_mac(const tc_store *st);
const char *tc_store_auth_id(const tc_store *st);

/* ---- the remote tier ---- */

/* The remote comes from $TASKCACHE_REMOTE, else "remote = SPEC" in
 * <root>/taskcache.conf (config.h says what a spec is); this replaces
 * both ("none": no remote). Not while builds use the store. 0, or -1
 * with why filled (a bad spec), or -2 with why filled (the password-file
 * it names cannot be read: no remote). */
int tc_store_set_remote(tc_store *st, const char *spec, char *why, size_t n);
/* The remote in use, in words (no credentials), or NULL. */
const char *tc_store_remote(const tc_store *st);
/* Why the remote configured is not used (a bad spec), or NULL. */
const char *tc_store_remote_problem(const tc_store *st);
/* The remote's first problem in this process, once (remote.h). */
int tc_store_take_remote_warning(tc_store *st, char *buf, size_t n);
/* Adds what the remote tier did since the last call (lookups, uploads) to
 * delta (TC_C_* counters, stats.h). The store keeps no statistics: its
 * callers add these to theirs (tc_stats_add). */
void tc_store_take_counts(tc_store *st, struct tc_counters *delta);
/* Waits for the uploads queued, at most timeout_s seconds (<0: the spec's
 * flush timeout). 0, or -1 with why filled when some could not be
 * written. What they did is in the next tc_store_take_counts. */
int tc_store_flush(tc_store *st, double timeout_s, char *why, size_t n);
/* Waits for the uploads as the remote's flush-timeout allows, and ends
 * the remote tier (tc_store_close does too): its last counts are in the
 * next tc_store_take_counts, which a caller that keeps statistics calls
 * before tc_store_close. */
void tc_store_end_remote(tc_store *st);
/* `taskcache remote check` (remote.h). -1 when there is no remote. */
int tc_store_check_remote(tc_store *st, tc_remote_check_result *out);

/* ---- compile leases ---- */

typedef enum tc_lease {
    TC_LEASE_TAKEN,    /* ours until tc_store_unlock */
    TC_LEASE_BUSY,     /* another process holds it */
    TC_LEASE_NONE      /* locking is unavailable here: proceed without */
} tc_lease;

/* A compile lease on a record: an flock on <record>.lock, released when
 * the holder unlocks or dies. *fd is the lock to pass to tc_store_unlock
 * (-1 unless taken). Never blocks. */
tc_lease tc_store_lock(tc_store *st, const char *target, uint32_t kind, const tc_digest *key,
                       int *fd);
void tc_store_unlock(int fd);

/* ---- the other files of the cache ---- */

/* Reads <root>/<name>, or <root>/<dir>/<name> when dir is not NULL: a
 * regular file the cache trusts, of at most max bytes (it is not read
 * otherwise). Returns 0 with the contents (malloc'd, NUL-terminated), or
 * -1 with errno (ENOENT: there is none). */
int tc_store_read_file(tc_store *st, const char *dir, const char *name, size_t max, char **data,
                       size_t *len);
/* Replaces that file atomically, creating dir when missing. 0 or -1. */
int tc_store_write_file(tc_store *st, const char *dir, const char *name, const void *data,
                        size_t len);
/* Appends to <root>/<name> (created when missing): one write, which
 * concurrent appenders do not interleave. 0 or -1. */
int tc_store_append_file(tc_store *st, const char *name, const void *data, size_t len);
/* The size of the regular file <root>/<name>, or -1. */
int64_t tc_store_file_size(tc_store *st, const char *name);
/* Removes <root>/<name>. 0 (also when there was none) or -1. */
int tc_store_remove_file(tc_store *st, const char *name);
/* Takes an exclusive flock on <root>/<name>, created when missing. wait:
 * block until it is free, else return at once. Returns 0 with *fd (to
 * pass to tc_store_unlock), 1 when another process holds it, -1 when it
 * cannot be taken. */
int tc_store_lock_file(tc_store *st, const char *name, int wait, int *fd);

/* ---- walking every record (walk.c) ---- */

/* Verifies the local record of kind/key without counting it as used (its
 * time of last use stays): 1 valid, 0 invalid or absent, -1 when it cannot
 * be judged here (tc_record_check): another format's, or authenticated
 * with an HMAC under no secret or another secret than this store's. A
 * plain record verifies by its checksum in a cache with a secret too
 * (builds with the secret never read it: their keys differ). */
int tc_store_check(tc_store *st, const char *target, uint32_t kind, const tc_digest *key);

/* Reads and verifies every record (tc_store_check); counts (and with
 * remove_bad, removes) those that do not verify, special files named like
 * records among them. Records it cannot judge are neither counted nor
 * removed. 0, or -1 when the cache is unusable. */
int tc_store_verify(tc_store *st, int remove_bad, uint64_t *checked, uint64_t *bad);

/* Removes every record. 0 or -1. */
int tc_store_clear(tc_store *st);

/* The directory of each record kind, kind k's at index k - 1:
 * <root>/v1/<target>/<letter>/<2 hex>/<62 hex>, and the same on remotes. */
#define TC_STORE_KIND_DIRS "umtgc"

/* Counts records on disk, at index kind - 1: units, modules, tasks,
 * groups, canonical texts; and their bytes. */
void tc_store_count(tc_store *st, uint64_t counts[TC_REC_KINDS], uint64_t *bytes);

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
 * seconds (-1: none); removes stale temporaries, stale lock files, what an
 * interrupted clear left, and links and special files (FIFOs, sockets,
 * devices) planted anywhere in the cache. One cleaner at a time (gc.lock); a concurrent call
 * returns at once with skipped set. The caller records the outcome in the
 * statistics (tc_stats_after_gc). 0, or -1 when the cache is unusable. */
int tc_store_gc(tc_store *st, uint64_t max_bytes, int64_t older_than_s, tc_gc_result *out);

/* ---- for walk.c ---- */

/* Opens the directories parts[0..n) below the root one by one, never
 * following a link, creating missing ones when asked. A directory fd, or
 * -1 with errno. */
int tc_store_open_dir(tc_store *st, const char *const *parts, int n, int create);
/* Whether records can be written. */
int tc_store_writable(const tc_store *st);

#endif
