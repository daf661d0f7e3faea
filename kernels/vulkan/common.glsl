// common.glsl: what the tq compute shaders share. Buffers are bound whole;
// each tensor's place in its buffer comes as a word offset in the push
// constants. Groups may be spread over x and y (over 65535 of them): the flat
// group id puts them back in a line.
// An includer declares its workgroup size (layout(local_size_x_id = 0) in)
// before including these files: glslang folds gl_WorkGroupSize in code it
// compiles before that declaration to its default, 1, so a loop striding by
// it or a tree halving it runs on one thread's share (rows.comp's plain
// reductions summed one element a row that way).

uint flat_group() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

// exp(a) in f32 for a <= 0 (NaN stays NaN): a = n ln2 + r, |r| <= ln2/2, with
// ln2 in two parts so that r is exact; exp(r) by its Taylor series to degree
// 7 (error under an f32 ulp); 2^n applied in two steps so that subnormal
// results come out right. Below -104 the f32 result is 0.
float exp_neg(float a)
{
    if (!(a > -104.0))
        return a != a ? a : 0.0;
    float n = roundEven(a * 1.44269504);
    float r = (a - n * 0.693145752) - n * 1.42860677e-6;
    float p = 1.98412698e-4;
    p = p * r + 1.38888889e-3;
    p = p * r + 8.33333333e-3;
    p = p * r + 4.16666667e-2;
    p = p * r + 1.66666667e-1;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int k = int(n);
    int k1 = k / 2;
    return ldexp(ldexp(p, k1), k - k1);
}

// The ranking of the top-k shaders as an unsigned order: a larger float a
// larger key, NaN lowest (0), -0 as +0.
uint order_key(float v)
{
    if (v != v)
        return 0u;
    if (v == 0.0)
        v = 0.0;
    uint u = floatBitsToUint(v);
    return (u & 0x80000000u) != 0u ? ~u : u | 0x80000000u;
}

float key_value(uint k) // the inverse, NaN for key 0
{
    if (k == 0u)
        return uintBitsToFloat(0x7fc00000u);
    return uintBitsToFloat((k & 0x80000000u) != 0u ? k ^ 0x80000000u : ~k);
}
