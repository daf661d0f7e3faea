/* codetopk.c: top-k over quantized rows on the CPU (tq_op_codetopk): exact
 * integer dot products of int8 codes, scaled and rounded once, or Hamming
 * distances of sign bits, by the kernels of code_kernels.c and (int8, AVX2)
 * code_strips.c: the same sums either way.
 * Each query keeps its own sorted list, fed in index order, so the result
 * does not depend on threads or blocks. */
#include "../simscore.h"
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
    const unsigned char *q, *x;
    const float *qs, *xs;
    int64_t nq, ndb, d, k, base;
    size_t rb, qb;        /* bytes of a row of codes, of a query */
    int i8, blocks;       /* blocks: q8_0 or q4_0 rows, q8_0 queries */
    tq_dtype dt;          /* the rows' */
    tq_code_kernels kern;
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
    double a = (double)dot * ((double)j->qs[i] * (double)j->xs[r]), w = v[j->k - 1];
    if (a + fabs(a) * 0x1p-20 < w - fabs(w) * 0x1p-20)
        return;
    offer(v, j->ix + i * j->k, j->k, tq_codescore_i8(dot, j->qs[i], j->xs[r]), j->base + r);
}

/* Rows [b0, b1) for queries [begin, end), tile by tile of 4 queries by 4
 * rows with the widening kernels, or pair by pair. */
static void block_pairs(job *j, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    int64_t i = begin;
    if (j->blocks) { /* ggml blocks: the reference score, pair by pair */
        for (; i < end; i++)
            for (int64_t r = b0; r < b1; r++)
                offer(j->v + i * j->k, j->ix + i * j->k, j->k,
                      tq_codescore(j->dt, j->x + (size_t)r * j->rb, j->q + (size_t)i * j->qb,
                                   j->d, 0, 0),
                      j->base + r);
        return;
    }
    /* tiles of 4 queries by 4 rows; the lists see the rows in index order
     * all the same, so the tiles change no result */
    for (; j->i8 && j->kern.dot4 && i + 4 <= end; i += 4) {
        const int8_t *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = (const int8_t *)(j->q + (size_t)(i + a) * j->rb);
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const int8_t *x4[4];
            int32_t dots[16];
            for (int b = 0; b < 4; b++)
                x4[b] = (const int8_t *)(j->x + (size_t)(r + b) * j->rb);
            j->kern.dot4(q4, x4, j->d, dots);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    offer_dot(j, i + a, r + b, dots[4 * a + b]);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                offer_dot(j, i + a, r, j->kern.dot(q4[a], (const int8_t *)(j->x + (size_t)r * j->rb), j->d));
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
            j->kern.ham4(q4, x4, j->rb, dist);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) /* 0, not -0 */
                    offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k,
                          (float)-dist[4 * a + b], j->base + r + b);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                offer(j->v + (i + a) * j->k, j->ix + (i + a) * j->k, j->k,
                      (float)-j->kern.ham(q4[a], j->x + (size_t)r * j->rb, j->rb), j->base + r);
    }
    for (; i < end; i++) {
        const unsigned char *qr = j->q + (size_t)i * j->rb;
        for (int64_t r = b0; r < b1; r++) {
            const unsigned char *xr = j->x + (size_t)r * j->rb;
            if (j->i8)
                offer_dot(j, i, r, j->kern.dot((const int8_t *)qr, (const int8_t *)xr, j->d));
            else /* 0, not -0 */
                offer(j->v + i * j->k, j->ix + i * j->k, j->k, (float)-j->kern.ham(qr, xr, j->rb),
                      j->base + r);
        }
    }
}

#if defined(__x86_64__)
/* Rows [b0, b1), packed in S->pk, for queries [begin, end): tiles of 4
 * queries by 24 rows, each query's dots screened at once against its list's
 * worst score, the few that pass offered exactly. */
static void block_strips(job *j, tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i += 4) {
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            int32_t dots[4 * 24];
            tq_i8_strips_dots(S, i - begin, r0, n, dots);
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

/* Rows [b0, b1) of ggml's blocks, packed in S, for queries [begin, end):
 * 24 scores at a time (the reference's bits), offered. */
static void block_blk(job *j, tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i++)
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            float sc[24];
            tq_blk_strips_scores(S, i - begin, r0, n, j->dt == TQ_DTYPE_Q4_0, sc);
            for (int r = 0; r < n; r++)
                offer(j->v + i * j->k, j->ix + i * j->k, j->k, sc[r], j->base + b0 + r0 + r);
        }
}
#endif

static void run_queries(void *ctx, int64_t begin, int64_t end)
{
    job *j = ctx;
    int64_t block = tq_code_block_rows(j->rb);
#if defined(__x86_64__)
    tq_i8_strips S;
    int use = j->kern.strips &&
              (j->i8 ? !tq_i8_strips_new(&S, j->q + (size_t)begin * j->rb, j->rb, end - begin,
                                         j->d, block)
                     : j->blocks && !tq_blk_strips_new(&S, j->q + (size_t)begin * j->qb, j->qb,
                                                       end - begin, j->d, block));
#endif
    for (int64_t b0 = 0; b0 < j->ndb; b0 += block) {
        int64_t b1 = b0 + block < j->ndb ? b0 + block : j->ndb;
#if defined(__x86_64__)
        /* a block holding a -128 goes to the widening kernels (ggml's
         * blocks: to the reference loop) */
        const unsigned char *x = j->x + (size_t)b0 * j->rb;
        if (use && j->blocks && tq_blk_strips_pack(&S, j->dt, x, j->rb, b1 - b0)) {
            block_blk(j, &S, begin, end, b0, b1);
            continue;
        }
        if (use && !j->blocks && tq_i8_strips_pack(&S, x, j->xs + b0, b1 - b0)) {
            block_strips(j, &S, begin, end, b0, b1);
            continue;
        }
#endif
        block_pairs(j, begin, end, b0, b1);
    }
#if defined(__x86_64__)
    if (use)
        tq_i8_strips_free(&S);
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
        .base = idx_base, .i8 = q->dtype == TQ_DTYPE_I8, .dt = db->dtype,
        .v = tq_tensor_host(vals), .ix = tq_tensor_host(idx),
    };
    j.blocks = j.dt == TQ_DTYPE_Q8_0 || j.dt == TQ_DTYPE_Q4_0;
    j.rb = tq_code_row_bytes(j.dt, j.d);
    j.qb = tq_code_row_bytes(q->dtype, j.d);
    if (j.k == 0 || j.nq == 0 || j.ndb == 0)
        return TQ_OK;
    tq_code_kernels_pick(&j.kern);
    /* chunks of whole tiles (no result depends on them: each product is
     * exact and a list ranks by score, then index); a chunk packs each block
     * of rows once for all its queries, so chunks are few: two a thread */
    int64_t t = 2 * (int64_t)tq_threads_get(), chunk = (j.nq + t - 1) / t;
    tq_parallel_for(j.nq, (chunk + 3) / 4 * 4, run_queries, &j);
    return TQ_OK;
}
