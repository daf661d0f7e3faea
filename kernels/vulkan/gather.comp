#version 450
// gather.comp: y[i,:] = x[idx[i],:] for rows of any byte length. One
// invocation writes one 32-bit word of y, byte by byte from wherever its
// bytes come from; the last word keeps y's bytes past its end (they belong
// to something else). Indices were checked on the host.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) readonly buffer I { uint idx[]; }; // i64: low, high words
layout(std430, binding = 2) buffer Y { uint y[]; };

layout(push_constant) uniform PC {
    uint x_off, i_off, y_off; // words
    uint row_bytes, y_bytes;
} pc;

uint byte_at(uint b) // byte b of y, from x
{
    uint r = b / pc.row_bytes, c = b % pc.row_bytes;
    uint src = idx[pc.i_off + 2 * r] * pc.row_bytes + c;
    return (x[pc.x_off + src / 4] >> (8 * (src % 4))) & 0xffu;
}

void main()
{
    uint w = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uint b0 = 4 * w;
    if (b0 >= pc.y_bytes)
        return;
    if (pc.row_bytes % 4 == 0) { // whole words
        uint r = b0 / pc.row_bytes, c = b0 % pc.row_bytes;
        y[pc.y_off + w] = x[pc.x_off + (idx[pc.i_off + 2 * r] * pc.row_bytes + c) / 4];
        return;
    }
    uint v = b0 + 4 <= pc.y_bytes ? 0u : y[pc.y_off + w];
    for (uint q = 0; q < 4 && b0 + q < pc.y_bytes; q++)
        v = (v & ~(0xffu << (8 * q))) | (byte_at(b0 + q) << (8 * q));
    y[pc.y_off + w] = v;
}
