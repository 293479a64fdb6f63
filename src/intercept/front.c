/* front: the preloaded library's half of each stand-in. A call goes to the
 * builder (libtaskcache_jit.so, beside this library) when interception is
 * on and the call may carry PTX: a module or library load of PTX text, or
 * anything of a link session. Everything else goes to the driver
 * unchanged, and so does every call when the builder cannot be loaded.
 *
 * The builder carries all of taskcache (the in-process compiler included):
 * loading it costs a few milliseconds and a few hundred pages, which every
 * process started under `taskcache run` paid before the split (a shell
 * script's every command). Now only a process that hands the driver PTX
 * or links does, once. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intercept/intercept.h"

enum { CUDA_ERROR_NOT_SUPPORTED = 801 };

/* ---- the builder, loaded on first need ------------------------------------------------------ */

/* Where the builder is: beside this library, by an absolute name worked out
 * when this library is loaded (LD_PRELOAD may name it relative to a
 * directory the program leaves). Empty: unknown. */
static char builder_path[PATH_MAX];

static void forked_child(void);

__attribute__((constructor)) static void find_builder(void)
{
    pthread_atfork(NULL, NULL, forked_child);
    Dl_info self;
    void *here;
    CUresult (*fn)(CUlinkState) = tc_front_link_destroy;
    memcpy(&here, &fn, sizeof here);
    if (!dladdr(here, &self) || !self.dli_fname)
        return;
    char dir[PATH_MAX];
    const char *slash = strrchr(self.dli_fname, '/');
    int n = snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - self.dli_fname) : 0,
                     self.dli_fname);
    if (n < 0 || (size_t)n >= sizeof dir)
        return;
    char abs[PATH_MAX];
    const char *where = dir[0] == '/' ? dir : realpath(dir[0] ? dir : ".", abs);
    if (where && snprintf(builder_path, sizeof builder_path, "%s/libtaskcache_jit.so", where) >=
                     (int)sizeof builder_path)
        builder_path[0] = '\0';
}

static const tc_jit_api *api; /* NULL: not loaded (yet, or it could not be) */
static int tried, noted;      /* a load was tried; its failure was logged */
static int loading;           /* loads under way */
static int mid_load;          /* this process was forked during one */

int tc_front_forked_mid_load(void) { return mid_load; }

/* A child forked while another thread was loading the builder has a copy
 * of the loader in the middle of it (the library mapped, not relocated):
 * it must not touch the builder. The driver gets its calls. */
static void forked_child(void)
{
    if (__atomic_load_n(&loading, __ATOMIC_RELAXED) && !__atomic_load_n(&api, __ATOMIC_RELAXED)) {
        loading = 0;
        tried = noted = mid_load = 1;
    }
}

/* The builder's functions, or NULL with why. */
static const tc_jit_api *load_builder(char *why, size_t cap)
{
    if (!builder_path[0]) {
        snprintf(why, cap, "the interceptor's own directory is unknown");
        return NULL;
    }
    void *lib = dlopen(builder_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : builder_path);
        return NULL;
    }
    const tc_jit_api *(*bind)(unsigned, const tc_real_driver *(*)(void), int);
    tc_find_real_dlsym(); /* the C library's: ours has nothing to stand in for here */
    void *sym = tc_real_dlsym ? tc_real_dlsym(lib, TC_JIT_BIND) : NULL;
    memcpy(&bind, &sym, sizeof bind);
    const tc_jit_api *a = bind ? bind(TC_JIT_ABI, tc_real, tc_intercept_mode()) : NULL;
    if (!a) {
        snprintf(why, cap, "%s is not this interceptor's builder (another version of taskcache?)",
                 builder_path);
        dlclose(lib);
    }
    return a;
}

/* The builder's functions, or NULL: interception is off, or the builder
 * cannot be loaded (the log says why, once). No lock of ours is held while
 * it loads: the dynamic loader has its own, and a library constructor on
 * another thread may be calling a stand-in while it holds that one. Threads
 * that come first at once each load it (dlopen counts them) and bind the
 * same functions; one that succeeds wins over one that failed. */
static const tc_jit_api *builder(void)
{
    if (!tc_intercept_enabled())
        return NULL;
    if (!__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) {
        char why[PATH_MAX + 128];
        __atomic_add_fetch(&loading, 1, __ATOMIC_ACQ_REL);
        const tc_jit_api *a = load_builder(why, sizeof why);
        __atomic_sub_fetch(&loading, 1, __ATOMIC_ACQ_REL);
        if (a)
            __atomic_store_n(&api, a, __ATOMIC_RELEASE);
        else if (!__atomic_exchange_n(&noted, 1, __ATOMIC_ACQ_REL))
            tc_intercept_note("cannot load the builder: %s: every call goes to the driver", why);
        __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&api, __ATOMIC_ACQUIRE);
}

/* ---- the calls ----------------------------------------------------------------------------- */

CUresult tc_front_module_load(CUmodule *module, const void *image, unsigned n,
                              CUjit_option *options, void **values, int ex)
{
    size_t len = image ? tc_ptx_length(image) : 0;
    const tc_jit_api *b = len ? builder() : NULL;
    if (b)
        return b->module_load(module, image, n, options, values, ex);
    const tc_real_driver *d = tc_real();
    tc_trace_load(ex ? "cuModuleLoadDataEx" : "cuModuleLoadData", len);
    if (ex)
        return d->cuModuleLoadDataEx ? d->cuModuleLoadDataEx(module, image, n, options, values)
                                     : CUDA_ERROR_NOT_SUPPORTED;
    return d->cuModuleLoadData ? d->cuModuleLoadData(module, image) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult tc_front_library_load(CUlibrary *library, const void *code, CUjit_option *options,
                               void **values, unsigned n, CUlibraryOption *lib_options,
                               void **lib_values, unsigned lib_n)
{
    size_t len = code ? tc_ptx_length(code) : 0;
    const tc_jit_api *b = len ? builder() : NULL;
    if (b)
        return b->library_load(library, code, options, values, n, lib_options, lib_values,
                               lib_n);
    const tc_real_driver *d = tc_real();
    tc_trace_load("cuLibraryLoadData", len);
    return d->cuLibraryLoadData ? d->cuLibraryLoadData(library, code, options, values, n,
                                                       lib_options, lib_values, lib_n)
                                : CUDA_ERROR_NOT_SUPPORTED;
}

/* Link sessions: the builder keeps each session's options from its
 * creation on, so it is loaded by the first cuLinkCreate. */
CUresult tc_front_link_create(int v, unsigned n, CUjit_option *options, void **values,
                              CUlinkState *state)
{
    const tc_jit_api *b = builder();
    if (b)
        return b->link_create(v, n, options, values, state);
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkCreate[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = d->cuLinkCreate[v](n, options, values, state);
    tc_trace_link_create(v, n, rc);
    return rc;
}

CUresult tc_front_link_add_data(int v, CUlinkState state, CUjitInputType type, void *data,
                                size_t size, const char *name, unsigned n,
                                CUjit_option *options, void **values)
{
    const tc_jit_api *b = builder();
    if (b)
        return b->link_add_data(v, state, type, data, size, name, n, options, values);
    const tc_real_driver *d = tc_real();
    if (!d->cuLinkAddData[v])
        return CUDA_ERROR_NOT_SUPPORTED;
    tc_trace_link_add_data(v, type, size);
    return d->cuLinkAddData[v](state, type, data, size, name, n, options, values);
}

CUresult tc_front_link_add_file(int v, CUlinkState state, CUjitInputType type,
                                const char *path, unsigned n, CUjit_option *options,
                                void **values)
{
    const tc_jit_api *b = builder();
    if (b)
        return b->link_add_file(v, state, type, path, n, options, values);
    const tc_real_driver *d = tc_real();
    return d->cuLinkAddFile[v] ? d->cuLinkAddFile[v](state, type, path, n, options, values)
                               : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult tc_front_link_complete(CUlinkState state, void **cubin, size_t *size)
{
    const tc_jit_api *b = builder();
    if (b)
        return b->link_complete(state, cubin, size);
    const tc_real_driver *d = tc_real();
    return d->cuLinkComplete ? d->cuLinkComplete(state, cubin, size) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult tc_front_link_destroy(CUlinkState state)
{
    const tc_jit_api *b = builder();
    if (b)
        return b->link_destroy(state);
    const tc_real_driver *d = tc_real();
    return d->cuLinkDestroy ? d->cuLinkDestroy(state) : CUDA_ERROR_NOT_SUPPORTED;
}
