// fnptr_table.cu -- taskcache test corpus module.
// Covers the shape that broke whole-program units: a __device__ table holds
// the address of a __noinline__ function that other kernels call directly,
// and one kernel calls through the table. With --unit-cost 1 every kernel
// is a unit of its own, so the indirect caller's unit has no function of
// the module data to call directly and looks whole-program-ready; it must
// stay relocatable. Also constants read by a __noinline__ helper, globals
// updated with integer atomics (their order does not change the result),
// and block-shared memory.

__device__ float ft_gain[256];
__device__ unsigned long long ft_weight;
__device__ int ft_positive;
__constant__ float ft_coef[32];

__device__ __noinline__ float ft_smooth(float v, int steps)
{
    for (int i = 0; i < steps; i++)
        v = v * 0.875f + ft_coef[(i * 7) & 31];
    return v;
}

__device__ __noinline__ float ft_clamp(float x, float lo, float hi) { return fminf(hi, fmaxf(lo, x)); }
__device__ __noinline__ float ft_fold(float x, float lo, float hi) { return x > hi ? 2.f * hi - x : x < lo ? 2.f * lo - x : x; }

typedef float (*ft_range_fn)(float, float, float);
__device__ ft_range_fn ft_ops[2] = {ft_clamp, ft_fold};

extern "C" __global__ void ft_through_table(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = ft_ops[i & 1](a[i], -0.5f, 0.5f);
}

extern "C" __global__ void ft_direct(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = ft_clamp(a[i], -0.25f, 0.25f);
}

extern "C" __global__ void ft_constants(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = ft_smooth(a[i], 9);
}

extern "C" __global__ void ft_globals(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        a[i] *= ft_gain[i & 255];
        if (a[i] > 0.f)
            atomicAdd(&ft_positive, 1);
        atomicAdd(&ft_weight, (unsigned long long)(fabsf(a[i]) * 1000.f));
    }
}

extern "C" __global__ void ft_tile(float *a, int n)
{
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x & 255] = i < n ? a[i] : 0.f;
    __syncthreads();
    if (i < n)
        a[i] += tile[(threadIdx.x + 1) & 255];
}
