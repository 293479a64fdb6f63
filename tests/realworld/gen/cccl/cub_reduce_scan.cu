// Instantiates CUB's device-wide reductions and scans (plain, by key,
// segmented) for several types and operators, so that nvcc emits their real
// kernels into one module. Written for taskcache's real-world corpus; the
// kernels come from CUB.
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_reduce.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/functional>

namespace {

struct max_abs {
    template <typename T>
    __host__ __device__ T operator()(const T &a, const T &b) const
    {
        T x = a < T(0) ? -a : a, y = b < T(0) ? -b : b;
        return x < y ? y : x;
    }
};

template <typename T>
void reductions(void *tmp, size_t &bytes, const T *in, T *out, int n)
{
    cub::DeviceReduce::Sum(tmp, bytes, in, out, n);
    cub::DeviceReduce::Min(tmp, bytes, in, out, n);
    cub::DeviceReduce::Max(tmp, bytes, in, out, n);
    cub::DeviceReduce::Reduce(tmp, bytes, in, out, n, max_abs{}, T(0));
}

template <typename T>
void scans(void *tmp, size_t &bytes, const T *in, T *out, int n)
{
    cub::DeviceScan::InclusiveSum(tmp, bytes, in, out, n);
    cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, n);
    cub::DeviceScan::InclusiveScan(tmp, bytes, in, out, cuda::maximum<>{}, n);
}

template <typename K, typename V>
void by_key(void *tmp, size_t &bytes, const K *keys, K *uniq, const V *vals, V *out, int *count, int n)
{
    cub::DeviceReduce::ReduceByKey(tmp, bytes, keys, uniq, vals, out, count, cuda::std::plus<V>{}, n);
    cub::DeviceScan::InclusiveSumByKey(tmp, bytes, keys, vals, out, n);
    cub::DeviceScan::ExclusiveSumByKey(tmp, bytes, keys, vals, out, n);
}

template <typename T>
void segmented(void *tmp, size_t &bytes, const T *in, T *out, int segs, const int *b, const int *e)
{
    cub::DeviceSegmentedReduce::Sum(tmp, bytes, in, out, segs, b, e);
    cub::DeviceSegmentedReduce::Max(tmp, bytes, in, out, segs, b, e);
    cub::DeviceSegmentedReduce::Reduce(tmp, bytes, in, out, segs, b, e, max_abs{}, T(0));
}

} // namespace

void instantiate_reduce_scan(void *tmp, size_t &bytes, void *a, void *b, void *c, void *d, int *count,
                             int n, const int *begin, const int *end)
{
    using namespace cuda::std;
    reductions(tmp, bytes, (const int *)a, (int *)b, n);
    reductions(tmp, bytes, (const float *)a, (float *)b, n);
    reductions(tmp, bytes, (const double *)a, (double *)b, n);
    reductions(tmp, bytes, (const int64_t *)a, (int64_t *)b, n);
    cub::DeviceReduce::ArgMin(tmp, bytes, (const float *)a, (float *)b, (int64_t *)c, n);
    cub::DeviceReduce::ArgMax(tmp, bytes, (const double *)a, (double *)b, (int64_t *)c, n);
    scans(tmp, bytes, (const int *)a, (int *)b, n);
    scans(tmp, bytes, (const float *)a, (float *)b, n);
    scans(tmp, bytes, (const uint64_t *)a, (uint64_t *)b, n);
    by_key(tmp, bytes, (const int *)a, (int *)b, (const float *)c, (float *)d, count, n);
    by_key(tmp, bytes, (const uint64_t *)a, (uint64_t *)b, (const double *)c, (double *)d, count, n);
    segmented(tmp, bytes, (const float *)a, (float *)b, 64, begin, end);
    segmented(tmp, bytes, (const int64_t *)a, (int64_t *)b, 64, begin, end);
}
