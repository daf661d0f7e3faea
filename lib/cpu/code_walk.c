/* code_walk.c: the walk that codetopk and codematrix share. Each thread takes
 * a chunk of queries and passes it over the rows block by block (a block
 * stays in cache meanwhile); a block goes to the caller's strip loop where
 * the strip kernels of code_strips.c take it (AVX2; int8, q8_0, q4_0; no code
 * -128), else to the caller's pair loop. No result depends on the chunks or
 * the blocks: every score is computed whole, the same way, wherever it is. */
#include "cpu.h"

void tq_code_job_init(tq_code_job *c, const tq_tensor *q, const tq_tensor *qscale,
                      const tq_tensor *db, const tq_tensor *dbscale, tq_code_pairs_fn pairs,
                      tq_code_strips_fn strips_i8, tq_code_strips_fn strips_blk)
{
    c->q = tq_tensor_host(q), c->x = tq_tensor_host(db);
    c->qs = qscale ? tq_tensor_host(qscale) : NULL;
    c->xs = dbscale ? tq_tensor_host(dbscale) : NULL;
    c->nq = q->dims[0], c->ndb = db->dims[0], c->d = q->dims[1];
    c->dt = db->dtype;
    c->i8 = q->dtype == TQ_DTYPE_I8;
    c->blocks = c->dt == TQ_DTYPE_Q8_0 || c->dt == TQ_DTYPE_Q4_0;
    c->rb = tq_code_row_bytes(c->dt, c->d);
    c->qb = tq_code_row_bytes(q->dtype, c->d);
    tq_code_kernels_pick(&c->kern);
    c->pairs = pairs;
    c->strips = c->blocks ? strips_blk : strips_i8;
}

static void walk(void *ctx, int64_t begin, int64_t end)
{
    tq_code_job *c = ctx;
    int64_t block = tq_code_block_rows(c->rb);
#if defined(__x86_64__)
    tq_i8_strips S;
    const unsigned char *q = c->q + (size_t)begin * c->qb;
    int use = c->kern.strips &&
              (c->i8 ? !tq_i8_strips_new(&S, q, c->qb, end - begin, c->d, block)
                     : c->blocks && !tq_blk_strips_new(&S, q, c->qb, end - begin, c->d, block));
#endif
    for (int64_t b0 = 0; b0 < c->ndb; b0 += block) {
        int64_t b1 = b0 + block < c->ndb ? b0 + block : c->ndb;
#if defined(__x86_64__)
        const unsigned char *x = c->x + (size_t)b0 * c->rb;
        if (use && (c->blocks ? tq_blk_strips_pack(&S, c->dt, x, c->rb, b1 - b0)
                              : tq_i8_strips_pack(&S, x, c->xs + b0, b1 - b0))) {
            c->strips(c, &S, begin, end, b0, b1);
            continue;
        }
#endif
        c->pairs(c, begin, end, b0, b1);
    }
#if defined(__x86_64__)
    if (use)
        tq_i8_strips_free(&S);
#endif
}

#if defined(__x86_64__)
void tq_i8_strips_tiles(const tq_i8_strips *S, int64_t begin, int64_t end, int64_t b0, int64_t b1,
                        tq_i8_tile_fn tile, void *ctx)
{
    int64_t rows = b1 - b0;
    for (int64_t i = begin; i < end; i += 4)
        for (int64_t r0 = 0; r0 < rows; r0 += 24) {
            int n = rows - r0 < 24 ? (int)(rows - r0) : 24;
            int32_t dots[4 * 24];
            tq_i8_strips_dots(S, i - begin, r0, n, dots);
            tile(ctx, S, dots, i, end - i < 4 ? (int)(end - i) : 4, b0, r0, n);
        }
}
#endif

void tq_code_job_run(tq_code_job *c)
{
    if (c->nq == 0 || c->ndb == 0)
        return;
    /* chunks of whole tiles of 4 queries; a chunk packs each block of rows
     * once for all its queries, so chunks are few: two a thread */
    int64_t t = 2 * (int64_t)tq_threads_get(), chunk = (c->nq + t - 1) / t;
    tq_parallel_for(c->nq, (chunk + 3) / 4 * 4, walk, c);
}
