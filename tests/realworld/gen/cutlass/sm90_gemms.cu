// sm90_gemms.cu: Hopper GEMM kernels of CUTLASS 3.x (NVIDIA/cutlass,
// BSD-3-Clause), instantiated for taskcache's real-world corpus. Written for
// this project; only CUTLASS's public collective builders are used.
//
// Each configuration below is one `cutlass::device_kernel<GemmKernel>`; the
// host function at the end takes every kernel's address so that `nvcc -ptx`
// emits them all into one module. Together they exercise what CUTLASS's
// Hopper kernels put into PTX and the rest of the corpus lacks: thread-block
// clusters (barrier.cluster, mapa, multicast TMA loads; the cluster's shape
// is given at launch, so no .reqnctapercluster),
// warp-specialized producer/consumer kernels that move registers between
// warp groups (setmaxnreg), TMA descriptors passed by value as .param
// structs (cp.async.bulk.tensor, prefetch.tensormap), mbarrier pipelines,
// wgmma on f16, bf16, tf32 and e4m3, and the stream-K tile scheduler.
//
//   nvcc -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -ptx \
//        -I CUTLASS/include sm90_gemms.cu -o cutlass_sm90_gemms.ptx

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

using namespace cute;

// One GEMM D = alpha * A B + beta * C, A row-major (K contiguous), B
// column-major (K contiguous), C and D column-major, 16-byte accesses.
template <class Element, class Accumulator, class Out, class Tile, class Cluster,
          class MainloopSchedule, class EpilogueSchedule,
          class Scheduler = cutlass::gemm::PersistentScheduler>
struct Gemm {
    static constexpr int kAlignIn = 128 / cutlass::sizeof_bits<Element>::value;
    static constexpr int kAlignOut = 128 / cutlass::sizeof_bits<Out>::value;

    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
        cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, Accumulator,
        Out, cutlass::layout::ColumnMajor, kAlignOut,
        Out, cutlass::layout::ColumnMajor, kAlignOut, EpilogueSchedule>::CollectiveOp;

    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
        Element, cutlass::layout::RowMajor, kAlignIn,
        Element, cutlass::layout::ColumnMajor, kAlignIn, Accumulator, Tile, Cluster,
        cutlass::gemm::collective::StageCountAutoCarveout<
            static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
        MainloopSchedule>::CollectiveOp;

    using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop,
                                                        Epilogue, Scheduler>;
};

namespace gemm = cutlass::gemm;
namespace epi = cutlass::epilogue;

// f16 in, f32 accumulate, f16 out; two CTAs a cluster along M; the
// cooperative schedule (two consumer warp groups share a tile)
using F16Cooperative = Gemm<cutlass::half_t, float, cutlass::half_t, Shape<_128, _128, _64>,
                            Shape<_2, _1, _1>, gemm::KernelTmaWarpSpecializedCooperative,
                            epi::TmaWarpSpecializedCooperative>;
// bf16, the ping-pong schedule (consumer warp groups alternate tiles), a
// cluster along N
using Bf16Pingpong = Gemm<cutlass::bfloat16_t, float, cutlass::bfloat16_t, Shape<_64, _128, _64>,
                          Shape<_1, _2, _1>, gemm::KernelTmaWarpSpecializedPingpong,
                          epi::TmaWarpSpecialized>;
// tf32 (f32 data), no cluster, the basic warp-specialized schedule and an
// epilogue that writes from registers
using Tf32Basic = Gemm<float, float, float, Shape<_128, _64, _32>, Shape<_1, _1, _1>,
                       gemm::KernelTmaWarpSpecialized, epi::NoSmemWarpSpecialized>;
// e4m3 with fast accumulation, f32 out
using Fp8FastAccum = Gemm<cutlass::float_e4m3_t, float, float, Shape<_128, _128, _128>,
                          Shape<_1, _2, _1>, gemm::KernelTmaWarpSpecializedCooperativeFP8FastAccum,
                          epi::TmaWarpSpecializedCooperative>;
// f16 with the stream-K tile scheduler (split tiles reduced through a workspace)
using F16StreamK = Gemm<cutlass::half_t, float, cutlass::half_t, Shape<_128, _128, _64>,
                        Shape<_1, _1, _1>, gemm::KernelTmaWarpSpecializedCooperative,
                        epi::TmaWarpSpecializedCooperative, gemm::StreamKScheduler>;

template <class G>
const void *kernel_of()
{
    return reinterpret_cast<const void *>(&cutlass::device_kernel<typename G::Kernel>);
}

const void *const sm90_gemm_kernels[] = {
    kernel_of<F16Cooperative>(), kernel_of<Bf16Pingpong>(), kernel_of<Tf32Basic>(),
    kernel_of<Fp8FastAccum>(),   kernel_of<F16StreamK>(),
};
