/* select.cu: simtopk's candidates (lib/op/simtopk_dev.c), one block a row of a
 * score tile (row = blockIdx.x + blockIdx.y * gridDim.x; rows past the end
 * skipped by the whole block): the best k of the row's m scores and of the k
 * entries kept in vals/idx from the tiles before (when kept is set), by a
 * radix select on the order keys (common.cuh: NaN lowest, -0 as +0): four
 * passes of 8 bits find the k-th key exactly. Written back in no particular
 * order. Entries tied at the k-th key are taken in whatever order the
 * atomics give: any choice among them keeps what the host relies on, that
 * every entry left out scores at most the least one taken. The host sorts
 * what it gets. A handful of barriers a row, where a full sort would take
 * dozens a round. Ported from kernels/vulkan/select.comp. */
#include "compat.h"
#include "common.cuh"

#define TQ_SEL_KMAX 512 /* lib/op/simtopk_dev.h's TQ_SIMDEV_KP_MAX */

/* The float of an order key (NaN for key 0, +0 for -0: as the CPU ranks). */
static __device__ __forceinline__ float tq_key_value(unsigned key)
{
    if (key == 0u)
        return NAN;
    return __uint_as_float((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

extern "C" __global__ void tq_k_select(const float *x, float *vals, long long *idx, unsigned rows, unsigned m, unsigned k, int kept, long long base)
{
    __shared__ unsigned s_key[TQ_SEL_KMAX];
    __shared__ long long s_idx[TQ_SEL_KMAX];
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix, s_need, s_gt, s_eq;
    unsigned long long r = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x;
    if (r >= rows)
        return; /* the whole block: control flow stays uniform */
    const unsigned t = threadIdx.x, W = blockDim.x;
    const float *xr = x + r * m;
    float *vr = vals + r * k;
    long long *ir = idx + r * k;
    const unsigned nk = kept ? k : 0u, n = nk + m;
    /* the kept entries move to shared memory: their places get rewritten */
    for (unsigned s = t; s < nk; s += W) {
        s_key[s] = tq_order_key(vr[s]);
        s_idx[s] = ir[s];
    }
    /* the k-th largest key, 8 bits a pass: prefix holds the bits found, need
     * the rank still sought among the keys that share them (n >= k: the host
     * sees to it) */
    unsigned prefix = 0u, mask = 0u, need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (unsigned b = t; b < 256u; b += W)
            hist[b] = 0u;
        __syncthreads();
        for (unsigned s = t; s < n; s += W) {
            unsigned key = s < nk ? s_key[s] : tq_order_key(xr[s - nk]);
            if ((key & mask) == prefix)
                atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (t == 0u) {
            unsigned cum = 0u, b = 256u;
            while (b > 0u) {
                b--;
                if (cum + hist[b] >= need)
                    break;
                cum += hist[b];
            }
            s_prefix = prefix | (b << shift);
            s_need = need - cum;
        }
        __syncthreads();
        prefix = s_prefix;
        need = s_need;
        mask |= 255u << shift;
    }
    /* prefix is the k-th key: every larger key goes, and `need` of those equal */
    if (t == 0u) {
        s_gt = 0u;
        s_eq = 0u;
    }
    __syncthreads();
    const unsigned ngt = k - need;
    for (unsigned s = t; s < n; s += W) {
        unsigned key;
        long long i;
        if (s < nk) {
            key = s_key[s];
            i = s_idx[s];
        } else {
            key = tq_order_key(xr[s - nk]);
            i = base + (long long)(s - nk);
        }
        unsigned slot = 0xffffffffu;
        if (key > prefix) {
            slot = atomicAdd(&s_gt, 1u);
        } else if (key == prefix) {
            unsigned e = atomicAdd(&s_eq, 1u);
            if (e < need)
                slot = ngt + e;
        }
        if (slot != 0xffffffffu) {
            vr[slot] = tq_key_value(key);
            ir[slot] = i;
        }
    }
}
