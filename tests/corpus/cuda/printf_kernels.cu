// printf_kernels.cu -- taskcache test corpus module.
// Covers: device printf (vprintf) called from several kernels and from a
// shared __noinline__ helper, with different argument lists (ints, floats,
// strings, pointers); format strings become .global .b8 string constants.
// Output is limited to a few threads so it stays readable and bounded.

#include <cstdio>

__device__ __noinline__ void pk_log_value(const char *tag, int idx, float v)
{
    printf("[%s] idx=%d value=%f\n", tag, idx, v);
}

extern "C" __global__ void pk_hello(int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        printf("hello from pk_hello, n=%d\n", n);
}

extern "C" __global__ void pk_scale(const float *in, float *out, int n, float s)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * s;
        if (i < 4) pk_log_value("scale", i, out[i]);
    }
}

__global__ void pk_stats(const int *in, int n)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    long long sum = 0;
    int mn = 0x7fffffff, mx = -0x7fffffff - 1;
    for (int i = 0; i < n; ++i) {
        sum += in[i];
        mn = min(mn, in[i]);
        mx = max(mx, in[i]);
    }
    printf("stats: n=%d sum=%lld min=%d max=%d\n", n, sum, mn, mx);
}

__global__ void pk_mixed(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] + 1.0f;
        if (i == 0) {
            printf("pk_mixed: ptr=%p first=%g char=%c str=%s hex=%x\n",
                   (const void *)in, (double)in[0], 'Z', "done", 0xbeefu);
            pk_log_value("mixed", i, out[i]);
        }
    }
}
