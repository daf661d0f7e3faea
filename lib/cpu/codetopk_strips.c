/* codetopk_strips.c: exact int8 dot products of 4 queries with many database
 * rows at once, for codetopk. The rows are packed in strips of 8: each group
 * of 4 codes of the 8 rows is one 32-byte vector, so a query's 4 codes
 * (broadcast) meet 8 rows in one step and every lane is one row's sum: no
 * horizontal sums, and each strip load serves 4 queries.
 *
 * AVX2 has no signed-by-signed byte product; vpmaddubsw multiplies unsigned by
 * signed bytes. So |q| is the unsigned side and x takes q's sign (vpsignb):
 * |q| x sign(q) = q x. Each 16-bit pair sum is at most 2 x 128 x 127 = 32512,
 * so nothing saturates while x is never -128 (its sign could not flip); rows
 * holding a -128 are left to the caller's widening kernel (tq_i8_pack_strips
 * says so). Products are exact integers: the same sums as every other kernel.
 * (AVX-512 VNNI / AVX-VNNI would do the pair sums and the add in one
 * instruction; no CPU here has them, so that kernel is not written.) */
#include "cpu.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

int tq_i8_pack_strips(const int8_t *x, size_t rb, int64_t rows, int64_t d, int8_t *pk)
{
    int64_t g4 = TQ_I8_GROUPS(d), full = d / 4, strips = (rows + 7) / 8;
    int ok = 1;
    for (int64_t s = 0; s < strips; s++) {
        int8_t *dst = pk + (size_t)s * (size_t)g4 * 32;
        for (int r = 0; r < 8; r++) {
            int64_t row = s * 8 + r;
            if (row >= rows) { /* zero rows fill the last strip */
                for (int64_t g = 0; g < g4; g++)
                    memset(dst + (size_t)g * 32 + (size_t)r * 4, 0, 4);
                continue;
            }
            const int8_t *src = x + (size_t)row * rb;
            if (memchr(src, 0x80, (size_t)d))
                ok = 0;
            for (int64_t g = 0; g < full; g++)
                memcpy(dst + (size_t)g * 32 + (size_t)r * 4, src + 4 * g, 4);
            if (full < g4) { /* the last group, zero-padded */
                int8_t c[4] = {0, 0, 0, 0};
                memcpy(c, src + 4 * full, (size_t)(d - 4 * full));
                memcpy(dst + (size_t)full * 32 + (size_t)r * 4, c, 4);
            }
        }
    }
    return ok;
}

/* c[a][s] += q[a] . strip s, for NS strips (a constant: the loops unroll). */
#define TILE_BODY(QN, NS)                                                                              \
    do {                                                                                           \
        const __m256i ones = _mm256_set1_epi16(1);                                                 \
        __m256i c[QN][NS];                                                                          \
        for (int a = 0; a < QN; a++)                                                               \
            for (int s = 0; s < NS; s++)                                                           \
                c[a][s] = _mm256_setzero_si256();                                                  \
        for (int64_t g = 0; g < g4; g++) {                                                         \
            __m256i b[NS];                                                                         \
            for (int s = 0; s < NS; s++)                                                           \
                b[s] = _mm256_loadu_si256((const __m256i *)(pk + ((size_t)s * g4 + g) * 32));      \
            for (int a = 0; a < QN; a++) {                                                         \
                int32_t qw, aw;                                                                    \
                memcpy(&qw, q + (size_t)a * qstride + 4 * g, 4);                                   \
                memcpy(&aw, qabs + (size_t)a * qstride + 4 * g, 4);                                \
                __m256i sg = _mm256_set1_epi32(qw), ab = _mm256_set1_epi32(aw);                    \
                for (int s = 0; s < NS; s++)                                                       \
                    c[a][s] = _mm256_add_epi32(                                                    \
                        c[a][s], _mm256_madd_epi16(                                                \
                                     _mm256_maddubs_epi16(ab, _mm256_sign_epi8(b[s], sg)), ones)); \
            }                                                                                      \
        }                                                                                          \
        for (int a = 0; a < QN; a++)                                                               \
            for (int s = 0; s < NS; s++)                                                           \
                _mm256_storeu_si256((__m256i *)(out + a * 24 + s * 8), c[a][s]);                   \
    } while (0)

__attribute__((target("avx2"))) static void tile3(const int8_t *q, const unsigned char *qabs, size_t qstride,
                                                  const int8_t *pk, int64_t g4, int32_t *out)
{
    TILE_BODY(2, 3);
}

__attribute__((target("avx2"))) static void tile2(const int8_t *q, const unsigned char *qabs, size_t qstride,
                                                  const int8_t *pk, int64_t g4, int32_t *out)
{
    TILE_BODY(2, 2);
}

__attribute__((target("avx2"))) static void tile1(const int8_t *q, const unsigned char *qabs, size_t qstride,
                                                  const int8_t *pk, int64_t g4, int32_t *out)
{
    TILE_BODY(2, 1);
}

void tq_i8_dots_4x24(const int8_t *q, const unsigned char *qabs, size_t qstride, const int8_t *pk,
                     int64_t d, int strips, int32_t *out)
{
    int64_t g4 = TQ_I8_GROUPS(d);
    /* two queries at a time: 4 x 3 sums would not fit the 16 registers */
    for (int h = 0; h < 4; h += 2) {
        const int8_t *qh = q + (size_t)h * qstride;
        const unsigned char *ah = qabs + (size_t)h * qstride;
        if (strips >= 3)
            tile3(qh, ah, qstride, pk, g4, out + h * 24);
        else if (strips == 2)
            tile2(qh, ah, qstride, pk, g4, out + h * 24);
        else
            tile1(qh, ah, qstride, pk, g4, out + h * 24);
    }
}

/* Four rows at a time: the double product dot x (x_scale x q_scale) is within
 * 2^-51 of the exact score (no underflow: f32 scales are at least 2^-149),
 * and widening it by 2^-20 each way keeps every row that could round to the
 * list's worst score or above (the caller's test, offer_dot, decides). */
__attribute__((target("avx2"))) uint32_t tq_i8_screen(const int32_t *dots, const double *xs,
                                                      double qs, double worst, int n)
{
    const __m256d q = _mm256_set1_pd(qs), rel = _mm256_set1_pd(0x1p-20),
                  sign = _mm256_set1_pd(-0.0);
    const __m256d lo = _mm256_set1_pd(worst - fabs(worst) * 0x1p-20);
    uint32_t m = 0;
    for (int r = 0; r < n; r += 4) {
        __m256d v = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(dots + r)));
        v = _mm256_mul_pd(v, _mm256_mul_pd(_mm256_loadu_pd(xs + r), q));
        __m256d hi = _mm256_add_pd(v, _mm256_mul_pd(_mm256_andnot_pd(sign, v), rel));
        m |= (uint32_t)_mm256_movemask_pd(_mm256_cmp_pd(hi, lo, _CMP_GE_OQ)) << r;
    }
    return n < 32 ? m & ((1u << n) - 1) : m;
}
#endif
