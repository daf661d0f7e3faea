/* above.cu: tq_op_above, and for simtopk's queries that their candidates did
 * not settle (lib/op/simtopk_dev.c), the rows whose f32 score is not below
 * the query's threshold (below which the host has proven a row cannot enter
 * the list; a NaN is not proven out, so it is listed), one block a
 * row of a score tile (row = blockIdx.x + blockIdx.y * gridDim.x): their
 * numbers (base + column) go to the row's list, in no particular order, up
 * to cap; the count goes on past cap, so the host knows when it overflowed.
 * Ported from kernels/vulkan/above.comp. */
#include "compat.h"
#include "common.cuh"

extern "C" __global__ void tq_k_above(const float *x, const float *thr, unsigned *cnt, unsigned *lst, unsigned rows, unsigned m, unsigned cap, unsigned base)
{
    unsigned long long r = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x;
    if (r >= rows)
        return; /* no barriers below: nothing to keep uniform */
    const float th = thr[r];
    const float *xr = x + r * m;
    for (unsigned j = threadIdx.x; j < m; j += blockDim.x)
        if (!(xr[j] < th)) {
            unsigned at = atomicAdd(&cnt[r], 1u);
            if (at < cap)
                lst[r * cap + at] = base + j;
        }
}
