/* attention_wide.c: a block of queries against all its item's keys at once,
 * for an item of 65 to TQ_CPU_ATT_WIDE_KEYS keys when the attention may take
 * bf16 products (tq-embed's passages). The tile way (attention.c) walks 64
 * keys at a time with an online softmax: for every tile and row a max and a
 * sum folded from 16 lanes, the accumulator rescaled, the probabilities
 * rounded to bf16 in a pass of their own, and a P V product of k = 64 added
 * into the accumulator. Here: one score product over every key, one max and
 * one pass of 2^(s - max) a row that sums the f32 probabilities and stores
 * them in bf16, one P V product of k = the keys, scaled by 1 / sum into out.
 * On 200 passages of ~256 tokens (Zen 4, 2 threads) tq-embed --precision
 * bf16 went 3.05 -> 2.89 s, the softmax's share of its time 6.3% -> 3.8%.
 *
 * The operands are gemm_bf16.c's layouts (attention_bf16.c packs them): the
 * item's K^T in strips of 32 keys, its V in strips of 32 columns with pairs
 * of keys. Sums in a fixed order (lanes, then the 16 lanes' tree) whatever
 * the thread or the batch: an item's bits depend on its own key count. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"
#include "vmath.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "exp2_vec.h"
#define TQ_ATT_WIDE 1
#define TQ_TARGET_WIDE __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx512bf16")))

enum { WK = TQ_CPU_ATT_WIDE_KEYS };

/* 2^x for x <= 0 (a score minus its row's max): n = x rounded, f = x - n
 * in [-1/2, 1/2], 2^f by exp2_vec.h's degree-6 polynomial, times 2^n by
 * VSCALEFPS, which also takes results below f32's range to 0 (and through
 * subnormals, exactly). -inf gives 0, NaN stays NaN. exp2_neg16's values
 * down to 2^-126 (below, it gives 0), in 10 instructions where it takes 16:
 * the softmax was a third of this way's time (48 queries x 208 keys of 32
 * on Zen 4: 3.44 -> 2.73 us). */
TQ_TARGET_WIDE static inline __m512 exp2_wide(__m512 x)
{
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n), p = _mm512_set1_ps(exp2_fit6[0]);
    for (int i = 1; i < 7; i++)
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(exp2_fit6[i]));
    __mmask16 live = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ);
    return _mm512_maskz_scalef_ps(live, p, n);
}

/* Row r of s (nk scores, in base-2 units) into its probabilities' bf16 at
 * p16 (pairs: a zero after an odd nk) and *l, the sum of their f32 values,
 * or a zero row and l = 0 when every score is -inf. */
TQ_TARGET_WIDE static void softmax_row(const float *s, int nk, uint16_t *p16, float *l)
{
    __m512 mx16 = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < nk; j += 16) {
        __mmask16 m = (__mmask16)(nk - j >= 16 ? 0xffff : (1u << (nk - j)) - 1);
        mx16 = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, s + j), mx16);
    }
    float mx = _mm512_reduce_max_ps(mx16);
    int w = (nk + 1) & ~1;
    if (mx == -INFINITY) {
        memset(p16, 0, (size_t)w * sizeof *p16);
        *l = 0.0f;
        return;
    }
    __m512 vm = _mm512_set1_ps(mx), sum = _mm512_setzero_ps();
    for (int j = 0; j < nk; j += 32) {
        __m512 p[2];
        for (int h = 0; h < 2; h++) { /* lanes past nk: 2^-inf = 0 */
            int live = nk - j - 16 * h;
            __mmask16 m = (__mmask16)(live >= 16 ? 0xffff : live > 0 ? (1u << live) - 1 : 0);
            __m512 x = _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, s + j + 16 * h);
            p[h] = exp2_wide(_mm512_sub_ps(x, vm));
            sum = _mm512_add_ps(sum, p[h]);
        }
        int out = w - j < 32 ? w - j : 32;
        __mmask32 m = out == 32 ? 0xffffffffu : (1u << out) - 1;
        /* the second operand's 16 go to the low half */
        _mm512_mask_storeu_epi16(p16 + j, m, (__m512i)_mm512_cvtne2ps_pbh(p[1], p[0]));
    }
    *l = _mm512_reduce_add_ps(sum);
}

/* out's rows asked for, to write: the block's 48 rows of ctx are written
 * last, and their lines (ctx is larger than L3 on long texts) were ~1% of
 * tq-embed's time on 256-token passages, waited for as the stores came */
TQ_TARGET_WIDE __attribute__((target("prfchw"))) static void prefetch_out(const float *out,
                                                                         int64_t ldout, int nq,
                                                                         int dv)
{
    for (int r = 0; r < nq; r++)
        for (int c = 0; c < dv + 15; c += 16)
            __builtin_prefetch(out + r * ldout + (c < dv ? c : dv - 1), 1, 3);
}

/* out's rows = o's times 1 / l, or 0 where l is not positive (a query
 * whose keys are all masked gets 0, as the op promises) */
TQ_TARGET_WIDE static void scale_out(const float *o, int ldo, const float *l, int nq, int dv,
                                     float *out, int64_t ldout)
{
    for (int r = 0; r < nq; r++) {
        int live = l[r] > 0.0f; /* (NaN sums too, as the tile way) */
        __m512 inv = _mm512_set1_ps(live ? 1.0f / l[r] : 0.0f);
        for (int c = 0; c < dv; c += 16) {
            __mmask16 m = (__mmask16)(dv - c >= 16 ? 0xffff : (1u << (dv - c)) - 1);
            __m512 v = _mm512_maskz_loadu_ps(live ? m : 0, o + (int64_t)r * ldo + c);
            _mm512_mask_storeu_ps(out + r * ldout + c, m, _mm512_mul_ps(v, inv));
        }
    }
}
#endif

void tq_cpu_att_wide(int nq, int nk, int dk, int dv, float alpha, const uint16_t *q16, int ldq,
                     const uint16_t *kp, const uint16_t *vp, const float *bias, int64_t ldb,
                     float *s, uint16_t *p16, float *o, int ldo, float *out, int64_t ldout)
{
#ifdef TQ_ATT_WIDE
    float l[TQ_CPU_ATT_WIDE_ROWS];
    prefetch_out(out, ldout, nq, dv);
    tq_cpu_att_bf16_product(nq, dk, nk, alpha, q16, ldq, kp, 0.0f, s, WK);
    /* MPNet's position bias: the tile way's sum (attention.c, bias_tile) */
    for (int r = 0; bias && r < nq; r++)
        for (int j = 0; j < nk; j++)
            s[(int64_t)r * WK + j] += (float)TQ_CPU_LOG2E * bias[r * ldb + j];
    for (int r = 0; r < nq; r++)
        softmax_row(s + (int64_t)r * WK, nk, p16 + (int64_t)r * WK, &l[r]);
    tq_cpu_att_bf16_product(nq, nk, dv, 1.0f, p16, WK, vp, 0.0f, o, ldo);
    scale_out(o, ldo, l, nq, dv, out, ldout);
#else
    (void)nq, (void)nk, (void)dk, (void)dv, (void)alpha, (void)q16, (void)ldq, (void)kp, (void)vp,
        (void)bias, (void)ldb, (void)s, (void)p16, (void)o, (void)ldo, (void)out, (void)ldout;
#endif
}
