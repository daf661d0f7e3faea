/* gemm_avx512.h: what the 12 x 32 AVX-512 micro-kernels, the f32 one
 * (gemm_kernels.c) and the bf16 one (gemm_bf16.c), do alike around their
 * loops: ask for C's block, and store their sums into it. x86 only; include after <immintrin.h>. */
#ifndef TQ_CPU_GEMM_AVX512_H
#define TQ_CPU_GEMM_AVX512_H

/* Asks for the kernel's block of C first, which its loop then hides: the
 * stores at the end otherwise wait on memory. */
__attribute__((target("avx512f"), always_inline)) static inline void
tq_gemm512_prefetch_c(const float *c, int ldc, int mr_eff, int nr_eff)
{
    for (int i = 0; i < mr_eff; i++) {
        const char *ci = (const char *)(c + (long)i * ldc);
        _mm_prefetch(ci, _MM_HINT_T0);
        if (nr_eff > 16)
            _mm_prefetch(ci + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (long)i * ldc + nr_eff - 1), _MM_HINT_T0);
    }
}

/* C[0..mr_eff, 0..nr_eff) = alpha * acc + beta * C (beta 0: C unread), then
 * + bias[j] in column j (bias NULL: none; a rounding of its own, as
 * tq_op_add's), acc row i in acc[i][0] (columns 0-15) and acc[i][1] (16-31). */
__attribute__((target("avx512f"), always_inline)) static inline void
tq_gemm512_store(__m512 acc[][2], float *c, int ldc, int mr_eff, int nr_eff, float alpha,
                 float beta, const float *bias)
{
    int n0 = nr_eff < 16 ? nr_eff : 16, n1 = nr_eff > 16 ? nr_eff - 16 : 0;
    __mmask16 m0 = (__mmask16)((1u << n0) - 1), m1 = (__mmask16)((1u << n1) - 1);
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (bias) {
        bias0 = _mm512_maskz_loadu_ps(m0, bias);
        bias1 = _mm512_maskz_loadu_ps(m1, bias + 16);
    }
    for (int i = 0; i < mr_eff; i++) {
        float *ci = c + (long)i * ldc;
        __m512 t0 = _mm512_mul_ps(va, acc[i][0]), t1 = _mm512_mul_ps(va, acc[i][1]);
        if (beta != 0.0f) {
            t0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), t0);
            t1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), t1);
        }
        if (bias) {
            t0 = _mm512_add_ps(t0, bias0);
            t1 = _mm512_add_ps(t1, bias1);
        }
        if (nr_eff == 32) { /* whole rows: plain stores, faster on Zen 4 */
            _mm512_storeu_ps(ci, t0);
            _mm512_storeu_ps(ci + 16, t1);
        } else {
            _mm512_mask_storeu_ps(ci, m0, t0);
            _mm512_mask_storeu_ps(ci + 16, m1, t1);
        }
    }
}

#endif
