/* matmul.c: the matmul op on the CPU: splits C (and the batch) into blocks
 * fixed by the shape alone, and runs a single-threaded sgemm (OpenBLAS, or the
 * built-in one) on each block from the worker pool. Because the blocks never
 * depend on the thread count, neither do the results, bit for bit (OpenBLAS's
 * own threading splits by thread count, and its results then differ).
 * A constant B (tq_tensor_set_constant: model weights) is packed once for the
 * built-in kernel and kept with the tensor; its products skip B's packing,
 * which OpenBLAS redoes in every call (a fifth of tq-embed's time). */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

typedef struct mm {
    tq_cpu_sgemm_fn sgemm;
    const tq_cpu_packed_b *pb; /* B packed once, or NULL */
    int ta, tb;
    int64_t m, n, k, lda, ldb;
    const float *a, *b;
    const uint16_t *a16; /* A, bf16, where pb holds bf16 pairs */
    /* tq_op_matmul_i8: A's codes and scales, B's (b8: rows of B unpacked,
     * where pb is NULL: no VNNI) */
    const int8_t *a8, *b8;
    const float *ascale, *bscale;
    tq_cpu_i8_rest rest; /* rest.r 0: none */
    float *c;
    int64_t a_stride, b_stride; /* elements between batch items; 0 = shared */
    int64_t bm, bn, row_blocks, col_blocks;
    float alpha, beta;
    /* tq_op_matmul_then's epilogue: bias, gelu, low (NULL, 0, NULL: none) */
    const float *bias;
    int gelu;
    unsigned char *low;
    tq_dtype low_dt;
    size_t low_size;
    int low_only; /* asked for; tile_low: honoured, C's tiles go to low alone */
    int tile_low;
} mm;

/* The epilogue on rows of C, c at column j0 of a row, nb columns each: the
 * operations tq_cpu_add (a row's broadcast), tq_cpu_gelu and tq_cpu_convert
 * do to each element, so the same bits, right after the block's product
 * (bias: only where the kernel did not add it as it stored C). A block of
 * tq-embed's is larger than L2, so its first rows come back from memory;
 * what is saved is the passes: GELU's row goes to its bf16 copy from L1. */
static void then_rows(const mm *p, float *c, int64_t rows, int64_t j0, int64_t nb, int bias)
{
    /* low_only's GELU into bf16 by tq_cpu_gelu_bf16_rows, as the bf16
     * kernel's tiles take it (tq.h allows it): where C came from the int8
     * product, whose bias is in already; f32 GELU and its rounding were a
     * tenth of tq-embed --precision int8 */
    if (p->gelu && p->low_only && p->low_dt == TQ_DTYPE_BF16 && !bias && tq_cpu_gelu_bf16_use()) {
        tq_cpu_gelu_bf16_rows(c, p->n, (int)rows, (int)nb,
                              (uint16_t *)(p->low + (size_t)(c - p->c) * p->low_size), p->n);
        return;
    }
    for (int64_t i = 0; i < rows; i++) {
        float *ci = c + i * p->n;
        if (bias)
            for (int64_t j = 0; j < nb; j++)
                ci[j] = ci[j] + p->bias[j0 + j];
        if (p->gelu)
            tq_cpu_gelu_span(ci, ci, nb);
        if (p->low) /* f32 to bf16 or f16: cannot fail */
            (void)tq_convert(p->low_dt, p->low + (size_t)(ci - p->c) * p->low_size,
                             TQ_DTYPE_F32, ci, (size_t)nb, 0);
    }
}

static int has_then(const mm *p) { return p->bias || p->gelu || p->low; }

static void then_args(mm *p, const tq_matmul_then *then)
{
    if (!then)
        return;
    p->bias = then->bias ? tq_cpu_ptr(then->bias) : NULL;
    p->gelu = then->gelu;
    if (then->low) {
        p->low = tq_cpu_ptr(then->low);
        p->low_dt = then->low->dtype;
        p->low_size = tq_dtype_size(p->low_dt);
    }
    p->low_only = then->low_only;
}

/* Block sizes: at most 512 x 512, halved (rows first when taller) until there
 * are 16 blocks to share out or a block would drop below ~4 MFLOP, 96 rows or
 * 64 columns. Rows come in multiples of 48, whole strips of every kernel's MR
 * (12, 6, 4): blocks of 64 rows left the 12-row kernels a strip of 4 in each,
 * and tq-embed's products ran 10% slower for it (measured on Zen 4). Columns
 * in multiples of 16 keep blocks 64-byte aligned; with a packed B, of its
 * strips' width (16 or 32), as blocks start on a strip. */
static void plan(mm *p)
{
    int64_t u = p->pb && p->pb->nr > 16 ? p->pb->nr : 16;
    /* with B packed, rows of C up to 2048 wide, rows halved first: a block
     * reads its rows of A (or packs them, for A^T) once for all its columns,
     * so the fewer blocks across, the fewer times */
    int64_t wmax = p->pb ? 2048 : 512;
    int64_t r = p->m < 512 ? p->m : 512, c = p->n < wmax ? p->n : wmax;
    for (;;) {
        int64_t blocks = ((p->m + r - 1) / r) * ((p->n + c - 1) / c);
        if (blocks >= 16 || r * c * p->k < (1 << 21))
            break;
        if ((r >= c || p->pb) && r > 96)
            r = (r / 2 + 47) / 48 * 48;
        else if (c > 64)
            c = (c / 2 + u - 1) / u * u;
        else
            break;
    }
    p->bm = r;
    p->bn = c;
    p->row_blocks = (p->m + r - 1) / r;
    p->col_blocks = (p->n + c - 1) / c;
}

/* An int8 block: rows i0.. of A's codes against B's columns j0.. (VNNI with
 * B packed, else the portable loop: the same bits), the bias added as C is
 * stored. The kernel needs each row's sum of codes (B is kept as b + 128). */
static void block_i8(const mm *p, int64_t i0, int64_t j0, int64_t mb, int64_t nb, float *c)
{
    const int8_t *a = p->a8 + i0 * p->lda;
    tq_cpu_i8_rest rest = p->rest, *rp = p->rest.r ? &rest : NULL;
    rest.x = p->rest.x ? p->rest.x + i0 * p->rest.ldx : NULL;
    if (!p->pb) {
        rest.wt = p->rest.wt ? p->rest.wt + j0 : NULL;
        tq_cpu_gemm_i8_ref((int)mb, (int)nb, a, (int)p->lda, p->ascale + i0, p->b8 + j0 * p->ldb,
                           (int)p->ldb, (int)p->k, p->bscale + j0, rp, p->beta,
                           p->bias ? p->bias + j0 : NULL, c, (int)p->n);
        return;
    }
    int32_t asum[512]; /* plan's blocks are at most 512 rows */
    tq_cpu_gemm_i8_rowsums((int)mb, (int)p->k, a, (int)p->lda, asum);
    tq_cpu_gemm_i8((int)mb, (int)j0, (int)nb, a, (int)p->lda, asum, p->ascale + i0, p->pb,
                   p->bscale, rp, p->beta, p->bias, c, (int)p->n);
}

static void mm_blocks(void *ctx, int64_t begin, int64_t end)
{
    const mm *p = ctx;
    int64_t per_item = p->row_blocks * p->col_blocks;
    for (int64_t j = begin; j < end; j++) {
        int64_t item = j / per_item, rb = j % per_item / p->col_blocks,
                cb = j % p->col_blocks;
        int64_t i0 = rb * p->bm, j0 = cb * p->bn;
        int64_t mb = p->m - i0 < p->bm ? p->m - i0 : p->bm;
        int64_t nb = p->n - j0 < p->bn ? p->n - j0 : p->bn;
        float *c = p->c + item * p->m * p->n + i0 * p->n + j0;
        /* (A and B are f32 pointers only on the f32 paths: no offsets on NULL) */
        const float *a = p->a ? p->a + item * p->a_stride + (p->ta ? i0 : i0 * p->lda) : NULL;
        const float *b = p->b ? p->b + item * p->b_stride + (p->tb ? j0 * p->ldb : j0) : NULL;
        /* the bf16 kernel adds the bias as it stores C: C then goes to
         * memory once (added afterwards, every load of C missed cache) */
        if (p->tile_low) {
            tq_cpu_gemm_bf16_low((int)mb, (int)j0, (int)nb, p->alpha,
                                 p->a16 + item * p->a_stride + i0 * p->lda, (int)p->lda, p->pb,
                                 p->bias, p->gelu,
                                 (uint16_t *)(p->low + (size_t)(c - p->c) * p->low_size),
                                 (int)p->n);
            continue;
        }
        if (p->a8)
            block_i8(p, i0, j0, mb, nb, c);
        else if (p->a16)
            tq_cpu_gemm_bf16((int)mb, (int)j0, (int)nb, p->alpha,
                             p->a16 + item * p->a_stride + i0 * p->lda, (int)p->lda, p->pb,
                             p->beta, p->bias, c, (int)p->n);
        else if (p->pb)
            tq_cpu_sgemm_packed(p->ta, (int)mb, (int)j0, (int)nb, p->alpha, a, (int)p->lda, p->pb,
                                p->beta, c, (int)p->n);
        else
            p->sgemm(p->ta, p->tb, (int)mb, (int)nb, (int)p->k, p->alpha, a, (int)p->lda, b,
                     (int)p->ldb, p->beta, c, (int)p->n);
        int bias_done = p->a16 || p->a8; /* added as the kernel stored C */
        if (p->gelu || p->low || (p->bias && !bias_done))
            then_rows(p, c, mb, j0, nb, p->bias && !bias_done);
    }
}

/* An f16 or bf16 operand as f32 (exact: every such value is one), in a
 * buffer the caller frees; f32 operands are used in place. */
static tq_status operand(const tq_tensor *t, const float **p, float **owned)
{
    *owned = NULL;
    if (t->dtype == TQ_DTYPE_F32) {
        *p = tq_cpu_ptr(t);
        return TQ_OK;
    }
    size_t n = (size_t)tq_tensor_numel(t);
    if (!(*owned = malloc(n ? n * 4 : 4)))
        return tq_fail(TQ_ERR_NOMEM, "matmul: out of memory to widen an %s operand",
                       tq_dtype_name(t->dtype));
    *p = *owned;
    return tq_convert(TQ_DTYPE_F32, *owned, t->dtype, tq_cpu_ptr(t), n, 0);
}

/* B packed for the built-in kernel: kept in a constant B's derived (made at
 * its first product, or again when it comes transposed the other way), NULL
 * for any other B or when memory is short (the product then packs as usual). */
static const tq_cpu_packed_b *packed_b(const tq_tensor *b, int tb)
{
    if (!b->constant || b->dtype != TQ_DTYPE_F32 || b->rank != 2)
        return NULL;
    tq_cpu_packed_b *pb = b->derived;
    if (pb && pb->tb == tb)
        return pb;
    tq_cpu_gemm_packed_free(pb);
    const int64_t *d = b->dims;
    /* derived is a cache beside the tensor's contents, which stay unchanged */
    pb = tq_cpu_gemm_pack_b_whole(tb, tq_cpu_ptr(b), (int)d[1], (int)(tb ? d[1] : d[0]),
                                  (int)(tb ? d[0] : d[1]));
    ((tq_tensor *)b)->derived = pb;
    return pb;
}

void tq_cpu_derived_free(void *derived) { tq_cpu_gemm_packed_free(derived); }

/* bf16 B packed into pairs for tq_cpu_gemm_bf16: a constant B's kept in its
 * derived as packed_b's are, any other packed for this product (*owned, for
 * the caller to free). NULL when memory is short. */
static const tq_cpu_packed_b *packed_bf16(const tq_tensor *b, int tb, tq_cpu_packed_b **owned)
{
    const int64_t *d = b->dims;
    int k = (int)(tb ? d[1] : d[0]), n = (int)(tb ? d[0] : d[1]);
    *owned = NULL;
    if (!b->constant)
        return *owned = tq_cpu_gemm_bf16_pack_b(tb, tq_cpu_ptr(b), (int)d[1], k, n);
    tq_cpu_packed_b *pb = b->derived;
    if (pb && pb->tb == tb && pb->pairs)
        return pb;
    tq_cpu_gemm_packed_free(pb);
    pb = tq_cpu_gemm_bf16_pack_b(tb, tq_cpu_ptr(b), (int)d[1], k, n);
    ((tq_tensor *)b)->derived = pb;
    return pb;
}

/* bf16 x bf16 on AVX512-BF16: A's rows in place, or A^T (one A, rank 2:
 * tq-train's weight gradients) copied into rows first; one B (rank 2) for
 * every batch item; anything else is widened to f32. The copy changes no
 * value and the kernel's sums run over the whole k whatever the block: the
 * bits do not depend on the thread count. 0 when it cannot run here (or
 * memory is short): the caller then widens. */
static int matmul_bf16(mm *p, int64_t batch, const tq_tensor *a, const tq_tensor *b)
{
    if (a->dtype != TQ_DTYPE_BF16 || b->dtype != TQ_DTYPE_BF16 || (p->ta && a->rank != 2) ||
        b->rank != 2 || !tq_cpu_gemm_bf16_use())
        return 0;
    uint16_t *at = NULL; /* A^T as rows of k */
    if (p->ta) {
        const uint16_t *src = tq_cpu_ptr(a);
        if (!(at = malloc((size_t)(p->m * p->k) * 2)))
            return 0;
        for (int64_t q = 0; q < p->k; q++)
            for (int64_t i = 0; i < p->m; i++)
                at[i * p->k + q] = src[q * p->lda + i];
    }
    tq_cpu_packed_b *owned;
    if (!(p->pb = packed_bf16(b, p->tb, &owned))) {
        free(at);
        return 0;
    }
    p->a16 = tq_cpu_ptr(a);
    if (at) {
        p->a16 = at;
        p->lda = p->k;
        p->ta = 0;
    }
    /* low_only where C is not read and the copy is bf16 (its GELU then
     * gelu_bf16.c's); elsewhere C and low are computed exactly, which
     * low_only allows too */
    p->tile_low = p->low_only && p->low_dt == TQ_DTYPE_BF16 && p->beta == 0.0f &&
                  (!p->gelu || tq_cpu_gelu_bf16_use());
    plan(p);
    tq_parallel_for(batch * p->row_blocks * p->col_blocks, 1, mm_blocks, p);
    tq_cpu_gemm_packed_free(owned);
    free(at);
    return 1;
}

/* i8 B [n, k] packed for tq_cpu_gemm_i8: a constant B's kept in its derived
 * (an i8 B has no other packing), any other packed for this product (*owned,
 * for the caller to free). NULL when memory is short. */
static const tq_cpu_packed_b *packed_i8(const tq_tensor *b, tq_cpu_packed_b **owned)
{
    const int64_t *d = b->dims;
    *owned = NULL;
    if (!b->constant)
        return *owned = tq_cpu_gemm_i8_pack_b(tq_cpu_ptr(b), (int)d[1], (int)d[1], (int)d[0]);
    if (!b->derived)
        ((tq_tensor *)b)->derived =
            tq_cpu_gemm_i8_pack_b(tq_cpu_ptr(b), (int)d[1], (int)d[1], (int)d[0]);
    return b->derived;
}

/* rest's weights w [n, r] transposed into r rows of n (the kernel loads a
 * strip's 32 columns of one p at once), into *wt for the caller to free. */
static tq_status rest_args(const tq_i8_rest *rest, int64_t n, tq_cpu_i8_rest *r, float **wt)
{
    int64_t nr = tq_tensor_numel(rest->cols);
    const float *w = tq_cpu_ptr(rest->w);
    *wt = malloc((size_t)(nr * n > 0 ? nr * n : 1) * sizeof **wt);
    if (!*wt)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < nr; p++)
            (*wt)[p * n + j] = w[j * nr + p];
    r->x = tq_cpu_ptr(rest->x);
    r->cols = tq_cpu_ptr(rest->cols);
    r->wt = *wt;
    r->ldx = (int)rest->x->dims[rest->x->rank - 1];
    r->r = (int)nr;
    r->ldw = (int)n;
    return TQ_OK;
}

tq_status tq_cpu_matmul_i8(void *ctx, const tq_tensor *a, const tq_tensor *ascale,
                           const tq_tensor *b, const tq_tensor *bscale, const tq_i8_rest *rest,
                           float beta, const tq_matmul_then *then, tq_tensor *c)
{
    (void)ctx;
    mm p;
    memset(&p, 0, sizeof p);
    then_args(&p, then);
    p.k = a->dims[a->rank - 1];
    p.m = a->dims[0] * (a->rank == 3 ? a->dims[1] : 1);
    p.n = b->dims[0];
    p.tb = 1;
    p.lda = p.ldb = p.k;
    p.a8 = tq_cpu_ptr(a);
    p.b8 = tq_cpu_ptr(b);
    p.ascale = tq_cpu_ptr(ascale);
    p.bscale = tq_cpu_ptr(bscale);
    p.c = tq_cpu_ptr(c);
    p.alpha = 1.0f;
    p.beta = beta;
    if (p.m == 0 || p.n == 0)
        return TQ_OK;
    float *wt = NULL;
    tq_status st = rest ? rest_args(rest, p.n, &p.rest, &wt) : TQ_OK;
    if (st)
        return st;
    tq_cpu_packed_b *owned = NULL;
    if (p.k > 0 && tq_cpu_gemm_i8_use())
        p.pb = packed_i8(b, &owned); /* NULL (memory short): the portable loop */
    plan(&p);
    tq_parallel_for(p.row_blocks * p.col_blocks, 1, mm_blocks, &p);
    tq_cpu_gemm_packed_free(owned);
    free(wt);
    return TQ_OK;
}

/* k == 0 or alpha == 0: C = beta C, A and B unread (as BLAS does). */
static void mm_scale_c(void *ctx, int64_t begin, int64_t end)
{
    const mm *p = ctx;
    for (int64_t i = begin * p->n; i < end * p->n; i++)
        p->c[i] = p->beta == 0.0f ? 0.0f : p->beta * p->c[i];
    if (has_then(p))
        then_rows(p, p->c + begin * p->n, end - begin, 0, p->n, p->bias != NULL);
}

tq_status tq_cpu_matmul(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                        int trans_b, float alpha, float beta, tq_tensor *c)
{
    return tq_cpu_matmul_then(ctx, a, trans_a, b, trans_b, alpha, beta, NULL, c);
}

tq_status tq_cpu_matmul_then(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                             int trans_b, float alpha, float beta, const tq_matmul_then *then,
                             tq_tensor *c)
{
    (void)ctx;
    mm p;
    memset(&p, 0, sizeof p);
    then_args(&p, then);
    const int64_t *ad = a->dims + a->rank - 2, *bd = b->dims + b->rank - 2;
    int64_t batch = c->rank == 3 ? c->dims[0] : 1;
    p.ta = trans_a != 0;
    p.tb = trans_b != 0;
    p.m = p.ta ? ad[1] : ad[0];
    p.k = p.ta ? ad[0] : ad[1];
    p.n = p.tb ? bd[0] : bd[1];
    p.lda = ad[1];
    p.ldb = bd[1];
    p.c = tq_cpu_ptr(c);
    p.a_stride = a->rank == 3 ? ad[0] * ad[1] : 0;
    p.b_stride = b->rank == 3 ? bd[0] * bd[1] : 0;
    p.alpha = alpha;
    p.beta = beta;
    if (batch == 0 || p.m == 0 || p.n == 0)
        return TQ_OK;
    /* A batch of A's (not transposed) against one B is one product whose
     * rows are all the items' rows: items and C's rows lie one after another.
     * tq-embed's layers multiply [documents, tokens, H] by a weight matrix, a
     * batch of ~15-row products for short sentences, which left the 12-row
     * kernels' strips a third empty: one product of every token ran 75 ->
     * 105 GFLOP/s a core. Every element sees the same operations either way. */
    if (batch > 1 && !p.ta && p.a_stride && !p.b_stride) {
        p.m *= batch;
        batch = 1;
        p.a_stride = 0;
    }
    if (p.k == 0 || alpha == 0.0f) {
        tq_parallel_for(batch * p.m, 1 + 65536 / p.n, mm_scale_c, &p);
        return TQ_OK;
    }
    if (matmul_bf16(&p, batch, a, b))
        return TQ_OK;
    float *wa, *wb = NULL;
    tq_status st = operand(a, &p.a, &wa);
    if (!st)
        st = operand(b, &p.b, &wb);
    if (st) {
        free(wa);
        free(wb);
        return st;
    }
    /* A small product costs less on the built-in kernel than loading
     * OpenBLAS does (a 36 MB library with 17,000 relocations: ~4 ms, a fifth
     * of a small tq-train run), and runs there at about OpenBLAS's speed
     * (64^3 to 128^3 measured within 15%): a process whose products are all
     * small never loads it. The rule is the shape's alone, so the bits stay
     * the same at any thread count. */
    const char *engine = "built-in";
    if (batch * p.m * p.n * p.k < TQ_CPU_SMALL_PRODUCT)
        p.sgemm = tq_cpu_sgemm_builtin;
    else
        p.sgemm = tq_cpu_sgemm_current(&engine);
    p.pb = packed_b(b, p.tb);
    plan(&p);
    int64_t jobs = batch * p.row_blocks * p.col_blocks;
    /* OpenBLAS serves concurrent callers from a fixed table of buffers (twice
     * its MAX_THREADS, 64 in Debian's build; older releases have no more) and
     * prints "too many memory regions", then crashes, when they run out: at
     * most 64 chunks, so at most 64 threads call it at once. */
    int64_t min_chunk = engine[0] == 'O' && !p.pb ? (jobs + 63) / 64 : 1;
    tq_parallel_for(jobs, min_chunk, mm_blocks, &p);
    free(wa);
    free(wb);
    return TQ_OK;
}
