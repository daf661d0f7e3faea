/* gemm.c: the built-in single-threaded sgemm: Goto-style blocking (B panels
 * in L2, A strips in L1, packed and zero-padded) around the micro-kernels of
 * gemm_kernels.c. matmul.c runs it on blocks of C in parallel. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

/* KC x NC of packed B stays in L2 (1 MiB at KC 256) while MC x KC of A and
 * the micro-kernel's strips stream through L1; KC is the kernel's own
 * (tq_gemm_kernel.kc, at most TQ_GEMM_KC_MAX). MC is a multiple of every MR. */
enum { MC = 192, NC = 1024 };
/* op(A) read in place, unpacked, up to this many elements (256 KiB: L2) */
enum { SMALL_A = 65536 };

/* op(A)[i][p] and op(B)[p][j] of row-major storage */
#define A_AT(i, p) (ta ? a[(long)(p) * lda + (i)] : a[(long)(i) * lda + (p)])
#define B_AT(p, j) (tb ? b[(long)(j) * ldb + (p)] : b[(long)(p) * ldb + (j)])

/* Rows i0.. i0+mc of op(A), columns p0.. p0+kc, as strips of MR rows, k-major. */
void tq_cpu_gemm_pack_a(float *dst, int mr, int ta, const float *a, int lda, int i0, int mc, int p0,
                   int kc)
{
    for (int s = 0; s < mc; s += mr) {
        int rows = mc - s < mr ? mc - s : mr;
        if (!ta && rows == mr) { /* the common case, without the per-element choice */
            const float *src = a + (long)(i0 + s) * lda + p0;
            for (int p = 0; p < kc; p++, dst += mr)
                for (int r = 0; r < mr; r++)
                    dst[r] = src[(long)r * lda + p];
            continue;
        }
        if (ta && rows == mr) { /* a strip's column of op(A) is a piece of A's row */
            const float *src = a + (long)p0 * lda + i0 + s;
            for (int p = 0; p < kc; p++, dst += mr, src += lda)
                for (int r = 0; r < mr; r++)
                    dst[r] = src[r];
            continue;
        }
        for (int p = 0; p < kc; p++, dst += mr) {
            int r = 0;
            for (; r < rows; r++)
                dst[r] = A_AT(i0 + s + r, p0 + p);
            for (; r < mr; r++)
                dst[r] = 0.0f;
        }
    }
}

/* Rows p0.. p0+kc of op(B), columns j0.. j0+nc, as strips of NR columns. */
void tq_cpu_gemm_pack_b(float *dst, int nr, int tb, const float *b, int ldb, int p0, int kc, int j0,
                   int nc)
{
    for (int s = 0; s < nc; s += nr) {
        int cols = nc - s < nr ? nc - s : nr;
        for (int p = 0; p < kc; p++, dst += nr) {
            int j = 0;
            if (!tb && cols == nr) { /* a loop, not memcpy: a call for 64 bytes costs more */
                for (const float *src = b + (long)(p0 + p) * ldb + j0 + s; j < nr; j++)
                    dst[j] = src[j];
                continue;
            }
            if (!tb) /* the last strip, narrower than nr: a piece of B's row */
                for (const float *src = b + (long)(p0 + p) * ldb + j0 + s; j < cols; j++)
                    dst[j] = src[j];
            for (; j < cols; j++)
                dst[j] = B_AT(p0 + p, j0 + s + j);
            for (; j < nr; j++)
                dst[j] = 0.0f;
        }
    }
}

/* Rows ic.. ic+mc of op(A) times one slice of k (rows pc.. pc+kc of op(B),
 * packed at bs in strips of nr columns, nc columns) into C's rows ic..: A
 * packed into ap first, or its rows read in place where ap is NULL. Every
 * product of this file is these calls, so all give the same bits. */
static void sgemm_slice(const tq_gemm_kernel *kern, int ta, const float *a, int lda, float *ap,
                        int ic, int mc, int pc, int kc, const float *bs, int nc, float alpha,
                        float beta, float *c, int ldc)
{
    const int mr = kern->mr, nr = kern->nr;
    if (ap)
        tq_cpu_gemm_pack_a(ap, mr, ta, a, lda, ic, mc, pc, kc);
    for (int jr = 0; jr < nc; jr += nr)
        for (int ir = 0; ir < mc; ir += mr) {
            int me = mc - ir < mr ? mc - ir : mr, ne = nc - jr < nr ? nc - jr : nr;
            float *cs = c + (long)(ic + ir) * ldc + jr;
            if (ap)
                kern->fn(kc, ap + (long)ir * kc, bs + (long)jr * kc, cs, ldc, me, ne, alpha, beta);
            else
                kern->fn_rows(kc, a + (long)(ic + ir) * lda + pc, lda, bs + (long)jr * kc, cs,
                              ldc, me, ne, alpha, beta);
        }
}

/* The product in blocks of mcb rows and ncb columns of C, A packed into ap
 * (mcb x kc) unless it is read in place, B into bp (ncb x kc). The blocks'
 * size does not change a bit of C: each element is the same kernel calls on
 * the same slices of k, whatever block it falls in. */
static void sgemm_blocks(const tq_gemm_kernel *kern, int ta, int tb, int m, int n, int k,
                         float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc, float *ap, float *bp, int mcb, int ncb)
{
    const int nr = kern->nr, KC = kern->kc;
    /* A small A is read in place where the kernel can (rows of A, not of
     * A^T): packing it would cost more than the product (a 64 x 64 A packs in
     * about the time the 64 x 64 x 10 product takes); a large one is packed,
     * MC rows at a time, so that its strips stream from L1. */
    float *apack = !ta && kern->fn_rows && (long)m * k <= SMALL_A ? NULL : ap;
    for (int jc = 0; jc < n; jc += ncb) {
        int nc = n - jc < ncb ? n - jc : ncb;
        for (int pc = 0; pc < k; pc += KC) {
            int kc = k - pc < KC ? k - pc : KC;
            /* the first slice of k applies beta; the later ones add to C */
            float bet = pc ? 1.0f : beta;
            tq_cpu_gemm_pack_b(bp, nr, tb, b, ldb, pc, kc, jc, nc);
            for (int ic = 0; ic < m; ic += mcb)
                sgemm_slice(kern, ta, a, lda, apack, ic, m - ic < mcb ? m - ic : mcb, pc, kc, bp,
                            nc, alpha, bet, c + jc, ldc);
        }
    }
}

/* Without memory for the blocks: blocks of one strip, packed on the stack;
 * slower, the same bits (a result must not depend on the memory at hand). */
static __attribute__((noinline)) void
sgemm_strips(const tq_gemm_kernel *kern, int ta, int tb, int m, int n, int k, float alpha,
             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    _Alignas(64) float as[TQ_GEMM_MR_MAX * TQ_GEMM_KC_MAX];
    _Alignas(64) float bs[TQ_GEMM_NR_MAX * TQ_GEMM_KC_MAX];
    sgemm_blocks(kern, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, as, bs, kern->mr,
                 kern->nr);
}

void tq_cpu_sgemm_builtin(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                          int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    const tq_gemm_kernel *kern = tq_cpu_gemm_kernel();
    const int mr = kern->mr, nr = kern->nr, KC = kern->kc;
    int kc_max = k < KC ? k : KC;
    int mc_max = m < MC ? (m + mr - 1) / mr * mr : MC;
    int nc_max = n < NC ? (n + nr - 1) / nr * nr : NC;
    float *ap = malloc((size_t)mc_max * (size_t)kc_max * sizeof *ap);
    float *bp = malloc((size_t)nc_max * (size_t)kc_max * sizeof *bp);
    if (ap && bp)
        sgemm_blocks(kern, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, ap, bp, MC, NC);
    else
        sgemm_strips(kern, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    free(ap);
    free(bp);
}

const char *tq_cpu_sgemm_builtin_isa(void) { return tq_cpu_gemm_kernel()->name; }

/* ---- products with a B packed once (gemm.h: tq_cpu_packed_b) ---- */

tq_cpu_packed_b *tq_cpu_gemm_packed_new(int tb, int k, int n, int nr)
{
    tq_cpu_packed_b *pb = calloc(1, sizeof *pb);
    if (!pb)
        return NULL;
    pb->tb = tb;
    pb->k = k;
    pb->n = n;
    pb->nr = nr;
    pb->npad = (n + nr - 1) / nr * nr;
    return pb;
}

tq_cpu_packed_b *tq_cpu_gemm_pack_b_whole(int tb, const float *b, int ldb, int k, int n)
{
    const tq_gemm_kernel *kern = tq_cpu_gemm_kernel();
    tq_cpu_packed_b *pb = tq_cpu_gemm_packed_new(tb, k, n, kern->nr);
    if (!pb)
        return NULL;
    pb->kern = kern;
    const int KC = kern->kc;
    /* slice pc (KC rows of op(B)) at pc * npad, its strip t at t * nr * kc */
    if (!(pb->data = malloc((size_t)pb->npad * (size_t)(k ? k : 1) * sizeof *pb->data))) {
        free(pb);
        return NULL;
    }
    for (int pc = 0; pc < k; pc += KC)
        tq_cpu_gemm_pack_b(pb->data + (size_t)pc * (size_t)pb->npad, kern->nr, tb, b, ldb, pc,
                           k - pc < KC ? k - pc : KC, 0, n);
    return pb;
}

void tq_cpu_gemm_packed_free(tq_cpu_packed_b *pb)
{
    if (pb) {
        free(pb->data);
        free(pb->pairs);
        free(pb->quads);
    }
    free(pb);
}

/* The loops of tq_cpu_sgemm_builtin without its B packing: the same slices of
 * k and the same kernel calls for every element of C, so the same bits. */
void tq_cpu_sgemm_packed(int ta, int m, int j0, int nc, float alpha, const float *a, int lda,
                         const tq_cpu_packed_b *pb, float beta, float *c, int ldc)
{
    const tq_gemm_kernel *kern = pb->kern;
    const int mr = kern->mr, k = pb->k, KC = kern->kc;
    /* A's rows in place where the kernel takes them: no packing pass over A.
     * Otherwise MC rows packed at a time, or one strip on the stack when
     * there is no memory for more. */
    float strip[TQ_GEMM_MR_MAX * TQ_GEMM_KC_MAX], *ap = NULL, *pack = NULL;
    int step = MC;
    if (ta || !kern->fn_rows) {
        int kc_max = k < KC ? k : KC, mc_max = m < MC ? (m + mr - 1) / mr * mr : MC;
        pack = ap = malloc((size_t)mc_max * (size_t)kc_max * sizeof *ap);
        if (!ap)
            pack = strip, step = mr;
    }
    for (int pc = 0; pc < k; pc += KC) {
        int kc = k - pc < KC ? k - pc : KC;
        float bet = pc ? 1.0f : beta; /* as in tq_cpu_sgemm_builtin */
        const float *bs = pb->data + (size_t)pc * (size_t)pb->npad + (size_t)j0 * (size_t)kc;
        for (int ic = 0; ic < m; ic += step) /* MC rows of A stay in L2 across B's strips */
            sgemm_slice(kern, ta, a, lda, pack, ic, m - ic < step ? m - ic : step, pc, kc, bs, nc,
                        alpha, bet, c, ldc);
    }
    free(ap);
}
