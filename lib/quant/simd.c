/* simd.c: AVX2 forms of the row codes of codes.c and dtype.c (int8 per row,
 * q8_0, q4_0, sign bits) and of the row scan that refuses NaN and infinities,
 * chosen at run time by CPUID feature bits. Each makes the same f32
 * operations as the portable loop, in the same order and without FMA, so the
 * bytes are the same; tests/unit/test_quant.c holds them to it. */
#include "quant.h"
#include "simd.h"

#include <math.h>
#include <string.h>

static int force_portable;
void tq_quant_force_portable(int on) { __atomic_store_n(&force_portable, on, __ATOMIC_RELAXED); }

#if defined(__x86_64__)
#include <immintrin.h>

int tq_quant_have_avx2(void)
{
    /* __builtin_cpu_supports also checks that the OS saves the registers */
    return !__atomic_load_n(&force_portable, __ATOMIC_RELAXED) &&
           __builtin_cpu_supports("avx2");
}

__attribute__((target("avx2"))) static float hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

__attribute__((target("avx2"))) int tq_quant_amax_avx2(const float *x, int64_t d, float *amax)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 m = _mm256_setzero_ps(), ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
        __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + j), absm);
        ok = _mm256_and_ps(ok, _mm256_cmp_ps(a, inf, _CMP_LT_OQ)); /* false for NaN too */
        m = _mm256_max_ps(m, a);
    }
    float r = hmax(m);
    int finite = _mm256_movemask_ps(ok) == 0xff;
    for (; j < d; j++) {
        finite &= isfinite(x[j]) != 0;
        r = fabsf(x[j]) > r ? fabsf(x[j]) : r;
    }
    *amax = r; /* the maximum is exact, whatever the order, for finite rows */
    return finite;
}

/* 32 int32 in four vectors (-128..255 as the caller clamps) to 32 bytes in
 * order: the packs work within 128-bit lanes, the permute puts them back. */
__attribute__((target("avx2"))) static __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    __m256i p = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

__attribute__((target("avx2"))) void tq_quant_int8_row_avx2(const float *x, int64_t d,
                                                          int8_t *q, float s)
{
    int64_t j = 0;
    if (s == 0.0f) {
        memset(q, 0, (size_t)d);
        return;
    }
    const __m256 vs = _mm256_set1_ps(s), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    for (; j + 32 <= d; j += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + j + 8 * k), vs),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            v[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
        }
        _mm256_storeu_si256((__m256i *)(q + j), pack32(v[0], v[1], v[2], v[3]));
    }
    for (; j < d; j++) {
        float v = nearbyintf(x[j] / s);
        q[j] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
}

/* C's roundf (half away from zero) of v, exactly: a - floor(a) is exact. NaN
 * (0 times an infinite 1/d) becomes 0, as in the portable loop. */
__attribute__((target("avx2"))) static __m256 roundf8(__m256 v)
{
    const __m256 signm = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    __m256 a = _mm256_andnot_ps(signm, v);
    __m256 f = _mm256_floor_ps(a);
    __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(a, f), _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                              _mm256_set1_ps(1.0f));
    __m256 r = _mm256_or_ps(_mm256_add_ps(f, up), _mm256_and_ps(v, signm));
    return _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
}

__attribute__((target("avx2"))) void tq_quant_q8_0_avx2(const float *x, int64_t n,
                                                      unsigned char *dst)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    for (int64_t b = 0; b < n / TQ_QK; b++, x += TQ_QK, dst += 34) {
        __m256 xv[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            xv[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_and_ps(xv[k], absm));
        }
        float d = hmax(m) / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = tq_f32_to_f16(d);
        memcpy(dst, &dh, 2);
        __m256 vid = _mm256_set1_ps(id);
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256 r = roundf8(_mm256_mul_ps(xv[k], vid));
            v[k] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
        }
        _mm256_storeu_si256((__m256i *)(dst + 2), pack32(v[0], v[1], v[2], v[3]));
    }
}

__attribute__((target("avx2"))) void tq_quant_q4_0_avx2(const float *x, int64_t n,
                                                      unsigned char *dst)
{
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / TQ_QK; b++, x += TQ_QK, dst += 18) {
        __m256 xv[4], m = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            xv[k] = _mm256_loadu_ps(x + 8 * k);
            m = _mm256_max_ps(m, _mm256_and_ps(xv[k], absm));
        }
        /* ggml keeps the first value of the largest magnitude, sign and all */
        __m256 amax = _mm256_set1_ps(hmax(m));
        uint32_t eq = 0;
        for (int k = 0; k < 4; k++)
            eq |= (uint32_t)_mm256_movemask_ps(
                      _mm256_cmp_ps(_mm256_and_ps(xv[k], absm), amax, _CMP_EQ_OQ))
                  << (8 * k);
        float max = eq ? x[__builtin_ctz(eq)] : 0.0f;
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = tq_f32_to_f16(d);
        memcpy(dst, &dh, 2);
        const __m256 vid = _mm256_set1_ps(id), half = _mm256_set1_ps(8.5f);
        const __m256 zero = _mm256_setzero_ps(), fifteen = _mm256_set1_ps(15.0f);
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            /* x * id, then + 8.5: two roundings, as ggml's C without FMA */
            __m256 t = _mm256_add_ps(_mm256_mul_ps(xv[k], vid), half);
            __m256 c = _mm256_min_ps(_mm256_max_ps(t, zero), fifteen);
            c = _mm256_blendv_ps(c, fifteen, _mm256_cmp_ps(t, t, _CMP_UNORD_Q)); /* NaN: 15 */
            v[k] = _mm256_cvttps_epi32(c);
        }
        __m256i lo = _mm256_or_si256(v[0], _mm256_slli_epi32(v[2], 4));
        __m256i hi = _mm256_or_si256(v[1], _mm256_slli_epi32(v[3], 4));
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
        __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
        _mm_storeu_si128((__m128i *)(dst + 2), bytes);
    }
}

__attribute__((target("avx2"))) void tq_quant_bits_row_avx2(const float *x, int64_t d,
                                                          unsigned char *dst)
{
    /* element 0 goes to the top bit: reverse the 8 lanes, then movemask */
    const __m256i rev = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    const __m256 zero = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
        __m256 v = _mm256_permutevar8x32_ps(_mm256_loadu_ps(x + j), rev);
        dst[j >> 3] = (unsigned char)_mm256_movemask_ps(_mm256_cmp_ps(v, zero, _CMP_GT_OQ));
    }
    if (j < d) {
        unsigned char b = 0;
        for (int64_t k = j; k < d; k++)
            if (x[k] > 0)
                b |= (unsigned char)(0x80u >> (k & 7));
        dst[j >> 3] = b;
    }
}
__attribute__((target("avx2"))) void tq_quant_int8_back_avx2(const int8_t *q, int64_t d,
                                                           float s, float *y)
{
    const __m256 vs = _mm256_set1_ps(s);
    int64_t j = 0;
    for (; j + 8 <= d; j += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(q + j));
        _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), vs));
    }
    for (; j < d; j++)
        y[j] = (float)q[j] * s;
}
#else
int tq_quant_have_avx2(void) { return 0; }
#endif
