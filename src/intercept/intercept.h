/* intercept: taskcache inside programs that hand PTX to the CUDA driver.
 * `taskcache run -- CMD` preloads libtaskcache_intercept.so: a small
 * library whose stand-ins take the driver functions' place on every path a
 * program reaches them by (interpose.c, rebind.c, libc_sym.c) and pass each
 * call, through front.c, to the builder or untouched to the real driver
 * (real.c). The builder, libtaskcache_jit.so beside it, carries taskcache
 * and decides what each call that may carry PTX does (jit.c); it is
 * loaded on the first such call, so that the many processes of a program
 * that never hands the driver PTX (a shell, make, a compiler) start as
 * fast as without taskcache. common.c is in both. Internal to the
 * interceptor. */
#ifndef TC_INTERCEPT_H
#define TC_INTERCEPT_H

#include <stddef.h>

#include "intercept/cuda_abi.h"

typedef CUresult (*tc_link_create_fn)(unsigned, CUjit_option *, void **, CUlinkState *);
typedef CUresult (*tc_link_add_data_fn)(CUlinkState, CUjitInputType, void *, size_t,
                                        const char *, unsigned, CUjit_option *, void **);
typedef CUresult (*tc_link_add_file_fn)(CUlinkState, CUjitInputType, const char *, unsigned,
                                        CUjit_option *, void **);

/* The real driver's functions. Where the driver has two versions of a
 * function under one name ([0] the original, [1] its _v2), both. */
typedef struct tc_real_driver {
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *, void **);
    CUresult (*cuLibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                                  CUlibraryOption *, void **, unsigned);
    tc_link_create_fn cuLinkCreate[2];
    tc_link_add_data_fn cuLinkAddData[2];
    tc_link_add_file_fn cuLinkAddFile[2];
    CUresult (*cuLinkComplete)(CUlinkState, void **, size_t *);
    CUresult (*cuLinkDestroy)(CUlinkState);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
} tc_real_driver;

/* The real driver (libcuda.so.1), loaded on first use. Never NULL: a
 * function the driver lacks is NULL, and calling through it is the
 * caller's check (the program could not have reached our stand-in for a
 * function the driver does not have). real.c finds it; the builder
 * calls the preloaded part's, handed over by tc_jit_bind. */
const tc_real_driver *tc_real(void);

/* real.c (the preloaded part): cuGetProcAddress ([0]; it has no status
 * argument, and is called through a cast to its own type) and
 * cuGetProcAddress_v2 ([1]) of the real driver, NULL where it lacks one. */
typedef CUresult (*tc_get_proc_fn)(const char *, void **, int, cuuint64_t, int *);
tc_get_proc_fn tc_real_get_proc(int v);

/* real.c: the C library's own dlsym and dlvsym (NULL when not found),
 * set by tc_find_real_dlsym, which runs before any program code does.
 * Variables, not functions: interpose.c's entry points jump through them. */
extern void *(*tc_real_dlsym)(void *, const char *);
extern void *(*tc_real_dlvsym)(void *, const char *, const char *);
void tc_find_real_dlsym(void);

/* jit.c (the builder): what the stand-ins do. `v` selects the version of a function
 * with two (0 original, 1 _v2). Each builds the PTX it is given with
 * taskcache where it can reproduce the driver's result exactly, and passes
 * the call to the real driver unchanged where it cannot. */
CUresult tc_jit_module_load(CUmodule *module, const void *image, unsigned n,
                            CUjit_option *options, void **values, int ex);
CUresult tc_jit_library_load(CUlibrary *library, const void *code, CUjit_option *options,
                             void **values, unsigned n, CUlibraryOption *lib_options,
                             void **lib_values, unsigned lib_n);
CUresult tc_jit_link_create(int v, unsigned n, CUjit_option *options, void **values,
                            CUlinkState *state);
CUresult tc_jit_link_add_data(int v, CUlinkState state, CUjitInputType type, void *data,
                              size_t size, const char *name, unsigned n, CUjit_option *options,
                              void **values);
CUresult tc_jit_link_add_file(int v, CUlinkState state, CUjitInputType type, const char *path,
                              unsigned n, CUjit_option *options, void **values);
CUresult tc_jit_link_complete(CUlinkState state, void **cubin, size_t *size);
CUresult tc_jit_link_destroy(CUlinkState state);

/* The builder's functions, as tc_jit_bind hands them to the preloaded part. */
typedef struct tc_jit_api {
    CUresult (*module_load)(CUmodule *, const void *, unsigned, CUjit_option *, void **, int);
    CUresult (*library_load)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                             CUlibraryOption *, void **, unsigned);
    CUresult (*link_create)(int, unsigned, CUjit_option *, void **, CUlinkState *);
    CUresult (*link_add_data)(int, CUlinkState, CUjitInputType, void *, size_t, const char *,
                              unsigned, CUjit_option *, void **);
    CUresult (*link_add_file)(int, CUlinkState, CUjitInputType, const char *, unsigned,
                              CUjit_option *, void **);
    CUresult (*link_complete)(CUlinkState, void **, size_t *);
    CUresult (*link_destroy)(CUlinkState);
} tc_jit_api;

/* The builder's one exported function: its functions, given the real
 * driver and the interception mode (build or measure: with interception
 * off the builder is never loaded, so its functions need not ask), or
 * NULL when it was built for another TC_JIT_ABI (a preloaded part and a
 * builder from different builds never mix) or is asked with the mode off. */
#define TC_JIT_ABI 2u
#define TC_JIT_BIND "tc_jit_bind"
#define TC_JIT_EXPORT __attribute__((visibility("default")))
TC_JIT_EXPORT const tc_jit_api *tc_jit_bind(unsigned abi, const tc_real_driver *(*real)(void),
                                            int mode);

/* front.c: the preloaded part's half of each stand-in. Without the
 * builder (interception off, or it cannot be loaded) every call goes to
 * the driver unchanged. */
CUresult tc_front_module_load(CUmodule *module, const void *image, unsigned n,
                              CUjit_option *options, void **values, int ex);
CUresult tc_front_library_load(CUlibrary *library, const void *code, CUjit_option *options,
                               void **values, unsigned n, CUlibraryOption *lib_options,
                               void **lib_values, unsigned lib_n);
CUresult tc_front_link_create(int v, unsigned n, CUjit_option *options, void **values,
                              CUlinkState *state);
CUresult tc_front_link_add_data(int v, CUlinkState state, CUjitInputType type, void *data,
                                size_t size, const char *name, unsigned n,
                                CUjit_option *options, void **values);
CUresult tc_front_link_add_file(int v, CUlinkState state, CUjitInputType type,
                                const char *path, unsigned n, CUjit_option *options,
                                void **values);
CUresult tc_front_link_complete(CUlinkState state, void **cubin, size_t *size);
CUresult tc_front_link_destroy(CUlinkState state);
/* 1 in a child forked while another thread was loading the builder */
int tc_front_forked_mid_load(void);

/* libc_sym.c: a function of the C library, found in its symbol table (the
 * real dlsym and dlvsym, which the interceptor replaces), or NULL. */
void *tc_libc_function(const char *name);

/* rebind.c: points the dlsym and dlvsym imports of libraries loaded since
 * the last call at ours (those loaded with RTLD_DEEPBIND bypass the
 * preloaded ones otherwise). Cheap when nothing was loaded. */
void tc_rebind_lookups(void *our_dlsym, void *our_dlvsym);

/* common.c. A line in $TASKCACHE_LOG (nothing when it is not set). */
void tc_intercept_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* TASKCACHE_INTERCEPT_TRACE=1: every lookup of a driver function and every
 * call of a stand-in is noted too (what a program reaches, and how). */
int tc_intercept_trace(void);

/* TASKCACHE_INTERCEPT, read once: off (every call goes straight to the
 * driver), build (taskcache builds), measure (the driver compiles, the log
 * says how long). set_mode: the builder takes the preloaded part's. */
enum { TC_INTERCEPT_OFF, TC_INTERCEPT_BUILD, TC_INTERCEPT_MEASURE };
int tc_intercept_mode(void);
void tc_intercept_set_mode(int mode);
int tc_intercept_enabled(void);
int tc_intercept_measure(void);
/* CUDA_DISABLE_PTX_JIT is set (nonzero) now: the driver compiles no PTX.
 * Read again on every load, as a program may set it after it started. */
int tc_intercept_driver_jit_disabled(void);

/* TASKCACHE_INTERCEPT_TRACE lines for the module, library and link calls,
 * from whichever half handles the call. */
void tc_trace_load(const char *call, size_t ptx_len);
void tc_trace_link_create(int v, unsigned n, CUresult rc);
void tc_trace_link_add_data(int v, CUjitInputType type, size_t size);

/* Length of the PTX text at image, or 0 when it holds something else the
 * driver takes (a cubin, a fatbin). */
size_t tc_ptx_length(const void *image);

#endif
