/* codetopk.c: top-k over quantized rows on the CPU (tq_op_codetopk): exact
 * integer dot products of int8 codes, scaled and rounded once, or Hamming
 * distances of sign bits, by the kernels of code_kernels.c and (int8, AVX2)
 * code_strips.c: the same sums either way.
 * Each query keeps its own sorted list, fed in index order, so the result
 * does not depend on threads or blocks. */
#include "../op/simscore.h"
#include "cpu.h"

#include <math.h>
#include <string.h>

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
    tq_code_job c;        /* first: the walk's part (code_walk.c) */
    int64_t k, base;
    float *v;
    int64_t *ix;
} job;

/* Offers row r's dot product with query i to i's list. */
static void offer_dot(job *j, int64_t i, int64_t r, int32_t dot)
{
    float *v = j->v + i * j->k;
    /* a cheap bound first: the double product is within 2^-52 of the exact
     * score; one below the list's worst by 2^-20 of both (far more than an
     * f32 ulp, 2^-24) rounds below it and cannot enter, not even by a tie */
    double a = (double)dot * ((double)j->c.qs[i] * (double)j->c.xs[r]), w = v[j->k - 1];
    if (a + fabs(a) * 0x1p-20 < w - fabs(w) * 0x1p-20)
        return;
    offer(v, j->ix + i * j->k, j->k, tq_codescore_i8(dot, j->c.qs[i], j->c.xs[r]), j->base + r);
}

/* Rows [b0, b1) for queries [begin, end), tile by tile of 4 queries by 4
 * rows with the widening kernels, or pair by pair. */
static void block_pairs(void *ctx, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    job *j = ctx;
    int64_t i = begin;
    if (j->c.blocks) { /* ggml blocks: the reference score, pair by pair */
        for (; i < end; i++)
            for (int64_t r = b0; r < b1; r++)
                offer(j->v + i * j->k, j->ix + i * j->k, j->k,
                      tq_codescore(j->c.dt, j->c.x + (size_t)r * j->c.rb, j->c.q + (size_t)i * j->c.qb,
                                   j->c.d, 0, 0),
                      j->base + r);
        return;
    }
    /* tiles of 4 queries by 4 rows; the lists see the rows in index order
     * all the same, so the tiles change no result */
    for (; j->c.i8 && j->c.kern.dot4 && i + 4 <= end; i += 4) {
        const int8_t *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = (const int8_t *)(j->c.q + (size_t)(i + a) * j->c.rb);
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const int8_t *x4[4];
            int32_t dots[16];
            for (int b = 0; b < 4; b++)
                x4[b] = (const int8_t *)(j->c.x + (size_t)(r + b) * j->c.rb);
            j->c.kern.dot4(q4, x4, j->c.d, dots);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    offer_dot(j, i + a, r + b, dots[4 * a + b]);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                offer_dot(j, i + a, r, j->c.kern.dot(q4[a], (const int8_t *)(j->c.x + (size_t)r * j->c.rb), j->c.d));
    }
    for (; !j->c.i8 && i + 4 <= end; i += 4) {
        const unsigned char *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = j->c.q + (size_t)(i + a) * j->c.rb;
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const unsigned char *x4[4];
            int64_t dist[16];
            for (int b = 0; b < 4; b++)
                x4[b] = j->c.x + (size_t)(r + b) * j->c.rb;
            j->c.kern.ham4(q4, x4, j->c.rb, dist);
            for (int a = 0; a < 4; a++) {
                /* most rows are farther than the list's worst: an integer
                 * test skips them (a tie still goes to offer, which decides) */
                float w = j->v[(i + a) * j->k + j->k - 1];
                int64_t lim = !(w > -0x1p62f) ? INT64_MAX /* -inf, NaN: offer decides */
                              : w > 0x1p62f   ? -1
                                              : (int64_t)-w;
                for (int b = 0; b < 4; b++) /* 0, not -0 */
                    if (dist[4 * a + b] <= lim)
                        offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k,
                              (float)-dist[4 * a + b], j->base + r + b);
            }
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k,
                      (float)-j->c.kern.ham(q4[a], j->c.x + (size_t)r * j->c.rb, j->c.rb), j->base + r);
    }
    for (; i < end; i++) {
        const unsigned char *qr = j->c.q + (size_t)i * j->c.rb;
        for (int64_t r = b0; r < b1; r++) {
            const unsigned char *xr = j->c.x + (size_t)r * j->c.rb;
            if (j->c.i8)
                offer_dot(j, i, r, j->c.kern.dot((const int8_t *)qr, (const int8_t *)xr, j->c.d));
            else /* 0, not -0 */
                offer(j->v + i * j->k, j->ix + i * j->k, j->k, (float)-j->c.kern.ham(qr, xr, j->c.rb),
                      j->base + r);
        }
    }
}

#if defined(__x86_64__)
/* A tile: each query's dots screened at once against its list's worst
 * score, the few that pass offered exactly. */
static void tile(void *ctx, const tq_i8_strips *S, const int32_t *dots, int64_t i, int qn,
                 int64_t b0, int64_t r0, int n)
{
    job *j = ctx;
    for (int a = 0; a < qn; a++) {
        const float *v = j->v + (i + a) * j->k;
        uint32_t m = tq_i8_screen(dots + 24 * a, S->xs + r0, j->c.qs[i + a], v[j->k - 1], n);
        for (; m; m &= m - 1) {
            int r = __builtin_ctz(m);
            offer_dot(j, i + a, b0 + r0 + r, dots[24 * a + r]);
        }
    }
}

/* Rows [b0, b1), packed in S->pk, for queries [begin, end): tiles of 4
 * queries by 24 rows. */
static void block_strips(void *ctx, const tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0,
                         int64_t b1)
{
    tq_i8_strips_tiles(S, begin, end, b0, b1, tile, ctx);
}

/* Rows [b0, b1) of ggml's blocks, packed in S, for queries [begin, end):
 * 24 scores at a time (the reference's bits), offered. */
static void block_blk(void *ctx, const tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0,
                      int64_t b1)
{
    job *j = ctx;
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i += 4) {
        int qn = end - i < 4 ? (int)(end - i) : 4;
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            float sc[4 * 24];
            tq_blk_strips_scores(S, i - begin, qn, r0, n, j->c.dt == TQ_DTYPE_Q4_0, sc);
            for (int a = 0; a < qn; a++)
                for (int r = 0; r < n; r++)
                    offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k, sc[24 * a + r],
                          j->base + b0 + r0 + r);
        }
    }
}

#endif

tq_status tq_cpu_codetopk(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                          const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    (void)ctx, (void)metric;
    job j = {.k = vals->dims[1], .base = idx_base, .v = tq_tensor_host(vals),
             .ix = tq_tensor_host(idx)};
#if defined(__x86_64__)
    tq_code_job_init(&j.c, q, qscale, db, dbscale, block_pairs, block_strips, block_blk);
#else
    tq_code_job_init(&j.c, q, qscale, db, dbscale, block_pairs, NULL, NULL);
#endif
    if (j.k > 0)
        tq_code_job_run(&j.c);
    return TQ_OK;
}
