/* split: the split build. Groups the module's entries into units, keys
 * every unit by its canonical text, serves what the cache has, compiles the
 * rest in parallel (one ptxas -c per unit) and links all objects in a fixed
 * order into one cubin. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compile/ptxas.h"
#include "../link/elf.h"
#include "../ptx/units.h"
#include "../store/record.h"
#include "../util/fs.h"
#include "../util/map.h"
#include "build.h"
#include "payload.h"

void tc_build_units_free(tc_build_ctx *b)
{
    for (size_t i = 0; i < b->nunits; i++) {
        tc_unit *u = &b->units[i];
        tc_text_free(&u->map);
        free(u->path);
        tc_sb_free(&u->object);
        tc_sb_free(&u->log);
        for (size_t k = 0; k < u->nmeta; k++)
            tc_entry_clear(&u->meta[k]);
        free(u->meta);
    }
    free(b->units);
    b->units = NULL;
    b->nunits = 0;
}

/* ---- planning ----------------------------------------------------------- */

static int plan_units(tc_build_ctx *b)
{
    tc_slicer *s = b->slicer;
    size_t n = tc_slicer_entry_count(s);
    uint32_t *cost = malloc(n * sizeof *cost), *first = malloc(n * sizeof *first);
    uint64_t *hash = malloc(n * sizeof *hash);
    int rc = -1;
    if (!cost || !first || !hash)
        goto done;
    for (size_t i = 0; i < n; i++) {
        const tc_ptx_stmt *st = tc_slicer_entry(s, i);
        const tc_ptx_sym *y = &b->m.syms[st->sym];
        tc_digest d;
        tc_digest_of(y->name, y->len, &d);
        hash[i] = tc_digest_u64(&d);
        cost[i] = tc_slicer_entry_cost(s, i);
    }
    size_t k = tc_plan_units(cost, hash, n, b->o->unit_cost, first);
    int md = tc_slicer_has_module_data(s);
    b->units = calloc(k + (size_t)md, sizeof *b->units);
    if (!b->units)
        goto done;
    b->nunits = k + (size_t)md;
    if (md)
        b->units[0].is_md = 1;
    for (size_t u = 0; u < k; u++) {
        tc_unit *x = &b->units[u + (size_t)md];
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

static int emit(tc_build_ctx *b, tc_unit *u, tc_text *t)
{
    u->kind = TC_OUT_OBJECT;
    if (u->is_md) {
        if (tc_slicer_module_data_whole_program(b->slicer))
            u->kind = TC_OUT_EWP;
        return tc_slicer_emit_module_data(b->slicer, t);
    }
    uint32_t *idx = malloc(u->count * sizeof *idx);
    if (!idx)
        return -1;
    for (uint32_t i = 0; i < u->count; i++)
        idx[i] = u->first + i;
    int whole_program = 0;
    int rc = tc_slicer_emit_unit(b->slicer, idx, u->count, t, &whole_program);
    free(idx);
    u->kind = whole_program && b->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM ? TC_OUT_EWP
                                                                              : TC_OUT_OBJECT;
    return rc;
}

/* ---- unit records --------------------------------------------------------- */

static int decode_unit(void *ctx, const char *payload, size_t len)
{
    tc_unit *u = ctx;
    tc_object_payload o;
    if (tc_payload_decode_object(payload, len, &o) != 0)
        return -1;
    u->object = o.object;
    u->log = o.log;
    u->meta = o.entries;
    u->nmeta = o.nentries;
    tc_sb_free(&o.meta);
    return 0;
}

static void undo_unit(void *ctx)
{
    tc_unit *u = ctx;
    tc_sb_reset(&u->object);
    tc_sb_reset(&u->log);
    for (size_t k = 0; k < u->nmeta; k++)
        tc_entry_clear(&u->meta[k]);
    free(u->meta);
    u->meta = NULL;
    u->nmeta = 0;
}

/* Reads a unit's record; count_bad: whether a bad record counts in the
 * statistics (only the first look of a build counts). */
static int lookup_unit(tc_build_ctx *b, tc_unit *u, int count_bad)
{
    return tc_build_read_record(b, TC_REC_UNIT, &u->key, count_bad, decode_unit, undo_unit, u);
}

/* The unit's kernels with their metadata, resources from its ptxas log. */
static tc_entry_info *unit_entries(tc_build_ctx *b, const tc_unit *u)
{
    tc_entry_info *e = calloc(u->count ? u->count : 1, sizeof *e);
    if (!e)
        return NULL;
    uint32_t k = 0;
    for (; k < u->count; k++)
        if (tc_entry_from_stmt(&b->m, tc_slicer_entry(b->slicer, u->first + k), &e[k]) != 0)
            break;
    if (k == u->count && tc_build_resources_from_log(e, u->count, u->log.data ? u->log.data : "",
                                                     u->log.len) == 0)
        return e;
    for (uint32_t i = 0; i < k; i++)
        tc_entry_clear(&e[i]);
    free(e);
    return NULL;
}

static void store_unit(tc_build_ctx *b, tc_unit *u)
{
    tc_entry_info *entries = unit_entries(b, u);
    if (!entries)
        return;
    tc_sb p = TC_SB_INIT, e = TC_SB_INIT;
    tc_field_put(&p, TC_F_OBJECT, u->object.data, u->object.len);
    for (uint32_t i = 0; i < u->count; i++) {
        tc_sb_reset(&e);
        tc_entry_encode(&entries[i], &e);
        tc_field_put(&p, TC_F_ENTRY, e.data, e.len);
        tc_entry_clear(&entries[i]);
    }
    free(entries);
    if (u->log.len)
        tc_field_put(&p, TC_F_LOG, u->log.data, u->log.len);
    if (!p.oom)
        tc_build_count_put(b, tc_store_put(b->store, b->o->arch, TC_REC_UNIT, &u->key, p.data,
                                           p.len));
    tc_sb_free(&p);
    tc_sb_free(&e);
}

/* ---- keys and lookups -------------------------------------------------------- */

static tc_status key_units(tc_build_ctx *b)
{
    int use_cache = b->store && b->o->unit_tier;
    for (size_t i = 0; i < b->nunits; i++) {
        tc_unit *u = &b->units[i];
        if (emit(b, u, &u->map) != 0 ||
            tc_key_unit(&b->kc, tc_out_option(u->kind), u->map.text.data, u->map.text.len,
                        &u->key) != 0)
            return TC_ERR_NOMEM;
        tc_digest_hex(&u->key, u->hex);
        u->cost = u->map.text.len;
        if (b->explain) {
            u->hit = use_cache && tc_store_has(b->store, b->o->arch, TC_REC_UNIT, &u->key);
        } else if (use_cache && lookup_unit(b, u, 1)) {
            u->hit = 1;
            b->delta.v[TC_C_UNIT_HITS]++;
        } else {
            if (use_cache)
                b->delta.v[TC_C_UNIT_MISSES]++;
            char name[32];
            snprintf(name, sizeof name, "unit%zu.ptx", i);
            u->path = tc_path_join(b->scratch, name);
            if (!u->path)
                return TC_ERR_NOMEM;
            if (b->in_process)
                continue; /* compiled from memory: keep the text */
            if (tc_write_file(u->path, u->map.text.data, u->map.text.len) != 0)
                return tc_build_fail(b, TC_ERR_IO, "cannot write %s: %s", u->path,
                                     strerror(errno));
        }
        /* Only the line map is needed from here on. */
        tc_sb_free(&u->map.text);
    }
    return TC_OK;
}

/* ---- parallel compilation ------------------------------------------------------ */

typedef struct pool {
    tc_build_ctx *b;
    size_t *todo;   /* unit indices, largest first; deferred ones go back */
    size_t ntodo;   /* entries in todo */
    size_t next;
    size_t done;    /* units finished (compiled, failed or found) */
    size_t total;
    pthread_mutex_t lock;
} pool;

/* How long a unit waits for another process that holds its lease before
 * compiling it anyway: a live but stuck holder never blocks us forever (a
 * dead one releases the lease at once). */
#define LEASE_WAIT_SECONDS 300.0

static void compile_unit(tc_build_ctx *b, tc_unit *u)
{
    if (tc_build_compile(b, u->kind, u->map.text.data, u->map.text.len, u->path, &u->object,
                         &u->log, &u->exit_code) != 0) {
        u->spawn_failed = errno ? errno : EIO;
        u->exit_code = -1;
    }
    /* ptxas refuses some units in whole-program mode ("Internal error:
     * unexpected reloc" on some, restrictions on others) that it compiles
     * relocatable: same text, same compiler, same outcome, so falling back
     * keeps the result a function of the key. */
    if (u->kind == TC_OUT_EWP && u->exit_code > 0 && u->log.data &&
        (strstr(u->log.data, "Internal error") ||
         strstr(u->log.data, "extensible whole program"))) {
        tc_sb_reset(&u->object);
        tc_sb_reset(&u->log);
        if (tc_build_compile(b, TC_OUT_OBJECT, u->map.text.data, u->map.text.len, u->path,
                             &u->object, &u->log, &u->exit_code) != 0) {
            u->spawn_failed = errno ? errno : EIO;
            u->exit_code = -1;
        }
    }
    tc_sb_free(&u->map.text); /* only the line map is needed from here on */
    u->compiled = 1;
    /* Published at once: another process waiting on this unit's lease gets
     * it now, and a build killed later keeps what it finished. */
    if (u->exit_code == 0 && !u->spawn_failed && b->store && b->o->unit_tier)
        store_unit(b, u);
}

/* One unit: compile it, unless another process holds its lease, in which
 * case it is deferred and retried until that process has published it. 0
 * done, 1 deferred. */
static int process_unit(tc_build_ctx *b, tc_unit *u)
{
    int fd = -1, lease = -1;
    if (b->store && b->o->unit_tier)
        lease = tc_store_lock(b->store, b->o->arch, TC_REC_UNIT, &u->key, &fd);
    if (lease == 1 || lease == 0) {
        /* someone published it while we were getting here? */
        if (lookup_unit(b, u, 0)) {
            u->hit = u->waited = 1;
            tc_store_unlock(fd);
            return 0;
        }
    }
    if (lease == 1) {
        double now = tc_build_now();
        if (!u->deferred_since)
            u->deferred_since = now;
        if (now - u->deferred_since < LEASE_WAIT_SECONDS)
            return 1;
    }
    compile_unit(b, u);
    tc_store_unlock(fd);
    return 0;
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (p->done == p->total) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        size_t i = p->next < p->ntodo ? p->todo[p->next++] : (size_t)-1;
        pthread_mutex_unlock(&p->lock);
        if (i == (size_t)-1) {
            /* only units held by other processes are left */
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int deferred = process_unit(p->b, &p->b->units[i]);
        pthread_mutex_lock(&p->lock);
        if (deferred) {
            /* to the back of the queue todo[next..ntodo): i came from
             * todo[next - 1], so the queue slides down one slot */
            memmove(p->todo + p->next - 1, p->todo + p->next,
                    (p->ntodo - p->next) * sizeof *p->todo);
            p->todo[p->ntodo - 1] = i;
            p->next--;
        } else {
            p->done++;
        }
        pthread_mutex_unlock(&p->lock);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static tc_status compile_misses(tc_build_ctx *b)
{
    pool p = {.b = b};
    size_t cap = b->nunits ? b->nunits : 1;
    p.todo = malloc(cap * sizeof *p.todo);
    uint64_t *order = malloc(cap * sizeof *order);
    if (!p.todo || !order) {
        free(p.todo);
        free(order);
        return TC_ERR_NOMEM;
    }
    /* Largest first, so the longest compile starts early (LPT scheduling):
     * sort by (inverted cost, index). */
    for (size_t i = 0; i < b->nunits; i++) {
        if (b->units[i].hit)
            continue;
        uint64_t c = b->units[i].cost > UINT32_MAX ? UINT32_MAX : b->units[i].cost;
        order[p.ntodo++] = (uint64_t)(UINT32_MAX - c) << 32 | i;
    }
    qsort(order, p.ntodo, sizeof *order, cmp_u64);
    for (size_t i = 0; i < p.ntodo; i++)
        p.todo[i] = (size_t)(order[i] & UINT32_MAX);
    free(order);
    pthread_mutex_init(&p.lock, NULL);
    p.total = p.ntodo;
    size_t nthreads = (size_t)b->o->jobs < p.ntodo ? (size_t)b->o->jobs : p.ntodo;
    pthread_t *threads = calloc(nthreads ? nthreads : 1, sizeof *threads);
    size_t started = 0;
    double t = tc_build_now();
    if (threads && nthreads > 1) {
        for (; started < nthreads; started++)
            if (pthread_create(&threads[started], NULL, worker, &p) != 0)
                break;
    }
    if (started == 0)
        worker(&p); /* one job, or no threads available: run here */
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    b->r->report.seconds_compile = tc_build_now() - t;
    size_t compiled = 0, waited = 0;
    for (size_t i = 0; i < b->nunits; i++) {
        compiled += (size_t)b->units[i].compiled;
        waited += (size_t)b->units[i].waited;
    }
    b->r->report.units_compiled = (uint32_t)compiled;
    b->r->report.unit_hits += (uint32_t)waited;
    b->delta.v[TC_C_COMPILES] += compiled;
    b->delta.v[TC_C_WAITED] += waited;
    b->delta.v[TC_C_UNIT_HITS] += waited;
    b->delta.v[TC_C_UNIT_MISSES] -= waited;
    free(threads);
    free(p.todo);
    pthread_mutex_destroy(&p.lock);
    return TC_OK;
}

/* ---- entries, diagnostics, link -------------------------------------------------- */

static tc_status fill_entries(tc_build_ctx *b)
{
    tc_result *r = b->r;
    size_t n = tc_slicer_entry_count(b->slicer);
    r->entries = calloc(n ? n : 1, sizeof *r->entries);
    if (!r->entries)
        return TC_ERR_NOMEM;
    for (size_t ui = 0; ui < b->nunits; ui++) {
        tc_unit *u = &b->units[ui];
        for (uint32_t k = 0; k < u->count; k++) {
            size_t i = u->first + k;
            tc_entry_info *e = &r->entries[i];
            if (tc_entry_from_stmt(&b->m, tc_slicer_entry(b->slicer, i), e) != 0 ||
                tc_entry_set_key(&e->unit_key, u->hex) != 0)
                return TC_ERR_NOMEM;
            r->nentries = i + 1 > r->nentries ? i + 1 : r->nentries;
            e->unit = (uint32_t)ui;
            e->cached = u->hit;
            for (size_t m = 0; m < u->nmeta; m++) {
                const tc_entry_info *s = &u->meta[m];
                if (!strcmp(s->name, e->name)) {
                    e->registers = s->registers;
                    e->shared_bytes = s->shared_bytes;
                    e->stack_bytes = s->stack_bytes;
                    e->spill_store_bytes = s->spill_store_bytes;
                    e->spill_load_bytes = s->spill_load_bytes;
                }
            }
        }
        if (!u->hit && u->log.len &&
            tc_build_resources_from_log(&r->entries[u->first], u->count, u->log.data,
                                        u->log.len) != 0)
            return TC_ERR_NOMEM;
    }
    return TC_OK;
}

/* Explain also reports each entry's own slice key. */
static tc_status slice_keys(tc_build_ctx *b)
{
    for (size_t i = 0; i < b->r->nentries; i++) {
        tc_text t;
        memset(&t, 0, sizeof t);
        uint32_t idx = (uint32_t)i;
        tc_digest d;
        char hex[TC_DIGEST_HEX_LEN + 1];
        int whole_program = 0;
        int rc = tc_slicer_emit_unit(b->slicer, &idx, 1, &t, &whole_program);
        int ewp = whole_program && b->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM;
        if (rc == 0)
            rc = tc_key_unit(&b->kc, tc_out_option(ewp ? TC_OUT_EWP : TC_OUT_OBJECT),
                             t.text.data, t.text.len, &d);
        tc_text_free(&t);
        if (rc != 0)
            return TC_ERR_NOMEM;
        tc_digest_hex(&d, hex);
        if (tc_entry_set_key(&b->r->entries[i].slice_key, hex) != 0)
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
static tc_status check_const_layout(tc_build_ctx *b)
{
    const char *name;
    size_t len, n = 0;
    uint64_t want;
    while (tc_slicer_const_var(b->slicer, n, &name, &len, &want) == 0)
        n++;
    if (!n)
        return TC_OK;
    const_walk w;
    memset(&w, 0, sizeof w);
    w.value = calloc(n, sizeof *w.value);
    w.found = calloc(n, 1);
    tc_status st = TC_ERR_NOMEM;
    for (size_t i = 0; w.value && w.found && i < n; i++) {
        tc_slicer_const_var(b->slicer, i, &name, &len, &want);
        if (tc_map_put(&w.names, name, len, (uint32_t)i) < 0)
            goto done;
    }
    if (!w.value || !w.found)
        goto done;
    int readable = tc_elf_symbols((const unsigned char *)b->r->image, b->r->image_len,
                                  image_const, &w) == 0;
    st = TC_OK;
    for (size_t i = 0; i < n && st == TC_OK; i++) {
        tc_slicer_const_var(b->slicer, i, &name, &len, &want);
        if (!readable || !w.found[i])
            st = tc_build_fail(b, TC_ERR_LINK,
                               "whole-program units: the linked image has no __constant__ "
                               "variable '%.*s'; build without --whole-program-units",
                               (int)len, name);
        else if (w.value[i] != want)
            st = tc_build_fail(b, TC_ERR_LINK,
                               "whole-program units: the linked image has __constant__ variable "
                               "'%.*s' at offset %llu, the units read it at %llu; build without "
                               "--whole-program-units",
                               (int)len, name, (unsigned long long)w.value[i],
                               (unsigned long long)want);
    }
    if (st != TC_OK) {
        free(b->r->image);
        b->r->image = NULL;
        b->r->image_len = 0;
    }
done:
    tc_map_free(&w.names);
    free(w.value);
    free(w.found);
    return st;
}

static tc_status link_units(tc_build_ctx *b)
{
    tc_blob *objs = malloc((b->nunits ? b->nunits : 1) * sizeof *objs);
    if (!objs)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < b->nunits; i++) {
        objs[i].p = b->units[i].object.data;
        objs[i].n = b->units[i].object.len;
    }
    tc_status st = tc_build_link(b, objs, b->nunits);
    free(objs);
    return st == TC_OK ? check_const_layout(b) : st;
}

tc_status tc_build_split(tc_build_ctx *b)
{
    tc_result *r = b->r;
    if (plan_units(b) != 0)
        return TC_ERR_NOMEM;
    tc_status st = key_units(b);
    if (st != TC_OK)
        return st;
    r->report.split = 1;
    r->report.in_process = b->in_process;
    r->report.nvjitlink = b->linker.kind == TC_LINKER_NVJITLINK;
    r->report.units = (uint32_t)b->nunits;
    r->report.entries = (uint32_t)tc_slicer_entry_count(b->slicer);
    for (size_t i = 0; i < b->nunits; i++)
        r->report.unit_hits += (uint32_t)b->units[i].hit;
    if (b->explain) {
        r->report.module_hit = b->store && b->o->module_tier &&
                               tc_store_has(b->store, b->o->arch, TC_REC_MODULE, &b->module_key);
        if ((st = fill_entries(b)) != TC_OK)
            return st;
        return slice_keys(b);
    }
    if ((st = compile_misses(b)) != TC_OK)
        return st;
    /* Diagnostics of every unit (replayed from records for hits), mapped to
     * input lines; compile errors stop the build here. */
    tc_sb warnings = TC_SB_INIT;
    size_t errors = 0;
    for (size_t i = 0; i < b->nunits; i++) {
        tc_unit *u = &b->units[i];
        if (u->spawn_failed) {
            st = tc_build_fail(b, TC_ERR_TOOLCHAIN, "cannot run %s: %s",
                               b->in_process ? "the in-process compiler" : b->ptxas,
                               strerror(u->spawn_failed));
            continue;
        }
        size_t e = tc_ptxas_diagnostics(u->log.data ? u->log.data : "", u->log.len, &u->map,
                                        b->name, &warnings);
        if (u->exit_code != 0 && !e) {
            tc_sb_printf(&warnings, "%s: error: ptxas failed (exit code %d)\n", b->name,
                         u->exit_code);
            e = 1;
        }
        errors += e;
    }
    tc_sb_append(&r->diag, warnings.data, warnings.len);
    if (st == TC_OK && errors)
        st = TC_ERR_COMPILE;
    if (st == TC_OK)
        st = fill_entries(b);
    if (st == TC_OK)
        st = link_units(b);
    if (st == TC_OK && b->store && b->o->module_tier)
        tc_build_store_module(b, &warnings);
    tc_sb_free(&warnings);
    return st;
}
