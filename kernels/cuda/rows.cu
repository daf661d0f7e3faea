/* rows.cu: the row reductions, one block a row of d values (row = blockIdx.x
 * + blockIdx.y * gridDim.x), in f32 without overflow or cancellation: sums of
 * squares are taken of the row scaled by a power of two (exact) that brings
 * its largest magnitude into [0.5, 1); layer norm subtracts the row's first
 * value before summing (exact for close values) and keeps the mean as that
 * value plus a small part. Ported from kernels/vulkan/rows.comp; the special
 * values follow lib/cpu/norm.c. Every branch below depends only on values
 * the whole block shares (the row index, reduced values), so barriers and
 * warp operations are reached by every thread. y may be x (in place): each
 * thread writes only the elements it alone reads after the last reduction. */
#include "compat.h"
#include "common.cuh"

/* the row this block works on; rows past the end are skipped by the whole block */
static __device__ __forceinline__ unsigned long long tq_row(void)
{
    return (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x;
}

/* Largest |x| of the row ignoring NaN, and whether it holds a NaN (as 1.0f). */
static __device__ __forceinline__ void tq_row_max_abs(const float *x, unsigned d, float *slots,
                                                      float *mx, float *nan)
{
    float m = 0.0f, n = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) {
        float v = x[i];
        if (v != v)
            n = 1.0f;
        else
            m = fmaxf(m, fabsf(v));
    }
    *nan = tq_block_max(n, slots);
    *mx = tq_block_max(m, slots);
}

/* The exponent e with mx = f 2^e, f in [0.5, 1); 0 for 0 and the infinities. */
static __device__ __forceinline__ int tq_scale_exp(float mx)
{
    int e = 0;
    if (mx > 0.0f && mx < INFINITY)
        frexpf(mx, &e);
    return e;
}

/* The row's Euclidean norm without overflow or underflow: the sum of squares
 * is taken of x 2^-e (exact), e from the largest |x|; NaN anywhere gives NaN,
 * an infinity (and no NaN) gives inf. Hands back that largest |x| (NaN
 * ignored), e, and root = sqrt(sum (x 2^-e)^2), so norm = root 2^e. */
static __device__ __forceinline__ float tq_row_norm(const float *x, unsigned d, float *slots,
                                                    float *mx, int *e, float *root)
{
    float nan;
    tq_row_max_abs(x, d, slots, mx, &nan);
    *e = tq_scale_exp(*mx);
    float ss = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) {
        float v = ldexpf(x[i], -*e);
        ss = fmaf(v, v, ss);
    }
    *root = sqrtf(tq_block_sum(ss, slots));
    return nan > 0.0f ? NAN : *mx == INFINITY ? INFINITY : ldexpf(*root, *e);
}

extern "C" __global__ void tq_k_rownorm(const float *x, float *norms, unsigned rows, unsigned d)
{
    __shared__ float slots[TQ_MAX_WARPS];
    unsigned long long r = tq_row();
    if (r >= rows)
        return; /* the whole block: control flow stays uniform */
    float mx, root;
    int e;
    float norm = tq_row_norm(x + r * d, d, slots, &mx, &e, &root);
    if (threadIdx.x == 0)
        norms[r] = norm;
}

extern "C" __global__ void tq_k_normalize(const float *x, float *y, unsigned rows, unsigned d, float eps)
{
    __shared__ float slots[TQ_MAX_WARPS];
    unsigned long long r = tq_row();
    if (r >= rows)
        return;
    const float *xr = x + r * d;
    float *yr = y + r * d;
    float mx, root;
    int e;
    float norm = tq_row_norm(xr, d, slots, &mx, &e, &root);
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) {
        float v = xr[i];
        /* x / max(norm, eps), a NaN norm kept NaN (a zero row with eps == 0
         * gives 0/0 = NaN, as the formula says); x / norm as (x 2^-e) / root,
         * which neither overflows nor loses subnormal rows */
        float o;
        if (norm != norm)
            o = norm;
        else if (norm < eps)
            o = v / eps;
        else if (mx == INFINITY)
            o = v * 0.0f; /* x / inf, and NaN for the infinities themselves */
        else
            o = ldexpf(v, -e) / root;
        yr[i] = o;
    }
}

/* Softmax of each row. Defined results for every input (lib/cpu/norm.c):
 * a NaN anywhere makes the whole row NaN; a row that is all -inf (every choice
 * masked out) gives all zeros; +inf entries share the whole mass equally;
 * finite input never gives NaN: the max is subtracted before exp. */
extern "C" __global__ void tq_k_softmax(const float *x, float *y, unsigned rows, unsigned d)
{
    __shared__ float slots[TQ_MAX_WARPS];
    unsigned long long r = tq_row();
    if (r >= rows)
        return;
    const float *xr = x + r * d;
    float *yr = y + r * d;
    float m = -INFINITY, nan = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) {
        float v = xr[i];
        if (v != v)
            nan = 1.0f;
        else
            m = fmaxf(m, v);
    }
    nan = tq_block_max(nan, slots);
    m = tq_block_max(m, slots);
    if (nan > 0.0f || m == -INFINITY) { /* NaN anywhere: all NaN; all -inf: all 0 */
        for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = nan > 0.0f ? NAN : 0.0f;
        return;
    }
    if (m == INFINITY) { /* the +inf entries share the mass */
        float n_inf = 0.0f;
        for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
            n_inf += xr[i] == INFINITY ? 1.0f : 0.0f;
        n_inf = tq_block_sum(n_inf, slots);
        for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = xr[i] == INFINITY ? 1.0f / n_inf : 0.0f;
        return;
    }
    float s = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
        s += tq_exp_neg(xr[i] - m);
    s = tq_block_sum(s, slots); /* >= 1: the max gives exp(0) */
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
        yr[i] = tq_exp_neg(xr[i] - m) / s;
}

/* Layer norm: (x - mean) / sqrt(var + eps) * g + b, g and b optional (NULL: 1
 * and 0). As kernels/vulkan/rows.comp: the mean is x0 + delta with x0 the
 * row's first value, so that rows of close, large values do not cancel; the
 * deviations are scaled by 2^-e (their largest magnitude into [0.5, 1)) before
 * squaring. One step more than the shader: the row itself is first scaled by
 * 2^-e0 (its largest magnitude into [0.5, 1), exact), so neither x - x0 nor
 * the sum of d of them can overflow (a row holding 3e38 and -3e38, or d values
 * near 1e36 with x0 of the other sign) and the mean of a subnormal row is not
 * rounded to the subnormal grid; the CPU, in double, has neither problem. A
 * NaN or infinity anywhere in the row makes it all NaN, as on the CPU. */
extern "C" __global__ void tq_k_layernorm(const float *x, const float *g, const float *b, float *y, unsigned rows, unsigned d, float eps)
{
    __shared__ float slots[TQ_MAX_WARPS];
    unsigned long long r = tq_row();
    if (r >= rows || d == 0)
        return;
    const float *xr = x + r * d;
    float *yr = y + r * d;
    float mx0, nan;
    tq_row_max_abs(xr, d, slots, &mx0, &nan); /* NaN needs no flag: it reaches ss */
    int e0 = tq_scale_exp(mx0);
    float x0 = ldexpf(xr[0], -e0); /* read by every thread before any write */
    float s = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
        s += ldexpf(xr[i], -e0) - x0;
    float delta = tq_block_sum(s, slots) / (float)d; /* mean 2^-e0 = x0 + delta */
    float mx = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x)
        mx = fmaxf(mx, fabsf((ldexpf(xr[i], -e0) - x0) - delta)); /* fmaxf drops NaN: ss keeps it */
    mx = tq_block_max(mx, slots);
    /* deviations (x - mean) 2^-E, E = e0 + e, in [0.5, 1) at most; a constant
     * row (all deviations 0) takes E = 0 so that eps 2^-2E cannot underflow to
     * a 0 / 0 */
    int e = mx > 0.0f ? tq_scale_exp(mx) : -e0, E = e0 + e;
    float ss = 0.0f;
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) {
        float v = ldexpf((ldexpf(xr[i], -e0) - x0) - delta, -e);
        ss = fmaf(v, v, ss);
    }
    ss = tq_block_sum(ss, slots);
    /* (x - mean) / sqrt(var + eps) = v / sqrt(ss/d + eps 2^-2E), v = (x - mean) 2^-E;
     * when eps 2^-2E overflows, var is far under eps: then (v / sqrt(var + eps))
     * 2^E, scaled back last so that only a subnormal result is rounded twice */
    float e2 = ldexpf(ldexpf(eps, -E), -E);
    float var = ldexpf(ldexpf(ss / (float)d, E), E);
    float den = isinf(e2) ? sqrtf(var + eps) : sqrtf(ss / (float)d + e2);
    for (unsigned i = threadIdx.x; i < d; i += blockDim.x) {
        float v = ldexpf((ldexpf(xr[i], -e0) - x0) - delta, -e) / den;
        if (isinf(e2))
            v = ldexpf(v, E);
        if (g)
            v *= g[i];
        if (b)
            v += b[i];
        yr[i] = v;
    }
}
