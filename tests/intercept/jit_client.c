/* jit_client: a stand-in for a JIT that hands PTX to the CUDA driver, to
 * test the interceptor on every path a program reaches the driver by.
 *
 *   jit_client PATH ACTION FILE... [OPTION=VALUE...]
 *
 * PATH: how it finds the driver's functions
 *   linked   calls them directly (linked against libcuda)
 *   dlsym    dlopen("libcuda.so.1") + dlsym
 *   dlvsym   dlopen("libcuda.so.1") + dlvsym (as the CUDA runtime does; the fake's
 *            functions have the version FAKE_CUDA_1)
 *   deepbind dlsym inside a library loaded with RTLD_DEEPBIND (libdeep_lookup.so
 *            beside this program), as Quadrants' core does
 *   proc1    cuGetProcAddress (first version), asking for CUDA 12.8
 *   proc2    cuGetProcAddress_v2, asking for CUDA 12.8
 *   proc-old cuGetProcAddress asking for CUDA 5.5 (the first link functions)
 * ACTION
 *   load FILE         cuModuleLoadData
 *   loadex FILE       cuModuleLoadDataEx with the options
 *   library FILE      cuLibraryLoadData with the options (and the library
 *                     option CU_LIBRARY_BINARY_IS_PRESERVED)
 *   link FILE...      cuLinkCreate with the options, cuLinkAddData per file
 *                     (PTX or cubin by content), cuLinkComplete, cuLinkDestroy
 *   linkfile FILE     the same with cuLinkAddFile
 *   threads N FILE... N threads, each loading every FILE with cuModuleLoadData
 *   fork FILE         loads FILE, forks; the child loads it again
 *   forkmid MS FILE   a thread loads FILE while the program forks MS ms
 *                     later; the child loads it too
 *   chdir DIR ACTION  changes to DIR first, then does ACTION
 * OPTION: maxreg opt lineinfo target threads verbose cache fma split wall
 * fallback (JIT options with that value), logs=1 (info and error log
 * buffers and the wall time; logs=2: the info log's size with a NULL
 * buffer); written in.OPTION=VALUE, an option of each link input.
 *
 * JIT_CLIENT_NO_NUL=1: a link's PTX ends where readable memory ends, with
 * no NUL after it; JIT_CLIENT_NULL_LIBOPTS=1: `library` passes a library
 * option count of 1 with NULL arrays (=values: its options but NULL
 * values); JIT_CLIENT_SETENV=NAME=VALUE: put in the environment once the
 * driver's functions are found, before the first call.
 *
 * Prints "result N" per driver call that fails or the last one, and with
 * logs=1 "info <text>", "error <text>", "wall <ms>"; with JIT_CLIENT_MAPS=1
 * in the environment, "mapped NAME" for each of taskcache's libraries the
 * process has loaded by its end; exits 0 when every call succeeded. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "intercept/cuda_abi.h"

CUresult cuModuleLoadData(CUmodule *m, const void *image);
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *o,
                            void **v);
CUresult cuLibraryLoadData(CUlibrary *l, const void *code, CUjit_option *o, void **v, unsigned n,
                           CUlibraryOption *lo, void **lv, unsigned ln);
CUresult cuLinkCreate_v2(unsigned n, CUjit_option *o, void **v, CUlinkState *s);
CUresult cuLinkAddData_v2(CUlinkState s, CUjitInputType t, void *d, size_t size,
                          const char *name, unsigned n, CUjit_option *o, void **v);
CUresult cuLinkAddFile_v2(CUlinkState s, CUjitInputType t, const char *path, unsigned n,
                          CUjit_option *o, void **v);
CUresult cuLinkComplete(CUlinkState s, void **cubin, size_t *size);
CUresult cuLinkDestroy(CUlinkState s);

static struct driver {
    CUresult (*load)(CUmodule *, const void *);
    CUresult (*loadex)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*library)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                        CUlibraryOption *, void **, unsigned);
    CUresult (*link_create)(unsigned, CUjit_option *, void **, CUlinkState *);
    CUresult (*link_add)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                         CUjit_option *, void **);
    CUresult (*link_file)(CUlinkState, CUjitInputType, const char *, unsigned, CUjit_option *,
                          void **);
    CUresult (*link_complete)(CUlinkState, void **, size_t *);
    CUresult (*link_destroy)(CUlinkState);
} drv;

#define SET(field, p) memcpy(&drv.field, &(p), sizeof(void *))

static void *by_proc(void *get, int v2, const char *name, int version)
{
    void *p = NULL;
    CUresult rc;
    if (v2) {
        CUresult (*g)(const char *, void **, int, cuuint64_t, int *);
        memcpy(&g, &get, sizeof get);
        int status;
        rc = g(name, &p, version, 0, &status);
    } else {
        CUresult (*g)(const char *, void **, int, cuuint64_t);
        memcpy(&g, &get, sizeof get);
        rc = g(name, &p, version, 0);
    }
    return rc == CUDA_SUCCESS ? p : NULL;
}

static int find_driver(const char *path)
{
    if (!strcmp(path, "linked")) {
        drv.load = cuModuleLoadData;
        drv.loadex = cuModuleLoadDataEx;
        drv.library = cuLibraryLoadData;
        drv.link_create = cuLinkCreate_v2;
        drv.link_add = cuLinkAddData_v2;
        drv.link_file = cuLinkAddFile_v2;
        drv.link_complete = cuLinkComplete;
        drv.link_destroy = cuLinkDestroy;
        return 0;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib)
        return -1;
    const char *names[] = {"cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
                           "cuLinkCreate",     "cuLinkAddData",      "cuLinkAddFile",
                           "cuLinkComplete",   "cuLinkDestroy"};
    void *p[8];
    if (!strcmp(path, "deepbind")) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 32);
        if (n <= 0)
            return -1;
        self[n] = '\0';
        strcpy(strrchr(self, '/') + 1, "libdeep_lookup.so");
        void *deep = dlopen(self, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        void *(*lookup)(const char *);
        void *f = deep ? dlsym(deep, "deep_lookup") : NULL;
        if (!f)
            return -1;
        memcpy(&lookup, &f, sizeof f);
        const char *exact[] = {"cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
                               "cuLinkCreate_v2",  "cuLinkAddData_v2",   "cuLinkAddFile_v2",
                               "cuLinkComplete",   "cuLinkDestroy"};
        for (int i = 0; i < 8; i++)
            p[i] = lookup(exact[i]);
    } else if (!strcmp(path, "dlsym") || !strcmp(path, "dlvsym")) {
        const char *exact[] = {"cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
                               "cuLinkCreate_v2",  "cuLinkAddData_v2",   "cuLinkAddFile_v2",
                               "cuLinkComplete",   "cuLinkDestroy"};
        for (int i = 0; i < 8; i++)
            p[i] = path[2] == 'v' ? dlvsym(lib, exact[i], "FAKE_CUDA_1") : dlsym(lib, exact[i]);
    } else {
        int v2 = !strcmp(path, "proc2");
        int version = !strcmp(path, "proc-old") ? 5050 : 12080;
        void *get = dlsym(lib, v2 ? "cuGetProcAddress_v2" : "cuGetProcAddress");
        if (!get)
            return -1;
        for (int i = 0; i < 8; i++)
            p[i] = by_proc(get, v2, names[i], version);
    }
    SET(load, p[0]);
    SET(loadex, p[1]);
    SET(library, p[2]);
    SET(link_create, p[3]);
    SET(link_add, p[4]);
    SET(link_file, p[5]);
    SET(link_complete, p[6]);
    SET(link_destroy, p[7]);
    for (int i = 0; i < 8; i++)
        if (!p[i])
            return -1;
    return 0;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *d = malloc((size_t)n + 1);
    if (d && fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    if (d) {
        d[n] = '\0';
        *len = (size_t)n;
    }
    return d;
}

/* JIT_CLIENT_NO_NUL=1: a link's PTX as a slice of memory (Rust's cust
 * passes one), len bytes that end where readable memory ends: reading
 * past them faults. */
static void *no_nul_after(const char *d, size_t len)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t span = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
    char *m = mmap(NULL, span + (size_t)page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + span, (size_t)page, PROT_NONE) != 0)
        return NULL;
    memcpy(m + span - len, d, len);
    return m + span - len; /* left mapped: the process ends soon */
}

/* JIT options from OPTION=VALUE arguments. */
typedef struct opts {
    CUjit_option o[16];
    void *v[16];
    unsigned n;
    int logs, info_at, error_at, wall_at;
    char info[4096], error[4096];
} opts;

/* The OPTION=VALUE arguments; with prefix "in." those written in.OPTION=VALUE
 * (a link input's own), else the others. */
static void parse_options(opts *x, int argc, char **argv, const char *prefix)
{
    static const struct {
        const char *name;
        CUjit_option o;
    } known[] = {{"maxreg", CU_JIT_MAX_REGISTERS},     {"opt", CU_JIT_OPTIMIZATION_LEVEL},
                 {"lineinfo", CU_JIT_GENERATE_LINE_INFO}, {"target", CU_JIT_TARGET},
                 {"threads", CU_JIT_THREADS_PER_BLOCK}, {"verbose", CU_JIT_LOG_VERBOSE},
                 {"cache", CU_JIT_CACHE_MODE},          {"fma", CU_JIT_FMA},
                 {"split", CU_JIT_SPLIT_COMPILE},       {"wall", CU_JIT_WALL_TIME},
                 {"fallback", CU_JIT_FALLBACK_STRATEGY}};
    memset(x, 0, sizeof *x);
    size_t pl = strlen(prefix);
    for (int i = 0; i < argc && x->n < 10; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (!eq || strncmp(a, prefix, pl) || (!pl && !strncmp(a, "in.", 3)))
            continue;
        a += pl;
        unsigned long val = strtoul(eq + 1, NULL, 0);
        if (!pl && !strncmp(a, "logs=", 5)) {
            x->logs = (int)val; /* 2: the info log's size with a NULL buffer */
            continue;
        }
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!strncmp(a, known[k].name, (size_t)(eq - a)) &&
                strlen(known[k].name) == (size_t)(eq - a)) {
                x->o[x->n] = known[k].o;
                x->v[x->n++] = (void *)(uintptr_t)val;
            }
    }
    if (x->logs) {
        x->o[x->n] = CU_JIT_INFO_LOG_BUFFER;
        x->v[x->n++] = x->logs == 2 ? NULL : x->info;
        x->info_at = (int)x->n;
        x->o[x->n] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
        x->v[x->n++] = (void *)(uintptr_t)sizeof x->info;
        x->o[x->n] = CU_JIT_ERROR_LOG_BUFFER;
        x->v[x->n++] = x->error;
        x->error_at = (int)x->n;
        x->o[x->n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
        x->v[x->n++] = (void *)(uintptr_t)sizeof x->error;
        x->wall_at = (int)x->n;
        x->o[x->n] = CU_JIT_WALL_TIME;
        x->v[x->n++] = NULL;
        strcpy(x->info, "(untouched)");
        strcpy(x->error, "(untouched)");
    }
}

static void print_logs(const opts *x)
{
    if (!x->logs)
        return;
    float ms;
    memcpy(&ms, &x->v[x->wall_at], sizeof ms);
    printf("info %s\nerror %s\nwall %.3f\n", x->info, x->error, ms);
}

static int failures;

static CUresult check(CUresult rc)
{
    printf("result %d\n", rc);
    failures += rc != CUDA_SUCCESS;
    return rc;
}

static void *load_all(void *arg)
{
    char **files = arg;
    for (; *files; files++) {
        size_t len;
        char *d = read_file(*files, &len);
        CUmodule m;
        if (!d || drv.load(&m, d) != CUDA_SUCCESS)
            __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        free(d);
    }
    return NULL;
}

/* JIT_CLIENT_MAPS=1: which of taskcache's libraries are in the process. */
static void print_mapped(void)
{
    const char *e = getenv("JIT_CLIENT_MAPS");
    FILE *f = e && *e == '1' ? fopen("/proc/self/maps", "r") : NULL;
    char line[4096], seen[4096] = "";
    while (f && fgets(line, sizeof line, f)) {
        const char *name = strstr(line, "/libtaskcache");
        if (!name)
            continue;
        char base[256];
        if (sscanf(name + 1, "%255s", base) == 1 && !strstr(seen, base) &&
            strlen(seen) + strlen(base) + 2 < sizeof seen) {
            printf("mapped %s\n", base);
            strcat(seen, base);
            strcat(seen, " ");
        }
    }
    if (f)
        fclose(f);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: jit_client PATH ACTION FILE... [OPTION=VALUE...]\n");
        return 2;
    }
    if (find_driver(argv[1]) != 0) {
        fprintf(stderr, "jit_client: cannot find the driver's functions by %s\n", argv[1]);
        return 2;
    }
    const char *action = argv[2];
    if (!strcmp(action, "chdir") && argc > 4) { /* chdir DIR ACTION ...: moves first */
        if (chdir(argv[3]) != 0) {
            perror("jit_client: chdir");
            return 2;
        }
        argv += 2;
        argc -= 2;
        action = argv[2];
    }
    /* set once the driver's functions are found, as a program may do */
    const char *later = getenv("JIT_CLIENT_SETENV");
    if (later && *later)
        putenv(strdup(later));
    opts x, in;
    parse_options(&x, argc - 3, argv + 3, "");
    parse_options(&in, argc - 3, argv + 3, "in.");
    size_t len;
    if (!strcmp(action, "load") || !strcmp(action, "loadex") || !strcmp(action, "library")) {
        char *d = read_file(argv[3], &len);
        if (!d)
            return 2;
        CUmodule m;
        CUlibrary l;
        CUlibraryOption lo = CU_LIBRARY_BINARY_IS_PRESERVED;
        void *lv = (void *)(uintptr_t)1;
        if (!strcmp(action, "load"))
            check(drv.load(&m, d));
        else if (!strcmp(action, "loadex"))
            check(drv.loadex(&m, d, x.n, x.o, x.v));
        else if (getenv("JIT_CLIENT_NULL_LIBOPTS")) /* a count with no arrays */
            check(drv.library(&l, d, x.o, x.v, x.n,
                              strcmp(getenv("JIT_CLIENT_NULL_LIBOPTS"), "values") ? NULL : &lo,
                              NULL, 1));
        else
            check(drv.library(&l, d, x.o, x.v, x.n, &lo, &lv, 1));
        print_logs(&x);
        free(d);
    } else if (!strcmp(action, "link") || !strcmp(action, "linkfile")) {
        CUlinkState s;
        if (check(drv.link_create(x.n, x.o, x.v, &s)) != CUDA_SUCCESS)
            return 1;
        /* JIT_CLIENT_SWITCH_DEVICE=N: another device's context is made
         * current before the inputs are added (the fake driver's) */
        if (getenv("JIT_CLIENT_SWITCH_DEVICE"))
            setenv("FAKE_CUDA_DEVICE", getenv("JIT_CLIENT_SWITCH_DEVICE"), 1);
        for (int i = 3; i < argc && !strchr(argv[i], '='); i++) {
            char *d = read_file(argv[i], &len);
            if (!d)
                return 2;
            CUjitInputType t = d[0] == 0x7f ? CU_JIT_INPUT_CUBIN : CU_JIT_INPUT_PTX;
            void *data = d;
            size_t size = t == CU_JIT_INPUT_PTX ? len + 1 : len;
            if (t == CU_JIT_INPUT_PTX && getenv("JIT_CLIENT_NO_NUL"))
                data = no_nul_after(d, len), size = len;
            if (!data)
                return 2;
            if (!strcmp(action, "link"))
                check(drv.link_add(s, t, data, size, argv[i], in.n, in.n ? in.o : NULL,
                                   in.n ? in.v : NULL));
            else
                check(drv.link_file(s, t, argv[i], in.n, in.n ? in.o : NULL,
                                    in.n ? in.v : NULL));
            free(d);
        }
        void *cubin;
        size_t size;
        if (check(drv.link_complete(s, &cubin, &size)) == CUDA_SUCCESS) {
            printf("image %zu %s\n", size, ((char *)cubin)[0] == 0x7f ? "ELF" : "OTHER");
            CUmodule m; /* what a JIT does next: load the linked image */
            check(drv.load(&m, cubin));
        }
        print_logs(&x);
        check(drv.link_destroy(s));
    } else if (!strcmp(action, "threads")) {
        int n = atoi(argv[3]);
        pthread_t t[64];
        for (int i = 0; i < n && i < 64; i++)
            pthread_create(&t[i], NULL, load_all, argv + 4);
        for (int i = 0; i < n && i < 64; i++)
            pthread_join(t[i], NULL);
        printf("threads %d failures %d\n", n, failures);
    } else if (!strcmp(action, "fork")) {
        char *files[] = {argv[3], NULL};
        load_all(files);
        pid_t pid = fork();
        if (pid == 0) {
            load_all(files);
            _exit(failures ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        printf("child %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        failures += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    } else if (!strcmp(action, "forkmid")) {
        /* a fork while another thread is in its first PTX load (which
         * loads the interceptor's builder) */
        pthread_t t;
        pthread_create(&t, NULL, load_all, argv + 4);
        struct timespec pause = {0, atol(argv[3]) * 1000000L};
        nanosleep(&pause, NULL);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20); /* a hang is a failure, not a stuck test */
            load_all(argv + 4);
            _exit(failures ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        pthread_join(t, NULL);
        printf("child %s %d\n", WIFEXITED(status) ? "exit" : "signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        failures += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    } else {
        fprintf(stderr, "jit_client: unknown action %s\n", action);
        return 2;
    }
    print_mapped();
    return failures ? 1 : 0;
}
