// dependencies.cu -- taskcache test corpus module.
// Covers the dependency shapes a per-kernel slicer must follow:
// a kernel with no parameters, a self-contained kernel with no dependencies,
// a diamond of __noinline__ helpers (top -> left/right -> bottom), a global
// reached only through a helper, a chain of initializers (pointer to pointer
// to array element), a global referenced only from another global's
// initializer, and a helper that no kernel uses.

__device__ int dp_data[8] = {10, 20, 30, 40, 50, 60, 70, 80};
__device__ int *dp_ptr = &dp_data[3];          // initializer -> dp_data
__device__ int **dp_ptr_ptr = &dp_ptr;         // initializer -> dp_ptr -> dp_data
__device__ int dp_hidden;                       // only reached via dp_bottom()
__device__ unsigned int dp_ticks;              // written by the parameterless kernel

__device__ __noinline__ int dp_bottom(int x) { return x * 3 + dp_hidden; }
__device__ __noinline__ int dp_left(int x)   { return dp_bottom(x + 1) ^ 0x55; }
__device__ __noinline__ int dp_right(int x)  { return dp_bottom(x - 1) + **dp_ptr_ptr; }
__device__ __noinline__ int dp_top(int x)    { return dp_left(x) + dp_right(x); }

// Never called from a kernel (dropped from whole-program PTX, kept with -rdc).
__device__ __noinline__ int dp_unused(int x) { return x * 1234567; }

// No parameters at all.
extern "C" __global__ void dp_tick()
{
    if (threadIdx.x == 0) atomicAdd(&dp_ticks, 1u);
}

// No dependencies on anything else in the module.
extern "C" __global__ void dp_standalone(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (in[i] << 1) - (in[i] >> 2);
}

// Diamond through the helpers; reaches dp_hidden, dp_ptr_ptr, dp_ptr, dp_data.
extern "C" __global__ void dp_diamond(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = dp_top(in[i]);
}

// Uses only the right arm of the diamond.
__global__ void dp_right_only(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = dp_right(in[i]);
}

// Uses the global directly and via the pointer chain.
__global__ void dp_chain(int *out)
{
    if (blockIdx.x == 0 && threadIdx.x < 8)
        out[threadIdx.x] = dp_data[threadIdx.x] + (*dp_ptr_ptr)[threadIdx.x & 3] + (int)dp_ticks;
}

__global__ void dp_set_hidden(int v)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) dp_hidden = v;
}
