/* exp2_vec.h: 2^x for x <= 0 in 8 and 16 f32 lanes (AVX2, AVX-512), the
 * same operations in every lane and in both widths (so the same bits), for
 * the attention's softmax: attention.c's online one and attention_wide.c's.
 * Include after <immintrin.h>, where TQ_HAVE_ISA_VARIANTS (vmath.h) is set. */
#ifndef TQ_CPU_EXP2_VEC_H
#define TQ_CPU_EXP2_VEC_H

/* 2^f for |f| <= 1/2, degree 6, fitted for least maximum relative error
 * (iterated weighted least squares on Chebyshev nodes, in double, then
 * rounded to f32): with FMA Horner in f32, within 1.4 units of 2^-24 of 2^f
 * over [-1/2, 1/2], as exact as attention.c's Taylor series of degree 7
 * (exp2_neg, the baseline build's). */
static const float exp2_fit6[7] = {0x1.41db16p-13f, 0x1.5f4580p-10f, 0x1.3b2db0p-7f,
                                   0x1.c6aed4p-5f,  0x1.ebfbdap-3f,  0x1.62e430p-1f, 1.0f};

/* exp2_neg on 8 lanes, with the polynomial above by fused multiply-adds:
 * 6 FMAs where the C version (exp2_neg) takes 7 multiplies and 7 adds (the
 * online softmax was a third of the attention's time on 256-token passages;
 * GCC leaves the C version scalar, its selects become branches). Not the C
 * version's bits: a machine runs one or the other. */
TQ_TARGET_AVX2 static inline __m256 exp2_neg8(__m256 x)
{
    __m256 dead = _mm256_cmp_ps(x, _mm256_set1_ps(-126.0f), _CMP_LE_OQ); /* false for NaN */
    __m256 xc = _mm256_blendv_ps(x, _mm256_set1_ps(-126.0f), dead);
    const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
    __m256 kf = _mm256_add_ps(xc, shifter), n = _mm256_sub_ps(kf, shifter);
    __m256 f = _mm256_sub_ps(xc, n);
    __m256 p = _mm256_set1_ps(exp2_fit6[0]);
    for (int i = 1; i < 7; i++)
        p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(exp2_fit6[i]));
    __m256i eb = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(kf), _mm256_castps_si256(shifter)),
                         _mm256_set1_epi32(127)),
        23);
    return _mm256_andnot_ps(dead, _mm256_mul_ps(p, _mm256_castsi256_ps(eb)));
}

/* exp2_neg8 on 16 lanes, instruction for instruction: the same bits in
 * every lane (the dead lanes' +0 by a zeroing mask, not andnot). */
TQ_TARGET_AVX512 static inline __m512 exp2_neg16(__m512 x)
{
    __mmask16 dead = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-126.0f), _CMP_LE_OQ);
    __m512 xc = _mm512_mask_blend_ps(dead, x, _mm512_set1_ps(-126.0f));
    const __m512 shifter = _mm512_set1_ps(0x1.8p23f);
    __m512 kf = _mm512_add_ps(xc, shifter), n = _mm512_sub_ps(kf, shifter);
    __m512 f = _mm512_sub_ps(xc, n);
    __m512 p = _mm512_set1_ps(exp2_fit6[0]);
    for (int i = 1; i < 7; i++)
        p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(exp2_fit6[i]));
    __m512i eb = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(kf), _mm512_castps_si512(shifter)),
                         _mm512_set1_epi32(127)),
        23);
    return _mm512_maskz_mul_ps((__mmask16)~dead, p, _mm512_castsi512_ps(eb));
}

#endif
