#version 450
// rows.comp: the row reductions, one workgroup a row of d values, in f32
// without overflow or cancellation: sums of squares are taken of the row
// scaled by a power of two (exact) that brings its largest magnitude into
// [0.5, 1); layer norm subtracts the row's first value before summing (exact
// for close values) and keeps the mean as that value plus a small part.
// Variants: ROWNORM, NORMALIZE, SOFTMAX, LAYERNORM; each with SUBGROUP or not.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
#ifdef LAYERNORM
layout(std430, binding = 2) readonly buffer G { float g[]; };
layout(std430, binding = 3) readonly buffer Bt { float bt[]; };
#endif

layout(push_constant) uniform PC {
    uint x_off, y_off, g_off, b_off, rows, d;
    float eps;
    uint has_g, has_b;
} pc;

const float INF = 1.0 / 0.0;

void main()
{
    uint r = flat_group();
    if (r >= pc.rows)
        return; // the whole workgroup: control flow stays uniform
    uint t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x, d = pc.d;
    uint xr = pc.x_off + r * d, yr = pc.y_off + r * d;
#if defined(SOFTMAX)
    float m = -INF, nan = 0.0;
    for (uint i = t; i < d; i += W) {
        float v = x[xr + i];
        if (v != v)
            nan = 1.0;
        else
            m = max(m, v);
    }
    nan = wg_max(nan);
    m = wg_max(m);
    if (nan > 0.0 || m == -INF) { // NaN anywhere: all NaN; all -inf: all 0
        for (uint i = t; i < d; i += W)
            y[yr + i] = nan > 0.0 ? 0.0 / 0.0 : 0.0;
        return;
    }
    if (m == INF) { // the +inf entries share the mass
        float n_inf = 0.0;
        for (uint i = t; i < d; i += W)
            n_inf += x[xr + i] == INF ? 1.0 : 0.0;
        n_inf = wg_sum(n_inf);
        for (uint i = t; i < d; i += W)
            y[yr + i] = x[xr + i] == INF ? 1.0 / n_inf : 0.0;
        return;
    }
    float s = 0.0;
    for (uint i = t; i < d; i += W)
        s += exp_neg(x[xr + i] - m);
    s = wg_sum(s);
    barrier(); // every read of x before any write of y (y may be x)
    for (uint i = t; i < d; i += W)
        y[yr + i] = exp_neg(x[xr + i] - m) / s;
#elif defined(LAYERNORM)
    float x0 = x[xr];
    float s = 0.0;
    for (uint i = t; i < d; i += W)
        s += x[xr + i] - x0;
    float delta = wg_sum(s) / float(d); // mean = x0 + delta
    float mx = 0.0;
    for (uint i = t; i < d; i += W)
        mx = max(mx, abs((x[xr + i] - x0) - delta));
    mx = wg_max(mx);
    int e;
    frexp(mx, e);
    if (mx == 0.0)
        e = 0;
    float ss = 0.0;
    for (uint i = t; i < d; i += W) {
        float v = ldexp((x[xr + i] - x0) - delta, -e);
        ss += v * v;
    }
    ss = wg_sum(ss);
    // (x - mean) / sqrt(var + eps) = v / sqrt(ss/d + eps 2^-2e), v = (x - mean) 2^-e;
    // when eps 2^-2e overflows, var is far under eps
    float e2 = ldexp(ldexp(pc.eps, -e), -e);
    float var = ldexp(ldexp(ss / float(d), e), e);
    float den = isinf(e2) ? sqrt(var + pc.eps) : sqrt(ss / float(d) + e2);
    barrier();
    for (uint i = t; i < d; i += W) {
        float dev = (x[xr + i] - x0) - delta;
        float v = isinf(e2) ? dev / den : ldexp(dev, -e) / den;
        if (pc.has_g != 0)
            v *= g[pc.g_off + i];
        if (pc.has_b != 0)
            v += bt[pc.b_off + i];
        y[yr + i] = v;
    }
#else // ROWNORM, NORMALIZE
    float mx = 0.0, nan = 0.0;
    for (uint i = t; i < d; i += W) {
        float v = x[xr + i];
        if (v != v)
            nan = 1.0;
        else
            mx = max(mx, abs(v));
    }
    nan = wg_max(nan);
    mx = wg_max(mx);
    int e = 0;
    if (mx > 0.0 && mx < INF)
        frexp(mx, e);
    float ss = 0.0;
    for (uint i = t; i < d; i += W) {
        float v = ldexp(x[xr + i], -e);
        ss += v * v;
    }
    ss = wg_sum(ss);
    float root = sqrt(ss);
    float norm = nan > 0.0 ? 0.0 / 0.0 : mx == INF ? INF : ldexp(root, e);
#ifdef ROWNORM
    if (t == 0)
        y[pc.y_off + r] = norm;
#else
    barrier();
    for (uint i = t; i < d; i += W) {
        float v = x[xr + i];
        // x / max(norm, eps), a NaN norm kept NaN; x / norm as (x 2^-e) / root
        float o;
        if (norm != norm)
            o = norm;
        else if (norm < pc.eps)
            o = v / pc.eps;
        else if (mx == INF)
            o = v * 0.0; // x / inf, and NaN for the infinities themselves
        else
            o = ldexp(v, -e) / root;
        y[yr + i] = o;
    }
#endif
#endif
}
