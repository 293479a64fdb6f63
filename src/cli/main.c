/* taskcache: the command-line tool. A thin client of include/taskcache.h:
 * it parses arguments, reads the input, calls the library and prints what
 * the library reports. This file: the commands, help, build and explain;
 * maintain.c: the cache's upkeep; run.c: running programs under the
 * interceptor. Exit codes: 0 ok, 1 input or compile error, 2 usage. */
#define _GNU_SOURCE /* mallopt, madvise, sbrk */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/common.h"
#include "cli/maintain.h"
#include "cli/progress.h"
#include "cli/ptxas.h"
#include "cli/recover.h"
#include "cli/remote.h"
#include "cli/run.h"
#include "taskcache.h"

static const char usage_main[] =
    "usage: taskcache <command> [options]\n"
    "\n"
    "Incremental, cached compilation of PTX modules: each kernel is compiled\n"
    "separately (grouped into small units), cached, and linked into one cubin;\n"
    "after an edit only the changed kernel's unit is compiled again, and an\n"
    "unchanged module is a single cache read.\n"
    "\n"
    "commands:\n"
    "  build IN.ptx -o OUT.cubin --arch sm_XX [options]   build a linked cubin\n"
    "  explain IN.ptx --arch sm_XX [options]              show kernels, unit keys, hits/misses\n"
    "  stats [--json] [--zero]                            cache statistics\n"
    "  gc [--max-size SIZE] [--evict-older-than AGE]      evict least recently used records\n"
    "  verify [--remove-bad]                              check every record's checksum\n"
    "  clear                                              remove every cached record\n"
    "  run [--] CMD [ARGS...]                             run CMD with the PTX it hands the\n"
    "                                                     CUDA driver built by taskcache\n"
    "  ptxas [ptxas options] IN.ptx -o OUT.cubin          the ptxas command line, cached\n"
    "                                                     per kernel (nvcc, clang, Triton, XLA)\n"
    "  shims DIR                                          DIR/bin/ptxas and DIR/bin/nvcc that\n"
    "                                                     run taskcache ptxas\n"
    "  remote check [--remote SPEC]                       check the remote storage: reachable,\n"
    "                                                     writable, round trip\n"
    "  help [command]                                     help for a command\n"
    "  version                                            print versions\n"
    "\n"
    "The cache lives in --cache-dir DIR, else $TASKCACHE_DIR, else\n"
    "$XDG_CACHE_HOME/taskcache, else ~/.cache/taskcache. Remote storage shared\n"
    "by many machines (Redis, Redis Cluster, WebDAV) stands behind it with\n"
    "--remote SPEC or $TASKCACHE_REMOTE ('taskcache help remote').\n"
    "Exit status: 0 success, 1 input or compile error, 2 usage error.\n"
    "Run 'taskcache help build' for the build options.\n";

static const char usage_build[] =
    "usage: taskcache build IN.ptx -o OUT.cubin --arch sm_XX [options]\n"
    "       taskcache explain IN.ptx --arch sm_XX [options]\n"
    "\n"
    "IN.ptx may be '-' for standard input, OUT.cubin '-' for standard output.\n"
    "build replaces a regular OUT.cubin atomically and writes a device or a pipe\n"
    "in place; explain compiles nothing and lists every kernel with its unit,\n"
    "its keys and whether its unit is cached. Ctrl-C stops a build and removes\n"
    "its temporary files, without waiting for a slow remote cache (lookups give\n"
    "up, uploads get a second); what already compiled stays cached. On a terminal, a\n"
    "build that runs for more than a second shows how many of its compiles are\n"
    "done on one line, erased when it ends.\n"
    "\n"
    "target and compiler options (all of them are part of every cache key):\n"
    "  --arch sm_XX, -arch=sm_XX   GPU target, e.g. sm_90 or sm_90a (required)\n"
    "  -O N, -ON                   ptxas optimization level (ptxas default: 3)\n"
    "  -lineinfo                   generate line-number information\n"
    "  -maxrregcount N             limit registers per thread\n"
    "  --fmad=true|false           contraction of multiply-add\n"
    "  -Xptxas OPT                 pass any other ptxas option (repeatable;\n"
    "                              options with values as --opt=value); -Xptxas -v\n"
    "                              prints ptxas's report (registers, memory) of every\n"
    "                              kernel, from the cache too, and is not in the key\n"
    "  --ptxas PATH                the ptxas to use (default: $TASKCACHE_PTXAS,\n"
    "                              $CUDA_HOME/bin, $CUDA_PATH/bin, the toolkit found at\n"
    "                              build time, $PATH). One named here, by those variables\n"
    "                              or by CUDA_HOME/CUDA_PATH is the compiler that compiles\n"
    "                              (under auto, the in-process compiler stands in only for\n"
    "                              its very release); -v says which compiled\n"
    "  --compiler ptxas|inprocess|auto\n"
    "                              ptxas processes, or nvPTXCompiler on threads when this\n"
    "                              build has it (default: $TASKCACHE_COMPILER, else auto;\n"
    "                              any other value of the variable is a usage error).\n"
    "                              auto: nvPTXCompiler when no ptxas was named or the one\n"
    "                              named is its release, else ptxas; it gets threads of\n"
    "                              its own and, should it crash, the build runs again with\n"
    "                              ptxas processes (a note says so); inprocess gives it\n"
    "                              none, and a crash ends the build\n"
    "\n"
    "build options:\n"
    "  -o FILE                     output cubin (required for build; - for stdout)\n"
    "  -j N, --jobs N              compiler processes at once (default: all CPUs)\n"
    "  --cache-dir DIR             cache directory\n"
    "  --remote SPEC               remote storage behind it, e.g. redis://cache:6379 or\n"
    "                              'https://cache/tc|read-only'; 'none' for none (default\n"
    "                              $TASKCACHE_REMOTE, else remote = in taskcache.conf;\n"
    "                              see 'taskcache help remote')\n"
    "  --no-cache                  build without reading or writing the cache\n"
    "  --no-module-cache           skip whole-module records (debugging)\n"
    "  --no-unit-cache             skip unit records (debugging)\n"
    "  --no-split                  compile the module whole (debugging)\n"
    "  --max-size SIZE             cache size limit for this run (e.g. 2G, 500M; 0 = none;\n"
    "                              default $TASKCACHE_MAXSIZE, taskcache.conf, or 5G)\n"
    "  --trace FILE                append the build's events (each compile, link) to a\n"
    "                              trace file Perfetto and chrome://tracing open\n"
    "                              (default $TASKCACHE_TRACE); -v names the slowest\n"
    "                              compiles either way\n"
    "  --unit-cost N               target size of a compile unit, in PTX statements\n"
    "                              (default 500, on any machine; a small module, one\n"
    "                              unit of 1000 or 1,500 statements in all, is\n"
    "                              compiled whole; given, every module is split)\n"
    "  --whole-program-units       compile units with ptxas -ewp: each kernel gets the\n"
    "                              code of a whole-module build (same registers and call\n"
    "                              sequences); links with libnvJitLink. The default where\n"
    "                              libnvJitLink is found ($TASKCACHE_UNIT_CODE: auto)\n"
    "  --relocatable-units         compile units with ptxas -c: ~1.2x faster to compile,\n"
    "                              but calls follow the full calling convention (more\n"
    "                              registers); links with nvlink or libnvJitLink\n"
    "  -v, --verbose               print what was reused and compiled\n"
    "  -q, --quiet                 do not print notes or progress (errors and warnings\n"
    "                              still print)\n"
    "  --full-keys                 explain: print whole 64-digit keys\n"
    "  --json                      explain: print JSON (every key in full, the\n"
    "                              parameter layout and the resource report)\n"
    "\n"
    "When a module holds a construct that cannot be split safely (DWARF sections\n"
    "from -G, device-side launches, ...), or its image would carry line information\n"
    "(.loc directives, as nvcc -lineinfo writes, or -lineinfo; not with -Xptxas\n"
    "-suppress-debug-info), or the build has -g or -sanitize, it is compiled whole,\n"
    "still cached, and a note says why. A small module (its kernels fit in one\n"
    "unit, or cost 1,500 PTX statements or less) is compiled whole too, without a\n"
    "note: one compile and no link ('explain' says so); an edit of it compiles it\n"
    "again. A module compiled whole gets a compiler thread on every CPU\n"
    "(--split-compile=0, the same code as one thread) unless -Xptxas sets a\n"
    "split-compile of its own or fast-compile (-Ofc, whose code differs with\n"
    "threads); where the compiler fails with it (ptxas 13.0 crashes on a few\n"
    "modules), it compiles again without.\n";

static int add_opt(args *a, const char *opt)
{
    tc_error err;
    if (tc_options_add_compiler_option(a->opts, opt, &err) != TC_OK)
        return cli_usage_error("%s", err.message);
    return EXIT_OK;
}

static int add_opt_value(args *a, const char *name, const char *value)
{
    if (!*value)
        return cli_usage_error("option %s needs a value", name);
    char buf[512];
    snprintf(buf, sizeof buf, "%s=%s", name, value);
    return add_opt(a, buf);
}

static int parse_build_args(int argc, char **argv, args *a, int need_output)
{
    int rc;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i], *v;
        if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
            fputs(usage_build, stdout);
            exit(EXIT_OK);
        } else if (!strcmp(s, "-") || s[0] != '-') {
            if (a->input)
                return cli_usage_error("more than one input file: '%s'", s);
            a->input = s;
        } else if ((v = cli_value_of(argc, argv, &i, "-o", 1)) ||
                   (v = cli_value_of(argc, argv, &i, "--output", 0))) {
            if (!*v)
                return cli_usage_error("%s needs a file name", s);
            a->output = v;
        } else if ((v = cli_value_of(argc, argv, &i, "--arch", 0)) ||
                   (v = cli_value_of(argc, argv, &i, "-arch", 0))) {
            tc_error err;
            if (tc_options_set_arch(a->opts, v, &err) != TC_OK)
                return cli_usage_error("%s", err.message);
        } else if ((v = cli_value_of(argc, argv, &i, "-j", 1)) ||
                   (v = cli_value_of(argc, argv, &i, "--jobs", 0))) {
            char *end;
            long j = strtol(v, &end, 10);
            if (!*v || *end || j < 1 || j > 4096)
                return cli_usage_error("-j needs a positive number, not '%s'", v);
            tc_options_set_jobs(a->opts, (int)j);
        } else if ((v = cli_value_of(argc, argv, &i, "--cache-dir", 0))) {
            if (!*v)
                return cli_usage_error("%s needs a directory", "--cache-dir");
            a->cache_dir = v;
        } else if ((v = cli_value_of(argc, argv, &i, "--remote", 0))) {
            a->remote = v;
        } else if ((v = cli_value_of(argc, argv, &i, "--ptxas", 0))) {
            tc_options_set_ptxas(a->opts, v);
        } else if ((v = cli_value_of(argc, argv, &i, "--unit-cost", 0))) {
            char *end;
            long c = strtol(v, &end, 10);
            if (!*v || *end || c < 1)
                return cli_usage_error("--unit-cost needs a positive number, not '%s'", v);
            tc_options_set_unit_cost(a->opts, (unsigned)c);
        } else if (!strcmp(s, "-O") || (s[1] == 'O' && s[2] >= '0' && s[2] <= '9' && !s[3])) {
            const char *lvl = s[2] ? s + 2 : (i + 1 < argc ? argv[++i] : "");
            if (strlen(lvl) != 1 || lvl[0] < '0' || lvl[0] > '3')
                return cli_usage_error("-O needs a level from 0 to 3, not '%s'", lvl);
            char o[4] = {'-', 'O', lvl[0], 0};
            if ((rc = add_opt(a, o)))
                return rc;
        } else if (!strcmp(s, "-lineinfo") || !strcmp(s, "--generate-line-info")) {
            if ((rc = add_opt(a, "-lineinfo")))
                return rc;
        } else if ((v = cli_value_of(argc, argv, &i, "-maxrregcount", 0)) ||
                   (v = cli_value_of(argc, argv, &i, "--maxrregcount", 0))) {
            if ((rc = add_opt_value(a, "--maxrregcount", v)))
                return rc;
        } else if ((v = cli_value_of(argc, argv, &i, "--fmad", 0)) ||
                   (v = cli_value_of(argc, argv, &i, "-fmad", 0))) {
            if (strcmp(v, "true") && strcmp(v, "false"))
                return cli_usage_error("--fmad takes true or false, not '%s'", v);
            if ((rc = add_opt_value(a, "--fmad", v)))
                return rc;
        } else if ((v = cli_value_of(argc, argv, &i, "-Xptxas", 0))) {
            if (!*v)
                return cli_usage_error("%s needs an option", "-Xptxas");
            if (!strcmp(v, "-v") || !strcmp(v, "--verbose"))
                a->ptxas_verbose = 1; /* a report, not a compiler option: not in the key */
            else if ((rc = add_opt(a, v)))
                return rc;
        } else if ((v = cli_value_of(argc, argv, &i, "--trace", 0))) {
            if (tc_options_set_trace(a->opts, v) != TC_OK)
                return EXIT_FAIL;
        } else if ((v = cli_value_of(argc, argv, &i, "--max-size", 0))) {
            a->max_size = v;
        } else if ((v = cli_value_of(argc, argv, &i, "--compiler", 0))) {
            a->compiler = v;
            if (!strcmp(v, "ptxas"))
                tc_options_set_compiler(a->opts, TC_COMPILER_PTXAS);
            else if (!strcmp(v, "inprocess"))
                tc_options_set_compiler(a->opts, TC_COMPILER_INPROCESS);
            else if (!strcmp(v, "auto"))
                tc_options_set_compiler(a->opts, TC_COMPILER_AUTO);
            else
                return cli_usage_error("--compiler takes ptxas, inprocess or auto, not '%s'", v);
        } else if (!strcmp(s, "--whole-program-units")) {
            tc_options_set_unit_code(a->opts, TC_UNIT_CODE_WHOLE_PROGRAM);
        } else if (!strcmp(s, "--relocatable-units")) {
            tc_options_set_unit_code(a->opts, TC_UNIT_CODE_RELOCATABLE);
        } else if (!strcmp(s, "--no-cache")) {
            a->no_cache = 1;
        } else if (!strcmp(s, "--no-module-cache")) {
            tc_options_set_tier(a->opts, TC_TIER_MODULE, 0);
        } else if (!strcmp(s, "--no-unit-cache")) {
            tc_options_set_tier(a->opts, TC_TIER_UNIT, 0);
        } else if (!strcmp(s, "--no-split")) {
            tc_options_set_split(a->opts, 0);
        } else if (!strcmp(s, "-v") || !strcmp(s, "--verbose")) {
            a->verbose = 1;
        } else if (!strcmp(s, "-q") || !strcmp(s, "--quiet")) {
            a->quiet = 1;
        } else if (!strcmp(s, "--full-keys")) {
            a->full_keys = 1;
        } else if (!strcmp(s, "--json")) {
            a->json = 1;
        } else {
            return cli_usage_error("unknown option '%s'", s);
        }
    }
    if (!a->input)
        return cli_usage_error("%s", "no input file");
    if (need_output && !a->output)
        return cli_usage_error("%s", "no output file: give -o OUT.cubin");
    tc_error err; /* a variable that names no compiler, when no option replaced it */
    if (tc_options_check(a->opts, &err) != TC_OK)
        return cli_usage_error("%s", err.message);
    return EXIT_OK;
}

static void explain_json(const char *name, const tc_result *r, const tc_report *rep)
{
    const char *why = tc_result_whole_reason(r);
    printf("{\"input\": ");
    cli_json_string(name);
    printf(", \"mode\": \"%s\", \"whole_reason\": ", why ? "whole" : "split");
    if (why)
        cli_json_string(why);
    else
        printf("null");
    printf(", \"unit_code\": \"%s\"",
           why ? "none" : rep->whole_program_units ? "whole-program" : "relocatable");
    printf(", \"compiler\": ");
    cli_json_string(tc_result_compiler(r));
    printf(", \"module_cached\": %s, \"units\": %u, \"units_cached\": %u, \"entries\": [",
           rep->module_hit ? "true" : "false", rep->units, rep->unit_hits);
    for (size_t i = 0; i < tc_result_entry_count(r); i++) {
        tc_entry_info e;
        tc_result_entry(r, i, &e);
        printf("%s\n  {\"name\": ", i ? "," : "");
        cli_json_string(e.name);
        printf(", \"unit\": %u, \"unit_key\": \"%s\", \"slice_key\": \"%s\", \"cached\": %s, "
               "\"param_bytes\": %u, \"params\": [",
               e.unit, e.unit_key, e.slice_key, e.cached ? "true" : "false", e.param_bytes);
        for (uint32_t k = 0; k < e.param_count; k++)
            printf("%s{\"type\": \"%s\", \"offset\": %u, \"size\": %u, \"align\": %u}",
                   k ? ", " : "", e.params[k].type, e.params[k].offset, e.params[k].size,
                   e.params[k].align);
        printf("], \"maxntid\": [%u, %u, %u], \"reqntid\": [%u, %u, %u], "
               "\"minnctapersm\": %u, \"maxnreg\": %u}",
               e.maxntid[0], e.maxntid[1], e.maxntid[2], e.reqntid[0], e.reqntid[1],
               e.reqntid[2], e.minnctapersm, e.maxnreg);
    }
    printf("\n]}\n");
}

static int exit_for(tc_status s)
{
    switch (s) {
    case TC_OK: return EXIT_OK;
    case TC_ERR_INVALID: return EXIT_USAGE;
    default: return EXIT_FAIL;
    }
}

static int line_has(const char *line, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(line + i, needle, k))
            return 1;
    return 0;
}

/* Prints the library's diagnostics; notes are dropped with --quiet. */
static void print_diagnostics(const tc_result *r, int quiet)
{
    const char *d = tc_result_diagnostics(r);
    while (*d) {
        size_t n = strcspn(d, "\n");
        int note = line_has(d, n, ": note: ");
        if (!(note && quiet))
            fprintf(stderr, "%.*s\n", (int)n, d);
        d += n + (d[n] == '\n');
    }
}

/* Whether path names the very file of the input (then -o would destroy
 * it before a failed build could say why). */
static int same_file(const char *input, const char *path)
{
    struct stat a, b;
    return strcmp(input, "-") && strcmp(path, "-") && stat(input, &a) == 0 &&
           stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* -o FILE, or -o - for standard output. */
static int write_output(const tc_result *r, const char *path)
{
    tc_error err;
    if (strcmp(path, "-")) {
        if (tc_result_write_image(r, path, &err) == TC_OK)
            return EXIT_OK;
        fprintf(stderr, "%s: error: %s\n", cli_prog, err.message);
        return EXIT_FAIL;
    }
    size_t n;
    const void *image = tc_result_image(r, &n);
    if (fwrite(image, 1, n, stdout) == n && fflush(stdout) == 0)
        return EXIT_OK;
    fprintf(stderr, "%s: error: cannot write the image to standard output: %s\n", cli_prog,
            strerror(errno));
    return EXIT_FAIL;
}

static void print_build_report(const char *name, const tc_result *r)
{
    tc_report rep;
    tc_result_report(r, &rep);
    if (rep.module_hit)
        fprintf(stderr, "%s: %s: module record hit: %u kernels, %.3f s\n", cli_prog, name,
                rep.entries, rep.seconds);
    else
        fprintf(stderr,
                "%s: %s: %u kernels in %u units: %u from cache, %u compiled "
                "(%s); compile %.3f s, link %.3f s%s, total %.3f s\n",
                cli_prog, name, rep.entries, rep.units, rep.unit_hits, rep.units_compiled,
                !rep.split                  ? "whole module"
                : rep.whole_program_units ? "split, whole-program units"
                                          : "split, relocatable units",
                rep.seconds_compile, rep.seconds_link,
                !rep.split ? "" : rep.nvjitlink ? " (nvJitLink)" : " (nvlink)", rep.seconds);
    /* the compiler whose code the image holds, hit or not: its identity keyed it */
    fprintf(stderr, "%s: %s: compiler: %s\n", cli_prog, name, tc_result_compiler(r));
    if (*tc_result_slowest(r))
        fprintf(stderr, "%s: %s: slowest compiles: %s\n", cli_prog, name, tc_result_slowest(r));
}

static void print_explain_text(const char *name, const tc_result *r, const tc_report *rep,
                               int full_keys)
{
    const char *why = tc_result_whole_reason(r);
    printf("input:  %s\ncompiler: %s\nmode:   %s%s\nmodule: %s\n", name, tc_result_compiler(r),
           why                        ? "whole module: "
           : rep->whole_program_units ? "split, whole-program units"
                                      : "split, relocatable units",
           why ? why : "", rep->module_hit ? "cached (an unchanged build is one record read)"
                                           : "not cached");
    if (!why)
        printf("units:  %u (%u cached)\n", rep->units, rep->unit_hits);
    int kw = full_keys ? 64 : 16;
    printf("\n%-32s %5s  %-*s  %-*s  %s\n", "KERNEL", "UNIT", kw, "UNIT KEY", kw, "SLICE KEY",
           "UNIT CACHED");
    for (size_t i = 0; i < tc_result_entry_count(r); i++) {
        tc_entry_info e;
        tc_result_entry(r, i, &e);
        printf("%-32s %5u  %-*.*s  %-*.*s  %s\n", e.name, e.unit, kw, kw,
               *e.unit_key ? e.unit_key : "-", kw, kw, *e.slice_key ? e.slice_key : "-",
               why ? "-" : e.cached ? "yes" : "no");
    }
}

/* main's arguments: a build that crashes runs them again (recover.h) */
static int main_argc;
static char **main_argv;

/* The compiler is left to taskcache (--compiler auto, or neither the option
 * nor $TASKCACHE_COMPILER names one): only then may a crashed build be
 * built again with another. */
static int compiler_left_to_us(const args *a)
{
    const char *env = getenv("TASKCACHE_COMPILER");
    if (a->compiler)
        return !strcmp(a->compiler, "auto");
    return !env || (strcmp(env, "ptxas") && strcmp(env, "inprocess"));
}

static int cmd_build(int argc, char **argv, int explain)
{
    int crashed = cli_recovered_from(); /* the signal the first run died of */
    args a;
    memset(&a, 0, sizeof a);
    a.opts = tc_options_new();
    if (!a.opts)
        return EXIT_FAIL;
    int rc = parse_build_args(argc, argv, &a, !explain);
    tc_cache *cache = NULL;
    char *ptx = NULL;
    size_t len = 0;
    tc_result *r = NULL;
    if (rc)
        goto done;
    if (!explain && same_file(a.input, a.output)) {
        rc = cli_usage_error("the output %s is the input file: name another one", a.output);
        goto done;
    }
    rc = EXIT_FAIL;
    if (!(ptx = cli_read_file(a.input, &len))) {
        fprintf(stderr, "%s: error: cannot open %s: %s\n", cli_prog, a.input, strerror(errno));
        goto done;
    }
    if (!a.no_cache && !(cache = cli_open_cache(a.cache_dir)))
        goto done;
    if (cache && (rc = cli_use_remote(cache, a.remote)) != EXIT_OK)
        goto done;
    rc = EXIT_FAIL;
    if (cache && a.max_size) {
        uint64_t bytes;
        if (tc_parse_size(a.max_size, &bytes) != 0) {
            rc = cli_usage_error("--max-size takes a size like 5G or 500M, not '%s'", a.max_size);
            goto done;
        }
        tc_cache_set_max_size(cache, bytes);
    }
    const char *name = strcmp(a.input, "-") ? a.input : "<stdin>";
    if (crashed) /* ptxas builds it, kept under the key this run's first try missed */
        tc_options_set_inprocess_crashed(a.opts, 1);
    cli_catch_interrupts(a.opts);
    cli_progress *progress = explain ? NULL : cli_progress_start(a.opts, name, a.quiet);
    /* A build that can start over (recover.h) lets the in-process compiler
     * use threads, with which it ends the process on a failed compile;
     * explain compiles nothing, and keys as that build would. */
    int threads = compiler_left_to_us(&a) && tc_have_inprocess_compiler();
    int guard = threads && !crashed && !explain &&
                cli_recover_begin(main_argc, main_argv, strcmp(a.input, "-") ? NULL : ptx, len,
                                  progress != NULL) == 0;
    /* the second try keys as the first did, whose key it keeps the image under */
    if (threads && (explain || guard || crashed))
        tc_options_set_inprocess_threads(a.opts, 1);
    tc_status st = explain ? tc_explain(cache, a.opts, ptx, len, name, &r)
                           : tc_build(cache, a.opts, ptx, len, name, &r);
    if (guard)
        cli_recover_end();
    cli_progress_stop(progress);
    /* A failed compile ends the in-process compiler too: then its errors,
     * from ptxas, say all there is to say. */
    if (crashed && st != TC_ERR_COMPILE && !a.quiet)
        fprintf(stderr, "%s: note: %s: the build crashed (%s) with the in-process compiler; %s\n",
                cli_prog, name, strsignal(crashed),
                st == TC_OK ? "built with ptxas processes"
                            : "building it with ptxas processes failed too");
    if (cli_interrupted())
        goto done;
    if (!r) {
        fprintf(stderr, "%s: error: %s\n", cli_prog, tc_status_name(st));
        rc = exit_for(st);
        goto done;
    }
    print_diagnostics(r, a.quiet);
    rc = exit_for(st);
    if (st != TC_OK)
        goto done;
    tc_report rep;
    tc_result_report(r, &rep);
    if (!explain) {
        rc = write_output(r, a.output);
        if (rc == EXIT_OK && a.ptxas_verbose)
            cli_print_ptxas_report(r, TC_PTXAS_VERBOSE); /* -Xptxas -v */
        if (rc == EXIT_OK && a.verbose)
            print_build_report(name, r);
    } else if (a.json) {
        explain_json(name, r, &rep);
    } else {
        print_explain_text(name, r, &rep, a.full_keys);
    }
    cli_flush_remote(cache);
done:
    tc_result_free(r);
    free(ptx);
    cli_close_cache(cache);
    tc_options_free(a.opts);
    if (cli_interrupted())
        cli_die_of_interrupt(); /* having removed what the build left */
    return rc;
}

/* The program's name without its directory. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The commands that build compile and link but never run GPU code. The
 * first nvJitLinkCreate of a process loads the CUDA driver and initializes
 * it, which on the H200 machine cost 0.19 s of system time with the GPU
 * visible and 24 ms with none: on the critical path of every build that
 * links in a fresh process. So they hide the devices from the driver, in
 * their own process and the compiler and linker processes they start
 * (which use none). `taskcache run` leaves the program it runs alone. */
static void hide_gpus(void) { setenv("CUDA_VISIBLE_DEVICES", "", 1); }

/* The allocator of the tool's process, set for what a build is: tens of MB
 * allocated, then exit. By default glibc gives each block of 128 KB or more
 * its own mapping and unmaps it when freed, so the next such block faults
 * its pages in again, and the heap grows 128 KB at a time: a relink of a
 * 250-kernel module took 6,400 page faults, a fifth of its time on the
 * 2-core machine. Blocks up to 64 MB now come from the heap and are reused,
 * the heap grows 64 MB at a time (address space, not memory), and that span
 * asks for 2 MB pages where transparent huge pages are given on request
 * (the "madvise" setting), so one fault maps 512 pages. The results do not
 * change. A user who tunes glibc's malloc (GLIBC_TUNABLES) keeps their own
 * settings, and the library never touches its host's allocator. */
static void tune_allocator(void)
{
#if defined(__GLIBC__) && defined(M_TOP_PAD) && defined(MADV_HUGEPAGE)
    const size_t step = (size_t)64 << 20, huge = (size_t)2 << 20;
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (tunables && strstr(tunables, "glibc.malloc."))
        return;
    if (!mallopt(M_MMAP_THRESHOLD, (int)step) || !mallopt(M_TOP_PAD, (int)step))
        return;
    /* grow the heap now, to know the span to advise */
    uintptr_t before = (uintptr_t)sbrk(0);
    void *volatile block = malloc(256 << 10); /* volatile: the call is kept */
    free(block);
    uintptr_t after = (uintptr_t)sbrk(0);
    uintptr_t lo = (before + huge - 1) & ~(uintptr_t)(huge - 1);
    uintptr_t hi = after & ~(uintptr_t)(huge - 1);
    if (before != (uintptr_t)-1 && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice: may be refused */
#endif
}

int main(int argc, char **argv)
{
    main_argc = argc;
    main_argv = argv;
    tune_allocator();
    /* under a name that starts with ptxas (a link made by taskcache shims;
     * Triton's ptxas-blackwell) it is ptxas */
    if (argc > 0 && !strncmp(base_name(argv[0]), "ptxas", 5)) {
        hide_gpus();
        return cli_ptxas(argc - 1, argv + 1, 1);
    }
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "build") || !strcmp(cmd, "explain") || !strcmp(cmd, "ptxas"))
        hide_gpus();
    if (!strcmp(cmd, "build"))
        return cmd_build(argc - 2, argv + 2, 0);
    if (!strcmp(cmd, "explain"))
        return cmd_build(argc - 2, argv + 2, 1);
    if (!strcmp(cmd, "stats"))
        return cli_stats(argc - 2, argv + 2);
    if (!strcmp(cmd, "clear"))
        return cli_clear(argc - 2, argv + 2);
    if (!strcmp(cmd, "gc"))
        return cli_gc(argc - 2, argv + 2);
    if (!strcmp(cmd, "verify"))
        return cli_verify(argc - 2, argv + 2);
    if (!strcmp(cmd, "run"))
        return tc_cli_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "ptxas"))
        return cli_ptxas(argc - 2, argv + 2, 0);
    if (!strcmp(cmd, "shims"))
        return cli_shims(argc - 2, argv + 2);
    if (!strcmp(cmd, "remote"))
        return cli_remote(argc - 2, argv + 2);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("taskcache %s (%s)\n", tc_version(),
               tc_have_inprocess_compiler() ? "with the in-process compiler" : "ptxas backend");
        return EXIT_OK;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
        const char *topic = argc > 2 ? argv[2] : "";
        if (!strcmp(topic, "build") || !strcmp(topic, "explain"))
            fputs(usage_build, stdout);
        else if (!strcmp(topic, "stats"))
            fputs(cli_usage_stats, stdout);
        else if (!strcmp(topic, "clear"))
            fputs(cli_usage_clear, stdout);
        else if (!strcmp(topic, "gc"))
            fputs(cli_usage_gc, stdout);
        else if (!strcmp(topic, "verify"))
            fputs(cli_usage_verify, stdout);
        else if (!strcmp(topic, "run"))
            fputs(tc_cli_usage_run, stdout);
        else if (!strcmp(topic, "ptxas"))
            fputs(cli_usage_ptxas, stdout);
        else if (!strcmp(topic, "shims"))
            fputs(cli_usage_shims, stdout);
        else if (!strcmp(topic, "remote"))
            fputs(cli_usage_remote, stdout);
        else if (!*topic)
            fputs(usage_main, stdout);
        else
            return cli_usage_error("no help for '%s'", topic);
        return EXIT_OK;
    }
    return cli_usage_error("unknown command '%s'", cmd);
}
