// templates.cu -- taskcache test corpus module.
// Covers: function and kernel templates with several explicit instantiations
// (8 kernels: int, float, double, unsigned), non-type template parameters,
// __launch_bounds__ (with and without the min-blocks argument) which become
// .maxntid / .minnctapersm in PTX, and a templated __noinline__ helper.
// All kernels have C++ mangled names.

template <typename T>
__device__ __noinline__ T tp_clamp(T v, T lo, T hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

template <typename T>
struct tp_plus { __device__ T operator()(T a, T b) const { return a + b; } };

template <typename T>
struct tp_max { __device__ T operator()(T a, T b) const { return a > b ? a : b; } };

template <typename T>
__global__ void __launch_bounds__(256) tp_saxpy(T a, const T *x, const T *y, T *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}

template <typename T, int R>
__global__ void __launch_bounds__(128, 4) tp_stencil(const T *in, T *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    T acc = T(0);
#pragma unroll
    for (int k = -R; k <= R; ++k) {
        int j = tp_clamp<int>(i + k, 0, n - 1);
        acc += in[j];
    }
    out[i] = acc;
}

// Sequential per-thread fold over a strided chunk (deterministic order).
template <typename T, typename Op>
__global__ void tp_fold(const T *in, T *out, int n, int chunk, T init)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int begin = t * chunk;
    if (begin >= n) return;
    Op op;
    T acc = init;
    for (int k = begin; k < begin + chunk && k < n; ++k) acc = op(acc, in[k]);
    out[t] = acc;
}

template <typename T>
__global__ void __launch_bounds__(64) tp_clamp_kernel(const T *in, T *out, int n, T lo, T hi)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tp_clamp<T>(in[i], lo, hi);
}

// explicit instantiations
template __global__ void tp_saxpy<float>(float, const float *, const float *, float *, int);
template __global__ void tp_saxpy<double>(double, const double *, const double *, double *, int);
template __global__ void tp_stencil<float, 1>(const float *, float *, int);
template __global__ void tp_stencil<float, 3>(const float *, float *, int);
template __global__ void tp_fold<int, tp_plus<int> >(const int *, int *, int, int, int);
template __global__ void tp_fold<float, tp_max<float> >(const float *, float *, int, int, float);
template __global__ void tp_fold<unsigned, tp_max<unsigned> >(const unsigned *, unsigned *, int, int, unsigned);
template __global__ void tp_clamp_kernel<float>(const float *, float *, int, float, float);
