/* codetopk.c: top-k over quantized rows on the CPU (tq_op_codetopk): exact
 * integer dot products of int8 codes, scaled and rounded once, or Hamming
 * distances of sign bits (POPCNT where present). With AVX2, int8 rows go
 * through the strip kernel of codetopk_strips.c (blocks holding a -128 and
 * CPUs without AVX2 through the widening kernels here: the same sums).
 * Each query keeps its own sorted list, fed in index order, so the result
 * does not depend on threads or blocks. */
#include "cpu.h"

#include <math.h>
#include <string.h>

static int force_portable;
void tq_cpu_codetopk_force_portable(int on) { __atomic_store_n(&force_portable, on, __ATOMIC_RELAXED); }

/* ---- kernels ---- */

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

__attribute__((target("popcnt"))) static int64_t hamming_popcnt(const unsigned char *a,
                                                               const unsigned char *b, size_t n)
{
    return hamming_c(a, b, n); /* the same loop, with the POPCNT instruction */
}
#endif

typedef int32_t (*dot_fn)(const int8_t *, const int8_t *, int64_t);
typedef void (*dot4_fn)(const int8_t *const *, const int8_t *const *, int64_t, int32_t *);
typedef int64_t (*ham_fn)(const unsigned char *, const unsigned char *, size_t);
typedef void (*ham4_fn)(const unsigned char *const *, const unsigned char *const *, size_t, int64_t *);

/* ---- scores ---- */

/* f32 of dot * a * b, rounded once: a * b is exact in double (24-bit
 * significands); the product with dot is rounded to odd (its exact error from
 * fma), so that the final rounding to f32 is the only one that counts. */
static float score_once(int32_t dot, float a, float b)
{
    double p = (double)a * (double)b, r = (double)dot * p;
    double e = fma((double)dot, p, -r);
    if (e != 0 && isfinite(r)) {
        uint64_t u;
        memcpy(&u, &r, 8);
        if (!(u & 1))
            r = nextafter(r, e > 0 ? INFINITY : -INFINITY);
    }
    return (float)r;
}

/* A list sorted best first: score descending, then index ascending. */
static int better(float s, int64_t i, float t, int64_t j)
{
    return s > t || (s == t && (j < 0 || (i >= 0 && i < j)));
}

static void offer(float *v, int64_t *ix, int64_t k, float s, int64_t i)
{
    if (!better(s, i, v[k - 1], ix[k - 1]))
        return;
    int64_t p = k - 1;
    while (p > 0 && better(s, i, v[p - 1], ix[p - 1])) {
        v[p] = v[p - 1], ix[p] = ix[p - 1];
        p--;
    }
    v[p] = s, ix[p] = i;
}

typedef struct job {
    const unsigned char *q, *x;
    const float *qs, *xs;
    int64_t nq, ndb, d, k, base;
    size_t rb;            /* bytes of a row of codes */
    int i8;
    dot_fn dot;
    dot4_fn dot4;         /* NULL: pair by pair */
    ham_fn ham;
    ham4_fn ham4;
    int strips;           /* int8 by the strip kernel (AVX2) */
    float *v;
    int64_t *ix;
} job;

/* Database rows per block: a block stays in cache while a chunk of queries
 * passes over it. */
#define BLOCK_BYTES (256 << 10)

/* Offers row r's dot product with query i to i's list. */
static void offer_dot(job *j, int64_t i, int64_t r, int32_t dot)
{
    float *v = j->v + i * j->k;
    /* a cheap bound first: the double product is within 2^-52 of the exact
     * score; one below the list's worst by 2^-20 of both (far more than an
     * f32 ulp, 2^-24) rounds below it and cannot enter, not even by a tie */
    double a = (double)dot * ((double)j->qs[i] * (double)j->xs[r]), w = v[j->k - 1];
    if (a + fabs(a) * 0x1p-20 < w - fabs(w) * 0x1p-20)
        return;
    offer(v, j->ix + i * j->k, j->k, score_once(dot, j->qs[i], j->xs[r]), j->base + r);
}

/* Rows [b0, b1) for queries [begin, end), tile by tile of 4 queries by 4
 * rows with the widening kernels, or pair by pair. */
static void block_pairs(job *j, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    int64_t i = begin;
    /* tiles of 4 queries by 4 rows; the lists see the rows in index order
     * all the same, so the tiles change no result */
    for (; j->i8 && j->dot4 && i + 4 <= end; i += 4) {
        const int8_t *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = (const int8_t *)(j->q + (size_t)(i + a) * j->rb);
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const int8_t *x4[4];
            int32_t dots[16];
            for (int b = 0; b < 4; b++)
                x4[b] = (const int8_t *)(j->x + (size_t)(r + b) * j->rb);
            j->dot4(q4, x4, j->d, dots);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    offer_dot(j, i + a, r + b, dots[4 * a + b]);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                offer_dot(j, i + a, r, j->dot(q4[a], (const int8_t *)(j->x + (size_t)r * j->rb), j->d));
    }
    for (; !j->i8 && i + 4 <= end; i += 4) {
        const unsigned char *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = j->q + (size_t)(i + a) * j->rb;
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const unsigned char *x4[4];
            int64_t dist[16];
            for (int b = 0; b < 4; b++)
                x4[b] = j->x + (size_t)(r + b) * j->rb;
            j->ham4(q4, x4, j->rb, dist);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) /* 0, not -0 */
                    offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k,
                          (float)-dist[4 * a + b], j->base + r + b);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k,
                      (float)-j->ham(q4[a], j->x + (size_t)r * j->rb, j->rb), j->base + r);
    }
    for (; i < end; i++) {
        const unsigned char *qr = j->q + (size_t)i * j->rb;
        for (int64_t r = b0; r < b1; r++) {
            const unsigned char *xr = j->x + (size_t)r * j->rb;
            if (j->i8)
                offer_dot(j, i, r, j->dot((const int8_t *)qr, (const int8_t *)xr, j->d));
            else /* 0, not -0 */
                offer(j->v + i * j->k, j->ix + i * j->k, j->k, (float)-j->ham(qr, xr, j->rb),
                      j->base + r);
        }
    }
}

#if defined(__x86_64__)
/* A chunk's buffers for the strip kernel (codetopk_strips.c): the block's
 * rows in strips and their scales in double, the chunk's queries padded to
 * whole groups and tiles of 4, and their absolute values. */
typedef struct strips {
    int8_t *pk, *q;
    unsigned char *qa; /* |q|, the unsigned operand: -128 is 128 */
    double *xs;
    size_t qstride;
} strips;

static void strips_free(strips *S)
{
    free(S->pk), free(S->q), free(S->xs);
}

static int strips_new(strips *S, const job *j, int64_t begin, int64_t end, int64_t block)
{
    int64_t g4 = TQ_I8_GROUPS(j->d), nq = (end - begin + 3) / 4 * 4, nb = (block + 23) / 24 * 24;
    S->qstride = (size_t)g4 * 4;
    S->pk = malloc((size_t)nb * S->qstride);
    S->q = calloc(2 * (size_t)nq, S->qstride);
    S->xs = calloc((size_t)nb, sizeof *S->xs);
    if (!S->pk || !S->q || !S->xs) {
        strips_free(S);
        return 0; /* the widening kernels need no memory */
    }
    S->qa = (unsigned char *)S->q + (size_t)nq * S->qstride;
    for (int64_t i = begin; i < end; i++) {
        const int8_t *src = (const int8_t *)(j->q + (size_t)i * j->rb);
        int8_t *dq = S->q + (size_t)(i - begin) * S->qstride;
        unsigned char *da = S->qa + (size_t)(i - begin) * S->qstride;
        for (int64_t t = 0; t < j->d; t++)
            dq[t] = src[t], da[t] = (unsigned char)(src[t] < 0 ? -src[t] : src[t]);
    }
    return 1;
}

/* Rows [b0, b1), packed in S->pk, for queries [begin, end): tiles of 4
 * queries by 24 rows, each query's dots screened at once against its list's
 * worst score, the few that pass offered exactly. */
static void block_strips(job *j, strips *S, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    int64_t rows = b1 - b0, g4 = TQ_I8_GROUPS(j->d);
    for (int64_t r = 0; r < rows; r++)
        S->xs[r] = j->xs[b0 + r];
    for (int64_t i = begin; i < end; i += 4) {
        const int8_t *q = S->q + (size_t)(i - begin) * S->qstride;
        const unsigned char *qa = S->qa + (size_t)(i - begin) * S->qstride;
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            int32_t dots[4 * 24];
            tq_i8_dots_4x24(q, qa, S->qstride, S->pk + (size_t)(r0 / 8) * (size_t)g4 * 32, j->d,
                            (n + 7) / 8, dots);
            for (int a = 0; a < 4 && i + a < end; a++) {
                const float *v = j->v + (i + a) * j->k;
                uint32_t m = tq_i8_screen(dots + 24 * a, S->xs + r0, j->qs[i + a], v[j->k - 1], n);
                for (; m; m &= m - 1) {
                    int r = __builtin_ctz(m);
                    offer_dot(j, i + a, b0 + r0 + r, dots[24 * a + r]);
                }
            }
        }
    }
}
#endif

static void run_queries(void *ctx, int64_t begin, int64_t end)
{
    job *j = ctx;
    /* rows per block, a multiple of the strip kernel's 24 */
    int64_t block = (int64_t)(BLOCK_BYTES / (j->rb ? j->rb : 1)) / 24 * 24;
    if (block < 24)
        block = 24;
#if defined(__x86_64__)
    strips S = {0};
    int use = j->strips && strips_new(&S, j, begin, end, block);
#endif
    for (int64_t b0 = 0; b0 < j->ndb; b0 += block) {
        int64_t b1 = b0 + block < j->ndb ? b0 + block : j->ndb;
#if defined(__x86_64__)
        /* a block holding a -128 goes to the widening kernels */
        if (use && tq_i8_pack_strips((const int8_t *)(j->x + (size_t)b0 * j->rb), j->rb, b1 - b0,
                                     j->d, S.pk)) {
            block_strips(j, &S, begin, end, b0, b1);
            continue;
        }
#endif
        block_pairs(j, begin, end, b0, b1);
    }
#if defined(__x86_64__)
    if (use)
        strips_free(&S);
#endif
}

tq_status tq_cpu_codetopk(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                          const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    (void)ctx, (void)metric;
    job j = {
        .q = tq_tensor_host(q), .x = tq_tensor_host(db),
        .qs = qscale ? tq_tensor_host(qscale) : NULL, .xs = dbscale ? tq_tensor_host(dbscale) : NULL,
        .nq = q->dims[0], .ndb = db->dims[0], .d = q->dims[1], .k = vals->dims[1],
        .base = idx_base, .i8 = q->dtype == TQ_DTYPE_I8,
        .dot = dot_i8_c, .ham = hamming_c, .ham4 = hamming_4x4_c,
        .v = tq_tensor_host(vals), .ix = tq_tensor_host(idx),
    };
    j.rb = j.i8 ? (size_t)j.d : (size_t)(j.d + 7) / 8;
    if (j.k == 0 || j.nq == 0 || j.ndb == 0)
        return TQ_OK;
#if defined(__x86_64__)
    if (!__atomic_load_n(&force_portable, __ATOMIC_RELAXED)) {
        if (__builtin_cpu_supports("avx2"))
            j.dot = dot_i8_avx2, j.dot4 = dot_i8_4x4_avx2, j.strips = j.i8;
        if (__builtin_cpu_supports("popcnt"))
            j.ham = hamming_popcnt, j.ham4 = hamming_4x4_popcnt;
    }
#endif
    /* chunks of whole tiles (no result depends on them: each product is
     * exact and a list ranks by score, then index); a chunk packs each block
     * of rows once for all its queries, so chunks are few: two a thread */
    int64_t t = 2 * (int64_t)tq_threads_get(), chunk = (j.nq + t - 1) / t;
    tq_parallel_for(j.nq, (chunk + 3) / 4 * 4, run_queries, &j);
    return TQ_OK;
}
