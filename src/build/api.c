/* api: the public handles of taskcache.h that are not the build itself:
 * versions and status names, options, the cache handle and its
 * statistics, and result accessors. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../compile/nvptx.h"
#include "../store/stats.h"
#include "../util/fs.h"
#include "internal.h"

#define STR2(x) #x
#define STR(x) STR2(x)

const char *tc_version(void)
{
    return STR(TC_VERSION_MAJOR) "." STR(TC_VERSION_MINOR) "." STR(TC_VERSION_PATCH);
}

const char *tc_status_name(tc_status s)
{
    switch (s) {
    case TC_OK: return "TC_OK";
    case TC_ERR_INVALID: return "TC_ERR_INVALID";
    case TC_ERR_PARSE: return "TC_ERR_PARSE";
    case TC_ERR_COMPILE: return "TC_ERR_COMPILE";
    case TC_ERR_LINK: return "TC_ERR_LINK";
    case TC_ERR_TOOLCHAIN: return "TC_ERR_TOOLCHAIN";
    case TC_ERR_IO: return "TC_ERR_IO";
    case TC_ERR_NOMEM: return "TC_ERR_NOMEM";
    case TC_ERR_DRIVER: return "TC_ERR_DRIVER";
    case TC_ERR_NOT_FOUND: return "TC_ERR_NOT_FOUND";
    case TC_ERR_CANCELLED: return "TC_ERR_CANCELLED";
    }
    return "TC_ERR_UNKNOWN";
}

tc_status tc_set_error(tc_error *err, tc_status code, const char *fmt, ...)
{
    if (err) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

void tc_clear_error(tc_error *err)
{
    if (err) {
        err->code = TC_OK;
        err->message[0] = '\0';
    }
}

/* ---- options --------------------------------------------------------------- */

tc_options *tc_options_new(void)
{
    tc_options *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    o->jobs = n > 0 ? (int)n : 1;
    o->module_tier = o->unit_tier = o->split = 1;
    const char *c = getenv("TASKCACHE_COMPILER");
    if (c && !strcmp(c, "ptxas"))
        o->compiler = TC_COMPILER_PTXAS;
    else if (c && !strcmp(c, "inprocess"))
        o->compiler = TC_COMPILER_INPROCESS;
    return o;
}

void tc_options_free(tc_options *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->ncopts; i++)
        free(o->copts[i]);
    free(o->copts);
    free(o->ptxas);
    free(o);
}

tc_status tc_options_set_arch(tc_options *o, const char *arch, tc_error *err)
{
    tc_clear_error(err);
    /* sm_<digits>[a|f]: also keeps the target safe as a directory name */
    size_t n = arch ? strlen(arch) : 0;
    int ok = n >= 4 && n < sizeof o->arch && !strncmp(arch, "sm_", 3);
    size_t i = 3;
    while (ok && i < n && isdigit((unsigned char)arch[i]))
        i++;
    if (ok && (i == 3 || (i < n && !(i + 1 == n && (arch[i] == 'a' || arch[i] == 'f')))))
        ok = 0;
    if (!ok)
        return tc_set_error(err, TC_ERR_INVALID,
                         "invalid target '%s': expected sm_XX with an optional a or f suffix "
                         "(e.g. sm_90, sm_90a)", arch ? arch : "(null)");
    memcpy(o->arch, arch, n + 1);
    return TC_OK;
}

/* Options that taskcache sets itself, or that would change which kernels
 * are built. Both spellings of each. */
static const char *const refused[] = {
    "-c", "--compile-only", "-o", "--output-file", "-arch", "--gpu-name", "-e", "--entry",
    "-h", "--help", "-ias", "--input-as-string", "-version-ls", "--list-version", "-optf",
    "--options-file", "-v", "--verbose", "-V", "--version", "-astoolspatch",
    "--compile-as-tools-patch",
};

tc_status tc_options_add_compiler_option(tc_options *o, const char *opt, tc_error *err)
{
    tc_clear_error(err);
    if (!opt || opt[0] != '-' || !opt[1])
        return tc_set_error(err, TC_ERR_INVALID, "compiler option '%s' does not start with '-'",
                         opt ? opt : "(null)");
    size_t name_len = strcspn(opt, "=");
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        if (strlen(refused[i]) == name_len && !strncmp(opt, refused[i], name_len))
            return tc_set_error(err, TC_ERR_INVALID,
                             "compiler option '%s' is set by taskcache itself and cannot be "
                             "given", opt);
    char **p = realloc(o->copts, (o->ncopts + 1) * sizeof *p);
    if (!p)
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    o->copts = p;
    if (!(o->copts[o->ncopts] = strdup(opt)))
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    o->ncopts++;
    return TC_OK;
}

tc_status tc_options_set_jobs(tc_options *o, int jobs)
{
    if (jobs < 1)
        return TC_ERR_INVALID;
    o->jobs = jobs;
    return TC_OK;
}

tc_status tc_options_set_ptxas(tc_options *o, const char *path)
{
    char *p = path ? strdup(path) : NULL;
    if (path && !p)
        return TC_ERR_NOMEM;
    free(o->ptxas);
    o->ptxas = p;
    return TC_OK;
}

tc_status tc_options_set_tier(tc_options *o, tc_tier tier, int enabled)
{
    if (tier == TC_TIER_MODULE)
        o->module_tier = !!enabled;
    else if (tier == TC_TIER_UNIT)
        o->unit_tier = !!enabled;
    else
        return TC_ERR_INVALID;
    return TC_OK;
}

tc_status tc_options_set_compiler(tc_options *o, tc_compiler c)
{
    if (c != TC_COMPILER_AUTO && c != TC_COMPILER_PTXAS && c != TC_COMPILER_INPROCESS)
        return TC_ERR_INVALID;
    o->compiler = c;
    return TC_OK;
}

int tc_have_inprocess_compiler(void) { return tc_nvptx_available(); }

tc_status tc_options_set_unit_code(tc_options *o, tc_unit_code code)
{
    if (code != TC_UNIT_CODE_RELOCATABLE && code != TC_UNIT_CODE_WHOLE_PROGRAM)
        return TC_ERR_INVALID;
    o->unit_code = code;
    return TC_OK;
}

tc_status tc_options_set_cancel(tc_options *o, const volatile sig_atomic_t *flag)
{
    o->cancel = flag;
    return TC_OK;
}

tc_status tc_options_set_split(tc_options *o, int enabled)
{
    o->split = !!enabled;
    return TC_OK;
}

tc_status tc_options_set_unit_cost(tc_options *o, unsigned cost)
{
    o->unit_cost = cost;
    return TC_OK;
}

/* ---- cache ----------------------------------------------------------------- */

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
    c->memo_dir = tc_path_join(c->dir, "toolchain");
    c->store = c->memo_dir ? tc_store_open(c->dir) : NULL;
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

void tc_cache_release(tc_cache *c)
{
    /* acquire-release: the thread that frees sees every write made by the
     * calls that released before it */
    if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    tc_store_close(c->store);
    free(c->memo_dir);
    free(c->dir);
    free(c);
}

void tc_cache_close(tc_cache *c) { tc_cache_release(c); }

const char *tc_cache_dir(const tc_cache *c) { return c->dir; }

const char *tc_cache_warning(const tc_cache *c) { return tc_store_warning(c->store); }

static tc_status cache_stats(tc_cache *c, tc_stats *out, tc_error *err)
{
    tc_clear_error(err);
    tc_counters k;
    tc_stats_read(c->dir, &k);
    memset(out, 0, sizeof *out);
    out->builds = k.v[TC_C_BUILDS];
    out->module_hits = k.v[TC_C_MODULE_HITS];
    out->module_misses = k.v[TC_C_MODULE_MISSES];
    out->unit_hits = k.v[TC_C_UNIT_HITS];
    out->unit_misses = k.v[TC_C_UNIT_MISSES];
    out->compiles = k.v[TC_C_COMPILES];
    out->compile_errors = k.v[TC_C_COMPILE_ERRORS];
    out->whole_builds = k.v[TC_C_WHOLE_BUILDS];
    out->records_written = k.v[TC_C_RECORDS_WRITTEN];
    out->bytes_written = k.v[TC_C_BYTES_WRITTEN];
    out->bad_records = k.v[TC_C_BAD_RECORDS];
    out->store_errors = k.v[TC_C_STORE_ERRORS];
    out->task_hits = k.v[TC_C_TASK_HITS];
    out->task_misses = k.v[TC_C_TASK_MISSES];
    out->codegen_calls = k.v[TC_C_CODEGEN];
    out->group_hits = k.v[TC_C_GROUP_HITS];
    out->group_misses = k.v[TC_C_GROUP_MISSES];
    out->evictions = k.v[TC_C_EVICTIONS];
    out->waited = k.v[TC_C_WAITED];
    out->max_size = tc_store_max_size(c->store);
    uint64_t counts[4];
    tc_store_count(c->store, counts, &out->disk_bytes);
    out->unit_records = counts[0];
    out->module_records = counts[1];
    out->task_records = counts[2];
    out->group_records = counts[3];
    return TC_OK;
}

tc_status tc_cache_zero_stats(tc_cache *c, tc_error *err)
{
    tc_clear_error(err);
    if (tc_stats_zero(c->dir) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot reset the statistics in %s", c->dir);
    return TC_OK;
}

uint64_t tc_cache_max_size(const tc_cache *c) { return tc_store_max_size(c->store); }

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
    tc_store_verify(c->store, remove_bad, &k, &b);
    if (checked)
        *checked = k;
    if (bad)
        *bad = b;
    return TC_OK;
}

static tc_status cache_clear(tc_cache *c, tc_error *err)
{
    tc_clear_error(err);
    if (tc_store_clear(c->store) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot remove every record under %s", c->dir);
    if ((tc_stats_zero(c->dir) != 0 || tc_stats_set(c->dir, TC_C_CACHE_BYTES, 0) != 0) &&
        !tc_store_warning(c->store))
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

/* ---- results --------------------------------------------------------------- */

tc_result *tc_result_new(void) { return calloc(1, sizeof(tc_result)); }

void tc_diag(tc_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_sb_vprintf(&r->diag, fmt, ap);
    va_end(ap);
    if (r->diag.len && r->diag.data[r->diag.len - 1] != '\n')
        tc_sb_putc(&r->diag, '\n');
}

void tc_result_free(tc_result *r)
{
    if (!r)
        return;
    tc_sb_free(&r->diag);
    free(r->image);
    free(r->whole_reason);
    for (size_t i = 0; i < r->nentries; i++)
        tc_entry_clear(&r->entries[i]);
    free(r->entries);
    for (size_t i = 0; i < r->ntasks; i++) {
        free((char *)r->tasks[i].name);
        free((char *)r->tasks[i].key);
        free((void *)r->tasks[i].metadata);
    }
    free(r->tasks);
    free(r);
}

size_t tc_result_task_count(const tc_result *r) { return r->ntasks; }

tc_status tc_result_task(const tc_result *r, size_t i, tc_task_info *out)
{
    if (i >= r->ntasks)
        return TC_ERR_INVALID;
    *out = r->tasks[i];
    return TC_OK;
}

tc_status tc_result_status(const tc_result *r) { return r->status; }

const void *tc_result_image(const tc_result *r, size_t *size)
{
    if (size)
        *size = r->image ? r->image_len : 0;
    return r->image;
}

tc_status tc_result_write_image(const tc_result *r, const char *path, tc_error *err)
{
    tc_clear_error(err);
    if (!r->image)
        return tc_set_error(err, TC_ERR_INVALID, "the build produced no image");
    if (!path || !*path)
        return tc_set_error(err, TC_ERR_INVALID, "no output path");
    if (tc_write_atomic(path, r->image, r->image_len, 0644) != 0)
        return tc_set_error(err, TC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return TC_OK;
}

const char *tc_result_diagnostics(const tc_result *r) { return r->diag.data ? r->diag.data : ""; }

const char *tc_result_whole_reason(const tc_result *r) { return r->whole_reason; }

void tc_result_report(const tc_result *r, tc_report *out) { *out = r->report; }

size_t tc_result_entry_count(const tc_result *r) { return r->nentries; }

tc_status tc_result_entry(const tc_result *r, size_t i, tc_entry_info *out)
{
    if (i >= r->nentries)
        return TC_ERR_INVALID;
    *out = r->entries[i];
    return TC_OK;
}
