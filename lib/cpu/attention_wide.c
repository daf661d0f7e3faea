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
            p[h] = exp2_neg16(_mm512_sub_ps(x, vm));
            sum = _mm512_add_ps(sum, p[h]);
        }
        int out = w - j < 32 ? w - j : 32;
        __mmask32 m = out == 32 ? 0xffffffffu : (1u << out) - 1;
        /* the second operand's 16 go to the low half */
        _mm512_mask_storeu_epi16(p16 + j, m, (__m512i)_mm512_cvtne2ps_pbh(p[1], p[0]));
    }
    *l = _mm512_reduce_add_ps(sum);
}
#endif

void tq_cpu_att_wide(int nq, int nk, int dk, int dv, float alpha, const uint16_t *q16, int ldq,
                     const uint16_t *kp, const uint16_t *vp, float *s, uint16_t *p16, float *o,
                     int ldo, float *out, int64_t ldout)
{
#ifdef TQ_ATT_WIDE
    float l[TQ_CPU_ATT_WIDE_ROWS];
    tq_cpu_att_bf16_product(nq, dk, nk, alpha, q16, ldq, kp, 0.0f, s, WK);
    for (int r = 0; r < nq; r++)
        softmax_row(s + (int64_t)r * WK, nk, p16 + (int64_t)r * WK, &l[r]);
    tq_cpu_att_bf16_product(nq, nk, dv, 1.0f, p16, WK, vp, 0.0f, o, ldo);
    for (int r = 0; r < nq; r++) {
        float *restrict dst = out + r * ldout;
        const float *restrict src = o + (int64_t)r * ldo;
        /* a query whose keys are all masked gets 0, as the op promises */
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        for (int c = 0; c < dv; c++)
            dst[c] = l[r] > 0.0f ? src[c] * inv : 0.0f;
    }
#else
    (void)nq, (void)nk, (void)dk, (void)dv, (void)alpha, (void)q16, (void)ldq, (void)kp, (void)vp,
        (void)s, (void)p16, (void)o, (void)ldo, (void)out, (void)ldout;
#endif
}
