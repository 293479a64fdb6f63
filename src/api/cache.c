/* cache: the tc_cache handle, its statistics and its maintenance (gc,
 * verify, clear). The records themselves are the store's (src/store). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"
#include "store/config.h"
#include "store/stats.h"
#include "util/scratch.h"

static char *default_dir(void)
{
    const char *e = getenv("TASKCACHE_DIR");
    if (e && *e)
        return strdup(e);
    char *p = NULL;
    e = getenv("XDG_CACHE_HOME");
    if (e && *e && e[0] == '/')
        return asprintf(&p, "%s/taskcache", e) < 0 ? NULL : p;
    e = getenv("HOME");
    if (e && *e)
        return asprintf(&p, "%s/.cache/taskcache", e) < 0 ? NULL : p;
    return NULL;
}

tc_status tc_cache_open(const char *dir, tc_cache **out, tc_error *err)
{
    tc_clear_error(err);
    *out = NULL;
    tc_cache *c = calloc(1, sizeof *c);
    if (!c)
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    c->dir = dir && *dir ? strdup(dir) : default_dir();
    if (!c->dir) {
        free(c);
        return tc_set_error(err, TC_ERR_INVALID,
                         "no cache directory: set TASKCACHE_DIR or HOME, or pass one");
    }
    c->refs = 1;
    c->store = tc_store_open(c->dir);
    if (!c->store) {
        tc_cache_close(c);
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    }
    *out = c;
    return TC_OK;
}

void tc_cache_hold(tc_cache *c)
{
    if (c)
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

/* Adds to the statistics what the remote tier did outside any build
 * (uploads finish after the build that queued them). */
static void record_remote_counts(tc_store *st)
{
    tc_counters delta = {{0}};
    tc_store_take_counts(st, &delta);
    for (int i = 0; i < TC_NCOUNTERS; i++)
        if (delta.v[i]) {
            (void)tc_stats_add(st, &delta, NULL); /* statistics never fail anything */
            return;
        }
}

void tc_cache_release(tc_cache *c)
{
    /* acquire-release: the thread that frees sees every write made by the
     * calls that released before it */
    if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (c->store) { /* NULL when tc_cache_open ran out of memory */
        tc_store_end_remote(c->store);
        record_remote_counts(c->store);
    }
    tc_store_close(c->store);
    free(c->dir);
    free(c);
}

void tc_cache_close(tc_cache *c) { tc_cache_release(c); }

void tc_cache_count(tc_cache *c, int counter, uint64_t n)
{
    tc_counters delta = {{0}};
    delta.v[counter] = n;
    (void)tc_stats_add(c->store, &delta, NULL); /* statistics never fail anything */
}

const char *tc_cache_dir(const tc_cache *c) { return c->dir; }

const char *tc_cache_warning(const tc_cache *c) { return tc_store_warning(c->store); }

/* The table behind tc_stats_fields: every member of tc_stats, in the
 * order of TC_STATS_TABLE (a member the table lacks fails the assertion
 * below, a name tc_stats lacks fails offsetof). */
static const tc_stats_field stats_fields[] = {
#define TC_X(id, name, label, flags) {#name, label, offsetof(tc_stats, name), flags},
    TC_STATS_TABLE(TC_X)
#undef TC_X
};
_Static_assert(sizeof stats_fields / sizeof stats_fields[0] == sizeof(tc_stats) / sizeof(uint64_t),
               "every member of tc_stats has a row in TC_STATS_TABLE");

const tc_stats_field *tc_stats_fields(size_t *count)
{
    if (count)
        *count = sizeof stats_fields / sizeof stats_fields[0];
    return stats_fields;
}

static tc_status cache_stats(tc_cache *c, tc_stats *out, tc_error *err)
{
    tc_clear_error(err);
    tc_counters k;
    tc_stats_read(c->store, &k);
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < TC_NSTATS; i++)
        if (stats_fields[i].flags & TC_STATS_COUNTER)
            memcpy((char *)out + stats_fields[i].offset, &k.v[i], sizeof k.v[i]);
    out->max_size = tc_store_max_size(c->store);
    uint64_t counts[TC_REC_KINDS];
    tc_store_count(c->store, counts, &out->disk_bytes);
    out->unit_records = counts[TC_REC_UNIT - 1];
    out->module_records = counts[TC_REC_MODULE - 1];
    out->task_records = counts[TC_REC_TASK - 1];
    out->group_records = counts[TC_REC_GROUP - 1];
    return TC_OK;
}

tc_status tc_cache_zero_stats(tc_cache *c, tc_error *err)
{
    tc_clear_error(err);
    if (tc_stats_zero(c->store, 0) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot reset the statistics in %s", c->dir);
    return TC_OK;
}

uint64_t tc_cache_max_size(const tc_cache *c) { return tc_store_max_size(c->store); }

tc_status tc_parse_size(const char *s, uint64_t *bytes)
{
    return tc_config_parse_size(s, bytes) == 0 ? TC_OK : TC_ERR_INVALID;
}

void tc_cache_set_max_size(tc_cache *c, uint64_t bytes) { tc_store_set_max_size(c->store, bytes); }

static tc_status cache_gc(tc_cache *c, uint64_t max_bytes, int64_t older_than_seconds,
                         tc_gc_report *out, tc_error *err)
{
    tc_clear_error(err);
    tc_gc_result g;
    if (tc_store_gc(c->store, max_bytes ? max_bytes : tc_store_max_size(c->store),
                    older_than_seconds, &g) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot clean %s: %s", c->dir,
                            tc_store_warning(c->store) ? tc_store_warning(c->store)
                                                       : "the cache is not usable");
    tc_stats_after_gc(c->store, &g);
    /* builds killed or interrupted leave their scratch directories */
    (void)tc_scratch_remove_stale(TC_SCRATCH_PREFIX);
    if (out) {
        out->evicted_files = g.evicted_files;
        out->evicted_bytes = g.evicted_bytes;
        out->files = g.files_after;
        out->bytes = g.bytes_after;
        out->temps_removed = g.temps_removed;
        out->skipped = g.skipped;
    }
    return TC_OK;
}

static tc_status cache_verify(tc_cache *c, int remove_bad, uint64_t *checked, uint64_t *bad,
                             tc_error *err)
{
    tc_clear_error(err);
    uint64_t k = 0, b = 0;
    int rc = tc_store_verify(c->store, remove_bad, &k, &b);
    if (checked)
        *checked = k;
    if (bad)
        *bad = b;
    if (rc != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot read the records of %s: %s", c->dir,
                            tc_store_warning(c->store) ? tc_store_warning(c->store)
                                                       : strerror(errno));
    return TC_OK;
}

static tc_status cache_clear(tc_cache *c, tc_error *err)
{
    tc_clear_error(err);
    if (tc_store_clear(c->store) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot remove every record under %s", c->dir);
    if (tc_stats_zero(c->store, 1) != 0 && !tc_store_warning(c->store))
        return tc_set_error(err, TC_ERR_IO, "cannot reset the statistics in %s", c->dir);
    return TC_OK;
}

/* The maintenance calls can take a while (gc and verify read the whole
 * cache): like builds, they keep the handle alive until they return. */
tc_status tc_cache_stats(tc_cache *c, tc_stats *out, tc_error *err)
{
    tc_cache_hold(c);
    tc_status st = cache_stats(c, out, err);
    tc_cache_release(c);
    return st;
}

tc_status tc_cache_gc(tc_cache *c, uint64_t max_bytes, int64_t older_than_seconds,
                      tc_gc_report *out, tc_error *err)
{
    tc_cache_hold(c);
    tc_status st = cache_gc(c, max_bytes, older_than_seconds, out, err);
    tc_cache_release(c);
    return st;
}

tc_status tc_cache_verify(tc_cache *c, int remove_bad, uint64_t *checked, uint64_t *bad,
                          tc_error *err)
{
    tc_cache_hold(c);
    tc_status st = cache_verify(c, remove_bad, checked, bad, err);
    tc_cache_release(c);
    return st;
}

tc_status tc_cache_clear(tc_cache *c, tc_error *err)
{
    tc_cache_hold(c);
    tc_status st = cache_clear(c, err);
    tc_cache_release(c);
    return st;
}

/* ---- remote storage ------------------------------------------------------------------ */

tc_status tc_cache_set_remote(tc_cache *c, const char *spec, tc_error *err)
{
    tc_clear_error(err);
    char why[sizeof err->message];
    if (!spec)
        return tc_set_error(err, TC_ERR_INVALID, "no remote spec (\"none\" for none)");
    int rc = tc_store_set_remote(c->store, spec, why, sizeof why);
    if (rc != 0)
        return tc_set_error(err, rc == -2 ? TC_ERR_IO : TC_ERR_INVALID, "%s", why);
    return TC_OK;
}

const char *tc_cache_remote(const tc_cache *c) { return tc_store_remote(c->store); }

const char *tc_cache_remote_problem(const tc_cache *c) { return tc_store_remote_problem(c->store); }

tc_status tc_cache_flush(tc_cache *c, double timeout_seconds, tc_error *err)
{
    tc_clear_error(err);
    char why[sizeof err->message];
    tc_cache_hold(c);
    int rc = tc_store_flush(c->store, timeout_seconds, why, sizeof why);
    record_remote_counts(c->store); /* so that `taskcache stats` shows the uploads at once */
    tc_cache_release(c);
    return rc == 0 ? TC_OK : tc_set_error(err, TC_ERR_IO, "%s", why);
}

tc_status tc_cache_check_remote(tc_cache *c, tc_remote_report *out, tc_error *err)
{
    tc_clear_error(err);
    memset(out, 0, sizeof *out);
    out->server_bytes = out->server_records = -1;
    tc_remote_check_result r;
    tc_cache_hold(c);
    int rc = tc_store_check_remote(c->store, &r);
    tc_cache_release(c);
    if (rc != 0)
        return tc_set_error(err, TC_ERR_NOT_FOUND,
                            "no remote storage: give --remote URL, or set TASKCACHE_REMOTE or "
                            "'remote = URL' in %s/taskcache.conf",
                            c->dir);
    out->reachable = r.reachable;
    out->writable = r.writable;
    out->read_back = r.read_back;
    out->read_only = r.read_only;
    out->connect_seconds = r.connect_s;
    out->write_seconds = r.write_s;
    out->read_seconds = r.read_s;
    out->server_bytes = r.server_bytes;
    out->server_records = r.server_records;
    snprintf(out->server, sizeof out->server, "%s", r.server);
    snprintf(out->message, sizeof out->message, "%s", r.why);
    return TC_OK;
}
