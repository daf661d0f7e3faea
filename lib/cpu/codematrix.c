/* codematrix.c: every score of a quantized search on the CPU
 * (tq_op_codematrix): the int8 dot products, scaled and rounded once, or the
 * Hamming distances (negated) of codetopk, written in full. The sums are exact
 * whatever the kernel (code_kernels.c, and code_strips.c for int8 on AVX2),
 * so the matrix does not depend on threads, chunks or the CPU. */
#include "../op/simscore.h"
#include "cpu.h"

#include <string.h>

typedef struct job {
    tq_code_job c; /* first: the walk's part (code_walk.c) */
    float *out;    /* [nq, ndb] */
} job;

/* Query i's score with row r, from its dot product or distance. */
static float score(const job *j, int64_t i, int64_t r, int64_t v)
{
    return j->c.i8 ? tq_codescore_i8((int32_t)v, j->c.qs[i], j->c.xs[r]) : (float)-v; /* 0, not -0 */
}

/* Rows [b0, b1) for queries [begin, end): 4 x 4 tiles where a kernel has
 * them, then pair by pair. */
static void block_pairs(void *ctx, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    const job *j = ctx;
    int tiles = j->c.i8 ? j->c.kern.dot4 != NULL : 1;
    int64_t i = begin;
    if (j->c.blocks) { /* ggml blocks: the reference score, pair by pair */
        for (; i < end; i++)
            for (int64_t r = b0; r < b1; r++)
                j->out[i * j->c.ndb + r] = tq_codescore(j->c.dt, j->c.x + (size_t)r * j->c.rb,
                                                      j->c.q + (size_t)i * j->c.qb, j->c.d, 0, 0);
        return;
    }
    for (; tiles && i + 4 <= end; i += 4) {
        const unsigned char *q4[4];
        for (int a = 0; a < 4; a++)
            q4[a] = j->c.q + (size_t)(i + a) * j->c.rb;
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const unsigned char *x4[4];
            int32_t dots[16];
            int64_t dist[16];
            for (int b = 0; b < 4; b++)
                x4[b] = j->c.x + (size_t)(r + b) * j->c.rb;
            if (j->c.i8)
                j->c.kern.dot4((const int8_t *const *)q4, (const int8_t *const *)x4, j->c.d, dots);
            else
                j->c.kern.ham4(q4, x4, j->c.rb, dist);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    j->out[(i + a) * j->c.ndb + r + b] =
                        score(j, i + a, r + b, j->c.i8 ? dots[4 * a + b] : dist[4 * a + b]);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++) {
                const unsigned char *xr = j->c.x + (size_t)r * j->c.rb;
                int64_t v = j->c.i8 ? j->c.kern.dot((const int8_t *)q4[a], (const int8_t *)xr, j->c.d)
                                  : j->c.kern.ham(q4[a], xr, j->c.rb);
                j->out[(i + a) * j->c.ndb + r] = score(j, i + a, r, v);
            }
    }
    for (; i < end; i++)
        for (int64_t r = b0; r < b1; r++) {
            const unsigned char *qr = j->c.q + (size_t)i * j->c.rb, *xr = j->c.x + (size_t)r * j->c.rb;
            int64_t v = j->c.i8 ? j->c.kern.dot((const int8_t *)qr, (const int8_t *)xr, j->c.d)
                              : j->c.kern.ham(qr, xr, j->c.rb);
            j->out[i * j->c.ndb + r] = score(j, i, r, v);
        }
}

#if defined(__x86_64__)
/* A tile's scores into the matrix. */
static void tile(void *ctx, const tq_i8_strips *S, const int32_t *dots, int64_t i, int qn,
                 int64_t b0, int64_t r0, int n)
{
    const job *j = ctx;
    for (int a = 0; a < qn; a++) {
        float *o = j->out + (i + a) * j->c.ndb + b0 + r0;
        if (j->c.kern.scores)
            tq_i8_scores(dots + 24 * a, S->xs + r0, j->c.qs[i + a], n, o);
        else
            for (int r = 0; r < n; r++)
                o[r] = tq_codescore_i8(dots[24 * a + r], j->c.qs[i + a], j->c.xs[b0 + r0 + r]);
    }
}

/* Rows [b0, b1), packed in S, for queries [begin, end), 4 by 24 at a time. */
static void block_strips(void *ctx, const tq_i8_strips *S, int64_t begin, int64_t end,
                         int64_t b0, int64_t b1)
{
    tq_i8_strips_tiles(S, begin, end, b0, b1, tile, ctx);
}

/* Rows [b0, b1) of ggml's blocks, packed in S, for queries [begin, end). */
static void block_blk(void *ctx, const tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0,
                      int64_t b1)
{
    const job *j = ctx;
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i += 4) {
        int qn = end - i < 4 ? (int)(end - i) : 4;
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            float sc[4 * 24];
            tq_blk_strips_scores(S, i - begin, qn, r0, n, j->c.dt == TQ_DTYPE_Q4_0, sc);
            for (int a = 0; a < qn; a++)
                memcpy(j->out + (i + a) * j->c.ndb + b0 + r0, sc + 24 * a, (size_t)n * sizeof *sc);
        }
    }
}

#endif

tq_status tq_cpu_codematrix(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                            tq_tensor *out)
{
    (void)ctx, (void)metric;
    job j = {.out = tq_tensor_host(out)};
#if defined(__x86_64__)
    tq_code_job_init(&j.c, q, qscale, db, dbscale, block_pairs, block_strips, block_blk);
#else
    tq_code_job_init(&j.c, q, qscale, db, dbscale, block_pairs, NULL, NULL);
#endif
    tq_code_job_run(&j.c);
    return TQ_OK;
}
