/* attention_bf16.c: the attention's operands in bf16 for gemm_bf16.c's
 * kernel, when the op is allowed bf16 products (tq_attention_args.bf16) and
 * the CPU has AVX512-BF16: on 256-token passages the f32 score and P V
 * products were 18% of tq-embed --precision int8's time, at the f32 FMA
 * peak; VDPBF16PS does twice the multiply-adds an instruction.
 *
 * Rounding is to nearest even (VCVTNE2PS2BF16, which also flushes
 * subnormal inputs to zero), as tq_op_convert rounds away from them. The
 * packed layouts are gemm_bf16.c's: strips of 32 columns of B, each pair
 * of consecutive k's two values of a column side by side. Data movement and
 * rounding only: the same values whatever the thread or tile. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TQ_ATT_BF16 1
#define TQ_TARGET_BF16BW __attribute__((target("avx512f,avx512bw,avx512bf16")))

enum { NR = TQ_GEMM_BF16_NR };

/* 32 floats from x (the first n, zeros past) as 32 bf16 in order */
TQ_TARGET_BF16BW static inline __m512i bf16_32(const float *x, int n)
{
    __mmask16 lo = (__mmask16)(n >= 16 ? 0xffff : (1u << (n > 0 ? n : 0)) - 1);
    __mmask16 hi = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
    __m512 a = _mm512_maskz_loadu_ps(lo, x), b = _mm512_maskz_loadu_ps(hi, x + 16);
    /* the second operand's 16 go to the low half */
    return (__m512i)_mm512_cvtne2ps_pbh(b, a);
}

TQ_TARGET_BF16BW static void rows_bf16(const float *x, int64_t ldx, int rows, int n,
                                       uint16_t *dst, int ldd)
{
    int w = (n + 1) & ~1; /* the last pair's second value 0 */
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < w; c += 32) {
            int live = n - c < 32 ? n - c : 32, out = w - c < 32 ? w - c : 32;
            __mmask32 m = out == 32 ? 0xffffffffu : (1u << out) - 1;
            _mm512_mask_storeu_epi16(dst + (int64_t)r * ldd + c, m,
                                     bf16_32(x + r * ldx + c, live));
        }
}

/* K^T: key c of a strip is column c, its head dimensions the k's: a key's
 * row rounded gives its pairs in order, 32 bits each; a strip's pair q is
 * word q of each of its 32 keys, gathered. */
TQ_TARGET_BF16BW static void pack_k_bf16(const float *k0, int64_t ldk, int nk, int64_t dk,
                                         uint16_t *dst, uint32_t *tmp)
{
    int pairs = (int)((dk + 1) / 2), stride = (pairs + 15) & ~15; /* tmp's words a key */
    for (int j = 0; j < nk; j++)
        for (int q = 0; q < pairs; q += 16) {
            int live = (int)(dk - 2 * q < 32 ? dk - 2 * q : 32);
            _mm512_storeu_si512(tmp + (int64_t)j * stride + q,
                                bf16_32(k0 + j * ldk + 2 * q, live));
        }
    __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(stride));
    for (int s = 0; s * NR < nk; s++) {
        uint32_t *d = (uint32_t *)(dst + (int64_t)s * NR * 2 * pairs);
        for (int h = 0; h < NR; h += 16) {
            int j0 = s * NR + h, live = nk - j0 < 16 ? (nk - j0 > 0 ? nk - j0 : 0) : 16;
            __mmask16 m = (__mmask16)(live == 16 ? 0xffff : (1u << live) - 1);
            for (int q = 0; q < pairs; q++)
                _mm512_storeu_si512(d + (int64_t)q * NR + h,
                                    _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx,
                                                                tmp + (int64_t)j0 * stride + q, 4));
        }
    }
}

/* V: its columns are B's columns, the keys the k's: pair q of a strip is
 * keys 2q and 2q + 1 interleaved column by column. */
TQ_TARGET_BF16BW static void pack_v_bf16(const float *v0, int64_t ldv, int nk, int64_t dv,
                                         uint16_t *dst)
{
    int pairs = (nk + 1) / 2;
    /* [row 2q's 16, row 2q+1's 16] -> (2q, 2q+1) of column 0, of column 1.. */
    static const uint16_t order[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                       21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                       11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i inter = _mm512_loadu_si512(order);
    for (int64_t s = 0; s * NR < dv; s++) {
        uint16_t *d = dst + s * NR * 2 * pairs;
        for (int q = 0; q < pairs; q++)
            for (int h = 0; h < NR; h += 16) {
                int64_t c = s * NR + h;
                int live = (int)(dv - c < 16 ? (dv - c > 0 ? dv - c : 0) : 16);
                __mmask16 m = (__mmask16)(live == 16 ? 0xffff : (1u << live) - 1);
                __m512 a = _mm512_maskz_loadu_ps(m, v0 + 2 * q * ldv + c);
                __m512 b = 2 * q + 1 < nk ? _mm512_maskz_loadu_ps(m, v0 + (2 * q + 1) * ldv + c)
                                          : _mm512_setzero_ps();
                __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);
                _mm512_storeu_si512(d + ((int64_t)q * NR + h) * 2,
                                    _mm512_permutexvar_epi16(inter, both));
            }
    }
}
#endif

int tq_cpu_att_bf16_use(void)
{
#ifdef TQ_ATT_BF16
    __builtin_cpu_init();
    return tq_cpu_gemm_bf16_use() && __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

void tq_cpu_att_bf16_rows(const float *x, int64_t ldx, int rows, int n, uint16_t *dst, int ldd)
{
#ifdef TQ_ATT_BF16
    rows_bf16(x, ldx, rows, n, dst, ldd);
#else
    (void)x, (void)ldx, (void)rows, (void)n, (void)dst, (void)ldd;
#endif
}

void tq_cpu_att_bf16_pack_k(const float *k0, int64_t ldk, int nk, int64_t dk, uint16_t *dst,
                            uint32_t *tmp)
{
#ifdef TQ_ATT_BF16
    pack_k_bf16(k0, ldk, nk, dk, dst, tmp);
#else
    (void)k0, (void)ldk, (void)nk, (void)dk, (void)dst, (void)tmp;
#endif
}

void tq_cpu_att_bf16_pack_v(const float *v0, int64_t ldv, int nk, int64_t dv, uint16_t *dst)
{
#ifdef TQ_ATT_BF16
    pack_v_bf16(v0, ldv, nk, dv, dst);
#else
    (void)v0, (void)ldv, (void)nk, (void)dv, (void)dst;
#endif
}

void tq_cpu_att_bf16_product(int m, int k, int n, float alpha, const uint16_t *a, int lda,
                             const uint16_t *pairs, float beta, float *c, int ldc)
{
    tq_cpu_packed_b pb;
    memset(&pb, 0, sizeof pb);
    pb.k = k;
    pb.n = n;
    pb.nr = TQ_GEMM_BF16_NR;
    pb.kpad = (k + 1) & ~1;
    pb.npad = (n + pb.nr - 1) / pb.nr * pb.nr;
    pb.pairs = (uint16_t *)pairs;
    tq_cpu_gemm_bf16(m, 0, n, alpha, a, lda, &pb, beta, NULL, c, ldc);
}
