/* jit: what the interceptor does with a driver call that may carry PTX.
 * It lives in the builder library (libtaskcache_jit.so), which the
 * preloaded part loads on the first call that needs it (front.c).
 *
 * A PTX module handed to cuModuleLoadData(Ex) or cuLibraryLoadData is built
 * with taskcache (split, compiled in parallel, cached in the user's cache)
 * for the architecture the driver would compile it for, and the driver is
 * given the linked cubin instead. A PTX input of a link session is built
 * into the relocatable object the driver would compile it to, and the
 * driver links that object with the session's other inputs. Everything
 * else goes to the driver exactly as the program made the call: a cubin or
 * fatbin, an option whose effect taskcache cannot reproduce, a build that
 * fails (the driver then reports the error the way it always does). The
 * program sees the driver's behaviour, faster.
 *
 * Silent unless TASKCACHE_LOG names a file, which gets one line per call. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "taskcache.h"

/* the library's internals, for the statistics of `taskcache run` */
#include "api/handles.h"
#include "store/stats.h"

#include "intercept/intercept.h"

enum { CUDA_ERROR_NOT_SUPPORTED = 801 };

/* ---- process state --------------------------------------------------------------------- */

static tc_cache *cache; /* NULL: builds without a cache (it could not be opened) */
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void open_cache(void)
{
    if (tc_cache_open(NULL, &cache, NULL) != TC_OK)
        cache = NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define note tc_intercept_note

/* ---- JIT options -------------------------------------------------------------------------- */

typedef struct jit_opts {
    char why[96];         /* non-empty: the call goes to the driver unchanged, because */
    char arch[16];        /* CU_JIT_TARGET, or "" for the context's device */
    int cc;               /* a link's: its context's device's compute capability at
                             cuLinkCreate, or 0 (ask the current context) */
    /* what reaches the compiler: -1 where the option was not given */
    long maxreg, opt_level, lineinfo, cache_mode, split;
    char *info, *error;   /* the caller's log buffers, */
    size_t info_cap, error_cap;
    int info_at, error_at, wall_at; /* and the slots that report back, or -1 */
} jit_opts;

static void opts_init(jit_opts *o)
{
    memset(o, 0, sizeof *o);
    o->maxreg = o->opt_level = o->lineinfo = o->cache_mode = o->split = -1;
    o->info_at = o->error_at = o->wall_at = -1;
}

static unsigned uval(void **values, unsigned i) { return (unsigned)(uintptr_t)values[i]; }

/* Reads the options of one call into o. As in the driver, a later value of
 * an option replaces an earlier one, and a link input's options are read
 * into the same o after the link's, replacing those they name again
 * (checked against the H200's driver: tests/gpu/jit_options.py). Unknown
 * options, those whose effect taskcache does not reproduce, and those the
 * driver refuses (it then fails the call itself) set o->why. link_input:
 * the options of cuLinkAddData/cuLinkAddFile, which take compiler options
 * only. */
static void read_options(jit_opts *o, unsigned n, const CUjit_option *options, void **values,
                         int link_input)
{
    if (n && (!options || !values)) {
        snprintf(o->why, sizeof o->why, "%u options without %s", n,
                 options ? "values" : "the options");
        return;
    }
    for (unsigned i = 0; i < n && !o->why[0]; i++) {
        unsigned v = uval(values, i);
        switch (options[i]) {
        case CU_JIT_MAX_REGISTERS:
            if (v == 0) /* the driver: CUDA_ERROR_INVALID_VALUE */
                snprintf(o->why, sizeof o->why, "maximum registers 0");
            o->maxreg = v;
            break;
        case CU_JIT_OPTIMIZATION_LEVEL: /* 0-4, 4 the default: ptxas's -O3 */
            if (v > 4)
                snprintf(o->why, sizeof o->why, "optimization level %u", v);
            o->opt_level = v;
            break;
        case CU_JIT_GENERATE_LINE_INFO:
            o->lineinfo = v != 0;
            break;
        case CU_JIT_CACHE_MODE:
            if (v != CU_JIT_CACHE_OPTION_NONE && v != CU_JIT_CACHE_OPTION_CG &&
                v != CU_JIT_CACHE_OPTION_CA)
                snprintf(o->why, sizeof o->why, "cache mode %u", v);
            o->cache_mode = v;
            break;
        case CU_JIT_SPLIT_COMPILE: /* a relocatable compile's code depends on it
                                    * (0 on a machine of one CPU: see options.c) */
            o->split = v;
            break;
        case CU_JIT_TARGET:
        case CU_JIT_TARGET_FROM_CUCONTEXT:
        case CU_JIT_INFO_LOG_BUFFER:
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        case CU_JIT_ERROR_LOG_BUFFER:
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        case CU_JIT_WALL_TIME:
            if (link_input) { /* the driver: CUDA_ERROR_INVALID_VALUE */
                snprintf(o->why, sizeof o->why, "JIT option %d for a link input",
                         (int)options[i]);
                break;
            }
            if (options[i] == CU_JIT_TARGET) {
                unsigned base = v >= CU_COMPUTE_FAMILY_TARGET_BASE ? CU_COMPUTE_FAMILY_TARGET_BASE
                                : v >= CU_COMPUTE_ACCELERATED_TARGET_BASE
                                    ? CU_COMPUTE_ACCELERATED_TARGET_BASE
                                    : 0;
                snprintf(o->arch, sizeof o->arch, "sm_%u%s", v - base,
                         base == CU_COMPUTE_FAMILY_TARGET_BASE        ? "f"
                         : base == CU_COMPUTE_ACCELERATED_TARGET_BASE ? "a"
                                                                      : "");
            } else if (options[i] == CU_JIT_INFO_LOG_BUFFER) {
                o->info = values[i];
            } else if (options[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) {
                o->info_cap = v;
                o->info_at = (int)i;
            } else if (options[i] == CU_JIT_ERROR_LOG_BUFFER) {
                o->error = values[i];
            } else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
                o->error_cap = v;
                o->error_at = (int)i;
            } else if (options[i] == CU_JIT_WALL_TIME) {
                o->wall_at = (int)i;
            } /* CU_JIT_TARGET_FROM_CUCONTEXT: the context's device, unless
               * CU_JIT_TARGET is given, before or after it (as the
               * driver has it) */
            break;
        case CU_JIT_FALLBACK_STRATEGY: /* chooses between PTX and a binary: PTX it is */
            if (link_input) /* the H200's driver: CUDA_ERROR_INVALID_VALUE, either value */
                snprintf(o->why, sizeof o->why, "JIT option %d for a link input",
                         (int)options[i]);
            else if (v != CU_PREFER_PTX && v != CU_PREFER_BINARY) /* what it makes of it */
                snprintf(o->why, sizeof o->why, "fallback strategy %u", v);
            break;
        case CU_JIT_FTZ:               /* these four apply to link-time optimization */
        case CU_JIT_PREC_DIV:          /* of NVVM IR only (CU_JIT_LTO), never to PTX */
        case CU_JIT_PREC_SQRT:
        case CU_JIT_FMA:
            break;
        case CU_JIT_GENERATE_DEBUG_INFO:
        case CU_JIT_LOG_VERBOSE:
        case CU_JIT_LTO:
        case CU_JIT_FAST_COMPILE:
            if (v)
                snprintf(o->why, sizeof o->why, "JIT option %d = %u", (int)options[i], v);
            break;
        default:
            snprintf(o->why, sizeof o->why, "JIT option %d", (int)options[i]);
            break;
        }
    }
    /* a size with no buffer: the H200's driver answers CUDA_ERROR_INVALID_VALUE */
    if (!o->why[0] && ((o->info_at >= 0 && o->info_cap && !o->info) ||
                       (o->error_at >= 0 && o->error_cap && !o->error)))
        snprintf(o->why, sizeof o->why, "a log buffer size with no buffer");
}

/* The compiler options the JIT options stand for. */
static int add_compiler_options(tc_options *opts, const jit_opts *o)
{
    char opt[5][48];
    int n = 0;
    if (o->maxreg >= 0)
        snprintf(opt[n++], sizeof opt[0], "--maxrregcount=%ld", o->maxreg);
    if (o->opt_level >= 0 && o->opt_level < 4) /* 4, the default, is ptxas's own -O3 */
        snprintf(opt[n++], sizeof opt[0], "-O%ld", o->opt_level);
    if (o->lineinfo > 0)
        snprintf(opt[n++], sizeof opt[0], "-lineinfo");
    if (o->cache_mode == CU_JIT_CACHE_OPTION_CG || o->cache_mode == CU_JIT_CACHE_OPTION_CA)
        snprintf(opt[n++], sizeof opt[0], "--def-load-cache=%s",
                 o->cache_mode == CU_JIT_CACHE_OPTION_CG ? "cg" : "ca");
    if (o->split >= 0)
        snprintf(opt[n++], sizeof opt[0], "--split-compile=%ld", o->split);
    for (int i = 0; i < n; i++)
        if (tc_options_add_compiler_option(opts, opt[i], NULL) != TC_OK)
            return -1;
    return 0;
}

/* Writes log (NUL-terminated) as the driver writes an info log into a
 * buffer of cap bytes: the whole text and its size with the NUL, or, when
 * it does not fit, an empty text and size 0 (the driver cuts nothing). */
static void put_log(char *buf, size_t cap, const char *log, void **size_out)
{
    size_t n = strlen(log);
    if (n + 1 > cap)
        n = 0;
    memcpy(buf, log, n);
    buf[n] = '\0';
    *size_out = (void *)(uintptr_t)(n ? n + 1 : 0);
}

/* Reports back as the driver does: the info log gets the compiler's
 * warnings, the error log nothing, the wall time the milliseconds spent. */
static void report(const jit_opts *o, void **values, const char *warnings, double seconds)
{
    if (!values)
        return;
    if (o->info && o->info_at >= 0 && o->info_cap)
        put_log(o->info, o->info_cap, warnings, &values[o->info_at]);
    if (o->error && o->error_at >= 0 && o->error_cap) {
        o->error[0] = '\0';
        values[o->error_at] = (void *)(uintptr_t)0;
    }
    if (o->wall_at >= 0) {
        float ms = (float)(seconds * 1000.0);
        values[o->wall_at] = NULL;
        memcpy(&values[o->wall_at], &ms, sizeof ms);
    }
}

/* ---- building --------------------------------------------------------------------------- */

/* The compute capability of dev as 10 * major + minor, or -1. */
static int capability(CUdevice dev)
{
    const tc_real_driver *d = tc_real();
    int major = 0, minor = 0;
    if (!d->cuDeviceGetAttribute ||
        d->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        d->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        return -1;
    return major * 10 + minor;
}

/* The current context's device into *dev: 0, or -1 when there is no context. */
static int context_device(CUdevice *dev)
{
    const tc_real_driver *d = tc_real();
    return d->cuCtxGetDevice && d->cuCtxGetDevice(dev) == CUDA_SUCCESS ? 0 : -1;
}

/* Whether every device has the current context's device's compute
 * capability. A library is loaded into every context, those there are and
 * those to come, and from PTX the driver compiles it for each one's device:
 * one cubin stands for that only when the devices are alike. */
static int devices_alike(void)
{
    const tc_real_driver *d = tc_real();
    CUdevice here, dev;
    int count = 0, cc;
    if (!d->cuDeviceGetCount || !d->cuDeviceGet || context_device(&here) != 0 ||
        (cc = capability(here)) < 0 || d->cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return 0;
    for (int i = 0; i < count; i++)
        if (d->cuDeviceGet(&dev, i) != CUDA_SUCCESS || capability(dev) != cc)
            return 0;
    return 1;
}

/* The architecture the driver compiles for: CU_JIT_TARGET, else the
 * device of the current context (a link's: of the context it was created
 * in); PTX written for that device's
 * architecture-specific or family target (.target sm_90a) keeps it. */
static int target_arch(const jit_opts *o, const char *ptx, char *out, size_t cap)
{
    if (o->arch[0]) {
        snprintf(out, cap, "%s", o->arch);
        return 0;
    }
    CUdevice dev;
    int cc = o->cc;
    if (cc <= 0 && (context_device(&dev) != 0 || (cc = capability(dev)) < 0))
        return -1;
    snprintf(out, cap, "sm_%d", cc);
    const char *t = strstr(ptx, ".target");
    if (t) {
        t += 7;
        while (*t == ' ' || *t == '\t')
            t++;
        size_t n = strlen(out);
        if (!strncmp(t, out, n) && (t[n] == 'a' || t[n] == 'f') &&
            !(t[n + 1] >= 'a' && t[n + 1] <= 'z') && !(t[n + 1] >= '0' && t[n + 1] <= '9'))
            snprintf(out + n, cap - n, "%c", t[n]);
    }
    return 0;
}

/* Appends the compiler's warnings among a build's diagnostics to out, for
 * the info log, as the driver writes them (the H200's driver 580):
 * "ptxas application ptx input, line N; warning : TEXT", or "ptxas warning
 * : TEXT" for one about no line, one a line, after a newline when out
 * holds text already, no newline after the last. taskcache's own warnings
 * (a cache it cannot write) go to its log, not the program's. */
static void warnings_of(const tc_result *r, tc_sb *out)
{
    for (const char *d = r ? tc_result_diagnostics(r) : ""; *d;) {
        size_t len = strcspn(d, "\n");
        const char *w = memmem(d, len, ": warning: ", 11);
        if (w && strncmp(d, "taskcache: ", 11) != 0) {
            const char *text = w + 11, *colon = memrchr(d, ':', (size_t)(w - d));
            char *end;
            unsigned long line = colon ? strtoul(colon + 1, &end, 10) : 0;
            if (out->len)
                tc_sb_putc(out, '\n');
            if (colon && end == w && line > 0)
                tc_sb_printf(out, "ptxas application ptx input, line %lu; ", line);
            else
                tc_sb_puts(out, "ptxas ");
            tc_sb_printf(out, "warning : %.*s", (int)(d + len - text), text);
        }
        d += len + (d[len] == '\n');
    }
}

/* Builds PTX with taskcache: an image, or for a link the relocatable
 * object the driver's link compiles PTX to. NULL (with why set) when the
 * driver must do it: no current context, or the build failed. */
static tc_result *build(const char *call, const char *ptx, size_t len, jit_opts *o,
                        tc_output output)
{
    char arch[16];
    if (tc_intercept_driver_jit_disabled()) {
        snprintf(o->why, sizeof o->why, "CUDA_DISABLE_PTX_JIT is set: the driver compiles none");
        return NULL;
    }
    if (target_arch(o, ptx, arch, sizeof arch) != 0) {
        snprintf(o->why, sizeof o->why, "no current context to take the target from");
        return NULL;
    }
    pthread_once(&cache_once, open_cache);
    tc_options *opts = tc_options_new();
    if (opts)
        opts->driver_load = 1; /* counted as driver_built when it succeeds */
    tc_result *r = NULL;
    tc_status st = TC_ERR_NOMEM;
    if (opts && tc_options_set_arch(opts, arch, NULL) == TC_OK &&
        tc_options_set_output(opts, output) == TC_OK)
        st = add_compiler_options(opts, o) == 0 ? tc_build(cache, opts, ptx, len, call, &r)
                                                : TC_ERR_INVALID;
    tc_options_free(opts);
    if (st == TC_OK)
        return r;
    const char *diag = r ? tc_result_diagnostics(r) : "";
    snprintf(o->why, sizeof o->why, "%s: %.*s", tc_status_name(st), (int)strcspn(diag, "\n"),
             diag);
    tc_result_free(r);
    return NULL;
}

/* A PTX input the driver compiles after all: driver_passed in `taskcache
 * stats` (the log says why). */
static void count_passed(void)
{
    if (tc_intercept_measure())
        return;
    pthread_once(&cache_once, open_cache);
    if (cache)
        tc_cache_count(cache, TC_C_DRIVER_PASSED, 1);
}

static void note_built(const char *call, const tc_result *r, double t)
{
    tc_report rep;
    tc_result_report(r, &rep);
    if (!rep.split && !rep.module_hit) /* one compile of the module, no units */
        note("%s: built with taskcache: %u kernels, compiled whole, %.3f s; compiler: %s", call,
             rep.entries, t, tc_result_compiler(r));
    else
        note("%s: built with taskcache: %u kernels, %s%u of %u units from the cache, %u "
             "compiled, %.3f s; compiler: %s", call, rep.entries,
             rep.module_hit ? "module record hit, " : "", rep.unit_hits, rep.units,
             rep.units_compiled, t, tc_result_compiler(r));
}

/* ---- modules and libraries ------------------------------------------------------------- */

CUresult tc_jit_module_load(CUmodule *module, const void *image, unsigned n,
                            CUjit_option *options, void **values, int ex)
{
    const tc_real_driver *d = tc_real();
    const char *call = ex ? "cuModuleLoadDataEx" : "cuModuleLoadData";
    if (!(ex ? (void *)d->cuModuleLoadDataEx : (void *)d->cuModuleLoadData))
        return CUDA_ERROR_NOT_SUPPORTED;
#define PASS() (ex ? d->cuModuleLoadDataEx(module, image, n, options, values) \
                   : d->cuModuleLoadData(module, image))
    size_t len = image ? tc_ptx_length(image) : 0;
    tc_trace_load(call, len);
    if (!len)
        return PASS();
    double t0 = now();
    if (tc_intercept_measure()) {
        CUresult rc = PASS();
        note("%s: the driver compiled %zu bytes of PTX in %.3f s (result %d)", call, len,
             now() - t0, rc);
        return rc;
    }
    jit_opts o;
    opts_init(&o);
    read_options(&o, n, options, values, 0);
    tc_result *r = o.why[0] ? NULL : build(call, image, len, &o, TC_OUTPUT_IMAGE);
    if (!r) {
        note("%s: passed to the driver: %s", call, o.why);
        count_passed();
        return PASS();
    }
    size_t size;
    const void *cubin = tc_result_image(r, &size);
    CUresult rc = d->cuModuleLoadData(module, cubin);
    if (rc != CUDA_SUCCESS) {
        note("%s: the driver refused taskcache's cubin (error %d): passed to the driver", call,
             rc);
        count_passed();
        tc_result_free(r);
        return PASS();
    }
#undef PASS
    tc_sb warnings = TC_SB_INIT;
    warnings_of(r, &warnings);
    report(&o, values, warnings.oom || !warnings.data ? "" : warnings.data, now() - t0);
    tc_sb_free(&warnings);
    note_built(call, r, now() - t0);
    tc_result_free(r); /* the driver copied the image */
    return rc;
}

CUresult tc_jit_library_load(CUlibrary *library, const void *code, CUjit_option *options,
                             void **values, unsigned n, CUlibraryOption *lib_options,
                             void **lib_values, unsigned lib_n)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLibraryLoadData)
        return CUDA_ERROR_NOT_SUPPORTED;
#define PASS() d->cuLibraryLoadData(library, code, options, values, n, lib_options, lib_values, lib_n)
    size_t len = code ? tc_ptx_length(code) : 0;
    tc_trace_load("cuLibraryLoadData", len);
    if (!len || lib_n > 16 || (lib_n && (!lib_options || !lib_values)))
        return PASS(); /* the driver answers what it makes of the arrays */
    double t0 = now();
    if (tc_intercept_measure()) {
        CUresult rc = PASS();
        note("cuLibraryLoadData: the driver compiled %zu bytes of PTX in %.3f s (result %d)",
             len, now() - t0, rc);
        return rc;
    }
    jit_opts o;
    opts_init(&o);
    read_options(&o, n, options, values, 0);
    if (!o.why[0] && !o.arch[0] && !devices_alike())
        snprintf(o.why, sizeof o.why, "devices of more than one architecture, each of which "
                                      "the driver compiles a library for");
    tc_result *r = o.why[0] ? NULL : build("cuLibraryLoadData", code, len, &o, TC_OUTPUT_IMAGE);
    if (!r) {
        note("cuLibraryLoadData: passed to the driver: %s", o.why);
        count_passed();
        return PASS();
    }
    /* CU_LIBRARY_BINARY_IS_PRESERVED lets the driver keep pointing into
     * the caller's code: ours is freed below, so the driver must copy it */
    CUlibraryOption kept[16];
    void *kept_values[16];
    unsigned k = 0;
    for (unsigned i = 0; i < lib_n; i++)
        if (lib_options[i] != CU_LIBRARY_BINARY_IS_PRESERVED) {
            kept[k] = lib_options[i];
            kept_values[k++] = lib_values ? lib_values[i] : NULL;
        }
    size_t size;
    const void *cubin = tc_result_image(r, &size);
    CUresult rc = d->cuLibraryLoadData(library, cubin, NULL, NULL, 0, k ? kept : NULL,
                                       k ? kept_values : NULL, k);
    if (rc != CUDA_SUCCESS) {
        note("cuLibraryLoadData: the driver refused taskcache's cubin (error %d): passed to "
             "the driver", rc);
        count_passed();
        tc_result_free(r);
        return PASS();
    }
#undef PASS
    tc_sb warnings = TC_SB_INIT;
    warnings_of(r, &warnings);
    report(&o, values, warnings.oom || !warnings.data ? "" : warnings.data, now() - t0);
    tc_sb_free(&warnings);
    note_built("cuLibraryLoadData", r, now() - t0);
    tc_result_free(r);
    return rc;
}

/* ---- link sessions ---------------------------------------------------------------------- */

/* The driver treats a link's PTX as relocatable code: it compiles each PTX
 * input as `ptxas -c` does and links the objects (on the H200 its image's
 * code is that of ptxas -c + nvlink, not that of a whole-program compile).
 * So taskcache builds each PTX input into that relocatable object (one
 * compile of the module, cached as a module record) and hands the driver
 * the object in its place; the driver links whatever the session holds,
 * as it would have. Per session, the interceptor keeps the link's options
 * (a PTX input's own options are added to them for that input) and the
 * compiler warnings of the inputs it built, for the info log. */
typedef struct session {
    CUlinkState state;
    jit_opts opts;           /* cuLinkCreate's: their report slots are the caller's */
    void **values;
    int passed;              /* the driver compiles this session's PTX */
    tc_sb warnings;          /* of the PTX inputs taskcache built, for the info log */
    struct session *next;
} session;

static session *sessions;
static pthread_mutex_t sessions_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A fork while another thread holds the list's lock must not leave the
 * child with a lock nobody will release. */
static void fork_prepare(void) { pthread_mutex_lock(&sessions_lock); }
static void fork_release(void) { pthread_mutex_unlock(&sessions_lock); }
static void install_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

static session *find(CUlinkState state)
{
    pthread_mutex_lock(&sessions_lock);
    session *s = sessions;
    while (s && s->state != state)
        s = s->next;
    pthread_mutex_unlock(&sessions_lock);
    return s;
}

CUresult tc_jit_link_create(int v, unsigned n, CUjit_option *options, void **values,
                            CUlinkState *state)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkCreate[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = d->cuLinkCreate[v](n, options, values, state);
    tc_trace_link_create(v, n, rc);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_once(&fork_once, install_fork_handlers);
    session *s = calloc(1, sizeof *s);
    if (!s)
        return rc; /* the driver compiles its PTX, as if we were not here */
    s->state = *state;
    opts_init(&s->opts);
    read_options(&s->opts, n, options, values, 0);
    /* cuLinkCreate needs a current context (CUDA_ERROR_INVALID_CONTEXT):
     * the link is that context's, and compiles for its device even when
     * inputs are added while another context is current */
    CUdevice dev;
    if (!s->opts.arch[0] && context_device(&dev) == 0 && (s->opts.cc = capability(dev)) < 0)
        s->opts.cc = 0;
    s->values = values;
    s->passed = s->opts.why[0] != 0 || tc_intercept_measure();
    if (s->opts.why[0])
        note("cuLinkCreate: the driver compiles this session's PTX: %s", s->opts.why);
    pthread_mutex_lock(&sessions_lock);
    s->next = sessions;
    sessions = s;
    pthread_mutex_unlock(&sessions_lock);
    return rc;
}

/* Builds a PTX input of session s and adds the object to the driver's
 * link in its place: 1 done (*rc the driver's answer), 0 the driver must
 * have the PTX as given (the log says why). */
static int add_built(int v, session *s, const char *call, const char *ptx, size_t len,
                     const char *name, unsigned n, CUjit_option *options, void **values,
                     CUresult *rc)
{
    jit_opts o = s->opts; /* the link's options, replaced by this input's */
    o.why[0] = '\0';
    read_options(&o, n, options, values, 1);
    double t0 = now();
    tc_result *r = o.why[0] ? NULL : build(call, ptx, len, &o, TC_OUTPUT_OBJECT);
    if (!r) {
        note("%s: passed to the driver: %s", call, o.why);
        count_passed();
        return 0;
    }
    size_t size;
    void *object = (void *)tc_result_image(r, &size);
    *rc = tc_real()->cuLinkAddData[v](s->state, CU_JIT_INPUT_CUBIN, object, size, name, 0,
                                      NULL, NULL);
    if (*rc != CUDA_SUCCESS) {
        note("%s: the driver refused taskcache's object (error %d): passed to the driver", call,
             (int)*rc);
        count_passed();
        tc_result_free(r);
        return 0;
    }
    /* two threads may add inputs to one link: the list's lock keeps the
     * session's warnings whole */
    pthread_mutex_lock(&sessions_lock);
    warnings_of(r, &s->warnings);
    pthread_mutex_unlock(&sessions_lock);
    note_built(call, r, now() - t0);
    tc_result_free(r); /* the driver copied the object */
    return 1;
}

CUresult tc_jit_link_add_data(int v, CUlinkState state, CUjitInputType type, void *data,
                              size_t size, const char *name, unsigned n, CUjit_option *options,
                              void **values)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkAddData[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    session *s = find(state);
    tc_trace_link_add_data(v, type, size);
    /* The PTX is the size bytes given: a NUL may end it earlier (as C
     * strings carry one), but none need follow it (Rust's cust passes a
     * slice): read no further than size, through a copy ended by a NUL. */
    char *copy = NULL;
    const char *text = NULL;
    if (s && type == CU_JIT_INPUT_PTX && data && size) {
        text = data;
        if (!memchr(data, 0, size) && (text = copy = malloc(size + 1)) != NULL) {
            memcpy(copy, data, size);
            copy[size] = '\0';
        }
    }
    size_t len = text ? tc_ptx_length(text) : 0;
    CUresult rc;
    int done = len && len <= size && !s->passed &&
               add_built(v, s, "cuLinkAddData", text, len, name, n, options, values, &rc);
    free(copy);
    if (done)
        return rc;
    if (s && type == CU_JIT_INPUT_PTX && s->passed && tc_intercept_measure()) {
        double t0 = now(); /* the driver compiles PTX as it is added */
        rc = d->cuLinkAddData[v](state, type, data, size, name, n, options, values);
        note("cuLinkAddData: the driver compiled %zu bytes of PTX in %.3f s (result %d)", len,
             now() - t0, rc);
        return rc;
    }
    if (s && type == CU_JIT_INPUT_PTX && s->passed)
        count_passed();
    return d->cuLinkAddData[v](state, type, data, size, name, n, options, values);
}

/* The text of a PTX file, or NULL. */
static char *read_text(const char *path)
{
    FILE *f = path ? fopen(path, "rb") : NULL;
    char *text = NULL;
    struct stat st;
    if (f && fstat(fileno(f), &st) == 0 && st.st_size > 0 &&
        (text = malloc((size_t)st.st_size + 1)) != NULL)
        text[fread(text, 1, (size_t)st.st_size, f)] = '\0';
    if (f)
        fclose(f);
    return text;
}

CUresult tc_jit_link_add_file(int v, CUlinkState state, CUjitInputType type, const char *path,
                              unsigned n, CUjit_option *options, void **values)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkAddFile[v] || !d->cuLinkAddData[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    session *s = find(state);
    if (s && type == CU_JIT_INPUT_PTX && !s->passed) {
        char *text = read_text(path);
        size_t len = text ? tc_ptx_length(text) : 0;
        CUresult rc;
        int done = len && add_built(v, s, "cuLinkAddFile", text, len, path, n, options, values,
                                    &rc);
        free(text);
        if (done)
            return rc;
    } else if (s && type == CU_JIT_INPUT_PTX) {
        count_passed();
    }
    return d->cuLinkAddFile[v](state, type, path, n, options, values);
}

/* The driver links; the info log then also gets the warnings of the PTX
 * inputs taskcache compiled, which the driver would have written there. */
CUresult tc_jit_link_complete(CUlinkState state, void **cubin, size_t *size)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkComplete)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = d->cuLinkComplete(state, cubin, size);
    session *s = find(state);
    const jit_opts *o = s ? &s->opts : NULL;
    if (s)
        pthread_mutex_lock(&sessions_lock);
    if (rc == CUDA_SUCCESS && o && s->warnings.len && !s->warnings.oom && o->info &&
        o->info_at >= 0 && o->info_cap && s->values) {
        /* the driver's own log: read no further than the size it says it
         * wrote (with the NUL) */
        size_t had = (size_t)(uintptr_t)s->values[o->info_at];
        size_t n = had > 1 && had <= o->info_cap ? strnlen(o->info, had - 1) : 0;
        tc_sb log = TC_SB_INIT;
        if (n) {
            tc_sb_append(&log, o->info, n);
            tc_sb_putc(&log, '\n');
        }
        tc_sb_append(&log, s->warnings.data, s->warnings.len);
        if (!log.oom)
            put_log(o->info, o->info_cap, log.data, &s->values[o->info_at]);
        tc_sb_free(&log);
    }
    if (s)
        pthread_mutex_unlock(&sessions_lock);
    return rc;
}

CUresult tc_jit_link_destroy(CUlinkState state)
{
    const tc_real_driver *d = tc_real();
    pthread_mutex_lock(&sessions_lock);
    session **p = &sessions;
    while (*p && (*p)->state != state)
        p = &(*p)->next;
    session *s = *p;
    if (s)
        *p = s->next;
    pthread_mutex_unlock(&sessions_lock);
    if (s)
        tc_sb_free(&s->warnings);
    free(s);
    return d->cuLinkDestroy ? d->cuLinkDestroy(state) : CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- what the preloaded part calls ------------------------------------------------------ */

static const tc_real_driver *(*host_real)(void);

const tc_real_driver *tc_real(void) { return host_real(); }

TC_JIT_EXPORT const tc_jit_api *tc_jit_bind(unsigned abi, const tc_real_driver *(*real)(void),
                                            int mode)
{
    static const tc_jit_api api = {tc_jit_module_load,   tc_jit_library_load,
                                   tc_jit_link_create,   tc_jit_link_add_data,
                                   tc_jit_link_add_file, tc_jit_link_complete,
                                   tc_jit_link_destroy};
    if (abi != TC_JIT_ABI || !real || mode == TC_INTERCEPT_OFF) /* never asked when off */
        return NULL;
    host_real = real;
    tc_intercept_set_mode(mode);
    return &api;
}
