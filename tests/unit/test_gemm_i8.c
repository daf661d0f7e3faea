/* test_gemm_i8.c: the int8 GEMM of lib/cpu/gemm_i8.c. The VNNI kernel and
 * the portable tq_cpu_gemm_i8_ref both give the bytes of the contract's plain
 * loop (exact int64 dot here, then its float order), and so do the AMX
 * tiles (amx.c) where the CPU has them, over shapes that cross
 * every edge of the 12 x 32 blocks and of k's quads, with leading dimensions
 * past the rows, beta 0, 1 and 0.5, bias or none, and B's columns split in
 * slices as threads take them; the rows of +-127 reach the largest sums, a
 * k of 133144 the largest dot an int32 holds; with and without the f32 rest
 * (tq_cpu_i8_rest: up to 16 columns, in order after the scales). Then the
 * values against float64, so that a wrong formula followed by both cannot
 * pass. */
#include "cpu/gemm.h"
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int8_t rand_i8(void) { return (int8_t)((int)(check_rand64() % 255) - 127); }
/* a scale in [2^-12, 2^-4): products of varied exponents */
static float rand_scale(void)
{
    return (float)((1.0 + (double)(check_rand64() >> 11) * 0x1p-53) * ldexp(1.0, -12 + (int)(check_rand64() % 8)));
}
static float rand_f(void) { return (float)((double)(check_rand64() >> 11) * 0x1p-53 * 200 - 100); }

/* Row r of a matrix of random int8, except every 7th (+127) and the one
 * after (-127): the extremes, against each other and against random rows. */
static void fill_rows(int8_t *x, int rows, int k, int ld, int all)
{
    for (int r = 0; r < rows; r++)
        for (int p = 0; p < k; p++)
            x[(long)r * ld + p] = all ? (int8_t)all
                                : r % 7 == 3 ? 127
                                : r % 7 == 4 ? -127
                                             : rand_i8();
}

static int same_bits(float x, float y) { return !memcmp(&x, &y, sizeof x); }

typedef struct {
    int m, k, n, lda, ldb, ldc, slice; /* slice: columns per call, a multiple of 32 */
    float beta;
    int bias, all_a, all_b; /* all_*: every value that one (0: the rows above) */
    int r;                  /* rest columns (at most k) */
} shape;

static int n_amx, n_vnni, n_ref; /* products checked */

static void run(const shape *s)
{
    const int m = s->m, k = s->k, n = s->n, lda = s->lda, ldb = s->ldb, ldc = s->ldc;
    /* A and B end at their last row's k-th byte: reading past it is a
     * sanitizer error */
    int8_t *a = malloc((size_t)(m - 1) * lda + k), *b = malloc((size_t)(n - 1) * ldb + k);
    float *ascale = malloc(m * sizeof(float)), *bscale = malloc(n * sizeof(float));
    float *bias = s->bias ? malloc(n * sizeof(float)) : NULL;
    float *c0 = malloc((size_t)m * ldc * sizeof(float)), *want = malloc((size_t)m * ldc * sizeof(float));
    float *c = malloc((size_t)m * ldc * sizeof(float));
    int32_t *asum = malloc(m * sizeof(int32_t));
    int64_t *dot = malloc((size_t)m * n * sizeof(int64_t));
    /* the rest: x's rows k + 3 apart (its end exact too), r distinct columns */
    const int r = s->r < k ? s->r : k, ldx = k + 3;
    float *x = malloc(((size_t)(m - 1) * ldx + k) * sizeof(float)),
          *wt = malloc(((size_t)r * n + 1) * sizeof(float));
    int64_t cols[16];
    for (int p = 0; p < r; p++) {
        int fresh;
        do {
            cols[p] = (int64_t)(check_rand64() % (uint64_t)k);
            fresh = 1;
            for (int q = 0; q < p; q++)
                fresh &= cols[q] != cols[p];
        } while (!fresh);
    }
    for (long e = 0; e < (long)(m - 1) * ldx + k; e++)
        x[e] = rand_f() / 64;
    for (long e = 0; e < (long)r * n; e++)
        wt[e] = rand_f() / 1024;
    tq_cpu_i8_rest rest = {x, cols, wt, ldx, r, n}, *rp = r ? &rest : NULL;
    memset(a, 0x55, (size_t)(m - 1) * lda + k); /* the gaps past k: not zero */
    memset(b, 0x55, (size_t)(n - 1) * ldb + k);
    fill_rows(a, m, k, lda, s->all_a);
    fill_rows(b, n, k, ldb, s->all_b);
    for (int i = 0; i < m; i++)
        ascale[i] = rand_scale();
    for (int j = 0; j < n; j++) {
        bscale[j] = rand_scale();
        if (bias)
            bias[j] = rand_f();
    }
    for (long x = 0; x < (long)m * ldc; x++)
        c0[x] = rand_f();

    /* the contract's loop: columns past n (to ldc) stay as they were */
    memcpy(want, c0, (size_t)m * ldc * sizeof(float));
    for (int i = 0; i < m; i++) {
        int64_t sa = 0;
        for (int p = 0; p < k; p++)
            sa += a[(long)i * lda + p];
        asum[i] = (int32_t)sa;
        for (int j = 0; j < n; j++) {
            int64_t d = 0;
            for (int p = 0; p < k; p++)
                d += (int64_t)a[(long)i * lda + p] * b[(long)j * ldb + p];
            dot[(long)i * n + j] = d;
            float v = (float)(int32_t)d * bscale[j];
            v = v * ascale[i];
            for (int p = 0; p < r; p++)
                v = fmaf(x[(long)i * ldx + cols[p]], wt[(long)p * n + j], v);
            if (s->beta != 0.0f)
                v = fmaf(s->beta, c0[(long)i * ldc + j], v);
            if (bias)
                v = v + bias[j];
            want[(long)i * ldc + j] = v;
        }
    }
    /* float64, and the bound of its 5 + r roundings: (float)dot, the two
     * scales, the rest's fmas, beta's and the bias, each within 2^-24 of at
     * most the sum of the terms' magnitudes */
    long far = -1;
    double far_e = 0;
    for (long e = 0; e < (long)m * n && far < 0; e++) {
        long i = e / n, j = e % n;
        double v = (double)dot[e] * bscale[j] * ascale[i], mag = fabs(v);
        for (int p = 0; p < r; p++) {
            double t = (double)x[i * ldx + cols[p]] * wt[(long)p * n + j];
            v += t;
            mag += fabs(t);
        }
        double bc = (double)s->beta * c0[i * ldc + j], bi = bias ? bias[j] : 0;
        v += bc + bi;
        mag += fabs(bc) + fabs(bi);
        if (fabs((double)want[i * ldc + j] - v) > (5 + r) * 0x1p-24 * mag)
            far = e, far_e = v;
    }
    CHECK(far < 0, "float64: m %d k %d n %d r %d: c[%ld][%ld] %.9g, float64 %.9g", m, k, n, r,
          far / n, far % n, far < 0 ? 0.0 : want[far / n * ldc + far % n], far_e);

    /* path 0: AMX tiles, 1: the VNNI kernel (AMX off), 2: the portable one */
    for (int path = 0; path < 3; path++) {
        tq_cpu_packed_b *pb = NULL;
        if (path == 0 && !tq_cpu_amx_supported(TQ_AMX_INT8))
            continue;
        tq_cpu_amx_disable(path != 0);
        if (path < 2) {
            if (!tq_cpu_gemm_i8_supported())
                continue;
            pb = tq_cpu_gemm_i8_pack_b(b, ldb, k, n);
            CHECK(pb != NULL, "pack_b: out of memory");
            if (!pb)
                continue;
        }
        memcpy(c, c0, (size_t)m * ldc * sizeof(float));
        for (int j0 = 0; j0 < n; j0 += s->slice) {
            int nc = n - j0 < s->slice ? n - j0 : s->slice;
            tq_cpu_i8_rest rj = rest; /* the portable one's columns from 0 */
            rj.wt += j0;
            if (path < 2)
                tq_cpu_gemm_i8(m, j0, nc, a, lda, asum, ascale, pb, bscale, rp, s->beta, bias,
                               c + j0, ldc);
            else
                tq_cpu_gemm_i8_ref(m, nc, a, lda, ascale, b + (long)j0 * ldb, ldb, k, bscale + j0,
                                   rp ? &rj : NULL, s->beta, bias ? bias + j0 : NULL, c + j0, ldc);
        }
        tq_cpu_gemm_packed_free(pb);
        long e = 0;
        while (e < (long)m * ldc && same_bits(c[e], want[e]))
            e++;
        CHECK(e == (long)m * ldc,
              "%s: m %d k %d n %d lda %d ldc %d slice %d beta %g bias %d r %d: c[%ld][%ld] %.9g, want %.9g",
              path == 2 ? "ref" : path ? "vnni" : "amx", m, k, n, lda, ldc, s->slice, s->beta, s->bias, r, e / ldc,
              e % ldc, e < (long)m * ldc ? c[e] : 0.0, e < (long)m * ldc ? want[e] : 0.0);
        ++*(path == 2 ? &n_ref : path ? &n_vnni : &n_amx);
    }
    tq_cpu_amx_disable(0);
    free(a), free(b), free(ascale), free(bscale), free(bias), free(c0), free(want), free(c);
    free(asum), free(dot), free(x), free(wt);
}

int main(void)
{
    /* 20: AMX's second tile of 16 rows in part (its rows copied); 48: a
     * last group of 16 read in place */
    static const int ms[] = {1, 5, 12, 13, 20, 48, 100, 257};
    static const int ks[] = {1, 3, 4, 5, 64, 65, 383, 384, 1536}; /* 65: a step of 64 and one more */
    static const int ns[] = {1, 31, 32, 33, 100, 384};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    int v = 0;
    int vnni = tq_cpu_gemm_i8_supported();
    if (!vnni)
        printf("gemm_i8: the VNNI kernel skipped (not supported on this CPU); the portable one tested\n");

    tq_cpu_gemm_i8_disable(1);
    CHECK(!tq_cpu_gemm_i8_use(), "disabled, yet in use");
    tq_cpu_gemm_i8_disable(0);
    CHECK(tq_cpu_gemm_i8_use() == vnni, "use %d, supported %d", tq_cpu_gemm_i8_use(), vnni);

    /* every shape; the variants turn over with it (v, coprime periods) */
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
        for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++)
            for (size_t in = 0; in < sizeof ns / sizeof *ns; in++, v++) {
                shape s = {ms[im], ks[ik], ns[in], ks[ik], ks[ik], ns[in], 1 << 30, betas[v % 3], v % 2,
                           0, 0, v % 8 < 3 ? 1 + v % 16 : 0};
                if (v % 5 >= 2)
                    s.lda += 1 + v % 17 * 4; /* odd ones too: rows not 4-aligned */
                if (v % 7 >= 3)
                    s.ldb += 1 + v % 13;
                if (v % 4 >= 1)
                    s.ldc += 1 + v % 11;
                if (v % 3 == 1 || v % 4 == 2)
                    s.slice = 32 * (1 + v % 3); /* 32, 64, 96 columns a call */
                run(&s);
            }
    /* the extremes throughout: every sum at its largest magnitude */
    for (int e = 0; e < 4; e++) {
        shape s = {13, 1536 + e, 33, 1536 + e, 1536 + e, 40, 32, betas[e % 3], e % 2,
                   e & 1 ? 127 : -127, e & 2 ? 127 : -127, e == 3 ? 16 : 0};
        run(&s);
    }
    /* AMX's panels of B (a MiB of strips: 16 at k = 2048) more than one,
     * A's rows in place, k in passes */
    shape panels = {64, 2048, 544, 2048, 2048, 544, 1 << 30, 0.5f, 1, 0, 0, 3};
    run(&panels);
    /* the largest k whose dot fits: 127 * 127 * 133144 < 2^31 (the kernel's
     * sums, 127 * 255 * k, wrap; their difference must not) */
    shape big = {13, 133144, 33, 133144, 133144, 33, 1 << 30, 0.0f, 1, -127, 127, 0};
    run(&big);
    big.all_a = 127;
    run(&big);

    printf("gemm_i8: %d products on AMX tiles, %d by the VNNI kernel, %d by tq_cpu_gemm_i8_ref\n",
           n_amx, n_vnni, n_ref);
    if (!tq_cpu_amx_supported(TQ_AMX_INT8))
        printf("ok gemm_i8: skip the AMX tiles: this CPU or kernel has none\n");
    return CHECK_DONE();
}
