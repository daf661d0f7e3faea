#version 450
// above.comp: for simtopk's queries that their candidates did not settle,
// the rows whose f32 score reaches the query's threshold (below which the
// host has proven a row cannot enter the list), one workgroup a row of a
// score tile: their numbers go to the row's list, in no particular order, up
// to cap; the count goes on past cap, so the host knows when it overflowed.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer T { float thr[]; };
layout(std430, binding = 2) buffer C { uint cnt[]; };
layout(std430, binding = 3) buffer L { uint lst[]; };

layout(push_constant) uniform PC {
    uint x_off, t_off, c_off, l_off, rows, m, cap, base; // row j of the tile is block row base + j
} pc;

void main()
{
    uint r = flat_group();
    if (r >= pc.rows)
        return;
    uint t = gl_LocalInvocationID.x, W = gl_WorkGroupSize.x;
    float th = thr[pc.t_off + r];
    for (uint j = t; j < pc.m; j += W)
        if (x[pc.x_off + r * pc.m + j] >= th) {
            uint at = atomicAdd(cnt[pc.c_off + r], 1u);
            if (at < pc.cap)
                lst[pc.l_off + r * pc.cap + at] = pc.base + j;
        }
}
