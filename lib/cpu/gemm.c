/* gemm.c: the built-in single-threaded sgemm: Goto-style blocking (B panels
 * in L2, A strips in L1, packed and zero-padded) around the micro-kernels of
 * gemm_kernels.c. matmul.c runs it on blocks of C in parallel. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

/* KC x NC of packed B (1 MiB) stays in L2 while MC x KC of A (192 KiB) and the
 * micro-kernel's strips stream through L1. MC is a multiple of every MR. */
enum { KC = 256, MC = 192, NC = 1024 };

/* op(A)[i][p] and op(B)[p][j] of row-major storage */
#define A_AT(i, p) (ta ? a[(long)(p) * lda + (i)] : a[(long)(i) * lda + (p)])
#define B_AT(p, j) (tb ? b[(long)(j) * ldb + (p)] : b[(long)(p) * ldb + (j)])

/* Rows i0.. i0+mc of op(A), columns p0.. p0+kc, as strips of MR rows, k-major. */
void tq_cpu_gemm_pack_a(float *dst, int mr, int ta, const float *a, int lda, int i0, int mc, int p0,
                   int kc)
{
    for (int s = 0; s < mc; s += mr) {
        int rows = mc - s < mr ? mc - s : mr;
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
            if (!tb && cols == nr) {
                memcpy(dst, b + (long)(p0 + p) * ldb + j0 + s, (size_t)nr * sizeof *dst);
                continue;
            }
            for (; j < cols; j++)
                dst[j] = B_AT(p0 + p, j0 + s + j);
            for (; j < nr; j++)
                dst[j] = 0.0f;
        }
    }
}

/* Without memory for the packed blocks: a plain loop, slow but right. */
static void sgemm_plain(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                        int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0;
            for (int p = 0; p < k; p++)
                acc += A_AT(i, p) * B_AT(p, j);
            float *cij = c + (long)i * ldc + j;
            *cij = beta == 0.0f ? alpha * acc : alpha * acc + beta * *cij;
        }
}

void tq_cpu_sgemm_builtin(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                          int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    const tq_gemm_kernel *kern = tq_cpu_gemm_kernel();
    const int mr = kern->mr, nr = kern->nr;
    int kc_max = k < KC ? k : KC;
    int mc_max = m < MC ? (m + mr - 1) / mr * mr : MC;
    int nc_max = n < NC ? (n + nr - 1) / nr * nr : NC;
    float *ap = malloc((size_t)mc_max * (size_t)kc_max * sizeof *ap);
    float *bp = malloc((size_t)nc_max * (size_t)kc_max * sizeof *bp);
    if (!ap || !bp) {
        free(ap);
        free(bp);
        sgemm_plain(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    for (int jc = 0; jc < n; jc += NC) {
        int nc = n - jc < NC ? n - jc : NC;
        for (int pc = 0; pc < k; pc += KC) {
            int kc = k - pc < KC ? k - pc : KC;
            /* the first slice of k applies beta; the later ones add to C */
            float bet = pc ? 1.0f : beta;
            tq_cpu_gemm_pack_b(bp, nr, tb, b, ldb, pc, kc, jc, nc);
            for (int ic = 0; ic < m; ic += MC) {
                int mc = m - ic < MC ? m - ic : MC;
                tq_cpu_gemm_pack_a(ap, mr, ta, a, lda, ic, mc, pc, kc);
                for (int jr = 0; jr < nc; jr += nr)
                    for (int ir = 0; ir < mc; ir += mr)
                        kern->fn(kc, ap + (long)ir * kc, bp + (long)jr * kc,
                                 c + (long)(ic + ir) * ldc + jc + jr, ldc,
                                 mc - ir < mr ? mc - ir : mr, nc - jr < nr ? nc - jr : nr,
                                 alpha, bet);
            }
        }
    }
    free(ap);
    free(bp);
}

const char *tq_cpu_sgemm_builtin_isa(void) { return tq_cpu_gemm_kernel()->name; }
