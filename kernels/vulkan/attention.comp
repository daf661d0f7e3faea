#version 450
// attention.comp: fused multi-head attention, one workgroup a query row
// (batch item b, head h, query i). Keys go by in tiles of one key a thread:
// each thread scores its key (a dot product over Dk, in order), the tile's
// maximum and sum update the row's running max m and sum l (online softmax),
// and each thread folds the tile's weights into its output columns of v.
// Never an [Lq, Lk] matrix. A query whose keys are all masked gets 0.
// POST_WEIGHTS: the softmax itself, from the final m and l of each row.
// POST_RECEIVED: one workgroup a key (b, j): the weight it receives from
// queries i != j, summed over i and averaged over heads.
// BIAS: a score bias f32 [H, Lq, Lk] (MPNet's relative positions) added to
// every batch item's scaled scores; a ninth buffer, so only these variants
// need a device with nine storage buffers a stage (tq_vk_caps).
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"
#include "reduce.glsl"

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer Vb { float v[]; };
layout(std430, binding = 3) buffer O { float o[]; };     // out, weights or received
layout(std430, binding = 4) buffer St { float stats[]; }; // m then l, [B H Lq] each
layout(std430, binding = 5) readonly buffer L { uint klen[]; }; // i64 [B]
layout(std430, binding = 6) readonly buffer QG { uint qgrp[]; }; // i64 [B, Lq]
layout(std430, binding = 7) readonly buffer KG { uint kgrp[]; }; // i64 [B, Lk]
#ifdef BIAS
layout(std430, binding = 8) readonly buffer Bi { float bias[]; }; // f32 [H, Lq, Lk]
#endif

layout(push_constant) uniform PC {
    uint q_off, k_off, v_off, o_off, st_off, len_off, qg_off, kg_off;
    uint B, Lq, Lk, H, Dk, Dv;
    float scale;
    uint causal, has_len, has_groups;
    uint bias_off;
} pc;

const float INF = 1.0 / 0.0;
shared float ps[256];

bool live(uint b, uint i, uint j)
{
    if (pc.causal != 0u && j > i)
        return false;
    if (pc.has_len != 0u) {
        uint lo = klen[pc.len_off + 2 * b], hi = klen[pc.len_off + 2 * b + 1];
        if (int(hi) < 0 || (hi == 0u && j >= lo))
            return false;
    }
    if (pc.has_groups != 0u) {
        uint qa = pc.qg_off + 2 * (b * pc.Lq + i), ka = pc.kg_off + 2 * (b * pc.Lk + j);
        if (qgrp[qa] != kgrp[ka] || qgrp[qa + 1] != kgrp[ka + 1])
            return false;
    }
    return true;
}

float score(uint b, uint h, uint i, uint j)
{
    uint dq = pc.H * pc.Dk;
    uint qa = pc.q_off + (b * pc.Lq + i) * dq + h * pc.Dk;
    uint ka = pc.k_off + (b * pc.Lk + j) * dq + h * pc.Dk;
    float s = 0.0;
    for (uint p = 0; p < pc.Dk; p++)
        s += q[qa + p] * k[ka + p];
#ifdef BIAS
    return pc.scale * s + bias[pc.bias_off + (h * pc.Lq + i) * pc.Lk + j];
#else
    return pc.scale * s;
#endif
}

#if defined(POST_RECEIVED)
void main()
{
    uint g = flat_group();
    if (g >= pc.B * pc.Lk)
        return;
    uint b = g / pc.Lk, j = g % pc.Lk, t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x;
    float acc = 0.0;
    for (uint hi = t; hi < pc.H * pc.Lq; hi += W) {
        uint h = hi / pc.Lq, i = hi % pc.Lq;
        uint sa = pc.st_off + (b * pc.H + h) * pc.Lq + i;
        float m = stats[sa], l = stats[sa + pc.B * pc.H * pc.Lq];
        if (i != j && l > 0.0 && live(b, i, j))
            acc += exp_neg(score(b, h, i, j) - m) / l;
    }
    acc = wg_sum(acc);
    if (t == 0u)
        o[pc.o_off + g] = acc / float(pc.H);
}
#else
void main()
{
    uint g = flat_group();
    if (g >= pc.B * pc.H * pc.Lq)
        return;
    uint i = g % pc.Lq, h = (g / pc.Lq) % pc.H, b = g / (pc.Lq * pc.H);
    uint t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x;
#ifdef POST_WEIGHTS
    float m = stats[pc.st_off + g], l = stats[pc.st_off + g + pc.B * pc.H * pc.Lq];
    for (uint j = t; j < pc.Lk; j += W)
        o[pc.o_off + g * pc.Lk + j] = l > 0.0 && live(b, i, j) ? exp_neg(score(b, h, i, j) - m) / l : 0.0;
#else
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0); // columns t, t + W, ... of this head's Dv
    float m = -INF, l = 0.0;
    uint va = pc.v_off + h * pc.Dv, dv = pc.H * pc.Dv;
    for (uint j0 = 0; j0 < pc.Lk; j0 += W) {
        uint j = j0 + t;
        float s = j < pc.Lk && live(b, i, j) ? score(b, h, i, j) : -INF;
        float mt = wg_max(s);
        float mn = max(m, mt);
        if (mn == -INF) // nothing live yet
            continue;
        float alpha = exp_neg(m - mn); // 0 when m was -inf
        float p = exp_neg(s - mn);
        l = l * alpha + wg_sum(p);
        ps[t] = p;
        barrier();
        uint n = min(W, pc.Lk - j0);
        for (uint c = 0; c < 4; c++) {
            uint e = t + c * W;
            if (e >= pc.Dv)
                break;
            float a = acc[c] * alpha;
            for (uint jj = 0; jj < n; jj++)
                a += ps[jj] * v[va + (b * pc.Lk + j0 + jj) * dv + e];
            acc[c] = a;
        }
        barrier();
        m = mn;
    }
    uint oa = pc.o_off + (b * pc.Lq + i) * dv + h * pc.Dv;
    for (uint c = 0; c < 4; c++) {
        uint e = t + c * W;
        if (e < pc.Dv)
            o[oa + e] = l > 0.0 ? acc[c] / l : 0.0;
    }
    if (t == 0u) {
        stats[pc.st_off + g] = m;
        stats[pc.st_off + g + pc.B * pc.H * pc.Lq] = l;
    }
#endif
}
#endif
