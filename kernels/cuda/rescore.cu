/* rescore.cu: the exact scores of simtopk's candidates on the device
 * (lib/op/simtopk_dev.c), bit for bit those of lib/op/simscore.c, so that
 * the candidates' rows need not travel to the host (10,000 queries x 42
 * candidates of 384 values are 600 MiB of rows; their scores 1.6 MiB).
 *
 * simscore.h fixes the order: lane j (0..7) sums, in order, the double
 * products (dot) or squared double differences (L2) of the elements
 * i = j mod 8 below the last multiple of 8, lane 0 then the rest in order,
 * and the lanes add up as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)),
 * rounded once to f32; L2's score is 0 - that sum. Here the 8 lanes are 8
 * threads of a warp, a candidate each group of 8: the butterfly over lanes
 * 1, 2, 4 adds exactly those pairs (IEEE addition commutes, bits and all).
 * Every operation is an explicit round-to-nearest double intrinsic, so that
 * no compiler fuses a product into an add (a float's square difference is
 * not exact in double; a fused one would round differently from the CPU).
 *
 * q [nq, d] f32, x [ndb, d] f32 (the block), ci [nq, kp] i64 (base + row of
 * x), out [nq, kp] f32. A row index outside the block gets NaN (the host
 * never asks for one). */
#include "compat.h"
#include "common.cuh"

extern "C" __global__ void tq_k_rescore(const float *q, const float *x, const long long *ci, float *out, unsigned long long n, unsigned kp, unsigned d, unsigned long long ndb, long long base, unsigned metric)
{
    /* 8 threads a candidate; the blocks stride over all of them */
    const unsigned lane = threadIdx.x & 7u;
    const unsigned long long per = blockDim.x / 8u, stride = per * gridDim.x * gridDim.y;
    const unsigned d8 = d & ~7u;
    for (unsigned long long c = ((unsigned long long)blockIdx.y * gridDim.x + blockIdx.x) * per +
                                threadIdx.x / 8u;
         c - threadIdx.x / 8u < n; c += stride) {
        /* every thread of a group of 8 goes round the same times (the
         * shuffles need all lanes): those past the end compute nothing */
        int live = c < n;
        unsigned long long qi = live ? c / kp : 0u;
        long long row = live ? ci[c] - base : 0;
        int inside = live && row >= 0 && (unsigned long long)row < ndb;
        const float *a = q + qi * d, *b = x + (inside ? (unsigned long long)row * d : 0u);
        double s = 0.0;
        if (inside) {
            if (metric) {
                for (unsigned i = lane; i < d8; i += 8u) {
                    double t = __dsub_rn((double)a[i], (double)b[i]);
                    s = __dadd_rn(s, __dmul_rn(t, t));
                }
                for (unsigned i = d8; lane == 0u && i < d; i++) {
                    double t = __dsub_rn((double)a[i], (double)b[i]);
                    s = __dadd_rn(s, __dmul_rn(t, t));
                }
            } else {
                for (unsigned i = lane; i < d8; i += 8u)
                    s = __dadd_rn(s, __dmul_rn((double)a[i], (double)b[i]));
                for (unsigned i = d8; lane == 0u && i < d; i++)
                    s = __dadd_rn(s, __dmul_rn((double)a[i], (double)b[i]));
            }
        }
        for (int o = 1; o < 8; o <<= 1)
            s = __dadd_rn(s, tq_shfl_xor(s, o));
        if (live && lane == 0u)
            out[c] = !inside ? NAN : metric ? (float)__dsub_rn(0.0, s) : (float)s;
    }
}
