// warp_ops.cu -- taskcache test corpus module.
// Covers: warp intrinsics __shfl_sync, __shfl_xor_sync, __shfl_up_sync,
// __shfl_down_sync, __ballot_sync, __any_sync/__all_sync, __activemask,
// __match_any_sync, __reduce_add_sync (sm_80+), and a warp-level reduction
// helper shared by two kernels. Launch with blockDim.x a multiple of 32.

#define FULL_MASK 0xffffffffu

__device__ __noinline__ int wo_warp_sum(int v)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, off);
    return v;
}

extern "C" __global__ void wo_warp_reduce(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = (i < n) ? in[i] : 0;
    int s = wo_warp_sum(v);
    if ((threadIdx.x & 31) == 0) out[i / 32] = s;
}

extern "C" __global__ void wo_ballot(const int *in, unsigned int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool pred = (i < n) && (in[i] > 0);
    unsigned int b = __ballot_sync(FULL_MASK, pred);
    int any = __any_sync(FULL_MASK, pred);
    int all = __all_sync(FULL_MASK, pred);
    if ((threadIdx.x & 31) == 0) {
        out[2 * (i / 32)] = b;
        out[2 * (i / 32) + 1] = (unsigned int)any | ((unsigned int)all << 1);
    }
}

// Inclusive warp prefix sum with __shfl_up_sync.
extern "C" __global__ void wo_scan(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int v = (i < n) ? in[i] : 0;
    for (int off = 1; off < 32; off <<= 1) {
        int t = __shfl_up_sync(FULL_MASK, v, off);
        if (lane >= off) v += t;
    }
    if (i < n) out[i] = v;
}

// Broadcast lane 0 and rotate with __shfl_down_sync.
__global__ void wo_broadcast_rotate(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = (i < n) ? in[i] : 0.0f;
    float first = __shfl_sync(FULL_MASK, v, 0);
    float next = __shfl_down_sync(FULL_MASK, v, 1);
    if (i < n) out[i] = v - first + next;
}

__global__ void wo_match_reduce(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = (i < n) ? (in[i] & 7) : -1;
    unsigned int peers = __match_any_sync(FULL_MASK, v);
    unsigned int active = __activemask();
    int total = __reduce_add_sync(FULL_MASK, (unsigned int)(v + 1));
    int ws = wo_warp_sum(v);
    if (i < n) out[i] = __popc(peers) * 1000 + total + ws + (active == FULL_MASK ? 0 : 1);
}
