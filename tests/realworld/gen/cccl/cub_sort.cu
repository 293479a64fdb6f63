// Instantiates CUB's device-wide sorting algorithms for many key and value
// types, so that nvcc emits their real kernels (radix sort onesweep,
// histogram, single-tile and segmented kernels, merge sort) into one module.
// Written for taskcache's real-world corpus; the kernels come from CUB.
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <cuda/std/cstdint>
#include <cuda/std/functional>

namespace {

template <typename K>
void radix_keys(void *tmp, size_t &bytes, const K *in, K *out, int n)
{
    cub::DeviceRadixSort::SortKeys(tmp, bytes, in, out, n);
    cub::DeviceRadixSort::SortKeysDescending(tmp, bytes, in, out, n);
}

template <typename K, typename V>
void radix_pairs(void *tmp, size_t &bytes, const K *k, K *ko, const V *v, V *vo, int n)
{
    cub::DeviceRadixSort::SortPairs(tmp, bytes, k, ko, v, vo, n);
    cub::DeviceRadixSort::SortPairsDescending(tmp, bytes, k, ko, v, vo, n);
}

template <typename K, typename V>
void segmented(void *tmp, size_t &bytes, const K *k, K *ko, const V *v, V *vo, int n,
               int segs, const int *begin, const int *end)
{
    cub::DeviceSegmentedRadixSort::SortPairs(tmp, bytes, k, ko, v, vo, n, segs, begin, end);
    cub::DeviceSegmentedSort::SortPairs(tmp, bytes, k, ko, v, vo, n, segs, begin, end);
    cub::DeviceSegmentedSort::StableSortKeys(tmp, bytes, k, ko, n, segs, begin, end);
}

struct by_abs {
    template <typename T>
    __device__ bool operator()(const T &a, const T &b) const { return (a < 0 ? -a : a) < (b < 0 ? -b : b); }
};

template <typename K, typename V>
void merge_sort(void *tmp, size_t &bytes, K *k, V *v, int n)
{
    cub::DeviceMergeSort::SortPairs(tmp, bytes, k, v, n, cuda::std::less<K>{});
    cub::DeviceMergeSort::StableSortKeys(tmp, bytes, k, n, by_abs{});
}

} // namespace

void instantiate_sorts(void *tmp, size_t &bytes, void *a, void *b, void *c, void *d, int n,
                       const int *begin, const int *end)
{
    using namespace cuda::std;
    radix_keys(tmp, bytes, (const int8_t *)a, (int8_t *)b, n);
    radix_keys(tmp, bytes, (const uint16_t *)a, (uint16_t *)b, n);
    radix_keys(tmp, bytes, (const int32_t *)a, (int32_t *)b, n);
    radix_keys(tmp, bytes, (const uint64_t *)a, (uint64_t *)b, n);
    radix_keys(tmp, bytes, (const float *)a, (float *)b, n);
    radix_keys(tmp, bytes, (const double *)a, (double *)b, n);
    radix_pairs(tmp, bytes, (const uint32_t *)a, (uint32_t *)b, (const int *)c, (int *)d, n);
    radix_pairs(tmp, bytes, (const float *)a, (float *)b, (const uint64_t *)c, (uint64_t *)d, n);
    radix_pairs(tmp, bytes, (const int64_t *)a, (int64_t *)b, (const double *)c, (double *)d, n);
    segmented(tmp, bytes, (const int *)a, (int *)b, (const float *)c, (float *)d, n, 16, begin, end);
    segmented(tmp, bytes, (const double *)a, (double *)b, (const int *)c, (int *)d, n, 16, begin, end);
    merge_sort(tmp, bytes, (int *)a, (float *)c, n);
    merge_sort(tmp, bytes, (double *)a, (int64_t *)c, n);
}
