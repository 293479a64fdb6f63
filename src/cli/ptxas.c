/* ptxas: `taskcache ptxas ARGS`, or any program named ptxas that is this
 * one (a shim: see shims.c). It takes the command lines that nvcc, clang,
 * Triton and XLA give ptxas, builds the cubin through the cache (per
 * kernel, linked) and prints what ptxas would print about it; every other
 * command, and every command whose build fails, is handed to NVIDIA's
 * ptxas unchanged (execv), so that exit status and messages are exactly
 * ptxas's: errors cost one more compile, never a different answer. */
#define _POSIX_C_SOURCE 200809L
#include "cli/ptxas.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common.h"
#include "cli/ptxas_args.h"
#include "taskcache.h"

const char cli_usage_ptxas[] =
    "usage: taskcache ptxas [ptxas options] IN.ptx [-o OUT.cubin]\n"
    "       ptxas ...        (taskcache run under a name that starts with ptxas, as\n"
    "                         the links of 'taskcache shims' are)\n"
    "\n"
    "The ptxas command line, cached per kernel: the command lines nvcc, clang\n"
    "(--ptxas-path), Triton (TRITON_PTXAS_PATH) and XLA give ptxas build the\n"
    "same kind of executable cubin through the taskcache cache, so that after\n"
    "an edit only the changed kernel's unit is compiled, and an unchanged module\n"
    "is one cache read. Taken options (both spellings, as ptxas reads them):\n"
    "  -arch / --gpu-name sm_XX[a|f]   -o / --output-file FILE   -m64\n"
    "  -O0..-O3 / --opt-level N        -maxrregcount N           --fmad true|false\n"
    "  --regAllocOptLevel N            --allow-expensive-optimizations true|false\n"
    "  -lineinfo  -g  -suppress-debug-info  --dont-merge-basicblocks  --return-at-end\n"
    "  -v  --warn-on-spills  --warn-on-local-memory-usage  --options-file F[,F]\n"
    "  -c / --compile-only (a relocatable object: one compile of the whole module,\n"
    "       cached as a module; ptxas's own bytes)\n"
    "Without -o the output is elf.o, as with ptxas. -v and the two --warn-on\n"
    "options print ptxas's lines, in its order, from what the compiler said of\n"
    "each kernel, kept in the records (a cache hit prints what the compile\n"
    "that stored it printed, its 'Compile time' too); the module's memory comes\n"
    "from the image. A split build's figures are those of its own code. These\n"
    "options are not part of the key.\n"
    "\n"
    "Everything else goes to NVIDIA's ptxas unchanged, uncached: --version\n"
    "(so tools that parse it read the real one), --help under a shim named\n"
    "ptxas ('taskcache ptxas --help' prints this), a virtual target\n"
    "(-arch=compute_XX, ptxas's quick syntax check), any other\n"
    "option, and any command whose taskcache build fails (ptxas then reports\n"
    "the error in its own words, with its own exit status).\n"
    "\n"
    "NVIDIA's ptxas is $TASKCACHE_PTXAS, else $CUDA_HOME/bin/ptxas, else the\n"
    "toolkit found when taskcache was built, else ptxas on $PATH, skipping\n"
    "taskcache itself. Its processes compile the units, so a module compiled\n"
    "whole is its own file. TASKCACHE_COMPILER=auto lets the in-process\n"
    "compiler stand in for it where it is the very same release (the same\n"
    "code without a process per unit), =inprocess asks for it whatever the\n"
    "release; any value but ptxas, inprocess and auto is an error. The\n"
    "TASKCACHE_LOG line names the compiler that compiled, with its release.\n"
    "\n"
    "environment:\n"
    "  TASKCACHE_DIR        the cache (else $XDG_CACHE_HOME/taskcache, ~/.cache/taskcache)\n"
    "  TASKCACHE_LOG=FILE   one line per command: what was cached, or why it went to ptxas\n"
    "  TASKCACHE_JOBS=N     compiler processes at once (default: all CPUs)\n"
    "  TASKCACHE_UNIT_CODE  whole-program, relocatable or auto (the default: whole-program\n"
    "                       units where libnvJitLink is found, each kernel with the code\n"
    "                       of a whole-module build; see taskcache help build)\n"
    "  TASKCACHE_UNIT_COST=N  split every module into units of about N statements\n"
    "                       (debugging; as taskcache build --unit-cost)\n"
    "  TASKCACHE_PTXAS      NVIDIA's ptxas\n";

/* Set while `taskcache ptxas` runs: a ptxas that turns out to be this
 * program again (a launcher script that calls taskcache, say) stops at
 * once instead of calling itself forever. */
#define GUARD "TASKCACHE_IN_PTXAS"

/* ---- NVIDIA's ptxas -------------------------------------------------------- */

/* A runnable file that is not this program. */
static int is_other_ptxas(const char *path, const struct stat *self)
{
    struct stat st;
    if (access(path, X_OK) != 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    return !(self && st.st_dev == self->st_dev && st.st_ino == self->st_ino);
}

int cli_real_ptxas(char *out, size_t cap)
{
    struct stat self_st, *self = stat("/proc/self/exe", &self_st) == 0 ? &self_st : NULL;
    const char *env = getenv("TASKCACHE_PTXAS");
    const char *home = getenv("CUDA_HOME");
    char path[PATH_MAX];
    if (env && *env && is_other_ptxas(env, self)) {
        snprintf(out, cap, "%s", env);
        return 0;
    }
    if (home && *home && snprintf(path, sizeof path, "%s/bin/ptxas", home) < (int)sizeof path &&
        is_other_ptxas(path, self)) {
        snprintf(out, cap, "%s", path);
        return 0;
    }
#ifdef TC_CUDA_BIN_DIR
    if (*TC_CUDA_BIN_DIR && snprintf(path, sizeof path, "%s/ptxas", TC_CUDA_BIN_DIR) <
                                (int)sizeof path && is_other_ptxas(path, self)) {
        snprintf(out, cap, "%s", path);
        return 0;
    }
#endif
    const char *dirs = getenv("PATH");
    while (dirs && *dirs) {
        size_t n = strcspn(dirs, ":");
        if (n && n + 7 < sizeof path) {
            snprintf(path, sizeof path, "%.*s/ptxas", (int)n, dirs);
            if (is_other_ptxas(path, self)) {
                snprintf(out, cap, "%s", path);
                return 0;
            }
        }
        dirs += n + (dirs[n] == ':');
    }
    snprintf(out, cap, "no ptxas other than taskcache itself in $TASKCACHE_PTXAS (%s), "
             "$CUDA_HOME/bin (%s) or $PATH", env ? env : "unset", home ? home : "unset");
    return -1;
}

/* ---- the log ------------------------------------------------------------------ */

/* One line in $TASKCACHE_LOG, as `taskcache run` writes them: the file is
 * opened for each line, with O_APPEND, so that the ptxas processes of a
 * parallel build can share it. */
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    const char *path = getenv("TASKCACHE_LOG");
    if (!path || !*path)
        return;
    char line[1024];
    int n = snprintf(line, sizeof line, "taskcache[%ld]: ptxas: ", (long)getpid());
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
    (void)w; /* a log that cannot be written is no reason to fail a build */
    close(fd);
}

/* Hands the command to NVIDIA's ptxas as it came. Returns only when it
 * cannot be started (ptxas's own status for a failure then). */
static int hand_over(const char *real, int argc, char **argv, const char *why)
{
    note("%s: %s", real, why);
    char **words = calloc((size_t)argc + 2, sizeof *words);
    if (words) {
        words[0] = (char *)real;
        memcpy(words + 1, argv, (size_t)argc * sizeof *words);
        fflush(NULL);
        execv(real, words);
    }
    fprintf(stderr, "taskcache ptxas: error: cannot run %s: %s\n", real, strerror(errno));
    free(words);
    return 255;
}

/* ---- what ptxas prints ---------------------------------------------------------- */

/* The library's warnings in ptxas's words ("IN:12: warning: msg" is
 * "ptxas IN, line 12; warning : msg"); taskcache's own warnings (a cache
 * it cannot write) as they are; notes only in the log. infos: only ptxas's
 * numbered advice ("IN: info: (C7511) ..."), which it prints after the
 * register limits of -v; otherwise all but that. */
static void print_diagnostics(const tc_result *r, const char *name, int infos)
{
    size_t nlen = strlen(name);
    for (const char *d = tc_result_diagnostics(r); *d;) {
        size_t n = strcspn(d, "\n");
        const char *line = d, *rest = d + nlen + 1;
        d += n + (d[n] == '\n');
        if (n > nlen && !strncmp(line, name, nlen) && line[nlen] == ':') {
            char *end;
            unsigned long ln = strtoul(rest, &end, 10);
            int numbered = end > rest && *end == ':';
            const char *kind = numbered ? end + 2 : rest + 1;
            size_t left = (size_t)(line + n - kind);
            int info = !numbered && left > 6 && !strncmp(kind, "info: ", 6);
            if (info != infos)
                continue;
            if (left > 9 && !strncmp(kind, "warning: ", 9)) {
                if (numbered)
                    fprintf(stderr, "ptxas %s, line %lu; warning : %.*s\n", name, ln,
                            (int)(left - 9), kind + 9);
                else
                    fprintf(stderr, "ptxas warning : %.*s\n", (int)(left - 9), kind + 9);
                continue;
            }
            if (info) {
                fprintf(stderr, "ptxas info    : %.*s\n", (int)(left - 6), kind + 6);
                continue;
            }
            if (left > 6 && !strncmp(kind, "note: ", 6)) {
                note("%.*s", (int)n, line);
                continue;
            }
        }
        if (!infos)
            fprintf(stderr, "%.*s\n", (int)n, line);
    }
}

/* What ptxas prints on standard error, in its order: warnings about the
 * input, -v's register limits, numbered advice, the --warn-on-* warnings
 * and -v's report, these from the kernels' records. */
static void print_report(const tc_result *r, const px_args *a)
{
    print_diagnostics(r, a->input, 0);
    cli_print_ptxas_report(r, a->verbose ? TC_PTXAS_LIMITS : 0u);
    print_diagnostics(r, a->input, 1);
    cli_print_ptxas_report(r, (a->warn_spills ? TC_PTXAS_WARN_SPILLS : 0u) |
                       (a->warn_lmem ? TC_PTXAS_WARN_LOCAL_MEMORY : 0u) |
                       (a->verbose ? TC_PTXAS_RESOURCES : 0u));
}

/* ---- the build -------------------------------------------------------------------- */

static char *read_options_file(void *ctx, const char *path, size_t *len)
{
    (void)ctx;
    return cli_read_file(path, len);
}

/* The options of the build; NULL when one is refused (ptxas then says). */
static tc_options *build_options(const px_args *a, const char *real)
{
    tc_options *o = tc_options_new();
    if (!o)
        return NULL;
    int ok = tc_options_set_arch(o, a->arch, NULL) == TC_OK;
    for (size_t i = 0; ok && i < a->ncopts; i++)
        ok = tc_options_add_compiler_option(o, a->copts[i], NULL) == TC_OK;
    /* The very ptxas this command stands in for (a tool read its
     * --version), in processes: a module compiled whole is then that
     * ptxas's own file, to the byte. TASKCACHE_COMPILER=auto lets the
     * in-process compiler stand in where it is that release (its tool
     * note differs), =inprocess asks for it whatever the release. */
    tc_options_set_ptxas(o, real);
    if (!getenv("TASKCACHE_COMPILER"))
        tc_options_set_compiler(o, TC_COMPILER_PTXAS);
    if (a->compile_only)
        tc_options_set_output(o, TC_OUTPUT_OBJECT);
    tc_options_set_exact_whole(o, 1); /* ptxas's own file, to the byte but the tool note */
    const char *jobs = getenv("TASKCACHE_JOBS");
    if (jobs && atoi(jobs) > 0)
        tc_options_set_jobs(o, atoi(jobs));
    const char *cost = getenv("TASKCACHE_UNIT_COST"); /* debugging: split any module */
    if (cost && atoi(cost) > 0)
        tc_options_set_unit_cost(o, (unsigned)atoi(cost));
    if (!ok) {
        tc_options_free(o);
        return NULL;
    }
    return o;
}

/* Whether path names the very file of the input. */
static int same_file(const char *input, const char *path)
{
    struct stat a, b;
    return stat(input, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Builds a.input to the output. 0 done; otherwise why not (for the log),
 * and the command goes to ptxas. */
static const char *build(const px_args *a, const char *real)
{
    const char *out = a->output ? a->output : "elf.o"; /* ptxas's default */
    if (same_file(a->input, out))
        return "the output is the input file";
    struct stat in;
    if (stat(a->input, &in) == 0 && !S_ISREG(in.st_mode))
        return "the input is not a regular file (a pipe is read once: ptxas reads it)";
    tc_options *o = build_options(a, real);
    if (!o)
        return "an option the library refuses";
    size_t len = 0;
    char *ptx = cli_read_file(a->input, &len);
    const char *why = NULL;
    tc_cache *cache = NULL;
    tc_result *r = NULL;
    tc_error err;
    if (!ptx) {
        why = "the input cannot be read";
        goto done;
    }
    if (memchr(ptx, '\0', len)) { /* ptxas stops there, with an error */
        why = "the input holds a NUL byte";
        goto done;
    }
    /* a cache that cannot be opened is no reason to fail: build without */
    if (tc_cache_open(NULL, &cache, NULL) != TC_OK)
        cache = NULL;
    cli_catch_interrupts(o);
    tc_status st = tc_build(cache, o, ptx, len, a->input, &r);
    if (cli_interrupted())
        goto done;
    if (st != TC_OK) {
        why = "the build failed";
        note("%s: %s: %.*s", a->input, tc_status_name(st),
             r ? (int)strcspn(tc_result_diagnostics(r), "\n") : 0,
             r ? tc_result_diagnostics(r) : "");
        goto done;
    }
    if (tc_result_write_image(r, out, &err) != TC_OK) {
        why = "the output cannot be written";
        goto done;
    }
    print_report(r, a);
    tc_report rep;
    tc_result_report(r, &rep);
    if (rep.module_hit)
        note("%s: %u kernels: module record hit, %.3f s; compiler: %s", a->input, rep.entries,
             rep.seconds, tc_result_compiler(r));
    else
        note("%s: %u kernels in %u units: %u from cache, %u compiled (%s); %.3f s; compiler: %s",
             a->input, rep.entries, rep.units, rep.unit_hits, rep.units_compiled,
             rep.split ? "split" : "whole module", rep.seconds, tc_result_compiler(r));
done:
    tc_result_free(r);
    cli_close_cache(cache);
    tc_options_free(o);
    free(ptx);
    if (cli_interrupted())
        cli_die_of_interrupt();
    return why;
}

int cli_ptxas(int argc, char **argv, int as_ptxas)
{
    if (getenv(GUARD)) {
        fprintf(stderr, "taskcache ptxas: error: the ptxas it runs leads back to taskcache; "
                        "set TASKCACHE_PTXAS to NVIDIA's ptxas\n");
        return 255;
    }
    setenv(GUARD, "1", 1);
    /* a variable that names no compiler is the user's mistake to hear of,
     * not a reason to compile with another compiler or to hand over */
    if (cli_check_environment("taskcache ptxas") != EXIT_OK)
        return EXIT_USAGE;
    px_args a;
    px_parse(argc, argv, read_options_file, NULL, &a);
    if (a.help && !as_ptxas) {
        px_free(&a);
        fputs(cli_usage_ptxas, stdout);
        return EXIT_OK;
    }
    char real[PATH_MAX];
    if (cli_real_ptxas(real, sizeof real) != 0) {
        fprintf(stderr, "taskcache ptxas: error: cannot find NVIDIA's ptxas: %s\n", real);
        px_free(&a);
        return 255;
    }
    const char *why = a.pass;
    if (!why)
        why = build(&a, real);
    if (!why) {
        px_free(&a);
        return EXIT_OK;
    }
    char reason[256];
    snprintf(reason, sizeof reason, "%s", why); /* a.reason goes with px_free */
    px_free(&a);
    return hand_over(real, argc, argv, reason);
}
