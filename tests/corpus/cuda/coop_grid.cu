// coop_grid.cu -- taskcache test corpus module.
// Covers: cooperative groups: grid-wide sync (grid.sync()) in a kernel that
// must be launched with cudaLaunchCooperativeKernel, thread_block and
// tiled_partition groups, and a __device__ scratch global used between the
// grid-sync phases. Also exercised by the -rdc=true build.

#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ long long cg_partials[1024];

// Phase 1: per-block sums into cg_partials; grid sync; phase 2: block 0 folds
// the partials in a fixed order (deterministic).
extern "C" __global__ void cg_grid_sum(const int *in, long long *out, int n)
{
    cg::grid_group grid = cg::this_grid();
    cg::thread_block block = cg::this_thread_block();
    __shared__ long long acc[256];
    long long local = 0;
    for (int i = grid.thread_rank(); i < n; i += grid.size())
        local += in[i];
    acc[block.thread_rank()] = local;
    block.sync();
    for (int s = block.size() / 2; s > 0; s >>= 1) {
        if (block.thread_rank() < s) acc[block.thread_rank()] += acc[block.thread_rank() + s];
        block.sync();
    }
    if (block.thread_rank() == 0 && blockIdx.x < 1024) cg_partials[blockIdx.x] = acc[0];
    grid.sync();
    if (grid.thread_rank() == 0) {
        long long total = 0;
        for (unsigned b = 0; b < gridDim.x && b < 1024; ++b) total += cg_partials[b];
        out[0] = total;
    }
}

// Tiled partitions: reduce within tiles of 8 threads.
__global__ void cg_tile_reduce(const int *in, int *out, int n)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<8> tile = cg::tiled_partition<8>(block);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = (i < n) ? in[i] : 0;
    for (int off = tile.size() / 2; off > 0; off >>= 1)
        v += tile.shfl_down(v, off);
    if (tile.thread_rank() == 0) out[i / 8] = v;
}

// Grid-stride normalisation with two grid syncs.
__global__ void cg_normalize(float *data, float *scratch, int n)
{
    cg::grid_group grid = cg::this_grid();
    for (int i = grid.thread_rank(); i < n; i += grid.size())
        data[i] = data[i] * data[i];
    grid.sync();
    if (grid.thread_rank() == 0) {
        float m = 0.0f;
        for (int i = 0; i < n; ++i) m = fmaxf(m, data[i]);
        scratch[0] = m > 0.0f ? m : 1.0f;
    }
    grid.sync();
    for (int i = grid.thread_rank(); i < n; i += grid.size())
        data[i] = data[i] / scratch[0];
}
