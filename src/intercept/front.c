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
#include <string.h>

#include "intercept/intercept.h"

enum { CUDA_ERROR_NOT_SUPPORTED = 801 };

/* ---- the builder, loaded on first need ------------------------------------------------------ */

static const tc_jit_api *api; /* NULL: not loaded (yet, or it could not be) */
static int tried;             /* read without the lock once set */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* A fork while another thread loads the builder waits until it is loaded:
 * the child must not start with the lock held, or with the loader's. */
static void fork_prepare(void) { pthread_mutex_lock(&load_lock); }
static void fork_release(void) { pthread_mutex_unlock(&load_lock); }
static void install_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_release, fork_release);
}

static const tc_jit_api *load_builder(void)
{
    Dl_info self;
    char path[PATH_MAX];
    void *here;
    CUresult (*fn)(CUlinkState) = tc_front_link_destroy;
    memcpy(&here, &fn, sizeof here);
    if (!dladdr(here, &self) || !self.dli_fname) {
        tc_intercept_note("cannot tell where the interceptor is: every call goes to the driver");
        return NULL;
    }
    const char *slash = strrchr(self.dli_fname, '/');
    int dir = slash ? (int)(slash - self.dli_fname + 1) : 0;
    int len = snprintf(path, sizeof path, "%.*slibtaskcache_jit.so", dir, self.dli_fname);
    if (len < 0 || (size_t)len >= sizeof path)
        return NULL;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        tc_intercept_note("cannot load the builder: %s: every call goes to the driver",
                          dlerror());
        return NULL;
    }
    const tc_jit_api *(*bind)(unsigned, const tc_real_driver *(*)(void));
    void *sym = dlsym(lib, TC_JIT_BIND);
    memcpy(&bind, &sym, sizeof bind);
    const tc_jit_api *a = bind ? bind(TC_JIT_ABI, tc_real) : NULL;
    if (!a) {
        tc_intercept_note("%s is not this interceptor's builder (another version of "
                          "taskcache?): every call goes to the driver", path);
        dlclose(lib);
    }
    return a;
}

/* The builder's functions, or NULL: interception is off, or the builder
 * cannot be loaded (the log says why, once). */
static const tc_jit_api *builder(void)
{
    if (!tc_intercept_enabled())
        return NULL;
    if (__atomic_load_n(&tried, __ATOMIC_ACQUIRE))
        return api;
    pthread_once(&fork_once, install_fork_handlers);
    pthread_mutex_lock(&load_lock);
    if (!tried) {
        api = load_builder();
        __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&load_lock);
    return api;
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
    if (tc_intercept_trace())
        tc_intercept_note("trace: %s(%s)", ex ? "cuModuleLoadDataEx" : "cuModuleLoadData",
                          len ? "PTX" : "not PTX");
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
    if (tc_intercept_trace())
        tc_intercept_note("trace: cuLibraryLoadData(%s)", len ? "PTX" : "not PTX");
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
    return d->cuLinkCreate[v] ? d->cuLinkCreate[v](n, options, values, state)
                              : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult tc_front_link_add_data(int v, CUlinkState state, CUjitInputType type, void *data,
                                size_t size, const char *name, unsigned n,
                                CUjit_option *options, void **values)
{
    const tc_jit_api *b = builder();
    if (b)
        return b->link_add_data(v, state, type, data, size, name, n, options, values);
    const tc_real_driver *d = tc_real();
    return d->cuLinkAddData[v] ? d->cuLinkAddData[v](state, type, data, size, name, n, options,
                                                     values)
                               : CUDA_ERROR_NOT_SUPPORTED;
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
