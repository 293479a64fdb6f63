// math_kernels.cu -- taskcache test corpus module.
// Covers: integer math (mul.hi, bit reversal, popcount, clz, funnel shifts,
// division/modulo by variables, 64-bit arithmetic) and float math (fmaf,
// sqrt, rsqrt, exp/log/sin/cos, double precision, conversions, min/max,
// saturation). Built without --use_fast_math, so results are deterministic
// for a given compiled binary.

#include <cuda_fp16.h>

extern "C" __global__ void mk_int_ops(const unsigned int *in, unsigned int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int v = in[i];
    unsigned int r = __brev(v) ^ (unsigned int)__popc(v) ^ ((unsigned int)__clz(v | 1u) << 8);
    r += __umulhi(v, 0x9e3779b9u);
    r ^= __funnelshift_l(v, r, 13);
    out[i] = r;
}

extern "C" __global__ void mk_divmod(const int *a, const int *b, int *q, int *r, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int d = b[i] == 0 ? 1 : b[i];
    q[i] = a[i] / d;
    r[i] = a[i] % d;
}

extern "C" __global__ void mk_int64(const long long *in, long long *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    long long x = in[i];
    unsigned long long u = (unsigned long long)x * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = (long long)(u >> 17) ^ (x / 7) ^ __mul64hi(x, 0x5851f42d4c957f2dll);
}

__global__ void mk_float_ops(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    float a = fabsf(x) + 1.0f;
    float r = fmaf(sqrtf(a), rsqrtf(a), logf(a));
    r += expf(-a) + sinf(x) * cosf(x);
    r = fminf(fmaxf(r, -100.0f), 100.0f);
    out[i] = r + __saturatef(x);
}

__global__ void mk_double_ops(const double *in, double *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = in[i];
    double r = fma(x, x, 1.0);
    r = sqrt(r) + log1p(fabs(x)) + exp2(-fabs(x));
    out[i] = r / (1.0 + fabs(x));
}

__global__ void mk_convert(const float *in, int *oi, unsigned short *oh, double *od, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = in[i];
    oi[i] = __float2int_rn(x * 3.5f);
    oh[i] = __half_as_ushort(__float2half_rn(x));
    od[i] = (double)x * 0.1;
}
