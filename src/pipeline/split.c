/* split: the split build. Groups the module's kernels into units, keys
 * every unit by its canonical text, serves what the cache has, compiles
 * the rest in parallel (one ptxas -c per unit) and links all objects in a
 * fixed order into one cubin. */
#define _GNU_SOURCE
#include "pipeline/split.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "link/elf.h"
#include "pipeline/payload.h"
#include "util/pool.h"
#include "ptx/units.h"
#include "toolchain/spawn.h"
#include "store/record.h"
#include "util/fs.h"
#include "util/map.h"

void tc_split_free(tc_ptx_job *j)
{
    for (size_t i = 0; i < j->nunits; i++) {
        tc_split_unit *x = &j->units[i];
        tc_unit_free(&x->u);
        tc_text_free(&x->map);
        free(x->path);
    }
    free(j->units);
    j->units = NULL;
    j->nunits = 0;
    tc_link_abandon(j->link); /* a build that failed before its link */
    j->link = NULL;
    j->linked = 0;
    tc_canon_memo_free(j->memo);
    j->memo = NULL;
}

static int explaining(const tc_ptx_job *j) { return j->s->call == TC_CALL_EXPLAIN; }

static int unit_tier(const tc_ptx_job *j) { return j->s->store && j->s->o->unit_tier; }

/* ---- planning ----------------------------------------------------------- */

int tc_split_plan(tc_ptx_job *j, uint32_t target)
{
    tc_slicer *sl = j->slicer;
    size_t n = tc_slicer_entry_count(sl);
    uint32_t *cost = malloc(n * sizeof *cost), *first = malloc(n * sizeof *first);
    uint64_t *hash = malloc(n * sizeof *hash);
    int rc = -1;
    if (!cost || !first || !hash)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const tc_ptx_stmt *st = tc_slicer_entry(sl, i);
        const tc_ptx_sym *y = &j->m.syms[st->sym];
        tc_digest d;
        tc_digest_of(y->name, y->len, &d);
        hash[i] = tc_digest_u64(&d);
        cost[i] = tc_slicer_entry_cost(sl, i);
    }
    size_t k = tc_plan_units(cost, hash, n, target, first);
    int md = tc_slicer_has_module_data(sl);
    j->units = calloc(k + (size_t)md, sizeof *j->units);
    if (!j->units)
        goto done;
    j->nunits = k + (size_t)md;
    if (md)
        j->units[0].is_module_data = 1;
    for (size_t u = 0; u < k; u++) {
        tc_split_unit *x = &j->units[u + (size_t)md];
        x->first = first[u];
        x->count = (uint32_t)((u + 1 < k ? first[u + 1] : n) - first[u]);
    }
    rc = 0;
done:
    free(cost);
    free(first);
    free(hash);
    return rc;
}

static int emit(tc_ptx_job *j, tc_split_unit *x, tc_text *t)
{
    x->kind = TC_OUT_OBJECT;
    if (x->is_module_data) {
        if (tc_slicer_module_data_whole_program(j->slicer))
            x->kind = TC_OUT_EWP;
        return tc_slicer_emit_module_data(j->slicer, t);
    }
    uint32_t *idx = malloc(x->count * sizeof *idx);
    if (!idx)
        return -1;
    for (uint32_t i = 0; i < x->count; i++)
        idx[i] = x->first + i;
    int whole_program = 0;
    int rc = tc_slicer_emit_unit(j->slicer, idx, x->count, t, &whole_program);
    free(idx);
    x->kind = whole_program && j->s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM ? TC_OUT_EWP
                                                                               : TC_OUT_OBJECT;
    return rc;
}

/* ---- unit records --------------------------------------------------------- */

/* The unit's kernels with their metadata, resources from its compiler log. */
static tc_entry_info *unit_entries(tc_ptx_job *j, const tc_split_unit *x)
{
    tc_entry_info *e = calloc(x->count ? x->count : 1, sizeof *e);
    if (!e)
        return NULL;
    uint32_t k = 0;
    for (; k < x->count; k++)
        if (tc_entry_from_stmt(&j->m, tc_slicer_entry(j->slicer, x->first + k), &e[k]) != 0)
            break;
    if (k == x->count && tc_entries_take_resources(e, x->count, x->u.log.data ? x->u.log.data : "",
                                                   x->u.log.len) == 0)
        return e;
    tc_entries_free(e, k);
    return NULL;
}

static void store_unit(tc_ptx_job *j, tc_split_unit *x)
{
    tc_unit *u = &x->u;
    if (!(u->entries = unit_entries(j, x)))
        return;
    u->nentries = x->count;
    tc_payload_write_unit(j->s, TC_REC_UNIT, NULL, u);
}

/* ---- keys and lookups -------------------------------------------------------- */

static tc_unit *unit_at(void *ctx, size_t i) { return &((tc_ptx_job *)ctx)->units[i].u; }

static tc_pool_step canon_function(void *ctx, size_t i)
{
    (void)tc_canon_memo_fill(((tc_ptx_job *)ctx)->memo, i); /* else made again later */
    return TC_POOL_DONE;
}

/* The canonical texts of the functions units hold, from the memo of an
 * earlier build (canon_memo.h) or made, on -j threads: making them is most
 * of what keying costs (a 250-kernel module on 2 cores: 10-15 ms of a 50 ms
 * build that compiles nothing), and each is independent of the others.
 * Units are then assembled from them one after another (the slicer's walk
 * is single-threaded). */
static tc_status canon_functions(tc_ptx_job *j)
{
    size_t n = tc_slicer_function_count(j->slicer);
    if (!(j->memo = tc_canon_memo_open(j->s, &j->m, j->slicer)))
        return TC_ERR_NOMEM;
    if (tc_pool_run_range(n, j->s->o->jobs, canon_function, j) != 0)
        return TC_ERR_NOMEM;
    tc_canon_memo_save(j->memo);
    return TC_OK;
}

/* One unit's key: its text emitted (one thread at a time: the slicer's
 * walk is not thread-safe) and hashed (on any thread: hashing the 1.6 MB
 * of unit text of the generated 250-kernel module takes as long as
 * emitting it, 1.1 ms each). */
static tc_pool_step key_unit(void *ctx, size_t i)
{
    tc_ptx_job *j = ctx;
    tc_session *s = j->s;
    tc_split_unit *x = &j->units[i];
    tc_unit *u = &x->u;
    char mode[96];
    pthread_mutex_lock(&j->emit_lock);
    int rc = emit(j, x, &x->map);
    pthread_mutex_unlock(&j->emit_lock);
    if (rc != 0 || x->map.text.oom ||
        tc_key_unit(&s->kc,
                    tc_session_unit_mode(s, x->kind, x->map.text.data, x->map.text.len, mode,
                                         sizeof mode),
                    x->map.text.data, x->map.text.len, &u->key) != 0) {
        atomic_store(&j->keying_failed, 1);
        return TC_POOL_DONE;
    }
    tc_digest_hex(&u->key, u->hex);
    x->cost = x->map.text.len;
    /* Only the line map is kept: a miss's text is made again when it
     * compiles. Keeping every text until then cost a copy of each shared
     * helper per unit (a 20,000-statement helper called by 1,000 kernels:
     * 540 MB for an 825 KB input). */
    tc_sb_free(&x->map.text);
    return TC_POOL_DONE;
}

static tc_status key_units(tc_ptx_job *j)
{
    tc_session *s = j->s;
    tc_status st = canon_functions(j);
    if (st != TC_OK)
        return st;
    if (tc_pool_run_range(j->nunits, s->o->jobs, key_unit, j) != 0 ||
        atomic_load(&j->keying_failed))
        return TC_ERR_NOMEM;
    if (explaining(j))
        for (size_t i = 0; i < j->nunits; i++)
            j->units[i].u.hit =
                unit_tier(j) && tc_store_has(s->store, s->o->arch, TC_REC_UNIT, &j->units[i].u.key);
    return TC_OK;
}

/* Which units' records seem to be there (x->expect_hit): those the remote
 * tier fetched, and local files, found with one stat each. Only the order
 * of the work depends on it. */
static void expect_hits(tc_ptx_job *j)
{
    tc_session *s = j->s;
    if (!unit_tier(j))
        return;
    uint8_t *remote = tc_session_prefetch(s, TC_REC_UNIT, unit_at, j, j->nunits);
    for (size_t i = 0; i < j->nunits; i++) {
        tc_split_unit *x = &j->units[i];
        x->expect_hit = remote ? remote[i] != TC_PREFETCH_ASKED
                               : tc_store_probe(s->store, s->o->arch, TC_REC_UNIT, &x->u.key);
    }
    free(remote);
}

/* ---- parallel compilation ------------------------------------------------------ */

/* How long a unit waits for another process that holds its lease before
 * compiling it anyway: a live but stuck holder never blocks us forever (a
 * dead one releases the lease at once). */
#define LEASE_WAIT_SECONDS 300.0

/* What the trace calls a unit: its first kernel, and how many more. */
static void unit_label(const tc_ptx_job *j, const tc_split_unit *x, char *buf, size_t n)
{
    if (x->is_module_data || !x->count) {
        snprintf(buf, n, "module data");
        return;
    }
    const tc_ptx_stmt *st = tc_slicer_entry(j->slicer, x->first);
    const tc_ptx_sym *sym = st && st->sym >= 0 ? &j->m.syms[st->sym] : NULL;
    int len = sym ? (int)(sym->len < 120 ? sym->len : 120) : 1;
    if (x->count > 1)
        snprintf(buf, n, "%.*s (+%u more)", len, sym ? sym->name : "?", x->count - 1);
    else
        snprintf(buf, n, "%.*s", len, sym ? sym->name : "?");
}

/* Compiles the unit's text as kind; for ptxas, from a scratch file
 * written here and removed once compiled, so that the scratch directory
 * holds the units being compiled, not all of them. */
static void compile_text(tc_ptx_job *j, tc_split_unit *x, tc_out_kind kind, const tc_sb *text)
{
    tc_session *s = j->s;
    tc_unit *u = &x->u;
    if (!s->in_process && !x->path) {
        char name[32];
        snprintf(name, sizeof name, "unit%zu.ptx", (size_t)(x - j->units));
        if (!(x->path = tc_path_join(s->scratch, name))) {
            u->spawn_failed = ENOMEM;
            u->exit_code = -1;
            return;
        }
    }
    if (!s->in_process && tc_write_file(x->path, text->data, text->len) != 0) {
        u->write_failed = errno ? errno : EIO;
        u->exit_code = -1;
        return;
    }
    char label[160];
    unit_label(j, x, label, sizeof label);
    if (tc_session_compile(s, kind, label, text->data, text->len, x->path, &u->object, &u->log,
                           &u->exit_code) != 0) {
        u->spawn_failed = errno ? errno : EIO;
        u->exit_code = -1;
    }
    if (!s->in_process)
        unlink(x->path);
}

static void compile_unit(tc_ptx_job *j, tc_split_unit *x)
{
    tc_unit *u = &x->u;
    /* the text again, as keyed (emitting is deterministic); the slicer is
     * one for all workers */
    tc_text t;
    memset(&t, 0, sizeof t);
    pthread_mutex_lock(&j->emit_lock);
    int rc = emit(j, x, &t);
    pthread_mutex_unlock(&j->emit_lock);
    if (rc != 0 || t.text.oom) {
        u->spawn_failed = ENOMEM;
        u->exit_code = -1;
    } else {
        compile_text(j, x, x->kind, &t.text);
    }
    /* ptxas refuses some units in whole-program mode ("Internal error:
     * unexpected reloc" on some, restrictions on others) that it compiles
     * relocatable: same text, same compiler, same outcome, so falling back
     * keeps the result a function of the key. */
    if (x->kind == TC_OUT_EWP && u->exit_code > 0 && u->log.data &&
        (strstr(u->log.data, "Internal error") ||
         strstr(u->log.data, "extensible whole program"))) {
        tc_sb_reset(&u->object);
        tc_sb_reset(&u->log);
        compile_text(j, x, TC_OUT_OBJECT, &t.text);
    }
    tc_text_free(&t);
    u->compiled = 1;
    /* Published at once: another process waiting on this unit's lease gets
     * it now, and a build killed later keeps what it finished. */
    if (u->exit_code == 0 && !u->spawn_failed && unit_tier(j))
        store_unit(j, x);
}

/* ---- the link, fed as units get ready ------------------------------------------- */

/* Adds to the link, in link order, every unit whose object is ready and
 * all of whose predecessors were added: a worker calls it when it made
 * unit `ready` so, and adding objects overlaps the compiles and reads
 * still running. One thread adds at a time; a worker that finds another
 * adding goes back to its work, and the one adding looks again for units
 * made ready meanwhile before it leaves. Until the linker's prewarm has
 * loaded it, workers leave the adding for later (the first add would wait
 * for the loading); at_end, the build's thread adds the rest, every unit
 * being ready then. */
static void feed_link(tc_ptx_job *j, size_t ready, int at_end)
{
    if (ready < j->nunits)
        atomic_store(&j->units[ready].ready, 1);
    for (;;) {
        if (at_end)
            pthread_mutex_lock(&j->link_lock);
        else if (pthread_mutex_trylock(&j->link_lock) != 0)
            return;
        int adding = j->link && (at_end || j->linked || !tc_linker_prewarm_running());
        while (adding && j->linked < j->nunits &&
               (at_end || atomic_load(&j->units[j->linked].ready))) {
            const tc_unit *u = &j->units[j->linked++].u;
            tc_link_add(j->link, u->object.data, u->object.len); /* failing: the finish says */
        }
        size_t next = j->linked;
        pthread_mutex_unlock(&j->link_lock);
        if (!adding || next >= j->nunits || !atomic_load(&j->units[next].ready))
            return;
    }
}

/* One unit: read its record when it seems to be there; else (or when
 * that fails) compile it, unless another process holds its lease, in
 * which case wait until that process has published it. */
static tc_pool_step process_unit(void *ctx, size_t i)
{
    tc_ptx_job *j = ctx;
    tc_split_unit *x = &j->units[i];
    if (x->expect_hit) {
        x->expect_hit = 0; /* once: a unit that must wait comes back here */
        if ((x->u.hit = tc_payload_read_unit(j->s, TC_REC_UNIT, &x->u, 1))) {
            feed_link(j, i, 0);
            return TC_POOL_DONE;
        }
    }
    int fd = -1;
    tc_lease lease = TC_LEASE_NONE;
    if (unit_tier(j))
        lease = tc_store_lock(j->s->store, j->s->o->arch, TC_REC_UNIT, &x->u.key, &fd);
    /* someone published it while we were getting here? */
    if (lease != TC_LEASE_NONE && tc_payload_read_unit(j->s, TC_REC_UNIT, &x->u, 0)) {
        x->u.hit = x->u.waited = 1;
        tc_store_unlock(fd);
        tc_session_progress_step(j->s);
        feed_link(j, i, 0);
        return TC_POOL_DONE;
    }
    if (lease == TC_LEASE_BUSY) {
        double now = tc_now();
        if (!x->deferred_since)
            x->deferred_since = now;
        if (now - x->deferred_since < LEASE_WAIT_SECONDS)
            return TC_POOL_LATER;
    }
    compile_unit(j, x);
    tc_store_unlock(fd);
    tc_session_progress_step(j->s);
    tc_unit *u = &x->u;
    if (u->exit_code == 0 && !u->spawn_failed && !u->write_failed)
        feed_link(j, i, 0);
    return TC_POOL_DONE;
}

/* The host (or the command line, on Ctrl-C) cancelled the build. */
static int cancelled(void *ctx) { return tc_options_cancelled(((tc_ptx_job *)ctx)->s->o); }

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Reads and compiles every unit on -j threads: the probable misses first,
 * largest first, so the longest compile starts early (LPT scheduling);
 * then the probable hits in link order, read while those compile. The
 * link is started now and fed as units get ready. */
static tc_status process_units(tc_ptx_job *j)
{
    tc_session *s = j->s;
    size_t cap = j->nunits ? j->nunits : 1, nmiss = 0, ntodo = 0;
    size_t *todo = malloc(cap * sizeof *todo);
    uint64_t *order = malloc(cap * sizeof *order);
    if (!todo || !order || !(j->link = tc_session_link_start(s))) {
        free(todo);
        free(order);
        return TC_ERR_NOMEM;
    }
    /* sorted by (inverted cost, index) */
    for (size_t i = 0; i < j->nunits; i++) {
        if (j->units[i].expect_hit)
            continue;
        uint64_t c = j->units[i].cost > UINT32_MAX ? UINT32_MAX : j->units[i].cost;
        order[nmiss++] = (uint64_t)(UINT32_MAX - c) << 32 | i;
    }
    qsort(order, nmiss, sizeof *order, cmp_u64);
    for (size_t i = 0; i < nmiss; i++)
        todo[ntodo++] = (size_t)(order[i] & UINT32_MAX);
    free(order);
    for (size_t i = 0; i < j->nunits; i++)
        if (j->units[i].expect_hit)
            todo[ntodo++] = i;
    double t = tc_now();
    tc_session_progress_begin(s, nmiss);
    tc_pool_work w = {todo, ntodo, s->o->jobs, process_unit, cancelled, j};
    int rc = tc_pool_run(&w);
    free(todo);
    if (rc != 0)
        return TC_ERR_NOMEM;
    if (tc_options_cancelled(s->o)) /* what compiled is stored; nothing else is */
        return tc_session_fail(s, TC_ERR_CANCELLED, "the host cancelled the build");
    s->r->report.seconds_compile = tc_now() - t;
    size_t compiled = 0, waited = 0, hits = 0;
    for (size_t i = 0; i < j->nunits; i++) {
        compiled += (size_t)j->units[i].u.compiled;
        waited += (size_t)j->units[i].u.waited;
        hits += (size_t)j->units[i].u.hit;
    }
    s->r->report.units_compiled = (uint32_t)compiled;
    s->r->report.unit_hits = (uint32_t)hits;
    s->delta.v[TC_C_COMPILES] += compiled;
    s->delta.v[TC_C_WAITED] += waited;
    s->delta.v[TC_C_UNIT_HITS] += hits;
    if (unit_tier(j))
        s->delta.v[TC_C_UNIT_MISSES] += j->nunits - hits;
    return TC_OK;
}

/* ---- entries, diagnostics, link -------------------------------------------------- */

static tc_status fill_entries(tc_ptx_job *j)
{
    tc_result *r = j->s->r;
    size_t n = tc_slicer_entry_count(j->slicer);
    r->entries = calloc(n ? n : 1, sizeof *r->entries);
    if (!r->entries)
        return TC_ERR_NOMEM;
    for (size_t ui = 0; ui < j->nunits; ui++) {
        tc_split_unit *x = &j->units[ui];
        for (uint32_t k = 0; k < x->count; k++) {
            size_t i = x->first + k;
            tc_entry_info *e = &r->entries[i];
            if (tc_entry_from_stmt(&j->m, tc_slicer_entry(j->slicer, i), e) != 0 ||
                tc_entry_set_key(&e->unit_key, x->u.hex) != 0)
                return TC_ERR_NOMEM;
            r->nentries = i + 1 > r->nentries ? i + 1 : r->nentries;
            e->unit = (uint32_t)ui;
            e->cached = x->u.hit;
            for (size_t m = 0; m < x->u.nentries; m++) {
                const tc_entry_info *had = &x->u.entries[m];
                if (!strcmp(had->name, e->name)) {
                    e->registers = had->registers;
                    e->shared_bytes = had->shared_bytes;
                    e->stack_bytes = had->stack_bytes;
                    e->spill_store_bytes = had->spill_store_bytes;
                    e->spill_load_bytes = had->spill_load_bytes;
                }
            }
        }
        if (x->u.log.len &&
            tc_entries_take_resources(&r->entries[x->first], x->count, x->u.log.data,
                                      x->u.log.len) != 0)
            return TC_ERR_NOMEM;
    }
    return TC_OK;
}

/* Explain also reports each entry's own slice key. */
static tc_status slice_keys(tc_ptx_job *j)
{
    tc_result *r = j->s->r;
    for (size_t i = 0; i < r->nentries; i++) {
        tc_text t;
        memset(&t, 0, sizeof t);
        uint32_t idx = (uint32_t)i;
        tc_digest d;
        char hex[TC_DIGEST_HEX_LEN + 1];
        int whole_program = 0;
        int rc = tc_slicer_emit_unit(j->slicer, &idx, 1, &t, &whole_program);
        int ewp = whole_program && j->s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM;
        char mode[96];
        if (rc == 0)
            rc = tc_key_unit(&j->s->kc,
                             tc_session_unit_mode(j->s, ewp ? TC_OUT_EWP : TC_OUT_OBJECT,
                                                  t.text.data, t.text.len, mode, sizeof mode),
                             t.text.data, t.text.len, &d);
        tc_text_free(&t);
        if (rc != 0)
            return TC_ERR_NOMEM;
        tc_digest_hex(&d, hex);
        if (tc_entry_set_key(&r->entries[i].slice_key, hex) != 0)
            return TC_ERR_NOMEM;
    }
    return TC_OK;
}

typedef struct {
    tc_map names;      /* .const variable -> index */
    uint64_t *value;   /* per index: its offset in the image */
    uint8_t *found;
} const_walk;

static int image_const(void *ctx, const tc_elf_sym *y)
{
    const_walk *w = ctx;
    uint32_t *i;
    if (y->shndx && y->section_len == 13 && !memcmp(y->section, ".nv.constant3", 13) &&
        (i = tc_map_get(&w->names, y->name, y->len))) {
        w->found[*i] = 1;
        w->value[*i] = y->value;
    }
    return 0;
}

/* Whole-program units read .const data at the offsets the slicer laid out
 * (their code has no relocation for it): the image must have every .const
 * variable exactly there, or the build fails and stores nothing. */
static tc_status check_const_layout(tc_ptx_job *j)
{
    tc_session *s = j->s;
    const char *name;
    size_t len, n = 0;
    uint64_t want;
    while (tc_slicer_const_var(j->slicer, n, &name, &len, &want) == 0)
        n++;
    if (!n)
        return TC_OK;
    const_walk w;
    memset(&w, 0, sizeof w);
    w.value = calloc(n, sizeof *w.value);
    w.found = calloc(n, 1);
    tc_status st = TC_ERR_NOMEM;
    for (size_t i = 0; w.value && w.found && i < n; i++) {
        tc_slicer_const_var(j->slicer, i, &name, &len, &want);
        if (tc_map_put(&w.names, name, len, (uint32_t)i) < 0)
            goto done;
    }
    if (!w.value || !w.found)
        goto done;
    int readable = tc_elf_symbols((const unsigned char *)s->r->image, s->r->image_len,
                                  image_const, &w) == 0;
    st = TC_OK;
    for (size_t i = 0; i < n && st == TC_OK; i++) {
        tc_slicer_const_var(j->slicer, i, &name, &len, &want);
        if (!readable || !w.found[i])
            st = tc_session_fail(s, TC_ERR_LINK,
                                 "whole-program units: the linked image has no __constant__ "
                                 "variable '%.*s'; build without --whole-program-units",
                                 (int)len, name);
        else if (w.value[i] != want)
            st = tc_session_fail(s, TC_ERR_LINK,
                                 "whole-program units: the linked image has __constant__ "
                                 "variable '%.*s' at offset %llu, the units read it at %llu; "
                                 "build without --whole-program-units",
                                 (int)len, name, (unsigned long long)w.value[i],
                                 (unsigned long long)want);
    }
    if (st != TC_OK) {
        free(s->r->image);
        s->r->image = NULL;
        s->r->image_len = 0;
    }
done:
    tc_map_free(&w.names);
    free(w.value);
    free(w.found);
    return st;
}

static tc_status link_units(tc_ptx_job *j)
{
    feed_link(j, j->nunits, 1);
    tc_link_job *lj = j->link;
    j->link = NULL;
    tc_status st = tc_session_link_finish(j->s, lj);
    return st == TC_OK ? check_const_layout(j) : st;
}

/* Drops the repeats of a diagnostic about the input ("NAME:LINE: error:
 * ...", "NAME: warning: adjusting per thread register count..."): a
 * statement every unit holds (the .version line, a module variable) is
 * reported by every unit's compile, and ptxas says it once of the module.
 * Other lines (continuations of a report) are kept as they are. */
static void drop_repeated_diagnostics(tc_sb *w, const char *name)
{
    size_t nlen = strlen(name), keep = 0;
    tc_map seen = {0};
    for (size_t at = 0; at < w->len;) {
        const char *line = w->data + at;
        const char *nl = memchr(line, '\n', w->len - at);
        size_t n = nl ? (size_t)(nl + 1 - line) : w->len - at;
        int about_input = n > nlen + 1 && !memcmp(line, name, nlen) && line[nlen] == ':';
        /* moved first: the map keeps pointers, and what is kept stays put */
        memmove(w->data + keep, line, n);
        if (!about_input || tc_map_put(&seen, w->data + keep, n, 1) != 0)
            keep += n; /* the first time (or no memory to tell) */
        at += n;
    }
    w->len = keep;
    if (w->data)
        w->data[keep] = '\0';
    tc_map_free(&seen);
}

/* The diagnostics of every unit (replayed from records for hits), mapped
 * to input lines, into j->warnings; compile errors fail the build. */
static tc_status unit_diagnostics(tc_ptx_job *j)
{
    tc_session *s = j->s;
    tc_status st = TC_OK;
    size_t errors = 0;
    for (size_t i = 0; i < j->nunits; i++) {
        tc_split_unit *x = &j->units[i];
        tc_unit *u = &x->u;
        if (u->write_failed) {
            st = tc_session_fail(s, TC_ERR_IO, "cannot write %s: %s", x->path,
                                 strerror(u->write_failed));
            continue;
        }
        if (u->spawn_failed) {
            st = tc_session_fail(s, TC_ERR_TOOLCHAIN, "cannot run %s: %s",
                                 s->in_process ? "the in-process compiler" : s->ptxas,
                                 strerror(u->spawn_failed));
            continue;
        }
        size_t e = tc_ptxas_diagnostics(u->log.data ? u->log.data : "", u->log.len, &x->map,
                                        s->name, &j->warnings);
        if (u->exit_code != 0 && !e) {
            char how[64];
            tc_describe_exit(u->exit_code, how, sizeof how);
            tc_sb_printf(&j->warnings, "%s: error: ptxas %s\n", s->name, how);
            e = 1;
        }
        errors += e;
    }
    drop_repeated_diagnostics(&j->warnings, s->name);
    tc_sb_append(&s->r->diag, j->warnings.data, j->warnings.len);
    return st == TC_OK && errors ? TC_ERR_COMPILE : st;
}

tc_status tc_split_build(tc_ptx_job *j)
{
    tc_session *s = j->s;
    tc_result *r = s->r;
    tc_status st = key_units(j);
    if (st != TC_OK)
        return st;
    r->report.split = 1;
    r->report.in_process = s->in_process;
    r->report.nvjitlink = s->linker.kind == TC_LINKER_NVJITLINK;
    r->report.whole_program_units = s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM;
    r->report.units = (uint32_t)j->nunits;
    r->report.entries = (uint32_t)tc_slicer_entry_count(j->slicer);
    if (explaining(j)) {
        for (size_t i = 0; i < j->nunits; i++)
            r->report.unit_hits += (uint32_t)j->units[i].u.hit;
        if ((st = fill_entries(j)) != TC_OK)
            return st;
        return slice_keys(j);
    }
    expect_hits(j);
    if ((st = process_units(j)) != TC_OK)
        return st;
    if ((st = unit_diagnostics(j)) != TC_OK)
        return st;
    if ((st = fill_entries(j)) != TC_OK)
        return st;
    return link_units(j);
}
