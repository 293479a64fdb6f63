// helpers.cu -- taskcache test corpus module.
// Covers: __device__ __noinline__ helper functions shared by many kernels,
// helpers calling helpers (a call chain three deep), direct recursion
// (recursive gcd, recursive digit sum) and mutual recursion (is_even/is_odd),
// plus an inlined helper for contrast.

__device__ __noinline__ unsigned int hl_mix32(unsigned int x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// helper calling helper
__device__ __noinline__ unsigned int hl_hash2(unsigned int a, unsigned int b)
{
    return hl_mix32(a ^ hl_mix32(b + 0x9e3779b9u));
}

// helper calling helper calling helper
__device__ __noinline__ unsigned int hl_hash3(unsigned int a, unsigned int b, unsigned int c)
{
    return hl_hash2(hl_hash2(a, b), c);
}

// direct recursion
__device__ __noinline__ int hl_gcd(int a, int b)
{
    return b == 0 ? a : hl_gcd(b, a % b);
}

__device__ __noinline__ int hl_digit_sum(unsigned int v)
{
    return v < 10u ? (int)v : (int)(v % 10u) + hl_digit_sum(v / 10u);
}

// mutual recursion (bounded depth: argument reduced mod 64 by callers)
__device__ __noinline__ bool hl_is_odd(int v);
__device__ __noinline__ bool hl_is_even(int v) { return v == 0 ? true : hl_is_odd(v - 1); }
__device__ __noinline__ bool hl_is_odd(int v) { return v == 0 ? false : hl_is_even(v - 1); }

__device__ __forceinline__ float hl_lerp(float a, float b, float t) { return fmaf(t, b - a, a); }

extern "C" __global__ void hl_hash_kernel(const unsigned int *in, unsigned int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = hl_mix32(in[i]);
}

extern "C" __global__ void hl_hash_pairs(const unsigned int *in, unsigned int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i + 1 < n) out[i] = hl_hash2(in[i], in[i + 1]);
    else if (i < n) out[i] = hl_hash3(in[i], 1u, 2u);
}

__global__ void hl_gcd_kernel(const int *a, const int *b, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = hl_gcd(abs(a[i]), abs(b[i]));
}

__global__ void hl_digits(const unsigned int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = hl_digit_sum(in[i]) + (hl_is_even(in[i] & 63u) ? 1000 : 0);
}

// uses every helper
__global__ void hl_all(const unsigned int *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int h = hl_hash3(in[i], (unsigned int)i, 7u);
    int g = hl_gcd((int)(h & 0xffff), (int)(in[i] & 0xffff) + 1);
    int d = hl_digit_sum(h);
    bool odd = hl_is_odd(d & 31);
    out[i] = hl_lerp((float)g, (float)d, odd ? 0.25f : 0.75f);
}
