/* code_kernels.c: the pair kernels of the quantized searches (codetopk,
 * codematrix): exact int8 dot products, widened to int16 and summed in int32
 * (AVX2 where CPUID has it), and Hamming distances of sign bits (POPCNT where
 * present), one pair or 4 x 4 at a time.
 * The strip kernel for int8 (AVX2) is code_strips.c. */
#include "cpu.h"

#include <string.h>

static int force_portable;
void tq_cpu_codetopk_force_portable(int on) { __atomic_store_n(&force_portable, on, __ATOMIC_RELAXED); }

static int32_t dot_i8_c(const int8_t *a, const int8_t *b, int64_t d)
{
    int32_t s = 0;
    for (int64_t j = 0; j < d; j++)
        s += (int32_t)a[j] * b[j];
    return s;
}

static int64_t hamming_c(const unsigned char *a, const unsigned char *b, size_t n)
{
    int64_t s = 0;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t x, y;
        memcpy(&x, a + j, 8);
        memcpy(&y, b + j, 8);
        s += __builtin_popcountll(x ^ y);
    }
    for (; j < n; j++)
        s += __builtin_popcount((unsigned)(a[j] ^ b[j]));
    return s;
}

/* 4 queries by 4 rows: each word loaded serves four distances.
 * out[4 a + b] = distance(q[a], x[b]). */
static inline void hamming_4x4_body(const unsigned char *const *q, const unsigned char *const *x,
                                    size_t n, int64_t *out)
{
    int64_t acc[16] = {0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t qa[4], xb[4];
        for (int a = 0; a < 4; a++)
            memcpy(&qa[a], q[a] + j, 8);
        for (int b = 0; b < 4; b++)
            memcpy(&xb[b], x[b] + j, 8);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                acc[4 * a + b] += __builtin_popcountll(qa[a] ^ xb[b]);
    }
    for (int t = 0; t < 16; t++) {
        for (size_t k = j; k < n; k++)
            acc[t] += __builtin_popcount((unsigned)(q[t / 4][k] ^ x[t % 4][k]));
        out[t] = acc[t];
    }
}

static void hamming_4x4_c(const unsigned char *const *q, const unsigned char *const *x, size_t n,
                          int64_t *out)
{
    hamming_4x4_body(q, x, n, out);
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("popcnt"))) static void hamming_4x4_popcnt(const unsigned char *const *q,
                                                                 const unsigned char *const *x,
                                                                 size_t n, int64_t *out)
{
    hamming_4x4_body(q, x, n, out); /* the same loop, with the POPCNT instruction */
}

/* int8 products widened to int16, pairs summed to int32 by madd: exact for
 * every code, -128 included (|sum| < 2^31 for d <= 2^17) */
__attribute__((target("avx2"))) static int32_t dot_i8_avx2(const int8_t *a, const int8_t *b,
                                                           int64_t d)
{
    __m256i acc = _mm256_setzero_si256();
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        __m256i x = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(a + j)));
        __m256i y = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + j)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(x, y));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    int32_t r = _mm_cvtsi128_si32(s);
    for (; j < d; j++)
        r += (int32_t)a[j] * b[j];
    return r;
}

/* 4 queries by 4 rows at once: each widened chunk serves four products, and
 * 16 sums run side by side. out[4 a + b] = q[a] . x[b]. */
__attribute__((target("avx2"))) static void dot_i8_4x4_avx2(const int8_t *const *q,
                                                            const int8_t *const *x, int64_t d,
                                                            int32_t *out)
{
    __m256i acc[16];
    for (int t = 0; t < 16; t++)
        acc[t] = _mm256_setzero_si256();
    int64_t j = 0;
    for (; j + 16 <= d; j += 16) {
        __m256i qa[4], xb[4];
        for (int a = 0; a < 4; a++)
            qa[a] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q[a] + j)));
        for (int b = 0; b < 4; b++)
            xb[b] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x[b] + j)));
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 4; b++)
                acc[4 * a + b] = _mm256_add_epi32(acc[4 * a + b], _mm256_madd_epi16(qa[a], xb[b]));
    }
    for (int t = 0; t < 16; t++) {
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc[t]), _mm256_extracti128_si256(acc[t], 1));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
        int32_t r = _mm_cvtsi128_si32(s);
        for (int64_t k = j; k < d; k++)
            r += (int32_t)q[t / 4][k] * x[t % 4][k];
        out[t] = r;
    }
}

/* 2 queries by 4 rows, the first n32 bytes (a multiple of 32): each XOR's
 * bits counted by nibble through a 16-entry table (vpshufb), byte counts
 * summed in bytes for at most 31 steps (31 x 8 < 256), then in 64-bit
 * lanes. acc[4 a + b] = distance(q[a], x[b]) over those bytes (n32 > 0). */
__attribute__((target("avx2"))) static void hamming_2x4_avx2(const unsigned char *q0,
                                                             const unsigned char *q1,
                                                             const unsigned char *const *x,
                                                             size_t n32, int64_t *acc)
{
    const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2,
                                         1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
    const __m256i low = _mm256_set1_epi8(15), zero = _mm256_setzero_si256();
    for (size_t j0 = 0; j0 < n32; j0 += 31 * 32) {
        size_t j1 = n32 - j0 < 31 * 32 ? n32 : j0 + 31 * 32;
        __m256i c[8];
        for (int t = 0; t < 8; t++)
            c[t] = zero;
        for (size_t j = j0; j < j1; j += 32) {
            __m256i a0 = _mm256_loadu_si256((const __m256i *)(q0 + j));
            __m256i a1 = _mm256_loadu_si256((const __m256i *)(q1 + j));
            for (int b = 0; b < 4; b++) {
                __m256i xb = _mm256_loadu_si256((const __m256i *)(x[b] + j));
                __m256i t0 = _mm256_xor_si256(a0, xb), t1 = _mm256_xor_si256(a1, xb);
                __m256i n0 = _mm256_add_epi8(
                    _mm256_shuffle_epi8(lut, _mm256_and_si256(t0, low)),
                    _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(t0, 4), low)));
                __m256i n1 = _mm256_add_epi8(
                    _mm256_shuffle_epi8(lut, _mm256_and_si256(t1, low)),
                    _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(t1, 4), low)));
                c[b] = _mm256_add_epi8(c[b], n0);
                c[4 + b] = _mm256_add_epi8(c[4 + b], n1);
            }
        }
        /* each 64-bit lane of a sum of bytes is below 8 x 255 < 2^11: four
         * pairs' lanes share a lane in 16-bit fields, summed at once */
        for (int t = 0; t < 8; t += 4) {
            __m256i s = _mm256_or_si256(
                _mm256_or_si256(_mm256_sad_epu8(c[t], zero),
                                _mm256_slli_epi64(_mm256_sad_epu8(c[t + 1], zero), 16)),
                _mm256_or_si256(_mm256_slli_epi64(_mm256_sad_epu8(c[t + 2], zero), 32),
                                _mm256_slli_epi64(_mm256_sad_epu8(c[t + 3], zero), 48)));
            __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            uint64_t v = (uint64_t)_mm_cvtsi128_si64(_mm_add_epi64(h, _mm_unpackhi_epi64(h, h)));
            for (int u = 0; u < 4; u++) /* the first pass sets, the others add */
                acc[t + u] = (j0 ? acc[t + u] : 0) + (int64_t)(v >> (16 * u) & 0xffff);
        }
    }
}

/* The 4 x 4 tile of hamming_4x4_c: two 2 x 4 halves (their 8 byte counters
 * fill the registers), the bytes past the last 32 by POPCNT. */
__attribute__((target("avx2,popcnt"))) static void hamming_4x4_avx2(const unsigned char *const *q,
                                                                   const unsigned char *const *x,
                                                                   size_t n, int64_t *out)
{
    size_t n32 = n / 32 * 32;
    if (n32) {
        hamming_2x4_avx2(q[0], q[1], x, n32, out);
        hamming_2x4_avx2(q[2], q[3], x, n32, out + 8);
    } else {
        for (int t = 0; t < 16; t++)
            out[t] = 0;
    }
    for (int t = 0; t < 16 && n32 < n; t++)
        out[t] += hamming_c(q[t / 4] + n32, x[t % 4] + n32, n - n32);
}

__attribute__((target("popcnt"))) static int64_t hamming_popcnt(const unsigned char *a,
                                                               const unsigned char *b, size_t n)
{
    return hamming_c(a, b, n); /* the same loop, with the POPCNT instruction */
}
#endif


void tq_code_kernels_pick(tq_code_kernels *k)
{
    *k = (tq_code_kernels){.dot = dot_i8_c, .ham = hamming_c, .ham4 = hamming_4x4_c};
#if defined(__x86_64__)
    if (__atomic_load_n(&force_portable, __ATOMIC_RELAXED))
        return;
    if (__builtin_cpu_supports("avx2"))
        k->dot = dot_i8_avx2, k->dot4 = dot_i8_4x4_avx2, k->strips = 1,
        k->scores = __builtin_cpu_supports("fma");
    if (__builtin_cpu_supports("popcnt"))
        k->ham = hamming_popcnt, k->ham4 = hamming_4x4_popcnt;
    if (__builtin_cpu_supports("popcnt") && __builtin_cpu_supports("avx2"))
        k->ham4 = hamming_4x4_avx2;
#endif
}

int64_t tq_code_block_rows(size_t row_bytes)
{
    int64_t r = (int64_t)(((size_t)256 << 10) / (row_bytes ? row_bytes : 1)) / 24 * 24;
    return r < 24 ? 24 : r;
}

size_t tq_code_row_bytes(tq_dtype dt, int64_t d)
{
    return dt == TQ_DTYPE_I8     ? (size_t)d
           : dt == TQ_DTYPE_BIT  ? (size_t)(d + 7) / 8
           : dt == TQ_DTYPE_Q8_0 ? (size_t)(d / TQ_QK) * 34
                                 : (size_t)(d / TQ_QK) * 18;
}
