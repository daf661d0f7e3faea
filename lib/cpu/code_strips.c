/* code_strips.c: exact int8 dot products of 4 queries with many database
 * rows at once, for codetopk and codematrix. The rows are packed in strips of 8: each group
 * of 4 codes of the 8 rows is one 32-byte vector, so a query's 4 codes
 * (broadcast) meet 8 rows in one step and every lane is one row's sum: no
 * horizontal sums, and each strip load serves 4 queries.
 *
 * AVX2 has no signed-by-signed byte product; vpmaddubsw multiplies unsigned by
 * signed bytes. So |q| is the unsigned side and x takes q's sign (vpsignb):
 * |q| x sign(q) = q x. Each 16-bit pair sum is at most 2 x 128 x 127 = 32512,
 * so nothing saturates while x is never -128 (its sign could not flip); rows
 * holding a -128 are left to the caller's widening kernel (tq_i8_strips_pack
 * says so). Products are exact integers: the same sums as every other kernel.
 * With AVX512-VNNI (and VL), vpdpbusd does the byte products, their sums and
 * the add in one instruction, and its 32 registers hold a tile of 4 queries
 * x 3 strips. There the rows are the unsigned side, packed as x + 128 (the
 * sign bit flipped), the queries the signed one as they are, and each sum
 * less 128 times the query's sum (per block for ggml's) is q . x: the same
 * exact sums, -128 included, with no sign step (wrapping int32 sums are
 * exact modulo 2^32, and |q . x| < 2^31 for d < 2^17). */
#include "../op/simscore.h"
#include "cpu.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define GROUPS(d) (((d) + 3) / 4) /* groups of 4 codes in a row */

static int pack_strips(const int8_t *x, size_t rb, int64_t rows, int64_t d, int8_t *pk, int bias)
{
    int64_t g4 = GROUPS(d), full = d / 4, strips = (rows + 7) / 8;
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
    if (bias) /* x + 128 as unsigned bytes; the padding too (its query codes are 0) */
        for (size_t i = 0; i < (size_t)strips * (size_t)g4 * 32; i++)
            pk[i] = (int8_t)((unsigned char)pk[i] ^ 0x80u);
    return bias || ok;
}

/* c += the 4-byte products of the unsigned ab and signed xs, summed */
#define ACC_AVX2(c, ab, xs) _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(ab, xs), ones))
#define TQ_TARGET_VNNI __attribute__((target("avx2,avx512f,avx512vl,avx512vnni")))

/* c[a][s] += q[a] . strip s, for NS strips (a constant: the loops unroll). */
#define TILE_BODY(QN, NS, ACC)                                                                     \
    do {                                                                                           \
        const __m256i ones = _mm256_set1_epi16(1);                                                 \
        (void)ones;                                                                                \
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
                    c[a][s] = ACC(c[a][s], ab, _mm256_sign_epi8(b[s], sg));                        \
            }                                                                                      \
        }                                                                                          \
        for (int a = 0; a < QN; a++)                                                               \
            for (int s = 0; s < NS; s++)                                                           \
                _mm256_storeu_si256((__m256i *)(out + a * 24 + s * 8), c[a][s]);                   \
    } while (0)

__attribute__((target("avx2"))) static void tile3(const int8_t *q, const unsigned char *qabs, size_t qstride,
                                                  const int8_t *pk, int64_t g4, int32_t *out)
{
    TILE_BODY(2, 3, ACC_AVX2);
}

__attribute__((target("avx2"))) static void tile2(const int8_t *q, const unsigned char *qabs, size_t qstride,
                                                  const int8_t *pk, int64_t g4, int32_t *out)
{
    TILE_BODY(2, 2, ACC_AVX2);
}

__attribute__((target("avx2"))) static void tile1(const int8_t *q, const unsigned char *qabs, size_t qstride,
                                                  const int8_t *pk, int64_t g4, int32_t *out)
{
    TILE_BODY(2, 1, ACC_AVX2);
}

/* c[a][s] += query a's groups [G0, G1) of 4 codes (q, qstride bytes apart)
 * times strip s's (pk: x + 128, g4 groups a strip), by vpdpbusd */
#define VNNI_GROUPS(QN, NS, G0, G1)                                                                \
    for (int64_t g = (G0); g < (G1); g++) {                                                        \
        __m256i x_[NS];                                                                            \
        for (int s = 0; s < NS; s++)                                                               \
            x_[s] = _mm256_loadu_si256((const __m256i *)(pk + ((size_t)s * g4 + g) * 32));         \
        for (int a = 0; a < QN; a++) {                                                             \
            int32_t qw;                                                                            \
            memcpy(&qw, q + (size_t)a * qstride + 4 * g, 4);                                       \
            __m256i qv = _mm256_set1_epi32(qw);                                                    \
            for (int s = 0; s < NS; s++)                                                           \
                c[a][s] = _mm256_dpbusd_epi32(c[a][s], x_[s], qv);                                 \
        }                                                                                          \
    }

/* The same with VNNI: pk holds x + 128, qsum[a] the sum of query a's codes */
#define VTILE_BODY(QN, NS)                                                                         \
    do {                                                                                           \
        __m256i c[QN][NS];                                                                         \
        for (int a = 0; a < QN; a++)                                                               \
            for (int s = 0; s < NS; s++)                                                           \
                c[a][s] = _mm256_setzero_si256();                                                  \
        VNNI_GROUPS(QN, NS, 0, g4);                                                                \
        for (int a = 0; a < QN; a++) {                                                             \
            __m256i corr = _mm256_set1_epi32((int32_t)((uint32_t)qsum[a] << 7));                   \
            for (int s = 0; s < NS; s++)                                                           \
                _mm256_storeu_si256((__m256i *)(out + a * 24 + s * 8),                             \
                                    _mm256_sub_epi32(c[a][s], corr));                              \
        }                                                                                          \
    } while (0)

#define VTILE_ARGS const int8_t *q, const int32_t *qsum, size_t qstride, const int8_t *pk, int64_t g4, int32_t *out
TQ_TARGET_VNNI static void vtile3(VTILE_ARGS) { VTILE_BODY(4, 3); }
TQ_TARGET_VNNI static void vtile2(VTILE_ARGS) { VTILE_BODY(4, 2); }
TQ_TARGET_VNNI static void vtile1(VTILE_ARGS) { VTILE_BODY(4, 1); }

static int force_avx2;
void tq_cpu_code_strips_force_avx2(int on) { __atomic_store_n(&force_avx2, on, __ATOMIC_RELAXED); }

/* The VNNI kernels where the CPU has them (and the tests allow) */
static int strips_vnni(void)
{
    return !__atomic_load_n(&force_avx2, __ATOMIC_RELAXED) &&
           __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}

static void dots_4x24(const int8_t *q, const unsigned char *qabs, const int32_t *qsum,
                      size_t qstride, const int8_t *pk, int64_t g4, int strips, int32_t *out)
{
    if (qsum) { /* VNNI: 4 x 3 sums in the 32 registers */
        if (strips >= 3)
            vtile3(q, qsum, qstride, pk, g4, out);
        else if (strips == 2)
            vtile2(q, qsum, qstride, pk, g4, out);
        else
            vtile1(q, qsum, qstride, pk, g4, out);
        return;
    }
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

/* out[r] = dot[r] x qs x xs[r] rounded once to f32, the bits of
 * tq_codescore_i8: qs x xs is exact in double; the product with the dot is
 * rounded to odd (from its exact error, by FMA) so that the conversion to f32
 * is the only rounding that counts. */
__attribute__((target("avx2,fma"))) void tq_i8_scores(const int32_t *dots, const double *xs,
                                                      float qs, int n, float *out)
{
    const __m256d q = _mm256_set1_pd((double)qs), sign = _mm256_set1_pd(-0.0),
                  inf = _mm256_set1_pd(INFINITY), zero = _mm256_setzero_pd();
    const __m256i one = _mm256_set1_epi64x(1), zi = _mm256_setzero_si256();
    for (int r = 0; r < n; r += 4) {
        __m256d d = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(dots + r)));
        __m256d p = _mm256_mul_pd(_mm256_loadu_pd(xs + r), q);
        __m256d v = _mm256_mul_pd(d, p), e = _mm256_fmsub_pd(d, p, v);
        __m256i b = _mm256_castpd_si256(v);
        /* inexact, finite and even: one step toward the exact value, up in
         * magnitude where e has v's sign, else down */
        __m256d fix = _mm256_and_pd(_mm256_cmp_pd(e, zero, _CMP_NEQ_OQ),
                                    _mm256_cmp_pd(_mm256_andnot_pd(sign, v), inf, _CMP_LT_OQ));
        __m256i need = _mm256_and_si256(_mm256_castpd_si256(fix),
                                        _mm256_cmpeq_epi64(_mm256_and_si256(b, one), zi));
        __m256i down = _mm256_cmpgt_epi64(zi, _mm256_xor_si256(_mm256_castpd_si256(e), b));
        __m256i step = _mm256_or_si256(down, one); /* -1 or +1 */
        b = _mm256_add_epi64(b, _mm256_and_si256(need, step));
        __m128 f = _mm256_cvtpd_ps(_mm256_castsi256_pd(b));
        if (r + 4 <= n)
            _mm_storeu_ps(out + r, f);
        else {
            float t[4];
            _mm_storeu_ps(t, f);
            memcpy(out + r, t, (size_t)(n - r) * sizeof *t);
        }
    }
}

int tq_i8_strips_new(tq_i8_strips *S, const unsigned char *q, size_t rb, int64_t nq, int64_t d,
                     int64_t block)
{
    int64_t nq4 = (nq + 3) / 4 * 4, nb = (block + 23) / 24 * 24;
    memset(S, 0, sizeof *S);
    S->d = d;
    S->qstride = (size_t)GROUPS(d) * 4;
    S->pk = malloc((size_t)nb * S->qstride);
    S->q = calloc(2 * (size_t)nq4, S->qstride);
    S->xs = calloc((size_t)nb, sizeof *S->xs);
    if (!S->pk || !S->q || !S->xs) {
        tq_i8_strips_free(S);
        return -1;
    }
    S->qa = (unsigned char *)S->q + (size_t)nq4 * S->qstride;
    S->vnni = strips_vnni();
    if (S->vnni && !(S->qsum = calloc((size_t)nq4, sizeof *S->qsum))) {
        tq_i8_strips_free(S);
        return -1;
    }
    for (int64_t i = 0; i < nq; i++) {
        const int8_t *src = (const int8_t *)(q + (size_t)i * rb);
        int8_t *dq = S->q + (size_t)i * S->qstride;
        unsigned char *da = S->qa + (size_t)i * S->qstride;
        for (int64_t t = 0; t < d; t++)
            dq[t] = src[t], da[t] = (unsigned char)(src[t] < 0 ? -src[t] : src[t]);
        for (int64_t t = 0; S->qsum && t < d; t++)
            S->qsum[i] += src[t];
    }
    return 0;
}

int tq_i8_strips_pack(tq_i8_strips *S, const unsigned char *x, const float *xs, int64_t rows)
{
    for (int64_t r = 0; r < rows; r++)
        S->xs[r] = xs[r];
    return pack_strips((const int8_t *)x, (size_t)S->d, rows, S->d, S->pk, S->vnni);
}

void tq_i8_strips_dots(const tq_i8_strips *S, int64_t i, int64_t r0, int n, int32_t *out)
{
    int64_t g4 = GROUPS(S->d);
    dots_4x24(S->q + (size_t)i * S->qstride, S->qa + (size_t)i * S->qstride,
              S->qsum ? S->qsum + i : NULL, S->qstride,
              S->pk + (size_t)(r0 / 8) * (size_t)g4 * 32, g4, (n + 7) / 8, out);
}

void tq_i8_strips_free(tq_i8_strips *S)
{
    free(S->pk), free(S->q), free(S->xs), free(S->qd), free(S->xd), free(S->xv), free(S->qsum);
    memset(S, 0, sizeof *S);
}

/* ---- ggml's blocks: the strips, and a scale a block of 32 ---- */

/* A row of q8_0 or q4_0 blocks as d int8 values; scale b of the row at
 * sc[b * stride]. */
static void decode_blocks(tq_dtype dt, const unsigned char *row, int64_t d, int8_t *v, float *sc,
                          size_t stride)
{
    size_t bb = dt == TQ_DTYPE_Q4_0 ? 18 : 34;
    for (int64_t b = 0; b < d / TQ_QK; b++, row += bb, v += TQ_QK) {
        uint16_t h;
        memcpy(&h, row, 2);
        sc[(size_t)b * stride] = tq_f16_to_f32(h);
        if (dt == TQ_DTYPE_Q4_0)
            for (int j = 0; j < TQ_QK / 2; j++) {
                v[j] = (int8_t)((row[2 + j] & 15) - 8);
                v[j + TQ_QK / 2] = (int8_t)((row[2 + j] >> 4) - 8);
            }
        else
            memcpy(v, row + 2, TQ_QK);
    }
}

int tq_blk_strips_new(tq_i8_strips *S, const unsigned char *q, size_t qrb, int64_t nq, int64_t d,
                      int64_t block)
{
    int64_t nb = d / TQ_QK, strips = (block + 7) / 8;
    int8_t *v = malloc((size_t)(nq * d) + 1);
    float *qd = malloc((size_t)(nq * nb) * 4 + 1);
    if (!v || !qd) {
        free(v), free(qd);
        memset(S, 0, sizeof *S);
        return -1;
    }
    for (int64_t i = 0; i < nq; i++)
        decode_blocks(TQ_DTYPE_Q8_0, q + (size_t)i * qrb, d, v + i * d, qd + i * nb, 1);
    int st = tq_i8_strips_new(S, (const unsigned char *)v, (size_t)d, nq, d, block);
    free(v);
    if (st) {
        free(qd);
        return -1;
    }
    S->qd = qd, S->nb = nb;
    if (S->vnni) { /* the sums per block of 32 */
        free(S->qsum);
        if (!(S->qsum = calloc((size_t)(nq * nb) + 1, sizeof *S->qsum))) {
            tq_i8_strips_free(S);
            return -1;
        }
        for (int64_t i = 0; i < nq; i++)
            for (int64_t t = 0; t < d; t++)
                S->qsum[i * nb + t / TQ_QK] += S->q[(size_t)i * S->qstride + (size_t)t];
    }
    S->xv = malloc((size_t)(block * d) + 1);
    S->xd = malloc((size_t)(strips * 8 * nb) * 4 + 1);
    if (!S->xv || !S->xd) {
        tq_i8_strips_free(S);
        return -1;
    }
    return 0;
}

int tq_blk_strips_pack(tq_i8_strips *S, tq_dtype dt, const unsigned char *x, size_t xrb,
                       int64_t rows)
{
    int64_t d = S->d, nb = S->nb;
    for (int64_t r = 0; r < (rows + 7) / 8 * 8; r++) {
        float *sc = S->xd + (size_t)((r / 8) * nb) * 8 + r % 8; /* [strip][block][8 rows] */
        if (r < rows)
            decode_blocks(dt, x + (size_t)r * xrb, d, S->xv + r * d, sc, 8);
        else
            for (int64_t b = 0; b < nb; b++)
                sc[b * 8] = 0;
    }
    return pack_strips(S->xv, (size_t)d, rows, d, S->pk, S->vnni);
}

/* out[8 s + lane] = ggml's dot of the strip's rows with the query, NS strips:
 * each block's integer sums as in TILE_BODY, then lane by lane the f32
 * operations of the reference, in its order (no FMA). */
/* one group of 4 codes of the query (qw; |q| aw) into c[s] from x, and the
 * block's correction (none: the sign step) */
#define GROUP_AVX2(cs, x) ACC_AVX2(cs, _mm256_set1_epi32(aw), _mm256_sign_epi8(x, _mm256_set1_epi32(qw)))
#define CORR_AVX2(cs) (cs)
#define BLK_BODY(NS, GROUP, CORR)                                                                  \
    do {                                                                                           \
        const __m256i ones = _mm256_set1_epi16(1);                                                 \
        (void)ones, (void)qabs, (void)qsum;                                                        \
        __m256 f[NS];                                                                              \
        for (int s = 0; s < NS; s++)                                                               \
            f[s] = _mm256_setzero_ps();                                                            \
        for (int64_t b = 0; b < nb; b++) {                                                         \
            __m256i c[NS];                                                                         \
            for (int s = 0; s < NS; s++)                                                           \
                c[s] = _mm256_setzero_si256();                                                     \
            for (int64_t g = 8 * b; g < 8 * b + 8; g++) {                                          \
                int32_t qw, aw;                                                                    \
                memcpy(&qw, q + 4 * g, 4);                                                         \
                memcpy(&aw, qabs + 4 * g, 4);                                                      \
                (void)aw;                                                                          \
                for (int s = 0; s < NS; s++) {                                                     \
                    __m256i x = _mm256_loadu_si256((const __m256i *)(pk + ((size_t)s * g4 + g) * 32)); \
                    c[s] = GROUP(c[s], x);                                                         \
                }                                                                                  \
            }                                                                                      \
            __m256 dq = _mm256_set1_ps(qd[b]);                                                     \
            for (int s = 0; s < NS; s++) {                                                         \
                __m256 si = _mm256_cvtepi32_ps(CORR(c[s]));                                        \
                __m256 dx = _mm256_loadu_ps(xd + ((size_t)s * nb + b) * 8);                        \
                f[s] = _mm256_add_ps(f[s], q4 ? _mm256_mul_ps(_mm256_mul_ps(si, dx), dq)           \
                                              : _mm256_mul_ps(si, _mm256_mul_ps(dx, dq)));         \
            }                                                                                      \
        }                                                                                          \
        for (int s = 0; s < NS; s++)                                                               \
            _mm256_storeu_ps(out + s * 8, f[s]);                                                   \
    } while (0)

#define BLK_ARGS                                                                                   \
    const int8_t *q, const unsigned char *qabs, const int32_t *qsum, const float *qd,              \
        const int8_t *pk, const float *xd, int64_t g4, int64_t nb, int q4, float *out
__attribute__((target("avx2"))) static void blk3(BLK_ARGS) { BLK_BODY(3, GROUP_AVX2, CORR_AVX2); }
__attribute__((target("avx2"))) static void blk2(BLK_ARGS) { BLK_BODY(2, GROUP_AVX2, CORR_AVX2); }
__attribute__((target("avx2"))) static void blk1(BLK_ARGS) { BLK_BODY(1, GROUP_AVX2, CORR_AVX2); }

/* With VNNI, QN queries at a time (qstride bytes, nb block scales and sums
 * apart; out 24 apart): each strip's load serves them all, as in the int8
 * tiles; each query's lanes take the same operations as BLK_BODY's. */
#define VBLK_BODY(QN, NS)                                                                          \
    do {                                                                                           \
        __m256 f[QN][NS];                                                                          \
        for (int a = 0; a < QN; a++)                                                               \
            for (int s = 0; s < NS; s++)                                                           \
                f[a][s] = _mm256_setzero_ps();                                                     \
        for (int64_t b = 0; b < nb; b++) {                                                         \
            __m256i c[QN][NS];                                                                     \
            for (int a = 0; a < QN; a++)                                                           \
                for (int s = 0; s < NS; s++)                                                       \
                    c[a][s] = _mm256_setzero_si256();                                              \
            VNNI_GROUPS(QN, NS, 8 * b, 8 * b + 8);                                                 \
            for (int a = 0; a < QN; a++) {                                                         \
                __m256 dq = _mm256_set1_ps(qd[(size_t)a * (size_t)nb + (size_t)b]);                \
                __m256i corr = _mm256_set1_epi32(                                                  \
                    (int32_t)((uint32_t)qsum[(size_t)a * (size_t)nb + (size_t)b] << 7));           \
                for (int s = 0; s < NS; s++) {                                                     \
                    __m256 si = _mm256_cvtepi32_ps(_mm256_sub_epi32(c[a][s], corr));               \
                    __m256 dx = _mm256_loadu_ps(xd + ((size_t)s * nb + b) * 8);                    \
                    f[a][s] = _mm256_add_ps(f[a][s], q4 ? _mm256_mul_ps(_mm256_mul_ps(si, dx), dq) \
                                                        : _mm256_mul_ps(si, _mm256_mul_ps(dx, dq))); \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int a = 0; a < QN; a++)                                                               \
            for (int s = 0; s < NS; s++)                                                           \
                _mm256_storeu_ps(out + a * 24 + s * 8, f[a][s]);                                   \
    } while (0)

#define VBLK_ARGS                                                                                  \
    const int8_t *q, size_t qstride, const int32_t *qsum, const float *qd, const int8_t *pk,      \
        const float *xd, int64_t g4, int64_t nb, int q4, float *out
TQ_TARGET_VNNI static void vblk4x3(VBLK_ARGS) { VBLK_BODY(4, 3); }
TQ_TARGET_VNNI static void vblk4x2(VBLK_ARGS) { VBLK_BODY(4, 2); }
TQ_TARGET_VNNI static void vblk4x1(VBLK_ARGS) { VBLK_BODY(4, 1); }
TQ_TARGET_VNNI static void vblk1x3(VBLK_ARGS) { VBLK_BODY(1, 3); }
TQ_TARGET_VNNI static void vblk1x2(VBLK_ARGS) { VBLK_BODY(1, 2); }
TQ_TARGET_VNNI static void vblk1x1(VBLK_ARGS) { VBLK_BODY(1, 1); }

void tq_blk_strips_scores(const tq_i8_strips *S, int64_t i, int qn, int64_t r0, int n, int q4,
                          float *out)
{
    int64_t g4 = GROUPS(S->d), nb = S->nb;
    const int8_t *pk = S->pk + (size_t)(r0 / 8) * (size_t)g4 * 32;
    const float *xd = S->xd + (size_t)((r0 / 8) * nb) * 8;
    int strips = (n + 7) / 8;
    if (S->vnni && qn == 4) {
        const int8_t *q = S->q + (size_t)i * S->qstride;
        const int32_t *qs = S->qsum + i * nb;
        const float *qd = S->qd + i * nb;
        if (strips >= 3)
            vblk4x3(q, S->qstride, qs, qd, pk, xd, g4, nb, q4, out);
        else if (strips == 2)
            vblk4x2(q, S->qstride, qs, qd, pk, xd, g4, nb, q4, out);
        else
            vblk4x1(q, S->qstride, qs, qd, pk, xd, g4, nb, q4, out);
        return;
    }
    for (int a = 0; a < qn; a++, i++, out += 24) {
        const int8_t *q = S->q + (size_t)i * S->qstride;
        const unsigned char *qa = S->qa + (size_t)i * S->qstride;
        const float *qd = S->qd + i * nb;
        const int32_t *qs = S->qsum ? S->qsum + i * nb : NULL;
        if (S->vnni && strips >= 3)
            vblk1x3(q, S->qstride, qs, qd, pk, xd, g4, nb, q4, out);
        else if (S->vnni && strips == 2)
            vblk1x2(q, S->qstride, qs, qd, pk, xd, g4, nb, q4, out);
        else if (S->vnni)
            vblk1x1(q, S->qstride, qs, qd, pk, xd, g4, nb, q4, out);
        else if (strips >= 3)
            blk3(q, qa, qs, qd, pk, xd, g4, nb, q4, out);
        else if (strips == 2)
            blk2(q, qa, qs, qd, pk, xd, g4, nb, q4, out);
        else
            blk1(q, qa, qs, qd, pk, xd, g4, nb, q4, out);
    }
}
#endif
