#version 450
// topk.comp: one round of the k largest of each row (k <= S/2), one
// workgroup a row. The host runs rounds over the row: each takes the best
// `kept` so far from the outputs, the next `take` values of the row, ranks
// them all with a bitonic sort in shared memory and writes back the best
// min(k, kept + take). vals come from x itself (bits as they are).
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"
#define S 1024
#include "bitonic.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) buffer V { float vals[]; };
layout(std430, binding = 2) buffer I { uint idx[]; }; // i64 as (low, high)

layout(push_constant) uniform PC {
    uint x_off, v_off, i_off, rows, m, k;
    uint pos, take, kept; // this round: row items [pos, pos + take)
} pc;

void main()
{
    uint r = flat_group();
    if (r >= pc.rows)
        return;
    uint t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x;
    uint out0 = r * pc.k;
    uint n2 = 2; // the sort covers the next power of two of what this round holds
    while (n2 < pc.kept + pc.take)
        n2 <<= 1;
    for (uint s = t; s < n2; s += W) {
        uint key = 0u, lo = 0xffffffffu, hi = 0xffffffffu;
        if (s < pc.kept) {
            lo = idx[pc.i_off + 2 * (out0 + s)];
            hi = idx[pc.i_off + 2 * (out0 + s) + 1];
            if (hi == 0xffffffffu) { // an empty slot (-1): padding
                lo = 0xffffffffu;
            } else {
                key = order_key(vals[pc.v_off + out0 + s]);
            }
        } else if (s < pc.kept + pc.take) {
            uint j = pc.pos + (s - pc.kept);
            key = order_key(x[pc.x_off + r * pc.m + j]);
            lo = j;
            hi = 0u;
        }
        s_key[s] = key;
        s_lo[s] = lo;
        s_hi[s] = hi;
    }
    bitonic_sort(n2);
    uint n = min(pc.k, pc.kept + pc.take);
    for (uint j = t; j < n; j += W) {
        bool empty = s_hi[j] == 0xffffffffu;
        vals[pc.v_off + out0 + j] = x[pc.x_off + r * pc.m + s_lo[j]];
        idx[pc.i_off + 2 * (out0 + j)] = empty ? 0xffffffffu : s_lo[j];
        idx[pc.i_off + 2 * (out0 + j) + 1] = s_hi[j];
    }
}
