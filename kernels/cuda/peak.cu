/* peak.cu: the device's peak f32 FMA rate, for tq-bench's ceilings (a
 * benchmark probe, not an op): each thread runs 8 independent chains of fused
 * multiply-adds in registers, acc = acc m + c (converging to c / (1 - m): no
 * overflow, no subnormals), enough chains and threads that the FMA pipes
 * never wait on one, and writes their sum so that the compiler keeps the
 * work. m and c come as arguments, so nothing folds at compile time. The
 * chains are spelled out as scalars (no array, no unroll pragma) so that every
 * compiler keeps them in registers. Flops: 2 * 8 * iters per element of out
 * (TQ_PEAK_CHAINS in lib/cuda/gpu.h). */
#include "compat.h"
#include "common.cuh"

#define TQ_PEAK_STEP(a) a = fmaf(a, m, c)

extern "C" __global__ void tq_k_fma_peak(float *out, unsigned long long n, unsigned iters, float m, float c)
{
    TQ_GRID_STRIDE(i, n) {
        float a0 = 1e-3f * (float)(i & 1023), a1 = a0 + 1.0f, a2 = a0 + 2.0f, a3 = a0 + 3.0f;
        float a4 = a0 + 4.0f, a5 = a0 + 5.0f, a6 = a0 + 6.0f, a7 = a0 + 7.0f;
        for (unsigned it = 0; it < iters; it++) {
            TQ_PEAK_STEP(a0);
            TQ_PEAK_STEP(a1);
            TQ_PEAK_STEP(a2);
            TQ_PEAK_STEP(a3);
            TQ_PEAK_STEP(a4);
            TQ_PEAK_STEP(a5);
            TQ_PEAK_STEP(a6);
            TQ_PEAK_STEP(a7);
        }
        out[i] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
    }
}
