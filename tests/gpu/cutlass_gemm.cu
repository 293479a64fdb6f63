// cutlass_gemm.cu: CUTLASS's Hopper GEMMs run for real, built by nvcc
// alone and by nvcc through `taskcache shims` (tests/gpu/cutlass_check.py
// builds both and compares them).
//
// The kernels are the corpus's (tests/realworld/gen/cutlass/sm90_gemms.cu,
// included below): warp-specialized TMA pipelines, clusters, setmaxnreg,
// stream-K. Each configuration multiplies two problems:
//
//   exact   entries in {-1, 0, 1}, K small enough that every sum is an
//           integer the output type holds: D must equal a naive reference
//           kernel's result bit for bit;
//   random  entries uniform in [-1, 1): D is hashed (FNV-1a of its bytes)
//           and compared with the reference within the type's tolerance;
//           the two builds must give the same hash (same machine code,
//           same rounding).
//
// M and N are not multiples of the tiles, so TMA's bounds handling and the
// epilogue's predication run too. With `--time N`, each configuration then
// multiplies 4096 x 4096 x 4096 N times after two warm-up runs and reports
// the median time (CUDA events around each run). One JSON line a
// configuration and problem on stdout; exit status 0 when every GEMM ran
// and matched its reference, 1 otherwise.
//
//   nvcc -arch=sm_90a -std=c++17 --expt-relaxed-constexpr -I CUTLASS/include \
//        -I CUTLASS/tools/util/include -I tests/realworld/gen/cutlass \
//        tests/gpu/cutlass_gemm.cu -o cutlass_gemm

#include "sm90_gemms.cu"

#include <cutlass/util/packed_stride.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <vector>

#define CHECK_CUDA(x)                                                                        \
    do {                                                                                     \
        cudaError_t e_ = (x);                                                                \
        if (e_ != cudaSuccess) {                                                             \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                  \
                         cudaGetErrorString(e_));                                            \
            std::exit(1);                                                                    \
        }                                                                                    \
    } while (0)

// D[m, n] = alpha * sum_k A[m, k] B[n, k] + beta * C[m, n] in float, for A
// row-major M x K, B column-major K x N (both K-contiguous), C column-major.
template <class In, class Out>
__global__ void reference_gemm(int M, int N, int K, float alpha, const In *A, const In *B,
                               float beta, const Out *C, float *D)
{
    int m = blockIdx.x * blockDim.x + threadIdx.x, n = blockIdx.y;
    if (m >= M)
        return;
    float acc = 0.f;
    for (int k = 0; k < K; k++)
        acc += float(A[(size_t)m * K + k]) * float(B[(size_t)n * K + k]);
    D[(size_t)n * M + m] = alpha * acc + beta * float(C[(size_t)n * M + m]);
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *b = static_cast<const unsigned char *>(p);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// A deterministic generator: the same inputs in both builds' processes.
static uint64_t next_random(uint64_t &s)
{
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 11;
}

template <class T>
static std::vector<T> inputs(size_t n, bool exact, uint64_t seed)
{
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random(seed);
        float x = exact ? float(int(r % 3) - 1) : float(r % (1u << 20)) / (1u << 19) - 1.f;
        v[i] = T(x);
    }
    return v;
}

template <class T>
static T *to_device(const std::vector<T> &v)
{
    T *p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, v.size() * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

// Configuration G set up for D = alpha * A B + beta * C on device buffers:
// CUTLASS's adapter, initialized, and its workspace; status says what went
// wrong, if anything ("ok" while nothing has).
template <class G>
struct Prepared {
    using Kernel = typename G::Kernel;
    using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
    using In = typename Adapter::ElementA;
    using Out = typename Adapter::ElementC;
    Adapter gemm;
    void *workspace = nullptr;
    const char *status = "ok";

    Prepared(int M, int N, int K, const In *A, const In *B, float alpha, float beta, const Out *C,
             Out *D)
    {
        cutlass::KernelHardwareInfo hw;
        hw.device_id = 0;
        hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
        typename Adapter::Arguments args{
            cutlass::gemm::GemmUniversalMode::kGemm,
            {M, N, K, 1},
            {A, cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(M, K, 1)),
             B, cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(N, K, 1))},
            {{alpha, beta},
             C, cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, cute::make_shape(M, N, 1)),
             D, cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(M, N, 1))},
            hw};
        size_t size = Adapter::get_workspace_size(args);
        if (size)
            CHECK_CUDA(cudaMalloc(&workspace, size));
        if (gemm.can_implement(args) != cutlass::Status::kSuccess)
            status = "cannot implement";
        else if (gemm.initialize(args, workspace) != cutlass::Status::kSuccess)
            status = "initialize failed";
    }
    ~Prepared() { cudaFree(workspace); }
    bool ok() const { return !std::strcmp(status, "ok"); }
    void run()
    {
        if (ok() && gemm.run() != cutlass::Status::kSuccess)
            status = "run failed";
    }
};

// One configuration on one problem; prints its line, returns 0 when it matched.
template <class G>
static int run(const char *name, bool exact, int M, int N, int K, double tolerance)
{
    using In = typename Prepared<G>::In;
    using Out = typename Prepared<G>::Out;
    const float alpha = 1.f, beta = exact ? 1.f : 0.5f;
    uint64_t seed = 0x5eed0000u + (uint64_t)M * 7 + (uint64_t)N * 13 + K;
    std::vector<In> a = inputs<In>((size_t)M * K, exact, seed), b = inputs<In>((size_t)N * K, exact, seed + 1);
    std::vector<Out> c = inputs<Out>((size_t)M * N, exact, seed + 2);
    In *dA = to_device(a), *dB = to_device(b);
    Out *dC = to_device(c), *dD = nullptr;
    float *dRef = nullptr;
    CHECK_CUDA(cudaMalloc(&dD, c.size() * sizeof(Out)));
    CHECK_CUDA(cudaMemset(dD, 0xff, c.size() * sizeof(Out)));
    CHECK_CUDA(cudaMalloc(&dRef, c.size() * sizeof(float)));

    Prepared<G> gemm(M, N, K, dA, dB, alpha, beta, dC, dD);
    gemm.run();
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess)
        gemm.status = cudaGetErrorString(err);

    reference_gemm<In, Out><<<dim3((M + 127) / 128, N), 128>>>(M, N, K, alpha, dA, dB, beta, dC, dRef);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<Out> d(c.size());
    std::vector<float> ref(c.size());
    CHECK_CUDA(cudaMemcpy(d.data(), dD, d.size() * sizeof(Out), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(ref.data(), dRef, ref.size() * sizeof(float), cudaMemcpyDeviceToHost));

    double worst = 0;  // exact: the count of entries that differ; random: the largest error
    for (size_t i = 0; i < d.size(); i++) {
        double got = double(float(d[i])), want = double(Out(ref[i]));
        if (exact)
            worst += got != want;
        else if (!(std::fabs(got - ref[i]) <= worst))
            worst = std::isnan(got) ? INFINITY : std::fabs(got - ref[i]);
    }
    bool pass = gemm.ok() && (exact ? worst == 0 : worst <= tolerance);
    std::printf("{\"gemm\": \"%s\", \"problem\": \"%s\", \"m\": %d, \"n\": %d, \"k\": %d, "
                "\"status\": \"%s\", \"%s\": %.6g, \"tolerance\": %g, \"hash\": \"%016llx\", "
                "\"pass\": %s}\n",
                name, exact ? "exact" : "random", M, N, K, gemm.status,
                exact ? "wrong_entries" : "max_error", worst, exact ? 0.0 : tolerance,
                (unsigned long long)fnv1a(d.data(), d.size() * sizeof(Out)), pass ? "true" : "false");
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD), cudaFree(dRef);
    return pass ? 0 : 1;
}

// The median time of REPS runs of a 4096^3 GEMM (every input byte 0x3c:
// the time, not the result, is what counts here).
template <class G>
static int timed(const char *name, int reps)
{
    using In = typename Prepared<G>::In;
    using Out = typename Prepared<G>::Out;
    const int M = 4096, N = 4096, K = 4096;
    In *dA, *dB;
    Out *dC, *dD;
    CHECK_CUDA(cudaMalloc(&dA, (size_t)M * K * sizeof(In)));
    CHECK_CUDA(cudaMalloc(&dB, (size_t)N * K * sizeof(In)));
    CHECK_CUDA(cudaMalloc(&dC, (size_t)M * N * sizeof(Out)));
    CHECK_CUDA(cudaMalloc(&dD, (size_t)M * N * sizeof(Out)));
    CHECK_CUDA(cudaMemset(dA, 0x3c, (size_t)M * K * sizeof(In)));
    CHECK_CUDA(cudaMemset(dB, 0x3c, (size_t)N * K * sizeof(In)));
    CHECK_CUDA(cudaMemset(dC, 0x3c, (size_t)M * N * sizeof(Out)));
    Prepared<G> gemm(M, N, K, dA, dB, 1.f, 0.f, dC, dD);
    std::vector<float> ms;
    cudaEvent_t t0, t1;
    CHECK_CUDA(cudaEventCreate(&t0));
    CHECK_CUDA(cudaEventCreate(&t1));
    for (int i = 0; gemm.ok() && i < reps + 2; i++) {
        CHECK_CUDA(cudaEventRecord(t0));
        gemm.run();
        CHECK_CUDA(cudaEventRecord(t1));
        CHECK_CUDA(cudaEventSynchronize(t1));
        float m = 0;
        CHECK_CUDA(cudaEventElapsedTime(&m, t0, t1));
        if (i >= 2)
            ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    double median = ms.empty() ? 0 : ms[ms.size() / 2];
    std::printf("{\"gemm\": \"%s\", \"problem\": \"timed\", \"m\": %d, \"n\": %d, \"k\": %d, "
                "\"status\": \"%s\", \"ms\": %.4f, \"reps\": %d, \"tflops\": %.1f}\n",
                name, M, N, K, gemm.status, median, (int)ms.size(),
                median > 0 ? 2.0 * M * N * K / (median * 1e9) : 0.0);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dD);
    return !gemm.ok();
}

template <class G>
static int both(const char *name, double tolerance, int time_reps)
{
    // exact: |sum| <= K + 1 = 241 stays an integer in bf16 (8 significant bits)
    int failed = run<G>(name, true, 520, 264, 240, 0) + run<G>(name, false, 1000, 776, 512, tolerance);
    return failed + (time_reps > 0 ? timed<G>(name, time_reps) : 0);
}

int main(int argc, char **argv)
{
    int reps = argc == 3 && !std::strcmp(argv[1], "--time") ? std::atoi(argv[2]) : 0;
    int failed = 0;
    failed += both<F16Cooperative>("f16_cooperative_cluster2x1", 0.25, reps);
    failed += both<Bf16Pingpong>("bf16_pingpong_cluster1x2", 0.5, reps);
    failed += both<Tf32Basic>("tf32_basic", 0.1, reps);  // tf32 rounds the inputs
    failed += both<Fp8FastAccum>("e4m3_fast_accum_cluster1x2", 0.5, reps);
    failed += both<F16StreamK>("f16_stream_k", 0.25, reps);
    return failed ? 1 : 0;
}
