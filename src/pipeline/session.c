/* session: one call's state and the services every pipeline shares (see
 * session.h): finding the toolchain, compiling with either backend,
 * linking, the one record reader and writer, the call's counters. */
#define _GNU_SOURCE
#include "pipeline/session.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compile/nvptx.h"
#include "toolchain/spawn.h"
#include "util/fs.h"
#include "util/scratch.h"

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

tc_status tc_session_fail(tc_session *s, tc_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_sb_printf(&s->r->diag, "%s: error: ", s->name);
    tc_sb_vprintf(&s->r->diag, fmt, ap);
    tc_sb_putc(&s->r->diag, '\n');
    va_end(ap);
    return code;
}

void tc_session_count(tc_session *s, int counter, uint64_t n)
{
    pthread_mutex_lock(&s->delta_lock);
    s->delta.v[counter] += n;
    pthread_mutex_unlock(&s->delta_lock);
}

void tc_session_progress_begin(tc_session *s, size_t total)
{
    if (!s->o->progress || !total)
        return;
    pthread_mutex_lock(&s->progress_lock);
    s->progress_done = 0;
    s->progress_total = total > UINT_MAX ? UINT_MAX : (unsigned)total;
    s->o->progress(s->o->progress_user, 0, s->progress_total);
    pthread_mutex_unlock(&s->progress_lock);
}

void tc_session_progress_step(tc_session *s)
{
    if (!s->o->progress)
        return;
    pthread_mutex_lock(&s->progress_lock);
    if (s->progress_done < s->progress_total)
        s->o->progress(s->o->progress_user, ++s->progress_done, s->progress_total);
    pthread_mutex_unlock(&s->progress_lock);
}

/* The scratch directory, made on first use; NULL (with a diagnostic) when
 * it cannot be made. */
static const char *make_scratch(tc_session *s)
{
    if (s->scratch)
        return s->scratch;
    /* those of builds that were killed or interrupted go first: nothing
     * else would ever remove them */
    tc_scratch_remove_stale(TC_SCRATCH_PREFIX);
    if (!(s->scratch = tc_scratch_create(TC_SCRATCH_PREFIX, &s->scratch_lock)))
        tc_session_fail(s, TC_ERR_IO, "cannot create a temporary directory in %s (TMPDIR): %s",
                        tc_temp_root(), strerror(errno));
    return s->scratch;
}

int tc_session_files_ready(tc_session *s)
{
    /* ptxas processes and nvlink read and write files; the in-process
     * compiler and nvJitLink work in memory */
    int needs_files = !s->in_process || s->linker.kind == TC_LINKER_NVLINK;
    return !needs_files || make_scratch(s) != NULL;
}

/* ---- the toolchain ------------------------------------------------------------ */

static tc_status ptxas_identity(tc_session *s)
{
    tc_sb err = TC_SB_INIT;
    tc_status st = TC_OK;
    if (tc_tool_identity(s->ptxas, s->store, s->compiler_id, s->compiler_version,
                         sizeof s->compiler_version, &err) != 0)
        st = tc_session_fail(s, TC_ERR_TOOLCHAIN, "%s", err.data ? err.data : "ptxas unusable");
    tc_sb_free(&err);
    return st;
}

/* What compiles, in words for -v and logs: "ptxas PATH (release R)" or
 * "nvPTXCompiler R (in-process...)"; why, when not NULL, follows. */
static void describe_compiler(tc_session *s, const char *why)
{
    char release[32];
    if (s->in_process) {
        snprintf(s->compiler_desc, sizeof s->compiler_desc, "nvPTXCompiler %s (in-process%s%s)",
                 *tc_nvptx_release() ? tc_nvptx_release() : "of unknown release",
                 why ? "; " : "", why ? why : "");
        return;
    }
    tc_tool_release(s->compiler_version, release, sizeof release);
    snprintf(s->compiler_desc, sizeof s->compiler_desc, "ptxas %s (%s%s%s%s)", s->ptxas,
             *release ? "release " : "release unknown", release, why ? "; " : "",
             why ? why : "");
}

/* The compiler. One the user names (--ptxas, $TASKCACHE_PTXAS, the ptxas
 * of $CUDA_HOME or $CUDA_PATH) is the one that compiles: a tool that chose
 * a release (Triton's bundled ptxas, clang's --ptxas-path, PTX of a newer
 * NVRTC) gets that release's code, or its error. The in-process compiler
 * stands in for it only when it is the very same release (the same code,
 * without a process per unit), and compiles when asked for by name, or
 * under auto when no ptxas was named. Its identity goes into every key. */
static tc_status find_compiler(tc_session *s, int *have_ptxas)
{
    const tc_options *o = s->o;
    tc_error bad;
    if (tc_options_check(o, &bad) != TC_OK)
        return tc_session_fail(s, TC_ERR_INVALID, "%s", bad.message);
    if (o->compiler == TC_COMPILER_INPROCESS && !tc_nvptx_available())
        return tc_session_fail(s, TC_ERR_TOOLCHAIN,
                               "this taskcache was built without the in-process compiler "
                               "(libnvptxcompiler_static); use the ptxas backend");
    int named = 0;
    *have_ptxas = tc_tool_find(o->ptxas, "TASKCACHE_PTXAS", "ptxas", s->ptxas,
                               sizeof s->ptxas, &named) == 0;
    if (!*have_ptxas)
        s->ptxas[0] = '\0';
    if (named && !*have_ptxas && o->compiler != TC_COMPILER_INPROCESS)
        return tc_session_fail(s, TC_ERR_TOOLCHAIN, "cannot run the ptxas named: %s",
                               o->ptxas && *o->ptxas ? o->ptxas : getenv("TASKCACHE_PTXAS"));
    if (!*have_ptxas && o->compiler != TC_COMPILER_INPROCESS &&
        !(o->compiler == TC_COMPILER_AUTO && tc_nvptx_available()))
        return tc_session_fail(s, TC_ERR_TOOLCHAIN,
                               "cannot find ptxas: install the CUDA toolkit, or set CUDA_HOME or "
                               "TASKCACHE_PTXAS");
    char why[TC_PATH_MAX + 64] = "";
    s->in_process = o->compiler == TC_COMPILER_INPROCESS ||
                    (o->compiler == TC_COMPILER_AUTO && tc_nvptx_available() && !named);
    if (o->compiler == TC_COMPILER_AUTO && tc_nvptx_available() && named) {
        /* the same release compiles the same code: say which was compared */
        tc_status st = ptxas_identity(s);
        if (st != TC_OK)
            return st;
        char release[32];
        tc_tool_release(s->compiler_version, release, sizeof release);
        s->in_process = *release && !strcmp(release, tc_nvptx_release());
        if (s->in_process)
            snprintf(why, sizeof why, "the release of %s", s->ptxas);
        else
            snprintf(why, sizeof why, "named by the user; the in-process compiler is %s",
                     *tc_nvptx_release() ? tc_nvptx_release() : "of unknown release");
    }
    if (s->in_process) {
        tc_digest d;
        const char *id = tc_nvptx_identity();
        tc_digest_of(id, strlen(id), &d);
        tc_digest_hex(&d, s->compiler_id);
        snprintf(s->compiler_version, sizeof s->compiler_version, "%s", id);
        describe_compiler(s, *why ? why : NULL);
        return TC_OK;
    }
    tc_status st = *why ? TC_OK : ptxas_identity(s);
    describe_compiler(s, *why ? why : NULL);
    return st;
}

/* The major release of the session's compiler, from its version line
 * ("nvPTXCompiler 13.0 ...", or ptxas's "Build cuda_13.0.r13.0/..."); 0
 * when the line says none. */
static int compiler_major(const tc_session *s)
{
    const char *v = s->compiler_version, *p;
    if ((p = strstr(v, "nvPTXCompiler ")))
        return atoi(p + 14);
    if ((p = strstr(v, "cuda_")))
        return atoi(p + 5);
    return 0;
}

/* A whole-program unit compiles its functions on two threads of the
 * compiler's own (--split-compile=2): an edit compiles one unit, and the
 * second core would idle. A module compiled whole is one compile, and
 * gets a thread on every CPU (--split-compile=0): a module that cannot be
 * split safely took as long as a single-threaded ptxas. Either way the
 * code is the same as on one thread (CUDA 13.0: every .text section
 * byte-identical), and the same at any count of two or more down to the
 * last byte but the tool note, which names the option as given ("0", not
 * the CPUs): the output is a function of the input, whatever the machine.
 * A relocatable (-c) compile does not get it: there the option changes
 * the code. Not for a compiler older than the one this was checked with,
 * nor when the options ask for a split-compile of their own or for
 * fast-compile (-Ofc min and mid: with threads, kernels that call a
 * function get other registers than on one thread), nor for a
 * build that stands for a ptxas command line (tc_options_set_exact_whole):
 * against no option at all, the symbols of some images come in another
 * order (the code is the same). */
#define EWP_THREADS_OPTION "--split-compile=2"
#define WHOLE_THREADS_OPTION "--split-compile=0"
#define CHECKED_SINCE 13

/* ptxas -ewp warns "Stack size for entry function 'k' cannot be
 * statically determined" for every kernel that recurses or calls alloca;
 * the whole-module compile, which a split build stands for, says nothing
 * of the kind (nor does -c: nvlink says it when it links). The stack the
 * kernel gets is the context's limit either way. So whole-program units
 * are compiled with the warning off: a split build prints what the whole
 * build prints, and one with --warning-as-error does not fail where the
 * whole build succeeds. Like the threads, only for compilers of CUDA 13
 * and later, which this was checked with. */
#define EWP_QUIET_OPTION "--suppress-stack-size-warning"

static const char *compiler_threads(const tc_session *s, const char *option)
{
    /* with fast-compile (-Ofc min, mid) the threads change the registers
     * of kernels that call a function: none then */
    static const char *const own[] = {"--split-compile*", "-split-compile*", "-Ofc*",
                                      "--Ofast-compile*", NULL};
    if (compiler_major(s) < CHECKED_SINCE || tc_options_have(s->o, own))
        return NULL;
    return option;
}

/* The options taskcache adds for the session's compiler (again when it
 * changes). The in-process compiler gets threads only where the host asked
 * (tc_options_set_inprocess_threads): with threads it ends the process
 * on a failed compile. */
static void choose_options(tc_session *s)
{
    int allowed = !s->in_process || s->o->inprocess_threads;
    s->ewp_threads = allowed && s->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM
                         ? compiler_threads(s, EWP_THREADS_OPTION)
                         : NULL;
    s->whole_threads =
        allowed && !s->o->exact_whole ? compiler_threads(s, WHOLE_THREADS_OPTION) : NULL;
    s->ewp_quiet = compiler_major(s) >= CHECKED_SINCE ? EWP_QUIET_OPTION : NULL;
}

/* The option that silences a compile's stack size warning, or NULL: the
 * one place the unit's key (tc_session_unit_mode) and its compile
 * (compile_with) take it from. */
static const char *quiet_option(const tc_session *s, tc_out_kind kind)
{
    return kind == TC_OUT_EWP ? s->ewp_quiet : NULL;
}

const char *tc_session_threads(const tc_session *s, tc_out_kind kind, const char *text,
                               size_t len)
{
    const char *t = kind == TC_OUT_EWP ? s->ewp_threads
                    : kind == TC_OUT_CUBIN ? s->whole_threads
                                           : NULL;
    /* With threads, nvPTXCompiler 13.0 writes its numbered advice to
     * standard error, not to its log, and wgmma is what it advises on
     * ("(C7519) warpgroup.arrive is injected ..."): the log must keep it,
     * to be told against the input's lines and replayed from the cache. */
    if (t && s->in_process && memmem(text, len, "wgmma", 5))
        return NULL;
    return t;
}

tc_status tc_session_use_ptxas(tc_session *s)
{
    s->in_process = 0;
    tc_status st = ptxas_identity(s); /* the keys' compiler (s->kc points at it) */
    choose_options(s);                /* that ptxas may be older than the in-process one */
    describe_compiler(s, "the in-process compiler crashed on this input");
    return st;
}

const char *tc_session_unit_mode(const tc_session *s, tc_out_kind kind, const char *text,
                                 size_t len, char *buf, size_t n)
{
    const char *threads = tc_session_threads(s, kind, text, len);
    const char *quiet = quiet_option(s, kind);
    snprintf(buf, n, "%s%s%s%s%s", tc_out_option(kind), quiet ? " " : "", quiet ? quiet : "",
             threads ? " " : "", threads ? threads : "");
    return buf;
}

tc_status tc_session_prepare(tc_session *s, int links)
{
    const tc_options *o = s->o;
    if (!o->arch[0])
        return tc_session_fail(s, TC_ERR_INVALID,
                               "no target architecture: set one (e.g. --arch sm_90)");
    int have_ptxas = 0;
    tc_status st = find_compiler(s, &have_ptxas);
    if (st != TC_OK)
        return st;
    /* whole-program units need libnvJitLink */
    int want_library = links && o->unit_code != TC_UNIT_CODE_RELOCATABLE;
    tc_sb err = TC_SB_INIT;
    int keyed = s->store || s->call == TC_CALL_EXPLAIN; /* a build without a cache keys nothing */
    /* A build that links nothing looks for no linker: identifying nvlink
     * runs it (15 ms without a cache to remember it in), and a whole
     * compile's output does not depend on it. */
    if (!links)
        tc_sb_printf(&err, "nothing is linked");
    if (!links || tc_linker_find(have_ptxas ? s->ptxas : NULL, s->store, keyed, want_library,
                                 &s->linker, &err) != 0) {
        s->linker.kind = 0; /* only a split build needs one; said then */
        snprintf(s->linker.id, sizeof s->linker.id, "none");
        snprintf(s->linker_error, sizeof s->linker_error, "%s", err.data ? err.data : "");
    }
    tc_sb_free(&err);
    /* nvlink drops -ewp objects without a word: an image without kernels */
    int whole_program = want_library && s->linker.kind == TC_LINKER_NVJITLINK;
    s->unit_code = whole_program ? TC_UNIT_CODE_WHOLE_PROGRAM : TC_UNIT_CODE_RELOCATABLE;
    if (want_library && !whole_program && o->unit_code == TC_UNIT_CODE_WHOLE_PROGRAM)
        tc_sb_printf(&s->r->diag,
                     "%s: note: whole-program units need libnvJitLink to link, and it was not "
                     "found (or TASKCACHE_NVJITLINK rules it out): compiling relocatable units\n",
                     s->name);
    choose_options(s);
    s->kc.target = o->arch;
    s->kc.opts = (const char *const *)o->copts;
    s->kc.nopts = o->ncopts;
    s->kc.compiler_id = s->compiler_id;
    s->kc.auth = s->store ? tc_store_auth_id(s->store) : NULL;
    return TC_OK;
}

/* ---- compiling and linking --------------------------------------------------------- */

/* One compile with the options' own, the kind's quiet option, then extra
 * (NULL: none). */
static int compile_with(tc_session *s, tc_out_kind kind, const char *text, size_t len,
                        const char *ptx_path, const char *extra, tc_sb *output, tc_sb *log,
                        int *exit_code)
{
    size_t nopts = s->o->ncopts;
    char **opts = malloc((nopts + 2) * sizeof *opts);
    if (!opts) {
        errno = ENOMEM;
        return -1;
    }
    if (nopts)
        memcpy(opts, s->o->copts, nopts * sizeof *opts);
    const char *quiet = quiet_option(s, kind);
    if (quiet)
        opts[nopts++] = (char *)quiet;
    if (extra)
        opts[nopts++] = (char *)extra;
    int rc = -1;
    if (s->in_process) {
        rc = tc_nvptx_compile(s->o->arch, opts, nopts, kind, text, len, output, log,
                              exit_code) == 0
                 ? 0
                 : (errno = ENOMEM, -1);
        free(opts);
        return rc;
    }
    size_t pl = strlen(ptx_path);
    char *out = malloc(pl + 8), *logp = malloc(pl + 8);
    if (out && logp) {
        snprintf(out, pl + 8, "%.*s.out", (int)(pl - 4), ptx_path);
        snprintf(logp, pl + 8, "%.*s.log", (int)(pl - 4), ptx_path);
        tc_ptxas_job job = {.ptxas = s->ptxas, .arch = s->o->arch, .opts = opts,
                            .nopts = nopts, .kind = kind,
                            .ptx_path = ptx_path, .out_path = out, .log_path = logp};
        rc = tc_ptxas_run(&job);
        *exit_code = rc == 0 ? job.exit_code : -1;
        tc_sb_append(output, job.output.data, job.output.len);
        tc_sb_append(log, job.log.data, job.log.len);
        tc_sb_free(&job.output);
        tc_sb_free(&job.log);
        unlink(out); /* read: the scratch directory need not hold them all */
        unlink(logp);
    } else {
        errno = ENOMEM;
    }
    free(out);
    free(logp);
    free(opts);
    return rc;
}

void tc_session_event(tc_session *s, const char *what, const char *name, double t0)
{
    tc_trace_add(&s->trace, what, name, strlen(name), t0, tc_now());
}

int tc_session_compile(tc_session *s, tc_out_kind kind, const char *label, const char *text,
                       size_t len, const char *ptx_path, tc_sb *output, tc_sb *log,
                       int *exit_code)
{
    double t0 = tc_now();
    /* the options' own, then the unit's (tc_session_unit_mode) */
    const char *threads = tc_session_threads(s, kind, text, len);
    int rc = compile_with(s, kind, text, len, ptx_path, threads, output, log, exit_code);
    /* The threads are taskcache's choice, not the user's: where the
     * compiler crashes with them, it compiles as the user asked. ptxas 13.0
     * crashes (SIGSEGV) with --split-compile=0 on some modules it compiles
     * without (two kernels, one with a parameter named like a global:
     * tests/realworld/findings/split_compile_crash.ptx). An error in the
     * input is no crash (ptxas exits 255): it is reported after one
     * compile. Nor is a compile the host cancelled (Ctrl-C). */
    if (threads && rc == 0 && tc_exit_signal(*exit_code) && !tc_options_cancelled(s->o)) {
        tc_sb_reset(output);
        tc_sb_reset(log);
        rc = compile_with(s, kind, text, len, ptx_path, NULL, output, log, exit_code);
    }
    tc_session_event(s, "compile", label, t0);
    return rc;
}

tc_link_job *tc_session_link_start(tc_session *s)
{
    return tc_link_start(&s->linker, s->o->arch, s->scratch);
}

tc_status tc_session_link_finish(tc_session *s, tc_link_job *lj)
{
    if (!s->linker.kind) {
        tc_link_abandon(lj);
        return tc_session_fail(s, TC_ERR_TOOLCHAIN, "%s", s->linker_error);
    }
    tc_sb image = TC_SB_INIT, log = TC_SB_INIT;
    double t = tc_now();
    int rc = tc_link_finish(lj, &image, &log);
    s->r->report.seconds_link = tc_now() - t;
    tc_session_event(s, "link", "link", t);
    tc_status st = TC_OK;
    if (rc != 0) {
        /* one diagnostic line per line of the linker's message */
        const char *p = log.data ? log.data : "";
        while (*p) {
            size_t len = strcspn(p, "\n");
            if (len)
                tc_sb_printf(&s->r->diag, "%s: error: link: %.*s\n", s->name, (int)len, p);
            p += len + (p[len] == '\n');
        }
        if (!log.len)
            tc_session_fail(s, TC_ERR_LINK, "link failed");
        st = TC_ERR_LINK;
    } else if (!(s->r->image = tc_sb_take(&image, &s->r->image_len))) {
        st = TC_ERR_NOMEM;
    }
    tc_sb_free(&image);
    tc_sb_free(&log);
    return st;
}

tc_status tc_session_link(tc_session *s, tc_unit_at_fn unit, void *ctx, size_t n)
{
    tc_link_job *lj = tc_session_link_start(s);
    if (!lj)
        return TC_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) /* a failure shows at the finish */
        tc_link_add(lj, unit(ctx, i)->object.data, unit(ctx, i)->object.len);
    return tc_session_link_finish(s, lj);
}

/* ---- records ------------------------------------------------------------------------- */

int tc_session_read_record(tc_session *s, uint32_t kind, const tc_digest *key, int first_look,
                           tc_record_decode_fn decode, void (*undo)(void *ctx), void *ctx)
{
    char *payload = NULL;
    size_t len = 0;
    int bad = 0;
    int ok = tc_store_get(s->store, s->o->arch, kind, key, first_look, s->o->cancel, &payload,
                          &len, &bad);
    if (ok) {
        ok = decode(ctx, &payload, len) == 0;
        free(payload);
        if (!ok) {
            undo(ctx);
            bad = 1;
        }
    }
    if (bad && first_look)
        tc_session_count(s, TC_C_BAD_RECORDS, 1);
    return ok;
}

uint8_t *tc_session_prefetch(tc_session *s, uint32_t kind, tc_unit_at_fn unit, void *ctx,
                             size_t n)
{
    if (!s->store || !n)
        return NULL;
    tc_digest *keys = malloc(n * sizeof *keys);
    uint8_t *state = malloc(n);
    if (keys && state) {
        for (size_t i = 0; i < n; i++)
            keys[i] = unit(ctx, i)->key;
        if (tc_store_prefetch(s->store, s->o->arch, kind, keys, n, s->o->cancel, state) == 0) {
            free(state);
            state = NULL;
        }
    } else {
        free(state);
        state = NULL;
    }
    free(keys);
    return state;
}

void tc_unit_clear(tc_unit *u)
{
    tc_sb_reset(&u->object);
    tc_sb_reset(&u->log);
    tc_sb_reset(&u->meta);
    u->have_meta = 0;
    tc_entries_free(u->entries, u->nentries);
    u->entries = NULL;
    u->nentries = 0;
}

void tc_unit_free(tc_unit *u)
{
    tc_unit_clear(u);
    tc_sb_free(&u->object);
    tc_sb_free(&u->log);
    tc_sb_free(&u->meta);
}

void tc_session_write_record(tc_session *s, uint32_t kind, const tc_digest *key,
                             const tc_sb *payload)
{
    if (payload->oom)
        return;
    long long written = tc_store_put(s->store, s->o->arch, kind, key, payload->data, payload->len);
    pthread_mutex_lock(&s->delta_lock); /* compile workers publish too */
    if (written < 0) {
        s->delta.v[TC_C_STORE_ERRORS]++;
    } else {
        s->delta.v[TC_C_RECORDS_WRITTEN]++;
        s->delta.v[TC_C_BYTES_WRITTEN] += (uint64_t)written;
        s->delta.v[TC_C_CACHE_BYTES] += (uint64_t)written;
    }
    pthread_mutex_unlock(&s->delta_lock);
}

/* ---- beginning and finishing ----------------------------------------------------------- */

int tc_session_begin(tc_session *s, tc_call call, tc_cache *cache, const tc_options *opts,
                     const char *name)
{
    memset(s, 0, sizeof *s);
    s->scratch_lock = -1;
    pthread_mutex_init(&s->delta_lock, NULL);
    pthread_mutex_init(&s->progress_lock, NULL);
    s->t0 = tc_now();
    s->call = call;
    s->cache = cache;
    s->o = opts;
    s->name = name && *name ? name : "<input>";
    s->store = cache ? cache->store : NULL;
    tc_trace_init(&s->trace);
    s->r = tc_result_new();
    if (s->r)
        tc_cache_hold(cache); /* a tc_cache_close meanwhile frees it after tc_session_finish */
    return s->r ? 0 : -1;
}

/* Keeps the cache under its size limit: the size estimate kept in the
 * statistics decides when a cleanup is due; the cleanup measures. */
static void keep_within_limit(tc_session *s, const tc_counters *after)
{
    uint64_t limit = tc_store_max_size(s->store);
    if (!limit || after->v[TC_C_CACHE_BYTES] <= limit)
        return;
    tc_gc_result g;
    if (tc_store_gc(s->store, limit, -1, &g) == 0)
        tc_stats_after_gc(s->store, &g);
}

/* The slowest compiles in words, and the trace file when one was asked
 * for (explain compiles nothing: it writes none). */
static void finish_trace(tc_session *s)
{
    tc_sb slowest = TC_SB_INIT;
    tc_trace_slowest(&s->trace, 5, &slowest);
    if (slowest.len && !slowest.oom && !s->r->slowest)
        s->r->slowest = tc_sb_take(&slowest, NULL);
    tc_sb_free(&slowest);
    if (s->o->trace && s->call != TC_CALL_EXPLAIN) {
        tc_session_event(s, "build", s->name, s->t0);
        if (tc_trace_write(&s->trace, s->o->trace, s->name) != 0)
            tc_sb_printf(&s->r->diag, "taskcache: warning: cannot write the trace file %s: %s\n",
                         s->o->trace, strerror(errno));
    }
    tc_trace_free(&s->trace);
}

tc_result *tc_session_finish(tc_session *s, tc_status st)
{
    tc_result *r = s->r;
    tc_linker_prewarm_wait(); /* no thread inside the linker library after a call */
    if (st != TC_OK) {
        free(r->image);
        r->image = NULL;
        r->image_len = 0;
        if (s->call == TC_CALL_BUILD && st != TC_ERR_CANCELLED) /* cancelling is no error */
            s->delta.v[TC_C_COMPILE_ERRORS]++;
    }
    if (s->store && tc_store_warning(s->store))
        tc_sb_printf(&r->diag, "taskcache: warning: %s\n", tc_store_warning(s->store));
    char remote_warning[700];
    if (s->store && tc_store_remote_problem(s->store))
        tc_sb_printf(&r->diag, "taskcache: warning: %s\n", tc_store_remote_problem(s->store));
    else if (s->store && tc_store_take_remote_warning(s->store, remote_warning,
                                                      sizeof remote_warning))
        tc_sb_printf(&r->diag, "taskcache: warning: %s\n", remote_warning);
    /* what the remote tier did meanwhile (its uploads finish later: the
     * next call, a flush or the close records those); explain counts
     * nothing, its lookups included */
    if (s->store)
        tc_store_take_counts(s->store, &s->delta);
    if (s->call != TC_CALL_EXPLAIN && s->store) {
        if (s->call == TC_CALL_BUILD)
            s->delta.v[TC_C_BUILDS]++;
        if (s->call == TC_CALL_BUILD && st == TC_OK && s->o->driver_load)
            s->delta.v[TC_C_DRIVER_BUILT]++;
        tc_counters after; /* statistics never fail a build */
        if (tc_stats_add(s->store, &s->delta, &after) == 0)
            keep_within_limit(s, &after);
    }
    if (s->compiler_desc[0] && !r->compiler)
        r->compiler = strdup(s->compiler_desc); /* NULL when out of memory: "" then */
    finish_trace(s);
    pthread_mutex_destroy(&s->delta_lock);
    pthread_mutex_destroy(&s->progress_lock);
    tc_scratch_remove(s->scratch, s->scratch_lock);
    tc_cache_release(s->cache);
    r->status = st;
    r->report.seconds = tc_now() - s->t0;
    return r;
}
