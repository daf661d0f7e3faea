/* select.cu: simtopk's candidates (lib/op/simtopk_dev.c), one block a row of a
 * score tile (row = blockIdx.x + blockIdx.y * gridDim.x; rows past the end
 * skipped by the whole block): the best k of the row's m scores and of the k
 * entries kept in vals/idx from the tiles before (when kept is set), by a
 * radix select on the order keys (common.cuh: NaN lowest, -0 as +0): four
 * passes of 8 bits find the k-th key exactly. Written back in no particular
 * order, with the k-th key in thr[row] for the next tile.
 *
 * Why a filter first: after a row's first tile, its k-th key is known, and
 * on real data only a few scores of each later tile beat it (about k / t in
 * the t-th tile of random rows). So a kept row's tile is read once, the
 * scores above thr[row] go to shared memory (TQ_SEL_BUF entries with the
 * kept ones), and the radix select runs over those alone, in shared memory;
 * a tile that beats nothing changes nothing and writes nothing. Only when
 * more scores beat it than the buffer holds (the first tile, adversarial
 * orders) does the select read the whole tile, four passes. On an H200 the
 * old select, four passes over every tile with every key's atomic on one
 * histogram bin (scores share their top bits), took most of a top-k's time.
 *
 * Entries tied at the k-th key are taken in whatever order the atomics give,
 * and a score equal to thr[row] is not taken by the filter: any choice among
 * ties keeps what the host relies on, that every entry left out scores at
 * most the least one taken. The host sorts what it gets. Ported from
 * kernels/vulkan/select.comp (the full path), the filter added. */
#include "compat.h"
#include "common.cuh"

#define TQ_SEL_KMAX 512 /* lib/op/simtopk_dev.h's TQ_SIMDEV_KP_MAX */
#define TQ_SEL_BUF 1536 /* kept entries and those that beat the k-th: 18 KiB */

/* The float of an order key (NaN for key 0, +0 for -0: as the CPU ranks). */
static __device__ __forceinline__ float tq_key_value(unsigned key)
{
    if (key == 0u)
        return NAN;
    return __uint_as_float((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

/* Entry s of the set the select runs over: the ns entries of shared memory
 * first, then the row's m scores when the whole tile takes part. */
static __device__ __forceinline__ unsigned tq_sel_key(const unsigned *s_key, unsigned ns,
                                                      const float *xr, unsigned s)
{
    return s < ns ? s_key[s] : tq_order_key(xr[s - ns]);
}

/* Appends the scores of row xr whose key beats `above` to the shared list
 * after `at` entries (up to TQ_SEL_BUF; *cnt counts them all). The loads go
 * 4 floats at a time where the row allows. */
static __device__ __forceinline__ void tq_sel_filter(const float *xr, unsigned m, long long base,
                                                     unsigned above, unsigned at, unsigned *s_key,
                                                     long long *s_idx, unsigned *cnt)
{
    const unsigned t = threadIdx.x, W = blockDim.x;
    unsigned i0 = 0u;
    if (((unsigned long long)xr & 15u) == 0u) {
        const float4 *x4 = (const float4 *)xr;
        for (unsigned v = t; v < m / 4u; v += W) {
            float4 f = x4[v];
            float e[4] = {f.x, f.y, f.z, f.w};
            for (int j = 0; j < 4; j++) {
                unsigned key = tq_order_key(e[j]);
                if (key > above) {
                    unsigned slot = at + atomicAdd(cnt, 1u);
                    if (slot < TQ_SEL_BUF) {
                        s_key[slot] = key;
                        s_idx[slot] = base + (long long)(4u * v + (unsigned)j);
                    }
                }
            }
        }
        i0 = m & ~3u;
    }
    for (unsigned i = i0 + t; i < m; i += W) {
        unsigned key = tq_order_key(xr[i]);
        if (key > above) {
            unsigned slot = at + atomicAdd(cnt, 1u);
            if (slot < TQ_SEL_BUF) {
                s_key[slot] = key;
                s_idx[slot] = base + (long long)i;
            }
        }
    }
}

extern "C" __global__ void tq_k_select(const float *x, float *vals, long long *idx, unsigned *thr, unsigned rows, unsigned m, unsigned k, int kept, long long base)
{
    __shared__ unsigned s_key[TQ_SEL_BUF];
    __shared__ long long s_idx[TQ_SEL_BUF];
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix, s_need, s_gt, s_eq, s_cnt;
    unsigned long long r = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x;
    if (r >= rows)
        return; /* the whole block: control flow stays uniform */
    const unsigned t = threadIdx.x, W = blockDim.x;
    const float *xr = x + r * m;
    float *vr = vals + r * k;
    long long *ir = idx + r * k;
    const unsigned nk = kept ? k : 0u;
    /* the kept entries move to shared memory: their places get rewritten */
    for (unsigned s = t; s < nk; s += W) {
        s_key[s] = tq_order_key(vr[s]);
        s_idx[s] = ir[s];
    }
    if (t == 0u)
        s_cnt = 0u;
    __syncthreads();
    /* ns entries in shared memory, then mx of the row's scores */
    unsigned ns = nk, mx = m;
    if (kept) {
        tq_sel_filter(xr, m, base, thr[r], nk, s_key, s_idx, &s_cnt);
        __syncthreads();
        unsigned c = s_cnt;
        if (c == 0u)
            return; /* nothing beats the k-th: the row's entries stay */
        if (nk + c <= TQ_SEL_BUF)
            ns = nk + c, mx = 0u;
    }
    const unsigned n = ns + mx;
    /* the k-th largest key, 8 bits a pass: prefix holds the bits found, need
     * the rank still sought among the keys that share them (n >= k: the host
     * sees to it) */
    unsigned prefix = 0u, mask = 0u, need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (unsigned b = t; b < 256u; b += W)
            hist[b] = 0u;
        __syncthreads();
        for (unsigned s = t; s < n; s += W) {
            unsigned key = tq_sel_key(s_key, ns, xr, s);
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
        thr[r] = prefix;
    }
    __syncthreads();
    const unsigned ngt = k - need;
    for (unsigned s = t; s < n; s += W) {
        unsigned key = tq_sel_key(s_key, ns, xr, s);
        long long i = s < ns ? s_idx[s] : base + (long long)(s - ns);
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
