#version 450
// convert.comp: dtype conversions among f32, f16, bf16, i8, u8, i16 and i32
// (i32 to f32 and i32 itself; i32 to the others goes through the host, as
// f64, i64 and the block codes do). One invocation writes one 32-bit word of
// y: 1, 2 or 4 elements; the last word keeps y's bytes past its end. Every
// encoder works on bits: round to nearest even, NaN kept quiet, integers
// saturated with NaN -> 0, as lib/stream/dtype.c does.
#extension GL_GOOGLE_include_directive : enable
layout(local_size_x_id = 0) in; // before the includes: see common.glsl
#include "common.glsl"

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) buffer Y { uint y[]; };

layout(push_constant) uniform PC {
    uint x_off, y_off; // words
    uint n, from, to, from_size, to_size;
} pc;

// tq_dtype codes (tq.h)
const uint F32 = 1, F16 = 3, BF16 = 4, I8 = 5, U8 = 6, I16 = 7, I32 = 8;

uint elem_bits(uint i) // element i of x, as raw bits in the low from_size bytes
{
    uint b = i * pc.from_size;
    uint w = x[pc.x_off + b / 4];
    if (pc.from_size == 4)
        return w;
    return bitfieldExtract(w, int(8 * (b % 4)), int(8 * pc.from_size));
}

float f16_to_f32(uint h)
{
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0u) {
        float v = float(m) * 5.9604644775390625e-8; // m 2^-24, exact
        return s != 0u ? -v : v;
    }
    if (e == 31u)
        return uintBitsToFloat(s | 0x7f800000u | (m << 13) | (m != 0u ? 0x400000u : 0u));
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint f32_to_f16(float f)
{
    uint u = floatBitsToUint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) // NaN: quiet, top payload bits kept
        return s | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u) // rounds to 65520 or more: infinity
        return s | 0x7c00u;
    if (a < 0x38800000u) // a subnormal f16 (or 0): units of 2^-24, exact scaling
        return s | uint(roundEven(uintBitsToFloat(a) * 16777216.0));
    uint r = a - 0x38000000u; // rebias the exponent, then round at bit 13
    r += 0xfffu + ((r >> 13) & 1u);
    return s | (r >> 13);
}

uint f32_to_bf16(float f)
{
    uint u = floatBitsToUint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

float decode(uint v) // exact for every source dtype here but i32 beyond 2^24
{
    switch (pc.from) {
    case F32: return uintBitsToFloat(v);
    case F16: return f16_to_f32(v);
    case BF16: {
        uint u = v << 16;
        return uintBitsToFloat((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);
    }
    case I8: return float(bitfieldExtract(int(v), 0, 8));
    case U8: return float(v);
    case I16: return float(bitfieldExtract(int(v), 0, 16));
    default: return float(int(v)); // I32: correctly rounded
    }
}

uint to_int(float f, float lo, float hi_excl, int lo_i, int hi_i)
{
    if (f != f)
        return 0u;
    float r = roundEven(f);
    int v = r < lo ? lo_i : r >= hi_excl ? hi_i : int(r);
    return uint(v);
}

uint encode(uint bits) // the element's bits in y's dtype (low to_size bytes)
{
    if (pc.from == pc.to)
        return bits;
    if (pc.from == I32 && pc.to == F32)
        return floatBitsToUint(float(int(bits)));
    float f = decode(bits);
    switch (pc.to) {
    case F32: return floatBitsToUint(f);
    case F16: return f32_to_f16(f);
    case BF16: return f32_to_bf16(f);
    case I8: return to_int(f, -128.0, 128.0, -128, 127) & 0xffu;
    case U8: return to_int(f, 0.0, 256.0, 0, 255) & 0xffu;
    case I16: return to_int(f, -32768.0, 32768.0, -32768, 32767) & 0xffffu;
    default: return to_int(f, -2147483648.0, 2147483648.0, int(0x80000000u), 0x7fffffff);
    }
}

void main()
{
    uint w = flat_group() * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
    uint per = 4 / pc.to_size, e0 = w * per;
    if (e0 >= pc.n)
        return;
    if (per == 1) {
        y[pc.y_off + w] = encode(elem_bits(e0));
        return;
    }
    uint v = e0 + per <= pc.n ? 0u : y[pc.y_off + w];
    for (uint q = 0; q < per && e0 + q < pc.n; q++)
        v = bitfieldInsert(v, encode(elem_bits(e0 + q)), int(8 * q * pc.to_size), int(8 * pc.to_size));
    y[pc.y_off + w] = v;
}
