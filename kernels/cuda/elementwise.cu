/* elementwise.cu: y = op(x [, b]) element by element, grid-stride over n:
 * add (b the same shape), add_row (b a row of d values broadcast over x's
 * rows), scale (y = alpha x), GELU (exact erf form), relu, tanh, sigmoid.
 * Ported from kernels/vulkan/elementwise.comp, which follows lib/cpu's rules
 * for NaN and the infinities (lib/cpu/gelu.c, activate.c). */
#include "compat.h"
#include "common.cuh"

/* erfc(t) = exp(-t^2) g(t), g a polynomial in s = affine(u), u = 1/(1 + t/2):
 * the fit of lib/cpu/gelu.c (relative error 8e-11, far under f32's rounding). */
#define TQ_GELU_T_MAX 10.5f
#define TQ_GELU_U_MIN (1.0f / (1.0f + 0.5f * TQ_GELU_T_MAX))

static __device__ __forceinline__ float tq_gelu(float x)
{
    float t = fminf(fabsf(x) * 0.707106781f, TQ_GELU_T_MAX); /* NaN: T_MAX, unused */
    float u = 1.0f / (1.0f + 0.5f * t);
    float s = (u - TQ_GELU_U_MIN) * (2.0f / (1.0f - TQ_GELU_U_MIN)) - 1.0f;
    float g = -1.0477422842814866e-06f;
    g = fmaf(g, s, 1.0774364679758807e-06f);
    g = fmaf(g, s, 8.9526262859340292e-06f);
    g = fmaf(g, s, -2.2376964097138935e-05f);
    g = fmaf(g, s, -3.9943345143307089e-05f);
    g = fmaf(g, s, 0.00026457881888193856f);
    g = fmaf(g, s, 8.0355043836439225e-05f);
    g = fmaf(g, s, -0.0030473133978105573f);
    g = fmaf(g, s, -0.0010205336364466958f);
    g = fmaf(g, s, 0.047137420883527154f);
    g = fmaf(g, s, 0.19746110787684534f);
    g = fmaf(g, s, 0.42892066330987855f);
    g = fmaf(g, s, 0.33025705900839142f);
    /* 0.5 erfc(|x| / sqrt 2), 0 past T_MAX where x Phi(x) is under any f32
     * (false for NaN too: x keeps it NaN below) */
    float half_erfc =
        fabsf(x) * 0.707106781f < TQ_GELU_T_MAX ? 0.5f * tq_exp_neg(-(0.5f * x) * x) * g : 0.0f;
    /* Phi(x) = 0.5 erfc(-x / sqrt 2), without cancellation for x < 0 */
    float phi = x < 0.0f ? half_erfc : 1.0f - half_erfc;
    /* gelu(-inf) is its limit, -0, not the -inf * 0 = NaN of the formula */
    if (isinf(x))
        return x > 0.0f ? x : -0.0f;
    return x * phi; /* NaN stays NaN */
}

/* |x| < 0.625: the odd Taylor series to x^17 (next term under 1e-7
 * relative); beyond, (1 - e) / (1 + e) with e = exp(-2|x|) (no cancellation) */
static __device__ __forceinline__ float tq_tanh(float x)
{
    float a = fabsf(x);
    if (a < 0.625f) {
        float z = x * x;
        float p = (float)(6404582.0 / 10854718875.0);
        p = fmaf(p, z, (float)(-929569.0 / 638512875.0));
        p = fmaf(p, z, (float)(21844.0 / 6081075.0));
        p = fmaf(p, z, (float)(-1382.0 / 155925.0));
        p = fmaf(p, z, (float)(62.0 / 2835.0));
        p = fmaf(p, z, (float)(-17.0 / 315.0));
        p = fmaf(p, z, (float)(2.0 / 15.0));
        p = fmaf(p, z, (float)(-1.0 / 3.0));
        return fmaf(x, z * p, x);
    }
    float e = tq_exp_neg(-2.0f * a);
    float t = (1.0f - e) / (1.0f + e);
    return x < 0.0f ? -t : x > 0.0f ? t : x; /* NaN stays NaN */
}

/* 1 / (1 + exp(-x)), with exp only of non-positive arguments (no overflow) */
static __device__ __forceinline__ float tq_sigmoid(float x)
{
    if (x != x)
        return x;
    if (x >= 0.0f)
        return 1.0f / (1.0f + tq_exp_neg(-x));
    float e = tq_exp_neg(x);
    return e / (1.0f + e);
}

extern "C" __global__ void tq_k_add(const float *a, const float *b, float *y, unsigned long long n)
{
    TQ_GRID_STRIDE(i, n)
        y[i] = a[i] + b[i];
}

extern "C" __global__ void tq_k_add_row(const float *a, const float *b, float *y, unsigned long long n, unsigned d)
{
    /* n > 0 implies d > 0; a 64-bit remainder costs several times a 32-bit
     * one, so the common case of fewer than 2^32 elements takes the latter */
    if (n <= 0xffffffffull) {
        TQ_GRID_STRIDE(i, n)
            y[i] = a[i] + b[(unsigned)i % d];
    } else {
        TQ_GRID_STRIDE(i, n)
            y[i] = a[i] + b[i % d];
    }
}

extern "C" __global__ void tq_k_scale(const float *x, float *y, unsigned long long n, float alpha)
{
    TQ_GRID_STRIDE(i, n)
        y[i] = alpha * x[i];
}

extern "C" __global__ void tq_k_gelu(const float *x, float *y, unsigned long long n)
{
    TQ_GRID_STRIDE(i, n)
        y[i] = tq_gelu(x[i]);
}

extern "C" __global__ void tq_k_relu(const float *x, float *y, unsigned long long n)
{
    TQ_GRID_STRIDE(i, n) {
        float v = x[i];
        y[i] = v > 0.0f || v != v ? v : 0.0f; /* NaN > 0 is false: keep NaN; -0 -> +0 */
    }
}

extern "C" __global__ void tq_k_tanh(const float *x, float *y, unsigned long long n)
{
    TQ_GRID_STRIDE(i, n)
        y[i] = tq_tanh(x[i]);
}

extern "C" __global__ void tq_k_sigmoid(const float *x, float *y, unsigned long long n)
{
    TQ_GRID_STRIDE(i, n)
        y[i] = tq_sigmoid(x[i]);
}
