/* gemm.c: the matrix product behind the cuBLAS and rocBLAS entry points,
 * column-major as they are. Every element is summed in double from the
 * operands as stored and rounded once to f32: a transpose, leading-dimension
 * or column-major mistake in the caller changes the result by far more than
 * any rounding, so tests can tell. */

#include "standin.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double load(const void *base, int type, long long i)
{
    uint16_t h;
    switch (type) {
    case CUDA_R_16F: memcpy(&h, (const char *)base + 2 * i, 2); return half_to_double(h);
    case CUDA_R_16BF: memcpy(&h, (const char *)base + 2 * i, 2); return bf16_to_double(h);
    default: return ((const float *)base)[i];
    }
}

/* op(X) of one batch as doubles, row r of the result at out + r * k: the
 * product then reads two contiguous rows per element. */
static void unpack(const void *x, int type, int trans, int rows, int k, int ld, double *out)
{
    for (int r = 0; r < rows; r++)
        for (int p = 0; p < k; p++)
            out[(long long)r * k + p] =
                load(x, type, trans ? p + (long long)r * ld : r + (long long)p * ld);
}

void tq_sd_gemm_run(const struct tq_sd_gemm *g)
{
    size_t k = g->k ? (size_t)g->k : 1;
    double *a = malloc((size_t)g->m * k * sizeof *a), *bt = malloc((size_t)g->n * k * sizeof *bt);
    for (int b = 0; b < g->batch && a && bt; b++) {
        const void *A = (const char *)g->A + b * g->sA * (g->Atype == CUDA_R_32F ? 4 : 2);
        const void *B = (const char *)g->B + b * g->sB * (g->Btype == CUDA_R_32F ? 4 : 2);
        const float *C = (const float *)g->C + b * g->sC;
        float *D = (float *)g->D + b * g->sD;
        unpack(A, g->Atype, g->ta, g->m, g->k, g->lda, a);  /* op(A): m rows of k */
        unpack(B, g->Btype, !g->tb, g->n, g->k, g->ldb, bt); /* op(B)^T: n rows of k */
        for (int j = 0; j < g->n; j++)
            for (int i = 0; i < g->m; i++) {
                const double *x = a + (size_t)i * k, *y = bt + (size_t)j * k;
                double s = 0;
                for (int p = 0; p < g->k; p++)
                    s += x[p] * y[p];
                double d = (double)g->alpha * s;
                /* beta == 0: C is not read (it may hold NaNs), as BLAS says */
                if (g->beta != 0)
                    d += (double)g->beta * C[i + (long long)j * g->ldc];
                D[i + (long long)j * g->ldd] = (float)d;
            }
    }
    if (!a || !bt)
        tq_sd_log("gemm %dx%dx%d: out of host memory; the result is not written", g->m, g->n,
                  g->k);
    free(a);
    free(bt);
}
