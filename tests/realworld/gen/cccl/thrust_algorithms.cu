// Calls Thrust algorithms on device vectors of several types (sort, stable
// sort by key, transform, reductions by key, scans, copy_if, unique, set
// operations, merge, searches, gather/scatter, tabulate), so that nvcc emits
// the real kernels Thrust generates for them into one module. Written for
// taskcache's real-world corpus; the kernels come from Thrust and CUB.
#include <thrust/adjacent_difference.h>
#include <thrust/binary_search.h>
#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/extrema.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/inner_product.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/zip_iterator.h>
#include <thrust/merge.h>
#include <thrust/partition.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/scatter.h>
#include <thrust/sequence.h>
#include <thrust/set_operations.h>
#include <thrust/sort.h>
#include <thrust/tabulate.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/unique.h>

namespace {

struct saxpy {
    float a;
    __host__ __device__ float operator()(float x, float y) const { return a * x + y; }
};

struct square {
    __host__ __device__ float operator()(float x) const { return x * x; }
    __host__ __device__ double operator()(double x) const { return x * x; }
};

struct is_odd {
    __host__ __device__ bool operator()(int x) const { return x & 1; }
};

struct hash_index {
    __host__ __device__ unsigned operator()(int i) const
    {
        unsigned h = 2166136261u ^ (unsigned)i;
        h *= 16777619u;
        return h ^ (h >> 13);
    }
};

struct norm2 {
    __host__ __device__ float operator()(const thrust::tuple<float, float> &t) const
    {
        return thrust::get<0>(t) * thrust::get<0>(t) + thrust::get<1>(t) * thrust::get<1>(t);
    }
};

template <typename T>
void sorts(thrust::device_vector<T> &v, thrust::device_vector<int> &idx)
{
    thrust::sort(v.begin(), v.end());
    thrust::sort(v.begin(), v.end(), thrust::greater<T>());
    thrust::stable_sort_by_key(v.begin(), v.end(), idx.begin());
}

} // namespace

float thrust_algorithms(int n)
{
    thrust::device_vector<float> x(n), y(n), z(n);
    thrust::device_vector<int> k(n), idx(n), out(n);
    thrust::device_vector<double> d(n);
    thrust::device_vector<unsigned> u(n);
    thrust::sequence(idx.begin(), idx.end());
    thrust::tabulate(u.begin(), u.end(), hash_index());
    sorts(x, idx);
    sorts(d, idx);
    sorts(k, idx);
    sorts(u, idx);
    thrust::transform(x.begin(), x.end(), y.begin(), z.begin(), saxpy{2.0f});
    thrust::transform(d.begin(), d.end(), d.begin(), square());
    float s = thrust::transform_reduce(x.begin(), x.end(), square(), 0.0f, thrust::plus<float>());
    s += thrust::reduce(thrust::make_transform_iterator(
                            thrust::make_zip_iterator(thrust::make_tuple(x.begin(), y.begin())), norm2()),
                        thrust::make_transform_iterator(
                            thrust::make_zip_iterator(thrust::make_tuple(x.end(), y.end())), norm2()));
    s += thrust::inner_product(x.begin(), x.end(), y.begin(), 0.0f);
    thrust::reduce_by_key(k.begin(), k.end(), x.begin(), out.begin(), y.begin());
    thrust::reduce_by_key(k.begin(), k.end(), d.begin(), out.begin(), d.begin(), thrust::equal_to<int>(),
                          thrust::maximum<double>());
    thrust::inclusive_scan(x.begin(), x.end(), y.begin());
    thrust::exclusive_scan(k.begin(), k.end(), out.begin(), 7, thrust::maximum<int>());
    thrust::inclusive_scan_by_key(k.begin(), k.end(), d.begin(), d.begin());
    thrust::copy_if(k.begin(), k.end(), out.begin(), is_odd());
    thrust::remove_if(k.begin(), k.end(), is_odd());
    thrust::stable_partition(k.begin(), k.end(), is_odd());
    s += thrust::count_if(k.begin(), k.end(), is_odd());
    thrust::unique(k.begin(), k.end());
    thrust::unique_by_key(k.begin(), k.end(), x.begin());
    thrust::set_union(k.begin(), k.end(), idx.begin(), idx.end(), out.begin());
    thrust::set_intersection(k.begin(), k.end(), idx.begin(), idx.end(), out.begin());
    thrust::set_difference(u.begin(), u.end(), u.begin(), u.end(), u.begin());
    thrust::merge(x.begin(), x.end(), y.begin(), y.end(), z.begin());
    thrust::merge_by_key(k.begin(), k.end(), idx.begin(), idx.end(), x.begin(), y.begin(), out.begin(), z.begin());
    thrust::lower_bound(k.begin(), k.end(), idx.begin(), idx.end(), out.begin());
    thrust::upper_bound(x.begin(), x.end(), y.begin(), y.end(), out.begin());
    thrust::gather(idx.begin(), idx.end(), x.begin(), y.begin());
    thrust::scatter(x.begin(), x.end(), idx.begin(), z.begin());
    thrust::adjacent_difference(d.begin(), d.end(), d.begin());
    s += *thrust::max_element(x.begin(), x.end());
    auto mm = thrust::minmax_element(d.begin(), d.end());
    s += (float)(*mm.first + *mm.second);
    return s;
}
