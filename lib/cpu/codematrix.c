/* codematrix.c: every score of a quantized search on the CPU
 * (tq_op_codematrix): the int8 dot products, scaled and rounded once, or the
 * Hamming distances (negated) of codetopk, written in full. The sums are exact
 * whatever the kernel (code_kernels.c, and code_strips.c for int8 on AVX2),
 * so the matrix does not depend on threads, chunks or the CPU. */
#include "../simscore.h"
#include "cpu.h"

#include <string.h>

typedef struct job {
    const unsigned char *q, *x;
    const float *qs, *xs;
    int64_t ndb, d;
    size_t rb, qb; /* bytes of a row of codes, of a query */
    int i8, blocks; /* blocks: q8_0 or q4_0 rows, q8_0 queries */
    tq_dtype dt;    /* the rows' */
    tq_code_kernels kern;
    float *out; /* [nq, ndb] */
} job;

/* Query i's score with row r, from its dot product or distance. */
static float score(const job *j, int64_t i, int64_t r, int64_t v)
{
    return j->i8 ? tq_codescore_i8((int32_t)v, j->qs[i], j->xs[r]) : (float)-v; /* 0, not -0 */
}

/* Rows [b0, b1) for queries [begin, end): 4 x 4 tiles where a kernel has
 * them, then pair by pair. */
static void block_pairs(const job *j, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    int tiles = j->i8 ? j->kern.dot4 != NULL : 1;
    int64_t i = begin;
    if (j->blocks) { /* ggml blocks: the reference score, pair by pair */
        for (; i < end; i++)
            for (int64_t r = b0; r < b1; r++)
                j->out[i * j->ndb + r] = tq_codescore(j->dt, j->x + (size_t)r * j->rb,
                                                      j->q + (size_t)i * j->qb, j->d, 0, 0);
        return;
    }
    for (; tiles && i + 4 <= end; i += 4) {
        const unsigned char *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = j->q + (size_t)(i + a) * j->rb;
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const unsigned char *x4[4];
            int32_t dots[16];
            int64_t dist[16];
            for (int b = 0; b < 4; b++)
                x4[b] = j->x + (size_t)(r + b) * j->rb;
            if (j->i8)
                j->kern.dot4((const int8_t *const *)q4, (const int8_t *const *)x4, j->d, dots);
            else
                j->kern.ham4(q4, x4, j->rb, dist);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    j->out[(i + a) * j->ndb + r + b] =
                        score(j, i + a, r + b, j->i8 ? dots[4 * a + b] : dist[4 * a + b]);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++) {
                const unsigned char *xr = j->x + (size_t)r * j->rb;
                int64_t v = j->i8 ? j->kern.dot((const int8_t *)q4[a], (const int8_t *)xr, j->d)
                                  : j->kern.ham(q4[a], xr, j->rb);
                j->out[(i + a) * j->ndb + r] = score(j, i + a, r, v);
            }
    }
    for (; i < end; i++)
        for (int64_t r = b0; r < b1; r++) {
            const unsigned char *qr = j->q + (size_t)i * j->rb, *xr = j->x + (size_t)r * j->rb;
            int64_t v = j->i8 ? j->kern.dot((const int8_t *)qr, (const int8_t *)xr, j->d)
                              : j->kern.ham(qr, xr, j->rb);
            j->out[i * j->ndb + r] = score(j, i, r, v);
        }
}

#if defined(__x86_64__)
/* Rows [b0, b1), packed in S, for queries [begin, end), 4 by 24 at a time. */
static void block_strips(const job *j, const tq_i8_strips *S, int64_t begin, int64_t end,
                         int64_t b0, int64_t b1)
{
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i += 4)
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            int32_t dots[4 * 24];
            tq_i8_strips_dots(S, i - begin, r0, n, dots);
            for (int a = 0; a < 4 && i + a < end; a++) {
                float *o = j->out + (i + a) * j->ndb + b0 + r0;
                if (j->kern.scores)
                    tq_i8_scores(dots + 24 * a, S->xs + r0, j->qs[i + a], n, o);
                else
                    for (int r = 0; r < n; r++)
                        o[r] = tq_codescore_i8(dots[24 * a + r], j->qs[i + a], j->xs[b0 + r0 + r]);
            }
        }
}

/* Rows [b0, b1) of ggml's blocks, packed in S, for queries [begin, end). */
static void block_blk(const job *j, const tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0,
                      int64_t b1)
{
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i++)
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            float sc[24];
            tq_blk_strips_scores(S, i - begin, r0, n, j->dt == TQ_DTYPE_Q4_0, sc);
            memcpy(j->out + i * j->ndb + b0 + r0, sc, (size_t)n * sizeof *sc);
        }
}
#endif

static void run_queries(void *ctx, int64_t begin, int64_t end)
{
    const job *j = ctx;
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

tq_status tq_cpu_codematrix(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                            tq_tensor *out)
{
    (void)ctx, (void)metric;
    job j = {
        .q = tq_tensor_host(q), .x = tq_tensor_host(db),
        .qs = qscale ? tq_tensor_host(qscale) : NULL, .xs = dbscale ? tq_tensor_host(dbscale) : NULL,
        .ndb = db->dims[0], .d = q->dims[1], .i8 = q->dtype == TQ_DTYPE_I8, .dt = db->dtype,
        .out = tq_tensor_host(out),
    };
    j.blocks = j.dt == TQ_DTYPE_Q8_0 || j.dt == TQ_DTYPE_Q4_0;
    j.rb = tq_code_row_bytes(j.dt, j.d);
    j.qb = tq_code_row_bytes(q->dtype, j.d);
    int64_t nq = q->dims[0];
    if (nq == 0 || j.ndb == 0)
        return TQ_OK;
    tq_code_kernels_pick(&j.kern);
    /* chunks of whole tiles, two a thread (each packs every block once) */
    int64_t t = 2 * (int64_t)tq_threads_get(), chunk = (nq + t - 1) / t;
    tq_parallel_for(nq, (chunk + 3) / 4 * 4, run_queries, &j);
    return TQ_OK;
}
