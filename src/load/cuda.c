/* cuda: loads linked images with the CUDA driver API and launches kernels.
 * The driver is opened with dlopen("libcuda.so.1") on first use, so the
 * rest of taskcache builds and runs on machines without a GPU; there, these
 * functions return TC_ERR_DRIVER with the reason. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/handles.h"

/* The few driver API types and entry points used here, as documented in
 * the CUDA Driver API reference: declared rather than taken from cuda.h so
 * that taskcache builds without the toolkit. */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;
enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CUDA_ERROR_NOT_FOUND = 500
};
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

static struct {
    pthread_once_t once;
    char error[256];
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*primary_release)(CUdevice);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_unload)(CUmodule);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*module_get_global)(CUdeviceptr *, size_t *, CUmodule, const char *);
    CUresult (*func_get_attribute)(int *, int, CUfunction);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       unsigned, CUstream, void **, void **);
    CUresult (*launch_coop)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, unsigned, CUstream, void **);
    CUresult (*get_error_string)(CUresult, const char **);
} drv = {PTHREAD_ONCE_INIT, "", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         NULL, NULL, NULL, NULL};

static void open_driver(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(drv.error, sizeof drv.error, "no CUDA driver: cannot load libcuda.so.1 (%s)",
                 e ? e : "not found");
        return;
    }
    struct {
        void *dst;
        const char *name;
    } syms[] = {
        {&drv.init, "cuInit"},
        {&drv.device_get, "cuDeviceGet"},
        {&drv.ctx_get_current, "cuCtxGetCurrent"},
        {&drv.ctx_set_current, "cuCtxSetCurrent"},
        {&drv.primary_retain, "cuDevicePrimaryCtxRetain"},
        {&drv.primary_release, "cuDevicePrimaryCtxRelease_v2"},
        {&drv.module_load_data, "cuModuleLoadData"},
        {&drv.module_unload, "cuModuleUnload"},
        {&drv.module_get_function, "cuModuleGetFunction"},
        {&drv.module_get_global, "cuModuleGetGlobal_v2"},
        {&drv.func_get_attribute, "cuFuncGetAttribute"},
        {&drv.launch, "cuLaunchKernel"},
        {&drv.launch_coop, "cuLaunchCooperativeKernel"},
        {&drv.get_error_string, "cuGetErrorString"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(lib, syms[i].name);
        if (!f) {
            snprintf(drv.error, sizeof drv.error, "the CUDA driver lacks %s", syms[i].name);
            return;
        }
        memcpy(syms[i].dst, &f, sizeof f); /* ISO C: void* to function pointer */
    }
    CUresult rc = drv.init(0);
    if (rc != 0) {
        const char *msg = NULL;
        drv.get_error_string(rc, &msg);
        snprintf(drv.error, sizeof drv.error, "cuInit failed: %s (error %d)",
                 msg ? msg : "unknown error", rc);
        return;
    }
}

static tc_status need_driver(tc_error *err)
{
    pthread_once(&drv.once, open_driver);
    if (drv.error[0])
        return tc_set_error(err, TC_ERR_DRIVER, "%s", drv.error);
    return TC_OK;
}

static tc_status cu_error(tc_error *err, CUresult rc, const char *what)
{
    const char *msg = NULL;
    if (drv.get_error_string)
        drv.get_error_string(rc, &msg);
    return tc_set_error(err, TC_ERR_DRIVER, "%s failed: %s (CUDA error %d)", what,
                        msg ? msg : "unknown error", rc);
}

/* ---- modules ---------------------------------------------------------------- */

typedef struct kernel_slot {
    char *name;
    tc_kernel k;
} kernel_slot;

struct tc_module {
    CUmodule mod;
    int released_primary; /* device whose primary context we retained, or -1 */
    tc_entry_info *entries;
    size_t nentries;
    pthread_mutex_t lock;  /* guards the kernel cache */
    kernel_slot *kernels;
    size_t nkernels, cap;
};

static tc_status load(const void *image, size_t size, const tc_result *r, tc_module **out,
                      tc_error *err)
{
    (void)size;
    tc_clear_error(err);
    *out = NULL;
    tc_status st = need_driver(err);
    if (st != TC_OK)
        return st;
    tc_module *m = calloc(1, sizeof *m);
    if (!m)
        return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
    m->released_primary = -1;
    pthread_mutex_init(&m->lock, NULL);
    CUcontext ctx = NULL;
    CUresult rc = drv.ctx_get_current(&ctx);
    if (rc == 0 && !ctx) {
        CUdevice dev;
        if ((rc = drv.device_get(&dev, 0)) != 0) {
            tc_module_unload(m);
            return cu_error(err, rc, "cuDeviceGet(0)");
        }
        if ((rc = drv.primary_retain(&ctx, dev)) != 0) {
            tc_module_unload(m);
            return cu_error(err, rc, "cuDevicePrimaryCtxRetain");
        }
        m->released_primary = dev;
        if ((rc = drv.ctx_set_current(ctx)) != 0) {
            tc_module_unload(m);
            return cu_error(err, rc, "cuCtxSetCurrent");
        }
    } else if (rc != 0) {
        tc_module_unload(m);
        return cu_error(err, rc, "cuCtxGetCurrent");
    }
    if ((rc = drv.module_load_data(&m->mod, image)) != 0) {
        m->mod = NULL;
        tc_module_unload(m);
        return cu_error(err, rc, "cuModuleLoadData");
    }
    if (r && r->nentries) {
        /* deep copy of the metadata, through the record encoding */
        m->entries = calloc(r->nentries, sizeof *m->entries);
        if (!m->entries) {
            tc_module_unload(m);
            return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
        }
        tc_sb buf = TC_SB_INIT;
        for (size_t i = 0; i < r->nentries; i++) {
            tc_sb_reset(&buf);
            tc_entry_encode(&r->entries[i], &buf);
            if (buf.oom || tc_entry_decode(buf.data, buf.len, &m->entries[i]) != 0) {
                tc_sb_free(&buf);
                tc_module_unload(m);
                return tc_set_error(err, TC_ERR_NOMEM, "out of memory");
            }
            m->nentries++;
        }
        tc_sb_free(&buf);
    }
    *out = m;
    return TC_OK;
}

tc_status tc_module_load(const tc_result *r, tc_module **out, tc_error *err)
{
    if (!r || !out || !r->image) {
        if (out)
            *out = NULL;
        return tc_set_error(err, TC_ERR_INVALID, "the result holds no image to load");
    }
    return load(r->image, r->image_len, r, out, err);
}

tc_status tc_module_load_image(const void *image, size_t size, tc_module **out, tc_error *err)
{
    if (!image || !size || !out) {
        if (out)
            *out = NULL;
        return tc_set_error(err, TC_ERR_INVALID, "no image to load");
    }
    return load(image, size, NULL, out, err);
}

void tc_module_unload(tc_module *m)
{
    if (!m)
        return;
    if (m->mod)
        drv.module_unload(m->mod);
    if (m->released_primary >= 0)
        drv.primary_release(m->released_primary);
    tc_entries_free(m->entries, m->nentries);
    for (size_t i = 0; i < m->nkernels; i++)
        free(m->kernels[i].name);
    free(m->kernels);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static const tc_entry_info *find_entry(const tc_module *m, const char *name)
{
    for (size_t i = 0; i < m->nentries; i++)
        if (!strcmp(m->entries[i].name, name))
            return &m->entries[i];
    return NULL;
}

tc_status tc_module_kernel(tc_module *m, const char *name, tc_kernel *out, tc_error *err)
{
    tc_clear_error(err);
    if (!m || !name || !out)
        return tc_set_error(err, TC_ERR_INVALID, "tc_module_kernel: missing argument");
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->nkernels; i++)
        if (!strcmp(m->kernels[i].name, name)) {
            *out = m->kernels[i].k;
            pthread_mutex_unlock(&m->lock);
            return TC_OK;
        }
    tc_kernel k;
    memset(&k, 0, sizeof k);
    CUfunction f = NULL;
    CUresult rc = drv.module_get_function(&f, m->mod, name);
    tc_status st = TC_OK;
    if (rc == CUDA_ERROR_NOT_FOUND) {
        st = tc_set_error(err, TC_ERR_NOT_FOUND, "no kernel named '%s' in the module", name);
    } else if (rc != 0) {
        st = cu_error(err, rc, "cuModuleGetFunction");
    } else {
        k.function = f;
        k.entry = find_entry(m, name);
        drv.func_get_attribute(&k.max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                               f);
        drv.func_get_attribute(&k.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
        drv.func_get_attribute(&k.shared_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
        drv.func_get_attribute(&k.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f);
        drv.func_get_attribute(&k.const_bytes, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, f);
        if (m->nkernels == m->cap) {
            size_t nc = m->cap ? m->cap * 2 : 16;
            kernel_slot *p = realloc(m->kernels, nc * sizeof *p);
            if (p) {
                m->kernels = p;
                m->cap = nc;
            }
        }
        char *copy = strdup(name);
        if (m->nkernels < m->cap && copy) {
            m->kernels[m->nkernels].name = copy;
            m->kernels[m->nkernels].k = k;
            m->nkernels++;
        } else {
            free(copy);
        }
        *out = k;
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

tc_status tc_module_global(tc_module *m, const char *name, uint64_t *dptr, size_t *bytes,
                           tc_error *err)
{
    tc_clear_error(err);
    if (!m || !name)
        return tc_set_error(err, TC_ERR_INVALID, "tc_module_global: missing argument");
    CUdeviceptr p = 0;
    size_t n = 0;
    CUresult rc = drv.module_get_global(&p, &n, m->mod, name);
    if (rc == CUDA_ERROR_NOT_FOUND)
        return tc_set_error(err, TC_ERR_NOT_FOUND, "no global named '%s' in the module", name);
    if (rc != 0)
        return cu_error(err, rc, "cuModuleGetGlobal");
    if (dptr)
        *dptr = p;
    if (bytes)
        *bytes = n;
    return TC_OK;
}

tc_status tc_module_launch(tc_module *m, const char *name, const tc_launch *cfg, void **args,
                           const void *params, size_t param_size, tc_error *err)
{
    tc_kernel k;
    tc_status st = tc_module_kernel(m, name, &k, err);
    if (st != TC_OK)
        return st;
    if (!cfg)
        return tc_set_error(err, TC_ERR_INVALID, "tc_module_launch: no launch configuration");
    unsigned g[3], b[3];
    for (int i = 0; i < 3; i++) {
        g[i] = cfg->grid[i] ? cfg->grid[i] : 1;
        b[i] = cfg->block[i] ? cfg->block[i] : 1;
    }
    void *extra[5] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)params, CU_LAUNCH_PARAM_BUFFER_SIZE,
                      &param_size, CU_LAUNCH_PARAM_END};
    if (params) {
        if (args)
            return tc_set_error(err, TC_ERR_INVALID, "give either args or a parameter buffer");
        if (k.entry && param_size != k.entry->param_bytes)
            return tc_set_error(err, TC_ERR_INVALID,
                                "parameter buffer for '%s' is %zu bytes; its layout needs %u",
                                name, param_size, k.entry->param_bytes);
        if (cfg->cooperative)
            return tc_set_error(err, TC_ERR_INVALID,
                                "cooperative launches take args, not a parameter buffer");
    }
    CUresult rc;
    if (cfg->cooperative)
        rc = drv.launch_coop(k.function, g[0], g[1], g[2], b[0], b[1], b[2], cfg->shared_bytes,
                             cfg->stream, args);
    else
        rc = drv.launch(k.function, g[0], g[1], g[2], b[0], b[1], b[2], cfg->shared_bytes,
                        cfg->stream, params ? NULL : args, params ? extra : NULL);
    if (rc != 0)
        return cu_error(err, rc, cfg->cooperative ? "cuLaunchCooperativeKernel" : "cuLaunchKernel");
    return TC_OK;
}
