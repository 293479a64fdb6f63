// shared_mem.cu -- taskcache test corpus module.
// Covers: static __shared__ arrays inside kernels, extern __shared__ dynamic
// shared memory (two kernels share the same extern array name), a block-level
// tree reduction, a tiled transpose with a padded static tile, and a helper
// that takes a pointer to shared memory.
// Launch with blockDim.x == 256 (reductions) and 16x16 (transpose).

#define SM_BLOCK 256
#define SM_TILE 16

extern __shared__ float sm_dyn[];    // dynamic shared memory, size set at launch

__device__ __noinline__ float sm_block_sum(float *buf)   // buf is in shared memory
{
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    return buf[0];
}

extern "C" __global__ void sm_reduce_static(const float *in, float *out, int n)
{
    __shared__ float buf[SM_BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = (i < n) ? in[i] : 0.0f;
    __syncthreads();
    float s = sm_block_sum(buf);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

extern "C" __global__ void sm_reduce_dynamic(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    sm_dyn[threadIdx.x] = (i < n) ? in[i] * in[i] : 0.0f;
    __syncthreads();
    float s = sm_block_sum(sm_dyn);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// Transpose of a rows x cols matrix through a padded static tile.
__global__ void sm_transpose(const float *in, float *out, int rows, int cols)
{
    __shared__ float tile[SM_TILE][SM_TILE + 1];
    int x = blockIdx.x * SM_TILE + threadIdx.x;
    int y = blockIdx.y * SM_TILE + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    int tx = blockIdx.y * SM_TILE + threadIdx.x;
    int ty = blockIdx.x * SM_TILE + threadIdx.y;
    if (tx < rows && ty < cols) out[ty * rows + tx] = tile[threadIdx.x][threadIdx.y];
}

// Dynamic shared memory split into an int histogram and a float staging area.
// Dynamic size: 64 * sizeof(int) + blockDim.x * sizeof(float).
extern "C" __global__ void sm_histogram(const unsigned int *in, unsigned int *hist, int n)
{
    int *bins = reinterpret_cast<int *>(sm_dyn);
    float *stage = sm_dyn + 64;
    for (int b = threadIdx.x; b < 64; b += blockDim.x) bins[b] = 0;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = (i < n) ? (float)(in[i] & 63u) : -1.0f;
    if (i < n) atomicAdd(&bins[in[i] & 63u], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 64; b += blockDim.x)
        atomicAdd(&hist[b], (unsigned int)bins[b]);
}

// Inclusive scan (Hillis-Steele) in a static shared array, per block.
__global__ void sm_scan(const int *in, int *out, int n)
{
    __shared__ int a[SM_BLOCK];
    __shared__ int b[SM_BLOCK];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    a[threadIdx.x] = (i < n) ? in[i] : 0;
    __syncthreads();
    int *src = a, *dst = b;
    for (int off = 1; off < blockDim.x; off <<= 1) {
        int v = src[threadIdx.x];
        if (threadIdx.x >= off) v += src[threadIdx.x - off];
        dst[threadIdx.x] = v;
        __syncthreads();
        int *t = src; src = dst; dst = t;
    }
    if (i < n) out[i] = src[threadIdx.x];
}
