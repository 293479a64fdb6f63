/* taskcache: the command-line tool. A thin client of include/taskcache.h:
 * it parses arguments, reads the input, calls the library and prints what
 * the library reports. Exit codes: 0 ok, 1 input or compile error, 2 usage. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "taskcache.h"

#include "cli/run.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

static const char *prog = "taskcache";

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
    "  help [command]                                     help for a command\n"
    "  version                                            print versions\n"
    "\n"
    "The cache lives in --cache-dir DIR, else $TASKCACHE_DIR, else\n"
    "$XDG_CACHE_HOME/taskcache, else ~/.cache/taskcache.\n"
    "Exit status: 0 success, 1 input or compile error, 2 usage error.\n"
    "Run 'taskcache help build' for the build options.\n";

static const char usage_build[] =
    "usage: taskcache build IN.ptx -o OUT.cubin --arch sm_XX [options]\n"
    "       taskcache explain IN.ptx --arch sm_XX [options]\n"
    "\n"
    "IN.ptx may be '-' for standard input. build writes OUT.cubin atomically;\n"
    "explain compiles nothing and lists every kernel with its unit, its keys\n"
    "and whether its unit is cached.\n"
    "\n"
    "target and compiler options (all of them are part of every cache key):\n"
    "  --arch sm_XX, -arch=sm_XX   GPU target, e.g. sm_90 or sm_90a (required)\n"
    "  -O N, -ON                   ptxas optimization level (ptxas default: 3)\n"
    "  -lineinfo                   generate line-number information\n"
    "  -maxrregcount N             limit registers per thread\n"
    "  --fmad=true|false           contraction of multiply-add\n"
    "  -Xptxas OPT                 pass any other ptxas option (repeatable;\n"
    "                              options with values as --opt=value)\n"
    "  --ptxas PATH                the ptxas to use (default: $TASKCACHE_PTXAS,\n"
    "                              $CUDA_HOME/bin, the toolkit found at build time, $PATH)\n"
    "  --compiler ptxas|inprocess|auto\n"
    "                              ptxas processes, or nvPTXCompiler on threads when this\n"
    "                              build has it (default: $TASKCACHE_COMPILER, else auto)\n"
    "\n"
    "build options:\n"
    "  -o FILE                     output cubin (required for build)\n"
    "  -j N, --jobs N              compiler processes at once (default: all CPUs)\n"
    "  --cache-dir DIR             cache directory\n"
    "  --no-cache                  build without reading or writing the cache\n"
    "  --no-module-cache           skip whole-module records (debugging)\n"
    "  --no-unit-cache             skip unit records (debugging)\n"
    "  --no-split                  compile the module whole (debugging)\n"
    "  --max-size SIZE             cache size limit for this run (e.g. 2G, 500M; 0 = none;\n"
    "                              default $TASKCACHE_MAXSIZE, taskcache.conf, or 5G)\n"
    "  --unit-cost N               target size of a compile unit, in PTX statements\n"
    "  --whole-program-units       compile units with ptxas -ewp: each kernel gets the\n"
    "                              code of a whole-module build (same registers and call\n"
    "                              sequences), at ~1.2x the compile time of the default\n"
    "                              relocatable units (-c); links with libnvJitLink\n"
    "  -v, --verbose               print what was reused and compiled\n"
    "  -q, --quiet                 do not print notes (errors and warnings still print)\n"
    "  --full-keys                 explain: print whole 64-digit keys\n"
    "  --json                      explain: print JSON (every key in full, the\n"
    "                              parameter layout and the resource report)\n"
    "\n"
    "When a module holds a construct that cannot be split safely (DWARF sections\n"
    "from -G, device-side launches, ...), it is compiled whole, still cached, and\n"
    "a note says why.\n";

static const char usage_stats[] =
    "usage: taskcache stats [--cache-dir DIR] [--json] [--zero]\n"
    "\n"
    "Prints the cache's counters (summed over every process that used it) and\n"
    "what is on disk. --zero resets the counters afterwards.\n";

static const char usage_gc[] =
    "usage: taskcache gc [--cache-dir DIR] [--max-size SIZE] [--evict-older-than AGE]\n"
    "\n"
    "Evicts the least recently used records (of every tier) until the cache\n"
    "holds 90% of SIZE (default: the cache's limit: $TASKCACHE_MAXSIZE, else\n"
    "max_size in DIR/taskcache.conf, else 5G), and every record unused for\n"
    "AGE (e.g. 30d, 12h, 90m, 3600 seconds). Builds do the size part on their\n"
    "own when the cache outgrows its limit. Also removes temporary files left\n"
    "by killed processes. Safe while other processes use the cache.\n"
    "\n"
    "DIR/taskcache.conf holds 'max_size = 10G' and 'shared = true' (a cache\n"
    "shared by a group: directories 2770, files 0660; default private, 0700).\n";

static const char usage_verify[] =
    "usage: taskcache verify [--cache-dir DIR] [--remove-bad] [--json]\n"
    "\n"
    "Reads every record and checks its header, key and checksum. Builds already\n"
    "treat a bad record as a miss and replace it; --remove-bad deletes them now.\n"
    "Exit status 1 when bad records were found.\n";

static const char usage_clear[] =
    "usage: taskcache clear [--cache-dir DIR]\n"
    "\n"
    "Removes every record and resets the counters. Safe while other processes\n"
    "use the cache: they see misses.\n";

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'taskcache help' for more information.\n");
    return EXIT_USAGE;
}

typedef struct args {
    const char *input;
    const char *output;
    const char *cache_dir;
    int no_cache, verbose, quiet, json, zero, full_keys;
    const char *max_size;
    const char *older_than;
    int remove_bad;
    tc_options *opts;
} args;

/* Accepts "--name VALUE", "--name=VALUE" and, for short forms, "-nVALUE".
 * Returns the value or NULL if argv[*i] is not this option. */
static const char *value_of(int argc, char **argv, int *i, const char *name, int attached)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] == '\0') {
        if (*i + 1 >= argc)
            return "";
        return argv[++*i];
    }
    return attached ? a + n : NULL;
}

static int add_opt(args *a, const char *opt)
{
    tc_error err;
    if (tc_options_add_compiler_option(a->opts, opt, &err) != TC_OK)
        return usage_error("%s", err.message);
    return EXIT_OK;
}

static int add_opt_value(args *a, const char *name, const char *value)
{
    if (!*value)
        return usage_error("option %s needs a value", name);
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
                return usage_error("more than one input file: '%s'", s);
            a->input = s;
        } else if ((v = value_of(argc, argv, &i, "-o", 1)) ||
                   (v = value_of(argc, argv, &i, "--output", 0))) {
            if (!*v)
                return usage_error("%s needs a file name", s);
            a->output = v;
        } else if ((v = value_of(argc, argv, &i, "--arch", 0)) ||
                   (v = value_of(argc, argv, &i, "-arch", 0))) {
            tc_error err;
            if (tc_options_set_arch(a->opts, v, &err) != TC_OK)
                return usage_error("%s", err.message);
        } else if ((v = value_of(argc, argv, &i, "-j", 1)) ||
                   (v = value_of(argc, argv, &i, "--jobs", 0))) {
            char *end;
            long j = strtol(v, &end, 10);
            if (!*v || *end || j < 1 || j > 4096)
                return usage_error("-j needs a positive number, not '%s'", v);
            tc_options_set_jobs(a->opts, (int)j);
        } else if ((v = value_of(argc, argv, &i, "--cache-dir", 0))) {
            if (!*v)
                return usage_error("%s needs a directory", "--cache-dir");
            a->cache_dir = v;
        } else if ((v = value_of(argc, argv, &i, "--ptxas", 0))) {
            tc_options_set_ptxas(a->opts, v);
        } else if ((v = value_of(argc, argv, &i, "--unit-cost", 0))) {
            char *end;
            long c = strtol(v, &end, 10);
            if (!*v || *end || c < 1)
                return usage_error("--unit-cost needs a positive number, not '%s'", v);
            tc_options_set_unit_cost(a->opts, (unsigned)c);
        } else if (!strcmp(s, "-O") || (s[1] == 'O' && s[2] >= '0' && s[2] <= '9' && !s[3])) {
            const char *lvl = s[2] ? s + 2 : (i + 1 < argc ? argv[++i] : "");
            if (strlen(lvl) != 1 || lvl[0] < '0' || lvl[0] > '3')
                return usage_error("-O needs a level from 0 to 3, not '%s'", lvl);
            char o[4] = {'-', 'O', lvl[0], 0};
            if ((rc = add_opt(a, o)))
                return rc;
        } else if (!strcmp(s, "-lineinfo") || !strcmp(s, "--generate-line-info")) {
            if ((rc = add_opt(a, "-lineinfo")))
                return rc;
        } else if ((v = value_of(argc, argv, &i, "-maxrregcount", 0)) ||
                   (v = value_of(argc, argv, &i, "--maxrregcount", 0))) {
            if ((rc = add_opt_value(a, "--maxrregcount", v)))
                return rc;
        } else if ((v = value_of(argc, argv, &i, "--fmad", 0)) ||
                   (v = value_of(argc, argv, &i, "-fmad", 0))) {
            if (strcmp(v, "true") && strcmp(v, "false"))
                return usage_error("--fmad takes true or false, not '%s'", v);
            if ((rc = add_opt_value(a, "--fmad", v)))
                return rc;
        } else if ((v = value_of(argc, argv, &i, "-Xptxas", 0))) {
            if (!*v)
                return usage_error("%s needs an option", "-Xptxas");
            if ((rc = add_opt(a, v)))
                return rc;
        } else if ((v = value_of(argc, argv, &i, "--max-size", 0))) {
            a->max_size = v;
        } else if ((v = value_of(argc, argv, &i, "--compiler", 0))) {
            if (!strcmp(v, "ptxas"))
                tc_options_set_compiler(a->opts, TC_COMPILER_PTXAS);
            else if (!strcmp(v, "inprocess"))
                tc_options_set_compiler(a->opts, TC_COMPILER_INPROCESS);
            else if (!strcmp(v, "auto"))
                tc_options_set_compiler(a->opts, TC_COMPILER_AUTO);
            else
                return usage_error("--compiler takes ptxas, inprocess or auto, not '%s'", v);
        } else if (!strcmp(s, "--whole-program-units")) {
            tc_options_set_unit_code(a->opts, TC_UNIT_CODE_WHOLE_PROGRAM);
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
            return usage_error("unknown option '%s'", s);
        }
    }
    if (!a->input)
        return usage_error("%s", "no input file");
    if (need_output && !a->output)
        return usage_error("%s", "no output file: give -o OUT.cubin");
    return EXIT_OK;
}

static int parse_cache_args(int argc, char **argv, args *a, const char *usage)
{
    for (int i = 0; i < argc; i++) {
        const char *v;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            exit(EXIT_OK);
        } else if ((v = value_of(argc, argv, &i, "--cache-dir", 0))) {
            if (!*v)
                return usage_error("%s needs a directory", "--cache-dir");
            a->cache_dir = v;
        } else if (!strcmp(argv[i], "--json")) {
            a->json = 1;
        } else if ((v = value_of(argc, argv, &i, "--max-size", 0))) {
            a->max_size = v;
        } else if ((v = value_of(argc, argv, &i, "--evict-older-than", 0))) {
            a->older_than = v;
        } else if (!strcmp(argv[i], "--zero")) {
            a->zero = 1;
        } else if (!strcmp(argv[i], "--remove-bad")) {
            a->remove_bad = 1;
        } else {
            return usage_error("unknown argument '%s'", argv[i]);
        }
    }
    return EXIT_OK;
}

static char *read_input(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "%s: error: cannot open %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    /* a regular file is read into a buffer of its exact size: a 1 GB input
     * costs 1 GB, not the 2 GB of a doubling buffer */
    struct stat st;
    size_t cap = 1 << 16, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "%s: error: cannot read %s: %s\n", prog, path,
                buf ? strerror(errno) : "out of memory");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void explain_json(const char *name, const tc_result *r, const tc_report *rep)
{
    const char *why = tc_result_whole_reason(r);
    printf("{\"input\": ");
    json_string(name);
    printf(", \"mode\": \"%s\", \"whole_reason\": ", why ? "whole" : "split");
    if (why)
        json_string(why);
    else
        printf("null");
    printf(", \"module_cached\": %s, \"units\": %u, \"units_cached\": %u, \"entries\": [",
           rep->module_hit ? "true" : "false", rep->units, rep->unit_hits);
    for (size_t i = 0; i < tc_result_entry_count(r); i++) {
        tc_entry_info e;
        tc_result_entry(r, i, &e);
        printf("%s\n  {\"name\": ", i ? "," : "");
        json_string(e.name);
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

/* "30d", "12h", "90m", "45s", "3600" (seconds). */
static int parse_age(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 0)
        return -1;
    long long mult = 1;
    switch (*end) {
    case 'd': mult = 86400; end++; break;
    case 'h': mult = 3600; end++; break;
    case 'm': mult = 60; end++; break;
    case 's': end++; break;
    default: break;
    }
    if (*end)
        return -1;
    *out = v * mult;
    return 0;
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

static tc_cache *open_cache(const char *dir)
{
    tc_cache *c = NULL;
    tc_error err;
    if (tc_cache_open(dir, &c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, err.message);
        return NULL;
    }
    return c;
}

static int cmd_build(int argc, char **argv, int explain)
{
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
    rc = EXIT_FAIL;
    if (!(ptx = read_input(a.input, &len)))
        goto done;
    if (!a.no_cache && !(cache = open_cache(a.cache_dir)))
        goto done;
    if (cache && a.max_size) {
        uint64_t bytes;
        if (tc_parse_size(a.max_size, &bytes) != 0) {
            rc = usage_error("--max-size takes a size like 5G or 500M, not '%s'", a.max_size);
            goto done;
        }
        tc_cache_set_max_size(cache, bytes);
    }
    const char *name = strcmp(a.input, "-") ? a.input : "<stdin>";
    tc_status st = explain ? tc_explain(cache, a.opts, ptx, len, name, &r)
                           : tc_build(cache, a.opts, ptx, len, name, &r);
    if (!r) {
        fprintf(stderr, "%s: error: %s\n", prog, tc_status_name(st));
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
        tc_error err;
        if (tc_result_write_image(r, a.output, &err) != TC_OK) {
            fprintf(stderr, "%s: error: %s\n", prog, err.message);
            rc = EXIT_FAIL;
            goto done;
        }
        if (a.verbose) {
            if (rep.module_hit)
                fprintf(stderr, "%s: %s: module record hit: %u kernels, %.3f s\n", prog, name,
                        rep.entries, rep.seconds);
            else
                fprintf(stderr,
                        "%s: %s: %u kernels in %u units: %u from cache, %u compiled "
                        "(%s, %s); compile %.3f s, link %.3f s%s, total %.3f s\n",
                        prog, name, rep.entries, rep.units, rep.unit_hits, rep.units_compiled,
                        rep.split ? "split" : "whole module",
                        rep.in_process ? "in-process" : "ptxas", rep.seconds_compile,
                        rep.seconds_link,
                        !rep.split ? "" : rep.nvjitlink ? " (nvJitLink)" : " (nvlink)",
                        rep.seconds);
        }
        goto done;
    }
    if (a.json) {
        explain_json(name, r, &rep);
        goto done;
    }
    const char *why = tc_result_whole_reason(r);
    printf("input:  %s\nmode:   %s%s\nmodule: %s\n", name, why ? "whole module: " : "split",
           why ? why : "", rep.module_hit ? "cached (an unchanged build is one record read)"
                                          : "not cached");
    if (!why)
        printf("units:  %u (%u cached)\n", rep.units, rep.unit_hits);
    int kw = a.full_keys ? 64 : 16;
    printf("\n%-32s %5s  %-*s  %-*s  %s\n", "KERNEL", "UNIT", kw, "UNIT KEY", kw, "SLICE KEY",
           "UNIT CACHED");
    for (size_t i = 0; i < tc_result_entry_count(r); i++) {
        tc_entry_info e;
        tc_result_entry(r, i, &e);
        printf("%-32s %5u  %-*.*s  %-*.*s  %s\n", e.name, e.unit, kw, kw,
               *e.unit_key ? e.unit_key : "-", kw, kw, *e.slice_key ? e.slice_key : "-",
               why ? "-" : e.cached ? "yes" : "no");
    }
done:
    tc_result_free(r);
    free(ptx);
    tc_cache_close(cache);
    tc_options_free(a.opts);
    return rc;
}

static void human_bytes(uint64_t b, char *out, size_t n)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* The value of one member of tc_stats, as tc_stats_fields describes it. */
static uint64_t stat_value(const tc_stats *s, const tc_stats_field *f)
{
    uint64_t v;
    memcpy(&v, (const char *)s + f->offset, sizeof v);
    return v;
}

/* A row of host figures is shown when one of its run of adjacent host
 * rows is not 0 (a cache no host uses does not list them). */
static int host_run_used(const tc_stats *s, const tc_stats_field *f, size_t n, size_t i)
{
    while (i > 0 && (f[i - 1].flags & TC_STATS_HOST))
        i--;
    for (; i < n && (f[i].flags & TC_STATS_HOST); i++)
        if (stat_value(s, &f[i]))
            return 1;
    return 0;
}

/* `taskcache stats`: one line per figure with a label, in the table's
 * order; a pair of shares (hits, misses) with their percentage of the
 * pair's sum; a row without a label in parentheses on the line before. */
static void print_stats_text(const tc_cache *c, const tc_stats *s)
{
    size_t n;
    const tc_stats_field *f = tc_stats_fields(&n);
    printf("%-34s %s\n", "cache directory", tc_cache_dir(c));
    if (tc_cache_warning(c))
        printf("%-34s %s\n", "warning", tc_cache_warning(c));
    size_t shares = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = stat_value(s, &f[i]);
        int first_of_pair = (f[i].flags & TC_STATS_SHARE) && shares++ % 2 == 0;
        if (!f[i].label || ((f[i].flags & TC_STATS_HOST) && !host_run_used(s, f, n, i)))
            continue;
        char human[32];
        if (f[i].flags & TC_STATS_BYTES) {
            human_bytes(v, human, sizeof human);
            printf("%-34s %12s\n", f[i].label,
                   v || !(f[i].flags & TC_STATS_LIMIT) ? human : "none");
            continue;
        }
        printf("%-34s %12llu", f[i].label, (unsigned long long)v);
        if (f[i].flags & TC_STATS_SHARE) {
            uint64_t total = v + stat_value(s, &f[first_of_pair ? i + 1 : i - 1]);
            if (total)
                printf("  (%5.1f %%)", 100.0 * (double)v / (double)total);
        } else if (i + 1 < n && !f[i + 1].label && (f[i + 1].flags & TC_STATS_BYTES)) {
            human_bytes(stat_value(s, &f[i + 1]), human, sizeof human);
            printf("  (%s)", human);
        }
        putchar('\n');
    }
}

/* `taskcache stats --json`: every figure under its name. */
static void print_stats_json(const tc_cache *c, const tc_stats *s)
{
    size_t n;
    const tc_stats_field *f = tc_stats_fields(&n);
    printf("{\"cache_dir\": ");
    json_string(tc_cache_dir(c));
    for (size_t i = 0; i < n; i++)
        printf(", \"%s\": %llu", f[i].name, (unsigned long long)stat_value(s, &f[i]));
    printf("}\n");
}

static int cmd_stats(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof a);
    int rc = parse_cache_args(argc, argv, &a, usage_stats);
    if (rc)
        return rc;
    if (a.max_size || a.older_than || a.remove_bad)
        return usage_error("%s", "stats takes --cache-dir, --json and --zero");
    tc_cache *c = open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    tc_stats s;
    tc_error err;
    if (tc_cache_stats(c, &s, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, err.message);
        tc_cache_close(c);
        return EXIT_FAIL;
    }
    if (a.json)
        print_stats_json(c, &s);
    else
        print_stats_text(c, &s);
    if (a.zero && tc_cache_zero_stats(c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, err.message);
        rc = EXIT_FAIL;
    }
    tc_cache_close(c);
    return rc;
}

static int cmd_gc(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof a);
    int rc = parse_cache_args(argc, argv, &a, usage_gc);
    if (rc)
        return rc;
    if (a.zero || a.remove_bad)
        return usage_error("%s", "gc takes --cache-dir, --max-size, --evict-older-than, --json");
    uint64_t max = 0;
    int64_t age = -1;
    if (a.max_size && tc_parse_size(a.max_size, &max) != 0)
        return usage_error("--max-size takes a size like 5G or 500M, not '%s'", a.max_size);
    if (a.older_than && parse_age(a.older_than, &age) != 0)
        return usage_error("--evict-older-than takes an age like 30d, 12h or 90m, not '%s'",
                           a.older_than);
    tc_cache *c = open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    tc_gc_report g;
    tc_error err;
    if (tc_cache_gc(c, max, age, &g, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, err.message);
        rc = EXIT_FAIL;
    } else if (g.skipped) {
        printf("another process is cleaning %s; nothing done\n", tc_cache_dir(c));
    } else {
        char ev[32], left[32];
        human_bytes(g.evicted_bytes, ev, sizeof ev);
        human_bytes(g.bytes, left, sizeof left);
        if (a.json)
            printf("{\"evicted_files\": %llu, \"evicted_bytes\": %llu, \"files\": %llu, "
                   "\"bytes\": %llu, \"temps_removed\": %llu}\n",
                   (unsigned long long)g.evicted_files, (unsigned long long)g.evicted_bytes,
                   (unsigned long long)g.files, (unsigned long long)g.bytes,
                   (unsigned long long)g.temps_removed);
        else
            printf("evicted %llu records (%s); %llu records (%s) remain; %llu stale "
                   "temporaries removed\n",
                   (unsigned long long)g.evicted_files, ev, (unsigned long long)g.files, left,
                   (unsigned long long)g.temps_removed);
    }
    tc_cache_close(c);
    return rc;
}

static int cmd_verify(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof a);
    int rc = parse_cache_args(argc, argv, &a, usage_verify);
    if (rc)
        return rc;
    if (a.zero || a.max_size || a.older_than)
        return usage_error("%s", "verify takes --cache-dir, --remove-bad and --json");
    tc_cache *c = open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    uint64_t checked = 0, bad = 0;
    tc_error err;
    if (tc_cache_verify(c, a.remove_bad, &checked, &bad, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, err.message);
        tc_cache_close(c);
        return EXIT_FAIL;
    }
    if (a.json)
        printf("{\"checked\": %llu, \"bad\": %llu, \"removed\": %llu}\n",
               (unsigned long long)checked, (unsigned long long)bad,
               (unsigned long long)(a.remove_bad ? bad : 0));
    else
        printf("%llu records checked, %llu bad%s\n", (unsigned long long)checked,
               (unsigned long long)bad, bad && a.remove_bad ? " (removed)" : "");
    tc_cache_close(c);
    return bad ? EXIT_FAIL : EXIT_OK;
}

static int cmd_clear(int argc, char **argv)
{
    args a;
    memset(&a, 0, sizeof a);
    int rc = parse_cache_args(argc, argv, &a, usage_clear);
    if (rc)
        return rc;
    if (a.json || a.zero || a.max_size || a.older_than || a.remove_bad)
        return usage_error("%s", "clear takes only --cache-dir");
    tc_cache *c = open_cache(a.cache_dir);
    if (!c)
        return EXIT_FAIL;
    tc_error err;
    if (tc_cache_clear(c, &err) != TC_OK) {
        fprintf(stderr, "%s: error: %s\n", prog, err.message);
        rc = EXIT_FAIL;
    } else {
        printf("cleared %s\n", tc_cache_dir(c));
    }
    tc_cache_close(c);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "build"))
        return cmd_build(argc - 2, argv + 2, 0);
    if (!strcmp(cmd, "explain"))
        return cmd_build(argc - 2, argv + 2, 1);
    if (!strcmp(cmd, "stats"))
        return cmd_stats(argc - 2, argv + 2);
    if (!strcmp(cmd, "clear"))
        return cmd_clear(argc - 2, argv + 2);
    if (!strcmp(cmd, "gc"))
        return cmd_gc(argc - 2, argv + 2);
    if (!strcmp(cmd, "verify"))
        return cmd_verify(argc - 2, argv + 2);
    if (!strcmp(cmd, "run"))
        return tc_cli_run(argc - 2, argv + 2);
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
            fputs(usage_stats, stdout);
        else if (!strcmp(topic, "clear"))
            fputs(usage_clear, stdout);
        else if (!strcmp(topic, "gc"))
            fputs(usage_gc, stdout);
        else if (!strcmp(topic, "verify"))
            fputs(usage_verify, stdout);
        else if (!strcmp(topic, "run"))
            fputs(tc_cli_usage_run, stdout);
        else if (!*topic)
            fputs(usage_main, stdout);
        else
            return usage_error("no help for '%s'", topic);
        return EXIT_OK;
    }
    return usage_error("unknown command '%s'", cmd);
}
