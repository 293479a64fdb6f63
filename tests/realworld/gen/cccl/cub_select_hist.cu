// Instantiates CUB's selection, partition, run-length, histogram, adjacent
// difference and merge algorithms, so that nvcc emits their real kernels into
// one module. Written for taskcache's real-world corpus; the kernels come
// from CUB.
#include <cub/device/device_adjacent_difference.cuh>
#include <cub/device/device_histogram.cuh>
#include <cub/device/device_merge.cuh>
#include <cub/device/device_partition.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_select.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/functional>

namespace {

struct is_positive {
    template <typename T>
    __host__ __device__ bool operator()(const T &x) const { return x > T(0); }
};

struct is_small {
    template <typename T>
    __host__ __device__ bool operator()(const T &x) const { return x < T(100) && x > T(-100); }
};

template <typename T>
void selections(void *tmp, size_t &bytes, const T *in, T *out, const char *flags, int *count, int n)
{
    cub::DeviceSelect::If(tmp, bytes, in, out, count, n, is_positive{});
    cub::DeviceSelect::Flagged(tmp, bytes, in, flags, out, count, n);
    cub::DeviceSelect::Unique(tmp, bytes, in, out, count, n);
    cub::DevicePartition::If(tmp, bytes, in, out, count, n, is_positive{});
    cub::DevicePartition::If(tmp, bytes, in, out, out + n, out + 2 * n, count, n, is_small{}, is_positive{});
}

template <typename T>
void run_length(void *tmp, size_t &bytes, const T *in, T *uniq, int *lengths, int *offsets, int *runs, int n)
{
    cub::DeviceRunLengthEncode::Encode(tmp, bytes, in, uniq, lengths, runs, n);
    cub::DeviceRunLengthEncode::NonTrivialRuns(tmp, bytes, in, offsets, lengths, runs, n);
}

template <typename T>
void differences(void *tmp, size_t &bytes, const T *in, T *out, int n)
{
    cub::DeviceAdjacentDifference::SubtractLeftCopy(tmp, bytes, in, out, n);
    cub::DeviceAdjacentDifference::SubtractRightCopy(tmp, bytes, in, out, n, cuda::std::minus<T>{});
}

} // namespace

void instantiate_select_hist(void *tmp, size_t &bytes, void *a, void *b, const char *flags, int *count,
                             int *hist, int n)
{
    using namespace cuda::std;
    selections(tmp, bytes, (const int *)a, (int *)b, flags, count, n);
    selections(tmp, bytes, (const float *)a, (float *)b, flags, count, n);
    selections(tmp, bytes, (const int64_t *)a, (int64_t *)b, flags, count, n);
    run_length(tmp, bytes, (const int *)a, (int *)b, count, count + n, count + 2 * n, n);
    run_length(tmp, bytes, (const uint8_t *)a, (uint8_t *)b, count, count + n, count + 2 * n, n);
    differences(tmp, bytes, (const int *)a, (int *)b, n);
    differences(tmp, bytes, (const double *)a, (double *)b, n);
    cub::DeviceHistogram::HistogramEven(tmp, bytes, (const uint8_t *)a, hist, 257, 0, 256, n);
    cub::DeviceHistogram::HistogramEven(tmp, bytes, (const float *)a, hist, 65, 0.0f, 1.0f, n);
    {
        const float *levels = (const float *)b;
        cub::DeviceHistogram::HistogramRange(tmp, bytes, (const float *)a, hist, 33, levels, n);
    }
    {
        int *h4[4] = {hist, hist + 256, hist + 512, hist + 768};
        int lv[4] = {257, 257, 257, 257}, lo[4] = {0, 0, 0, 0}, hi[4] = {256, 256, 256, 256};
        cub::DeviceHistogram::MultiHistogramEven<4, 3>(tmp, bytes, (const uint8_t *)a, h4, lv, lo, hi, n);
    }
    cub::DeviceMerge::MergeKeys(tmp, bytes, (const int *)a, n, (const int *)b, n, (int *)b + n,
                                cuda::std::less<int>{});
    cub::DeviceMerge::MergePairs(tmp, bytes, (const float *)a, (const int *)b, n, (const float *)a + n,
                                 (const int *)b + n, n, (float *)b, (int *)a, cuda::std::less<float>{});
}
