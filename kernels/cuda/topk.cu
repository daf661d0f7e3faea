/* topk.cu: the k largest of each row, descending, one block a row (row =
 * blockIdx.x + blockIdx.y * gridDim.x; rows past the end skipped by the whole
 * block). The order is lib/cpu/topk.c's and kernels/vulkan/topk.comp's:
 * larger first, ties to the lower index, NaN below every number (NaNs among
 * themselves by index), -0 equal to +0. Each element gets a 64-bit rank that
 * orders it exactly so: the float's order key (common.cuh: NaN 0, -0 as +0)
 * above, the complement of its index below; ranks are all distinct. Simple and
 * exact rather than clever: k rounds (the host sends k <= 256), each a
 * block-wide maximum of the threads' best ranks; only the thread that owned
 * the pick looks again through its elements (for its best below the pick),
 * so the row is read about once, not k times. vals are copied from x, bits as
 * they are. */
#include "compat.h"
#include "common.cuh"

static __device__ __forceinline__ unsigned long long tq_rank(float v, unsigned i)
{
    return (unsigned long long)tq_order_key(v) << 32 | (0xffffffffu - i);
}

/* Block-wide maximum of a 64-bit value, as tq_block_max (every thread calls). */
static __device__ __forceinline__ unsigned long long tq_block_max_u64(unsigned long long v,
                                                                      unsigned long long *slots)
{
    for (int o = warpSize / 2; o; o >>= 1) {
        unsigned long long w = tq_shfl_xor(v, o);
        v = w > v ? w : v;
    }
    unsigned nw = (blockDim.x + warpSize - 1) / warpSize;
    __syncthreads();
    if (tq_lane() == 0)
        slots[threadIdx.x / warpSize] = v;
    __syncthreads();
    unsigned long long s = 0;
    for (unsigned w = 0; w < nw; w++)
        s = slots[w] > s ? slots[w] : s;
    return s;
}

/* The largest rank below `below` among this thread's elements (i = t, t + W,
 * ...), 0 when none. */
static __device__ __forceinline__ unsigned long long tq_best_below(const float *xr, unsigned m,
                                                                   unsigned long long below)
{
    unsigned long long best = 0;
    for (unsigned i = threadIdx.x; i < m; i += blockDim.x) {
        unsigned long long q = tq_rank(xr[i], i);
        if (q < below && q > best)
            best = q;
    }
    return best;
}

extern "C" __global__ void tq_k_topk(const float *x, float *vals, long long *idx, unsigned rows, unsigned m, unsigned k)
{
    __shared__ unsigned long long slots[TQ_MAX_WARPS];
    unsigned long long r = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x;
    if (r >= rows)
        return; /* the whole block: control flow stays uniform */
    const float *xr = x + r * m;
    /* every rank is above 0 (an index is at most 2^32 - 2) and below ~0 */
    unsigned long long mine = tq_best_below(xr, m, ~0ull);
    for (unsigned j = 0; j < k; j++) {
        unsigned long long best = tq_block_max_u64(mine, slots);
        if (threadIdx.x == 0 && best) { /* k <= m: a pick exists (0: none, never read past m) */
            unsigned i = 0xffffffffu - (unsigned)best;
            vals[r * k + j] = xr[i];
            idx[r * k + j] = i;
        }
        /* ranks are distinct: one thread owns the pick and looks again
         * below it; every other thread's best is still its best below it */
        if (mine == best)
            mine = tq_best_below(xr, m, best);
    }
}
