/* module: tc_build and tc_explain, a PTX module in, one linked image out.
 *
 *   module record hit? -> done (one read)
 *   parse -> split (split.c), or compile the module whole (here)
 *   store the module record
 *
 * Nothing is stored unless the whole build succeeded, and the image is a
 * function of the input and options only: units are linked in a fixed
 * order whatever the cache held. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/payload.h"
#include "pipeline/split.h"
#include "ptx/units.h"
#include "toolchain/spawn.h"
#include "util/fs.h"

/* Inputs from this size on start loading the linker before they are parsed. */
#define EARLY_PREWARM_BYTES ((size_t)256 << 10)

static int explaining(const tc_ptx_job *j) { return j->s->call == TC_CALL_EXPLAIN; }

static int module_tier(const tc_ptx_job *j) { return j->s->store && j->s->o->module_tier; }

/* ---- module records --------------------------------------------------------- */

static int decode_module(void *ctx, char **payload, size_t len)
{
    tc_session *s = ctx;
    tc_result *r = s->r;
    size_t units = 0;
    if (tc_payload_decode_module(payload, len, r, s->name, &units) != 0)
        return -1;
    r->report.module_hit = 1;
    r->report.split = r->whole_reason == NULL;
    r->report.entries = (uint32_t)r->nentries;
    r->report.units = r->report.unit_hits = (uint32_t)units;
    return 0;
}

static void undo_module(void *ctx) { tc_result_clear(((tc_session *)ctx)->r); }

static int module_hit(tc_ptx_job *j)
{
    return tc_session_read_record(j->s, TC_REC_MODULE, &j->module_key, 1, decode_module,
                                  undo_module, j->s);
}

static void store_module(tc_ptx_job *j)
{
    tc_digest *keys = malloc((j->nunits ? j->nunits : 1) * sizeof *keys);
    if (!keys)
        return;
    for (size_t i = 0; i < j->nunits; i++)
        keys[i] = j->units[i].u.key;
    tc_sb p = TC_SB_INIT;
    tc_payload_encode_module(j->s->r, keys, j->nunits, &j->warnings, j->s->name, &p);
    tc_session_write_record(j->s, TC_REC_MODULE, &j->module_key, &p);
    if (j->keep_inprocess_key)
        tc_session_write_record(j->s, TC_REC_MODULE, &j->inprocess_key, &p);
    tc_sb_free(&p);
    free(keys);
}

/* ---- whole-module builds -------------------------------------------------------- */

static int cmp_entry_name(const void *a, const void *b)
{
    const tc_ptx_sym *x = *(const tc_ptx_sym *const *)a, *y = *(const tc_ptx_sym *const *)b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Entries of the parsed module in name order. */
static int entries_from_module(tc_ptx_job *j)
{
    const tc_ptx_module *m = &j->m;
    tc_result *r = j->s->r;
    const tc_ptx_sym **order = calloc(m->nentries ? m->nentries : 1, sizeof *order);
    r->entries = calloc(m->nentries ? m->nentries : 1, sizeof *r->entries);
    if (!order || !r->entries) {
        free(order);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->nsyms; i++)
        if (m->syms[i].is_entry && m->syms[i].def >= 0)
            order[n++] = &m->syms[i];
    qsort(order, n, sizeof *order, cmp_entry_name);
    for (size_t i = 0; i < n; i++) {
        if (tc_entry_from_stmt(m, &m->stmts[order[i]->def], &r->entries[i]) != 0) {
            free(order);
            return -1;
        }
        r->nentries++;
    }
    free(order);
    return 0;
}

/* The module as one compile; why says why (explain and the module record
 * keep it). A note in the diagnostics too, unless small (whole_by_default):
 * that is the faster build, not a construct the slicer could not split. */
static tc_status compile_whole_module(tc_ptx_job *j, const char *why, int small)
{
    tc_session *s = j->s;
    tc_result *r = s->r;
    r->whole_reason = strdup(why);
    if (!r->whole_reason || entries_from_module(j) != 0)
        return TC_ERR_NOMEM;
    r->report.split = 0;
    r->report.in_process = s->in_process;
    r->report.nvjitlink = s->linker.kind == TC_LINKER_NVJITLINK;
    r->report.entries = (uint32_t)r->nentries;
    if (explaining(j))
        return TC_OK;
    s->delta.v[TC_C_WHOLE_BUILDS]++;
    if (!small)
        tc_sb_printf(&r->diag, "%s: note: compiled whole, not split: %s\n", s->name, why);
    char in[TC_PATH_MAX] = ""; /* ptxas's input; the in-process compiler reads memory */
    if (!s->in_process)
        snprintf(in, sizeof in, "%s/whole.ptx", s->scratch);
    if (j->ptxas_instead)
        tc_sb_printf(&r->diag, "%s: note: compiled by %s in a process of its own (ptxas 13.0 "
                     "aborts on some modules with a parameter named like a module symbol)\n",
                     s->name, s->ptxas);
    if (!s->in_process && tc_write_file(in, j->src, j->len) != 0)
        return tc_session_fail(s, TC_ERR_IO, "cannot write %s: %s", in, strerror(errno));
    tc_sb output = TC_SB_INIT, log = TC_SB_INIT;
    int code = 0;
    double t = tc_now();
    tc_out_kind kind = s->o->output == TC_OUTPUT_OBJECT ? TC_OUT_OBJECT : TC_OUT_CUBIN;
    tc_session_progress_begin(s, 1);
    char label[160];
    snprintf(label, sizeof label, "%s (whole module)", s->name);
    int rc = tc_session_compile(s, kind, label, j->src, j->len, in, &output, &log, &code);
    tc_session_progress_step(s);
    r->report.seconds_compile = tc_now() - t;
    s->delta.v[TC_C_COMPILES]++;
    tc_status st = TC_OK;
    if (rc != 0) {
        st = tc_session_fail(s, TC_ERR_TOOLCHAIN, "cannot run %s: %s",
                             s->in_process ? "the in-process compiler" : s->ptxas,
                             strerror(errno));
    } else {
        size_t errors = tc_ptxas_diagnostics(log.data ? log.data : "", log.len, NULL, s->name,
                                             &j->warnings);
        tc_sb_append(&r->diag, j->warnings.data, j->warnings.len);
        if (code != 0) {
            st = TC_ERR_COMPILE;
            char how[64];
            tc_describe_exit(code, how, sizeof how);
            if (!errors)
                tc_session_fail(s, TC_ERR_COMPILE, "ptxas %s", how);
        } else {
            /* ptxas's own report, its order of kernels too */
            r->image = tc_sb_take(&output, &r->image_len);
            if (!r->image || tc_entries_take_report(r->entries, r->nentries,
                                                    log.data ? log.data : "", log.len, 1) != 0)
                st = TC_ERR_NOMEM;
        }
    }
    tc_sb_free(&output);
    tc_sb_free(&log);
    return st;
}

/* ---- the driver ------------------------------------------------------------------- */

/* Says so when text follows the NUL byte that ends the PTX (the driver
 * ignores it too; trailing whitespace and NULs are common and say nothing). */
static void note_after_nul(tc_ptx_job *j)
{
    size_t extra = 0;
    for (size_t i = j->len + 1; i < j->input_len; i++)
        extra += j->src[i] && !strchr(" \t\r\n", j->src[i]);
    if (!extra)
        return;
    uint32_t line = 1;
    for (size_t i = 0; i < j->len; i++)
        line += j->src[i] == '\n';
    tc_sb_printf(&j->s->r->diag,
                 "%s:%u: note: the PTX text ends at a NUL byte here, as the CUDA driver reads "
                 "it; the %zu bytes after it are ignored\n",
                 j->s->name, line, j->input_len - j->len - 1);
}

/* Whether a module split by default is compiled whole instead, because it
 * is small; why says so. A split build compiles the units, the module data
 * again in each, and links (the linker loaded first, in a fresh process);
 * a whole compile is one compile on the compiler's own threads, with the
 * compiler's own whole-program code. Small is either of:
 * - one unit of TC_WHOLE_UNIT_COST statements holds every kernel: the
 *   split build would compile the same kernels, then link;
 * - the kernels' cost, callees included, is at most TC_WHOLE_MAX_COST
 *   statements. On llm.c's files of 3-8 kernels and 270-1,200 statements
 *   (2 cores, fresh processes, bench/small_modules.py) a cold split build
 *   took 1.3-1.7x the time of the whole compile, and an edit was no faster
 *   than compiling the whole module again. Between 1,600 and 2,000
 *   statements split edits were up to 2x faster (53 against 107 ms), so
 *   those stay split.
 * The choice depends only on the text and the options, as the module key
 * does. A unit size given explicitly is a request for units, kept (tests
 * and the GPU checks link small modules so). */
static int whole_by_default(const tc_ptx_job *j, char *why, size_t whylen)
{
    size_t n = tc_slicer_entry_count(j->slicer);
    size_t code_units = j->nunits - (j->nunits && j->units[0].is_module_data);
    uint64_t cost = 0;
    for (size_t i = 0; i < n; i++)
        cost += tc_slicer_entry_cost(j->slicer, i);
    if (code_units <= 1)
        snprintf(why, whylen, "its %zu kernel(s) fit in one unit: one compile, no link", n);
    else if (cost <= TC_WHOLE_MAX_COST)
        snprintf(why, whylen,
                 "its %zu kernels are small (%llu statements): one compile, no link", n,
                 (unsigned long long)cost);
    else
        return 0;
    return 1;
}

/* Why the compiler options ask for code that units linked into one image
 * do not give, or NULL when they do not. Such a module is compiled whole,
 * as ptxas compiles it:
 * - -g (--device-debug): each kernel's static .shared arrays come out
 *   twice (1024 + 2 x 20,000 bytes of shared memory for one 20,000-byte
 *   array where ptxas -g gives 1024 + 20,000), their symbols missing. Less
 *   occupancy, and a launch that asks for dynamic shared memory can fail.
 * - -sanitize (memcheck, threadsteer): the instrumented kernels' code
 *   differs from the whole compile's in every kernel, and the image lacks
 *   the constant bank through which it reaches the device allocator. */
static const char *options_need_whole(const tc_options *o)
{
    static const char *const debug[] = {"-g", "--device-debug", "-device-debug", NULL};
    static const char *const sanitize[] = {"-sanitize*", "--sanitize*", NULL};
    if (tc_options_have(o, debug))
        return "device debug information (-g): linked units would hold each kernel's static "
               "shared memory twice";
    if (tc_options_have(o, sanitize))
        return "sanitizer instrumentation (-sanitize): linked units would not give the whole "
               "compile's instrumented code";
    return NULL;
}

/* Why the image's line information rules out units, or NULL. ptxas writes
 * line tables whenever the module has .loc directives, and for the PTX's
 * own lines under -lineinfo, unless -suppress-debug-info. Linked units
 * spoil them (measured on nvcc -lineinfo modules): a unit's .loc keeps the
 * module's file numbers, which ptxas reads as indices into the shorter
 * table it writes for the unit (wrong file names); the linker appends the
 * units' .debug_str without moving the inlined functions' names that point
 * into it; and every unit's machine-code-to-PTX table counts lines of the
 * first unit's text in the image. */
static const char *line_info_needs_whole(const tc_ptx_job *j)
{
    static const char *const lineinfo[] = {"-lineinfo", "--generate-line-info",
                                           "-generate-line-info", NULL};
    static const char *const suppressed[] = {"-suppress-debug-info", "--suppress-debug-info",
                                             NULL};
    const tc_options *o = j->s->o;
    if (tc_options_have(o, suppressed))
        return NULL;
    if (j->m.nlocfiles)
        return "line information (the module's .loc directives): linked units' line tables "
               "name other files and inlined functions than the whole compile's";
    if (tc_options_have(o, lineinfo))
        return "line information (-lineinfo) for PTX without .loc directives: it maps the "
               "machine code to lines of the PTX, which must be the module's, not a unit's";
    return NULL;
}

/* How the module is built, part of its key: split (the unit size, the unit
 * code) or whole, and the compiler threads a whole compile gets (a small
 * module is compiled whole under a split plan). */
static void make_plan(tc_ptx_job *j, int split, uint32_t unit_cost)
{
    tc_session *s = j->s;
    const char *threads = tc_session_threads(s, TC_OUT_CUBIN, j->src, j->len);
    threads = threads ? threads : "";
    if (split) {
        snprintf(j->plan, sizeof j->plan, "split:%s%u:%s:%s", s->o->unit_cost ? "" : "default-",
                 unit_cost, s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM ? "ewp" : "c", threads);
        if (!s->o->unit_cost) /* a small module is compiled whole: the bound it used */
            snprintf(j->plan + strlen(j->plan), sizeof j->plan - strlen(j->plan),
                     ":whole<=%u", TC_WHOLE_MAX_COST);
    } else if (s->o->output == TC_OUTPUT_OBJECT)
        snprintf(j->plan, sizeof j->plan, "object"); /* -c: no threads (see session.c) */
    else
        snprintf(j->plan, sizeof j->plan, "whole:%s", threads);
}

/* The in-process compiler's module goes to ptxas processes: their
 * identity and options (that ptxas may be older, and compiles without the
 * in-process compiler's threads), and the module key they make. */
static tc_status switch_to_ptxas(tc_ptx_job *j, int split, uint32_t unit_cost)
{
    tc_session *s = j->s;
    tc_status st = tc_session_use_ptxas(s);
    if (st != TC_OK)
        return st;
    make_plan(j, split, unit_cost);
    if (tc_key_module(&s->kc, s->linker.id, j->plan, j->src, j->input_len, &j->module_key) != 0)
        return TC_ERR_NOMEM;
    return TC_OK;
}

/* A module record read for a build after a crash, kept as it was read. */
typedef struct {
    tc_session *s;
    tc_sb payload;
} kept_module;

static int decode_and_keep(void *ctx, char **payload, size_t len)
{
    kept_module *k = ctx;
    tc_sb_append(&k->payload, *payload, len); /* before decoding, which moves the image */
    return decode_module(k->s, payload, len);
}

static void undo_kept(void *ctx)
{
    kept_module *k = ctx;
    tc_sb_reset(&k->payload);
    undo_module(k->s);
}

/* The in-process compiler crashed on this input before, with these
 * options (tc_options_set_inprocess_crashed), and its module key missed:
 * ptxas builds the module, and the record goes under the in-process key
 * as well (store_module), which the next in-process build looks up before
 * it compiles anything. A record ptxas made earlier (before that key was
 * kept, or by another machine) is copied there as it was read. */
static tc_status build_after_crash(tc_ptx_job *j, int split, uint32_t unit_cost)
{
    tc_session *s = j->s;
    const char *asked = s->o->ptxas;
    if (!s->ptxas[0])
        return tc_session_fail(s, TC_ERR_TOOLCHAIN,
                               "cannot find ptxas%s%s to build it with after the in-process "
                               "compiler crashed: install the CUDA toolkit, or set CUDA_HOME or "
                               "TASKCACHE_PTXAS", asked ? " at " : "", asked ? asked : "");
    j->inprocess_key = j->module_key;
    j->keep_inprocess_key = module_tier(j);
    tc_status st = switch_to_ptxas(j, split, unit_cost);
    if (st != TC_OK)
        return st;
    kept_module k = {s, TC_SB_INIT};
    if (module_tier(j) && tc_session_read_record(s, TC_REC_MODULE, &j->module_key, 1,
                                                 decode_and_keep, undo_kept, &k)) {
        s->delta.v[TC_C_MODULE_MISSES]--; /* counted for the in-process key */
        s->delta.v[TC_C_MODULE_HITS]++;
        if (!k.payload.oom)
            tc_session_write_record(s, TC_REC_MODULE, &j->inprocess_key, &k.payload);
    }
    tc_sb_free(&k.payload);
    return TC_OK;
}

/* Everything up to choosing between the split and the whole build. */
static tc_status build(tc_ptx_job *j)
{
    tc_session *s = j->s;
    const char *whole_options = options_need_whole(s->o);
    /* a relocatable object is one compile of the whole module (taskcache.h) */
    int split = s->o->split && s->o->output == TC_OUTPUT_IMAGE && !whole_options;
    tc_status st = tc_session_prepare(s, split);
    if (st != TC_OK)
        return st;
    uint32_t unit_cost = s->o->unit_cost ? s->o->unit_cost : TC_UNIT_COST_DEFAULT;
    make_plan(j, split, unit_cost);
    if (tc_key_module(&s->kc, s->linker.id, j->plan, j->src, j->input_len, &j->module_key) != 0)
        return TC_ERR_NOMEM;
    note_after_nul(j);
    if (!explaining(j) && module_tier(j) && module_hit(j)) {
        s->delta.v[TC_C_MODULE_HITS]++;
        return TC_OK;
    }
    if (!explaining(j) && module_tier(j))
        s->delta.v[TC_C_MODULE_MISSES]++;
    if (tc_options_cancelled(s->o)) /* before the expensive part */
        return tc_session_fail(s, TC_ERR_CANCELLED, "the host cancelled the build");
    if (!explaining(j) && s->o->inprocess_crashed && s->in_process &&
        ((st = build_after_crash(j, split, unit_cost)) != TC_OK || s->r->report.module_hit))
        return st;
    /* A module this large is split (one compiled whole for its size holds
     * at most about 1000 statements, some 40 KB of PTX), and its link's
     * first use of the linker library, about 7 ms of loading, can then run
     * beside the parse, which uses one thread, rather than beside the
     * canonical texts, which use them all. Should it be compiled whole
     * after all, the loading was a few ms of a compile that takes
     * hundreds. */
    if (split && !explaining(j) && j->len >= EARLY_PREWARM_BYTES)
        tc_linker_prewarm(&s->linker, s->o->arch);
    tc_ptx_error perr;
    if (tc_ptx_parse(j->src, j->len, &j->m, &perr) != 0) {
        if (!perr.line)
            return TC_ERR_NOMEM;
        tc_sb_printf(&s->r->diag, "%s:%u: error: %s\n", s->name, perr.line, perr.message);
        return TC_ERR_PARSE;
    }
    j->parsed = 1;
    if (!explaining(j) && !tc_session_files_ready(s))
        return TC_ERR_IO;
    if (explaining(j))
        s->r->report.module_hit =
            module_tier(j) && tc_store_has(s->store, s->o->arch, TC_REC_MODULE, &j->module_key);
    char why[1024] = "splitting is turned off"; /* room for a linker message with C++ names */
    if (s->o->output == TC_OUTPUT_OBJECT)
        snprintf(why, sizeof why, "a relocatable object (-c) is one compile of the module");
    else if (s->o->split && whole_options)
        snprintf(why, sizeof why, "%s", whole_options);
    int rc = split ? tc_slicer_create(&j->m, &j->slicer, why, sizeof why) : 1, small = 0;
    if (rc < 0)
        return TC_ERR_NOMEM;
    if (rc == 0) {
        if (tc_split_plan(j, s->o->unit_cost ? unit_cost : TC_WHOLE_UNIT_COST) != 0)
            return TC_ERR_NOMEM;
        if ((small = !s->o->unit_cost && whole_by_default(j, why, sizeof why))) {
            tc_split_free(j);
            rc = 1;
        } else if (!s->o->unit_cost) {
            tc_split_free(j);
            if (tc_split_plan(j, unit_cost) != 0)
                return TC_ERR_NOMEM;
        }
    }
    const char *lines = rc == 0 ? line_info_needs_whole(j) : NULL;
    if (lines) {
        snprintf(why, sizeof why, "%s", lines);
        tc_split_free(j);
        rc = 1;
    }
    if (rc == 0) {
        if (tc_slicer_set_whole_program(j->slicer,
                                        s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM) != 0)
            return TC_ERR_NOMEM;
        if ((rc = tc_slicer_relocatable_hazard(j->slicer, why, sizeof why)) < 0)
            return TC_ERR_NOMEM;
        if (rc == 1)
            tc_split_free(j); /* compiled whole: no units */
    }
    if (rc == 1 && j->m.may_crash_compiler && s->in_process && s->ptxas[0]) {
        /* a crash of ptxas fails the build, one of the in-process compiler
         * would end the program: such a module is ptxas's, keyed as such */
        j->ptxas_instead = 1;
        if ((st = switch_to_ptxas(j, split, unit_cost)) != TC_OK)
            return st;
        if (!explaining(j) && !tc_session_files_ready(s)) /* its input is a file now */
            return TC_ERR_IO;
        if (explaining(j)) {
            s->r->report.module_hit = module_tier(j) && tc_store_has(s->store, s->o->arch,
                                                                     TC_REC_MODULE, &j->module_key);
        } else if (module_tier(j) && module_hit(j)) {
            s->delta.v[TC_C_MODULE_MISSES]--; /* counted for the first key */
            s->delta.v[TC_C_MODULE_HITS]++;
            return TC_OK;
        }
    }
    if (rc == 1)
        return compile_whole_module(j, why, small);
    if (!explaining(j) && !s->linker.kind)
        return tc_session_fail(s, TC_ERR_TOOLCHAIN, "%s", s->linker_error);
    if (!explaining(j)) /* a link follows: the linker's first use, while units compile */
        tc_linker_prewarm(&s->linker, s->o->arch);
    st = tc_split_build(j);
    if (st != TC_ERR_LINK || explaining(j))
        return st;
    /* Units the whole-module compile would accept can fail to link: a
     * kernel whose register cap is below what a function compiled in the
     * module data uses, an .extern variable the whole compile defines.
     * The module is then compiled whole, as it would have been had the
     * slicer known; its units stay cached. */
    const char *d = s->r->diag.data ? s->r->diag.data : "";
    const char *e = strstr(d, "error: ");
    snprintf(why, sizeof why, "its units do not link (%.*s)",
             e ? (int)strcspn(e + 7, "\n") : 0, e ? e + 7 : "");
    tc_split_free(j);
    tc_result_clear(s->r);
    tc_sb_reset(&j->warnings);
    return compile_whole_module(j, why, 0);
}

static tc_status run(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                     const char *name, tc_result **out, tc_call call)
{
    if (!out)
        return TC_ERR_INVALID;
    *out = NULL;
    if (!opts || (!ptx && size))
        return TC_ERR_INVALID;
    tc_session s;
    if (tc_session_begin(&s, call, cache, opts, name) != 0)
        return TC_ERR_NOMEM;
    memcpy(s.r->arch, opts->arch, sizeof s.r->arch); /* for tc_result_ptxas_report */
    tc_ptx_job j;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.emit_lock, NULL);
    pthread_mutex_init(&j.link_lock, NULL);
    j.s = &s;
    j.src = ptx ? ptx : "";
    j.input_len = size;
    j.len = tc_ptx_text_len(j.src, size);
    tc_status st = build(&j);
    if (st == TC_OK && !explaining(&j) && module_tier(&j) && !s.r->report.module_hit)
        store_module(&j);
    tc_split_free(&j);
    tc_slicer_free(j.slicer);
    if (j.parsed)
        tc_ptx_module_free(&j.m);
    tc_sb_free(&j.warnings);
    pthread_mutex_destroy(&j.emit_lock);
    pthread_mutex_destroy(&j.link_lock);
    *out = tc_session_finish(&s, st);
    return st;
}

tc_status tc_build(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                   const char *name, tc_result **out)
{
    return run(cache, opts, ptx, size, name, out, TC_CALL_BUILD);
}

tc_status tc_explain(tc_cache *cache, const tc_options *opts, const void *ptx, size_t size,
                     const char *name, tc_result **out)
{
    return run(cache, opts, ptx, size, name, out, TC_CALL_EXPLAIN);
}
