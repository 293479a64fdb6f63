// globals_atomics.cu -- taskcache test corpus module.
// Covers: __device__ globals shared between kernels (one kernel writes a
// global array, another reads it), atomics on a shared global counter,
// `static __device__` variables (internal linkage), and a __device__ pointer
// initialised with the address of an element of another global (&table[2]).
// Kernels: mixed extern "C" and C++-mangled names.

#include <cstdint>

__device__ int g_table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
__device__ int *g_table_mid = &g_table[2];     // pointer into another global
__device__ unsigned int g_counter;              // shared atomic counter
__device__ unsigned long long g_sum;            // shared atomic sum
__device__ int g_stage[256];                    // written by one kernel, read by another
static __device__ int s_scale = 7;              // internal-linkage device variable
static __device__ unsigned int s_launches;      // internal-linkage counter

extern "C" __global__ void ga_reset(void)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        g_counter = 0;
        g_sum = 0;
        s_launches = 0;
    }
}

// Writes g_stage from the input; the next kernel consumes it.
extern "C" __global__ void ga_produce(const int *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i < 256)
        g_stage[i] = in[i] * s_scale + g_table[i & 15];
    if (threadIdx.x == 0)
        atomicAdd(&s_launches, 1u);
}

// Reads g_stage written by ga_produce.
extern "C" __global__ void ga_consume(int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i < 256)
        out[i] = g_stage[i] - g_table_mid[i & 7];
}

// Counts the elements above a threshold; the final count is deterministic.
__global__ void ga_count_above(const int *in, int n, int threshold)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && in[i] > threshold)
        atomicAdd(&g_counter, 1u);
}

// Sums values into a 64-bit global; integer addition is order-independent.
__global__ void ga_sum(const int *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        atomicAdd(&g_sum, (unsigned long long)(unsigned int)in[i]);
}

// Copies the shared globals out to host-visible memory.
__global__ void ga_report(unsigned long long *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = g_counter;
        out[1] = g_sum;
        out[2] = s_launches;
        out[3] = (unsigned long long)(g_table_mid - g_table);
        out[4] = (unsigned long long)(unsigned int)*g_table_mid;
    }
}

// Atomic max/or on disjoint table entries (max on [0,8), or on [10]):
// the final values are independent of execution order.
extern "C" __global__ void ga_table_update(const int *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        int v = in[i];
        atomicMax(&g_table[i & 7], v);
        atomicOr((unsigned int *)&g_table_mid[8], (unsigned int)(v & 0x100));
    }
}
