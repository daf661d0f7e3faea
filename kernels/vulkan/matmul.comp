#version 450
// matmul.comp: C = alpha op(A) op(B) + beta C, tiled: each workgroup makes a
// BM x BN tile of C from BK-deep slices of A and B staged in shared memory;
// each of the TS x TS threads keeps a 4 x 4 block of sums in registers.
// Transposes and batches are strides (push constants), so one shader serves
// NN, NT, TN, TT and rank-3 batches (a stride of 0 shares an operand).
// Each C element is one f32 sum in order of k: the same bits on every run.
// Variants: TS = 16 (256 threads, 64 x 64 tiles), TS = 8 (64 threads, 32 x 32)
// for devices that allow fewer than 256 invocations per workgroup; A_F16,
// B_F16: that operand stored as f16 (16-bit storage), widened to f32 as it is
// staged, exactly, so the sums are those of the f32 operands' values.
#ifndef TS
#define TS 16
#endif
#define BM (TS * 4)
#define BN (TS * 4)
#define BK 16
layout(local_size_x = TS, local_size_y = TS) in;

#if defined(A_F16) || defined(B_F16)
#extension GL_EXT_shader_16bit_storage : require
#endif
#ifdef A_F16
layout(std430, binding = 0) readonly buffer A { float16_t a[]; };
#else
layout(std430, binding = 0) readonly buffer A { float a[]; };
#endif
#ifdef B_F16
layout(std430, binding = 1) readonly buffer B { float16_t b[]; };
#else
layout(std430, binding = 1) readonly buffer B { float b[]; };
#endif
layout(std430, binding = 2) buffer C { float c[]; };

layout(push_constant) uniform PC {
    uint a_off, b_off, c_off;  // in elements of each buffer's type
    uint m, n, k;
    uint a_rs, a_cs, b_rs, b_cs; // op(A)[i,p] at i a_rs + p a_cs; op(B)[p,j] at p b_rs + j b_cs
    uint a_bs, b_bs, c_bs;       // batch strides (0: shared)
    float alpha, beta;
} pc;

shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

void main()
{
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    uint t = ty * TS + tx;
    uint i0 = gl_WorkGroupID.y * BM, j0 = gl_WorkGroupID.x * BN, z = gl_WorkGroupID.z;
    uint ab = pc.a_off + z * pc.a_bs, bb = pc.b_off + z * pc.b_bs;
    float acc[4][4];
    for (int r = 0; r < 4; r++)
        for (int q = 0; q < 4; q++)
            acc[r][q] = 0.0;
    for (uint p0 = 0; p0 < pc.k; p0 += BK) {
        // stage the slices: BM x BK of A and BK x BN of B, zero past the edges
        for (uint e = t; e < BM * BK; e += TS * TS) {
            uint ii = e / BK, pp = e % BK;
            uint i = i0 + ii, p = p0 + pp;
            As[pp][ii] = i < pc.m && p < pc.k ? float(a[ab + i * pc.a_rs + p * pc.a_cs]) : 0.0;
        }
        for (uint e = t; e < BN * BK; e += TS * TS) {
            uint jj = e % BN, pp = e / BN;
            uint j = j0 + jj, p = p0 + pp;
            Bs[pp][jj] = j < pc.n && p < pc.k ? float(b[bb + p * pc.b_rs + j * pc.b_cs]) : 0.0;
        }
        barrier();
        uint pe = min(uint(BK), pc.k - p0);
        for (uint pp = 0; pp < pe; pp++) {
            float av[4], bv[4];
            for (int r = 0; r < 4; r++)
                av[r] = As[pp][ty + r * TS];
            for (int q = 0; q < 4; q++)
                bv[q] = Bs[pp][tx + q * TS];
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < 4; q++)
                    acc[r][q] += av[r] * bv[q];
        }
        barrier();
    }
    uint cb = pc.c_off + z * pc.c_bs;
    for (int r = 0; r < 4; r++) {
        uint i = i0 + ty + r * TS;
        if (i >= pc.m)
            continue;
        for (int q = 0; q < 4; q++) {
            uint j = j0 + tx + q * TS;
            if (j >= pc.n)
                continue;
            uint at = cb + i * pc.n + j;
            // beta == 0 ignores C, NaN and all, as BLAS does
            c[at] = pc.beta == 0.0 ? pc.alpha * acc[r][q] : pc.alpha * acc[r][q] + pc.beta * c[at];
        }
    }
}
