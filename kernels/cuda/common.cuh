/* common.cuh: the helpers several kernel files share (the grid-stride loop,
 * exp of a non-positive argument, block-wide sums and maxima, the top-k
 * ranking key), ported from kernels/vulkan/common.glsl and reduce.glsl.
 *
 * Include it after compat.h, once per .cu file. It has NO include guard on
 * purpose: the stand-in driver (tests/standin/gen-registry.sh) compiles every
 * .cu file inside a namespace of its own in a single translation unit, so each
 * file needs its own copy of these (static) helpers; a guard would leave the
 * second file's namespace without them. Everything here is static. */

/* i over [0, n) with a grid of any shape over x and y (the host may spread
 * blocks over y past 65535, or launch fewer blocks than the work needs). */
#define TQ_GRID_STRIDE(i, n)                                                              \
    for (unsigned long long i = ((unsigned long long)blockIdx.y * gridDim.x + blockIdx.x) * \
                                        blockDim.x + threadIdx.x;                         \
         i < (n); i += (unsigned long long)blockDim.x * gridDim.x * gridDim.y)

/* exp(a) in f32 for a <= 0 (NaN stays NaN): a = n ln2 + r, |r| <= ln2/2, with
 * ln2 in two parts so that r is exact; exp(r) by its Taylor series to degree
 * 7 (error under an f32 ulp); 2^n applied in two steps so that subnormal
 * results come out right. Below -104 the f32 result is 0. The fused
 * multiply-adds are spelled out, so nvcc, hipcc and the stand-in's g++ give
 * the same bits (none of them may contract differently). */
static __device__ __forceinline__ float tq_exp_neg(float a)
{
    if (!(a > -104.0f))
        return a != a ? a : 0.0f;
    float n = rintf(a * 1.44269504f); /* round half to even, as roundEven */
    float r = fmaf(-n, 1.42860677e-6f, fmaf(-n, 0.693145752f, a));
    float p = 1.98412698e-4f;
    p = fmaf(p, r, 1.38888889e-3f);
    p = fmaf(p, r, 8.33333333e-3f);
    p = fmaf(p, r, 4.16666667e-2f);
    p = fmaf(p, r, 1.66666667e-1f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int k = (int)n;
    int k1 = k / 2;
    return ldexpf(ldexpf(p, k1), k - k1);
}

/* Block-wide sum over a 1-D block (blockDim.x a multiple of the warp width):
 * each warp adds in registers by a butterfly (every lane ends with the warp's
 * sum), then the warps' partials are added in warp order from one shared slot
 * per warp. The order is fixed by the block size: the same bits on every run.
 * Every thread of the block must call it (it has barriers). The barrier on
 * entry keeps a previous call's readers ahead of this call's writers. */
static __device__ __forceinline__ float tq_block_sum(float v, float *slots)
{
    for (int o = warpSize / 2; o; o >>= 1)
        v += tq_shfl_xor(v, o);
    unsigned nw = (blockDim.x + warpSize - 1) / warpSize;
    __syncthreads();
    if (tq_lane() == 0)
        slots[threadIdx.x / warpSize] = v;
    __syncthreads();
    float s = 0.0f;
    for (unsigned w = 0; w < nw; w++)
        s += slots[w];
    return s;
}

/* The same for the maximum; v must not be NaN (callers count NaNs apart). */
static __device__ __forceinline__ float tq_block_max(float v, float *slots)
{
    for (int o = warpSize / 2; o; o >>= 1)
        v = fmaxf(v, tq_shfl_xor(v, o));
    unsigned nw = (blockDim.x + warpSize - 1) / warpSize;
    __syncthreads();
    if (tq_lane() == 0)
        slots[threadIdx.x / warpSize] = v;
    __syncthreads();
    float s = -INFINITY;
    for (unsigned w = 0; w < nw; w++)
        s = fmaxf(s, slots[w]);
    return s;
}

/* The ranking of the top-k kernels as an unsigned order: a larger float a
 * larger key, NaN lowest (0), -0 as +0. */
static __device__ __forceinline__ unsigned tq_order_key(float v)
{
    if (v != v)
        return 0u;
    if (v == 0.0f)
        v = 0.0f;
    unsigned u = __float_as_uint(v);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}
