/* jit: what the interceptor does with a driver call that may carry PTX.
 *
 * A PTX module handed to cuModuleLoadData(Ex) or cuLibraryLoadData is built
 * with taskcache (split, compiled in parallel, cached in the user's cache)
 * for the architecture the driver would compile it for, and the driver is
 * given the linked cubin instead. A link session whose only input is one
 * PTX module gets taskcache's cubin from cuLinkComplete. Everything else
 * goes to the driver exactly as the program made the call: a cubin or
 * fatbin, an option whose effect taskcache cannot reproduce, a link with
 * other inputs, a build that fails (the driver then reports the error the
 * way it always does). The program sees the driver's behaviour, faster.
 *
 * Silent unless TASKCACHE_LOG names a file, which gets one line per call. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
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

/* TASKCACHE_INTERCEPT: "0" (or off, no) every call goes to the driver as
 * if we were not there; "measure" the driver compiles, and the log says how
 * long it took (to compare with taskcache); else taskcache builds. */
enum { MODE_UNSET = -1, MODE_OFF, MODE_BUILD, MODE_MEASURE };
static int mode = MODE_UNSET;
static tc_cache *cache; /* NULL: builds without a cache (it could not be opened) */
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static int intercept_mode(void)
{
    if (mode == MODE_UNSET) { /* benign race: every thread computes the same */
        const char *e = getenv("TASKCACHE_INTERCEPT");
        mode = e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "no")) ? MODE_OFF
               : e && !strcmp(e, "measure")                                     ? MODE_MEASURE
                                                                                : MODE_BUILD;
    }
    return mode;
}

int tc_intercept_enabled(void) { return intercept_mode() != MODE_OFF; }

int tc_intercept_trace(void)
{
    const char *t = getenv("TASKCACHE_INTERCEPT_TRACE");
    return t && *t && strcmp(t, "0") != 0;
}

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

/* One line in $TASKCACHE_LOG, opened for each line so that forks and
 * threads need no shared state. */
#define note tc_intercept_note
void note(const char *fmt, ...)
{
    const char *path = getenv("TASKCACHE_LOG");
    if (!path || !*path)
        return;
    char line[1024], when[32] = "";
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (localtime_r(&ts.tv_sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    /* the time a line is written: a call's end, to line up with the program's own clock */
    int n = snprintf(line, sizeof line, "taskcache[%ld] %s.%03ld: ", (long)getpid(), when,
                     ts.tv_nsec / 1000000);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    ssize_t w = write(fd, line, (size_t)n);
    (void)w; /* a log that cannot be written is no reason to fail a load */
    close(fd);
}

/* ---- what is PTX -------------------------------------------------------------------------- */

/* Length of the PTX text at p, or 0 when p holds something else the driver
 * takes (a cubin, a fatbin): PTX is text that, past comments and white
 * space, starts with .version. Binary images are told by their first bytes
 * before anything reads further. */
static size_t ptx_length(const void *image)
{
    const unsigned char *p = image;
    if (!p || p[0] == 0x7f /* ELF */ || p[0] >= 0x80)
        return 0;
    if (p[0] == 0x50 && p[1] == 0xED) /* fatbin: 0xBA55ED50, little-endian */
        return 0;
    const unsigned char *s = p;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v')
            s++;
        if (s[0] == '/' && s[1] == '/') {
            while (*s && *s != '\n')
                s++;
        } else if (s[0] == '/' && s[1] == '*') {
            const char *end = strstr((const char *)s + 2, "*/");
            if (!end)
                return 0;
            s = (const unsigned char *)end + 2;
        } else {
            break;
        }
    }
    if (strncmp((const char *)s, ".version", 8) != 0)
        return 0;
    return strlen((const char *)p);
}

/* ---- JIT options -------------------------------------------------------------------------- */

typedef struct jit_opts {
    char why[96];         /* non-empty: the call goes to the driver unchanged, because */
    char arch[16];        /* CU_JIT_TARGET, or "" for the context's device */
    char copt[4][32];     /* compiler options */
    int ncopt;
    char *info, *error;   /* the caller's log buffers, */
    size_t info_cap, error_cap;
    int info_at, error_at, wall_at; /* and the slots that report back, or -1 */
} jit_opts;

static void add_copt(jit_opts *o, const char *opt) /* at most one of each: 4 */
{
    if (o->ncopt < 4)
        snprintf(o->copt[o->ncopt++], sizeof o->copt[0], "%s", opt);
}

static void add_copt_number(jit_opts *o, const char *name, unsigned v)
{
    char opt[32];
    snprintf(opt, sizeof opt, "%s%u", name, v);
    add_copt(o, opt);
}

static unsigned uval(void **values, unsigned i) { return (unsigned)(uintptr_t)values[i]; }

/* Reads the options of one call into o; options of a link and of one of
 * its inputs add up. Unknown options, and those whose effect taskcache
 * does not reproduce, set o->why. */
static void read_options(jit_opts *o, unsigned n, const CUjit_option *options, void **values)
{
    for (unsigned i = 0; i < n && !o->why[0]; i++) {
        unsigned v = values ? uval(values, i) : 0;
        switch (options[i]) {
        case CU_JIT_MAX_REGISTERS:
            add_copt_number(o, "--maxrregcount=", v);
            break;
        case CU_JIT_OPTIMIZATION_LEVEL: /* 0-4, 4 the default: ptxas's -O3 */
            if (v > 4)
                snprintf(o->why, sizeof o->why, "optimization level %u", v);
            else if (v < 4)
                add_copt_number(o, "-O", v);
            break;
        case CU_JIT_GENERATE_LINE_INFO:
            if (v)
                add_copt(o, "-lineinfo");
            break;
        case CU_JIT_CACHE_MODE:
            if (v == CU_JIT_CACHE_OPTION_CG || v == CU_JIT_CACHE_OPTION_CA)
                add_copt(o, v == CU_JIT_CACHE_OPTION_CG ? "--def-load-cache=cg"
                                                        : "--def-load-cache=ca");
            else if (v != CU_JIT_CACHE_OPTION_NONE)
                snprintf(o->why, sizeof o->why, "cache mode %u", v);
            break;
        case CU_JIT_TARGET: {
            unsigned base = v >= CU_COMPUTE_FAMILY_TARGET_BASE        ? CU_COMPUTE_FAMILY_TARGET_BASE
                            : v >= CU_COMPUTE_ACCELERATED_TARGET_BASE ? CU_COMPUTE_ACCELERATED_TARGET_BASE
                                                                      : 0;
            snprintf(o->arch, sizeof o->arch, "sm_%u%s", v - base,
                     base == CU_COMPUTE_FAMILY_TARGET_BASE        ? "f"
                     : base == CU_COMPUTE_ACCELERATED_TARGET_BASE ? "a"
                                                                  : "");
            break;
        }
        case CU_JIT_INFO_LOG_BUFFER:
            o->info = values ? values[i] : NULL;
            break;
        case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
            o->info_cap = v;
            o->info_at = (int)i;
            break;
        case CU_JIT_ERROR_LOG_BUFFER:
            o->error = values ? values[i] : NULL;
            break;
        case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
            o->error_cap = v;
            o->error_at = (int)i;
            break;
        case CU_JIT_WALL_TIME:
            o->wall_at = (int)i;
            break;
        case CU_JIT_TARGET_FROM_CUCONTEXT: /* what happens anyway */
        case CU_JIT_FALLBACK_STRATEGY:     /* chooses between PTX and a binary: PTX it is */
        case CU_JIT_SPLIT_COMPILE:         /* how fast, not what */
        case CU_JIT_FTZ:                   /* these four apply to link-time optimization */
        case CU_JIT_PREC_DIV:              /* of NVVM IR only (CU_JIT_LTO), never to PTX */
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
}

static void opts_init(jit_opts *o)
{
    memset(o, 0, sizeof *o);
    o->info_at = o->error_at = o->wall_at = -1;
}

/* Reports back as the driver does: the info log gets the compiler's
 * warnings, the error log nothing, the wall time the milliseconds spent. */
static void report(const jit_opts *o, void **values, const char *warnings, double seconds)
{
    if (!values)
        return;
    if (o->info && o->info_at >= 0 && o->info_cap) {
        size_t n = strlen(warnings);
        n = n < o->info_cap - 1 ? n : o->info_cap - 1;
        memcpy(o->info, warnings, n);
        o->info[n] = '\0';
        values[o->info_at] = (void *)(uintptr_t)(n ? n + 1 : 0);
    }
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

/* The architecture the driver compiles for: CU_JIT_TARGET, else the
 * current context's device; PTX written for that device's
 * architecture-specific or family target (.target sm_90a) keeps it. */
static int target_arch(const jit_opts *o, const char *ptx, char *out, size_t cap)
{
    if (o->arch[0]) {
        snprintf(out, cap, "%s", o->arch);
        return 0;
    }
    const tc_real_driver *d = tc_real();
    CUdevice dev;
    int major = 0, minor = 0;
    if (!d->cuCtxGetDevice || !d->cuDeviceGetAttribute || d->cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
        d->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        d->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        return -1;
    snprintf(out, cap, "sm_%d%d", major, minor);
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

/* The compiler's warnings among a build's diagnostics, for the info log. */
static void warnings_of(const tc_result *r, char *out, size_t cap)
{
    const char *d = r ? tc_result_diagnostics(r) : "";
    size_t n = 0;
    out[0] = '\0';
    while (*d) {
        size_t len = strcspn(d, "\n");
        if (memmem(d, len, ": warning", 9) && n + len + 2 < cap) {
            memcpy(out + n, d, len);
            n += len;
            out[n++] = '\n';
            out[n] = '\0';
        }
        d += len + (d[len] == '\n');
    }
}

/* Builds PTX with taskcache. NULL (with why set) when the driver must do
 * it: no current context, or the build failed. */
static tc_result *build(const char *call, const char *ptx, size_t len, jit_opts *o)
{
    char arch[16];
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
    if (opts && tc_options_set_arch(opts, arch, NULL) == TC_OK) {
        int ok = 1;
        for (int i = 0; i < o->ncopt && ok; i++)
            ok = tc_options_add_compiler_option(opts, o->copt[i], NULL) == TC_OK;
        st = ok ? tc_build(cache, opts, ptx, len, call, &r) : TC_ERR_INVALID;
    }
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
    if (intercept_mode() == MODE_MEASURE)
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
        note("%s: built with taskcache: %u kernels, compiled whole, %.3f s", call, rep.entries,
             t);
    else
        note("%s: built with taskcache: %u kernels, %s%u of %u units from the cache, %u "
             "compiled, %.3f s", call, rep.entries, rep.module_hit ? "module record hit, " : "",
             rep.unit_hits, rep.units, rep.units_compiled, t);
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
    size_t len = image ? ptx_length(image) : 0;
    if (tc_intercept_trace())
        note("trace: %s(%s)", call, len ? "PTX" : "not PTX");
    if (!tc_intercept_enabled() || !len)
        return PASS();
    double t0 = now();
    if (intercept_mode() == MODE_MEASURE) {
        CUresult rc = PASS();
        note("%s: the driver compiled %zu bytes of PTX in %.3f s (result %d)", call, len,
             now() - t0, rc);
        return rc;
    }
    jit_opts o;
    opts_init(&o);
    read_options(&o, n, options, values);
    tc_result *r = o.why[0] ? NULL : build(call, image, len, &o);
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
    char warnings[4096];
    warnings_of(r, warnings, sizeof warnings);
    report(&o, values, warnings, now() - t0);
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
    size_t len = code ? ptx_length(code) : 0;
    if (tc_intercept_trace())
        tc_intercept_note("trace: cuLibraryLoadData(%s)", len ? "PTX" : "not PTX");
    if (!tc_intercept_enabled() || !len || lib_n > 16)
        return PASS();
    double t0 = now();
    if (intercept_mode() == MODE_MEASURE) {
        CUresult rc = PASS();
        note("cuLibraryLoadData: the driver compiled %zu bytes of PTX in %.3f s (result %d)",
             len, now() - t0, rc);
        return rc;
    }
    jit_opts o;
    opts_init(&o);
    read_options(&o, n, options, values);
    tc_result *r = o.why[0] ? NULL : build("cuLibraryLoadData", code, len, &o);
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
    char warnings[4096];
    warnings_of(r, warnings, sizeof warnings);
    report(&o, values, warnings, now() - t0);
    note_built("cuLibraryLoadData", r, now() - t0);
    tc_result_free(r);
    return rc;
}

/* ---- link sessions ---------------------------------------------------------------------- */

/* What the interceptor knows of one link session. While it holds a single
 * PTX input that taskcache built, nothing has gone to the driver's link
 * state; the first other input replays that PTX to the driver, and from
 * then on the driver links. */
typedef struct session {
    CUlinkState state;
    jit_opts opts;           /* cuLinkCreate's: their report slots are the caller's */
    void **values;
    int passed;              /* the driver links this session */
    tc_result *built;        /* the PTX input, built by taskcache */
    char *ptx;               /* kept to replay it */
    size_t len;
    char *name;
    unsigned n;              /* its own options, copied */
    CUjit_option *options;
    void **option_values;
    int v;                   /* the cuLinkAddData version that added it */
    double seconds;
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

static void drop_input(session *s)
{
    tc_result_free(s->built);
    free(s->ptx);
    free(s->name);
    free(s->options);
    free(s->option_values);
    s->built = NULL;
    s->ptx = s->name = NULL;
    s->options = NULL;
    s->option_values = NULL;
}

CUresult tc_jit_link_create(int v, unsigned n, CUjit_option *options, void **values,
                            CUlinkState *state)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkCreate[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = d->cuLinkCreate[v](n, options, values, state);
    if (tc_intercept_trace())
        note("trace: cuLinkCreate%s(%u options): %d", v ? "_v2" : "", n, rc);
    if (rc != CUDA_SUCCESS || !tc_intercept_enabled())
        return rc;
    pthread_once(&fork_once, install_fork_handlers);
    session *s = calloc(1, sizeof *s);
    if (!s)
        return rc; /* the driver links it, as if we were not here */
    s->state = *state;
    opts_init(&s->opts);
    read_options(&s->opts, n, options, values);
    s->values = values;
    s->passed = s->opts.why[0] != 0 || intercept_mode() == MODE_MEASURE;
    if (s->opts.why[0])
        note("cuLinkCreate: the driver links this session: %s", s->opts.why);
    pthread_mutex_lock(&sessions_lock);
    s->next = sessions;
    sessions = s;
    pthread_mutex_unlock(&sessions_lock);
    return rc;
}

/* From now on the driver links this session: it gets the PTX input that
 * was kept back, as the program gave it. */
static CUresult pass_session(session *s, const char *why)
{
    CUresult rc = CUDA_SUCCESS;
    if (s->ptx) {
        const tc_real_driver *d = tc_real();
        rc = d->cuLinkAddData[s->v](s->state, CU_JIT_INPUT_PTX, s->ptx, s->len + 1, s->name,
                                    s->n, s->options, s->option_values);
        count_passed(); /* built, and the driver compiles it too */
    }
    note("cuLinkAddData: the driver links this session: %s", why);
    drop_input(s);
    s->passed = 1;
    return rc;
}

/* Builds a session's PTX input and keeps it back from the driver: 1 done,
 * 0 not built (the reason in why: the driver must have it), -1 out of
 * memory. */
static int keep_ptx(int v, session *s, const char *data, size_t len, const char *name,
                    unsigned n, CUjit_option *options, void **values, char *why, size_t cap)
{
    jit_opts o = s->opts; /* the link's options, and this input's */
    o.why[0] = '\0';
    read_options(&o, n, options, values);
    double t0 = now();
    tc_result *r = o.why[0] ? NULL : build("cuLinkAddData", data, len, &o);
    if (!r) {
        snprintf(why, cap, "%s", o.why);
        return 0;
    }
    s->built = r;
    s->seconds = now() - t0;
    s->len = len;
    s->v = v;
    s->n = n;
    s->ptx = malloc(len + 1);
    s->name = strdup(name ? name : "");
    s->options = n ? malloc(n * sizeof *options) : NULL;
    s->option_values = n ? malloc(n * sizeof *values) : NULL;
    if (!s->ptx || !s->name || (n && (!s->options || !s->option_values))) {
        drop_input(s);
        return -1;
    }
    memcpy(s->ptx, data, len);
    s->ptx[len] = '\0';
    if (n) {
        memcpy(s->options, options, n * sizeof *options);
        memcpy(s->option_values, values, n * sizeof *values);
    }
    return 1;
}

/* A new input of a session taskcache still links. *kept: taskcache took
 * it (built, kept back from the driver). Otherwise the driver links the
 * session from now on, and this input goes to it as given; the result is
 * then that of replaying what was kept back. */
static CUresult take_input(int v, session *s, CUjitInputType type, const char *ptx,
                           size_t len, const char *name, unsigned n, CUjit_option *options,
                           void **values, int *kept)
{
    char why[96] = "a second input";
    *kept = 0;
    if (type == CU_JIT_INPUT_PTX && len && !s->ptx) {
        int k = keep_ptx(v, s, ptx, len, name, n, options, values, why, sizeof why);
        if (k != 0) {
            *kept = k > 0;
            return k > 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        }
    } else if (type != CU_JIT_INPUT_PTX) {
        snprintf(why, sizeof why, "an input of type %d, not PTX", (int)type);
    }
    return pass_session(s, why);
}

CUresult tc_jit_link_add_data(int v, CUlinkState state, CUjitInputType type, void *data,
                              size_t size, const char *name, unsigned n, CUjit_option *options,
                              void **values)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkAddData[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    session *s = tc_intercept_enabled() ? find(state) : NULL;
    if (tc_intercept_trace())
        note("trace: cuLinkAddData%s(type %d, %zu bytes)", v ? "_v2" : "", (int)type, size);
    if (s && !s->passed) {
        size_t len = type == CU_JIT_INPUT_PTX ? ptx_length(data) : 0;
        int kept;
        CUresult rc = take_input(v, s, type, data, len <= size ? len : 0, name, n, options,
                                 values, &kept);
        if (kept || rc != CUDA_SUCCESS)
            return rc;
    }
    if (s && type == CU_JIT_INPUT_PTX)
        count_passed();
    if (s && intercept_mode() == MODE_MEASURE && type == CU_JIT_INPUT_PTX) {
        double t0 = now(); /* the driver compiles PTX as it is added */
        CUresult rc = d->cuLinkAddData[v](state, type, data, size, name, n, options, values);
        note("cuLinkAddData: the driver compiled PTX in %.3f s (result %d)", now() - t0, rc);
        return rc;
    }
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
    if (!d->cuLinkAddFile[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    session *s = tc_intercept_enabled() ? find(state) : NULL;
    if (s && !s->passed) {
        char *text = type == CU_JIT_INPUT_PTX ? read_text(path) : NULL;
        size_t len = text ? ptx_length(text) : 0;
        int kept;
        CUresult rc = take_input(v, s, type, text, len, path, n, options, values, &kept);
        free(text);
        if (kept || rc != CUDA_SUCCESS)
            return rc;
    }
    if (s && type == CU_JIT_INPUT_PTX)
        count_passed();
    return d->cuLinkAddFile[v](state, type, path, n, options, values);
}

CUresult tc_jit_link_complete(CUlinkState state, void **cubin, size_t *size)
{
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkComplete)
        return CUDA_ERROR_NOT_SUPPORTED;
    session *s = tc_intercept_enabled() ? find(state) : NULL;
    if (!s || s->passed || !s->built)
        return d->cuLinkComplete(state, cubin, size);
    /* the image stays with the session until cuLinkDestroy, as the
     * driver's own does */
    *cubin = (void *)tc_result_image(s->built, size);
    char warnings[4096];
    warnings_of(s->built, warnings, sizeof warnings);
    report(&s->opts, s->values, warnings, s->seconds);
    note_built("cuLinkComplete", s->built, s->seconds);
    return CUDA_SUCCESS;
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
    if (s) {
        drop_input(s);
        free(s);
    }
    return d->cuLinkDestroy ? d->cuLinkDestroy(state) : CUDA_ERROR_NOT_SUPPORTED;
}
