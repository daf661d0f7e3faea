/* rowprod.c: out = alpha q . db^T against a database packed once, in the
 * strips the micro-kernel reads, so that each call packs only its query rows
 * (tq-simmat's full matrix calls it for every slice of the queries; OpenBLAS
 * repacks the whole database each time). Every element is one kernel chain of
 * fused multiply-adds over k in order, so its bits depend neither on its
 * place, nor on the call's shape, nor on the threads. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

/* One task computes RB x CB of out: the RB query rows (strips of A in L1,
 * reused across the columns) against CB database rows (256 x 384 floats of
 * packed B, 384 KiB, stay in L2 while the row strips pass). */
enum { RB = 192, CB = 256 };

typedef struct packed {
    const tq_gemm_kernel *kern; /* chosen at prepare: the strips are its width */
    int n, k;
    float *b; /* ceil(n / nr) strips of nr x k, k-major */
} packed;

/* Rows of x (k values each) as strips of width rows, k-major, zero-padded:
 * the database for B (width nr), the queries for A (width mr). */
typedef struct pack_job {
    const float *x;
    float *dst;
    int rows, width, k;
} pack_job;

typedef struct prod_job {
    const packed *p;
    const float *a; /* the packed query rows */
    float *out;
    int m;
    float alpha;
    int64_t row_blocks;
} prod_job;

static void pack_strips(void *ctx, int64_t begin, int64_t end)
{
    const pack_job *j = ctx;
    int k = j->k, w = j->width;
    for (int64_t t = begin; t < end; t++) {
        int r0 = (int)t * w, nr = j->rows - r0 < w ? j->rows - r0 : w;
        /* rows of x are the columns of x^T: B's packer with transposition
         * gives strips of w rows, k-major, zero-padded, for either side */
        tq_cpu_gemm_pack_b(j->dst + t * (int64_t)w * k, w, 1, j->x, k, 0, k, r0, nr);
    }
}

tq_status tq_cpu_rowprod_prepare(void *ctx, const tq_tensor *db, void **state)
{
    (void)ctx;
    packed *p = calloc(1, sizeof *p);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    p->kern = tq_cpu_gemm_kernel();
    p->n = (int)db->dims[0];
    p->k = (int)db->dims[1];
    int64_t strips = (p->n + p->kern->nr - 1) / p->kern->nr;
    size_t bytes = (size_t)(strips * p->kern->nr) * (size_t)p->k * 4;
    void *b = NULL;
    if (bytes && posix_memalign(&b, 64, bytes)) {
        tq_status st = tq_fail(TQ_ERR_NOMEM, "out of memory to pack a %d x %d database", p->n, p->k);
        free(p);
        return st;
    }
    p->b = b;
    pack_job j = {tq_cpu_ptr(db), p->b, p->n, p->kern->nr, p->k};
    if (p->k)
        tq_parallel_for(strips, 16, pack_strips, &j);
    *state = p;
    return TQ_OK;
}

void tq_cpu_rowprod_release(void *ctx, void *state)
{
    (void)ctx;
    packed *p = state;
    free(p->b);
    free(p);
}

static void blocks(void *ctx, int64_t begin, int64_t end)
{
    const prod_job *j = ctx;
    const packed *p = j->p;
    int mr = p->kern->mr, nr = p->kern->nr, k = p->k, n = p->n;
    for (int64_t t = begin; t < end; t++) {
        /* column-block-major: consecutive tasks of a thread share a block of B */
        int i0 = (int)(t % j->row_blocks) * RB, j0 = (int)(t / j->row_blocks) * CB;
        int i1 = i0 + RB < j->m ? i0 + RB : j->m, j1 = j0 + CB < n ? j0 + CB : n;
        for (int i = i0; i < i1; i += mr)
            for (int c = j0; c < j1; c += nr)
                p->kern->fn(k, j->a + (int64_t)i * k, p->b + (int64_t)c * k,
                            j->out + (int64_t)i * n + c, n, i1 - i < mr ? i1 - i : mr,
                            j1 - c < nr ? j1 - c : nr, j->alpha, 0.0f);
    }
}

tq_status tq_cpu_rowprod(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                         float alpha, tq_tensor *out)
{
    (void)ctx, (void)db;
    const packed *p = state;
    int m = (int)q->dims[0], mr = p->kern->mr;
    float *o = tq_cpu_ptr(out);
    if (m == 0 || p->n == 0)
        return TQ_OK;
    if (p->k == 0) { /* empty sums */
        memset(o, 0, (size_t)m * (size_t)p->n * 4);
        return TQ_OK;
    }
    int64_t strips = (m + mr - 1) / mr;
    float *a = NULL;
    if (posix_memalign((void **)&a, 64, (size_t)(strips * mr) * (size_t)p->k * 4))
        return tq_fail(TQ_ERR_NOMEM, "out of memory to pack %d query rows", m);
    pack_job pj = {tq_cpu_ptr(q), a, m, mr, p->k};
    tq_parallel_for(strips, 16, pack_strips, &pj);
    prod_job j = {p, a, o, m, alpha, (m + RB - 1) / RB};
    tq_parallel_for(j.row_blocks * ((p->n + CB - 1) / CB), 1, blocks, &j);
    free(a);
    return TQ_OK;
}
