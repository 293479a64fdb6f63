// Host-side compatibility shim for compiling llm.c against CUDA 13, where
// cudaMemAdvise takes a cudaMemLocation instead of a device ordinal. Only
// host code uses it; the device code nvcc emits is unaffected.
#pragma once
#include <cuda_runtime.h>
static inline cudaError_t cudaMemAdvise(const void *p, size_t n, cudaMemoryAdvise advice, int device)
{
    cudaMemLocation where;
    where.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    where.id = device < 0 ? 0 : device;
    return cudaMemAdvise(p, n, advice, where);
}
