/* attention_flash.cu: the attention's outputs for heads of up to 64 values
 * (Dk, Dv <= 64), FlashAttention-2 style; tq_k_attention (attention.cu), one
 * block a query row, stays for wider heads. Same arguments, masks, outputs
 * and stats ([B H Lq] maxima m, then sums l: what tq_k_attention_weights and
 * _received read) as tq_k_attention, whose head comment gives the layout.
 *
 * Design, and why (written for Hopper, sm_90, in f32 without tensor cores):
 * - A block of 128 threads owns a tile of BQ = 64 queries of one (b, h). Keys
 *   and values stream through shared memory BK = 32 at a time; the scores
 *   never exist beyond one 64 x 32 tile, so memory is O(n). BK is what fits:
 *   Q, K, V and P tiles take 44.8 KiB, under the 48 KiB of static shared
 *   memory a block may have without the opt-in (cuFuncSetAttribute).
 * - Threads are 16 x 8 (ty, tx): thread (ty, tx) owns queries ty + 16 r
 *   (r < 4), keys tx + 8 c (c < 4) of the score tile and output columns
 *   4 tx + e and 32 + 4 tx + e (e < 4). Its 4 x 4 scores are a register-
 *   blocked GEMM over the head's columns, 4 at a time: 8 float4 reads from
 *   shared memory feed 64 fused multiply-adds; its 4 x 8 outputs take 12
 *   float4 reads per 128 multiply-adds (4 keys).
 * - Shared memory returns one register per lane a cycle (128 bytes), so a
 *   float4 read costs 4 cycles, or 2 when lanes n and n^1, or n and n^2,
 *   read the same address (NVIDIA's rule for CC 7.x; taken to hold on
 *   Hopper too: Nsight Compute's shared wavefronts would tell). A warp's
 *   lanes are therefore laid out as ty = lane bits 0, 2 and tx = bits 1, 3,
 *   4 (FL_TY, FL_TX):
 *   n^1 keeps tx (same K and V rows), n^2 keeps ty (same Q and P rows), and
 *   every read costs 2: 16 cycles of reads per 64 warp FMAs (16 cycles of
 *   the SM's 4 FMA pipes) for the scores, 24 per 128 (32) for P V. A plain
 *   layout (tx = lane % 8) would make the K and V reads cost 4 and the
 *   kernel bound by shared memory.
 * - Online softmax: per query a running max m and sum l. The 8 threads that
 *   share a query (lane bits 1, 3, 4: within 32 lanes, so in any warp of 32
 *   or 64) agree on the tile's max by three xor shuffles; each keeps its own
 *   part of l (rescaled by the same factors), the parts added only at the
 *   end. The tile's probabilities go through shared memory (Ps) to the
 *   threads of the other output columns.
 * - Bank conflicts: rows of Qs and Ks are padded to 68 floats, so the 4 query
 *   rows (8 key rows) a warp reads at one column start in different groups of
 *   4 banks; Ps rows to 40, so the scalar writes of 4 rows x 8 keys and the
 *   float4 reads hit distinct banks; Vs needs none (a warp reads 8
 *   consecutive float4 of one row). Global loads are float4 along a row (16
 *   lanes a 256-byte row) when every row start is 16-byte aligned (checked
 *   here, per launch), else scalar.
 * - __launch_bounds__(128, 4) caps registers at 128 (nvcc -Xptxas -v: 128,
 *   no spills): four blocks (16 warps) an SM, which hide each other's loads
 *   and barriers.
 * - Causal: key tiles past the block's last query are never loaded; tiles
 *   wholly below the diagonal and inside the key length skip the mask tests.
 *   With groups, tiles of keys in no group of the block's queries (by the
 *   range of their ids, as the CPU does) are skipped too.
 *   Query tiles are taken last-first, so the longest (causal) go out first.
 * - A score is sum_p q_p k_p by fused multiply-adds in order of p, then times
 *   scale, then plus the score bias when there is one: the bits of
 *   tq_att_score, so the stats match what the weights
 *   kernel recomputes. exp is exp2f of (s - m) log2(e) (the hardware's exp2,
 *   within 2 ulp): tq_exp_neg's polynomial would cost as much as a fifth of
 *   the products. A query with no live key keeps m = -inf, l = 0: out 0. */
#include "compat.h"

#define FL_BQ 64
#define FL_BK 32
#define FL_D 64      /* the most columns of a head (Dk, Dv) */
#define FL_QP 68     /* row pitch of Qs and Ks */
#define FL_PP 40     /* row pitch of Ps */
#define FL_THREADS 128
#define FL_LOG2E 1.44269504088896341f
/* (ty, tx) of a lane of 32 (see the head comment): ty's 2 bits are lane bits
 * 0 and 2, tx's 3 are bits 1, 3 and 4 */
#define FL_TY(lane) (((lane) & 1u) | ((lane) >> 1 & 2u))
#define FL_TX(lane) (((lane) >> 1 & 1u) | ((lane) >> 2 & 6u))

typedef struct fl_job {
    const float *q, *k, *v; /* the head's first column of batch item b */
    unsigned long long dq, dv; /* row pitches: H Dk and H Dv */
    unsigned Lq, Lk, Dk, Dv, i0, kend, vec;
} fl_job;

/* rows [r0, r0 + n) of a [rows, D] head slice (pitch `pitch`, `cols` columns)
 * into sh [n][pitch_sh], columns past `cols` (to a multiple of 4) and rows at
 * or past `lim` as zeros: float4 loads when vec, else one value at a time. */
static __device__ __forceinline__ void fl_load(float *sh, unsigned pitch_sh, unsigned n,
                                               const float *src, unsigned long long pitch,
                                               unsigned r0, unsigned lim, unsigned cols,
                                               unsigned vec)
{
    const unsigned chunks = (cols + 3) / 4;
    for (unsigned x = threadIdx.x; x < n * (FL_D / 4); x += FL_THREADS) {
        unsigned r = x / (FL_D / 4), c = x % (FL_D / 4);
        if (c >= chunks)
            continue;
        float4 val = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (r0 + r < lim) {
            const float *row = src + (unsigned long long)(r0 + r) * pitch + 4 * c;
            if (vec)
                val = *(const float4 *)row;
            else {
                unsigned left = cols - 4 * c;
                val.x = row[0];
                val.y = left > 1 ? row[1] : 0.0f;
                val.z = left > 2 ? row[2] : 0.0f;
                val.w = left > 3 ? row[3] : 0.0f;
            }
        }
        *(float4 *)(sh + r * pitch_sh + 4 * c) = val;
    }
}

/* The thread's 4 x 4 scores of the tile: sum_p q_p k_p in order of p (the
 * zero columns past Dk add exact zeros), times scale. */
static __device__ __forceinline__ void fl_scores(float s[4][4], const float *Qs, const float *Ks,
                                                 unsigned ty, unsigned tx, unsigned dk4,
                                                 float scale)
{
TQ_UNROLL
    for (int r = 0; r < 4; r++)
TQ_UNROLL
        for (int c = 0; c < 4; c++)
            s[r][c] = 0.0f;
TQ_UNROLL
    for (unsigned p = 0; p < FL_D; p += 4) {
        if (p >= dk4) /* uniform: every thread has the same dk4 */
            continue;
        float4 a[4], b[4];
TQ_UNROLL
        for (int r = 0; r < 4; r++)
            a[r] = *(const float4 *)(Qs + (ty + 16 * r) * FL_QP + p);
TQ_UNROLL
        for (int c = 0; c < 4; c++)
            b[c] = *(const float4 *)(Ks + (tx + 8 * c) * FL_QP + p);
TQ_UNROLL
        for (int r = 0; r < 4; r++)
TQ_UNROLL
            for (int c = 0; c < 4; c++) {
                float t = fmaf(a[r].x, b[c].x, s[r][c]);
                t = fmaf(a[r].y, b[c].y, t);
                t = fmaf(a[r].z, b[c].z, t);
                s[r][c] = fmaf(a[r].w, b[c].w, t);
            }
    }
TQ_UNROLL
    for (int r = 0; r < 4; r++)
TQ_UNROLL
        for (int c = 0; c < 4; c++)
            s[r][c] = scale * s[r][c];
}

/* out[r][:] += the tile's probabilities of query row r times V, keys in
 * order; the second block of 32 columns only when the head has them (WIDE). */
template <bool WIDE>
static __device__ __forceinline__ void fl_pv(float o[4][8], const float *Ps, const float *Vs,
                                             unsigned ty, unsigned tx)
{
TQ_UNROLL
    for (int j = 0; j < FL_BK; j += 4) {
        float4 pr[4];
TQ_UNROLL
        for (int r = 0; r < 4; r++)
            pr[r] = *(const float4 *)(Ps + (ty + 16 * r) * FL_PP + j);
TQ_UNROLL
        for (int u = 0; u < 4; u++) {
            float4 v0 = *(const float4 *)(Vs + (j + u) * FL_D + 4 * tx);
            float4 v1 = WIDE ? *(const float4 *)(Vs + (j + u) * FL_D + 32 + 4 * tx) : v0;
TQ_UNROLL
            for (int r = 0; r < 4; r++) {
                float p = u == 0 ? pr[r].x : u == 1 ? pr[r].y : u == 2 ? pr[r].z : pr[r].w;
                o[r][0] = fmaf(p, v0.x, o[r][0]);
                o[r][1] = fmaf(p, v0.y, o[r][1]);
                o[r][2] = fmaf(p, v0.z, o[r][2]);
                o[r][3] = fmaf(p, v0.w, o[r][3]);
                if (WIDE) {
                    o[r][4] = fmaf(p, v1.x, o[r][4]);
                    o[r][5] = fmaf(p, v1.y, o[r][5]);
                    o[r][6] = fmaf(p, v1.z, o[r][6]);
                    o[r][7] = fmaf(p, v1.w, o[r][7]);
                }
            }
        }
    }
}

/* The tile's scores s (masked ones -inf) folded into the running max m and
 * this thread's part of the sum l of each of its rows; o rescaled; s turned
 * into the probabilities. Every thread calls it (it shuffles). */
static __device__ __forceinline__ void fl_softmax(float s[4][4], float m[4], float l[4],
                                                  float o[4][8])
{
TQ_UNROLL
    for (int r = 0; r < 4; r++) {
        float mt = fmaxf(fmaxf(s[r][0], s[r][1]), fmaxf(s[r][2], s[r][3]));
        /* the 8 lanes of one ty differ in lane bits 1, 3, 4 (FL_TX) */
        mt = fmaxf(mt, tq_shfl_xor(mt, 2));
        mt = fmaxf(mt, tq_shfl_xor(mt, 8));
        mt = fmaxf(mt, tq_shfl_xor(mt, 16));
        float mn = fmaxf(m[r], mt); /* fmaxf: a NaN score reaches l through p */
        float base = mn == -INFINITY ? 0.0f : mn; /* nothing live yet: p and alpha 0 */
        float alpha = exp2f((m[r] - base) * FL_LOG2E);
        float sum = 0.0f;
TQ_UNROLL
        for (int c = 0; c < 4; c++) {
            s[r][c] = exp2f((s[r][c] - base) * FL_LOG2E);
            sum += s[r][c];
        }
        l[r] = fmaf(l[r], alpha, sum);
TQ_UNROLL
        for (int e = 0; e < 8; e++)
            o[r][e] *= alpha;
        m[r] = mn;
    }
}

/* Head h's score bias for the tile, bias_h [Lq, Lk] rows i0.. and columns
 * j0.., into Ps (whose probabilities of the previous tile have been read:
 * the caller's barrier), zeros past Lq and Lk. A warp reads a row's 32
 * neighbouring keys at once; fl_scores' caller then adds each thread's own
 * entries, the ones it overwrites with probabilities (so no barrier between):
 * in registers it would spill (nvcc 13, sm_90: 24 bytes). */
static __device__ __forceinline__ void fl_load_bias(float *Ps, const float *bias_h, unsigned i0,
                                                    unsigned j0, unsigned Lq, unsigned Lk)
{
    for (unsigned x = threadIdx.x; x < FL_BQ * FL_BK; x += FL_THREADS) {
        unsigned r = x / FL_BK, c = x % FL_BK;
        Ps[r * FL_PP + c] = i0 + r < Lq && j0 + c < Lk
                                ? bias_h[(unsigned long long)(i0 + r) * Lk + j0 + c]
                                : 0.0f;
    }
}

/* Masks of one tile: past the key length (kend), causal (j > i), groups. */
static __device__ __forceinline__ void fl_mask(float s[4][4], const fl_job *J, unsigned j0,
                                               unsigned ty, unsigned tx, unsigned causal,
                                               const long long qg[4], const long long *kgs,
                                               unsigned has_groups)
{
TQ_UNROLL
    for (int r = 0; r < 4; r++)
TQ_UNROLL
        for (int c = 0; c < 4; c++) {
            unsigned i = J->i0 + ty + 16 * r, j = j0 + tx + 8 * c;
            if (j >= J->kend || (causal && j > i) || (has_groups && qg[r] != kgs[tx + 8 * c]))
                s[r][c] = -INFINITY;
        }
}

/* The range [lo, hi] of group ids g[0, n), n <= 64: lane x of each 32 reads
 * g[x] and g[x + 32] (where they exist), a butterfly gives every lane the
 * range, so every thread of the block has the same. All threads call it. */
static __device__ __forceinline__ void fl_group_range(const long long *g, unsigned n,
                                                      long long *lo, long long *hi)
{
    unsigned x = threadIdx.x % 32;
    long long a = g[x < n ? x : 0], c = g[x + 32 < n ? x + 32 : 0];
    long long l = a < c ? a : c, h = a < c ? c : a;
    for (int d = 1; d < 32; d <<= 1) {
        long long u = tq_shfl_xor(l, d), w = tq_shfl_xor(h, d);
        l = u < l ? u : l;
        h = w > h ? w : h;
    }
    *lo = l, *hi = h;
}

/* out and stats of the thread's rows: l's parts added over the 8 lanes
 * (a butterfly: every lane gets the same sum). */
static __device__ __forceinline__ void fl_store(const fl_job *J, float *o_head, float *stats,
                                                unsigned long long srow, unsigned long long rows,
                                                unsigned ty, unsigned tx, float o[4][8],
                                                const float m[4], const float l[4])
{
TQ_UNROLL
    for (int r = 0; r < 4; r++) {
        float lr = l[r];
        lr += tq_shfl_xor(lr, 2);
        lr += tq_shfl_xor(lr, 8);
        lr += tq_shfl_xor(lr, 16);
        unsigned i = J->i0 + ty + 16 * r;
        if (i >= J->Lq)
            continue;
        float *orow = o_head + (unsigned long long)i * J->dv;
TQ_UNROLL
        for (int e = 0; e < 8; e++) {
            unsigned col = (e < 4 ? 0 : 32) + 4 * tx + (e & 3);
            if (col < J->Dv)
                orow[col] = lr > 0.0f ? o[r][e] / lr : 0.0f;
        }
        if (tx == 0) {
            stats[srow + i] = m[r];
            stats[srow + i + rows] = lr;
        }
    }
}

extern "C" __global__ void __launch_bounds__(FL_THREADS, 4) tq_k_attention_flash(const float *q, const float *k, const float *v, float *o, float *stats, const long long *klen, const long long *qgrp, const long long *kgrp, const float *bias, unsigned B, unsigned Lq, unsigned Lk, unsigned H, unsigned Dk, unsigned Dv, float scale, unsigned causal, unsigned has_len, unsigned has_groups, unsigned has_bias);

extern "C" __global__ void tq_k_attention_flash(const float *q, const float *k, const float *v, float *o, float *stats, const long long *klen, const long long *qgrp, const long long *kgrp, const float *bias, unsigned B, unsigned Lq, unsigned Lk, unsigned H, unsigned Dk, unsigned Dv, float scale, unsigned causal, unsigned has_len, unsigned has_groups, unsigned has_bias)
{
    /* float4 arrays for their alignment, used as rows of floats */
    __shared__ float4 qs4[FL_BQ * FL_QP / 4], ks4[FL_BK * FL_QP / 4], vs4[FL_BK * FL_D / 4],
        ps4[FL_BQ * FL_PP / 4];
    __shared__ long long kgs[FL_BK];
    float *Qs = (float *)qs4, *Ks = (float *)ks4, *Vs = (float *)vs4, *Ps = (float *)ps4;
    if (blockDim.x != FL_THREADS || Dk > FL_D || Dv > FL_D || !Dk)
        return; /* the host launches this shape only */
    const unsigned lane = threadIdx.x % 32, dk4 = (Dk + 3) / 4 * 4;
    const unsigned tx = FL_TX(lane), ty = threadIdx.x / 32 * 4 + FL_TY(lane);
    const unsigned long long dq = (unsigned long long)H * Dk, dv = (unsigned long long)H * Dv;
    const unsigned long long rows = (unsigned long long)B * H * Lq, bh = (unsigned long long)B * H;
    const unsigned nqt = (Lq + FL_BQ - 1) / FL_BQ;
    /* every row start 16-byte aligned: float4 loads */
    const unsigned long long base =
        (unsigned long long)q | (unsigned long long)k | (unsigned long long)v;
    const unsigned vec =
        (base & 15) == 0 && Dk % 4 == 0 && Dv % 4 == 0 && dq % 4 == 0 && dv % 4 == 0;
    const int wide = Dv > 32;
    /* the unit depends on the block only: the barriers are reached by all */
    for (unsigned long long g = (unsigned long long)blockIdx.y * gridDim.x + blockIdx.x;
         g < bh * nqt; g += (unsigned long long)gridDim.x * gridDim.y) {
        unsigned long long bhi = g % bh, b = bhi / H;
        unsigned h = (unsigned)(bhi % H), qt = nqt - 1 - (unsigned)(g / bh); /* last tiles first */
        fl_job J;
        J.dq = dq, J.dv = dv, J.Lq = Lq, J.Lk = Lk, J.Dk = Dk, J.Dv = Dv, J.vec = vec;
        J.i0 = qt * FL_BQ;
        J.q = q + b * Lq * dq + (unsigned long long)h * Dk;
        J.k = k + b * Lk * dq + (unsigned long long)h * Dk;
        J.v = v + b * Lk * dv + (unsigned long long)h * Dv;
        long long kl = has_len ? klen[b] : (long long)Lk;
        J.kend = kl < 0 ? 0u : kl < (long long)Lk ? (unsigned)kl : Lk;
        unsigned last = min(J.i0 + FL_BQ, Lq) - 1; /* the tile's last query */
        unsigned jend = causal ? min(J.kend, last + 1) : J.kend;
        long long qg[4] = {0, 0, 0, 0};
        if (has_groups) {
TQ_UNROLL
            for (int r = 0; r < 4; r++) {
                unsigned i = J.i0 + ty + 16 * r;
                qg[r] = i < Lq ? qgrp[b * Lq + i] : 0;
            }
        }
        float m[4], l[4], acc[4][8];
TQ_UNROLL
        for (int r = 0; r < 4; r++) {
            m[r] = -INFINITY, l[r] = 0.0f;
TQ_UNROLL
            for (int e = 0; e < 8; e++)
                acc[r][e] = 0.0f;
        }
        __syncthreads(); /* the previous unit's last reads of Qs are done */
        fl_load(Qs, FL_QP, FL_BQ, J.q, dq, J.i0, Lq, Dk, vec);
        long long qlo = 0, qhi = 0, klo, khi; /* the block's query groups */
        if (has_groups)
            fl_group_range(qgrp + b * Lq + J.i0, min((unsigned)FL_BQ, Lq - J.i0), &qlo, &qhi);
        for (unsigned j0 = 0; j0 < jend; j0 += FL_BK) {
            if (has_groups) { /* keys in no group of the block's queries: skipped */
                fl_group_range(kgrp + b * Lk + j0, min((unsigned)FL_BK, jend - j0), &klo, &khi);
                if (khi < qlo || klo > qhi)
                    continue;
            }
            __syncthreads(); /* the previous tile's Ks, Vs, Ps read by all */
            fl_load(Ks, FL_QP, FL_BK, J.k, dq, j0, J.kend, Dk, vec);
            fl_load(Vs, FL_D, FL_BK, J.v, dv, j0, J.kend, Dv, vec);
            if (has_groups && threadIdx.x < FL_BK)
                kgs[threadIdx.x] = j0 + threadIdx.x < Lk ? kgrp[b * Lk + j0 + threadIdx.x] : 0;
            if (has_bias)
                fl_load_bias(Ps, bias + (unsigned long long)h * Lq * Lk, J.i0, j0, Lq, Lk);
            __syncthreads();
            float s[4][4];
            fl_scores(s, Qs, Ks, ty, tx, dk4, scale);
            if (has_bias) {
TQ_UNROLL
                for (int r = 0; r < 4; r++)
TQ_UNROLL
                    for (int c = 0; c < 4; c++)
                        s[r][c] += Ps[(ty + 16 * r) * FL_PP + tx + 8 * c];
            }
            if (has_groups || j0 + FL_BK > J.kend || (causal && j0 + FL_BK - 1 > J.i0))
                fl_mask(s, &J, j0, ty, tx, causal, qg, kgs, has_groups);
            fl_softmax(s, m, l, acc);
TQ_UNROLL
            for (int r = 0; r < 4; r++)
TQ_UNROLL
                for (int c = 0; c < 4; c++)
                    Ps[(ty + 16 * r) * FL_PP + tx + 8 * c] = s[r][c];
            __syncthreads();
            if (wide)
                fl_pv<true>(acc, Ps, Vs, ty, tx);
            else
                fl_pv<false>(acc, Ps, Vs, ty, tx);
        }
        fl_store(&J, o + b * Lq * dv + (unsigned long long)h * Dv, stats, (b * H + h) * Lq, rows,
                 ty, tx, acc, m, l);
    }
}
