/* linprod_avx2.c: linprod.h's products with AVX2, register-blocked: the
 * portable loops load and store every partial sum once a feature (a row for
 * the gradient), and were bound by those memory operations. Here a tile of
 * sums stays in ymm registers over the whole of its loop (4 rows x 12
 * outputs of z over the features; 4 features x 12 outputs of the gradient
 * over the rows), each sum still in the portable order, each product
 * rounded then added (_mm256_mul_pd, _mm256_add_pd; never an FMA): the same
 * bits. One output (logistic, linear, listwise) vectorizes over rows for z
 * (pairs of features of 4 rows transposed in registers) and over features
 * for the gradient. */
#include "linprod.h"
#include "../cpu/vmath.h"

#ifdef TQ_HAVE_ISA_VARIANTS
#include <immintrin.h>

#define KERNEL static inline __attribute__((always_inline)) TQ_TARGET_AVX2

/* ---- kp a multiple of 4: vectors over the outputs ---- */

/* z of RT rows x NV vectors of outputs */
KERNEL void fwd_tile(const double *x, int64_t dim, const double *w, const double *b, int64_t kp,
                     double *z, const int RT, const int NV)
{
    __m256d acc[4][3];
    for (int i = 0; i < RT; i++)
        for (int v = 0; v < NV; v++)
            acc[i][v] = _mm256_loadu_pd(b + 4 * v);
    for (int64_t j = 0; j < dim; j++) {
        __m256d wv[3];
        for (int v = 0; v < NV; v++)
            wv[v] = _mm256_loadu_pd(w + j * kp + 4 * v);
        for (int i = 0; i < RT; i++) {
            __m256d xv = _mm256_broadcast_sd(x + i * dim + j);
            for (int v = 0; v < NV; v++)
                acc[i][v] = _mm256_add_pd(acc[i][v], _mm256_mul_pd(xv, wv[v]));
        }
    }
    for (int i = 0; i < RT; i++)
        for (int v = 0; v < NV; v++)
            _mm256_storeu_pd(z + i * kp + 4 * v, acc[i][v]);
}

KERNEL void fwd_cols(const double *x, int64_t nr, int64_t dim, const double *w, const double *b,
                     int64_t kp, double *z, const int NV)
{
    int64_t i = 0;
    for (; i + 4 <= nr; i += 4)
        fwd_tile(x + i * dim, dim, w, b, kp, z + i * kp, 4, NV);
    for (; i < nr; i++)
        fwd_tile(x + i * dim, dim, w, b, kp, z + i * kp, 1, NV);
}

/* the gradient of JT features x NV vectors of outputs, over all nr rows */
KERNEL void grad_tile(const double *x, int64_t nr, int64_t dim, const float *wt, const double *dz,
                      int64_t kp, double *g, const int JT, const int NV)
{
    __m256d acc[4][3];
    for (int jj = 0; jj < JT; jj++)
        for (int v = 0; v < NV; v++)
            acc[jj][v] = _mm256_loadu_pd(g + jj * kp + 4 * v);
    for (int64_t r = 0; r < nr; r++) {
        __m256d dv[3];
        for (int v = 0; v < NV; v++)
            dv[v] = _mm256_loadu_pd(dz + r * kp + 4 * v);
        const double *xr = x + r * dim;
        for (int jj = 0; jj < JT; jj++) {
            __m256d xv = wt ? _mm256_set1_pd(xr[jj] * wt[r]) : _mm256_broadcast_sd(xr + jj);
            for (int v = 0; v < NV; v++)
                acc[jj][v] = _mm256_add_pd(acc[jj][v], _mm256_mul_pd(xv, dv[v]));
        }
    }
    for (int jj = 0; jj < JT; jj++)
        for (int v = 0; v < NV; v++)
            _mm256_storeu_pd(g + jj * kp + 4 * v, acc[jj][v]);
}

KERNEL void grad_cols(const double *x, int64_t nr, int64_t dim, const float *wt, const double *dz,
                      int64_t kp, double *g, const int NV)
{
    int64_t j = 0;
    for (; j + 4 <= dim; j += 4)
        grad_tile(x + j, nr, dim, wt, dz, kp, g + j * kp, 4, NV);
    for (; j < dim; j++)
        grad_tile(x + j, nr, dim, wt, dz, kp, g + j * kp, 1, NV);
}

/* ---- one output: z over rows, the gradient over features ---- */

/* z of 4 G rows: G sums of 4 rows in the lanes of a vector, each taking the
 * features in order, two at a time: rows 0 and 2, 1 and 3 side by side in
 * the halves, then their pairs interleaved into feature j and feature j + 1 */
KERNEL void fwd1_rows(const double *x, int64_t dim, const double *w, double b, double *z, const int G)
{
    __m256d acc[4];
    for (int g = 0; g < G; g++)
        acc[g] = _mm256_set1_pd(b);
    int64_t j = 0;
    for (; j + 2 <= dim; j += 2) {
        __m256d w0 = _mm256_broadcast_sd(w + j), w1 = _mm256_broadcast_sd(w + j + 1);
        for (int g = 0; g < G; g++) {
            const double *xg = x + 4 * g * dim + j;
            __m256d a = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(xg)),
                                             _mm_loadu_pd(xg + 2 * dim), 1);
            __m256d c = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(xg + dim)),
                                             _mm_loadu_pd(xg + 3 * dim), 1);
            acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(_mm256_unpacklo_pd(a, c), w0));
            acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(_mm256_unpackhi_pd(a, c), w1));
        }
    }
    if (j < dim) {
        __m256d wj = _mm256_broadcast_sd(w + j);
        for (int g = 0; g < G; g++) {
            const double *xg = x + 4 * g * dim + j;
            __m256d xv = _mm256_setr_pd(xg[0], xg[dim], xg[2 * dim], xg[3 * dim]);
            acc[g] = _mm256_add_pd(acc[g], _mm256_mul_pd(xv, wj));
        }
    }
    for (int g = 0; g < G; g++)
        _mm256_storeu_pd(z + 4 * g, acc[g]);
}

KERNEL void fwd1(const double *x, int64_t nr, int64_t dim, const double *w, double b, double *z)
{
    int64_t i = 0;
    for (; i + 16 <= nr; i += 16) /* 4 sums in flight: the adds' latency hidden */
        fwd1_rows(x + i * dim, dim, w, b, z + i, 4);
    for (; i + 4 <= nr; i += 4)
        fwd1_rows(x + i * dim, dim, w, b, z + i, 1);
    for (; i < nr; i++) { /* the portable order, a row alone */
        double s = b;
        for (int64_t j = 0; j < dim; j++)
            s += x[i * dim + j] * w[j];
        z[i] = s;
    }
}

/* g[j0 .. j0 + 4 NV) over all rows; the last vector's features past dim are
 * not read (a masked load: zeros, into g's padding) */
KERNEL void grad1_tile(const double *x, int64_t nr, int64_t dim, const float *wt, const double *dz,
                       double *g, int64_t j0, const int NV)
{
    __m256d acc[8];
    for (int v = 0; v < NV; v++)
        acc[v] = _mm256_loadu_pd(g + j0 + 4 * v);
    int64_t left = dim - j0 - 4 * (NV - 1); /* 1..4 features in the last vector */
    __m256i mask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), _mm256_setr_epi64x(0, 1, 2, 3));
    for (int64_t r = 0; r < nr; r++) {
        const double *xr = x + r * dim + j0;
        __m256d d = _mm256_broadcast_sd(dz + r), wi = _mm256_set1_pd(wt ? (double)wt[r] : 1.0);
        for (int v = 0; v < NV; v++) {
            __m256d xv = v < NV - 1 ? _mm256_loadu_pd(xr + 4 * v) : _mm256_maskload_pd(xr + 4 * v, mask);
            if (wt)
                xv = _mm256_mul_pd(xv, wi);
            acc[v] = _mm256_add_pd(acc[v], _mm256_mul_pd(xv, d));
        }
    }
    for (int v = 0; v < NV; v++)
        _mm256_storeu_pd(g + j0 + 4 * v, acc[v]);
}

KERNEL void grad1(const double *x, int64_t nr, int64_t dim, const float *wt, const double *dz,
                  double *g)
{
    for (int64_t j0 = 0; j0 < dim; j0 += 32) {
        int nv = (int)((dim - j0 + 3) / 4 < 8 ? (dim - j0 + 3) / 4 : 8);
        switch (nv) {
        case 1: grad1_tile(x, nr, dim, wt, dz, g, j0, 1); break;
        case 2: grad1_tile(x, nr, dim, wt, dz, g, j0, 2); break;
        case 3: grad1_tile(x, nr, dim, wt, dz, g, j0, 3); break;
        case 4: grad1_tile(x, nr, dim, wt, dz, g, j0, 4); break;
        case 5: grad1_tile(x, nr, dim, wt, dz, g, j0, 5); break;
        case 6: grad1_tile(x, nr, dim, wt, dz, g, j0, 6); break;
        case 7: grad1_tile(x, nr, dim, wt, dz, g, j0, 7); break;
        default: grad1_tile(x, nr, dim, wt, dz, g, j0, 8); break;
        }
    }
}

/* ---- the table's entries ---- */

static TQ_TARGET_AVX2 void forward_avx2(const double *x, int64_t nr, int64_t dim, const double *w,
                                        const double *b, int64_t kp, double *z)
{
    if (kp == 1) {
        fwd1(x, nr, dim, w, b[0], z);
        return;
    }
    for (int64_t o = 0; o < kp; o += 12) { /* kp is a multiple of 4 */
        const double *wo = w + o, *bo = b + o;
        double *zo = z + o;
        if (kp - o >= 12)
            fwd_cols(x, nr, dim, wo, bo, kp, zo, 3);
        else if (kp - o == 8)
            fwd_cols(x, nr, dim, wo, bo, kp, zo, 2);
        else
            fwd_cols(x, nr, dim, wo, bo, kp, zo, 1);
    }
}

static TQ_TARGET_AVX2 void gradient_avx2(const double *x, int64_t nr, int64_t dim, const float *wt,
                                         const double *dz, int64_t kp, double *g)
{
    if (kp == 1) {
        grad1(x, nr, dim, wt, dz, g);
        return;
    }
    for (int64_t o = 0; o < kp; o += 12) {
        const double *dzo = dz + o;
        double *go = g + o;
        if (kp - o >= 12)
            grad_cols(x, nr, dim, wt, dzo, kp, go, 3);
        else if (kp - o == 8)
            grad_cols(x, nr, dim, wt, dzo, kp, go, 2);
        else
            grad_cols(x, nr, dim, wt, dzo, kp, go, 1);
    }
}

static TQ_TARGET_AVX2 void widen_avx2(const float *x, size_t n, double *out)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_pd(out + i, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        _mm256_storeu_pd(out + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    for (; i < n; i++)
        out[i] = x[i];
}

const tq_linprod tq_linprod_avx2 = {forward_avx2, gradient_avx2, widen_avx2, "avx2"};

#endif
