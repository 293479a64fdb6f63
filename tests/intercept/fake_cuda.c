/* fake_cuda: a libcuda.so.1 for testing the interceptor without a GPU.
 * It records every call it receives, one line each, in $FAKE_CUDA_LOG:
 *
 *   cuModuleLoadData ELF <sha256-prefix> | PTX <bytes> | OTHER
 *   cuModuleLoadDataEx ELF|PTX ... options=<n>
 *   cuLibraryLoadData ELF|PTX ... liboptions=<n>
 *   cuLinkCreate v1|v2 options=<n>   cuLinkAddData v1|v2 type=<t> PTX|ELF|OTHER
 *   cuLinkAddFile v1|v2 type=<t>     cuLinkComplete inputs=<n>   cuLinkDestroy
 *   cuGetProcAddress v1|v2 <symbol> <version>
 *
 * and saves every ELF image it is given as $FAKE_CUDA_SAVE/<n>.cubin. PTX
 * containing "FAKE_INVALID" fails like the driver's compiler (error 218,
 * CUDA_ERROR_INVALID_PTX, with a message in the error log). The devices
 * have the compute capabilities $FAKE_CUDA_CC lists (default "90": one
 * device; "90,80": two); the current context's device is $FAKE_CUDA_DEVICE
 * (default 0). */
#define _GNU_SOURCE
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intercept/cuda_abi.h"

#define EXPORT __attribute__((visibility("default")))
enum { CUDA_ERROR_INVALID_PTX = 218, CUDA_ERROR_NOT_FOUND = 500 };

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void record(const char *fmt, ...)
{
    const char *path = getenv("FAKE_CUDA_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/* The size of a 64-bit ELF image: the end of whatever comes last, the
 * header tables or a section's contents. */
static size_t elf_size(const unsigned char *p)
{
    uint64_t shoff, phoff, off, size;
    uint16_t phentsize, phnum, shentsize, shnum;
    uint32_t type;
    memcpy(&phoff, p + 0x20, 8);
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&phentsize, p + 0x36, 2);
    memcpy(&phnum, p + 0x38, 2);
    memcpy(&shentsize, p + 0x3A, 2);
    memcpy(&shnum, p + 0x3C, 2);
    size_t end = (size_t)shoff + (size_t)shentsize * shnum;
    if (phoff + (uint64_t)phentsize * phnum > end)
        end = (size_t)(phoff + (uint64_t)phentsize * phnum);
    for (uint16_t i = 0; i < shnum; i++) {
        const unsigned char *h = p + shoff + (size_t)i * shentsize;
        memcpy(&type, h + 4, 4);
        memcpy(&off, h + 0x18, 8);
        memcpy(&size, h + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off + size > end)
            end = (size_t)(off + size);
    }
    return end;
}

/* "ELF <sha256 prefix>" (and the image saved), "PTX <bytes>" or "OTHER". */
static void describe(const void *image, char *out, size_t cap)
{
    const unsigned char *p = image;
    if (p && p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F') {
        size_t size = elf_size(p);
        unsigned char md[32];
        unsigned len = 0;
        EVP_Digest(p, size, md, &len, EVP_sha256(), NULL);
        snprintf(out, cap, "ELF %02x%02x%02x%02x%02x%02x", md[0], md[1], md[2], md[3], md[4],
                 md[5]);
        const char *dir = getenv("FAKE_CUDA_SAVE");
        if (dir) {
            static int n;
            char path[4096];
            snprintf(path, sizeof path, "%s/%d.cubin", dir, n++);
            FILE *f = fopen(path, "wb");
            if (f) {
                fwrite(p, 1, size, f);
                fclose(f);
            }
        }
    } else if (p && strstr((const char *)p, ".version")) {
        snprintf(out, cap, "PTX %zu", strlen((const char *)p));
    } else {
        snprintf(out, cap, "OTHER");
    }
}

static int invalid(const void *image)
{
    const unsigned char *p = image;
    return p && p[0] != 0x7f && strstr((const char *)p, "FAKE_INVALID") != NULL;
}

/* Writes the compiler's complaint into the caller's error log, as the
 * driver does. */
static void error_log(unsigned n, const CUjit_option *o, void **v)
{
    char *buf = NULL;
    size_t cap = 0;
    for (unsigned i = 0; i < n; i++) {
        if (o[i] == CU_JIT_ERROR_LOG_BUFFER)
            buf = v[i];
        if (o[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
            cap = (size_t)(uintptr_t)v[i];
    }
    if (buf && cap)
        snprintf(buf, cap, "ptxas application ptx input, line 1; fatal   : fake parse error");
}

static struct CUmod_st { int dummy; } the_module;
static struct CUlib_st { int dummy; } the_library;

EXPORT CUresult cuInit(unsigned flags);
EXPORT CUresult cuCtxGetDevice(CUdevice *dev);
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev);
EXPORT CUresult cuDeviceGetCount(int *count);
EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal);
EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image);
EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *o,
                                   void **v);
EXPORT CUresult cuLibraryLoadData(CUlibrary *l, const void *code, CUjit_option *o, void **v,
                                  unsigned n, CUlibraryOption *lo, void **lv, unsigned ln);
EXPORT CUresult cuLinkCreate(unsigned n, CUjit_option *o, void **v, CUlinkState *s);
EXPORT CUresult cuLinkCreate_v2(unsigned n, CUjit_option *o, void **v, CUlinkState *s);
EXPORT CUresult cuLinkAddData(CUlinkState s, CUjitInputType t, void *d, size_t size,
                              const char *name, unsigned n, CUjit_option *o, void **v);
EXPORT CUresult cuLinkAddData_v2(CUlinkState s, CUjitInputType t, void *d, size_t size,
                                 const char *name, unsigned n, CUjit_option *o, void **v);
EXPORT CUresult cuLinkAddFile(CUlinkState s, CUjitInputType t, const char *path, unsigned n,
                              CUjit_option *o, void **v);
EXPORT CUresult cuLinkAddFile_v2(CUlinkState s, CUjitInputType t, const char *path, unsigned n,
                                 CUjit_option *o, void **v);
EXPORT CUresult cuLinkComplete(CUlinkState s, void **cubin, size_t *size);
EXPORT CUresult cuLinkDestroy(CUlinkState s);
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                                    int *status);

CUresult cuInit(unsigned flags)
{
    (void)flags;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
    const char *d = getenv("FAKE_CUDA_DEVICE"); /* the current context's, default 0 */
    *dev = d ? atoi(d) : 0;
    return CUDA_SUCCESS;
}

/* The compute capabilities of the devices, from $FAKE_CUDA_CC; the count. */
static int devices(int cc[8])
{
    const char *list = getenv("FAKE_CUDA_CC");
    int n = 0;
    const char *p = list && *list ? list : "90";
    while (*p && n < 8) {
        cc[n++] = atoi(p);
        p += strcspn(p, ",");
        p += *p == ',';
    }
    return n;
}

CUresult cuDeviceGetCount(int *count)
{
    int cc[8];
    *count = devices(cc);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    int cc[8];
    if (ordinal < 0 || ordinal >= devices(cc))
        return CUDA_ERROR_INVALID_VALUE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice dev)
{
    int cc[8];
    if (dev < 0 || dev >= devices(cc))
        return CUDA_ERROR_INVALID_VALUE;
    int c = cc[dev];
    if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        *v = c / 10;
    else if (attr == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        *v = c % 10;
    else
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    char d[64];
    describe(image, d, sizeof d);
    record("cuModuleLoadData %s", d);
    if (invalid(image))
        return CUDA_ERROR_INVALID_PTX;
    *m = &the_module;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *o, void **v)
{
    char d[64];
    describe(image, d, sizeof d);
    record("cuModuleLoadDataEx %s options=%u", d, n);
    if (invalid(image)) {
        error_log(n, o, v);
        return CUDA_ERROR_INVALID_PTX;
    }
    *m = &the_module;
    return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary *l, const void *code, CUjit_option *o, void **v, unsigned n,
                           CUlibraryOption *lo, void **lv, unsigned ln)
{
    (void)lo, (void)lv;
    char d[64];
    describe(code, d, sizeof d);
    record("cuLibraryLoadData %s options=%u liboptions=%u", d, n, ln);
    if (invalid(code)) {
        error_log(n, o, v);
        return CUDA_ERROR_INVALID_PTX;
    }
    *l = &the_library;
    return CUDA_SUCCESS;
}

typedef struct CUlinkState_st {
    int inputs;
    int invalid;
} link_state;

static CUresult link_create(int version, unsigned n, CUlinkState *s)
{
    record("cuLinkCreate v%d options=%u", version, n);
    *s = calloc(1, sizeof(link_state));
    return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuLinkCreate(unsigned n, CUjit_option *o, void **v, CUlinkState *s)
{
    (void)o, (void)v;
    return link_create(1, n, s);
}

CUresult cuLinkCreate_v2(unsigned n, CUjit_option *o, void **v, CUlinkState *s)
{
    (void)o, (void)v;
    return link_create(2, n, s);
}

static CUresult link_add(int version, CUlinkState s, CUjitInputType t, void *d, size_t size)
{
    char what[64];
    describe(d, what, sizeof what);
    record("cuLinkAddData v%d type=%d %s size=%zu", version, (int)t, what, size);
    s->inputs++;
    return invalid(d) ? CUDA_ERROR_INVALID_PTX : CUDA_SUCCESS;
}

CUresult cuLinkAddData(CUlinkState s, CUjitInputType t, void *d, size_t size, const char *name,
                       unsigned n, CUjit_option *o, void **v)
{
    (void)name, (void)n, (void)o, (void)v;
    return link_add(1, s, t, d, size);
}

CUresult cuLinkAddData_v2(CUlinkState s, CUjitInputType t, void *d, size_t size,
                          const char *name, unsigned n, CUjit_option *o, void **v)
{
    (void)name, (void)n, (void)o, (void)v;
    return link_add(2, s, t, d, size);
}

static CUresult link_file(int version, CUlinkState s, CUjitInputType t, const char *path)
{
    record("cuLinkAddFile v%d type=%d %s", version, (int)t, strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    s->inputs++;
    return CUDA_SUCCESS;
}

CUresult cuLinkAddFile(CUlinkState s, CUjitInputType t, const char *path, unsigned n,
                       CUjit_option *o, void **v)
{
    (void)n, (void)o, (void)v;
    return link_file(1, s, t, path);
}

CUresult cuLinkAddFile_v2(CUlinkState s, CUjitInputType t, const char *path, unsigned n,
                          CUjit_option *o, void **v)
{
    (void)n, (void)o, (void)v;
    return link_file(2, s, t, path);
}

CUresult cuLinkComplete(CUlinkState s, void **cubin, size_t *size)
{
    static char image[] = "FAKE LINKED IMAGE";
    record("cuLinkComplete inputs=%d", s->inputs);
    *cubin = image;
    *size = sizeof image;
    return CUDA_SUCCESS;
}

CUresult cuLinkDestroy(CUlinkState s)
{
    record("cuLinkDestroy");
    free(s);
    return CUDA_SUCCESS;
}

/* Versions as the driver hands them out: the _v2 of the link functions
 * from CUDA 6.5 (6050) on, of cuGetProcAddress from 12.0. The library is
 * linked -Bsymbolic, so these are its own functions even with the
 * interceptor preloaded. */
static CUresult get_proc(const char *sym, void **pfn, int version)
{
    static const struct {
        const char *name;
        int since;
        void (*fn)(void);
    } table[] = {
#define E(name, since, f) {name, since, (void (*)(void))f}
        E("cuModuleLoadData", 0, cuModuleLoadData),
        E("cuModuleLoadDataEx", 0, cuModuleLoadDataEx),
        E("cuLibraryLoadData", 0, cuLibraryLoadData),
        E("cuLinkCreate", 6050, cuLinkCreate_v2), E("cuLinkCreate", 0, cuLinkCreate),
        E("cuLinkAddData", 6050, cuLinkAddData_v2), E("cuLinkAddData", 0, cuLinkAddData),
        E("cuLinkAddFile", 6050, cuLinkAddFile_v2), E("cuLinkAddFile", 0, cuLinkAddFile),
        E("cuLinkComplete", 0, cuLinkComplete), E("cuLinkDestroy", 0, cuLinkDestroy),
        E("cuGetProcAddress", 12000, cuGetProcAddress_v2),
        E("cuGetProcAddress", 0, cuGetProcAddress),
        E("cuInit", 0, cuInit), E("cuCtxGetDevice", 0, cuCtxGetDevice),
        E("cuDeviceGetAttribute", 0, cuDeviceGetAttribute),
        E("cuDeviceGetCount", 0, cuDeviceGetCount), E("cuDeviceGet", 0, cuDeviceGet),
#undef E
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(sym, table[i].name) && version >= table[i].since) {
            memcpy(pfn, &table[i].fn, sizeof *pfn);
            return CUDA_SUCCESS;
        }
    *pfn = NULL;
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *sym, void **pfn, int version, cuuint64_t flags)
{
    (void)flags;
    record("cuGetProcAddress v1 %s %d", sym, version);
    return get_proc(sym, pfn, version);
}

CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, cuuint64_t flags,
                             int *status)
{
    (void)flags;
    record("cuGetProcAddress v2 %s %d", sym, version);
    if (status)
        *status = 0;
    return get_proc(sym, pfn, version);
}
