// func_pointers.cu -- taskcache test corpus module.
// Covers: device function pointers: a __device__ array of function pointers
// initialised with function addresses, a function pointer passed as a kernel
// argument and as a helper argument, comparison of function pointers, and a
// __device__ pointer variable initialised with a function address.

typedef float (*unary_fn)(float);
typedef int (*binop_fn)(int, int);

__device__ __noinline__ float fp_square(float x) { return x * x; }
__device__ __noinline__ float fp_negate(float x) { return -x; }
__device__ __noinline__ float fp_halve(float x)  { return x * 0.5f; }
__device__ __noinline__ float fp_inc(float x)    { return x + 1.0f; }

__device__ __noinline__ int fp_add(int a, int b) { return a + b; }
__device__ __noinline__ int fp_sub(int a, int b) { return a - b; }
__device__ __noinline__ int fp_xor(int a, int b) { return a ^ b; }
__device__ __noinline__ int fp_min(int a, int b) { return a < b ? a : b; }

// table of function addresses in a __device__ array
__device__ unary_fn fp_unary_table[4] = {fp_square, fp_negate, fp_halve, fp_inc};
__device__ binop_fn fp_binop_table[4] = {fp_add, fp_sub, fp_xor, fp_min};
// single pointer initialised with a function address
__device__ unary_fn fp_default = fp_halve;

// helper that receives a function pointer as an argument
__device__ __noinline__ float fp_apply_twice(unary_fn f, float x) { return f(f(x)); }

extern "C" __global__ void fp_table_dispatch(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fp_unary_table[i & 3](in[i]);
}

extern "C" __global__ void fp_binop_dispatch(const int *a, const int *b, int *out, int n, int op)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fp_binop_table[op & 3](a[i], b[i]);
}

// Function pointer passed as a kernel argument (host obtains it with
// cudaMemcpyFromSymbol on fp_default or one of the tables).
__global__ void fp_apply_arg(unary_fn f, const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fp_apply_twice(f, in[i]);
}

// Compares function pointers: with the default, with a table entry, and
// with a function's address taken directly.
__global__ void fp_compare(unary_fn f, int *out)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    out[0] = (f == fp_default);
    out[1] = (f == fp_unary_table[2]);
    out[2] = (f == &fp_square);
    out[3] = (fp_unary_table[0] != fp_unary_table[1]);
    int idx = -1;
    for (int k = 0; k < 4; ++k)
        if (fp_unary_table[k] == f) idx = k;
    out[4] = idx;
}

extern "C" __global__ void fp_use_default(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unary_fn f = fp_default;
        out[i] = (f == fp_halve) ? fp_apply_twice(f, in[i]) : f(in[i]);
    }
}
