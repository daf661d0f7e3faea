/* attention.cu: fused multi-head attention, ported from
 * kernels/vulkan/attention.comp; the arguments are the push constants of
 * lib/vulkan/ops_attention.c (less the offsets: pointers come offset), the
 * same list for the three kernels so the host packs them once:
 *   q f32 [B, Lq, H*Dk], k f32 [B, Lk, H*Dk], v f32 [B, Lk, H*Dv];
 *   o: out f32 [B, Lq, H*Dv] (tq_k_attention), weights f32 [B, H, Lq, Lk]
 *      (tq_k_attention_weights) or received f32 [B, Lk] (_received);
 *   stats f32: the running max m of every query row, [B H Lq], then its sum l,
 *      [B H Lq], written by tq_k_attention and read by the other two;
 *   klen i64 [B] (when has_len), qgrp i64 [B, Lq] and kgrp i64 [B, Lk] (when
 *      has_groups), bias f32 [H, Lq, Lk] (when has_bias: added to every batch
 *      item's scaled scores, as MPNet's relative positions); unused pointers
 *      may be anything (never read);
 *   scale: already resolved by the host (0 there means 1/sqrt(Dk)).
 * Key j is masked for query i when causal and j > i, when j >= klen[b] (a
 * negative length masks every key), or when qgrp[b,i] != kgrp[b,j].
 *
 * tq_k_attention: one block a query row g = (b, h, i) (g = ((b H) + h) Lq + i,
 * blocks grid-stride over B H Lq). Keys go by in tiles of one key a thread:
 * each thread scores its key (a dot product over Dk, in order), the tile's
 * maximum and sum update the row's running max m and sum l (online softmax),
 * and each thread folds the tile's weights into its output columns of v
 * (t, t + W, t + 2W, t + 3W: the host keeps Dv <= 4 blockDim.x). Never an
 * [Lq, Lk] matrix. A query whose keys are all masked gets 0.
 * tq_k_attention_weights: the softmax itself, from the final m and l of each
 * row (the same blocks as tq_k_attention).
 * tq_k_attention_received: one block a key (b, j) over B Lk: the weight it
 * receives from queries i != j, summed over i and averaged over heads. */
#include "compat.h"
#include "common.cuh"

static __device__ __forceinline__ int tq_att_live(const long long *klen, const long long *qgrp,
                                                  const long long *kgrp, unsigned Lq, unsigned Lk,
                                                  unsigned causal, unsigned has_len,
                                                  unsigned has_groups, unsigned long long b,
                                                  unsigned i, unsigned j)
{
    if (causal && j > i)
        return 0;
    if (has_len) {
        long long kl = klen[b];
        if (kl < 0 || (long long)j >= kl)
            return 0;
    }
    if (has_groups && qgrp[b * Lq + i] != kgrp[b * Lk + j])
        return 0;
    return 1;
}

/* scale (q[b,i,h] . k[b,j,h]), the sum in order of p, then + bias[h,i,j]
 * when there is one (the CPU's order: tq_op_attention's bits) */
static __device__ __forceinline__ float tq_att_score(const float *q, const float *k,
                                                     const float *bias, unsigned Lq,
                                                     unsigned Lk, unsigned H, unsigned Dk,
                                                     float scale, unsigned long long b,
                                                     unsigned h, unsigned i, unsigned j)
{
    unsigned long long dq = (unsigned long long)H * Dk;
    const float *qr = q + (b * Lq + i) * dq + (unsigned long long)h * Dk;
    const float *kr = k + (b * Lk + j) * dq + (unsigned long long)h * Dk;
    float s = 0.0f;
    for (unsigned p = 0; p < Dk; p++)
        s = fmaf(qr[p], kr[p], s);
    s = scale * s;
    return bias ? s + bias[((unsigned long long)h * Lq + i) * Lk + j] : s;
}

#define TQ_ATT_LIVE(b, i, j) tq_att_live(klen, qgrp, kgrp, Lq, Lk, causal, has_len, has_groups, b, i, j)
#define TQ_ATT_SCORE(b, h, i, j) \
    tq_att_score(q, k, has_bias ? bias : 0, Lq, Lk, H, Dk, scale, b, h, i, j)

extern "C" __global__ void tq_k_attention(const float *q, const float *k, const float *v, float *o, float *stats, const long long *klen, const long long *qgrp, const long long *kgrp, const float *bias, unsigned B, unsigned Lq, unsigned Lk, unsigned H, unsigned Dk, unsigned Dv, float scale, unsigned causal, unsigned has_len, unsigned has_groups, unsigned has_bias)
{
    __shared__ float slots[TQ_MAX_WARPS];
    __shared__ float ps[TQ_MAX_BLOCK]; /* the tile's weights, one a key */
    const unsigned t = threadIdx.x, W = blockDim.x;
    const unsigned long long rows = (unsigned long long)B * H * Lq;
    const unsigned long long dv = (unsigned long long)H * Dv;
    /* g depends only on the block: the barriers below are reached by all */
    for (unsigned long long g = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x; g < rows;
         g += (unsigned long long)gridDim.x * gridDim.y) {
        unsigned i = (unsigned)(g % Lq), h = (unsigned)(g / Lq % H);
        unsigned long long b = g / ((unsigned long long)Lq * H);
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* columns t, t + W, ... of this head's Dv */
        float m = -INFINITY, l = 0.0f;
        const float *vh = v + (unsigned long long)h * Dv;
        for (unsigned j0 = 0; j0 < Lk; j0 += W) {
            unsigned j = j0 + t;
            float s = j < Lk && TQ_ATT_LIVE(b, i, j) ? TQ_ATT_SCORE(b, h, i, j) : -INFINITY;
            float mt = tq_block_max(s, slots); /* fmaxf: a NaN score reaches l through p */
            float mn = fmaxf(m, mt);
            if (mn == -INFINITY) /* nothing live yet (the same for the whole block) */
                continue;
            float alpha = tq_exp_neg(m - mn); /* 0 when m was -inf */
            float p = tq_exp_neg(s - mn);
            l = fmaf(l, alpha, tq_block_sum(p, slots));
            ps[t] = p;
            __syncthreads();
            unsigned n = Lk - j0 < W ? Lk - j0 : W;
            for (unsigned c = 0; c < 4; c++) {
                unsigned e = t + c * W;
                if (e >= Dv)
                    break;
                float a = acc[c] * alpha;
                for (unsigned jj = 0; jj < n; jj++)
                    a = fmaf(ps[jj], vh[(b * Lk + j0 + jj) * dv + e], a);
                acc[c] = a;
            }
            __syncthreads(); /* ps read by all before the next tile writes it */
            m = mn;
        }
        float *orow = o + (b * Lq + i) * dv + (unsigned long long)h * Dv;
        for (unsigned c = 0; c < 4; c++) {
            unsigned e = t + c * W;
            if (e < Dv)
                orow[e] = l > 0.0f ? acc[c] / l : 0.0f;
        }
        if (t == 0) {
            stats[g] = m;
            stats[g + rows] = l;
        }
    }
}

extern "C" __global__ void tq_k_attention_weights(const float *q, const float *k, const float *v, float *o, float *stats, const long long *klen, const long long *qgrp, const long long *kgrp, const float *bias, unsigned B, unsigned Lq, unsigned Lk, unsigned H, unsigned Dk, unsigned Dv, float scale, unsigned causal, unsigned has_len, unsigned has_groups, unsigned has_bias)
{
    (void)v;
    (void)Dv;
    const unsigned long long rows = (unsigned long long)B * H * Lq;
    for (unsigned long long g = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x; g < rows;
         g += (unsigned long long)gridDim.x * gridDim.y) {
        unsigned i = (unsigned)(g % Lq), h = (unsigned)(g / Lq % H);
        unsigned long long b = g / ((unsigned long long)Lq * H);
        float m = stats[g], l = stats[g + rows];
        for (unsigned j = threadIdx.x; j < Lk; j += blockDim.x)
            o[g * Lk + j] = l > 0.0f && TQ_ATT_LIVE(b, i, j)
                                ? tq_exp_neg(TQ_ATT_SCORE(b, h, i, j) - m) / l
                                : 0.0f;
    }
}

extern "C" __global__ void tq_k_attention_received(const float *q, const float *k, const float *v, float *o, float *stats, const long long *klen, const long long *qgrp, const long long *kgrp, const float *bias, unsigned B, unsigned Lq, unsigned Lk, unsigned H, unsigned Dk, unsigned Dv, float scale, unsigned causal, unsigned has_len, unsigned has_groups, unsigned has_bias)
{
    __shared__ float slots[TQ_MAX_WARPS];
    (void)v;
    (void)Dv;
    const unsigned long long rows = (unsigned long long)B * H * Lq, keys = (unsigned long long)B * Lk;
    for (unsigned long long g = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x; g < keys;
         g += (unsigned long long)gridDim.x * gridDim.y) {
        unsigned long long b = g / Lk;
        unsigned j = (unsigned)(g % Lk);
        float acc = 0.0f;
        for (unsigned long long hi = threadIdx.x; hi < (unsigned long long)H * Lq; hi += blockDim.x) {
            unsigned h = (unsigned)(hi / Lq), i = (unsigned)(hi % Lq);
            unsigned long long sa = (b * H + h) * Lq + i;
            float m = stats[sa], l = stats[sa + rows];
            if (i != j && l > 0.0f && TQ_ATT_LIVE(b, i, j))
                acc += tq_exp_neg(TQ_ATT_SCORE(b, h, i, j) - m) / l;
        }
        acc = tq_block_sum(acc, slots);
        if (threadIdx.x == 0)
            o[g] = acc / (float)H;
    }
}
