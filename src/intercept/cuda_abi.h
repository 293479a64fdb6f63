/* cuda_abi: the part of the CUDA driver API's binary interface that the
 * interceptor handles, declared here so that it builds without the
 * toolkit's cuda.h (whose macros rename the very functions it must define
 * under their exact names: cuLinkAddData and cuLinkAddData_v2 are two
 * symbols). The values are the driver's own, fixed by its ABI. */
#ifndef TC_INTERCEPT_CUDA_ABI_H
#define TC_INTERCEPT_CUDA_ABI_H

#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUmod_st *CUmodule;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUlib_st *CUlibrary;
typedef int CUjit_option;
typedef int CUjitInputType;
typedef int CUlibraryOption;
typedef uint64_t cuuint64_t;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_INVALID_HANDLE = 400
};

/* CUjit_option */
enum {
    CU_JIT_MAX_REGISTERS = 0,
    CU_JIT_THREADS_PER_BLOCK = 1,
    CU_JIT_WALL_TIME = 2,
    CU_JIT_INFO_LOG_BUFFER = 3,
    CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
    CU_JIT_ERROR_LOG_BUFFER = 5,
    CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
    CU_JIT_OPTIMIZATION_LEVEL = 7,
    CU_JIT_TARGET_FROM_CUCONTEXT = 8,
    CU_JIT_TARGET = 9,
    CU_JIT_FALLBACK_STRATEGY = 10,
    CU_JIT_GENERATE_DEBUG_INFO = 11,
    CU_JIT_LOG_VERBOSE = 12,
    CU_JIT_GENERATE_LINE_INFO = 13,
    CU_JIT_CACHE_MODE = 14,
    CU_JIT_NEW_SM3X_OPT = 15,
    CU_JIT_FAST_COMPILE = 16,
    CU_JIT_LTO = 20,
    CU_JIT_FTZ = 21,
    CU_JIT_PREC_DIV = 22,
    CU_JIT_PREC_SQRT = 23,
    CU_JIT_FMA = 24,
    CU_JIT_SPLIT_COMPILE = 34
};

/* CUjit_target: the compute capability times ten, plus this base for the
 * architecture-specific ("a") targets and twice it for the family ("f")
 * ones. */
enum { CU_COMPUTE_ACCELERATED_TARGET_BASE = 0x10000, CU_COMPUTE_FAMILY_TARGET_BASE = 0x20000 };

/* CUjit_cacheMode */
enum { CU_JIT_CACHE_OPTION_NONE = 0, CU_JIT_CACHE_OPTION_CG = 1, CU_JIT_CACHE_OPTION_CA = 2 };

/* CUjit_fallback */
enum { CU_PREFER_PTX = 0, CU_PREFER_BINARY = 1 };

/* CUjitInputType */
enum {
    CU_JIT_INPUT_CUBIN = 0,
    CU_JIT_INPUT_PTX = 1,
    CU_JIT_INPUT_FATBINARY = 2,
    CU_JIT_INPUT_OBJECT = 3,
    CU_JIT_INPUT_LIBRARY = 4
};

/* CUlibraryOption: the driver may keep referring to the caller's code */
enum { CU_LIBRARY_BINARY_IS_PRESERVED = 1 };

/* CUdevice_attribute */
enum {
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
};

#endif
