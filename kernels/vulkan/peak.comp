#version 450
// peak.comp: the device's peak f32 FMA rate, for tq-bench's ceilings (a
// benchmark probe, not an op), as kernels/cuda/peak.cu: each invocation runs 8
// independent chains of fused multiply-adds, acc = fma(acc, m, c) (converging
// to c / (1 - m): no overflow, no subnormals), and writes their sum to its
// element of out so that the work stays. m and c come as push constants, so
// nothing folds at compile time. Flops: 2 * 8 * iters an element
// (lib/vulkan/ops_peak.c counts them).
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"

layout(std430, binding = 0) buffer Out { float o[]; };

layout(push_constant) uniform PC {
    uint out_off, n, iters;
    float m, c;
} pc;

void main()
{
    uint i = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    if (i >= pc.n)
        return;
    float m = pc.m, c = pc.c;
    float a0 = 1e-3 * float(i & 1023u), a1 = a0 + 1.0, a2 = a0 + 2.0, a3 = a0 + 3.0;
    float a4 = a0 + 4.0, a5 = a0 + 5.0, a6 = a0 + 6.0, a7 = a0 + 7.0;
    for (uint it = 0u; it < pc.iters; it++) {
        a0 = fma(a0, m, c);
        a1 = fma(a1, m, c);
        a2 = fma(a2, m, c);
        a3 = fma(a3, m, c);
        a4 = fma(a4, m, c);
        a5 = fma(a5, m, c);
        a6 = fma(a6, m, c);
        a7 = fma(a7, m, c);
    }
    o[pc.out_off + i] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}
