/* real: the functions the interceptor stands in for, as they really are:
 * the C library's dlsym and dlvsym (found in its symbol table, since
 * within the preloaded library every reference to them binds to the
 * replacements of interpose.c) and the real driver's functions, found
 * through them. Below both interpose.c (the stand-ins) and front.c (where
 * a call goes), so that no call of ours ever loops back into a stand-in. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "intercept/intercept.h"

/* ---- the real dlsym -------------------------------------------------------------------- */

/* not static: interpose.c's entry points jump through them (hidden all the
 * same, as everything of this library but its exports) */
void *(*tc_real_dlsym)(void *, const char *);
void *(*tc_real_dlvsym)(void *, const char *, const char *);
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

static void find_real_dlsym(void)
{
    void *p = tc_libc_function("dlsym"), *q = tc_libc_function("dlvsym");
    memcpy(&tc_real_dlsym, &p, sizeof p);
    memcpy(&tc_real_dlvsym, &q, sizeof q);
}

void tc_find_real_dlsym(void) { pthread_once(&dlsym_once, find_real_dlsym); }

/* Found before any program code runs: the entry points' RTLD_NEXT path
 * needs them (until then it takes the path of every other handle). */
__attribute__((constructor)) static void find_real_dlsym_early(void) { tc_find_real_dlsym(); }

/* ---- the real driver ------------------------------------------------------------------- */

static tc_real_driver real;
static tc_get_proc_fn real_get_proc[2];
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* Assigning dlsym's void * to a function pointer goes through memcpy (ISO
 * C has no conversion between the two). */
#define REAL(lib, field, name)                                                                \
    do {                                                                                      \
        void *p_ = (lib) ? tc_real_dlsym((lib), (name)) : NULL;                               \
        memcpy(&(field), &p_, sizeof p_);                                                     \
    } while (0)

static void load_real(void)
{
    tc_find_real_dlsym();
    void *lib = tc_real_dlsym ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) : NULL;
    REAL(lib, real.cuModuleLoadData, "cuModuleLoadData");
    REAL(lib, real.cuModuleLoadDataEx, "cuModuleLoadDataEx");
    REAL(lib, real.cuLibraryLoadData, "cuLibraryLoadData");
    REAL(lib, real.cuLinkCreate[0], "cuLinkCreate");
    REAL(lib, real.cuLinkCreate[1], "cuLinkCreate_v2");
    REAL(lib, real.cuLinkAddData[0], "cuLinkAddData");
    REAL(lib, real.cuLinkAddData[1], "cuLinkAddData_v2");
    REAL(lib, real.cuLinkAddFile[0], "cuLinkAddFile");
    REAL(lib, real.cuLinkAddFile[1], "cuLinkAddFile_v2");
    REAL(lib, real.cuLinkComplete, "cuLinkComplete");
    REAL(lib, real.cuLinkDestroy, "cuLinkDestroy");
    REAL(lib, real.cuCtxGetDevice, "cuCtxGetDevice");
    REAL(lib, real.cuDeviceGetAttribute, "cuDeviceGetAttribute");
    REAL(lib, real.cuDeviceGetCount, "cuDeviceGetCount");
    REAL(lib, real.cuDeviceGet, "cuDeviceGet");
    REAL(lib, real_get_proc[0], "cuGetProcAddress");
    REAL(lib, real_get_proc[1], "cuGetProcAddress_v2");
}

const tc_real_driver *tc_real(void)
{
    pthread_once(&real_once, load_real);
    return &real;
}

tc_get_proc_fn tc_real_get_proc(int v)
{
    tc_real();
    return real_get_proc[v];
}
