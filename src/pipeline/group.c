/* group: tc_lookup_group. A group manifest, stored by tc_build_tasks under
 * a key the host computed before its front end, names the group's task
 * records in order; it serves the whole result, without any codegen, once
 * every record it names is found and verified. Anything less is a miss:
 * the host runs its front end and tc_build_tasks. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "pipeline/payload.h"
#include "pipeline/tasks.h"
#include "store/record.h"

typedef struct manifest {
    tc_digest *keys;
    char **names;
    size_t n;
} manifest;

static int decode_manifest(void *ctx, char **payload, size_t len)
{
    manifest *m = ctx;
    return tc_payload_decode_group(*payload, len, &m->keys, &m->names, &m->n);
}

static void undo_manifest(void *ctx) { (void)ctx; /* a failed decode keeps nothing */ }

static tc_status lookup(tc_taskset *t, tc_session *s, const char *version, const void *key,
                        size_t len)
{
    tc_status st = tc_session_prepare(s, 1); /* a group links its tasks */
    if (st != TC_OK)
        return st;
    tc_digest g;
    char mode[160];
    if (tc_key_group(&s->kc, tc_taskset_mode(s, mode, sizeof mode), version, key, len, &g) != 0)
        return TC_ERR_NOMEM;
    if (!s->store || !s->o->unit_tier)
        return TC_ERR_NOT_FOUND;
    manifest m = {NULL, NULL, 0};
    if (!tc_session_read_record(s, TC_REC_GROUP, &g, 1, decode_manifest, undo_manifest, &m))
        return TC_ERR_NOT_FOUND;
    int ok = tc_taskset_init(t, s, m.n) == 0;
    for (size_t i = 0; i < m.n; i++) {
        if (ok) {
            t->units[i].u.key = m.keys[i];
            tc_digest_hex(&m.keys[i], t->units[i].u.hex);
            t->units[i].name = m.names[i];
        } else {
            free(m.names[i]);
        }
    }
    free(m.keys);
    free(m.names);
    if (!ok)
        return TC_ERR_NOMEM;
    if (tc_taskset_read(t) != 0)
        return TC_ERR_NOMEM;
    /* accepted only once every task record is found and verified */
    for (size_t i = 0; i < t->n; i++)
        if (!t->units[i].u.hit)
            return TC_ERR_NOT_FOUND;
    if (tc_taskset_module_key(t, version) != 0)
        return TC_ERR_NOMEM;
    s->r->report.unit_hits = (uint32_t)t->n;
    s->r->report.group_hit = 1;
    if (s->o->module_tier && tc_taskset_module_hit(t)) {
        s->r->report.module_hit = 1;
    } else {
        /* all tasks are there: linking them is cheap; keep the result */
        if (!tc_session_files_ready(s))
            return TC_ERR_IO;
        /* records that verify but no longer link together (one was
         * regenerated since) are stale, not an error: tc_build_tasks
         * regenerates them */
        if ((st = tc_taskset_link(t)) != TC_OK)
            return st == TC_ERR_LINK ? TC_ERR_NOT_FOUND : st;
        if (s->o->module_tier)
            tc_taskset_store_module(t);
    }
    return tc_taskset_fill_result(t);
}

tc_status tc_lookup_group(tc_cache *cache, const tc_options *opts, const char *version,
                          const void *group_key, size_t group_key_size, tc_result **out)
{
    if (!out)
        return TC_ERR_INVALID;
    *out = NULL;
    if (!opts || !version || (!group_key && group_key_size) || opts->output != TC_OUTPUT_IMAGE)
        return TC_ERR_INVALID;
    tc_session s;
    if (tc_session_begin(&s, TC_CALL_LOOKUP, cache, opts, "group") != 0)
        return TC_ERR_NOMEM;
    tc_taskset t;
    memset(&t, 0, sizeof t);
    tc_status st = lookup(&t, &s, version, group_key, group_key_size);
    if (st == TC_OK)
        s.delta.v[TC_C_GROUP_HITS]++;
    else if (st == TC_ERR_NOT_FOUND && s.store && opts->unit_tier)
        s.delta.v[TC_C_GROUP_MISSES]++;
    tc_taskset_free(&t);
    tc_result *r = tc_session_finish(&s, st);
    if (st == TC_ERR_NOT_FOUND) {
        /* a miss is not an error: the host runs its front end */
        tc_result_free(r);
        return st;
    }
    *out = r; /* a hit, or an error and its diagnostics */
    return st;
}
