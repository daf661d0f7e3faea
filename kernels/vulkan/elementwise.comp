#version 450
// elementwise.comp: y = op(x [, b]) element by element, one invocation an
// element. Variants: ADD (b the same shape), ADD_ROW (b a row of d values
// broadcast over x's rows), SCALE (y = alpha x), GELU (exact erf form),
// RELU, TANH, SIGMOID.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
#if defined(ADD) || defined(ADD_ROW)
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) buffer Y { float y[]; };
#else
layout(std430, binding = 1) buffer Y { float y[]; };
#endif

layout(push_constant) uniform PC {
    uint x_off, b_off, y_off, n, d;
    float alpha;
} pc;

#ifdef GELU
// erfc(t) = exp(-t^2) g(t), g a polynomial in s = affine(u), u = 1/(1 + t/2):
// the fit of lib/cpu/gelu.c (relative error 8e-11, far under f32's rounding).
const float T_MAX = 10.5;
const float U_MIN = 1.0 / (1.0 + 0.5 * T_MAX);
float gelu(float x)
{
    float t = min(abs(x) * 0.707106781, T_MAX);
    float u = 1.0 / (1.0 + 0.5 * t);
    float s = (u - U_MIN) * (2.0 / (1.0 - U_MIN)) - 1.0;
    float g = -1.0477422842814866e-06;
    g = g * s + 1.0774364679758807e-06;
    g = g * s + 8.9526262859340292e-06;
    g = g * s + -2.2376964097138935e-05;
    g = g * s + -3.9943345143307089e-05;
    g = g * s + 0.00026457881888193856;
    g = g * s + 8.0355043836439225e-05;
    g = g * s + -0.0030473133978105573;
    g = g * s + -0.0010205336364466958;
    g = g * s + 0.047137420883527154;
    g = g * s + 0.19746110787684534;
    g = g * s + 0.42892066330987855;
    g = g * s + 0.33025705900839142;
    // 0.5 erfc(|x| / sqrt 2), 0 past T_MAX where x Phi(x) is under any f32
    float half_erfc = abs(x) * 0.707106781 < T_MAX ? 0.5 * exp_neg(-(0.5 * x) * x) * g : 0.0;
    // Phi(x) = 0.5 erfc(-x / sqrt 2), without cancellation for x < 0
    float phi = x < 0.0 ? half_erfc : 1.0 - half_erfc;
    if (isinf(x))
        return x > 0.0 ? x : -0.0;
    return x * phi; // NaN stays NaN
}
#endif

#ifdef TANH
// |x| < 0.625: the odd Taylor series to x^17 (next term under 1e-7
// relative); beyond, (1 - e) / (1 + e) with e = exp(-2|x|) (no cancellation)
float tanh_f(float x)
{
    float a = abs(x);
    if (a < 0.625) {
        float z = x * x;
        float p = 6404582.0 / 10854718875.0;
        p = p * z - 929569.0 / 638512875.0;
        p = p * z + 21844.0 / 6081075.0;
        p = p * z - 1382.0 / 155925.0;
        p = p * z + 62.0 / 2835.0;
        p = p * z - 17.0 / 315.0;
        p = p * z + 2.0 / 15.0;
        p = p * z - 1.0 / 3.0;
        return x + x * (z * p);
    }
    float e = exp_neg(-2.0 * a);
    float t = (1.0 - e) / (1.0 + e);
    return x < 0.0 ? -t : x > 0.0 ? t : x; // NaN stays NaN
}
#endif

#ifdef SIGMOID
float sigmoid(float x)
{
    if (x != x)
        return x;
    if (x >= 0.0)
        return 1.0 / (1.0 + exp_neg(-x));
    float e = exp_neg(x);
    return e / (1.0 + e);
}
#endif

void main()
{
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= pc.n)
        return;
    float v = x[pc.x_off + i];
#if defined(ADD)
    y[pc.y_off + i] = v + b[pc.b_off + i];
#elif defined(ADD_ROW)
    y[pc.y_off + i] = v + b[pc.b_off + i % pc.d];
#elif defined(SCALE)
    y[pc.y_off + i] = pc.alpha * v;
#elif defined(GELU)
    y[pc.y_off + i] = gelu(v);
#elif defined(RELU)
    y[pc.y_off + i] = v > 0.0 || v != v ? v : 0.0;
#elif defined(TANH)
    y[pc.y_off + i] = tanh_f(v);
#elif defined(SIGMOID)
    y[pc.y_off + i] = sigmoid(v);
#endif
}
