/* link: nvJitLink (in process) and nvlink (process) linking. */
#define _GNU_SOURCE
#include "link/link.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "link/elf.h"
#include "toolchain/spawn.h"
#include "util/fs.h"
#include "util/map.h"

/* An object given to the link: its bytes stay the caller's. */
typedef struct tc_blob {
    const void *p;
    size_t n;
} tc_blob;

#ifndef TC_NVJITLINK_LIB
#define TC_NVJITLINK_LIB ""
#endif

/* The nvJitLink C API (documented in the CUDA toolkit's nvJitLink guide):
 * declared here rather than taken from nvJitLink.h so that taskcache builds
 * without the toolkit and binds to whichever library it finds at run time.
 * The unversioned symbols are exported by every release. */
typedef struct nvjl *nvjl_handle;
enum { NVJL_SUCCESS = 0, NVJL_INPUT_CUBIN = 1 };
typedef int (*nvjl_create_fn)(nvjl_handle *, uint32_t, const char **);
typedef int (*nvjl_destroy_fn)(nvjl_handle *);
typedef int (*nvjl_add_data_fn)(nvjl_handle, int, const void *, size_t, const char *);
typedef int (*nvjl_complete_fn)(nvjl_handle);
typedef int (*nvjl_size_fn)(nvjl_handle, size_t *);
typedef int (*nvjl_get_fn)(nvjl_handle, void *);
typedef int (*nvjl_log_fn)(nvjl_handle, char *);

static struct {
    pthread_mutex_t lock;
    char path[TC_PATH_MAX];
    void *lib;
    nvjl_create_fn create;
    nvjl_destroy_fn destroy;
    nvjl_add_data_fn add_data;
    nvjl_complete_fn complete;
    nvjl_size_fn cubin_size, error_log_size;
    nvjl_get_fn cubin;
    nvjl_log_fn error_log;
} jl = {PTHREAD_MUTEX_INITIALIZER, "", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static int load_nvjitlink(const char *path, tc_sb *log)
{
    pthread_mutex_lock(&jl.lock);
    if (jl.lib && !strcmp(jl.path, path)) {
        pthread_mutex_unlock(&jl.lock);
        return 0;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        tc_sb_printf(log, "cannot load %s: %s\n", path, dlerror());
        pthread_mutex_unlock(&jl.lock);
        return -1;
    }
    /* Assigning dlsym's void* to function pointers goes through memcpy,
     * which ISO C allows. */
#define SYM(field, name)                                                       \
    do {                                                                       \
        void *s = dlsym(lib, name);                                            \
        if (!s) {                                                              \
            tc_sb_printf(log, "%s lacks %s\n", path, name);                   \
            dlclose(lib);                                                      \
            pthread_mutex_unlock(&jl.lock);                                    \
            return -1;                                                         \
        }                                                                      \
        memcpy(&jl.field, &s, sizeof s);                                       \
    } while (0)
    SYM(create, "nvJitLinkCreate");
    SYM(destroy, "nvJitLinkDestroy");
    SYM(add_data, "nvJitLinkAddData");
    SYM(complete, "nvJitLinkComplete");
    SYM(cubin_size, "nvJitLinkGetLinkedCubinSize");
    SYM(cubin, "nvJitLinkGetLinkedCubin");
    SYM(error_log_size, "nvJitLinkGetErrorLogSize");
    SYM(error_log, "nvJitLinkGetErrorLog");
#undef SYM
    jl.lib = lib; /* never closed: other threads may be linking with it */
    snprintf(jl.path, sizeof jl.path, "%s", path);
    pthread_mutex_unlock(&jl.lock);
    return 0;
}

/* The first nvJitLinkCreate of a process costs about 0.2 s on the GPU
 * machine (almost all system time; later ones 0.2 ms), so a build that will
 * link starts it on a thread while its units compile. With no GPU visible
 * to the CUDA driver (the build commands hide them, see cli/main.c) the
 * first costs 18 ms and every later one 14 ms: the handle the prewarm made
 * is kept for the link that follows, which saves one create on the
 * critical path. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t done;
    int state; /* 0 not started, 1 running, 2 finished, 3 finished and joined */
    pthread_t thread;
    char path[TC_PATH_MAX];
    char archopt[64];
    nvjl_handle handle; /* made by the prewarm for archopt, not yet taken */
} warm = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, "", "", NULL};

/* A forked child has only the thread that forked. Were the fork to land
 * while the prewarm thread runs, the child would wait forever for a thread
 * it does not have (and could inherit nvJitLink half initialized, or the
 * library lock held by a thread inside dlopen). So a fork waits until no
 * prewarm runs and no thread is loading the library (at most the
 * prewarm's ~0.2 s), and the child starts with both locks free. */
static void before_fork(void)
{
    pthread_mutex_lock(&warm.lock);
    while (warm.state == 1)
        pthread_cond_wait(&warm.done, &warm.lock);
    pthread_mutex_lock(&jl.lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&jl.lock);
    pthread_mutex_unlock(&warm.lock);
}

static void after_fork_child(void)
{
    pthread_cond_init(&warm.done, NULL); /* the parent's waiters are not here */
    /* Neither is the library's state behind the parent's handle: the child
     * makes its own (left, not destroyed: destroying could touch that
     * state) */
    warm.handle = NULL;
    if (warm.state == 2)
        warm.state = 3; /* nor its finished thread: nothing to join */
    pthread_mutex_unlock(&jl.lock);
    pthread_mutex_unlock(&warm.lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void register_fork_handlers(void)
{
    (void)pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Before the first use of the state above: the prewarm and the link (which
 * waits for the prewarm first) are the only users of either lock. */
static void watch_forks(void) { pthread_once(&fork_once, register_fork_handlers); }

static void *prewarm_thread(void *arg)
{
    (void)arg;
    tc_sb log = TC_SB_INIT;
    nvjl_handle h = NULL;
    if (load_nvjitlink(warm.path, &log) == 0) {
        const char *opts[] = {warm.archopt};
        if (jl.create(&h, 1, opts) != NVJL_SUCCESS)
            h = NULL;
    }
    tc_sb_free(&log); /* a failure shows again, with its message, at link */
    pthread_mutex_lock(&warm.lock);
    warm.handle = h;
    warm.state = 2;
    pthread_cond_broadcast(&warm.done);
    pthread_mutex_unlock(&warm.lock);
    return NULL;
}

void tc_linker_prewarm(const tc_linker *l, const char *arch)
{
    if (l->kind != TC_LINKER_NVJITLINK)
        return;
    watch_forks();
    pthread_mutex_lock(&warm.lock);
    if (warm.state == 0) {
        snprintf(warm.path, sizeof warm.path, "%s", l->path);
        snprintf(warm.archopt, sizeof warm.archopt, "-arch=%s", arch);
        warm.state = 1;
        if (pthread_create(&warm.thread, NULL, prewarm_thread, NULL) != 0)
            warm.state = 0; /* no thread: the link pays, as without this */
    }
    pthread_mutex_unlock(&warm.lock);
}

int tc_linker_prewarm_running(void)
{
    pthread_mutex_lock(&warm.lock);
    int running = warm.state == 1;
    pthread_mutex_unlock(&warm.lock);
    return running;
}

void tc_linker_prewarm_wait(void)
{
    watch_forks();
    pthread_mutex_lock(&warm.lock);
    while (warm.state == 1)
        pthread_cond_wait(&warm.done, &warm.lock);
    /* The first waiter after it finished joins the thread: once a call
     * returns, no thread of ours is still exiting (a detached one could
     * still hold what dlopen allocated when a leak checker looked). */
    int join = warm.state == 2;
    if (join)
        warm.state = 3;
    pthread_mutex_unlock(&warm.lock);
    if (join)
        pthread_join(warm.thread, NULL);
}

/* The prewarm's handle, when it was made for this library and target (a
 * handle has taken no input until nvJitLinkAddData); else NULL. */
static nvjl_handle take_prewarmed(const char *path, const char *archopt)
{
    pthread_mutex_lock(&warm.lock);
    nvjl_handle h = NULL;
    if (warm.handle && !strcmp(warm.path, path) && !strcmp(warm.archopt, archopt)) {
        h = warm.handle;
        warm.handle = NULL;
    }
    pthread_mutex_unlock(&warm.lock);
    return h;
}

static int link_nvlink(const tc_linker *l, const char *arch, const tc_blob *objs, size_t n,
                       const char *scratch, tc_sb *image, tc_sb *log)
{
    char **argv = calloc(n + 6, sizeof *argv);
    char **names = calloc(n ? n : 1, sizeof *names);
    char archopt[64], out[TC_PATH_MAX], logp[TC_PATH_MAX];
    int rc = -1;
    if (!argv || !names)
        goto done;
    snprintf(archopt, sizeof archopt, "-arch=%s", arch);
    snprintf(out, sizeof out, "%s/linked.cubin", scratch);
    snprintf(logp, sizeof logp, "%s/nvlink.log", scratch);
    size_t argc = 0;
    argv[argc++] = (char *)l->path;
    argv[argc++] = archopt;
    argv[argc++] = (char *)"-o";
    argv[argc++] = out;
    for (size_t i = 0; i < n; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "link%zu.o", i);
        names[i] = tc_path_join(scratch, nm);
        if (!names[i] || tc_write_file(names[i], objs[i].p, objs[i].n) != 0) {
            tc_sb_printf(log, "cannot write %s\n", names[i] ? names[i] : nm);
            goto done;
        }
        argv[argc++] = names[i];
    }
    int code = 0;
    if (tc_spawn(argv, logp, NULL, &code) != 0) {
        tc_sb_printf(log, "cannot run %s\n", l->path);
        goto done;
    }
    char *data;
    size_t len;
    if (code != 0) {
        if (tc_read_file(logp, 0, &data, &len) == 0) {
            tc_sb_append(log, data, len);
            free(data);
        }
        goto done;
    }
    if (tc_read_file(out, 0, &data, &len) != 0) {
        tc_sb_printf(log, "nvlink produced no output\n");
        goto done;
    }
    tc_sb_append(image, data, len);
    free(data);
    rc = 0;
done:
    for (size_t i = 0; names && i < n; i++) {
        if (names[i])
            unlink(names[i]);
        free(names[i]);
    }
    free(names);
    free(argv);
    return rc;
}

/* ---- checking the image ----------------------------------------------------- */

static int add_kernel(void *ctx, const char *name, size_t len)
{
    return tc_map_put(ctx, name, len, 0) < 0;
}

typedef struct {
    const tc_map *have;
    tc_sb *log;
    size_t object;
    int missing;
} kernel_check;

static int check_kernel(void *ctx, const char *name, size_t len)
{
    kernel_check *c = ctx;
    if (!tc_map_get(c->have, name, len) && c->missing++ < 3)
        tc_sb_printf(c->log, "the linked image lacks kernel %.*s of object %zu\n", (int)len,
                     name, c->object);
    return 0;
}

/* Every kernel an object defines is in the image: a linker that drops code
 * without an error (nvlink does with -ewp objects) must not produce a cache
 * record. */
static int check_image(const tc_sb *image, const tc_blob *objs, size_t n, tc_sb *log)
{
    tc_map have;
    memset(&have, 0, sizeof have);
    int rc = -1;
    if (tc_elf_kernels((const unsigned char *)image->data, image->len, add_kernel, &have) != 0) {
        tc_sb_printf(log, "the linker's output is not a readable ELF image\n");
        goto done;
    }
    kernel_check c = {.have = &have, .log = log};
    for (c.object = 0; c.object < n; c.object++)
        if (tc_elf_kernels((const unsigned char *)objs[c.object].p, objs[c.object].n,
                           check_kernel, &c) != 0) {
            tc_sb_printf(log, "object %zu is not a readable ELF file\n", c.object);
            goto done;
        }
    if (c.missing > 3)
        tc_sb_printf(log, "... %d kernels missing in all\n", c.missing);
    rc = c.missing ? -1 : 0;
done:
    tc_map_free(&have);
    return rc;
}

/* ---- checking the objects ---------------------------------------------------- */

/* No global symbol may be defined by two objects. The linkers disagree on
 * this: nvlink fails, while libnvJitLink 13 prints "Multiple definition"
 * on standard error, returns success and keeps one of them, so a task
 * calling its own helper would call another task's. Each object's
 * definitions are checked as it is added. */
enum { STB_GLOBAL_ = 1, SHN_LORESERVE_ = 0xff00 };

typedef struct {
    tc_map seen;   /* name -> 1 + the object that defines it */
    tc_sb *log;
    size_t object;
    int clashes;
} definitions;

static int add_definition(void *ctx, const tc_elf_sym *y)
{
    definitions *d = ctx;
    /* a strong definition: global binding, in a section of the object
     * (not undefined, absolute or common) */
    if (y->bind != STB_GLOBAL_ || y->shndx == 0 || y->shndx >= SHN_LORESERVE_ || !y->len)
        return 0;
    uint32_t *first = tc_map_get(&d->seen, y->name, y->len);
    if (first) {
        if (*first - 1 != d->object && d->clashes++ < 3)
            tc_sb_printf(d->log, "multiple definition of '%.*s' (objects %u and %zu)\n",
                         (int)y->len, y->name, *first - 1, d->object);
        return 0;
    }
    return tc_map_put(&d->seen, y->name, y->len, (uint32_t)d->object + 1) < 0;
}

/* ---- a link ------------------------------------------------------------------ */

struct tc_link_job {
    const tc_linker *l;
    char archopt[64];
    const char *scratch;
    tc_blob *objs; /* every object added, for nvlink and the checks */
    size_t n, cap;
    definitions defs;
    nvjl_handle h;   /* nvJitLink's, from the first add on */
    int failed;      /* nothing more goes to the linker; the reason is in log */
    tc_sb log;
};

tc_link_job *tc_link_start(const tc_linker *l, const char *arch, const char *scratch)
{
    tc_link_job *lj = calloc(1, sizeof *lj);
    if (!lj)
        return NULL;
    lj->l = l;
    snprintf(lj->archopt, sizeof lj->archopt, "-arch=%s", arch);
    lj->scratch = scratch;
    lj->defs.log = &lj->log;
    return lj;
}

/* nvJitLink's handle for the link: the prewarm's, or a new one (which is
 * the library's first use when nothing prewarmed it). */
static int open_nvjitlink(tc_link_job *lj)
{
    tc_linker_prewarm_wait(); /* one first use at a time */
    if (load_nvjitlink(lj->l->path, &lj->log) != 0)
        return -1;
    const char *opts[] = {lj->archopt};
    lj->h = take_prewarmed(lj->l->path, lj->archopt);
    int rc = lj->h ? NVJL_SUCCESS : jl.create(&lj->h, 1, opts);
    if (rc != NVJL_SUCCESS) {
        lj->h = NULL;
        tc_sb_printf(&lj->log, "nvJitLinkCreate failed (%d) for %s\n", rc, lj->archopt + 6);
        return -1;
    }
    return 0;
}

/* nvJitLink's error log, else its error code, into lj->log. */
static void nvjitlink_failed(tc_link_job *lj, int rc)
{
    size_t ls = 0;
    tc_sb *log = &lj->log;
    if (jl.error_log_size(lj->h, &ls) == NVJL_SUCCESS && ls > 1 && tc_sb_reserve(log, ls) == 0 &&
        jl.error_log(lj->h, log->data + log->len) == NVJL_SUCCESS)
        log->len += strnlen(log->data + log->len, ls);
    else
        tc_sb_printf(log, "nvJitLink failed with code %d\n", rc);
    lj->failed = 1;
}

int tc_link_add(tc_link_job *lj, const void *p, size_t n)
{
    if (lj->n == lj->cap) {
        size_t cap = lj->cap ? 2 * lj->cap : 64;
        tc_blob *objs = realloc(lj->objs, cap * sizeof *objs);
        if (!objs) {
            tc_sb_printf(&lj->log, "out of memory\n");
            lj->failed = 1;
            return -1;
        }
        lj->objs = objs;
        lj->cap = cap;
    }
    size_t i = lj->n++;
    lj->objs[i] = (tc_blob){p, n};
    /* the definitions of every object are checked, to count the clashes */
    lj->defs.object = i;
    if (tc_elf_symbols(p, n, add_definition, &lj->defs) != 0) {
        tc_sb_printf(&lj->log, "object %zu is not a readable ELF file\n", i);
        lj->failed = 1;
    }
    lj->failed |= lj->defs.clashes != 0;
    if (lj->failed || lj->l->kind != TC_LINKER_NVJITLINK)
        return lj->failed ? -1 : 0;
    if (!lj->h && open_nvjitlink(lj) != 0) {
        lj->failed = 1;
        return -1;
    }
    char name[32];
    snprintf(name, sizeof name, "unit%zu.o", i);
    int rc = jl.add_data(lj->h, NVJL_INPUT_CUBIN, p, n, name);
    if (rc != NVJL_SUCCESS)
        nvjitlink_failed(lj, rc);
    return lj->failed ? -1 : 0;
}

static int finish_nvjitlink(tc_link_job *lj, tc_sb *image)
{
    if (!lj->h && open_nvjitlink(lj) != 0)
        return -1;
    size_t size = 0;
    int rc = jl.complete(lj->h);
    if (rc == NVJL_SUCCESS)
        rc = jl.cubin_size(lj->h, &size);
    if (rc == NVJL_SUCCESS && tc_sb_reserve(image, size) == 0) {
        rc = jl.cubin(lj->h, image->data + image->len);
        if (rc == NVJL_SUCCESS)
            image->len += size;
    }
    if (rc != NVJL_SUCCESS)
        nvjitlink_failed(lj, rc);
    return rc == NVJL_SUCCESS ? 0 : -1;
}

void tc_link_abandon(tc_link_job *lj)
{
    if (!lj)
        return;
    if (lj->h)
        jl.destroy(&lj->h);
    tc_map_free(&lj->defs.seen);
    tc_sb_free(&lj->log);
    free(lj->objs);
    free(lj);
}

int tc_link_finish(tc_link_job *lj, tc_sb *image, tc_sb *log)
{
    int rc = -1;
    if (lj->defs.clashes > 3)
        tc_sb_printf(&lj->log, "... %d multiple definitions in all\n", lj->defs.clashes);
    if (!lj->failed)
        rc = lj->l->kind == TC_LINKER_NVJITLINK
                 ? finish_nvjitlink(lj, image)
                 : link_nvlink(lj->l, lj->archopt + 6, lj->objs, lj->n, lj->scratch, image,
                               &lj->log);
    if (rc == 0)
        rc = check_image(image, lj->objs, lj->n, &lj->log);
    tc_sb_append(log, lj->log.data, lj->log.len);
    tc_link_abandon(lj);
    return rc;
}

/* ---- choosing a linker --------------------------------------------------- */

/* The library as it will be loaded (symbolic links resolved), identified
 * by its bytes when keyed. */
static int library_identity(const char *path, tc_store *memo, int keyed, tc_linker *out)
{
    char real[PATH_MAX], id[TC_DIGEST_HEX_LEN + 1] = "unhashed (nothing is keyed)";
    struct stat st;
    if (!realpath(path, real) || stat(real, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    tc_sb err = TC_SB_INIT;
    int rc = keyed ? tc_file_identity(real, memo, id, &err) : 0;
    tc_sb_free(&err);
    if (rc != 0)
        return -1;
    out->kind = TC_LINKER_NVJITLINK;
    snprintf(out->path, sizeof out->path, "%s", real);
    snprintf(out->id, sizeof out->id, "nvJitLink %s", id);
    return 0;
}

/* <toolkit>/bin/ptxas -> <toolkit>/bin/nvlink */
static int nvlink_beside(const char *ptxas, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ptxas);
    char *slash = strrchr(buf, '/');
    if (!slash || (size_t)(slash - buf) + 8 >= cap)
        return -1;
    strcpy(slash + 1, "nvlink");
    return access(buf, X_OK) == 0 ? 0 : -1;
}

/* <dir>/libnvJitLink.so, else the newest <dir>/libnvJitLink.so.N (by
 * version, not the directory's order): NVIDIA's nvidia-nvjitlink wheel
 * ships only libnvJitLink.so.13 (beside the ptxas of its nvidia-cuda-nvcc
 * wheel, nvidia/cu13/bin). */
static int nvjitlink_in(const char *dir, tc_store *memo, int keyed, tc_linker *out)
{
    char cand[TC_PATH_MAX + 384]; /* dir (below TC_PATH_MAX + 64), '/', a file name */
    snprintf(cand, sizeof cand, "%s/libnvJitLink.so", dir);
    if (library_identity(cand, memo, keyed, out) == 0)
        return 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    char best[256] = "";
    while (d && (e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, "libnvJitLink.so.", 16) && isdigit((unsigned char)e->d_name[16]) &&
            strlen(e->d_name) < sizeof best && strverscmp(e->d_name, best) > 0)
            snprintf(best, sizeof best, "%s", e->d_name);
    if (d)
        closedir(d);
    if (!best[0])
        return -1;
    snprintf(cand, sizeof cand, "%s/%s", dir, best);
    return library_identity(cand, memo, keyed, out);
}

/* <toolkit>/bin/ptxas -> <toolkit>/lib64/libnvJitLink.so (or lib, targets/...) */
static int nvjitlink_beside(const char *ptxas, tc_store *memo, int keyed, tc_linker *out)
{
    char dir[TC_PATH_MAX], cand[TC_PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", ptxas);
    for (int up = 0; up < 2; up++) {
        char *slash = strrchr(dir, '/');
        if (!slash)
            return -1;
        *slash = '\0';
    }
    const char *subs[] = {"lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        snprintf(cand, sizeof cand, "%s/%s", dir, subs[i]);
        if (nvjitlink_in(cand, memo, keyed, out) == 0)
            return 0;
    }
    return -1;
}

/* The toolkit's libnvJitLink, else the one found when taskcache was built. */
static int find_library(const char *ptxas, tc_store *memo, int keyed, tc_linker *out)
{
    static const char built_with[] = TC_NVJITLINK_LIB;
    if (ptxas && nvjitlink_beside(ptxas, memo, keyed, out) == 0)
        return 0;
    return built_with[0] ? library_identity(built_with, memo, keyed, out) : -1;
}

/* Order: an explicit $TASKCACHE_NVJITLINK library or $TASKCACHE_NVLINK
 * program; the nvlink of ptxas's toolkit; that toolkit's libnvJitLink (or the
 * one found at build time); nvlink on $PATH. With want_library, the toolkit's
 * libnvJitLink comes before every nvlink. The nvlink process comes before
 * the in-process library because it measured as fast or faster: 25 ms for
 * both linking 53 objects on the 2-core machine, 35 ms against 210 ms (most
 * of it system time inside nvJitLink) on the 16-core H200 machine. */
int tc_linker_find(const char *ptxas, tc_store *memo, int keyed, int want_library,
                   tc_linker *out, tc_sb *err)
{
    memset(out, 0, sizeof *out);
    const char *env = getenv("TASKCACHE_NVJITLINK");
    int allow_jl = !(env && (!strcmp(env, "none") || !strcmp(env, "0") || !strcmp(env, "off")));
    if (allow_jl && env && *env && library_identity(env, memo, keyed, out) == 0)
        return 0;
    if (want_library && allow_jl && find_library(ptxas, memo, keyed, out) == 0)
        return 0;
    char nvlink[TC_PATH_MAX];
    int found = -1;
    if (getenv("TASKCACHE_NVLINK") && *getenv("TASKCACHE_NVLINK"))
        found = tc_tool_find(NULL, "TASKCACHE_NVLINK", "nvlink", nvlink, sizeof nvlink, NULL);
    if (found != 0 && ptxas)
        found = nvlink_beside(ptxas, nvlink, sizeof nvlink);
    if (found != 0 && allow_jl && !want_library /* looked for above */ &&
        find_library(ptxas, memo, keyed, out) == 0)
        return 0;
    if (found != 0)
        found = tc_tool_find(NULL, NULL, "nvlink", nvlink, sizeof nvlink, NULL);
    if (found != 0) {
        tc_sb_printf(err, "no linker: neither libnvJitLink nor nvlink was found");
        return -1;
    }
    char id[TC_DIGEST_HEX_LEN + 1], version[160];
    if (tc_tool_identity(nvlink, memo, id, version, sizeof version, err) != 0)
        return -1;
    out->kind = TC_LINKER_NVLINK;
    snprintf(out->path, sizeof out->path, "%s", nvlink);
    snprintf(out->id, sizeof out->id, "nvlink %s", id);
    return 0;
}
