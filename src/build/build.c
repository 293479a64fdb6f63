/* build: the orchestration behind tc_build and tc_explain.
 *
 *   module record hit? -> done (one read)
 *   parse -> slice -> group into units -> key every unit
 *   look units up -> compile the misses in parallel -> link
 *   store unit records and the module record
 *
 * Nothing is stored unless the whole build succeeded, and the image is a
 * function of the input and options only: units are linked in a fixed
 * order whatever the cache held. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../compile/nvptx.h"
#include "../compile/ptxas.h"
#include "../key/key.h"
#include "../key/toolchain.h"
#include "../link/link.h"
#include "../ptx/slice.h"
#include "../ptx/units.h"
#include "../store/stats.h"
#include "../util/fs.h"
#include "build.h"
#include "payload.h"
#include "internal.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- set-up --------------------------------------------------------------- */

tc_status tc_build_fail(tc_build_ctx *b, tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_sb_printf(&b->r->diag, "%s: error: ", b->name);
    tc_sb_vprintf(&b->r->diag, fmt, ap);
    tc_sb_putc(&b->r->diag, '\n');
    va_end(ap);
    return code;
}

tc_status tc_build_prepare(tc_build_ctx *b)
{
    const tc_options *o = b->o;
    if (!o->arch[0])
        return tc_build_fail(b, TC_ERR_INVALID, "no target architecture: set one (e.g. --arch sm_90)");
    b->in_process = o->compiler == TC_COMPILER_INPROCESS ||
                    (o->compiler == TC_COMPILER_AUTO && tc_nvptx_available());
    if (b->in_process && !tc_nvptx_available())
        return tc_build_fail(b, TC_ERR_TOOLCHAIN,
                             "this taskcache was built without the in-process compiler "
                             "(libnvptxcompiler_static); use the ptxas backend");
    int have_ptxas =
        tc_tool_find(o->ptxas, "TASKCACHE_PTXAS", "ptxas", b->ptxas, sizeof b->ptxas) == 0;
    if (!have_ptxas)
        b->ptxas[0] = '\0';
    if (!have_ptxas && !b->in_process)
        return tc_build_fail(b, TC_ERR_TOOLCHAIN,
                    "cannot find ptxas%s%s: install the CUDA toolkit, or set CUDA_HOME or "
                    "TASKCACHE_PTXAS", o->ptxas ? " at " : "", o->ptxas ? o->ptxas : "");
    tc_sb err = TC_SB_INIT;
    const char *memo = b->cache ? b->cache->memo_dir : NULL;
    if (b->in_process) {
        tc_digest d;
        const char *id = tc_nvptx_identity();
        tc_digest_of(id, strlen(id), &d);
        tc_digest_hex(&d, b->compiler_id);
        snprintf(b->compiler_version, sizeof b->compiler_version, "%s", id);
    } else if (tc_tool_identity(b->ptxas, memo, b->compiler_id, b->compiler_version,
                                sizeof b->compiler_version, &err) != 0) {
        tc_status s = tc_build_fail(b, TC_ERR_TOOLCHAIN, "%s", err.data ? err.data : "ptxas unusable");
        tc_sb_free(&err);
        return s;
    }
    b->unit_code = o->unit_code;
    int want_library = o->split && o->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM;
    if (tc_linker_find(have_ptxas ? b->ptxas : NULL, memo, want_library, &b->linker, &err) != 0) {
        b->linker.kind = 0; /* only a split build needs one; said then */
        snprintf(b->linker.id, sizeof b->linker.id, "none");
        snprintf(b->linker_error, sizeof b->linker_error, "%s", err.data ? err.data : "");
    }
    if (want_library && b->linker.kind != TC_LINKER_NVJITLINK) {
        /* nvlink drops -ewp objects without a word: an image without kernels */
        b->unit_code = TC_UNIT_CODE_RELOCATABLE;
        tc_sb_printf(&b->r->diag,
                     "%s: note: whole-program units need libnvJitLink to link, and it was not "
                     "found (or TASKCACHE_NVJITLINK rules it out): compiling relocatable units\n",
                     b->name);
    }
    tc_sb_free(&err);
    b->kc.target = o->arch;
    b->kc.opts = (const char *const *)o->copts;
    b->kc.nopts = o->ncopts;
    b->kc.compiler_id = b->compiler_id;
    return TC_OK;
}

/* ---- module records --------------------------------------------------------- */

int tc_build_read_record(tc_build_ctx *b, uint32_t kind, const tc_digest *key, int count_bad,
                         tc_record_decode_fn decode, void (*undo)(void *ctx), void *ctx)
{
    char *payload = NULL;
    size_t len = 0;
    int bad = 0;
    int ok = tc_store_get(b->store, b->o->arch, kind, key, &payload, &len, &bad);
    if (ok) {
        ok = decode(ctx, payload, len) == 0;
        free(payload);
        if (!ok) {
            undo(ctx);
            bad = 1;
        }
    }
    if (bad && count_bad) {
        pthread_mutex_lock(&b->delta_lock);
        b->delta.v[TC_C_BAD_RECORDS]++;
        pthread_mutex_unlock(&b->delta_lock);
    }
    return ok;
}

static int decode_module(void *ctx, const char *payload, size_t len)
{
    tc_build_ctx *b = ctx;
    tc_result *r = b->r;
    size_t units = 0;
    if (tc_payload_decode_module(payload, len, r, &units) != 0)
        return -1;
    r->report.module_hit = 1;
    r->report.split = r->whole_reason == NULL;
    r->report.entries = (uint32_t)r->nentries;
    r->report.units = r->report.unit_hits = (uint32_t)units;
    return 0;
}

static void free_result_payload(tc_result *r)
{
    free(r->image);
    r->image = NULL;
    r->image_len = 0;
    for (size_t i = 0; i < r->nentries; i++)
        tc_entry_clear(&r->entries[i]);
    free(r->entries);
    r->entries = NULL;
    r->nentries = 0;
    free(r->whole_reason);
    r->whole_reason = NULL;
    tc_sb_reset(&r->diag);
    memset(&r->report, 0, sizeof r->report);
}

static void undo_module(void *ctx) { free_result_payload(((tc_build_ctx *)ctx)->r); }

static int module_hit(tc_build_ctx *b)
{
    return tc_build_read_record(b, TC_REC_MODULE, &b->module_key, 1, decode_module, undo_module,
                                b);
}

void tc_build_store_module(tc_build_ctx *b, const tc_sb *warnings)
{
    tc_result *r = b->r;
    tc_sb p = TC_SB_INIT, e = TC_SB_INIT;
    tc_field_put(&p, TC_F_IMAGE, r->image, r->image_len);
    for (size_t i = 0; i < r->nentries; i++) {
        tc_sb_reset(&e);
        tc_entry_encode(&r->entries[i], &e);
        tc_field_put(&p, TC_F_ENTRY, e.data, e.len);
    }
    for (size_t i = 0; i < b->nunits; i++)
        tc_field_put(&p, TC_F_UNIT_KEY, b->units[i].key.b, TC_DIGEST_LEN);
    if (r->whole_reason)
        tc_field_put(&p, TC_F_WHOLE_REASON, r->whole_reason, strlen(r->whole_reason));
    if (warnings && warnings->len)
        tc_field_put(&p, TC_F_LOG, warnings->data, warnings->len);
    if (!p.oom)
        tc_build_count_put(b, tc_store_put(b->store, b->o->arch, TC_REC_MODULE, &b->module_key,
                                           p.data, p.len));
    tc_sb_free(&p);
    tc_sb_free(&e);
}

void tc_build_count_put(tc_build_ctx *b, long long written)
{
    pthread_mutex_lock(&b->delta_lock); /* compile workers publish too */
    if (written < 0) {
        b->delta.v[TC_C_STORE_ERRORS]++;
    } else {
        b->delta.v[TC_C_RECORDS_WRITTEN]++;
        b->delta.v[TC_C_BYTES_WRITTEN] += (uint64_t)written;
        b->delta.v[TC_C_CACHE_BYTES] += (uint64_t)written;
    }
    pthread_mutex_unlock(&b->delta_lock);
}

/* Keeps the cache under its size limit: the size estimate kept in the
 * statistics decides when a cleanup is due; the cleanup measures. */
static void keep_within_limit(tc_build_ctx *b, const tc_counters *after)
{
    uint64_t limit = tc_store_max_size(b->store);
    if (!limit || after->v[TC_C_CACHE_BYTES] <= limit)
        return;
    tc_gc_result g;
    (void)tc_store_gc(b->store, limit, -1, &g);
}

/* ---- entries and resources ----------------------------------------------------- */

typedef struct res_ctx {
    tc_entry_info *entries;
    tc_map names;  /* entry name -> index */
} res_ctx;

static void take_resources(void *ctx, const char *name, size_t nlen, const tc_ptxas_res *res)
{
    res_ctx *c = ctx;
    uint32_t *i = tc_map_get(&c->names, name, nlen);
    if (!i)
        return; /* a helper function, not a kernel */
    tc_entry_info *e = &c->entries[*i];
    e->registers = res->registers;
    e->shared_bytes = res->shared_bytes;
    e->stack_bytes = res->stack_bytes;
    e->spill_store_bytes = res->spill_store_bytes;
    e->spill_load_bytes = res->spill_load_bytes;
}

int tc_build_resources_from_log(tc_entry_info *entries, size_t n, const char *log, size_t len)
{
    res_ctx c = {entries, {0}};
    for (size_t i = 0; i < n; i++)
        if (tc_map_put(&c.names, entries[i].name, strlen(entries[i].name), (uint32_t)i) < 0) {
            tc_map_free(&c.names);
            return -1;
        }
    tc_ptxas_parse_resources(log, len, take_resources, &c);
    tc_map_free(&c.names);
    return 0;
}

static int cmp_entry_name(const void *a, const void *b)
{
    const tc_ptx_sym *x = *(const tc_ptx_sym *const *)a, *y = *(const tc_ptx_sym *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Entries of the parsed module in name order (used when built whole). */
static int entries_from_module(tc_build_ctx *b)
{
    const tc_ptx_module *m = &b->m;
    const tc_ptx_sym **order = calloc(m->nentries ? m->nentries : 1, sizeof *order);
    b->r->entries = calloc(m->nentries ? m->nentries : 1, sizeof *b->r->entries);
    if (!order || !b->r->entries) {
        free(order);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->nsyms; i++)
        if (m->syms[i].is_entry && m->syms[i].def >= 0)
            order[n++] = &m->syms[i];
    qsort(order, n, sizeof *order, cmp_entry_name);
    for (size_t i = 0; i < n; i++) {
        if (tc_entry_from_stmt(m, &m->stmts[order[i]->def], &b->r->entries[i]) != 0) {
            free(order);
            return -1;
        }
        b->r->nentries++;
    }
    free(order);
    return 0;
}

/* ---- whole-module builds -------------------------------------------------------- */

static tc_status build_whole(tc_build_ctx *b, const char *reason)
{
    tc_result *r = b->r;
    r->whole_reason = strdup(reason);
    if (!r->whole_reason || entries_from_module(b) != 0)
        return TC_ERR_NOMEM;
    r->report.split = 0;
    r->report.in_process = b->in_process;
    r->report.nvjitlink = b->linker.kind == TC_LINKER_NVJITLINK;
    r->report.entries = (uint32_t)r->nentries;
    if (b->explain) {
        r->report.module_hit = b->store && b->o->module_tier &&
                               tc_store_has(b->store, b->o->arch, TC_REC_MODULE, &b->module_key);
        return TC_OK;
    }
    b->delta.v[TC_C_WHOLE_BUILDS]++;
    tc_sb_printf(&r->diag, "%s: note: compiled whole, not split: %s\n", b->name, reason);
    char in[TC_PATH_MAX];
    snprintf(in, sizeof in, "%s/whole.ptx", b->scratch);
    if (!b->in_process && tc_write_file(in, b->src, b->len) != 0)
        return tc_build_fail(b, TC_ERR_IO, "cannot write %s: %s", in, strerror(errno));
    tc_sb output = TC_SB_INIT, log = TC_SB_INIT;
    int code = 0;
    double t = now();
    int rc = tc_build_compile(b, TC_OUT_CUBIN, b->src, b->len, in, &output, &log, &code);
    r->report.seconds_compile = now() - t;
    b->delta.v[TC_C_COMPILES]++;
    tc_status st = TC_OK;
    tc_sb warnings = TC_SB_INIT;
    if (rc != 0) {
        st = tc_build_fail(b, TC_ERR_TOOLCHAIN, "cannot run %s: %s",
                           b->in_process ? "the in-process compiler" : b->ptxas, strerror(errno));
    } else {
        size_t errors = tc_ptxas_diagnostics(log.data ? log.data : "", log.len, NULL, b->name,
                                             &warnings);
        tc_sb_append(&r->diag, warnings.data, warnings.len);
        if (code != 0) {
            st = TC_ERR_COMPILE;
            if (!errors)
                tc_build_fail(b, TC_ERR_COMPILE, "ptxas failed (exit code %d)", code);
        } else {
            r->image = tc_sb_take(&output, &r->image_len);
            if (!r->image || tc_build_resources_from_log(r->entries, r->nentries,
                                                         log.data ? log.data : "", log.len) != 0)
                st = TC_ERR_NOMEM;
        }
    }
    if (st == TC_OK && b->store && b->o->module_tier)
        tc_build_store_module(b, &warnings);
    tc_sb_free(&warnings);
    tc_sb_free(&output);
    tc_sb_free(&log);
    return st;
}

tc_status tc_build_link(tc_build_ctx *b, const tc_blob *objs, size_t n)
{
    if (!b->linker.kind)
        return tc_build_fail(b, TC_ERR_TOOLCHAIN, "%s", b->linker_error);
    tc_sb image = TC_SB_INIT, log = TC_SB_INIT;
    double t = now();
    int rc = tc_link(&b->linker, b->o->arch, objs, n, b->scratch, &image, &log);
    b->r->report.seconds_link = now() - t;
    tc_status st = TC_OK;
    if (rc != 0) {
        /* one diagnostic line per line of the linker's message */
        const char *p = log.data ? log.data : "";
        while (*p) {
            size_t len = strcspn(p, "\n");
            if (len)
                tc_sb_printf(&b->r->diag, "%s: error: link: %.*s\n", b->name, (int)len, p);
            p += len + (p[len] == '\n');
        }
        if (!log.len)
            tc_build_fail(b, TC_ERR_LINK, "link failed");
        st = TC_ERR_LINK;
    } else if (!(b->r->image = tc_sb_take(&image, &b->r->image_len))) {
        st = TC_ERR_NOMEM;
    }
    tc_sb_free(&image);
    tc_sb_free(&log);
    return st;
}

int tc_build_compile(tc_build_ctx *b, tc_out_kind kind, const char *text, size_t len,
                     const char *ptx_path, tc_sb *output, tc_sb *log, int *exit_code)
{
    if (b->in_process)
        return tc_nvptx_compile(b->o->arch, b->o->copts, b->o->ncopts, kind, text, len,
                                output, log, exit_code) == 0
                   ? 0
                   : (errno = ENOMEM, -1);
    size_t pl = strlen(ptx_path);
    char *out = malloc(pl + 8), *logp = malloc(pl + 8);
    int rc = -1;
    if (out && logp) {
        snprintf(out, pl + 8, "%.*s.out", (int)(pl - 4), ptx_path);
        snprintf(logp, pl + 8, "%.*s.log", (int)(pl - 4), ptx_path);
        tc_ptxas_job job = {.ptxas = b->ptxas, .arch = b->o->arch, .opts = b->o->copts,
                            .nopts = b->o->ncopts, .kind = kind,
                            .ptx_path = ptx_path, .out_path = out, .log_path = logp};
        rc = tc_ptxas_run(&job);
        *exit_code = rc == 0 ? job.exit_code : -1;
        tc_sb_append(output, job.output.data, job.output.len);
        tc_sb_append(log, job.log.data, job.log.len);
        tc_sb_free(&job.output);
        tc_sb_free(&job.log);
    } else {
        errno = ENOMEM;
    }
    free(out);
    free(logp);
    return rc;
}

/* ---- driver ---------------------------------------------------------------------- */

/* Says so when text follows the NUL byte that ends the PTX (the driver
 * ignores it too; trailing whitespace and NULs are common and say nothing). */
static void note_after_nul(tc_build_ctx *b)
{
    size_t extra = 0;
    for (size_t i = b->len + 1; i < b->input_len; i++)
        extra += b->src[i] && !strchr(" \t\r\n", b->src[i]);
    if (!extra)
        return;
    uint32_t line = 1;
    for (size_t i = 0; i < b->len; i++)
        line += b->src[i] == '\n';
    tc_sb_printf(&b->r->diag,
                 "%s:%u: note: the PTX text ends at a NUL byte here, as the CUDA driver reads "
                 "it; the %zu bytes after it are ignored\n",
                 b->name, line, b->input_len - b->len - 1);
}

static tc_status run(tc_build_ctx *b)
{
    tc_status st = tc_build_prepare(b);
    if (st != TC_OK)
        return st;
    if (b->o->split)
        snprintf(b->plan, sizeof b->plan, "split:%u:%s",
                 b->o->unit_cost ? b->o->unit_cost : TC_UNIT_COST_DEFAULT,
                 b->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM ? "ewp" : "c");
    else
        snprintf(b->plan, sizeof b->plan, "whole");
    if (tc_key_module(&b->kc, b->linker.id, b->plan, b->src, b->input_len, &b->module_key) != 0)
        return TC_ERR_NOMEM;
    note_after_nul(b);
    if (!b->explain && b->store && b->o->module_tier && module_hit(b)) {
        b->delta.v[TC_C_MODULE_HITS]++;
        return TC_OK;
    }
    if (!b->explain && b->store && b->o->module_tier)
        b->delta.v[TC_C_MODULE_MISSES]++;
    if (tc_options_cancelled(b->o)) /* before the expensive part */
        return tc_build_fail(b, TC_ERR_CANCELLED, "the host cancelled the build");
    if (!b->explain && b->o->split) /* a link is likely: the linker's first use, meanwhile */
        tc_linker_prewarm(&b->linker, b->o->arch);
    tc_ptx_error perr;
    if (tc_ptx_parse(b->src, b->len, &b->m, &perr) != 0) {
        if (!perr.line)
            return TC_ERR_NOMEM;
        tc_sb_printf(&b->r->diag, "%s:%u: error: %s\n", b->name, perr.line, perr.message);
        return TC_ERR_PARSE;
    }
    b->parsed = 1;
    if (!b->explain) {
        b->scratch = tc_make_temp_dir("taskcache");
        if (!b->scratch)
            return tc_build_fail(b, TC_ERR_IO, "cannot create a temporary directory: %s", strerror(errno));
    }
    char why[256] = "splitting is turned off";
    int rc = b->o->split ? tc_slicer_create(&b->m, &b->slicer, why, sizeof why) : 1;
    if (rc < 0)
        return TC_ERR_NOMEM;
    if (rc == 1)
        return build_whole(b, why);
    if (tc_slicer_set_whole_program(b->slicer, b->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM) != 0)
        return TC_ERR_NOMEM;
    if (!b->explain && !b->linker.kind)
        return tc_build_fail(b, TC_ERR_TOOLCHAIN, "%s", b->linker_error);
    return tc_build_split(b);
}

int tc_build_begin(tc_build_ctx *b, tc_cache *cache, const tc_options *opts, const char *name,
                   int explain)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->delta_lock, NULL);
    b->t0 = now();
    b->cache = cache;
    b->o = opts;
    b->src = "";
    b->name = name && *name ? name : "<input>";
    b->explain = explain;
    b->store = cache ? cache->store : NULL;
    b->r = tc_result_new();
    if (b->r)
        tc_cache_hold(cache); /* a tc_cache_close meanwhile frees it after tc_build_finish */
    return b->r ? 0 : -1;
}

tc_result *tc_build_finish(tc_build_ctx *b, tc_status st)
{
    tc_result *r = b->r;
    tc_linker_prewarm_wait(); /* no thread inside the linker library after a build */
    if (st != TC_OK) {
        free(r->image);
        r->image = NULL;
        r->image_len = 0;
        if (!b->explain && !b->lookup && st != TC_ERR_CANCELLED) /* cancelling is no error */
            b->delta.v[TC_C_COMPILE_ERRORS]++;
    }
    if (b->store && tc_store_warning(b->store))
        tc_sb_printf(&r->diag, "taskcache: warning: %s\n", tc_store_warning(b->store));
    if (!b->explain && b->store) {
        if (!b->lookup)
            b->delta.v[TC_C_BUILDS]++;
        tc_counters after; /* statistics never fail a build */
        if (tc_stats_add(b->cache->dir, &b->delta, &after) == 0)
            keep_within_limit(b, &after);
    }
    double t0 = b->t0;
    tc_cache *cache = b->cache;
    tc_build_ctx_free(b);
    tc_cache_release(cache);
    r->status = st;
    r->report.seconds = now() - t0;
    return r;
}

static tc_status entry(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                       const char *name, tc_result **out, int explain)
{
    if (!out)
        return TC_ERR_INVALID;
    *out = NULL;
    if (!opts || (!ptx && size))
        return TC_ERR_INVALID;
    tc_build_ctx b;
    if (tc_build_begin(&b, cache, opts, name, explain) != 0)
        return TC_ERR_NOMEM;
    b.src = ptx ? ptx : "";
    b.input_len = size;
    b.len = tc_ptx_text_len(b.src, size);
    tc_status st = run(&b);
    *out = tc_build_finish(&b, st);
    return st;
}

void tc_build_ctx_free(tc_build_ctx *b)
{
    pthread_mutex_destroy(&b->delta_lock);
    tc_build_units_free(b);
    tc_slicer_free(b->slicer);
    if (b->parsed)
        tc_ptx_module_free(&b->m);
    if (b->scratch) {
        tc_remove_tree(b->scratch);
        free(b->scratch);
    }
}

tc_status tc_build(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                   const char *name, tc_result **out)
{
    return entry(cache, opts, ptx, size, name, out, 0);
}

tc_status tc_explain(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                     const char *name, tc_result **out)
{
    return entry(cache, opts, ptx, size, name, out, 1);
}

double tc_build_now(void) { return now(); }
