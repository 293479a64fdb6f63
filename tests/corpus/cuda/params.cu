// params.cu -- taskcache test corpus module.
// Covers: large struct kernel parameters (a ~1 KiB struct passed by value),
// __grid_constant__ const struct parameters (parameter address may be taken),
// struct params with mixed field types/alignment, arrays inside params, and
// many scalar parameters.

struct SmallParams {
    char  tag;
    double scale;       // forces 8-byte alignment after a 1-byte field
    short offset;
    int   count;
};

struct BigParams {
    float weights[200];
    int   index[50];
    float bias;
    int   len;
};

struct Matrix4 { float m[4][4]; };

// Large by-value struct parameter.
extern "C" __global__ void pr_big_dot(BigParams p, const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = p.bias;
    int len = p.len < 200 ? p.len : 200;
    for (int k = 0; k < len; ++k)
        acc = fmaf(p.weights[k], in[(i + p.index[k % 50]) % n], acc);
    out[i] = acc;
}

// __grid_constant__: the kernel may take the address of its parameter
// without the compiler copying it into local memory.
__device__ __noinline__ float pr_row_dot(const Matrix4 *m, int r, const float *v)
{
    return m->m[r][0] * v[0] + m->m[r][1] * v[1] + m->m[r][2] * v[2] + m->m[r][3] * v[3];
}

extern "C" __global__ void pr_transform(const __grid_constant__ Matrix4 mat, const float *in, float *out, int nvec)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nvec) return;
    const float *v = in + 4 * i;
    for (int r = 0; r < 4; ++r)
        out[4 * i + r] = pr_row_dot(&mat, r, v);
}

__global__ void pr_big_grid_constant(const __grid_constant__ BigParams p, const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int *idx = &p.index[0];          // address of a grid-constant param field
    out[i] = in[i] * idx[i % 50] + (int)p.weights[i % 200];
}

extern "C" __global__ void pr_small(SmallParams sp, const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i < sp.count)
        out[i] = (float)((double)in[i] * sp.scale + sp.offset + sp.tag);
}

__global__ void pr_many_scalars(int a, int b, int c, int d, float e, float f, double g,
                                long long h, unsigned char k, short l, int *out)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        out[0] = a + b * c - d;
        out[1] = (int)(e * f + (float)g);
        out[2] = (int)(h >> 3) + k + l;
    }
}
