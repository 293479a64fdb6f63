// constant_mem.cu -- taskcache test corpus module.
// Covers: __constant__ memory (scalar, array, struct) read by several kernels,
// a static __constant__ variable, an integer polynomial and a float filter
// whose coefficients live in constant memory.

struct Affine {
    float scale;
    float bias;
    int   shift;
    int   mask;
};

__constant__ float c_coeffs[8] = {0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f, 0.125f, -2.0f};
__constant__ int   c_poly[5]   = {1, -3, 5, -7, 11};
__constant__ Affine c_affine   = {1.5f, -0.25f, 3, 0xff};
__constant__ unsigned int c_lut[32];           // zero-initialised, set by host
static __constant__ int s_cbias = 42;          // internal-linkage constant

extern "C" __global__ void cm_fir(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < 8; ++k) {
        int j = i - k;
        float x = (j >= 0) ? in[j] : 0.0f;
        acc = fmaf(c_coeffs[k], x, acc);
    }
    out[i] = acc;
}

extern "C" __global__ void cm_poly(const int *in, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int x = in[i];
    int r = 0;
    for (int k = 4; k >= 0; --k)      // Horner
        r = r * x + c_poly[k];
    out[i] = r + s_cbias;
}

__global__ void cm_affine(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = in[i] * c_affine.scale + c_affine.bias;
}

__global__ void cm_lut(const unsigned int *in, unsigned int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned int v = in[i];
        out[i] = c_lut[v & 31] ^ ((v >> c_affine.shift) & c_affine.mask);
    }
}

// Reads several constant objects at once.
extern "C" __global__ void cm_mix(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i] * c_coeffs[i & 7];
        v += (float)c_poly[i % 5] + (float)s_cbias * c_affine.scale;
        out[i] = v;
    }
}
