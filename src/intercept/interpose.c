/* interpose: puts the interceptor's functions in the driver's place on
 * every path a program reaches driver functions by:
 *
 * - linked against libcuda: the preloaded library's symbols come first;
 * - dlopen("libcuda.so.1") + dlsym or dlvsym (the CUDA runtime, linked
 *   statically into CuPy and cuBLAS, uses dlvsym): both are replaced, and
 *   hand out the stand-in for a driver function they would have returned;
 *   libraries loaded with RTLD_DEEPBIND (Quadrants' core) import the C
 *   library's instead, and have their imports pointed here (rebind.c);
 * - cuGetProcAddress (the CUDA runtime, cuda-python): both of its versions
 *   are replaced, and hand out the stand-in for the version of a function
 *   the program asked for (cuLinkAddData or cuLinkAddData_v2).
 *
 * The real functions come from real.c: the real libcuda.so.1 through the
 * real dlsym, found in the C library's symbol table, so no call of ours
 * ever loops back into a stand-in. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "intercept/intercept.h"

#define EXPORT __attribute__((visibility("default")))

enum { CUDA_ERROR_NOT_SUPPORTED = 801 };

/* ---- the stand-ins ------------------------------------------------------------------------ */

/* Declared here because they exist to be found by name, not called. */
EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image);
EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned n,
                                   CUjit_option *options, void **values);
EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *options,
                                  void **values, unsigned n, CUlibraryOption *lib_options,
                                  void **lib_values, unsigned lib_n);
EXPORT CUresult cuLinkCreate(unsigned n, CUjit_option *options, void **values, CUlinkState *out);
EXPORT CUresult cuLinkCreate_v2(unsigned n, CUjit_option *options, void **values,
                                CUlinkState *out);
EXPORT CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                              const char *name, unsigned n, CUjit_option *options, void **values);
EXPORT CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned n, CUjit_option *options,
                                 void **values);
EXPORT CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path,
                              unsigned n, CUjit_option *options, void **values);
EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                 unsigned n, CUjit_option *options, void **values);
EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size);
EXPORT CUresult cuLinkDestroy(CUlinkState state);
EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                    cuuint64_t flags, int *status);

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    return tc_front_module_load(module, image, 0, NULL, NULL, 0);
}

CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned n,
                            CUjit_option *options, void **values)
{
    return tc_front_module_load(module, image, n, options, values, 1);
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *options,
                           void **values, unsigned n, CUlibraryOption *lib_options,
                           void **lib_values, unsigned lib_n)
{
    return tc_front_library_load(library, code, options, values, n, lib_options, lib_values, lib_n);
}

CUresult cuLinkCreate(unsigned n, CUjit_option *options, void **values, CUlinkState *out)
{
    return tc_front_link_create(0, n, options, values, out);
}

CUresult cuLinkCreate_v2(unsigned n, CUjit_option *options, void **values, CUlinkState *out)
{
    return tc_front_link_create(1, n, options, values, out);
}

CUresult cuLinkAddData(CUlinkState state, CUjitInputType type, void *data, size_t size,
                       const char *name, unsigned n, CUjit_option *options, void **values)
{
    return tc_front_link_add_data(0, state, type, data, size, name, n, options, values);
}

CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                          const char *name, unsigned n, CUjit_option *options, void **values)
{
    return tc_front_link_add_data(1, state, type, data, size, name, n, options, values);
}

CUresult cuLinkAddFile(CUlinkState state, CUjitInputType type, const char *path, unsigned n,
                       CUjit_option *options, void **values)
{
    return tc_front_link_add_file(0, state, type, path, n, options, values);
}

CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path, unsigned n,
                          CUjit_option *options, void **values)
{
    return tc_front_link_add_file(1, state, type, path, n, options, values);
}

CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size)
{
    return tc_front_link_complete(state, cubin, size);
}

CUresult cuLinkDestroy(CUlinkState state) { return tc_front_link_destroy(state); }

/* ---- handing out the stand-ins --------------------------------------------------------- */

/* The stand-in for a function by its exact name (dlsym), or NULL. */
static void *stand_in_named(const char *name)
{
    static const struct {
        const char *name;
        void (*fn)(void); /* the generic function pointer type; cast back by the caller */
    } table[] = {
#define ENTRY(f) {#f, (void (*)(void))f}
        ENTRY(cuModuleLoadData),  ENTRY(cuModuleLoadDataEx), ENTRY(cuLibraryLoadData),
        ENTRY(cuLinkCreate),      ENTRY(cuLinkCreate_v2),    ENTRY(cuLinkAddData),
        ENTRY(cuLinkAddData_v2),  ENTRY(cuLinkAddFile),      ENTRY(cuLinkAddFile_v2),
        ENTRY(cuLinkComplete),    ENTRY(cuLinkDestroy),      ENTRY(cuGetProcAddress),
        ENTRY(cuGetProcAddress_v2),
#undef ENTRY
    };
    if (name[0] != 'c' || name[1] != 'u')
        return NULL;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name)) {
            void *p;
            memcpy(&p, &table[i].fn, sizeof p);
            return p;
        }
    return NULL;
}

/* The stand-in for what cuGetProcAddress returned for `symbol` (a base
 * name; the version the program asks for decides which of a function's
 * versions the driver gave: the _v2 of the link functions from CUDA 6.5,
 * of cuGetProcAddress from 12.0, as cudaTypedefs.h lists them), or NULL
 * for a function we do not stand in for. */
static void *stand_in_for(const char *symbol, int version)
{
    static const struct {
        const char *name;
        int since;
        const char *ours;
    } versions[] = {
        {"cuLinkCreate", 6050, "cuLinkCreate_v2"},
        {"cuLinkAddData", 6050, "cuLinkAddData_v2"},
        {"cuLinkAddFile", 6050, "cuLinkAddFile_v2"},
        {"cuGetProcAddress", 12000, "cuGetProcAddress_v2"},
    };
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++)
        if (!strcmp(symbol, versions[i].name) && version >= versions[i].since)
            return stand_in_named(versions[i].ours);
    return stand_in_named(symbol);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    /* the first version has no status argument: called through a cast
     * of its own type */
    tc_get_proc_fn real = tc_real_get_proc(0);
    CUresult (*get)(const char *, void **, int, cuuint64_t);
    memcpy(&get, &real, sizeof get);
    if (!get)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = get(symbol, pfn, version, flags);
    if (tc_intercept_trace() && symbol)
        tc_intercept_note("trace: cuGetProcAddress(%s, %d): %d", symbol, version, rc);
    void *ours;
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && tc_intercept_enabled() &&
        (ours = stand_in_for(symbol, version)) != NULL)
        *pfn = ours;
    return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             int *status)
{
    tc_get_proc_fn get = tc_real_get_proc(1);
    if (!get)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUresult rc = get(symbol, pfn, version, flags, status);
    if (tc_intercept_trace() && symbol)
        tc_intercept_note("trace: cuGetProcAddress_v2(%s, %d): %d", symbol, version, rc);
    void *ours;
    if (rc == CUDA_SUCCESS && symbol && pfn && *pfn && tc_intercept_enabled() &&
        (ours = stand_in_for(symbol, version)) != NULL)
        *pfn = ours;
    return rc;
}

/* What dlsym or dlvsym found, or our stand-in when it is a driver function
 * we stand in for, found in the driver (libcuda). */
static void *swap(void *p, const char *name, const char *how)
{
    void *ours;
    Dl_info info;
    if (tc_intercept_trace() && p && name && name[0] == 'c' && name[1] == 'u' &&
        !stand_in_named(name))
        tc_intercept_note("trace: %s(%s): the driver's own", how, name);
    if (!p || !name || !(ours = stand_in_named(name)) || p == ours || !tc_intercept_enabled())
        return p;
    if (!dladdr(p, &info) || !info.dli_fname)
        return p;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    int driver = strncmp(base, "libcuda.so", 10) == 0;
    if (tc_intercept_trace())
        tc_intercept_note("trace: %s(%s) in %s: %s", how, name, base,
                          driver ? "the stand-in" : "left alone");
    return driver ? ours : p;
}

EXPORT void *dlsym(void *restrict handle, const char *restrict name);
EXPORT void *dlvsym(void *restrict handle, const char *restrict name,
                    const char *restrict version);

/* A library loaded since the last lookup may import dlsym past us
 * (RTLD_DEEPBIND): rebind.c points it at ours before its code runs. */
static void rebind(void)
{
    void *a, *b;
    void *(*s)(void *, const char *) = dlsym;
    void *(*v)(void *, const char *, const char *) = dlvsym;
    memcpy(&a, &s, sizeof a);
    memcpy(&b, &v, sizeof b);
    /* the loader's list lock of a child forked mid-load stays taken */
    if (tc_intercept_enabled() && !tc_front_forked_mid_load())
        tc_rebind_lookups(a, b);
}

/* dlsym and dlvsym for every handle but RTLD_NEXT (below). */
void *tc_dlsym_any(void *restrict handle, const char *restrict name);
void *tc_dlvsym_any(void *restrict handle, const char *restrict name,
                    const char *restrict version);

void *tc_dlsym_any(void *restrict handle, const char *restrict name)
{
    tc_find_real_dlsym();
    rebind();
    return tc_real_dlsym ? swap(tc_real_dlsym(handle, name), name, "dlsym") : NULL;
}

void *tc_dlvsym_any(void *restrict handle, const char *restrict name,
                    const char *restrict version)
{
    tc_find_real_dlsym();
    rebind();
    return tc_real_dlvsym ? swap(tc_real_dlvsym(handle, name, version), name, "dlvsym") : NULL;
}

/* RTLD_NEXT means the next definition after the object that called
 * dlsym, which the C library tells by its caller's return address. Called
 * from here, it would look after this library: a wrapper library that
 * asks for the next getpid would get its own, and recurse for ever. So
 * for RTLD_NEXT the entry points jump to the real functions, leaving the
 * caller's return address in place (no stand-in then: a library that
 * wraps the driver gets the driver's functions, and the program's calls
 * reach them through the wrapper, uncached). On other processors C entry
 * points serve every handle, RTLD_NEXT as it was. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n.type dlsym, @function\n"
        "dlsym:\n"
        "    cmpq $-1, %rdi\n"             /* RTLD_NEXT is (void *)-1 */
        "    jne tc_dlsym_any\n"
        "    movq tc_real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    je tc_dlsym_any\n"
        "    jmp *%rax\n"
        ".size dlsym, .-dlsym\n"
        ".globl dlvsym\n.type dlvsym, @function\n"
        "dlvsym:\n"
        "    cmpq $-1, %rdi\n"
        "    jne tc_dlvsym_any\n"
        "    movq tc_real_dlvsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    je tc_dlvsym_any\n"
        "    jmp *%rax\n"
        ".size dlvsym, .-dlvsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n.type dlsym, %function\n"
        "dlsym:\n"
        "    cmn x0, #1\n"
        "    b.ne tc_dlsym_any\n"
        "    adrp x16, tc_real_dlsym\n"
        "    ldr x16, [x16, :lo12:tc_real_dlsym]\n"
        "    cbz x16, tc_dlsym_any\n"
        "    br x16\n"
        ".size dlsym, .-dlsym\n"
        ".globl dlvsym\n.type dlvsym, %function\n"
        "dlvsym:\n"
        "    cmn x0, #1\n"
        "    b.ne tc_dlvsym_any\n"
        "    adrp x16, tc_real_dlvsym\n"
        "    ldr x16, [x16, :lo12:tc_real_dlvsym]\n"
        "    cbz x16, tc_dlvsym_any\n"
        "    br x16\n"
        ".size dlvsym, .-dlvsym\n");
#else
void *dlsym(void *restrict handle, const char *restrict name)
{
    return tc_dlsym_any(handle, name);
}

void *dlvsym(void *restrict handle, const char *restrict name, const char *restrict version)
{
    return tc_dlvsym_any(handle, name, version);
}
#endif
