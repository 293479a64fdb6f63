/* run: `taskcache run -- CMD [ARGS...]` runs a program with the driver
 * interceptor (libtaskcache_intercept.so) preloaded, so that the PTX it
 * hands the CUDA driver is built by taskcache, per kernel, cached. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/run.h"
#include "cli/common.h"

const char tc_cli_usage_run[] =
    "usage: taskcache run [--cache-dir DIR] [--remote SPEC] [--log FILE] [-v]\n"
    "                     [--relocatable-units] [--] CMD [ARGS...]\n"
    "\n"
    "Runs CMD with taskcache standing in for the CUDA driver's PTX compiler: PTX\n"
    "the program hands to cuModuleLoadData(Ex), cuLibraryLoadData or a link with\n"
    "one PTX input (cuLinkAddData) is built by taskcache for the current device,\n"
    "split, compiled in parallel and cached per kernel (the cache of `taskcache\n"
    "build`), and the driver is given the linked cubin. A cubin, a fatbin, an\n"
    "option whose effect taskcache cannot reproduce, a link of several inputs or\n"
    "a build that fails goes to the driver unchanged: the program behaves as\n"
    "without taskcache.\n"
    "\n"
    "It helps JITs that hand PTX to the driver (Quadrants/Taichi, CuPy's\n"
    "RawModule and RawKernel, numba-cuda); not those that compile to cubin\n"
    "themselves (Triton, XLA with its own ptxas, PyTorch Inductor). NVIDIA Warp\n"
    "compiles to cubin too: run sets TASKCACHE_WARP=1, with which Warp builds its\n"
    "modules per kernel through taskcache.warp where the taskcache Python package\n"
    "is installed (docs/warp.md).\n"
    "\n"
    "  --cache-dir DIR   the cache (else $TASKCACHE_DIR, ~/.cache/taskcache)\n"
    "  --remote SPEC     remote storage behind it (TASKCACHE_REMOTE; taskcache help remote)\n"
    "  --log FILE        one line per driver call taken or passed on, and why\n"
    "  -v                the same on standard error\n"
    "  --whole-program-units, --relocatable-units\n"
    "                    as for taskcache build (TASKCACHE_UNIT_CODE)\n"
    "\n"
    "TASKCACHE_INTERCEPT=0 turns the interceptor off inside a running program, and\n"
    "TASKCACHE_INTERCEPT=measure lets the driver compile and logs how long it took,\n"
    "TASKCACHE_INTERCEPT_TRACE=1 logs every driver lookup and intercepted call;\n"
    "TASKCACHE_INTERCEPT_LIB names the library (else the one beside this program,\n"
    "or in ../lib). Exit status: CMD's; 127 when it cannot be run, 2 usage.\n";

/* The interceptor: $TASKCACHE_INTERCEPT_LIB, else beside this program (the
 * build tree), else in ../lib or ../lib64 beside its directory (installed). */
static int find_library(char *out, size_t cap)
{
    const char *env = getenv("TASKCACHE_INTERCEPT_LIB");
    if (env && *env) {
        /* absolute: the library finds its builder beside itself, maybe
         * after the program has changed its directory */
        char abs[PATH_MAX];
        snprintf(out, cap, "%s", realpath(env, abs) ? abs : env);
        return access(out, R_OK);
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    static const char *const places[] = {"", "/../lib", "/../lib64"};
    for (size_t i = 0; i < sizeof places / sizeof places[0]; i++) {
        int len = snprintf(out, cap, "%s%s/libtaskcache_intercept.so", self, places[i]);
        if (len > 0 && (size_t)len < cap && access(out, R_OK) == 0)
            return 0;
    }
    return -1;
}

static const void *no_driver(void) { return NULL; }

/* Why the builder beside the interceptor does not load and bind as the
 * interceptor will load it (src/intercept/front.c), or NULL when it does.
 * The ABI number and the build mode are those of src/intercept/intercept.h,
 * which the command line does not include (tests/e2e/test_intercept.py
 * runs every program under `taskcache run` and fails on this warning).
 * Binding here only sets the builder's state in this process, which CMD
 * replaces. */
static const char *builder_unusable(const char *builder)
{
    void *h = dlopen(builder, RTLD_LAZY | RTLD_LOCAL);
    if (!h)
        return dlerror();
    void *sym = dlsym(h, "tc_jit_bind");
    const void *(*bind)(unsigned, const void *(*)(void), int);
    memcpy(&bind, &sym, sizeof bind);
    if (!sym || !bind(2u /* TC_JIT_ABI */, no_driver, 1 /* TC_INTERCEPT_BUILD */))
        return "not this taskcache's builder: another version?";
    return NULL;
}

int tc_cli_run(int argc, char **argv)
{
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if ((!strcmp(a, "--cache-dir") || !strcmp(a, "--log")) && i + 1 < argc) {
            setenv(a[2] == 'c' ? "TASKCACHE_DIR" : "TASKCACHE_LOG", argv[++i], 1);
        } else if (!strcmp(a, "--remote") && i + 1 < argc) {
            setenv("TASKCACHE_REMOTE", argv[++i], 1);
        } else if (!strncmp(a, "--remote=", 9)) {
            setenv("TASKCACHE_REMOTE", a + 9, 1);
        } else if (!strncmp(a, "--cache-dir=", 12)) {
            setenv("TASKCACHE_DIR", a + 12, 1);
        } else if (!strncmp(a, "--log=", 6)) {
            setenv("TASKCACHE_LOG", a + 6, 1);
        } else if (!strcmp(a, "--whole-program-units")) {
            setenv("TASKCACHE_UNIT_CODE", "whole-program", 1);
        } else if (!strcmp(a, "--relocatable-units")) {
            setenv("TASKCACHE_UNIT_CODE", "relocatable", 1);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            setenv("TASKCACHE_LOG", "/dev/stderr", 1);
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(tc_cli_usage_run, stdout);
            return 0;
        } else {
            fprintf(stderr, "taskcache run: unknown option '%s' (taskcache help run)\n", a);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "taskcache run: no command to run (taskcache help run)\n");
        return 2;
    }
    /* NVIDIA Warp, where the taskcache Python package is installed, builds
     * its modules through taskcache.warp (python/taskcache/_warp_hook.py) */
    setenv("TASKCACHE_WARP", "1", 0);
    /* the program's builds would each refuse it, and the driver compile */
    if (cli_check_environment("taskcache run") != EXIT_OK)
        return EXIT_USAGE;
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) != 0) {
        fprintf(stderr, "taskcache run: cannot find libtaskcache_intercept.so (%s); set "
                        "TASKCACHE_INTERCEPT_LIB\n", lib);
        return 127;
    }
    /* its builder, which it loads beside itself: without it, the program
     * runs, and the driver compiles everything */
    char builder[PATH_MAX + 32];
    const char *slash = strrchr(lib, '/');
    snprintf(builder, sizeof builder, "%.*slibtaskcache_jit.so",
             slash ? (int)(slash - lib + 1) : 0, lib);
    /* TASKCACHE_INTERCEPT=0 (off, no: src/intercept/common.c) needs no
     * builder: every call goes to the driver anyway */
    const char *mode = getenv("TASKCACHE_INTERCEPT"), *why;
    int off = mode && (!strcmp(mode, "0") || !strcmp(mode, "off") || !strcmp(mode, "no"));
    if (!off) {
        if (access(builder, R_OK) != 0)
            fprintf(stderr, "taskcache run: warning: %s is missing: the driver will compile "
                            "the program's PTX\n", builder);
        else if ((why = builder_unusable(builder)) != NULL) /* else only in its --log */
            fprintf(stderr, "taskcache run: warning: cannot use %s (%s): the driver will "
                            "compile the program's PTX\n", builder, why);
    }
    /* LD_PRELOAD takes names apart at spaces and colons: a library whose
     * path holds one would not be loaded, and the loader would complain in
     * every process the program starts */
    if (strpbrk(lib, " :\t")) {
        fprintf(stderr, "taskcache run: warning: %s cannot be preloaded (LD_PRELOAD takes its "
                        "path apart at a space or ':'); the program runs without taskcache\n",
                lib);
        execvp(argv[i], argv + i);
        fprintf(stderr, "taskcache run: cannot run %s: %s\n", argv[i], strerror(errno));
        return 127;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(lib) + (old ? strlen(old) + 1 : 0) + 1;
    char *preload = malloc(len);
    if (!preload) {
        fprintf(stderr, "taskcache run: out of memory\n");
        return 127;
    }
    snprintf(preload, len, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", preload, 1);
    free(preload);
    execvp(argv[i], argv + i);
    fprintf(stderr, "taskcache run: cannot run %s: %s\n", argv[i], strerror(errno));
    return 127;
}
