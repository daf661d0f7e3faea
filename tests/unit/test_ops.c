/* test_ops.c: the cross-backend op suite. Every op on every device that opens
 * (cpu, vulkan, cuda, hip), on seeded random inputs of odd shapes and edge
 * values, against float64 references written here, by NMSE
 * (sum (y - ref)^2 / sum ref^2). Every tensor is a view inside a larger parent
 * whose bytes around it hold sentinels, checked after each op. On the CPU it
 * also runs matmul on every sgemm engine and kernel, and checks that results
 * are bit-identical with 1 and 2 threads (attention included). */
#include "../../lib/cpu/cpu.h"
#include "../../lib/cpu/gemm.h"
#include "../../lib/internal.h"
#include "../../lib/op/simscore.h"
#include "check.h"
#include "tq.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* Tolerances, NMSE.
 * TOL_EW, elementwise and row-reduction ops in f32: a correctly rounded f32
 * result is within 2^-24 relative of the float64 reference, NMSE <= 4e-15; a
 * few ulp more for a device's exp/erfc stay below 1e-12. 1e-10 leaves room
 * for that, yet catches real mistakes: even the tanh approximation of GELU,
 * close as it is, gives NMSE ~1e-9 on these inputs; a wrong constant, a
 * skipped element or a cancelling variance give far more.
 * TOL_MM, matmul with k up to 1000: rounding errors of an f32 dot product grow
 * about as eps * sqrt(k) relative to the result, NMSE ~1e-12 at k = 1000;
 * 1e-9 allows blocked and tree orders, and fails on TF32 (NMSE ~1e-7) or
 * on any element computed from the wrong operands. */
#define TOL_EW 1e-10
#define TOL_MM 1e-9

static tq_device *dev;
static const char *dev_name;

/* ------------------------------------------------------------ random data */

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
static double unif(void) { return (double)(rnd() >> 11) * 0x1p-53; }
static float randf(double lo, double hi) { return (float)(lo + (hi - lo) * unif()); }
static void fill(float *x, int64_t n, double lo, double hi)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = randf(lo, hi);
}

static int64_t numel(int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    return n;
}

/* ------------------------------------------------- tensors with sentinels */

#define PAD 256 /* sentinel bytes before and after each tensor */

typedef struct gt {
    tq_tensor *parent, *t;
    size_t bytes, total;
    unsigned salt;
} gt;

static unsigned char sentinel(size_t i, unsigned salt)
{
    return (unsigned char)(0xa5u ^ (i * 131u + salt));
}

/* A tensor at byte PAD of a u8 parent filled with sentinels. data NULL fills
 * the tensor with 0xff bytes (NaN in f32, -1 in i64): an op must overwrite
 * them all. */
static gt *gt_new(tq_dtype dt, int rank, const int64_t *dims, const void *data)
{
    static unsigned salt;
    uint64_t bytes;
    if (tq_dtype_payload_bytes(dt, rank, dims, &bytes)) {
        fprintf(stderr, "test: bad shape: %s\n", tq_errmsg());
        exit(2);
    }
    gt *g = calloc(1, sizeof *g);
    g->bytes = (size_t)bytes;
    g->total = PAD + ((g->bytes + 15) & ~(size_t)15) + PAD;
    g->salt = ++salt;
    unsigned char *host = malloc(g->total);
    for (size_t i = 0; i < g->total; i++)
        host[i] = sentinel(i, g->salt);
    if (data)
        memcpy(host + PAD, data, g->bytes);
    else
        memset(host + PAD, 0xff, g->bytes);
    int64_t pd = (int64_t)g->total;
    if (tq_tensor_new(dev, TQ_DTYPE_U8, 1, &pd, &g->parent) ||
        tq_tensor_upload(g->parent, host, g->total) ||
        tq_tensor_view(g->parent, PAD, dt, rank, dims, &g->t)) {
        fprintf(stderr, "test: %s: cannot make a tensor: %s\n", dev_name, tq_errmsg());
        exit(2);
    }
    free(host);
    return g;
}

/* Downloads the parent, checks the sentinels on both sides and copies the
 * tensor's bytes out. */
static void gt_get(const gt *g, void *out, const char *what)
{
    unsigned char *host = malloc(g->total);
    tq_status st = tq_tensor_download(g->parent, host, g->total);
    CHECK(st == TQ_OK, "%s %s: download failed: %s", dev_name, what, tq_errmsg());
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < g->total; i++)
        if ((i < PAD || i >= PAD + g->bytes) && host[i] != sentinel(i, g->salt) && !bad++)
            at = i;
    CHECK(bad == 0, "%s %s: %zu sentinel bytes changed, first at %s%zd", dev_name, what, bad,
          at < PAD ? "-" : "+", at < PAD ? (ssize_t)(PAD - at) : (ssize_t)(at - PAD - g->bytes));
    if (out)
        memcpy(out, host + PAD, g->bytes);
    free(host);
}

/* gt_get for an input: sentinels intact and the bytes as uploaded. */
static void gt_unchanged(const gt *g, const void *orig, const char *what)
{
    unsigned char *now = malloc(g->bytes + 1);
    gt_get(g, now, what);
    CHECK(memcmp(now, orig, g->bytes) == 0, "%s %s: an input was modified", dev_name, what);
    free(now);
}

static void gt_free(gt *g)
{
    if (!g)
        return;
    tq_tensor_free(g->t);
    tq_tensor_free(g->parent);
    free(g);
}

/* ------------------------------------------------------------ comparison */

/* NMSE of y against ref. Non-finite references must be matched exactly
 * (NaN by NaN, inf by the same inf); a non-finite y elsewhere fails. */
static double nmse(const float *y, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(ref[i])) {
            if (isnan(ref[i]) ? !isnan(y[i]) : (double)y[i] != ref[i])
                return INFINITY;
            continue;
        }
        if (!isfinite(y[i]))
            return INFINITY;
        double e = (double)y[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

#define CHECK_NMSE(y, ref, n, tol, what)                                           \
    do {                                                                           \
        double e_ = nmse(y, ref, n);                                               \
        CHECK(e_ <= (tol), "%s: %s: NMSE %.3g > %.0e", dev_name, what, e_, (tol)); \
    } while (0)

static void shape_str(char *out, size_t n, int rank, const int64_t *dims)
{
    int k = snprintf(out, n, "[");
    for (int i = 0; i < rank && k > 0 && (size_t)k < n; i++)
        k += snprintf(out + k, n - (size_t)k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k > 0 && (size_t)k < n)
        snprintf(out + k, n - (size_t)k, "]");
}

/* ------------------------------------------------------------ matmul */

static void ref_matmul(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha,
                       const float *a, const float *b, double beta, const float *c0,
                       double *ref)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += (double)(ta ? a[p * m + i] : a[i * k + p]) *
                     (double)(tb ? b[j * k + p] : b[p * n + j]);
            ref[i * n + j] = alpha * s + (beta == 0 ? 0 : beta * c0[i * n + j]);
        }
}

/* The values of x as f16 or bf16 storage (h) and back in f32 (exact), so
 * that the reference sees what the op sees; f32 leaves x as it is. */
static void to_low(tq_dtype dt, float *x, uint16_t *h, int64_t n)
{
    for (int64_t i = 0; dt != TQ_DTYPE_F32 && i < n; i++) {
        h[i] = dt == TQ_DTYPE_F16 ? tq_f32_to_f16(x[i]) : tq_f32_to_bf16(x[i]);
        x[i] = dt == TQ_DTYPE_F16 ? tq_f16_to_f32(h[i]) : tq_bf16_to_f32(h[i]);
    }
}

/* One product, batch items of A and/or B (a_batch/b_batch 0: rank 2, shared),
 * A and B f32 or f16, against the reference; beta == 0 starts C as NaN. */
/* Set by test_matmul_constant: B shared by the batch is declared constant
 * (tq_tensor_set_constant), and the product runs twice (the CPU packs B at
 * the first and reuses that at the second). */
static int b_constant;

static void one_matmul_dt(const char *engine, int64_t batch, int a_batched, int b_batched,
                          int64_t m, int64_t n, int64_t k, int ta, int tb, float alpha, float beta,
                          tq_dtype adt, tq_dtype bdt)
{
    if (!batch) /* batch 0: plain rank-2 product */
        a_batched = b_batched = 0;
    int64_t ad[3] = {batch, ta ? k : m, ta ? m : k}, bd[3] = {batch, tb ? n : k, tb ? k : n},
            cd[3] = {batch, m, n};
    int ar = a_batched ? 3 : 2, br = b_batched ? 3 : 2, cr = batch ? 3 : 2;
    int64_t items = batch ? batch : 1;
    int64_t an = m * k * (a_batched ? items : 1), bn = k * n * (b_batched ? items : 1),
            cn = m * n * items;
    float *a = malloc((size_t)(an + 1) * 4), *b = malloc((size_t)(bn + 1) * 4),
          *c = malloc((size_t)(cn + 1) * 4), *out = malloc((size_t)(cn + 1) * 4);
    double *ref = malloc((size_t)(cn + 1) * 8);
    fill(a, an, -1, 1);
    fill(b, bn, -1, 1);
    uint16_t *ah = malloc((size_t)(an + 1) * 2), *bh = malloc((size_t)(bn + 1) * 2);
    to_low(adt, a, ah, an);
    to_low(bdt, b, bh, bn);
    const void *ad16 = adt != TQ_DTYPE_F32 ? (const void *)ah : a,
               *bd16 = bdt != TQ_DTYPE_F32 ? (const void *)bh : b;
    if (beta == 0)
        for (int64_t i = 0; i < cn; i++)
            c[i] = NAN;
    else
        fill(c, cn, -2, 2);
    for (int64_t it = 0; it < items; it++)
        ref_matmul(ta, tb, m, n, k, alpha, a + (a_batched ? it * m * k : 0),
                   b + (b_batched ? it * k * n : 0), beta, c + it * m * n, ref + it * m * n);
    gt *ga = gt_new(adt, ar, a_batched ? ad : ad + 1, ad16);
    gt *gb = gt_new(bdt, br, b_batched ? bd : bd + 1, bd16);
    gt *gc = gt_new(TQ_DTYPE_F32, cr, batch ? cd : cd + 1, c);
    int twice = b_constant && !b_batched;
    if (twice) {
        tq_tensor_set_constant(gb->t);
        tq_tensor *scratch = NULL; /* the first product, into a throwaway C */
        tq_status s0 = tq_tensor_new(dev, TQ_DTYPE_F32, cr, batch ? cd : cd + 1, &scratch);
        if (!s0)
            s0 = tq_op_matmul(ga->t, ta, gb->t, tb, alpha, 0.0f, scratch);
        CHECK(s0 == TQ_OK, "%s: matmul with a constant B: %s", dev_name, tq_errmsg());
        tq_tensor_free(scratch);
    }
    tq_status st = tq_op_matmul(ga->t, ta, gb->t, tb, alpha, beta, gc->t);
    char what[192];
    snprintf(what, sizeof what,
             "matmul %s%s batch %lld%s%s m=%lld n=%lld k=%lld %c%c alpha=%g beta=%g A %s B %s",
             engine, twice ? " constant B" : "", (long long)batch,
             batch && !a_batched ? " A shared" : "",
             batch && !b_batched ? " B shared" : "",
             (long long)m, (long long)n, (long long)k, ta ? 'T' : 'N', tb ? 'T' : 'N', alpha, beta,
             tq_dtype_name(adt), tq_dtype_name(bdt));
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gc, out, what);
    gt_unchanged(ga, ad16, what);
    gt_unchanged(gb, bd16, what);
    CHECK_NMSE(out, ref, cn, TOL_MM, what);
    gt_free(ga);
    gt_free(gb);
    gt_free(gc);
    free(a);
    free(b);
    free(c);
    free(out);
    free(ref);
    free(ah);
    free(bh);
}

static void one_matmul(const char *engine, int64_t batch, int a_batched, int b_batched,
                       int64_t m, int64_t n, int64_t k, int ta, int tb, float alpha, float beta)
{
    one_matmul_dt(engine, batch, a_batched, b_batched, m, n, k, ta, tb, alpha, beta,
                  TQ_DTYPE_F32, TQ_DTYPE_F32);
}

/* f16 and bf16 operands (storage: widened to f32 exactly): each of A, B and
 * both, in every transpose, batched and shared, at odd shapes; the reference
 * takes the rounded values, so TOL_MM holds as for f32 (on a GPU with its
 * BLAS, the f16 and bf16 pairs are the tensor-core GEMM's). */
static void test_matmul_f16(const char *engine)
{
    const tq_dtype H = TQ_DTYPE_F16, BH = TQ_DTYPE_BF16, F = TQ_DTYPE_F32;
    const tq_dtype dts[7][2] = {{H, F}, {F, H}, {H, H}, {BH, F}, {F, BH}, {BH, BH}, {H, BH}};
    for (int d = 0; d < 7; d++)
        for (int t = 0; t < 4; t++) {
            tq_dtype x = dts[d][0], y = dts[d][1];
            int ta = t & 1, tb = t >> 1;
            one_matmul_dt(engine, 0, 1, 1, 67, 45, 33, ta, tb, 1.0f, 0.0f, x, y);
            one_matmul_dt(engine, 0, 1, 1, 7, 130, 257, ta, tb, -0.5f, 1.5f, x, y);
            one_matmul_dt(engine, 3, 0, 1, 17, 9, 40, ta, tb, 2.0f, 0.0f, x, y);
            one_matmul_dt(engine, 2, 1, 0, 5, 70, 33, ta, tb, 1.0f, -1.0f, x, y);
        }
    one_matmul_dt(engine, 0, 1, 1, 6, 5, 0, 0, 0, 1.0f, 0.0f, TQ_DTYPE_F16, TQ_DTYPE_F16);
    one_matmul_dt(engine, 0, 1, 1, 6, 5, 0, 0, 0, 1.0f, 0.0f, TQ_DTYPE_BF16, TQ_DTYPE_BF16);
}

static void test_matmul(const char *engine)
{
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {7, 33, 5}, {33, 7, 1000}, {67, 45, 33}, {200, 130, 257}, {1, 300, 64},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            one_matmul(engine, 0, 1, 1, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                       1.0f, 0.0f);
            one_matmul(engine, 0, 1, 1, shapes[s][0], shapes[s][1], shapes[s][2], t & 1, t >> 1,
                       -0.5f, 1.5f);
        }
    for (int t = 0; t < 4; t++) {
        one_matmul(engine, 3, 1, 1, 17, 9, 40, t & 1, t >> 1, 1.0f, 0.0f);
        one_matmul(engine, 3, 0, 1, 17, 9, 40, t & 1, t >> 1, 2.0f, 0.0f);
        one_matmul(engine, 4, 1, 0, 5, 70, 33, t & 1, t >> 1, 1.0f, -1.0f);
        one_matmul(engine, 2, 1, 1, 130, 90, 300, t & 1, t >> 1, 1.0f, 0.5f);
    }
    one_matmul(engine, 1, 1, 1, 3, 4, 5, 0, 0, 1.0f, 0.0f);  /* a batch of one */
    one_matmul(engine, 0, 1, 1, 6, 5, 0, 0, 0, 1.0f, 0.0f);  /* k = 0: C = 0 */
    one_matmul(engine, 0, 1, 1, 6, 5, 0, 1, 1, 1.0f, -2.0f); /* k = 0: C = beta C */
    test_matmul_f16(engine);
}

/* A constant B (model weights): the same products against the float64
 * reference; an upload into it refused. On the CPU, B packed once gives the
 * bits of the built-in sgemm (the same kernel calls), at shapes that cross
 * its slices of k (256, the AVX2 kernel 384), strips and the column blocks of
 * C (2048). */
/* ------------------------------------------------------------ matmul_then */

/* tq_op_matmul_then, one product: C against float64 (the product, then the
 * bias and the erfc GELU, in double: TOL_MM as for matmul, GELU's slope
 * being at most 1.13), the low copy within half a unit in its last place of
 * the C returned (RNE: 2^-8 relative for bf16, 2^-11 for f16, plus half
 * the smallest subnormal of each: GELU's far negative tail is subnormal),
 * and on the CPU, byte for byte, what tq_op_matmul,
 * tq_op_add, tq_op_gelu and tq_op_convert give one after another (the CPU
 * runs them on each block of C, its bf16 kernel adds the bias as it stores:
 * the API promises the same bits). batch 0: rank 2; else a batch of A
 * against one B. */
static void only_low(gt *ga, gt *gb, float alpha, float beta, const float *c0,
                     const int64_t *cdims, int r, const tq_matmul_then *exact, const float *out,
                     const double *pre, int64_t cn, const char *what);
static void one_matmul_then(int64_t batch, int64_t m, int64_t n, int64_t k, float alpha,
                            float beta, tq_dtype dt, int with_bias, int gelu, tq_dtype low_dt,
                            int constant, int low_only)
{
    int64_t items = batch ? batch : 1, an = items * m * k, bn = k * n, cn = items * m * n;
    int64_t ad[3] = {batch, m, k}, bd[2] = {k, n}, cd[3] = {batch, m, n};
    int r = batch ? 3 : 2;
    const int64_t *adims = batch ? ad : ad + 1, *cdims = batch ? cd : cd + 1;
    float *a = malloc((size_t)an * 4 + 4), *b = malloc((size_t)bn * 4 + 4),
          *c0 = malloc((size_t)cn * 4 + 4), *bias = malloc((size_t)n * 4 + 4),
          *out = malloc((size_t)cn * 4 + 4), *out2 = malloc((size_t)cn * 4 + 4);
    uint16_t *ah = malloc((size_t)an * 2 + 2), *bh = malloc((size_t)bn * 2 + 2),
             *low = malloc((size_t)cn * 2 + 2), *low2 = malloc((size_t)cn * 2 + 2);
    double *ref = malloc((size_t)cn * 8 + 8), *pre = malloc((size_t)cn * 8 + 8);
    fill(a, an, -1, 1);
    fill(b, bn, -1, 1);
    fill(bias, n, -1, 1);
    if (beta == 0)
        for (int64_t i = 0; i < cn; i++)
            c0[i] = NAN;
    else
        fill(c0, cn, -2, 2);
    to_low(dt, a, ah, an);
    to_low(dt, b, bh, bn);
    for (int64_t it = 0; it < items; it++)
        ref_matmul(0, 0, m, n, k, alpha, a + it * m * k, b, beta, c0 + it * m * n, ref + it * m * n);
    for (int64_t i = 0; i < cn; i++) {
        if (with_bias)
            ref[i] += bias[i % n];
        pre[i] = ref[i];
        if (gelu)
            ref[i] = 0.5 * ref[i] * erfc(-ref[i] / sqrt(2.0));
    }
    const void *ad16 = dt != TQ_DTYPE_F32 ? (const void *)ah : a,
               *bd16 = dt != TQ_DTYPE_F32 ? (const void *)bh : b;
    int has_low = low_dt != TQ_DTYPE_F32;
    gt *ga = gt_new(dt, r, adims, ad16), *gb = gt_new(dt, 2, bd, bd16);
    gt *gbias = gt_new(TQ_DTYPE_F32, 1, &n, bias), *gc = gt_new(TQ_DTYPE_F32, r, cdims, c0);
    gt *gl = has_low ? gt_new(low_dt, r, cdims, NULL) : NULL;
    if (constant)
        tq_tensor_set_constant(gb->t);
    tq_matmul_then then = {with_bias ? gbias->t : NULL, gelu, has_low ? gl->t : NULL, 0};
    char what[192];
    snprintf(what, sizeof what, "matmul_then batch %lld m=%lld n=%lld k=%lld alpha=%g beta=%g %s%s%s%s%s%s%s",
             (long long)batch, (long long)m, (long long)n, (long long)k, alpha, beta,
             tq_dtype_name(dt), constant ? " constant B" : "", with_bias ? " +bias" : "",
             gelu ? " gelu" : "", has_low ? " into " : "", has_low ? tq_dtype_name(low_dt) : "",
             low_only ? " only" : "");
    tq_status st = tq_op_matmul_then(ga->t, 0, gb->t, 0, alpha, beta, &then, gc->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gc, out, what);
    gt_unchanged(ga, ad16, what);
    gt_unchanged(gb, bd16, what);
    CHECK_NMSE(out, ref, cn, TOL_MM, what);
    if (low_only)
        only_low(ga, gb, alpha, beta, c0, cdims, r, &then, out, pre, cn, what);
    if (has_low) {
        gt_get(gl, low, what);
        int64_t bad = 0;
        for (int64_t i = 0; i < cn; i++) {
            int bf = low_dt == TQ_DTYPE_BF16;
            double v = bf ? tq_bf16_to_f32(low[i]) : tq_f16_to_f32(low[i]);
            if (!(fabs(v - out[i]) <= (bf ? 0x1p-8 : 0x1p-11) * fabs(out[i]) +
                                           (bf ? 0x1p-134 : 0x1p-25)))
                bad++;
        }
        CHECK(bad == 0, "%s: %s: %lld of the %s copy off C by more than half a unit", dev_name,
              what, (long long)bad, tq_dtype_name(low_dt));
    }
    if (tq_device_backend(dev) == TQ_BACKEND_CPU) {
        gt *gc2 = gt_new(TQ_DTYPE_F32, r, cdims, c0);
        gt *gl2 = has_low ? gt_new(low_dt, r, cdims, NULL) : NULL;
        st = tq_op_matmul(ga->t, 0, gb->t, 0, alpha, beta, gc2->t);
        if (!st && with_bias)
            st = tq_op_add(gc2->t, gbias->t, gc2->t);
        if (!st && gelu)
            st = tq_op_gelu(gc2->t, gc2->t);
        if (!st && has_low)
            st = tq_op_convert(gc2->t, gl2->t);
        CHECK(st == TQ_OK, "%s: %s, as ops: %s", dev_name, what, tq_errmsg());
        gt_get(gc2, out2, what);
        CHECK(!memcmp(out, out2, (size_t)cn * 4), "%s: %s: C differs from the ops one by one",
              dev_name, what);
        if (has_low) {
            gt_get(gl2, low2, what);
            CHECK(!memcmp(low, low2, (size_t)cn * 2), "%s: %s: the %s copy differs from the ops'",
                  dev_name, what, tq_dtype_name(low_dt));
        }
        gt_free(gc2);
        gt_free(gl2);
    }
    gt_free(ga);
    gt_free(gb);
    gt_free(gbias);
    gt_free(gc);
    gt_free(gl);
    free(a);
    free(b);
    free(c0);
    free(bias);
    free(out);
    free(out2);
    free(ah);
    free(bh);
    free(low);
    free(low2);
    free(ref);
    free(pre);
}

/* The same product with low_only: C unspecified, so low is held to the C
 * of the exact call (out, within TOL_MM of float64 already) instead: half a
 * unit of low's precision of it, plus what low_only's GELU may be off
 * (tq.h: 1.6e-7 |x| + 1e-7 |GELU(x)|, x taken from the float64 reference pre;
 * here 2e-7 for each, covering out's own 4 units of 2^-23). Where no GELU
 * comes between, the CPU's copy is the exact call's byte for byte (low_only
 * changes only where it is written from). */
static void only_low(gt *ga, gt *gb, float alpha, float beta, const float *c0,
                     const int64_t *cdims, int r, const tq_matmul_then *exact, const float *out,
                     const double *pre, int64_t cn, const char *what)
{
    tq_dtype low_dt = exact->low->dtype;
    int bf = low_dt == TQ_DTYPE_BF16;
    gt *gc = gt_new(TQ_DTYPE_F32, r, cdims, c0), *gl = gt_new(low_dt, r, cdims, NULL);
    uint16_t *low = malloc((size_t)cn * 2 + 2), *low_exact = malloc((size_t)cn * 2 + 2);
    tq_matmul_then then = {exact->bias, exact->gelu, gl->t, 1};
    CHECK(tq_op_matmul_then(ga->t, 0, gb->t, 0, alpha, beta, &then, gc->t) == TQ_OK,
          "%s: %s, low_only: %s", dev_name, what, tq_errmsg());
    gt_get(gl, low, what);
    tq_tensor_download(exact->low, low_exact, (size_t)cn * 2);
    int64_t bad = 0, at = 0;
    for (int64_t i = 0; i < cn; i++) {
        double v = bf ? tq_bf16_to_f32(low[i]) : tq_f16_to_f32(low[i]);
        double c = out[i], tol = (bf ? 0x1p-8 : 0x1p-11) * (fabs(c) * 1.001 + 4e-7 * fabs(pre[i])) +
                                 2e-7 * (fabs(pre[i]) + fabs(c)) + (bf ? 0x1p-133 : 0x1p-24);
        if (!(fabs(v - c) <= tol) && !bad++)
            at = i;
    }
    CHECK(bad == 0, "%s: %s, low_only: %lld of the %s copy off C, first %.9g for %.9g", dev_name,
          what, (long long)bad, tq_dtype_name(low_dt),
          bf ? tq_bf16_to_f32(low[at]) : tq_f16_to_f32(low[at]), out[at]);
    if (tq_device_backend(dev) == TQ_BACKEND_CPU && !exact->gelu)
        CHECK(!memcmp(low, low_exact, (size_t)cn * 2), "%s: %s, low_only: the copy's bytes differ",
              dev_name, what);
    gt_free(gc);
    gt_free(gl);
    free(low);
    free(low_exact);
}

/* Odd shapes, a batch of A against one B (the CPU makes it one product),
 * tq-embed's kind (several blocks of C, columns past the kernels' strips),
 * alpha 0 (C = beta C, A and B unread, then the rest); f32 and bf16
 * operands; the residual as beta 1; and the checks of the arguments. */
static void test_matmul_then(void)
{
    static const struct { int64_t batch, m, n, k; float alpha; } sh[] = {
        {0, 1, 1, 1, 1.0f}, {0, 13, 33, 3, 1.0f}, {0, 97, 65, 384, 1.0f},
        {3, 40, 70, 33, -0.5f}, {0, 150, 1100, 200, 1.0f}, {0, 5, 40, 7, 0.0f}};
    const tq_dtype BH = TQ_DTYPE_BF16, F = TQ_DTYPE_F32;
    int cpu = tq_device_backend(dev) == TQ_BACKEND_CPU;
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
        for (int d = 0; d < 2; d++) {
            /* the many-block shape is the CPU's (elsewhere the ops run one
             * by one, each tested on its own: lavapipe and the stand-in are
             * slow) */
            if (!cpu && sh[i].n > 1000)
                continue;
            tq_dtype dt = d ? BH : F;
            int cst = (int)(i & 1);
            one_matmul_then(sh[i].batch, sh[i].m, sh[i].n, sh[i].k, sh[i].alpha, 0.0f, dt, 1, 0, F, cst, 0);
            one_matmul_then(sh[i].batch, sh[i].m, sh[i].n, sh[i].k, sh[i].alpha, 1.0f, dt, 1, 0, F, !cst, 0);
            one_matmul_then(sh[i].batch, sh[i].m, sh[i].n, sh[i].k, sh[i].alpha, 0.0f, dt, 1, 1, BH, cst, 1);
            one_matmul_then(sh[i].batch, sh[i].m, sh[i].n, sh[i].k, sh[i].alpha, 0.0f, dt, 1, 0, BH, !cst, 1);
            one_matmul_then(sh[i].batch, sh[i].m, sh[i].n, sh[i].k, sh[i].alpha, 1.5f, dt, 0, 1,
                            TQ_DTYPE_F16, !cst, i == 3);
        }
    int64_t ad[2] = {4, 6}, bd[2] = {6, 5}, cd[2] = {4, 5}, bad_n = 4;
    gt *ga = gt_new(F, 2, ad, NULL), *gb = gt_new(F, 2, bd, NULL), *gc = gt_new(F, 2, cd, NULL);
    gt *gbias = gt_new(F, 1, &bad_n, NULL), *gl = gt_new(F, 2, cd, NULL);
    tq_matmul_then t1 = {gbias->t, 0, NULL, 0}, t2 = {NULL, 0, gl->t, 0}, t3 = {NULL, 1, NULL, 1};
    CHECK(tq_op_matmul_then(ga->t, 0, gb->t, 0, 1, 0, &t1, gc->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "bias must be a row of 5"),
          "%s: matmul_then took a bias of 4 for 5 columns (%s)", dev_name, tq_errmsg());
    CHECK(tq_op_matmul_then(ga->t, 0, gb->t, 0, 1, 0, &t2, gc->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "low must be bf16 or f16"),
          "%s: matmul_then took an f32 low copy (%s)", dev_name, tq_errmsg());
    CHECK(tq_op_matmul_then(ga->t, 0, gb->t, 0, 1, 0, &t3, gc->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "low_only without a low tensor"),
          "%s: matmul_then took low_only without low (%s)", dev_name, tq_errmsg());
    gt_free(ga);
    gt_free(gb);
    gt_free(gc);
    gt_free(gbias);
    gt_free(gl);
    printf("ok %s: matmul_then\n", dev_name);
}

/* ------------------------------------------------------------ layernorm_low */

/* tq_op_layernorm_low: y within TOL_EW of the float64 layer norm, low within
 * half a unit of y in its last place (RNE: 2^-8 relative for bf16, 2^-11 for
 * f16), and, as tq.h promises, the bytes of tq_op_layernorm then
 * tq_op_convert (every device: the CPU fuses them, the others run them);
 * rows of 384 (tq-embed's) and 7, in place (tq-embed's embeddings) and not;
 * the checks of its arguments. */
static void test_layernorm_low(void)
{
    static const int64_t ds[] = {384, 7};
    static const tq_dtype lows[] = {TQ_DTYPE_BF16, TQ_DTYPE_F16};
    for (size_t t = 0; t < 2; t++)
        for (size_t u = 0; u < 2; u++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int64_t d = ds[t], rows = 37, n = rows * d, dd[2] = {rows, d};
                tq_dtype lt = lows[u];
                float *x = malloc((size_t)n * 4), *g = malloc((size_t)d * 4),
                      *b = malloc((size_t)d * 4), *y = malloc((size_t)n * 4),
                      *y2 = malloc((size_t)n * 4);
                uint16_t *low = malloc((size_t)n * 2), *low2 = malloc((size_t)n * 2);
                double *ref = malloc((size_t)n * 8);
                fill(x, n, -3, 5);
                fill(g, d, -2, 2);
                fill(b, d, -1, 1);
                for (int64_t r = 0; r < rows; r++) {
                    double mean = 0, var = 0;
                    for (int64_t i = 0; i < d; i++)
                        mean += x[r * d + i];
                    mean /= (double)d;
                    for (int64_t i = 0; i < d; i++)
                        var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
                    double inv = 1.0 / sqrt(var / (double)d + 1e-5);
                    for (int64_t i = 0; i < d; i++)
                        ref[r * d + i] = (x[r * d + i] - mean) * inv * g[i] + b[i];
                }
                gt *gx = gt_new(TQ_DTYPE_F32, 2, dd, x), *gg = gt_new(TQ_DTYPE_F32, 1, &d, g),
                   *gb = gt_new(TQ_DTYPE_F32, 1, &d, b), *gl = gt_new(lt, 2, dd, NULL),
                   *gy = inplace ? gx : gt_new(TQ_DTYPE_F32, 2, dd, NULL),
                   *gx2 = gt_new(TQ_DTYPE_F32, 2, dd, x), *gy2 = gt_new(TQ_DTYPE_F32, 2, dd, NULL),
                   *gl2 = gt_new(lt, 2, dd, NULL);
                char what[96];
                snprintf(what, sizeof what, "layernorm_low d %lld into %s%s", (long long)d,
                         tq_dtype_name(lt), inplace ? " in place" : "");
                CHECK(tq_op_layernorm_low(gx->t, gg->t, gb->t, 1e-5f, gy->t, gl->t) == TQ_OK &&
                          tq_op_layernorm(gx2->t, gg->t, gb->t, 1e-5f, gy2->t) == TQ_OK &&
                          tq_op_convert(gy2->t, gl2->t) == TQ_OK,
                      "%s: %s: %s", dev_name, what, tq_errmsg());
                gt_get(gy, y, what);
                gt_get(gl, low, what);
                gt_get(gy2, y2, what);
                gt_get(gl2, low2, what);
                CHECK_NMSE(y, ref, n, TOL_EW, what);
                int64_t bad = 0;
                for (int64_t i = 0; i < n; i++) {
                    int bf = lt == TQ_DTYPE_BF16;
                    double v = bf ? tq_bf16_to_f32(low[i]) : tq_f16_to_f32(low[i]);
                    bad += !(fabs(v - y[i]) <= (bf ? 0x1p-8 : 0x1p-11) * fabs(y[i]) +
                                                  (bf ? 0x1p-134 : 0x1p-25));
                }
                CHECK(bad == 0, "%s: %s: %lld of the copy off y by more than half a unit",
                      dev_name, what, (long long)bad);
                CHECK(!memcmp(y, y2, (size_t)n * 4) && !memcmp(low, low2, (size_t)n * 2),
                      "%s: %s: not the bytes of layernorm then convert", dev_name, what);
                gt *all[] = {gx, gg, gb, gl, inplace ? NULL : gy, gx2, gy2, gl2};
                for (size_t k = 0; k < sizeof all / sizeof *all; k++)
                    gt_free(all[k]);
                free(x), free(g), free(b), free(y), free(y2), free(low), free(low2), free(ref);
            }
    int64_t dd[2] = {3, 8}, de[2] = {3, 9};
    gt *gx = gt_new(TQ_DTYPE_F32, 2, dd, NULL), *gy = gt_new(TQ_DTYPE_F32, 2, dd, NULL),
       *gf = gt_new(TQ_DTYPE_F32, 2, dd, NULL), *gw = gt_new(TQ_DTYPE_BF16, 2, de, NULL);
    CHECK(tq_op_layernorm_low(gx->t, NULL, NULL, 1e-5f, gy->t, gf->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "low must be bf16 or f16"),
          "%s: layernorm_low took an f32 copy (%s)", dev_name, tq_errmsg());
    CHECK(tq_op_layernorm_low(gx->t, NULL, NULL, 1e-5f, gy->t, gw->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "differ in shape"),
          "%s: layernorm_low took a copy of another shape (%s)", dev_name, tq_errmsg());
    CHECK(tq_op_layernorm_low(gx->t, NULL, NULL, 1e-5f, gy->t, NULL) == TQ_ERR_USAGE,
          "%s: layernorm_low took no copy (%s)", dev_name, tq_errmsg());
    gt_free(gx), gt_free(gy), gt_free(gf), gt_free(gw);
    printf("ok %s: layernorm_low\n", dev_name);
}

/* ------------------------------------------------ int8 products (tq-embed) */

/* tq_op_quantize_rows against its definition, evaluated here in f32 as
 * tq.h states it (y = x * colscale, scale = max |y| / 127, code = y / scale
 * to nearest even), and the property that makes it a quantization: every
 * code times the scale within half a scale of y (float64). Rows with a few
 * large columns, a zero row, a NaN row and an infinite row. */
static void one_quantize_rows(int64_t rows, int64_t k, int with_cs, const char *what)
{
    int64_t n = rows * k, d2[2] = {rows, k};
    float *x = malloc((size_t)n * 4 + 4), *cs = malloc((size_t)k * 4 + 4),
          *scale = malloc((size_t)rows * 4 + 4);
    int8_t *q = malloc((size_t)n + 1);
    fill(x, n, -2, 2);
    fill(cs, k, 0.05, 3);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < k; j += 97) /* a layer norm's outlier columns */
            x[i * k + j] *= 40.0f;
    if (rows > 3) {
        memset(x + k, 0, (size_t)k * 4);
        x[2 * k + k / 2] = NAN;
        x[3 * k] = -INFINITY;
    }
    gt *gx = gt_new(TQ_DTYPE_F32, 2, d2, x), *gcs = gt_new(TQ_DTYPE_F32, 1, &k, cs);
    gt *gq = gt_new(TQ_DTYPE_I8, 2, d2, NULL), *gs = gt_new(TQ_DTYPE_F32, 1, &rows, NULL);
    tq_status st = tq_op_quantize_rows(gx->t, with_cs ? gcs->t : NULL, gq->t, gs->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gq, q, what);
    gt_get(gs, scale, what);
    int64_t bad = 0, far = 0;
    for (int64_t i = 0; i < rows; i++) {
        float amax = 0.0f;
        int finite = 1;
        for (int64_t j = 0; j < k; j++) {
            float y = with_cs ? x[i * k + j] * cs[j] : x[i * k + j];
            finite &= isfinite(y);
            amax = fabsf(y) > amax ? fabsf(y) : amax;
        }
        float s = amax / 127.0f;
        if (!finite) {
            bad += !isnan(scale[i]);
            for (int64_t j = 0; j < k; j++)
                bad += q[i * k + j] != 0;
            continue;
        }
        bad += memcmp(&s, &scale[i], 4) != 0;
        for (int64_t j = 0; j < k; j++) {
            float y = with_cs ? x[i * k + j] * cs[j] : x[i * k + j];
            float v = s != 0.0f ? nearbyintf(y / s) : 0.0f;
            bad += q[i * k + j] != (int8_t)v;
            far += fabs((double)q[i * k + j] * s - y) > 0.5000001 * s;
        }
    }
    CHECK(bad == 0 && far == 0, "%s: %s: %lld codes or scales differ from the definition, %lld "
          "farther than half a scale", dev_name, what, (long long)bad, (long long)far);
    gt_free(gx);
    gt_free(gcs);
    gt_free(gq);
    gt_free(gs);
    free(x);
    free(cs);
    free(scale);
    free(q);
}

/* tq_op_matmul_i8, or _rest where rest is not NULL */
static tq_status i8_product(gt *ga, gt *gas, gt *gb, gt *gbs, const tq_i8_rest *rest, float beta,
                            const tq_matmul_then *then, gt *gc)
{
    return rest ? tq_op_matmul_i8_rest(ga->t, gas->t, gb->t, gbs->t, rest, beta, then, gc->t)
                : tq_op_matmul_i8(ga->t, gas->t, gb->t, gbs->t, beta, then, gc->t);
}

/* tq_op_matmul_i8 against float64: the integer dot products exactly, times
 * both scales, beta C and the bias, then GELU by erfc. Without GELU the f32
 * result is at most three roundings from the exact value (the dot's
 * conversion, two products: 2^-24 each) plus the sum's and the bias add's:
 * 4 * 2^-24 of the terms' magnitudes; with GELU, the NMSE bound of the f32
 * products. The bf16 copy: within half a bf16 step of C. With nrest
 * columns of a kept out of the codes (tq_op_matmul_i8_rest, a's codes 0 and
 * B's column 0 there, as tq-embed gives them): x[i, cols[p]] w[j, p] added,
 * one more rounding each. With GELU into bf16, low_only too (tq-embed's
 * first feed-forward product): its copy held to the exact call's C as
 * only_low holds it, GELU's approximation allowed. */
static void one_matmul_i8(int64_t batch, int64_t m, int64_t n, int64_t k, float beta, int with_bias,
                          int gelu, int low, int constant, int64_t nrest)
{
    int64_t items = batch ? batch : 1, rows = items * m, an = rows * k, bn = n * k, cn = rows * n;
    int64_t ad[3] = {batch, m, k}, bd[2] = {n, k}, cd[3] = {batch, m, n};
    int r = batch ? 3 : 2;
    const int64_t *adims = batch ? ad : ad + 1, *cdims = batch ? cd : cd + 1;
    int8_t *a = malloc((size_t)an + 1), *b = malloc((size_t)bn + 1);
    float *as = malloc((size_t)rows * 4 + 4), *bs = malloc((size_t)n * 4 + 4),
          *bias = malloc((size_t)n * 4 + 4), *c0 = malloc((size_t)cn * 4 + 4),
          *out = malloc((size_t)cn * 4 + 4);
    uint16_t *lo = malloc((size_t)cn * 2 + 2);
    double *ref = malloc((size_t)cn * 8 + 8), *mag = malloc((size_t)cn * 8 + 8),
           *pre = malloc((size_t)cn * 8 + 8);
    float *x = malloc((size_t)an * 4 + 4), *w = malloc((size_t)(n * nrest) * 4 + 4);
    int64_t cols[16];
    for (int64_t i = 0; i < an; i++)
        a[i] = (int8_t)((int64_t)(rnd() % 255) - 127);
    for (int64_t i = 0; i < bn; i++)
        b[i] = (int8_t)((int64_t)(rnd() % 255) - 127);
    if (m > 1) /* the extremes: a row of +127 against B's row of -127 */
        for (int64_t p = 0; p < k; p++)
            a[p] = 127, b[p] = -127;
    fill(x, an, -30, 30);
    fill(w, n * nrest, -0.1, 0.1);
    for (int64_t p = 0; p < nrest; p++) { /* every (k / nrest)th column, from the last */
        cols[p] = k - 1 - p * (k / nrest);
        for (int64_t i = 0; i < rows; i++)
            a[i * k + cols[p]] = 0;
        for (int64_t j = 0; j < n; j++)
            b[j * k + cols[p]] = 0;
    }
    fill(as, rows, 1e-3, 2e-2);
    fill(bs, n, 1e-3, 2e-2);
    fill(bias, n, -1, 1);
    if (beta == 0)
        for (int64_t i = 0; i < cn; i++)
            c0[i] = NAN;
    else
        fill(c0, cn, -2, 2);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t dot = 0;
            for (int64_t p = 0; p < k; p++)
                dot += (int64_t)a[i * k + p] * b[j * k + p];
            double v = (double)dot * bs[j] * as[i], e = i * n + j;
            double mg = fabs(v);
            for (int64_t p = 0; p < nrest; p++) {
                double t = (double)x[i * k + cols[p]] * w[j * nrest + p];
                v += t, mg += fabs(t);
            }
            if (beta != 0)
                v += (double)beta * c0[i * n + j], mg += fabs((double)beta * c0[i * n + j]);
            if (with_bias)
                v += bias[j], mg += fabs(bias[j]);
            pre[(int64_t)e] = v;
            if (gelu)
                v = 0.5 * v * erfc(-v / sqrt(2.0));
            ref[(int64_t)e] = v;
            mag[(int64_t)e] = mg;
        }
    gt *ga = gt_new(TQ_DTYPE_I8, r, adims, a), *gb = gt_new(TQ_DTYPE_I8, 2, bd, b);
    gt *gas = gt_new(TQ_DTYPE_F32, 1, &rows, as), *gbs = gt_new(TQ_DTYPE_F32, 1, &n, bs);
    gt *gbias = gt_new(TQ_DTYPE_F32, 1, &n, bias), *gc = gt_new(TQ_DTYPE_F32, r, cdims, c0);
    gt *gl = low ? gt_new(TQ_DTYPE_BF16, r, cdims, NULL) : NULL;
    int64_t wd[2] = {n, nrest};
    gt *gx = gt_new(TQ_DTYPE_F32, r, adims, x), *gcols = gt_new(TQ_DTYPE_I64, 1, &nrest, cols),
       *gw = gt_new(TQ_DTYPE_F32, 2, wd, w);
    tq_i8_rest rest = {gx->t, gcols->t, gw->t};
    if (constant)
        tq_tensor_set_constant(gb->t);
    tq_matmul_then then = {with_bias ? gbias->t : NULL, gelu, low ? gl->t : NULL, 0};
    char what[160];
    snprintf(what, sizeof what, "matmul_i8 batch %lld m=%lld n=%lld k=%lld beta=%g%s%s%s%s rest %lld",
             (long long)batch, (long long)m, (long long)n, (long long)k, beta,
             constant ? " constant B" : "", with_bias ? " +bias" : "", gelu ? " gelu" : "",
             low ? " into bf16" : "", (long long)nrest);
    for (int pass = 0; pass < 2; pass++) { /* a constant B again: its kept packing */
        tq_tensor_upload(gc->t, c0, (size_t)cn * 4);
        tq_status st = i8_product(ga, gas, gb, gbs, nrest ? &rest : NULL, beta, &then, gc);
        CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
        gt_get(gc, out, what);
        gt_unchanged(ga, a, what);
        gt_unchanged(gb, b, what);
        if (gelu)
            CHECK_NMSE(out, ref, cn, TOL_MM, what);
        else {
            int64_t bad = 0;
            for (int64_t i = 0; i < cn; i++)
                bad += !(fabs(out[i] - ref[i]) <= (double)(4 + nrest) * 0x1p-24 * mag[i] + 1e-30);
            CHECK(bad == 0, "%s: %s: %lld of %lld elements off the exact products", dev_name, what,
                  (long long)bad, (long long)cn);
        }
        if (low) {
            gt_get(gl, lo, what);
            int64_t bad = 0;
            for (int64_t i = 0; i < cn; i++)
                bad += !(fabs(tq_bf16_to_f32(lo[i]) - out[i]) <= 0x1p-8 * fabs(out[i]) + 0x1p-134);
            CHECK(bad == 0, "%s: %s: %lld bf16 copies off C", dev_name, what, (long long)bad);
        }
        if (!constant)
            break;
    }
    if (low && gelu) {
        tq_matmul_then only = then;
        only.low_only = 1;
        tq_tensor_upload(gc->t, c0, (size_t)cn * 4);
        for (int64_t i = 0; i < cn; i++) /* NaNs: every copy must be written again */
            lo[i] = 0x7fc1;
        tq_tensor_upload(gl->t, lo, (size_t)cn * 2);
        tq_status st = i8_product(ga, gas, gb, gbs, nrest ? &rest : NULL, beta, &only, gc);
        CHECK(st == TQ_OK, "%s: %s, low_only: %s", dev_name, what, tq_errmsg());
        gt_get(gl, lo, what);
        int64_t bad = 0, at = 0;
        for (int64_t i = 0; i < cn; i++) {
            double v = tq_bf16_to_f32(lo[i]), c = out[i];
            double tol = 0x1p-8 * (fabs(c) * 1.001 + 4e-7 * fabs(pre[i])) +
                         2e-7 * (fabs(pre[i]) + fabs(c)) + 0x1p-133;
            if (!(fabs(v - c) <= tol) && !bad++)
                at = i;
        }
        CHECK(bad == 0, "%s: %s, low_only: %lld bf16 copies off C, first %.9g for %.9g", dev_name,
              what, (long long)bad, tq_bf16_to_f32(lo[at]), out[at]);
    }
    gt_free(ga);
    gt_free(gb);
    gt_free(gas);
    gt_free(gbs);
    gt_free(gbias);
    gt_free(gc);
    gt_free(gl);
    gt_free(gx);
    gt_free(gcols);
    gt_free(gw);
    free(x);
    free(w);
    free(a);
    free(b);
    free(as);
    free(bs);
    free(bias);
    free(c0);
    free(out);
    free(lo);
    free(ref);
    free(mag);
    free(pre);
}

static void test_int8_products(void)
{
    one_quantize_rows(37, 200, 1, "quantize_rows with column scales");
    one_quantize_rows(37, 200, 0, "quantize_rows");
    one_quantize_rows(5, 17, 1, "quantize_rows k=17");
    static const int64_t sh[][4] = {{0, 1, 1, 1},     {0, 13, 33, 3},   {0, 25, 31, 5},
                                    {2, 40, 70, 384}, {0, 97, 65, 383}, {0, 150, 1100, 200}};
    int cpu = tq_device_backend(dev) == TQ_BACKEND_CPU;
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        const int64_t *d = sh[i];
        if (!cpu && d[2] > 1000) /* the many-block shape is the CPU's */
            continue;
        int cst = (int)(i & 1);
        int64_t nr = d[3] < 8 ? d[3] : 8;
        one_matmul_i8(d[0], d[1], d[2], d[3], 0.0f, 1, 0, 0, cst, 0);
        one_matmul_i8(d[0], d[1], d[2], d[3], 1.0f, 1, 0, 0, !cst, nr);
        one_matmul_i8(d[0], d[1], d[2], d[3], 0.0f, 1, 1, 1, cst, 0);
        one_matmul_i8(d[0], d[1], d[2], d[3], 0.0f, 1, 1, 1, !cst, nr);
        one_matmul_i8(d[0], d[1], d[2], d[3], 0.5f, 0, 0, 0, !cst, i % 2 ? 0 : nr);
    }
    int64_t ad[2] = {4, 6}, bd[2] = {5, 7}, sd = 4, nd = 5;
    gt *ga = gt_new(TQ_DTYPE_I8, 2, ad, NULL), *gb = gt_new(TQ_DTYPE_I8, 2, bd, NULL);
    gt *gas = gt_new(TQ_DTYPE_F32, 1, &sd, NULL), *gbs = gt_new(TQ_DTYPE_F32, 1, &nd, NULL);
    int64_t cd[2] = {4, 5};
    gt *gc = gt_new(TQ_DTYPE_F32, 2, cd, NULL), *gx = gt_new(TQ_DTYPE_F32, 2, ad, NULL);
    CHECK(tq_op_matmul_i8(ga->t, gas->t, gb->t, gbs->t, 0, NULL, gc->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "rows of a have 6 codes, of b 7"),
          "%s: matmul_i8 took k 6 against 7 (%s)", dev_name, tq_errmsg());
    CHECK(tq_op_quantize_rows(gx->t, NULL, gx->t, gas->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "q must be i8"),
          "%s: quantize_rows wrote codes into f32 (%s)", dev_name, tq_errmsg());
    /* the rest's columns: below k, each once, and w [n, r] */
    int64_t bad_cols[3][2] = {{1, 6}, {2, 2}, {0, 5}}, two = 2, wd[2] = {5, 2}, wd3[2] = {5, 3};
    gt *gb6 = gt_new(TQ_DTYPE_I8, 2, (int64_t[]){5, 6}, NULL), *gw = gt_new(TQ_DTYPE_F32, 2, wd, NULL),
       *gw3 = gt_new(TQ_DTYPE_F32, 2, wd3, NULL);
    static const char *const why[3] = {"rest column 6 is not below k = 6",
                                       "rest column 2 given twice", "rest w must be [5, 2]"};
    for (int e = 0; e < 3; e++) {
        gt *gcols = gt_new(TQ_DTYPE_I64, 1, &two, bad_cols[e]);
        tq_i8_rest rest = {gx->t, gcols->t, e == 2 ? gw3->t : gw->t};
        CHECK(tq_op_matmul_i8_rest(ga->t, gas->t, gb6->t, gbs->t, &rest, 0, NULL, gc->t) ==
                      TQ_ERR_USAGE &&
                  strstr(tq_errmsg(), why[e]),
              "%s: matmul_i8 rest took what it must refuse, wanting \"%s\" (%s)", dev_name,
              why[e], tq_errmsg());
        gt_free(gcols);
    }
    gt_free(gb6);
    gt_free(gw);
    gt_free(gw3);
    gt_free(ga);
    gt_free(gb);
    gt_free(gas);
    gt_free(gbs);
    gt_free(gc);
    gt_free(gx);
    printf("ok %s: quantize_rows, matmul_i8\n", dev_name);
}

/* The CPU's ways give the same bits: AVX-512 and the portable loop of
 * quantize_rows, the VNNI kernel and the portable product (the int8 dot is
 * exact, the float steps are the same). */
static void test_int8_cpu_ways(void)
{
    int vnni = tq_cpu_gemm_i8_supported();
    CHECK(tq_device_native_product(NULL, TQ_DTYPE_I8) == vnni,
          "cpu: int8 products said native %s AVX512-VNNI", vnni ? "without" : "with");
    int64_t m = 150, n = 100, k = 383, d2[2] = {m, k}, bd[2] = {n, k}, cd[2] = {m, n};
    float *x = malloc((size_t)(m * k) * 4), *bs = malloc((size_t)n * 4), *c[2];
    int8_t *b = malloc((size_t)(n * k)), *q[2] = {malloc((size_t)(m * k)), malloc((size_t)(m * k))};
    fill(x, m * k, -3, 3);
    fill(bs, n, 1e-3, 1e-2);
    for (int64_t i = 0; i < n * k; i++)
        b[i] = (int8_t)((int64_t)(rnd() % 255) - 127);
    gt *gx = gt_new(TQ_DTYPE_F32, 2, d2, x), *gq = gt_new(TQ_DTYPE_I8, 2, d2, NULL);
    gt *gs = gt_new(TQ_DTYPE_F32, 1, &m, NULL), *gb = gt_new(TQ_DTYPE_I8, 2, bd, b);
    gt *gbs = gt_new(TQ_DTYPE_F32, 1, &n, bs), *gc = gt_new(TQ_DTYPE_F32, 2, cd, NULL);
    for (int w = 0; w < 2; w++) {
        tq_cpu_quantize_rows_force_portable(w);
        tq_cpu_gemm_i8_disable(w);
        c[w] = malloc((size_t)(m * n) * 4);
        CHECK(tq_op_quantize_rows(gx->t, NULL, gq->t, gs->t) == TQ_OK &&
                  tq_op_matmul_i8(gq->t, gs->t, gb->t, gbs->t, 0, NULL, gc->t) == TQ_OK,
              "cpu: int8 ways: %s", tq_errmsg());
        gt_get(gq, q[w], "int8 ways");
        gt_get(gc, c[w], "int8 ways");
    }
    tq_cpu_quantize_rows_force_portable(0);
    tq_cpu_gemm_i8_disable(0);
    CHECK(!memcmp(q[0], q[1], (size_t)(m * k)), "cpu: quantize_rows: AVX-512 and portable codes differ");
    CHECK(!memcmp(c[0], c[1], (size_t)(m * n) * 4), "cpu: matmul_i8: VNNI and portable bits differ");
    printf("ok cpu: int8 ways agree bit for bit%s\n",
           vnni ? "" : " (skip the VNNI kernel: this CPU lacks AVX512-VNNI)");
    gt_free(gx);
    gt_free(gq);
    gt_free(gs);
    gt_free(gb);
    gt_free(gbs);
    gt_free(gc);
    free(x);
    free(bs);
    free(b);
    for (int w = 0; w < 2; w++)
        free(q[w]), free(c[w]);
}

static void test_matmul_constant(const char *engine)
{
    b_constant = 1;
    test_matmul(engine);
    one_matmul(engine, 0, 1, 1, 70, 2100, 450, 0, 1, 1.0f, 0.0f);
    b_constant = 0;
    int64_t d[2] = {3, 4};
    float x[12] = {0};
    gt *g = gt_new(TQ_DTYPE_F32, 2, d, x);
    tq_tensor_set_constant(g->t);
    CHECK(tq_tensor_upload(g->t, x, sizeof x) == TQ_ERR_USAGE && strstr(tq_errmsg(), "constant"),
          "%s: an upload into a constant tensor was not refused", dev_name);
    gt_free(g);
}

static void test_matmul_constant_bits(const char *kernel)
{
    static const int64_t shapes[][3] = {{70, 2100, 450}, {13, 37, 600}, {200, 384, 384}};
    for (size_t s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++) {
            int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            int ta = t & 1, tb = t >> 1;
            int64_t ad[2] = {ta ? k : m, ta ? m : k}, bd[2] = {tb ? n : k, tb ? k : n},
                    cd[2] = {m, n};
            float *a = malloc((size_t)(m * k) * 4), *b = malloc((size_t)(k * n) * 4);
            float *c1 = malloc((size_t)(m * n) * 4), *c2 = malloc((size_t)(m * n) * 4);
            fill(a, m * k, -1, 1);
            fill(b, k * n, -1, 1);
            gt *ga = gt_new(TQ_DTYPE_F32, 2, ad, a), *gb = gt_new(TQ_DTYPE_F32, 2, bd, b);
            gt *gc = gt_new(TQ_DTYPE_F32, 2, cd, NULL);
            tq_status st = tq_op_matmul(ga->t, ta, gb->t, tb, 1.0f, 0.0f, gc->t);
            gt_get(gc, c1, "matmul unpacked");
            tq_tensor_set_constant(gb->t);
            if (!st)
                st = tq_op_matmul(ga->t, ta, gb->t, tb, 1.0f, 0.0f, gc->t);
            gt_get(gc, c2, "matmul packed");
            CHECK(st == TQ_OK && !memcmp(c1, c2, (size_t)(m * n) * 4),
                  "cpu: the %s kernel: a constant B gives other bits than the built-in sgemm "
                  "(m=%lld n=%lld k=%lld %c%c)", kernel, (long long)m, (long long)n, (long long)k,
                  ta ? 'T' : 'N', tb ? 'T' : 'N');
            gt_free(ga), gt_free(gb), gt_free(gc);
            free(a), free(b), free(c1), free(c2);
        }
}

/* ------------------------------------------------------------ rowprod */

/* out = alpha q . db^T through a prepared database, in one call per row
 * range of cuts[] (row counts summing to m; NULL: one call), into one output
 * with sentinels around it. */
static void run_rowprod(const float *q, const float *x, int64_t m, int64_t n, int64_t k,
                        float alpha, const int64_t *cuts, int ncuts, float *out, const char *what)
{
    int64_t qd[2] = {m, k}, xd[2] = {n, k}, od[2] = {m, n};
    gt *gq = gt_new(TQ_DTYPE_F32, 2, qd, q), *gx = gt_new(TQ_DTYPE_F32, 2, xd, x);
    gt *go = gt_new(TQ_DTYPE_F32, 2, od, NULL);
    tq_rowprod *p = NULL;
    tq_status st = tq_rowprod_new(gx->t, &p);
    CHECK(st == TQ_OK, "%s: %s: prepare: %s", dev_name, what, tq_errmsg());
    int64_t one[1] = {m}, at = 0;
    if (!cuts)
        cuts = one, ncuts = 1;
    for (int c = 0; st == TQ_OK && c < ncuts; at += cuts[c++]) {
        int64_t vq[2] = {cuts[c], k}, vo[2] = {cuts[c], n};
        tq_tensor *tq_ = NULL, *to = NULL;
        st = tq_tensor_view(gq->t, (size_t)(at * k) * 4, TQ_DTYPE_F32, 2, vq, &tq_);
        if (!st)
            st = tq_tensor_view(go->t, (size_t)(at * n) * 4, TQ_DTYPE_F32, 2, vo, &to);
        if (!st)
            st = tq_op_rowprod(p, tq_, alpha, to);
        tq_tensor_free(tq_);
        tq_tensor_free(to);
    }
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    tq_rowprod_free(p);
    gt_get(go, out, what);
    gt_unchanged(gq, q, what);
    gt_unchanged(gx, x, what);
    gt_free(gq), gt_free(gx), gt_free(go);
}

/* Against the float64 product, at shapes around the kernels' strips (12 and
 * 6 rows, 32 and 16 columns) and blocks (192 rows, 256 columns). */
static void test_rowprod(const char *engine)
{
    static const int64_t shapes[][3] = {
        {1, 1, 1}, {13, 70, 33}, {7, 33, 1000}, {200, 300, 384}, {193, 257, 5}, {25, 1, 64},
        {0, 5, 4}, {5, 0, 4}, {6, 5, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
        float *q = malloc((size_t)(m * k + 1) * 4), *x = malloc((size_t)(n * k + 1) * 4),
              *out = malloc((size_t)(m * n + 1) * 4);
        double *ref = malloc((size_t)(m * n + 1) * 8);
        fill(q, m * k, -1, 1);
        fill(x, n * k, -1, 1);
        float alpha = i % 2 ? 2.0f : 1.0f;
        ref_matmul(0, 1, m, n, k, alpha, q, x, 0, NULL, ref);
        char what[128];
        snprintf(what, sizeof what, "rowprod %s q[%lld,%lld] db[%lld,%lld] alpha=%g", engine,
                 (long long)m, (long long)k, (long long)n, (long long)k, alpha);
        run_rowprod(q, x, m, n, k, alpha, NULL, 0, out, what);
        CHECK_NMSE(out, ref, m * n, TOL_MM, what);
        free(q), free(x), free(out), free(ref);
    }
    /* bad arguments: a usage error with a message, nothing written */
    int64_t qd[2] = {4, 8}, xd[2] = {9, 8}, bad_q[2] = {4, 7}, bad_o[2] = {4, 8}, od[2] = {4, 9};
    float q[32] = {0}, x[72] = {0};
    gt *gq = gt_new(TQ_DTYPE_F32, 2, qd, q), *gx = gt_new(TQ_DTYPE_F32, 2, xd, x);
    gt *gb = gt_new(TQ_DTYPE_F32, 2, bad_q, NULL), *go = gt_new(TQ_DTYPE_F32, 2, bad_o, NULL);
    gt *gi = gt_new(TQ_DTYPE_I64, 2, qd, NULL), *ok = gt_new(TQ_DTYPE_F32, 2, od, NULL);
    tq_rowprod *p = NULL;
    CHECK(tq_rowprod_new(gi->t, &p) == TQ_ERR_USAGE && !p, "%s: rowprod of an i64 db", dev_name);
    CHECK(tq_rowprod_new(gx->t, &p) == TQ_OK, "%s: rowprod prepare: %s", dev_name, tq_errmsg());
    CHECK(tq_op_rowprod(p, gb->t, 1.0f, ok->t) == TQ_ERR_USAGE && strstr(tq_errmsg(), "q"),
          "%s: rowprod with q of another width", dev_name);
    CHECK(tq_op_rowprod(p, gq->t, 1.0f, go->t) == TQ_ERR_USAGE && strstr(tq_errmsg(), "out"),
          "%s: rowprod into out of another shape", dev_name);
    tq_rowprod_free(p);
    gt_get(go, NULL, "rowprod bad out");
    gt_get(ok, NULL, "rowprod bad q");
    gt_free(gq), gt_free(gx), gt_free(gb), gt_free(go), gt_free(gi), gt_free(ok);
}

/* The same bytes as one call whatever the row cuts and the threads, and on
 * the CPU whichever kernel (each element is one fused chain over k). */
static void test_rowprod_same_bits(void)
{
    int64_t m = 700, n = 1100, k = 384;
    float *q = malloc((size_t)(m * k) * 4), *x = malloc((size_t)(n * k) * 4);
    float *a = malloc((size_t)(m * n) * 4), *b = malloc((size_t)(m * n) * 4);
    fill(q, m * k, -1, 1);
    fill(x, n * k, -1, 1);
    static const int64_t cuts[] = {1, 11, 96, 193, 5, 394};
    tq_threads_set(1);
    run_rowprod(q, x, m, n, k, 1.0f, NULL, 0, a, "rowprod 1 thread");
    tq_threads_set(2);
    run_rowprod(q, x, m, n, k, 1.0f, NULL, 0, b, "rowprod 2 threads");
    CHECK(!memcmp(a, b, (size_t)(m * n) * 4), "%s: rowprod differs between 1 and 2 threads",
          dev_name);
    run_rowprod(q, x, m, n, k, 1.0f, cuts, 6, b, "rowprod in cuts");
    CHECK(!memcmp(a, b, (size_t)(m * n) * 4), "%s: rowprod differs between one call and cuts",
          dev_name);
    /* the database as the queries: the matrix is symmetric, bit for bit */
    run_rowprod(x, q, n, m, k, 1.0f, NULL, 0, b, "rowprod transposed");
    int64_t asym = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++)
            asym += memcmp(&a[i * n + j], &b[j * m + i], 4) != 0;
    CHECK(asym == 0, "%s: rowprod q . x^T and x . q^T differ in %lld places", dev_name,
          (long long)asym);
    if (tq_device_backend(dev) == TQ_BACKEND_CPU) {
        static const char *kernels[] = {"avx512", "avx2"};
        for (int i = 0; i < 2; i++) {
            if (!tq_cpu_gemm_kernel_force(kernels[i]))
                continue;
            run_rowprod(q, x, m, n, k, 1.0f, cuts, 6, b, kernels[i]);
            CHECK(!memcmp(a, b, (size_t)(m * n) * 4), "%s: rowprod with the %s kernel differs",
                  dev_name, kernels[i]);
        }
        tq_cpu_gemm_kernel_force(NULL);
    }
    tq_threads_set(0);
    free(q), free(x), free(a), free(b);
}

/* --------------------------------------------------- row ops: references */

static void ref_rownorm(const float *x, int64_t rows, int64_t d, double *ref)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t i = 0; i < d; i++)
            s += (double)x[r * d + i] * x[r * d + i];
        ref[r] = sqrt(s);
    }
}

static void ref_normalize(const float *x, int64_t rows, int64_t d, double eps, double *ref)
{
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t i = 0; i < d; i++)
            s += (double)x[r * d + i] * x[r * d + i];
        double den = fmax(sqrt(s), eps);
        for (int64_t i = 0; i < d; i++)
            ref[r * d + i] = x[r * d + i] / den;
    }
}

/* all -inf rows: zeros, the choice documented in lib/cpu/norm.c */
static void ref_softmax(const float *x, int64_t rows, int64_t d, double *ref)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double m = -INFINITY, s = 0;
        for (int64_t i = 0; i < d; i++)
            m = fmax(m, xr[i]);
        for (int64_t i = 0; i < d; i++)
            s += m == -INFINITY ? 0 : exp(xr[i] - m);
        for (int64_t i = 0; i < d; i++)
            ref[r * d + i] = m == -INFINITY ? 0 : exp(xr[i] - m) / s;
    }
}

static void ref_layernorm(const float *x, int64_t rows, int64_t d, const float *g,
                          const float *b, double eps, double *ref)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++)
            mean += xr[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)d;
        for (int64_t i = 0; i < d; i++)
            ref[r * d + i] = (xr[i] - mean) / sqrt(var + eps) * (g ? g[i] : 1) + (b ? b[i] : 0);
    }
}

/* Rows of test data: random of several spreads, plus rows of edge values. */
static void fill_rows(float *x, int64_t rows, int64_t d, int kind)
{
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * d;
        switch ((r + kind) % 6) {
        case 0: fill(xr, d, -1, 1); break;
        case 1: fill(xr, d, -30, 30); break;
        case 2: fill(xr, d, -1e30, 1e30); break;  /* squares overflow f32 */
        case 3: fill(xr, d, -1e-30, 1e-30); break; /* squares underflow f32 */
        case 4: fill(xr, d, 1e4 - 1, 1e4 + 1); break; /* large mean, small spread */
        default: fill(xr, d, 0, 5); break;
        }
    }
}

static const int64_t row_shapes[][4] = {
    /* rank, dims */
    {2, 1, 1}, {2, 7, 33}, {2, 1000, 7}, {3, 3, 5, 33}, {1, 1000}, {2, 40, 1000}, {2, 6, 1},
};

/* A unary row op on every shape, out of place and in place (y = x). */
typedef tq_status (*row_op)(const tq_tensor *x, tq_tensor *y, const void *arg);
typedef void (*row_ref)(const float *x, int64_t rows, int64_t d, double *ref, const void *arg);

static void run_row_op(const char *name, row_op op, row_ref rf, const void *arg, int kind,
                       void (*tweak)(float *x, int64_t rows, int64_t d), double tol)
{
    for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int rank = (int)row_shapes[s][0];
            const int64_t *dims = row_shapes[s] + 1;
            int64_t n = numel(rank, dims), d = dims[rank - 1], rows = n / d;
            float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
            double *ref = malloc((size_t)n * 8);
            fill_rows(x, rows, d, kind + inplace);
            if (tweak)
                tweak(x, rows, d);
            rf(x, rows, d, ref, arg);
            gt *gx = gt_new(TQ_DTYPE_F32, rank, dims, x);
            gt *gy = inplace ? gx : gt_new(TQ_DTYPE_F32, rank, dims, NULL);
            char what[96], sh[48];
            shape_str(sh, sizeof sh, rank, dims);
            snprintf(what, sizeof what, "%s %s%s", name, sh, inplace ? " in place" : "");
            tq_status st = op(gx->t, gy->t, arg);
            CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
            gt_get(gy, y, what);
            if (!inplace)
                gt_unchanged(gx, x, what);
            CHECK_NMSE(y, ref, n, tol, what);
            gt_free(gx);
            if (!inplace)
                gt_free(gy);
            free(x);
            free(y);
            free(ref);
        }
}

/* --------------------------------------------------------- rownorm etc. */

static void test_rownorm(void)
{
    for (size_t s = 0; s < sizeof row_shapes / sizeof row_shapes[0]; s++) {
        int rank = (int)row_shapes[s][0];
        const int64_t *dims = row_shapes[s] + 1;
        int64_t n = numel(rank, dims), d = dims[rank - 1], rows = n / d;
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)rows * 4);
        double *ref = malloc((size_t)rows * 8);
        fill_rows(x, rows, d, (int)s);
        if (rows > 3)
            memset(x + d, 0, (size_t)d * 4); /* a zero row */
        ref_rownorm(x, rows, d, ref);
        gt *gx = gt_new(TQ_DTYPE_F32, rank, dims, x);
        gt *gy = gt_new(TQ_DTYPE_F32, 1, &rows, NULL);
        char what[96], sh[48];
        shape_str(sh, sizeof sh, rank, dims);
        snprintf(what, sizeof what, "rownorm %s", sh);
        tq_status st = tq_op_rownorm(gx->t, gy->t);
        CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
        gt_get(gy, y, what);
        gt_unchanged(gx, x, what);
        CHECK_NMSE(y, ref, rows, TOL_EW, what);
        gt_free(gx);
        gt_free(gy);
        free(x);
        free(y);
        free(ref);
    }
}

static tq_status op_normalize(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    return tq_op_normalize(x, *(const float *)arg, y);
}
static void rf_normalize(const float *x, int64_t rows, int64_t d, double *ref, const void *arg)
{
    ref_normalize(x, rows, d, *(const float *)arg, ref);
}
static void zero_row(float *x, int64_t rows, int64_t d)
{
    if (rows > 3)
        memset(x + 2 * d, 0, (size_t)d * 4);
}

static tq_status op_softmax(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    (void)arg;
    return tq_op_softmax(x, y);
}
static void rf_softmax(const float *x, int64_t rows, int64_t d, double *ref, const void *arg)
{
    (void)arg;
    ref_softmax(x, rows, d, ref);
}
/* masked entries: some -inf in row 0, a whole row of -inf in row 3 */
static void mask_rows(float *x, int64_t rows, int64_t d)
{
    for (int64_t i = 0; i < d; i += 3)
        if (i)
            x[i] = -INFINITY;
    if (rows > 3)
        for (int64_t i = 0; i < d; i++)
            x[3 * d + i] = -INFINITY;
}

typedef struct ln_arg {
    const float *g, *b; /* host copies, NULL for none */
    int64_t d;
    float eps;
} ln_arg;

static tq_status op_layernorm(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    const ln_arg *a = arg;
    gt *gg = a->g ? gt_new(TQ_DTYPE_F32, 1, &a->d, a->g) : NULL;
    gt *gb = a->b ? gt_new(TQ_DTYPE_F32, 1, &a->d, a->b) : NULL;
    tq_status st = tq_op_layernorm(x, gg ? gg->t : NULL, gb ? gb->t : NULL, a->eps, y);
    if (gg)
        gt_unchanged(gg, a->g, "layernorm gamma");
    if (gb)
        gt_unchanged(gb, a->b, "layernorm beta");
    gt_free(gg);
    gt_free(gb);
    return st;
}
static void constant_row(float *x, int64_t rows, int64_t d)
{
    if (rows > 3)
        for (int64_t i = 0; i < d; i++)
            x[2 * d + i] = 3.25f;
}

static void test_rows(void)
{
    test_rownorm();
    float eps[] = {1e-12f, 1.0f};
    for (int e = 0; e < 2; e++) {
        char name[32];
        snprintf(name, sizeof name, "normalize eps=%g", eps[e]);
        run_row_op(name, op_normalize, rf_normalize, &eps[e], e, zero_row, TOL_EW);
    }
    run_row_op("softmax", op_softmax, rf_softmax, NULL, 0, NULL, TOL_EW);
    run_row_op("softmax masked", op_softmax, rf_softmax, NULL, 3, mask_rows, TOL_EW);
    /* layernorm with gamma and beta each present or NULL, over row lengths
     * 1, 7, 33 and 1000; a constant row checks var = 0 */
    static const int64_t lens[] = {1, 7, 33, 1000};
    for (int variant = 0; variant < 4; variant++)
        for (size_t s = 0; s < sizeof lens / sizeof lens[0]; s++) {
            int64_t d = lens[s], dims[2] = {5, d}, n = 5 * d;
            float *g = malloc((size_t)d * 4), *b = malloc((size_t)d * 4);
            float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
            double *ref = malloc((size_t)n * 8);
            fill(g, d, 0.5, 2);
            fill(b, d, -1, 1);
            ln_arg a = {variant & 1 ? g : NULL, variant & 2 ? b : NULL, d, 1e-5f};
            fill_rows(x, 5, d, variant);
            constant_row(x, 5, d);
            ref_layernorm(x, 5, d, a.g, a.b, a.eps, ref);
            gt *gx = gt_new(TQ_DTYPE_F32, 2, dims, x);
            gt *gy = gt_new(TQ_DTYPE_F32, 2, dims, NULL);
            char what[64];
            snprintf(what, sizeof what, "layernorm%s%s [5,%lld]", a.g ? " gamma" : "",
                     a.b ? " beta" : "", (long long)d);
            tq_status st = op_layernorm(gx->t, gy->t, &a);
            CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
            gt_get(gy, y, what);
            gt_unchanged(gx, x, what);
            CHECK_NMSE(y, ref, n, TOL_EW, what);
            gt_free(gx);
            gt_free(gy);
            free(g);
            free(b);
            free(x);
            free(y);
            free(ref);
        }
}

/* layernorm over every shape needs gamma/beta of each row length: done per
 * shape inside the op wrapper */
typedef struct ln_all {
    float eps;
} ln_all;
static tq_status op_layernorm_all(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    int64_t d = x->dims[x->rank - 1];
    float *g = malloc((size_t)d * 4), *b = malloc((size_t)d * 4);
    uint64_t keep = rng;
    rng = (uint64_t)d * 77; /* the reference below draws the same values */
    fill(g, d, 0.5, 2);
    fill(b, d, -1, 1);
    rng = keep;
    ln_arg a = {g, b, d, ((const ln_all *)arg)->eps};
    tq_status st = op_layernorm(x, y, &a);
    free(g);
    free(b);
    return st;
}
static void rf_layernorm_all(const float *x, int64_t rows, int64_t d, double *ref,
                             const void *arg)
{
    float *g = malloc((size_t)d * 4), *b = malloc((size_t)d * 4);
    uint64_t keep = rng;
    rng = (uint64_t)d * 77;
    fill(g, d, 0.5, 2);
    fill(b, d, -1, 1);
    rng = keep;
    ref_layernorm(x, rows, d, g, b, ((const ln_all *)arg)->eps, ref);
    free(g);
    free(b);
}

/* ------------------------------------------------------------ elementwise */

static tq_status op_gelu(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    (void)arg;
    return tq_op_gelu(x, y);
}
static void rf_gelu(const float *x, int64_t rows, int64_t d, double *ref, const void *arg)
{
    (void)arg;
    for (int64_t i = 0; i < rows * d; i++)
        /* 1 + erf(z) = erfc(-z): the same function, without the cancellation
         * of 1 + erf(z) in double for z < -6 */
        ref[i] = x[i] == -INFINITY ? 0 : 0.5 * x[i] * erfc(-x[i] / sqrt(2.0));
}
static void gelu_values(float *x, int64_t rows, int64_t d)
{
    static const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, -50.0f, 50.0f, -5.5f, 1e-20f};
    for (int64_t i = 0; i < rows * d; i++)
        x[i] = randf(-10, 10);
    for (int64_t i = 0; i < rows * d && i < 8; i++)
        x[i] = edge[i];
}

static tq_status op_activate(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    return tq_op_activate(x, *(const tq_activation *)arg, y);
}
static void rf_activate(const float *x, int64_t rows, int64_t d, double *ref, const void *arg)
{
    tq_activation act = *(const tq_activation *)arg;
    for (int64_t i = 0; i < rows * d; i++) {
        double v = x[i];
        ref[i] = act == TQ_ACT_RELU ? (v > 0 ? v : 0)
                 : act == TQ_ACT_TANH ? tanh(v)
                                      : 1 / (1 + exp(-v));
    }
}

static tq_status op_scale(const tq_tensor *x, tq_tensor *y, const void *arg)
{
    return tq_op_scale(x, *(const float *)arg, y);
}
static void rf_scale(const float *x, int64_t rows, int64_t d, double *ref, const void *arg)
{
    for (int64_t i = 0; i < rows * d; i++)
        ref[i] = (double)*(const float *)arg * x[i];
}

static void test_add(void)
{
    static const int64_t shapes[][4] = {{2, 7, 33}, {2, 300, 100}, {1, 5, 0}, {3, 3, 4, 33}, {0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int mode = 0; mode < 4; mode++) { /* same shape / row; out / in place */
            int rank = (int)shapes[s][0];
            const int64_t *dims = shapes[s] + 1;
            int64_t n = numel(rank, dims), d = rank ? dims[rank - 1] : 1;
            int row = mode & 1, inplace = mode >> 1;
            if (row && rank == 0)
                continue;
            int64_t bn = row ? d : n;
            float *a = malloc((size_t)n * 4), *b = malloc((size_t)bn * 4), *y = malloc((size_t)n * 4);
            double *ref = malloc((size_t)n * 8);
            fill(a, n, -100, 100);
            fill(b, bn, -1, 1);
            for (int64_t i = 0; i < n; i++)
                ref[i] = (double)a[i] + b[row ? i % d : i];
            gt *ga = gt_new(TQ_DTYPE_F32, rank, dims, a);
            gt *gb = row ? gt_new(TQ_DTYPE_F32, 1, &d, b) : gt_new(TQ_DTYPE_F32, rank, dims, b);
            gt *gy = inplace ? ga : gt_new(TQ_DTYPE_F32, rank, dims, NULL);
            char what[96], sh[48];
            shape_str(sh, sizeof sh, rank, dims);
            snprintf(what, sizeof what, "add %s%s%s", sh, row ? " + row" : "", inplace ? " in place" : "");
            tq_status st = tq_op_add(ga->t, gb->t, gy->t);
            CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
            gt_get(gy, y, what);
            gt_unchanged(gb, b, what);
            CHECK_NMSE(y, ref, n, TOL_EW, what);
            gt_free(ga);
            gt_free(gb);
            if (!inplace)
                gt_free(gy);
            free(a);
            free(b);
            free(y);
            free(ref);
        }
}

/* The backward of the activations (training): dx = dy * f'(x) against the
 * derivatives in double; gelu's edge values (infinities, +-0, large) too. */
static double ref_act_grad(int act, double x)
{
    if (act == TQ_ACT_RELU)
        return isnan(x) ? x : x > 0 ? 1 : 0;
    if (act == TQ_ACT_TANH)
        return 1 - tanh(x) * tanh(x);
    if (act == TQ_ACT_SIGMOID)
        return 1 / (1 + exp(-x)) * (1 - 1 / (1 + exp(-x)));
    if (isinf(x))
        return x > 0 ? 1 : 0;
    return 0.5 * erfc(-x / sqrt(2.0)) + x * exp(-x * x / 2) / sqrt(2 * M_PI);
}

static void test_activate_grad(void)
{
    static const int64_t shapes[][3] = {{2, 7, 33}, {2, 300, 100}, {1, 0, 0}};
    static const char *names[] = {"relu", "tanh", "sigmoid", "gelu"};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int act = 0; act < 4; act++)
            for (int inplace = 0; inplace < 2; inplace++) {
                int rank = (int)shapes[s][0];
                const int64_t *dims = shapes[s] + 1;
                int64_t n = numel(rank, dims), d = dims[rank - 1], rows = d ? n / d : 0;
                float *x = malloc((size_t)n * 4 + 4), *dy = malloc((size_t)n * 4 + 4),
                      *y = malloc((size_t)n * 4 + 4);
                double *ref = malloc((size_t)n * 8 + 8);
                gelu_values(x, rows, d);
                fill(dy, n, -2, 2);
                for (int64_t i = 0; i < n; i++)
                    ref[i] = (double)dy[i] * ref_act_grad(act, x[i]);
                gt *gx = gt_new(TQ_DTYPE_F32, rank, dims, x), *gd = gt_new(TQ_DTYPE_F32, rank, dims, dy);
                gt *gy = inplace ? gd : gt_new(TQ_DTYPE_F32, rank, dims, NULL);
                char what[96], sh[48];
                shape_str(sh, sizeof sh, rank, dims);
                snprintf(what, sizeof what, "%s grad %s%s", names[act], sh, inplace ? " in place" : "");
                tq_status st = act == 3 ? tq_op_gelu_grad(gx->t, gd->t, gy->t)
                                        : tq_op_activate_grad(gx->t, (tq_activation)act, gd->t, gy->t);
                CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
                gt_get(gy, y, what);
                gt_unchanged(gx, x, what);
                CHECK_NMSE(y, ref, n, TOL_EW, what);
                gt_free(gx);
                gt_free(gd);
                if (!inplace)
                    gt_free(gy);
                free(x);
                free(dy);
                free(y);
                free(ref);
            }
}

static void test_elementwise(void)
{
    run_row_op("gelu", op_gelu, rf_gelu, NULL, 0, gelu_values, TOL_EW);
    static const tq_activation acts[] = {TQ_ACT_RELU, TQ_ACT_TANH, TQ_ACT_SIGMOID};
    static const char *act_names[] = {"relu", "tanh", "sigmoid"};
    for (int i = 0; i < 3; i++) /* gelu's values: infinities, 0, -0, large */
        run_row_op(act_names[i], op_activate, rf_activate, &acts[i], i, gelu_values, TOL_EW);
    float alphas[] = {-2.5f, 0.0f, 1e-3f};
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "scale %g", alphas[i]);
        run_row_op(name, op_scale, rf_scale, &alphas[i], i, NULL, TOL_EW);
    }
    test_add();
    test_activate_grad();
    ln_all la = {1e-5f};
    run_row_op("layernorm (all shapes)", op_layernorm_all, rf_layernorm_all, &la, 4, constant_row,
               TOL_EW);
}

/* ------------------------------------------------------------ topk */

/* The ranking the API specifies: larger first, ties to the lower index, NaN
 * after every number (NaNs by index). */
static const float *cmp_row;
static int rank_cmp(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    float va = cmp_row[a], vb = cmp_row[b];
    int na = isnan(va), nb = isnan(vb);
    if (na != nb)
        return na ? 1 : -1;
    if (!na && va != vb)
        return va > vb ? -1 : 1;
    return a < b ? -1 : a > b;
}

static void topk_case(int64_t rows, int64_t m, int64_t k, int kind)
{
    int64_t xd[2] = {rows, m}, kd[2] = {rows, k};
    float *x = malloc((size_t)(rows * m + 1) * 4), *v = malloc((size_t)(rows * k + 1) * 4);
    int64_t *ix = malloc((size_t)(rows * k + 1) * 8), *order = malloc((size_t)(m + 1) * 8);
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * m;
        for (int64_t i = 0; i < m; i++) {
            switch ((kind + r) % 5) {
            case 0: xr[i] = randf(-1, 1); break;
            case 1: xr[i] = (float)(rnd() % 5); break;          /* many ties */
            case 2: xr[i] = (float)i; break;                     /* rising: every item enters */
            case 3: xr[i] = (float)(m - i); break;               /* falling */
            default: {                                           /* edge values */
                static const float e[] = {NAN, -INFINITY, INFINITY, 0.0f, -0.0f, 1.0f, -1.0f};
                xr[i] = e[rnd() % 7];
            }
            }
        }
        if ((kind + r) % 5 == 0 && m > 3) /* a few NaN among the numbers */
            xr[rnd() % m] = NAN, xr[m - 1] = NAN;
    }
    gt *gx = gt_new(TQ_DTYPE_F32, 2, xd, x);
    gt *gv = gt_new(TQ_DTYPE_F32, 2, kd, NULL);
    gt *gi = gt_new(TQ_DTYPE_I64, 2, kd, NULL);
    char what[96];
    snprintf(what, sizeof what, "topk [%lld,%lld] k=%lld kind %d", (long long)rows, (long long)m,
             (long long)k, kind);
    tq_status st = tq_op_topk(gx->t, k, gv->t, gi->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gv, v, what);
    gt_get(gi, ix, what);
    gt_unchanged(gx, x, what);
    int64_t bad = 0, first = -1;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < m; i++)
            order[i] = i;
        cmp_row = x + r * m;
        qsort(order, (size_t)m, sizeof *order, rank_cmp);
        for (int64_t j = 0; j < k; j++) {
            float want = x[r * m + order[j]], got = v[r * k + j];
            int same_v = isnan(want) ? isnan(got) : memcmp(&want, &got, 4) == 0;
            if (ix[r * k + j] != order[j] || !same_v) {
                if (!bad++)
                    first = r * k + j;
            }
        }
    }
    CHECK(bad == 0, "%s: %s: %lld wrong entries, first at row %lld rank %lld (idx %lld, val %g)",
          dev_name, what, (long long)bad, first < 0 ? -1LL : (long long)(first / (k ? k : 1)),
          first < 0 ? -1LL : (long long)(first % (k ? k : 1)), first < 0 ? -1LL : (long long)ix[first],
          first < 0 ? 0.0 : (double)v[first]);
    gt_free(gx);
    gt_free(gv);
    gt_free(gi);
    free(x);
    free(v);
    free(ix);
    free(order);
}

static void test_topk(void)
{
    for (int kind = 0; kind < 5; kind++) {
        topk_case(1, 1, 1, kind);
        topk_case(7, 33, 5, kind);
        topk_case(5, 1000, 10, kind);
        topk_case(5, 100, 100, kind);
        topk_case(4, 50, 0, kind);
        topk_case(5, 70, 60, kind);
        topk_case(3, 4097, 33, kind);
    }
}

/* ------------------------------------------------------------ above */

/* Each row's columns not below its threshold, against a plain scan: the
 * counts equal, and where a count fits the cap the listed columns are the
 * scan's (in any order); past the cap, cap distinct columns that qualify.
 * Rows of numbers, ties at the threshold, NaN values, NaN and -inf
 * thresholds, and a cap below some counts. */
static void above_case(int64_t rows, int64_t m, int64_t cap)
{
    int64_t xd[2] = {rows, m}, ld[2] = {rows, cap};
    float *x = malloc((size_t)(rows * m + 1) * 4), *thr = malloc((size_t)(rows + 1) * 4);
    int32_t *cnt = malloc((size_t)(rows + 1) * 4), *lst = malloc((size_t)(rows * cap + 1) * 4);
    unsigned char *seen = malloc((size_t)m + 1);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < m; j++)
            x[r * m + j] = r % 4 == 1 ? (float)(rnd() % 4) : randf(-1, 1);
        if (m > 2)
            x[r * m + rnd() % m] = NAN;
        thr[r] = r % 7 == 3 ? NAN : r % 7 == 5 ? -INFINITY : r % 4 == 1 ? 2.0f : randf(0.5f, 1);
    }
    gt *gx = gt_new(TQ_DTYPE_F32, 2, xd, x), *gth = gt_new(TQ_DTYPE_F32, 1, &rows, thr);
    gt *gc = gt_new(TQ_DTYPE_I32, 1, &rows, NULL), *gl = gt_new(TQ_DTYPE_I32, 2, ld, NULL);
    char what[96];
    snprintf(what, sizeof what, "above [%lld,%lld] cap %lld", (long long)rows, (long long)m,
             (long long)cap);
    tq_status st = tq_op_above(gx->t, gth->t, gc->t, gl->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gc, cnt, what);
    gt_get(gl, lst, what);
    int64_t bad = 0, first = -1;
    for (int64_t r = 0; r < rows; r++) {
        int64_t want = 0, ok = 1;
        memset(seen, 0, (size_t)m);
        for (int64_t j = 0; j < m; j++)
            want += !(x[r * m + j] < thr[r]);
        int64_t listed = want < cap ? want : cap;
        ok = cnt[r] == want;
        for (int64_t e = 0; ok && e < listed; e++) {
            int32_t j = lst[r * cap + e];
            ok = j >= 0 && j < m && !seen[j] && !(x[r * m + j] < thr[r]);
            if (ok)
                seen[j] = 1;
        }
        if (!ok && !bad++)
            first = r;
    }
    CHECK(bad == 0, "%s: %s: %lld rows differ from the scan, first %lld (count %d)", dev_name,
          what, (long long)bad, (long long)first, first < 0 ? 0 : cnt[first]);
    gt_free(gx), gt_free(gth), gt_free(gc), gt_free(gl);
    free(x), free(thr), free(cnt), free(lst), free(seen);
}

static void test_above(void)
{
    above_case(1, 1, 1);
    above_case(37, 300, 64);  /* counts of the tied rows past the cap */
    above_case(9, 5000, 8);
    above_case(0, 10, 4);
}

/* ------------------------------------------------------------ simtopk */

/* The float64 reference: every score of q against db, brute force, in plain
 * sequential double sums, rounded once to f32 (the op's scores are the same
 * exact products summed in double in another order, then rounded once: the
 * two f32 values differ only when the exact score lies within ~2^-50 of a
 * rounding boundary of f32, which these inputs never hit), then ranked as the
 * API says: larger first, ties to the lower index, NaN after numbers. */
static void ref_simtopk(const float *q, const float *x, int64_t nq, int64_t ndb, int64_t d,
                        int metric, int64_t k, float *rv, int64_t *ri)
{
    float *row = malloc((size_t)(ndb + 1) * 4);
    int64_t *order = malloc((size_t)(ndb + 1) * 8);
    for (int64_t i = 0; i < nq; i++) {
        for (int64_t j = 0; j < ndb; j++) {
            double s = 0;
            for (int64_t p = 0; p < d; p++) {
                double a = q[i * d + p], b = x[j * d + p];
                s += metric ? (a - b) * (a - b) : a * b;
            }
            row[j] = (float)(metric ? 0.0 - s : s); /* a row with itself: +0, not -0 */
            order[j] = j;
        }
        cmp_row = row;
        qsort(order, (size_t)ndb, sizeof *order, rank_cmp);
        for (int64_t r = 0; r < k; r++) {
            rv[i * k + r] = r < ndb ? row[order[r]] : -INFINITY;
            ri[i * k + r] = r < ndb ? order[r] : -1;
        }
    }
    free(row);
    free(order);
}

/* Runs simtopk over db in the blocks that cuts[] gives (row counts, summing
 * to ndb), the lists updated in place from -inf and -1. */
static void run_simtopk(const float *q, const float *x, int64_t nq, int64_t d, int metric,
                        int64_t k, const int64_t *cuts, int ncuts, float *v,
                        int64_t *ix, const char *what)
{
    int64_t qd[2] = {nq, d}, kd[2] = {nq, k};
    for (int64_t i = 0; i < nq * k; i++)
        v[i] = -INFINITY, ix[i] = -1;
    gt *gq = gt_new(TQ_DTYPE_F32, 2, qd, q);
    gt *gv = gt_new(TQ_DTYPE_F32, 2, kd, v);
    gt *gi = gt_new(TQ_DTYPE_I64, 2, kd, ix);
    int64_t at = 0;
    for (int c = 0; c < ncuts; c++) {
        int64_t xd[2] = {cuts[c], d};
        gt *gx = gt_new(TQ_DTYPE_F32, 2, xd, x + at * d);
        tq_status st = tq_op_simtopk(gq->t, gx->t, metric ? TQ_METRIC_L2 : TQ_METRIC_DOT, at,
                                     gv->t, gi->t);
        CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
        gt_unchanged(gx, x + at * d, what);
        gt_free(gx);
        at += cuts[c];
    }
    gt_get(gv, v, what);
    gt_get(gi, ix, what);
    gt_unchanged(gq, q, what);
    gt_free(gq);
    gt_free(gv);
    gt_free(gi);
}

static void sim_data(float *p, int64_t n, int kind)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = kind == 1 ? (float)((int)(rnd() % 3) - 1) /* ties galore */
                         : randf(-1, 1);
}

/* The kinds of simtopk data beyond sim_data's: 2 a NaN row, an infinite
 * element (a row whose norm bounds nothing) and a NaN query element; 3
 * duplicates: the database repeats 40 rows and the queries are database rows
 * (equal exact scores across the k-th place, L2 +0 for a row with itself);
 * 5 the same with 8 rows, each repeated more often than the candidates a
 * device keeps; 4 a few rows of huge norm (f32 scores of them overflow); 6
 * scores that grow along the database (first element 10 j / ndb, queries'
 * first element 1): by dot, every score tile beats all of the one before,
 * more than a CUDA select's filter holds, by L2 none does; 7 bf16
 * inversions: the queries all ones, the first half of the database rows
 * whose bf16 roundings go up (elements 1 + 2^-8 + 2^-14 and 1 - 2^-8 in
 * turn), then among rows of 0.5 every 7th row of 1 + 2^-8 - 2^-14, rounded
 * down: those score highest, by dot and by L2, but their bf16 products lie
 * d 2^-9 below the first half's, so a bound of the bf16 products' error
 * that leaves out the rows' rounding lets the first half take the lists. */
static void sim_kinds(float *q, float *x, int64_t nq, int64_t ndb, int64_t d, int kind)
{
    if (kind == 2 && ndb > 3) {
        x[(ndb / 2) * d] = NAN;
        x[(ndb / 3) * d + d - 1] = INFINITY;
        if (nq > 1)
            q[d] = NAN;
    }
    if (kind == 3 || kind == 5) {
        int64_t rows = kind == 3 ? 40 : 8;
        for (int64_t j = rows; j < ndb; j++)
            memcpy(x + j * d, x + (j % rows) * d, (size_t)d * 4);
        for (int64_t i = 0; i < nq; i++)
            memcpy(q + i * d, x + ((i * 7) % ndb) * d, (size_t)d * 4);
    }
    if (kind == 6) {
        for (int64_t j = 0; j < ndb; j++)
            x[j * d] = 10.0f * (float)j / (float)ndb;
        for (int64_t i = 0; i < nq; i++)
            q[i * d] = 1.0f;
    }
    if (kind == 7) {
        for (int64_t i = 0; i < nq * d; i++)
            q[i] = 1.0f;
        for (int64_t j = 0; j < ndb; j++)
            for (int64_t p = 0; p < d; p++)
                x[j * d + p] = j < ndb / 2 ? (p % 2 ? 1.0f - 0x1p-8f : 1.0f + 0x1p-8f + 0x1p-14f)
                               : j % 7 ? 0.5f
                                       : 1.0f + 0x1p-8f - 0x1p-14f;
    }
    if (kind == 4)
        for (int64_t j = 5; j < ndb; j += ndb / 3 + 1)
            for (int64_t p = 0; p < d; p++)
                x[j * d + p] *= 1e30f;
}

static void simtopk_case(int64_t nq, int64_t ndb, int64_t d, int64_t k, int metric, int kind,
                         const int64_t *cuts, int ncuts)
{
    float *q = malloc((size_t)(nq * d + 1) * 4), *x = malloc((size_t)(ndb * d + 1) * 4);
    float *v = malloc((size_t)(nq * k + 1) * 4), *rv = malloc((size_t)(nq * k + 1) * 4);
    int64_t *ix = malloc((size_t)(nq * k + 1) * 8), *ri = malloc((size_t)(nq * k + 1) * 8);
    sim_data(q, nq * d, kind);
    sim_data(x, ndb * d, kind);
    sim_kinds(q, x, nq, ndb, d, kind);
    int64_t whole[1] = {ndb};
    if (!cuts)
        cuts = whole, ncuts = 1;
    char what[128];
    snprintf(what, sizeof what, "simtopk %s q[%lld,%lld] db %lld k=%lld kind %d, %d block%s",
             metric ? "l2" : "dot", (long long)nq, (long long)d, (long long)ndb, (long long)k,
             kind, ncuts, ncuts == 1 ? "" : "s");
    run_simtopk(q, x, nq, d, metric, k, cuts, ncuts, v, ix, what);
    ref_simtopk(q, x, nq, ndb, d, metric, k, rv, ri);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < nq * k; i++) {
        int same_v = isnan(rv[i]) ? isnan(v[i]) : memcmp(&rv[i], &v[i], 4) == 0;
        if ((ix[i] != ri[i] || !same_v) && !bad++)
            first = i;
    }
    CHECK(bad == 0, "%s: %s: %lld entries differ from the reference, first query %lld rank %lld: "
                    "idx %lld score %.9g, expected idx %lld score %.9g",
          dev_name, what, (long long)bad, first < 0 ? -1LL : (long long)(first / k),
          first < 0 ? -1LL : (long long)(first % k), first < 0 ? -1LL : (long long)ix[first],
          first < 0 ? 0.0 : (double)v[first], first < 0 ? -1LL : (long long)ri[first],
          first < 0 ? 0.0 : (double)rv[first]);
    free(q), free(x), free(v), free(rv), free(ix), free(ri);
}

/* Devices other than the CPU filter too: f32 scores pick a few more
 * candidates than k (k + max(k, 32) on Vulkan, at most 512) and exact scores
 * decide; a query whose candidates prove nothing gets the rows above a proven
 * threshold scored, or, failing that, is redone on the host. The cases cover
 * blocks below, at and above that count, k at and past its cap, and the data
 * that defeat the proof (ties, duplicates, NaN, inf, huge rows). */
static void test_simtopk(void)
{
    for (int metric = 0; metric < 2; metric++) {
        simtopk_case(1, 1, 1, 1, metric, 0, NULL, 0);
        simtopk_case(37, 3000, 67, 10, metric, 0, NULL, 0);
        simtopk_case(20, 2500, 8, 20, metric, 1, NULL, 0);   /* ties */
        simtopk_case(9, 700, 33, 5, metric, 2, NULL, 0);     /* NaN, inf */
        simtopk_case(30, 900, 12, 6, metric, 3, NULL, 0);    /* duplicates */
        simtopk_case(30, 900, 12, 6, metric, 5, NULL, 0);
        /* 2500 copies a row: more rows tie at the k-th place than a device
         * lists above a threshold (2048 on Vulkan) */
        simtopk_case(4, 20000, 8, 3, metric, 5, NULL, 0);
        simtopk_case(10, 1000, 9, 4, metric, 4, NULL, 0);    /* huge rows */
        simtopk_case(5, 3000, 64, 10, metric, 7, NULL, 0);   /* bf16 inversions */
        simtopk_case(3, 5000, 384, 30, metric, 7, NULL, 0);
        /* blocks through idx_base, one of them empty and one of one row */
        static const int64_t cuts[] = {700, 1, 0, 1299, 1000};
        simtopk_case(37, 3000, 67, 10, metric, 0, cuts, 5);
        simtopk_case(20, 3000, 8, 16, metric, 1, cuts, 5);
        simtopk_case(30, 3000, 12, 6, metric, 3, cuts, 5);
        /* blocks of 42 rows (the candidates of k = 10 on Vulkan), one more
         * and one fewer */
        static const int64_t near[] = {42, 43, 41, 200};
        simtopk_case(13, 326, 20, 10, metric, 0, near, 4);
        /* k beyond a block, and beyond the whole database (empty slots) */
        static const int64_t small[] = {7, 3, 12};
        simtopk_case(11, 22, 16, 15, metric, 0, small, 3);
        simtopk_case(11, 22, 16, 30, metric, 1, small, 3);
        simtopk_case(5, 40, 300, 0, metric, 0, NULL, 0);
        /* k whose candidates reach the cap of 512, and k past it */
        simtopk_case(4, 2000, 16, 300, metric, 0, NULL, 0);
        simtopk_case(3, 1500, 8, 600, metric, 0, NULL, 0);
        /* a shape with several query blocks and database slices (tiles) */
        simtopk_case(600, 20000, 24, 7, metric, 0, NULL, 0);
        /* two query tiles of CUDA's 1024 and two row tiles of its 8192 */
        simtopk_case(1100, 9000, 8, 5, metric, 0, NULL, 0);
        /* every row tile better than the one before (dot), or none (L2) */
        simtopk_case(6, 17000, 8, 10, metric, 6, NULL, 0);
        simtopk_case(6, 17000, 8, 300, metric, 6, NULL, 0);
    }
}

/* The same bits with 1 and 2 threads, with blocks or one call, and (on the
 * CPU) with OpenBLAS or the built-in sgemm. */
static void test_simtopk_same_bits(void)
{
    int64_t nq = 700, ndb = 30000, d = 40, k = 9;
    float *q = malloc((size_t)(nq * d) * 4), *x = malloc((size_t)(ndb * d) * 4);
    for (int64_t i = 0; i < nq * d; i++)
        q[i] = (float)(rnd() % 8) * 0.125f + (i % 3 ? randf(-0.01, 0.01) : 0.0f);
    for (int64_t i = 0; i < ndb * d; i++)
        x[i] = (float)(rnd() % 8) * 0.125f + (i % 3 ? randf(-0.01, 0.01) : 0.0f);
    size_t nb = (size_t)(nq * k);
    float *v0 = malloc(nb * 4), *v1 = malloc(nb * 4);
    int64_t *i0 = malloc(nb * 8), *i1 = malloc(nb * 8);
    static const int64_t one[] = {30000}, blocks[] = {4097, 10000, 903, 15000};
    for (int metric = 0; metric < 2; metric++) {
        tq_threads_set(1);
        run_simtopk(q, x, nq, d, metric, k, one, 1, v0, i0, "simtopk 1 thread");
        tq_threads_set(2);
        run_simtopk(q, x, nq, d, metric, k, one, 1, v1, i1, "simtopk 2 threads");
        CHECK(!memcmp(v0, v1, nb * 4) && !memcmp(i0, i1, nb * 8),
              "%s: simtopk %s differs between 1 and 2 threads", dev_name, metric ? "l2" : "dot");
        run_simtopk(q, x, nq, d, metric, k, blocks, 4, v1, i1, "simtopk blocks");
        CHECK(!memcmp(v0, v1, nb * 4) && !memcmp(i0, i1, nb * 8),
              "%s: simtopk %s differs between one call and blocks", dev_name,
              metric ? "l2" : "dot");
        /* on the CPU: the built-in sgemm for OpenBLAS, the portable checks
         * of the fold for the vector ones */
        static const struct {
            const char *what;
            void (*force)(int on);
        } alt[] = {{"the built-in sgemm", tq_cpu_blas_force_builtin},
                   {"the portable checks", tq_cpu_simtopk_force_portable}};
        for (int a = 0; a < 2 && tq_device_backend(dev) == TQ_BACKEND_CPU; a++) {
            alt[a].force(1);
            run_simtopk(q, x, nq, d, metric, k, one, 1, v1, i1, alt[a].what);
            alt[a].force(0);
            CHECK(!memcmp(v0, v1, nb * 4) && !memcmp(i0, i1, nb * 8),
                  "%s: simtopk %s differs with %s", dev_name, metric ? "l2" : "dot", alt[a].what);
        }
        /* bf16 ranking products (a CPU with AVX512-BF16; elsewhere f32's):
         * wider bounds, more rows scored exactly, the same lists */
        long long before = tq_device_rescored(dev);
        run_simtopk(q, x, nq, d, metric, k, one, 1, v1, i1, "simtopk f32 again");
        long long f32_rows = tq_device_rescored(dev) - before;
        CHECK(tq_device_set_rank_precision(dev, TQ_DTYPE_BF16) == TQ_OK, "%s: rank precision bf16",
              dev_name);
        int bf16 = tq_device_rank_precision(dev) == TQ_DTYPE_BF16;
        before = tq_device_rescored(dev);
        run_simtopk(q, x, nq, d, metric, k, one, 1, v1, i1, "simtopk bf16 ranking");
        long long bf16_rows = tq_device_rescored(dev) - before;
        CHECK(!memcmp(v0, v1, nb * 4) && !memcmp(i0, i1, nb * 8),
              "%s: simtopk %s differs with bf16 ranking products", dev_name, metric ? "l2" : "dot");
        run_simtopk(q, x, nq, d, metric, k, blocks, 4, v1, i1, "simtopk bf16 blocks");
        tq_device_set_rank_precision(dev, TQ_DTYPE_F32);
        CHECK(!memcmp(v0, v1, nb * 4) && !memcmp(i0, i1, nb * 8),
              "%s: simtopk %s differs with bf16 ranking products in blocks", dev_name,
              metric ? "l2" : "dot");
        if (tq_device_backend(dev) == TQ_BACKEND_CPU)
            CHECK(f32_rows >= nq * k && (bf16 ? bf16_rows > f32_rows : bf16_rows == f32_rows),
                  "%s: simtopk %s scored %lld rows exactly with f32 products, %lld with %s",
                  dev_name, metric ? "l2" : "dot", f32_rows, bf16_rows, bf16 ? "bf16" : "f32");
        tq_threads_set(0);
    }
    free(q), free(x), free(v0), free(v1), free(i0), free(i1);
}

/* The vector versions of the exact pair scores give the portable bits. */
static void test_simscore_isa(void)
{
    static const int64_t ds[] = {0, 1, 7, 8, 9, 63, 384, 1001};
    float *a = malloc(1001 * 4), *b = malloc(1001 * 4);
    int bad = 0;
    for (int r = 0; r < 50; r++) {
        fill(a, 1001, -3, 3);
        fill(b, 1001, -3, 3);
        for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
            double x = tq_simscore_dot(a, b, ds[i]), y = tq_simscore_dot_portable(a, b, ds[i]);
            double u = tq_simscore_l2(a, b, ds[i]), w = tq_simscore_l2_portable(a, b, ds[i]);
            bad += memcmp(&x, &y, 8) != 0 || memcmp(&u, &w, 8) != 0;
        }
    }
    CHECK(bad == 0, "simscore: %d vector results differ from the portable ones", bad);
    free(a);
    free(b);
}

/* ------------------------------------------------------------ gather */

static void gather_case(tq_dtype dt, int rank, const int64_t *dims, const int64_t *idx, int64_t n)
{
    size_t es = tq_dtype_size(dt);
    int64_t rows = dims[0], per = numel(rank - 1, dims + 1);
    size_t row = (size_t)per * es;
    unsigned char *x = malloc((size_t)rows * row + 1), *y = malloc((size_t)n * row + 1),
                  *want = malloc((size_t)n * row + 1);
    for (size_t i = 0; i < (size_t)rows * row; i++)
        x[i] = (unsigned char)rnd();
    for (int64_t i = 0; i < n; i++)
        memcpy(want + (size_t)i * row, x + (size_t)idx[i] * row, row);
    int64_t yd[TQ_MAX_RANK];
    memcpy(yd, dims, (size_t)rank * 8);
    yd[0] = n;
    gt *gx = gt_new(dt, rank, dims, x);
    gt *gi = gt_new(TQ_DTYPE_I64, 1, &n, idx);
    gt *gy = gt_new(dt, rank, yd, NULL);
    char what[96], sh[48];
    shape_str(sh, sizeof sh, rank, dims);
    snprintf(what, sizeof what, "gather %s %s, %lld rows", tq_dtype_name(dt), sh, (long long)n);
    tq_status st = tq_op_gather(gx->t, gi->t, gy->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gy, y, what);
    gt_unchanged(gx, x, what);
    gt_unchanged(gi, idx, what);
    CHECK(memcmp(y, want, (size_t)n * row) == 0, "%s: %s: rows differ", dev_name, what);
    gt_free(gx);
    gt_free(gi);
    gt_free(gy);
    free(x);
    free(y);
    free(want);
}

static void test_gather(void)
{
    int64_t idx[] = {0, 9, 3, 3, 5, 9, 1, 0, 2, 8, 7, 6, 4};
    int64_t d1[2] = {10, 7}, d2[2] = {10, 3}, d3[3] = {10, 5, 3}, d4[1] = {10}, d5[2] = {10, 1000};
    gather_case(TQ_DTYPE_F32, 2, d1, idx, 13);
    gather_case(TQ_DTYPE_I8, 2, d2, idx, 13);  /* 3-byte rows */
    gather_case(TQ_DTYPE_F16, 3, d3, idx, 13); /* 30-byte rows */
    gather_case(TQ_DTYPE_I64, 1, d4, idx, 13);
    gather_case(TQ_DTYPE_F64, 2, d5, idx, 13);
    gather_case(TQ_DTYPE_U8, 2, d2, idx, 0); /* no rows */

    /* a bad index fails with a usage error and a message, and writes nothing
     * outside y */
    int64_t bad_idx[][3] = {{0, 10, 1}, {-1, 0, 0}, {3, 4, INT64_MIN}};
    for (int b = 0; b < 3; b++) {
        int64_t n = 3, yd[2] = {3, 7};
        float x[70];
        fill(x, 70, -1, 1);
        gt *gx = gt_new(TQ_DTYPE_F32, 2, d1, x);
        gt *gi = gt_new(TQ_DTYPE_I64, 1, &n, bad_idx[b]);
        gt *gy = gt_new(TQ_DTYPE_F32, 2, yd, NULL);
        tq_status st = tq_op_gather(gx->t, gi->t, gy->t);
        CHECK(st == TQ_ERR_USAGE, "%s: gather with idx %lld,%lld,%lld: status %d, not a usage error",
              dev_name, (long long)bad_idx[b][0], (long long)bad_idx[b][1],
              (long long)bad_idx[b][2], (int)st);
        CHECK(st == TQ_OK || strstr(tq_errmsg(), "idx"),
              "%s: gather's message should name idx: '%s'", dev_name, tq_errmsg());
        gt_get(gy, NULL, "gather with a bad index");
        gt_free(gx);
        gt_free(gi);
        gt_free(gy);
    }
}

/* ------------------------------------------------------------ convert */

/* Independent encoders: round to nearest even in double, then the bits. */
static uint16_t ref_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double x = fabs((double)f);
    if (isnan(f))
        return sign | 0x7e00; /* any quiet NaN: compared as NaN */
    int e;
    frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
    int ex = e - 1 < -14 ? -14 : e - 1;
    double ulp = ldexp(1, ex - 10);
    double r = nearbyint(x / ulp) * ulp;
    if (r >= 65520.0 || isinf(x))
        return sign | 0x7c00;
    if (r < ldexp(1, -14))
        return sign | (uint16_t)(r / ldexp(1, -24));
    frexp(r, &e);
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(r / ldexp(1, e - 1 - 10) - 1024);
}

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static uint16_t ref_bf16(float f)
{
    if (isnan(f))
        return signbit(f) ? 0xffc0 : 0x7fc0;
    double x = fabs((double)f);
    int e;
    frexp(x, &e);
    int ex = e - 1 < -126 ? -126 : e - 1;
    double ulp = ldexp(1, ex - 7);
    double r = nearbyint(x / ulp) * ulp;
    float rf = r > 0x1.fep127 ? INFINITY : (float)r;
    if (signbit(f))
        rf = -rf;
    uint32_t u;
    memcpy(&u, &rf, 4);
    return (uint16_t)(u >> 16);
}

static float convert_inputs(int64_t i)
{
    static const float edge[] = {0.0f, -0.0f, 1.0f, -2.5f, 2.5f, 3.5f, -0.5f, 65504.0f,
                                 65519.0f, 65520.0f, 1e5f, -1e30f, 6e-8f, 3e-8f, 1e-8f,
                                 2.98e-8f, 127.5f, -128.5f, 300.0f, -129.0f, INFINITY,
                                 -INFINITY, NAN, 1e-40f, 0x1.fffffep127f, 1.00390625f,
                                 1.01171875f, 0.33333334f};
    if (i < (int64_t)(sizeof edge / sizeof edge[0]))
        return edge[i];
    return (float)((unif() - 0.5) * ldexp(1, (int)(rnd() % 40) - 20));
}

static int same_f16(uint16_t a, uint16_t b)
{
    int an = (a & 0x7c00) == 0x7c00 && (a & 0x3ff), bn = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
    return an || bn ? an && bn : a == b;
}

/* Converts x (dtype from) to dtype to on the device; out gets the bytes. */
static void run_convert(tq_dtype from, tq_dtype to, int rank, const int64_t *dims, const void *x,
                        void *out, const char *what)
{
    gt *gx = gt_new(from, rank, dims, x);
    gt *gy = gt_new(to, rank, dims, NULL);
    tq_status st = tq_op_convert(gx->t, gy->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(gy, out, what);
    gt_unchanged(gx, x, what);
    gt_free(gx);
    gt_free(gy);
}

static void test_convert(void)
{
    int64_t dims[2] = {9, 64}, n = 9 * 64;
    float *x = malloc((size_t)n * 4), *back = malloc((size_t)n * 4);
    uint16_t *h = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++)
        x[i] = convert_inputs(i);

    run_convert(TQ_DTYPE_F32, TQ_DTYPE_F16, 2, dims, x, h, "convert f32 -> f16");
    int64_t bad = 0, at = -1;
    for (int64_t i = 0; i < n; i++)
        if (!same_f16(h[i], ref_f16(x[i])) && !bad++)
            at = i;
    CHECK(!bad, "%s: f32 -> f16: %lld wrong, first %.9g -> 0x%04x, want 0x%04x", dev_name,
          (long long)bad, at < 0 ? 0.0 : x[at], at < 0 ? 0 : h[at], at < 0 ? 0 : ref_f16(x[at]));

    run_convert(TQ_DTYPE_F16, TQ_DTYPE_F32, 2, dims, h, back, "convert f16 -> f32");
    bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = f16_value(h[i]);
        if (isnan(want) ? !isnan(back[i]) : (double)back[i] != want || !signbit(back[i]) != !signbit(want))
            bad++;
    }
    CHECK(!bad, "%s: f16 -> f32: %lld values not exact", dev_name, (long long)bad);

    run_convert(TQ_DTYPE_F32, TQ_DTYPE_BF16, 2, dims, x, h, "convert f32 -> bf16");
    bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t want = ref_bf16(x[i]);
        int nan_ok = isnan(x[i]) && (h[i] & 0x7f80) == 0x7f80 && (h[i] & 0x7f);
        if (h[i] != want && !nan_ok && !bad++)
            at = i;
    }
    CHECK(!bad, "%s: f32 -> bf16: %lld wrong, first %.9g -> 0x%04x, want 0x%04x", dev_name,
          (long long)bad, x[at > 0 ? at : 0], h[at > 0 ? at : 0], ref_bf16(x[at > 0 ? at : 0]));
    run_convert(TQ_DTYPE_BF16, TQ_DTYPE_F32, 2, dims, h, back, "convert bf16 -> f32");
    bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16, w;
        memcpy(&w, &back[i], 4);
        if (isnan(x[i]) ? !isnan(back[i]) : u != w)
            bad++;
    }
    CHECK(!bad, "%s: bf16 -> f32: %lld values not exact", dev_name, (long long)bad);

    /* to i8: round to nearest even, saturate, NaN -> 0 */
    int8_t *q = malloc((size_t)n);
    run_convert(TQ_DTYPE_F32, TQ_DTYPE_I8, 2, dims, x, q, "convert f32 -> i8");
    bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double want = isnan(x[i]) ? 0 : fmin(127, fmax(-128, nearbyint(x[i])));
        if (q[i] != want && !bad++)
            at = i;
    }
    CHECK(!bad, "%s: f32 -> i8: %lld wrong, first %.9g -> %d", dev_name, (long long)bad,
          x[at > 0 ? at : 0], q[at > 0 ? at : 0]);
    /* from i32: exact below 2^24 */
    int32_t *iv = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        iv[i] = (int32_t)(rnd() % 33554432) - 16777216;
    run_convert(TQ_DTYPE_I32, TQ_DTYPE_F32, 2, dims, iv, back, "convert i32 -> f32");
    bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += back[i] != (float)iv[i];
    CHECK(!bad, "%s: i32 -> f32: %lld values not exact", dev_name, (long long)bad);

    /* block codes: a round trip is within the quantization noise. For data
     * uniform in [-1, 1], q8_0 steps are amax/127, noise variance step^2/12
     * against a signal variance of 1/3: NMSE ~1.5e-5; q4_0 steps amax/8: ~4e-3.
     * A block with a wrong scale or nibble order gives NMSE near 1 or more. */
    for (int code = 0; code < 2; code++) {
        tq_dtype dt = code ? TQ_DTYPE_Q4_0 : TQ_DTYPE_Q8_0;
        double tol = code ? 1e-2 : 1e-4;
        float *u = malloc((size_t)n * 4);
        double *ref = malloc((size_t)n * 8);
        fill(u, n, -1, 1);
        for (int64_t i = 0; i < n; i++)
            ref[i] = u[i];
        uint64_t qb;
        tq_dtype_payload_bytes(dt, 2, dims, &qb);
        unsigned char *blk = malloc(qb);
        char what[64];
        snprintf(what, sizeof what, "convert f32 -> %s -> f32", tq_dtype_name(dt));
        run_convert(TQ_DTYPE_F32, dt, 2, dims, u, blk, what);
        run_convert(dt, TQ_DTYPE_F32, 2, dims, blk, back, what);
        CHECK_NMSE(back, ref, n, tol, what);
        free(u);
        free(ref);
        free(blk);
    }

    /* bit: 1 where x > 0, MSB first, each row padded to whole bytes */
    int64_t bd[2] = {5, 33};
    float bx[5 * 33];
    for (int i = 0; i < 5 * 33; i++)
        bx[i] = i % 11 == 0 ? (i % 2 ? -0.0f : 0.0f) : randf(-1, 1);
    bx[7] = NAN;
    unsigned char bits[5 * 5];
    run_convert(TQ_DTYPE_F32, TQ_DTYPE_BIT, 2, bd, bx, bits, "convert f32 -> bit");
    bad = 0;
    for (int r = 0; r < 5; r++)
        for (int j = 0; j < 40; j++) {
            int want = j < 33 && bx[r * 33 + j] > 0;
            bad += ((bits[r * 5 + j / 8] >> (7 - j % 8)) & 1) != want;
        }
    CHECK(!bad, "%s: f32 -> bit: %lld bits wrong", dev_name, (long long)bad);
    float bback[5 * 33];
    run_convert(TQ_DTYPE_BIT, TQ_DTYPE_F32, 2, bd, bits, bback, "convert bit -> f32");
    bad = 0;
    for (int i = 0; i < 5 * 33; i++)
        bad += bback[i] != (bx[i] > 0 ? 1.0f : -1.0f);
    CHECK(!bad, "%s: bit -> f32: %lld values wrong", dev_name, (long long)bad);

    free(x);
    free(back);
    free(h);
    free(q);
    free(iv);
}

/* ------------------------------------------------------------ attention */

/* TOL_ATT, attention outputs, weights and received: each score is an f32 dot
 * product (error ~eps sqrt(Dk) relative), then exp2 in f32 (~1 ulp) and sums
 * over up to a few hundred keys; with logits near 80 an f32 score carries an
 * absolute error ~80 * 2^-24 = 5e-6, which moves a weight by as much relative:
 * NMSE up to ~1e-10. 1e-8 leaves room and still fails on a missing rescale
 * (NMSE ~1e-2), a mask off by one key (~1e-3) or a wrong scale (~1e-2). */
#define TOL_ATT 1e-8
/* With bf16 products (att_bf16 set: tq_attention_args.bf16), q, k, v and the
 * probabilities each carry up to 2^-9 relative: a score of |s| ~ 1-3 moves
 * by ~1e-2 at most, a weight by as much relative, an output by ~2^-8: NMSE
 * ~1e-5. 1e-4 still fails on a missing rescale, mask or scale (>= 1e-3). */
#define TOL_ATT_BF16 1e-4
static int att_bf16;

typedef struct att_case {
    const char *what;
    int64_t B, Lq, Lk;
    int H, Dk, Dv, rank3, causal, groups, received, weights;
    float scale;
    const int64_t *key_len; /* [B] or NULL */
    double lo, hi;          /* range of q, k, v */
    int self;               /* k = q: with a large scale, logits near 80 */
    int bias;               /* a score bias [H, Lq, Lk] in [-3, 3] (MPNet's kind) */
} att_case;

/* float64 reference of the op's contract, in the most direct form. */
static void ref_attention(const att_case *c, const float *q, const float *k, const float *v,
                          const int64_t *qg, const int64_t *kg, const float *bias, double *out,
                          double *recv, double *w)
{
    int64_t dq = (int64_t)c->H * c->Dk, dv = (int64_t)c->H * c->Dv;
    double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)c->Dk);
    double *s = malloc((size_t)(c->Lk + 1) * 8);
    int *live = malloc((size_t)(c->Lk + 1) * sizeof *live);
    memset(recv, 0, (size_t)(c->B * c->Lk) * 8);
    for (int64_t b = 0; b < c->B; b++)
        for (int h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->Lq; i++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j < c->Lk; j++) {
                    live[j] = !(c->causal && j > i) && !(c->key_len && j >= c->key_len[b]) &&
                              !(c->groups && qg[b * c->Lq + i] != kg[b * c->Lk + j]);
                    double d = 0;
                    for (int p = 0; p < c->Dk; p++)
                        d += (double)q[(b * c->Lq + i) * dq + h * c->Dk + p] *
                             k[(b * c->Lk + j) * dq + h * c->Dk + p];
                    s[j] = scale * d + (bias ? bias[(h * c->Lq + i) * c->Lk + j] : 0.0);
                    if (live[j] && s[j] > mx)
                        mx = s[j];
                }
                for (int64_t j = 0; j < c->Lk; j++)
                    sum += live[j] ? exp(s[j] - mx) : 0;
                for (int64_t j = 0; j < c->Lk; j++) {
                    double p = live[j] ? exp(s[j] - mx) / sum : 0;
                    w[((b * c->H + h) * c->Lq + i) * c->Lk + j] = p;
                    if (i != j)
                        recv[b * c->Lk + j] += p / c->H;
                }
                for (int e = 0; e < c->Dv; e++) {
                    double o = 0;
                    for (int64_t j = 0; j < c->Lk; j++)
                        o += w[((b * c->H + h) * c->Lq + i) * c->Lk + j] *
                             v[(b * c->Lk + j) * dv + h * c->Dv + e];
                    out[(b * c->Lq + i) * dv + h * c->Dv + e] = o;
                }
            }
    free(s);
    free(live);
}

/* Groups: a few per batch item, in runs (as tq-attend's --group makes them)
 * with one group that has queries and no keys: its queries are fully masked;
 * groups 2: the runs alone (blocks of queries then meet few key tiles, which
 * a device may skip). */
static void att_groups(const att_case *c, int64_t *qg, int64_t *kg)
{
    for (int64_t b = 0; b < c->B; b++) {
        for (int64_t i = 0; i < c->Lq; i++)
            qg[b * c->Lq + i] = i * 5 / (c->Lq ? c->Lq : 1) + (c->groups == 1 && i % 11 == 3 ? 100 : 0);
        for (int64_t j = 0; j < c->Lk; j++)
            kg[b * c->Lk + j] = j * 5 / (c->Lk ? c->Lk : 1);
    }
}

/* Runs one case; returns the outputs (out, received, weights) concatenated
 * in *bits when asked, for the thread test. */
static void att_run(const att_case *c, float **bits, size_t *nbits)
{
    int64_t dq = (int64_t)c->H * c->Dk, dv = (int64_t)c->H * c->Dv;
    int64_t nq = c->B * c->Lq * dq, nk = c->B * c->Lk * dq, nv = c->B * c->Lk * dv,
            no = c->B * c->Lq * dv, nw = c->B * c->H * c->Lq * c->Lk, nr = c->B * c->Lk;
    float *q = malloc((size_t)(nq + 1) * 4), *k = malloc((size_t)(nk + 1) * 4),
          *v = malloc((size_t)(nv + 1) * 4), *out = malloc((size_t)(no + 1) * 4),
          *w = malloc((size_t)(nw + 1) * 4), *recv = malloc((size_t)(nr + 1) * 4);
    double *rout = malloc((size_t)(no + 1) * 8), *rw = malloc((size_t)(nw + 1) * 8),
           *rrecv = malloc((size_t)(nr + 1) * 8);
    int64_t *qg = malloc((size_t)(c->B * c->Lq + 1) * 8), *kg = malloc((size_t)(c->B * c->Lk + 1) * 8);
    fill(q, nq, c->lo, c->hi);
    if (c->self)
        memcpy(k, q, (size_t)nk * 4);
    else
        fill(k, nk, c->lo, c->hi);
    fill(v, nv, -1, 1);
    att_groups(c, qg, kg);
    int64_t nb = c->bias ? (int64_t)c->H * c->Lq * c->Lk : 0;
    float *bias = c->bias ? malloc((size_t)(nb + 1) * 4) : NULL;
    if (bias)
        fill(bias, nb, -3, 3);
    ref_attention(c, q, k, v, qg, kg, bias, rout, rrecv, rw);
    int r = c->rank3 ? 3 : 2, o = c->rank3 ? 0 : 1;
    int64_t qd[3] = {c->B, c->Lq, dq}, kd[3] = {c->B, c->Lk, dq}, vd[3] = {c->B, c->Lk, dv},
            od[3] = {c->B, c->Lq, dv}, wd[4] = {c->B, c->H, c->Lq, c->Lk},
            rd[2] = {c->B, c->Lk}, qgd[2] = {c->B, c->Lq}, kgd[2] = {c->B, c->Lk};
    gt *gq = gt_new(TQ_DTYPE_F32, r, qd + o, q), *gk = gt_new(TQ_DTYPE_F32, r, kd + o, k),
       *gv = gt_new(TQ_DTYPE_F32, r, vd + o, v), *go = gt_new(TQ_DTYPE_F32, r, od + o, NULL);
    gt *gw = c->weights ? gt_new(TQ_DTYPE_F32, 4, wd, NULL) : NULL;
    gt *gr = c->received ? gt_new(TQ_DTYPE_F32, 2, rd, NULL) : NULL;
    gt *gql = c->groups ? gt_new(TQ_DTYPE_I64, 2, qgd, qg) : NULL;
    gt *gkl = c->groups ? gt_new(TQ_DTYPE_I64, 2, kgd, kg) : NULL;
    gt *glen = c->key_len ? gt_new(TQ_DTYPE_I64, 1, &c->B, c->key_len) : NULL;
    int64_t bd[3] = {c->H, c->Lq, c->Lk};
    gt *gb = bias ? gt_new(TQ_DTYPE_F32, 3, bd, bias) : NULL;
    /* out rounded into a copy too (bf16 with bf16 products, else f16): the
     * bytes of tq_convert of out, as tq.h promises */
    tq_dtype lt = att_bf16 ? TQ_DTYPE_BF16 : TQ_DTYPE_F16;
    gt *glow = gt_new(lt, r, od + o, NULL);
    tq_attention_args args = {c->H, c->scale, c->causal, glen ? glen->t : NULL,
                              gql ? gql->t : NULL, gkl ? gkl->t : NULL, gr ? gr->t : NULL,
                              gw ? gw->t : NULL, att_bf16, glow->t, gb ? gb->t : NULL};
    tq_status st = tq_op_attention(gq->t, gk->t, gv->t, &args, go->t);
    char what[200];
    snprintf(what, sizeof what, "attention %s (B=%lld Lq=%lld Lk=%lld H=%d Dk=%d Dv=%d)", c->what,
             (long long)c->B, (long long)c->Lq, (long long)c->Lk, c->H, c->Dk, c->Dv);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(go, out, what);
    gt_unchanged(gq, q, what);
    gt_unchanged(gk, k, what);
    gt_unchanged(gv, v, what);
    CHECK_NMSE(out, rout, no, att_bf16 ? TOL_ATT_BF16 : TOL_ATT, what);
    uint16_t *low = malloc((size_t)(no + 1) * 2), *low_ref = malloc((size_t)(no + 1) * 2);
    gt_get(glow, low, what);
    tq_convert(lt, low_ref, TQ_DTYPE_F32, out, (size_t)no, 0);
    CHECK(!memcmp(low, low_ref, (size_t)no * 2), "%s: %s: the %s copy is not out rounded",
          dev_name, what, tq_dtype_name(lt));
    free(low), free(low_ref);
    /* fully masked queries: exactly 0, not merely small */
    int64_t zero_bad = 0;
    for (int64_t i = 0; i < no; i++)
        zero_bad += rout[i] == 0 && out[i] != 0;
    CHECK(zero_bad == 0, "%s: %s: %lld outputs of fully masked queries are not 0", dev_name,
          what, (long long)zero_bad);
    if (gw) {
        char ww[240];
        snprintf(ww, sizeof ww, "%s weights", what);
        gt_get(gw, w, ww);
        CHECK_NMSE(w, rw, nw, TOL_ATT, ww);
        int64_t mask_bad = 0;
        for (int64_t i = 0; i < nw; i++)
            mask_bad += rw[i] == 0 && w[i] != 0;
        CHECK(mask_bad == 0, "%s: %s: %lld masked weights are not 0", dev_name, ww,
              (long long)mask_bad);
    }
    if (gr) {
        char rw2[240];
        snprintf(rw2, sizeof rw2, "%s received", what);
        gt_get(gr, recv, rw2);
        CHECK_NMSE(recv, rrecv, nr, TOL_ATT, rw2);
    }
    if (bits) {
        *nbits = (size_t)(no + (gw ? nw : 0) + (gr ? nr : 0));
        *bits = malloc(*nbits * 4 + 4);
        memcpy(*bits, out, (size_t)no * 4);
        if (gw)
            memcpy(*bits + no, w, (size_t)nw * 4);
        if (gr)
            memcpy(*bits + no + (gw ? nw : 0), recv, (size_t)nr * 4);
    }
    gt *all[] = {gq, gk, gv, go, gw, gr, gql, gkl, glen, glow, gb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gt_free(all[i]);
    free(bias);
    free(q), free(k), free(v), free(out), free(w), free(recv);
    free(rout), free(rw), free(rrecv), free(qg), free(kg);
}

static void attention_bad_args(void)
{
    int64_t d2[2] = {4, 6}, d2b[2] = {5, 6}, d3[3] = {1, 4, 6}, kl = 2;
    gt *q = gt_new(TQ_DTYPE_F32, 2, d2, NULL), *k = gt_new(TQ_DTYPE_F32, 2, d2b, NULL),
       *v = gt_new(TQ_DTYPE_F32, 2, d2b, NULL), *o = gt_new(TQ_DTYPE_F32, 2, d2, NULL),
       *o3 = gt_new(TQ_DTYPE_F32, 3, d3, NULL), *len = gt_new(TQ_DTYPE_I64, 1, &kl, NULL),
       *qi = gt_new(TQ_DTYPE_I64, 2, d2, NULL);
    tq_attention_args ok = {2, 0, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL}, a;
    a = ok;
    a.heads = 4; /* does not divide 6 */
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE, "attention: 4 heads of 6");
    a = ok;
    a.heads = 0;
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE, "attention: 0 heads");
    CHECK(tq_op_attention(q->t, k->t, v->t, &ok, o3->t) == TQ_ERR_USAGE, "attention: mixed ranks");
    CHECK(tq_op_attention(q->t, k->t, q->t, &ok, o->t) == TQ_ERR_USAGE, "attention: v rows != k rows");
    CHECK(tq_op_attention(qi->t, k->t, v->t, &ok, o->t) == TQ_ERR_USAGE, "attention: i64 q");
    a = ok;
    a.key_len = len->t; /* [2], the batch is 1 */
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE, "attention: key_len shape");
    a = ok;
    a.qgroup = qi->t; /* without kgroup */
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE, "attention: qgroup alone");
    a = ok;
    a.received = o->t;
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE, "attention: received shape");
    a = ok;
    a.scale = INFINITY;
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE, "attention: inf scale");
    a = ok;
    a.low = o->t; /* f32 */
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "low must be bf16 or f16"),
          "attention: an f32 low (%s)", tq_errmsg());
    gt *l2 = gt_new(TQ_DTYPE_BF16, 2, d2b, NULL);
    a.low = l2->t; /* [5, 6] for out [4, 6] */
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "low and out differ"),
          "attention: a low of another shape (%s)", tq_errmsg());
    int64_t bd[3] = {2, 4, 4}; /* [H, Lq, Lk] is [2, 4, 5] */
    gt *b3 = gt_new(TQ_DTYPE_F32, 3, bd, NULL);
    a = ok;
    a.bias = b3->t;
    CHECK(tq_op_attention(q->t, k->t, v->t, &a, o->t) == TQ_ERR_USAGE &&
              strstr(tq_errmsg(), "bias must be [2, 4, 5]"),
          "attention: a bias of another shape (%s)", tq_errmsg());
    gt *all[] = {q, k, v, o, o3, len, qi, l2, b3};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gt_free(all[i]);
}

static void test_attention(void)
{
    static const int64_t lens3[3] = {150, 0, 64}, lens2[2] = {77, 100},
                         lens5[5] = {20, 1, 13, 17, 9}, lens_t[2] = {40, 23},
                         lens_neg[2] = {-1, 90};
    const att_case cases[] = {
        /* what, B, Lq, Lk, H, Dk, Dv, rank3, causal, groups, recv, weights, scale, key_len, lo, hi */
        {"one query one key", 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"odd sizes", 1, 130, 130, 3, 5, 7, 0, 0, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"causal", 1, 200, 200, 2, 16, 16, 0, 1, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"cross, more keys", 1, 70, 150, 4, 8, 12, 0, 0, 0, 0, 1, 0, NULL, -1, 1, 0, 0},
        /* Dk 12: the AVX2 key packing's 8 x 8 blocks and its scalar rest */
        {"d_head 12, 83 keys", 1, 70, 83, 2, 12, 12, 0, 0, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"causal, fewer keys", 1, 150, 70, 2, 8, 8, 0, 1, 0, 1, 0, 0, NULL, -1, 1, 0, 0},
        {"batch, key_len (one 0)", 3, 50, 150, 2, 8, 4, 1, 0, 0, 1, 1, 0, lens3, -1, 1, 0, 0},
        {"groups", 2, 100, 100, 2, 6, 10, 1, 0, 1, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"causal + key_len + groups", 2, 100, 100, 3, 4, 4, 1, 1, 1, 1, 1, 0.7f, lens2, -1, 1, 0, 0},
        /* k = q: the diagonal logits are scale * |q_i|^2, about 80 on average
         * (16 * 0.75 * 6.6 and 64 * 0.48 * 2.6), the others spread +-20..40 */
        {"logits near 80", 1, 97, 97, 2, 64, 64, 0, 0, 0, 1, 1, 2.6f, NULL, -1.2, 1.2, 1, 0},
        {"logits near 80, causal", 1, 130, 130, 1, 16, 8, 0, 1, 0, 1, 0, 6.6f, NULL, -1.5, 1.5, 1, 0},
        {"no keys", 1, 5, 0, 2, 4, 4, 0, 0, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"no queries", 1, 0, 9, 2, 4, 4, 0, 0, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"d_head 64, 8 heads", 1, 300, 300, 8, 64, 64, 0, 1, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        /* keys that fit one tile (<= 64), the CPU's rows way on AVX-512: 1..4
         * chunks of 16 keys, d_head 5 and 7, 70 (a second column block), more
         * queries than a block, masks and the second pass */
        {"sentences: 12 heads of 32", 5, 20, 20, 12, 32, 32, 1, 0, 0, 0, 0, 0, lens5, -1, 1, 0, 0},
        {"one tile, odd widths", 2, 30, 64, 3, 5, 7, 1, 0, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"one tile, d_v 70", 1, 9, 33, 2, 8, 70, 0, 0, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        {"one tile, 100 queries", 1, 100, 50, 2, 8, 8, 0, 0, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        {"one tile, causal + key_len + groups", 2, 40, 40, 2, 16, 16, 1, 1, 1, 1, 1, 0.7f, lens_t,
         -1, 1, 0, 0},
        {"one tile, logits near 80", 1, 48, 48, 2, 64, 64, 0, 0, 0, 1, 1, 2.6f, NULL, -1.2, 1.2, 1, 0},
        /* the GPUs' tiles of 64 queries and 32 keys (kernels/cuda/attention_flash.cu):
         * causal with more keys than queries, a negative key length, d_k !=
         * d_v on both sides of 32, groups across tiles; d_k 80 takes the
         * row kernel */
        {"causal, more keys, key_len -1", 2, 70, 100, 2, 32, 48, 1, 1, 0, 1, 1, 0, lens_neg, -1, 1, 0, 0},
        {"groups, d_k 64, d_v 40", 2, 65, 97, 3, 64, 40, 1, 0, 1, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"d_k 80, d_v 16", 1, 40, 50, 2, 80, 16, 0, 1, 0, 1, 1, 0, NULL, -1, 1, 0, 0},
        {"groups in runs", 2, 200, 300, 2, 16, 24, 1, 0, 2, 1, 1, 0, lens2, -1, 1, 0, 0},
        /* a score bias (MPNet's relative positions): keys in one tile and
         * in several, with key_len, causal, groups and the second pass; on
         * the GPUs the flash kernel's tiles of 64 x 32 (ragged edges too) */
        {"bias, sentences", 5, 20, 20, 12, 32, 32, 1, 0, 0, 1, 1, 0, lens5, -1, 1, 0, 1},
        {"bias, tiles, key_len", 2, 100, 100, 2, 16, 16, 1, 0, 0, 1, 1, 0, lens2, -1, 1, 0, 1},
        {"bias, causal + groups, cross", 2, 70, 130, 3, 8, 12, 1, 1, 1, 1, 1, 0.7f, NULL, -1, 1,
         0, 1},
        /* on the GPUs: d_k 80 takes the row kernel (attention.cu) with its bias */
        {"bias, d_k 80, key_len", 2, 33, 70, 2, 80, 24, 1, 0, 0, 1, 1, 0, lens2, -1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        att_run(&cases[i], NULL, NULL);
    attention_bad_args();
    /* hand-made rows: logits exactly 80 and 79 (exp(80) overflows f32
     * without the max subtracted), and 10 and 9.875 */
    {
        int64_t d[2] = {2, 1};
        float q[2] = {8.0f, 1.0f}, kk[2] = {10.0f, 9.875f}, vv[2] = {1.0f, -1.0f}, out[2];
        gt *gq = gt_new(TQ_DTYPE_F32, 2, d, q), *gk = gt_new(TQ_DTYPE_F32, 2, d, kk),
           *gv = gt_new(TQ_DTYPE_F32, 2, d, vv), *go = gt_new(TQ_DTYPE_F32, 2, d, NULL);
        tq_attention_args a = {1, 1.0f, 0, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL};
        CHECK(tq_op_attention(gq->t, gk->t, gv->t, &a, go->t) == TQ_OK, "attention 80: %s",
              tq_errmsg());
        gt_get(go, out, "attention logits 80");
        /* row 0: logits 80 and 79: out = (1 - e^-1) / (1 + e^-1) */
        double r0 = (1 - exp(-1.0)) / (1 + exp(-1.0)), r1 = (1 - exp(-0.125)) / (1 + exp(-0.125));
        double ref[2] = {r0, r1};
        CHECK_NMSE(out, ref, 2, 1e-12, "attention logits 80 and 79");
        gt_free(gq), gt_free(gk), gt_free(gv), gt_free(go);
    }
    /* same bits with 1 and 2 threads: many units, every output */
    att_case tc = {"threads", 2, 300, 260, 3, 16, 8, 1, 1, 1, 1, 1, 0, lens2, -1, 1, 0, 0};
    float *one, *two;
    size_t n1, n2;
    uint64_t seed = rng;
    tq_threads_set(1);
    att_run(&tc, &one, &n1);
    rng = seed; /* the same inputs again */
    tq_threads_set(2);
    att_run(&tc, &two, &n2);
    tq_threads_set(0);
    CHECK(n1 == n2 && memcmp(one, two, n1 * 4) == 0, "%s: attention differs between 1 and 2 threads",
          dev_name);
    free(one);
    free(two);
}

/* The attention's online softmax in AVX-512 and in AVX2 give the same bits
 * (the same lanes, operations and order), and the baseline loop agrees with
 * the reference. */
static void test_attention_cpu_isa(void)
{
    static const int64_t lens2[2] = {77, 100};
    att_case tc = {"ISA levels", 2, 150, 260, 3, 16, 8, 1, 1, 1, 1, 1, 0, lens2, -1, 1, 0, 0};
    float *bits[3] = {NULL, NULL, NULL};
    size_t n[3] = {0, 0, 0};
    uint64_t seed = rng;
    for (int isa = 0; isa < 3; isa++) {
        if (!tq_cpu_attention_force_isa(isa)) {
            printf("ok cpu: skip the attention at ISA level %d: this CPU lacks it\n", isa);
            continue;
        }
        rng = seed;
        att_run(&tc, &bits[isa], &n[isa]);
    }
    tq_cpu_attention_force_isa(-1);
    if (bits[1] && bits[2])
        CHECK(n[1] == n[2] && !memcmp(bits[1], bits[2], n[1] * 4),
              "cpu: attention: AVX2 and AVX-512 bits differ");
    for (int i = 0; i < 3; i++)
        free(bits[i]);
    printf("ok cpu: attention at every ISA level\n");
}

/* The attention's bf16 products (tq_attention_args.bf16, AVX512-BF16): the
 * reference within bf16's tolerance over odd widths (the packing's tails),
 * masks and several key tiles; not the f32 bits (the way was taken); the
 * same bits with 1 and 2 threads. */
static void test_attention_cpu_bf16(void)
{
    if (!tq_cpu_att_bf16_use()) {
        printf("ok cpu: skip the attention's bf16 products: this CPU lacks AVX512-BF16\n");
        return;
    }
    static const int64_t lens2[2] = {77, 100}, lens3b[3] = {40, 64, 100},
                         lens3w[3] = {65, 256, 300};
    const att_case cases[] = {
        {"bf16: passages, 12 heads of 32", 2, 130, 130, 12, 32, 32, 1, 0, 0, 0, 0, 0, lens2, -1, 1, 0, 0},
        {"bf16: odd widths", 1, 100, 150, 3, 5, 7, 0, 0, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        {"bf16: causal (f32 products)", 1, 100, 150, 2, 8, 8, 0, 1, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        {"bf16: d_head 33 and 40, groups", 2, 100, 100, 2, 33, 40, 1, 0, 1, 0, 0, 0.5f, lens2, -1,
         1, 0, 0},
        {"bf16: d_head 64, 200 keys", 1, 200, 200, 4, 64, 64, 0, 0, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        {"bf16: d_v 40, 77 and 100 keys", 2, 100, 100, 2, 32, 40, 1, 0, 0, 0, 0, 0, lens2, -1, 1, 0, 0},
        /* items of <= 64 keys in a batch of 100 (the f32 rows way beside
         * bf16 tiles) */
        {"bf16: 40, 64 and 100 keys", 3, 100, 100, 2, 32, 32, 1, 0, 0, 0, 0, 0, lens3b, -1, 1, 0, 0},
        /* the wide way (65.. 256 keys, attention_wide.c) beside tiles */
        {"bf16: 65, 256 and 300 keys", 3, 300, 300, 4, 32, 32, 1, 0, 0, 0, 0, 0, lens3w, -1, 1, 0, 0},
        {"bf16: d_head 33, d_v 40, 255 keys", 1, 60, 255, 2, 33, 40, 1, 0, 0, 0, 0, 0, NULL, -1, 1,
         0, 0},
        {"bf16: 257 keys (tiles)", 1, 60, 257, 2, 32, 32, 1, 0, 0, 0, 0, 0, NULL, -1, 1, 0, 0},
        /* MPNet's score bias: the wide way, tiles and rows */
        {"bf16: bias, 65, 256 and 300 keys", 3, 300, 300, 4, 32, 32, 1, 0, 0, 0, 0, 0, lens3w, -1,
         1, 0, 1},
        {"bf16: bias, 40, 64 and 100 keys", 3, 100, 100, 2, 32, 32, 1, 0, 0, 0, 0, 0, lens3b, -1, 1,
         0, 1},
    };
    att_bf16 = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        att_run(&cases[i], NULL, NULL);
    float *f32, *one, *two;
    size_t n0, n1, n2;
    uint64_t seed = rng;
    att_bf16 = 0;
    att_run(&cases[0], &f32, &n0);
    att_bf16 = 1;
    rng = seed;
    tq_threads_set(1);
    att_run(&cases[0], &one, &n1);
    rng = seed;
    tq_threads_set(2);
    att_run(&cases[0], &two, &n2);
    tq_threads_set(0);
    att_bf16 = 0;
    CHECK(n0 == n1 && memcmp(f32, one, n0 * 4) != 0,
          "cpu: attention: bf16 products allowed, yet the f32 bits came out");
    CHECK(n1 == n2 && !memcmp(one, two, n1 * 4),
          "cpu: attention: bf16 products differ between 1 and 2 threads");
    free(f32), free(one), free(two);
    /* with a bias too, the bf16 way is taken (it was not, before) */
    const att_case *bc = &cases[sizeof cases / sizeof cases[0] - 2];
    seed = rng;
    att_run(bc, &f32, &n0);
    att_bf16 = 1;
    rng = seed;
    att_run(bc, &one, &n1);
    att_bf16 = 0;
    CHECK(n0 == n1 && memcmp(f32, one, n0 * 4) != 0,
          "cpu: attention with a bias: bf16 products allowed, yet the f32 bits came out");
    free(f32), free(one);
    printf("ok cpu: attention's bf16 products\n");
}

/* The CPU's rows way for items whose keys fit a tile (AVX-512): the cases
 * above again without it, against the same reference; and an item's bits
 * are its own, the same alone (the rows way's units) as beside a longer item
 * in a padded batch (the tiled units), as tq-embed's batches need. */
static void alone_and_padded(int64_t N, int64_t L);
static void test_attention_cpu_rows(void)
{
    test_attention_cpu_isa();
    test_attention_cpu_bf16();
    if (!tq_cpu_att_rows_use(tq_cpu_gemm_kernel()->nr)) {
        printf("ok cpu: skip the attention's rows way: this CPU lacks AVX-512\n");
        return;
    }
    tq_cpu_att_rows_disable(1);
    test_attention();
    tq_cpu_att_rows_disable(0);
    /* the rows way (20 keys) beside tiles; with bf16 products allowed also
     * the wide way (130) beside tiles (300) */
    alone_and_padded(20, 100);
    alone_and_padded(130, 300);
    printf("ok cpu: attention's rows way and tiles agree; an item's bits are its own\n");
}

/* Item 0 of N keys alone and padded to L beside an item of L keys: the
 * same bits, f32 products and bf16 allowed. */
static void alone_and_padded(int64_t N, int64_t L)
{
    enum { H = 4, D = 16 };
    int64_t w = H * D, n2 = 2 * L * w, d2[3] = {2, L, w}, d1[3] = {1, N, w}, lens[2] = {N, L};
    float *q = malloc(n2 * 4), *k = malloc(n2 * 4), *v = malloc(n2 * 4), *o2 = malloc(n2 * 4),
          *o1 = malloc(N * w * 4);
    fill(q, n2, -2, 2);
    fill(k, n2, -2, 2);
    fill(v, n2, -1, 1);
    int64_t two = 2;
    gt *gq = gt_new(TQ_DTYPE_F32, 3, d2, q), *gk = gt_new(TQ_DTYPE_F32, 3, d2, k),
       *gv = gt_new(TQ_DTYPE_F32, 3, d2, v), *go = gt_new(TQ_DTYPE_F32, 3, d2, NULL),
       *gl = gt_new(TQ_DTYPE_I64, 1, &two, lens);
    /* item 0's first N rows alone: q, k, v of [1, N, w] are the same floats */
    gt *aq = gt_new(TQ_DTYPE_F32, 3, d1, q), *ak = gt_new(TQ_DTYPE_F32, 3, d1, k),
       *av = gt_new(TQ_DTYPE_F32, 3, d1, v), *ao = gt_new(TQ_DTYPE_F32, 3, d1, NULL);
    /* with bf16 products allowed too: the longer item's tiles are bf16's,
     * the short item keeps its way (the rows way's f32, or the wide way) */
    for (int bf = 0; bf < 2; bf++) {
        tq_attention_args padded = {H, 0, 0, gl->t, NULL, NULL, NULL, NULL, bf, NULL, NULL},
                          alone = {H, 0, 0, NULL, NULL, NULL, NULL, NULL, bf, NULL, NULL};
        CHECK(tq_op_attention(gq->t, gk->t, gv->t, &padded, go->t) == TQ_OK &&
                  tq_op_attention(aq->t, ak->t, av->t, &alone, ao->t) == TQ_OK,
              "cpu: attention alone and padded: %s", tq_errmsg());
        gt_get(go, o2, "attention padded");
        gt_get(ao, o1, "attention alone");
        CHECK(!memcmp(o1, o2, (size_t)(N * w) * 4),
              "cpu: attention%s: an item of %lld keys alone and padded to %lld differ",
              bf ? " (bf16 products allowed)" : "", (long long)N, (long long)L);
    }
    gt *all[] = {gq, gk, gv, go, gl, aq, ak, av, ao};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        gt_free(all[i]);
    free(q), free(k), free(v), free(o2), free(o1);
}

/* ------------------------------------------- same bits with 1 and 2 threads */

typedef void (*det_fn)(void *out);

static const float *det_x;
static int64_t det_rows, det_d;

/* 400 x 300 x 517: a shape where OpenBLAS's own threading gives different
 * bits on 1 and 2 threads (k > 512 changes how it blocks), so this catches a
 * split that follows the thread count. */
static void det_matmul(void *out)
{
    int64_t m = 400, n = 300, k = 517, ad[2] = {m, k}, bd[2] = {n, k}, cd[2] = {m, n};
    gt *ga = gt_new(TQ_DTYPE_F32, 2, ad, det_x);
    gt *gb = gt_new(TQ_DTYPE_F32, 2, bd, det_x + m * k);
    gt *det_out = gt_new(TQ_DTYPE_F32, 2, cd, NULL);
    CHECK(tq_op_matmul(ga->t, 0, gb->t, 1, 1.0f, 0.0f, det_out->t) == TQ_OK, "%s: %s", dev_name,
          tq_errmsg());
    gt_get(det_out, out, "matmul (threads)");
    gt_free(ga);
    gt_free(gb);
    gt_free(det_out);
}
static void det_softmax(void *out)
{
    int64_t d[2] = {det_rows, det_d};
    gt *gx = gt_new(TQ_DTYPE_F32, 2, d, det_x);
    gt *gy = gt_new(TQ_DTYPE_F32, 2, d, NULL);
    CHECK(tq_op_softmax(gx->t, gy->t) == TQ_OK, "%s: %s", dev_name, tq_errmsg());
    gt_get(gy, out, "softmax (threads)");
    gt_free(gx);
    gt_free(gy);
}
static void det_layernorm(void *out)
{
    int64_t d[2] = {det_rows, det_d};
    gt *gx = gt_new(TQ_DTYPE_F32, 2, d, det_x);
    gt *gy = gt_new(TQ_DTYPE_F32, 2, d, NULL);
    CHECK(tq_op_layernorm(gx->t, NULL, NULL, 1e-5f, gy->t) == TQ_OK, "%s: %s", dev_name,
          tq_errmsg());
    gt_get(gy, out, "layernorm (threads)");
    gt_free(gx);
    gt_free(gy);
}
static void det_topk(void *out)
{
    int64_t d[2] = {det_rows, det_d}, kd[2] = {det_rows, 17};
    gt *gx = gt_new(TQ_DTYPE_F32, 2, d, det_x);
    gt *gv = gt_new(TQ_DTYPE_F32, 2, kd, NULL);
    gt *gi = gt_new(TQ_DTYPE_I64, 2, kd, NULL);
    CHECK(tq_op_topk(gx->t, 17, gv->t, gi->t) == TQ_OK, "%s: %s", dev_name, tq_errmsg());
    gt_get(gv, out, "topk (threads)");
    gt_get(gi, (char *)out + det_rows * 17 * 4, "topk (threads)");
    gt_free(gx);
    gt_free(gv);
    gt_free(gi);
}

static void test_threads(const char *engine)
{
    det_rows = 500;
    det_d = 301;
    size_t n = (size_t)(det_rows * det_d);
    size_t n_x = (400 + 300) * 517; /* det_matmul's A and B, more than n */
    float *x = malloc(n_x * 4);
    for (size_t i = 0; i < n_x; i++) /* ties for topk, spread for the rest */
        x[i] = (float)(rnd() % 64) * 0.25f - 8.0f + (i % 3 ? randf(-1, 1) : 0.0f);
    det_x = x;
    struct {
        const char *name;
        det_fn fn;
    } ops[] = {{"matmul", det_matmul}, {"softmax", det_softmax}, {"layernorm", det_layernorm},
               {"topk", det_topk}};
    size_t out_bytes = n * 12;
    void *one = malloc(out_bytes), *two = malloc(out_bytes);
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        memset(one, 0, out_bytes);
        memset(two, 0, out_bytes);
        tq_threads_set(1);
        ops[o].fn(one);
        tq_threads_set(2);
        ops[o].fn(two);
        tq_threads_set(0);
        CHECK(memcmp(one, two, out_bytes) == 0, "%s: %s%s%s differs between 1 and 2 threads",
              dev_name, ops[o].name, engine ? " " : "", engine ? engine : "");
        if (engine) /* only matmul depends on the engine */
            break;
    }
    free(one);
    free(two);
    free(x);
}

/* ------------------------------------------------------------ CPU engines */

/* The built-in sgemm called directly, on what the op never hands it: more
 * columns than one panel (NC = 1024), leading dims wider than the matrix. */
static void test_builtin_direct(const char *kernel)
{
    int m = 13, n = 1100, k = 450, /* crosses every kernel's slice of k */ lda = k + 5, ldb = n + 3, ldc = n + 7;
    float *a = malloc((size_t)m * lda * 4), *b = malloc((size_t)k * ldb * 4),
          *c = malloc((size_t)m * ldc * 4),
          *got = malloc((size_t)m * n * 4);
    double *ref = malloc((size_t)m * n * 8);
    fill(a, (int64_t)m * lda, -1, 1);
    fill(b, (int64_t)k * ldb, -1, 1);
    fill(c, (int64_t)m * ldc, -1, 1);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)a[i * lda + p] * b[p * ldb + j];
            ref[i * n + j] = 0.75 * s - 2.0 * c[i * ldc + j];
        }
    float *c_copy = malloc((size_t)m * ldc * 4);
    memcpy(c_copy, c, (size_t)m * ldc * 4);
    tq_cpu_sgemm_builtin(0, 0, m, n, k, 0.75f, a, lda, b, ldb, -2.0f, c, ldc);
    int64_t gaps = 0;
    for (int i = 0; i < m; i++) {
        memcpy(got + i * n, c + i * ldc, (size_t)n * 4);
        gaps += memcmp(c + i * ldc + n, c_copy + i * ldc + n, 7 * 4) != 0;
    }
    char what[64];
    snprintf(what, sizeof what, "built-in sgemm (%s), n > NC, wide ld", kernel);
    CHECK_NMSE(got, ref, (int64_t)m * n, TOL_MM, what);
    CHECK(gaps == 0, "built-in sgemm (%s) wrote into the gaps between rows of C", kernel);
    free(a);
    free(b);
    free(c);
    free(got);
    free(ref);
    free(c_copy);
}

/* The CPU's GELU claims more than the NMSE of the suite: each element within
 * 4 units of 2^-23 relative of the exact value (0.5 x erfc(-x / sqrt 2) in
 * double; gelu.c's f32 way measured at most 2.73 over every f32 of
 * [-16, 16]; its double way within 1), also in the negative tail where the
 * result is tiny, down to the smallest subnormals. */
static void test_gelu_ulp(void)
{
    int64_t n = 200001;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4), *y8 = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(-15.0 + 30.0 * (double)i / (double)(n - 1));
    gt *gx = gt_new(TQ_DTYPE_F32, 1, &n, x), *gy = gt_new(TQ_DTYPE_F32, 1, &n, NULL);
    /* every way this CPU has (the baseline's double one, AVX2's 8 lanes,
     * AVX-512's 16), the CPU's own last; the f32 ways in 8 and 16 lanes run
     * the same operations: the same bytes */
    static const char *ways[] = {"baseline", "AVX2", "AVX-512"};
    for (int isa = 0; isa <= 3; isa++) {
        if (isa < 3 && !tq_cpu_gelu_force(isa))
            continue;
        if (isa == 3)
            tq_cpu_gelu_force(-1);
        CHECK(tq_op_gelu(gx->t, gy->t) == TQ_OK, "gelu: %s", tq_errmsg());
        gt_get(gy, y, "gelu ulp");
        int64_t bad = 0, at = 0;
        for (int64_t i = 0; i < n; i++) {
            double ref = 0.5 * x[i] * erfc(-x[i] / sqrt(2.0));
            if (!(fabs(y[i] - ref) <= 0x1p-21 * fabs(ref) + 0x1p-149) && !bad++)
                at = i;
        }
        CHECK(bad == 0, "cpu gelu %s: %lld values off by more than 4 units of 2^-23, first gelu(%.9g) = %.9g, exact %.9g",
              isa < 3 ? ways[isa] : "default", (long long)bad, x[at], y[at],
              0.5 * x[at] * erfc(-x[at] / sqrt(2.0)));
        if (isa == 1)
            memcpy(y8, y, (size_t)n * 4);
        if (isa == 2)
            CHECK(!memcmp(y, y8, (size_t)n * 4), "cpu gelu: AVX-512's 16 lanes differ from AVX2's 8");
    }
    /* which way an element takes is its value's (x < -12.5 here takes the
     * double way): the same bytes on one thread and starting 3 elements on,
     * where every group of 8 holds other neighbours */
    int64_t n3 = n - 3;
    float *y3 = malloc((size_t)n3 * 4);
    int threads = tq_threads_get();
    tq_threads_set(1);
    gt *gx3 = gt_new(TQ_DTYPE_F32, 1, &n3, x + 3), *gy3 = gt_new(TQ_DTYPE_F32, 1, &n3, NULL);
    CHECK(tq_op_gelu(gx3->t, gy3->t) == TQ_OK, "gelu: %s", tq_errmsg());
    gt_get(gy3, y3, "gelu offset");
    tq_threads_set(threads);
    CHECK(!memcmp(y3, y + 3, (size_t)n3 * 4), "cpu gelu: other bytes on one thread from element 3");
    gt_free(gx3);
    gt_free(gy3);
    free(y3);
    gt_free(gx);
    gt_free(gy);
    free(x);
    free(y);
    free(y8);
}

/* v rounded to nearest even at bf16's 8 significant bits, in double (the
 * test's own rounding: no f32 step between), subnormals at 2^-133 apart */
static double bf16_rne(double v)
{
    if (!isfinite(v) || v == 0)
        return v;
    int e;
    frexp(v, &e);
    if (e < -125)
        e = -125; /* below 2^-126: bf16's subnormal spacing */
    double r = ldexp(nearbyint(ldexp(v, 8 - e)), e - 8);
    return fabs(r) > 0x1.fep127 ? copysign(INFINITY, r) : r;
}

/* low_only's GELU (lib/cpu/gelu_bf16.c) against GELU in double: each bf16
 * must be the rounding to nearest even of a value within what tq.h allows,
 * 1.6e-7 |x| + 1e-7 |GELU(x)| of exact (rounding is monotonic: between the
 * roundings of the interval's ends), over a million values of [-8, 8], the
 * pieces' ends +-5.5 and the specials: NaN stays NaN, +inf, -inf -> -0,
 * subnormal results to zero or their rounding. Rows of 37 at a stride of 40:
 * the tail lanes, and nothing written past a row. */
static void test_gelu_bf16(void)
{
    if (!tq_cpu_gelu_bf16_use()) {
        printf("ok cpu: skip low_only's bf16 GELU: this CPU lacks AVX512-BF16\n");
        return;
    }
    static const float special[] = {0.0f, -0.0f, 5.5f, -5.5f, 0x1.5ffffep2f, -0x1.5ffffep2f,
                                    0x1.600002p2f, -0x1.600002p2f, 1e-40f, -1e-40f, 1e-30f,
                                    -1e-30f, 100.0f, -100.0f, 3e38f, -3e38f, 0.75f, -0.75f};
    enum { W = 37, LD = 40 };
    int64_t grid = 1000000, ns = (int64_t)(sizeof special / sizeof *special), n = grid + ns + 3;
    int rows = (int)((n + W - 1) / W);
    float *x = calloc((size_t)rows * LD, 4);
    uint16_t *y = malloc((size_t)rows * LD * 2);
    for (int64_t i = 0; i < rows * (int64_t)LD; i++)
        y[i] = 0x7fc1;
    float *xs = malloc((size_t)n * 4);
    for (int64_t i = 0; i < grid; i++)
        xs[i] = (float)(-8.0 + 16.0 * (double)i / (double)(grid - 1));
    memcpy(xs + grid, special, sizeof special);
    xs[n - 3] = NAN, xs[n - 2] = INFINITY, xs[n - 1] = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        x[i / W * LD + i % W] = xs[i];
    tq_cpu_gelu_bf16_rows(x, LD, rows, W, y, LD);
    int64_t bad = 0, at = 0, past = 0;
    for (int64_t i = 0; i < n; i++) {
        double xi = xs[i], v = tq_bf16_to_f32(y[i / W * LD + i % W]), ok;
        if (isnan(xi))
            ok = isnan(v);
        else if (isinf(xi))
            ok = xi > 0 ? v == INFINITY : v == 0;
        else {
            double g = 0.5 * xi * erfc(-xi / sqrt(2.0)), eps = 1.6e-7 * fabs(xi) + 1e-7 * fabs(g);
            ok = (bf16_rne(g - eps) <= v && v <= bf16_rne(g + eps)) ||
                 (v == 0 && fabs(g) < 0x1p-126 + eps);
        }
        if (!ok && !bad++)
            at = i;
    }
    for (int r = 0; r < rows; r++)
        for (int c = W; c < LD; c++)
            past += y[(int64_t)r * LD + c] != 0x7fc1;
    CHECK(bad == 0, "cpu: low_only's bf16 GELU: %lld values wrong, first gelu(%.9g) = %.9g, exact %.9g",
          (long long)bad, xs[at], tq_bf16_to_f32(y[at / W * LD + at % W]),
          0.5 * xs[at] * erfc(-xs[at] / sqrt(2.0)));
    CHECK(past == 0, "cpu: low_only's bf16 GELU wrote %lld values past its rows", (long long)past);
    free(x), free(y), free(xs);
    printf("ok cpu: low_only's bf16 GELU within its bound\n");
}

/* bf16 x bf16 on AVX512-BF16 (lib/cpu/gemm_bf16.c): every test_matmul ran
 * it already where the CPU has it (A^T copied into rows first); here shapes that cross
 * its 12-row and 32-column tiles, its 96-row blocks and an odd k's half pair,
 * with B constant (packed once) and not, and then the widening path that
 * other CPUs take. The reference sums the rounded values in float64: the
 * products of two bf16 are exact in f32, so TOL_MM holds as for f32. */
static void test_matmul_bf16_kernel(void)
{
    const tq_dtype BH = TQ_DTYPE_BF16;
    if (!tq_cpu_gemm_bf16_supported()) {
        CHECK(!tq_device_native_product(NULL, BH), "cpu: bf16 products said native without AVX512-BF16");
        printf("ok cpu: skip the AVX512-BF16 product: this CPU lacks it\n");
        return;
    }
    CHECK(tq_device_native_product(NULL, BH) && !tq_device_native_product(NULL, TQ_DTYPE_F16),
          "cpu: AVX512-BF16: bf16 products not said native (or f16 said so)");
    /* {48, 100, 1536}: AMX's A in place, a last group of 16 rows, k in
     * passes; {13, 64, 16384}: a strip per panel of B (a MiB), two panels */
    static const int64_t shapes[][3] = {{1, 1, 1},       {13, 33, 3},    {25, 31, 2},
                                        {97, 65, 384},   {200, 384, 1537}, {12, 32, 64},
                                        {47, 40, 33},    {48, 100, 1536}, {13, 64, 16384}};
    /* AMX tiles first where the CPU has them (their 32-row tiles and
     * 32-pair steps of k crossed too), then the AVX512-BF16 kernel alone */
    int amx = tq_cpu_amx_supported(TQ_AMX_BF16);
    if (!amx)
        printf("ok cpu: skip the AMX bf16 tiles: this CPU or kernel has none\n");
    for (int way = !amx; way < 2; way++) {
        const char *name = way ? "AVX512-BF16" : "AMX bf16";
        tq_cpu_amx_disable(way);
        for (int c = 0; c < 2; c++) {
            b_constant = c;
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                for (int t = 0; t < 4; t++) { /* A^T too: tq-train's weight gradients */
                    const int64_t *d = shapes[i];
                    int ta = t >> 1, tb = t & 1;
                    one_matmul_dt(name, 0, 1, 1, d[0], d[1], d[2], ta, tb, 1.0f, 0.0f, BH, BH);
                    one_matmul_dt(name, 0, 1, 1, d[0], d[1], d[2], ta, tb, -0.5f, 1.5f, BH, BH);
                }
            one_matmul_dt(name, 3, 1, 0, 40, 70, 33, 0, 1, 2.0f, 0.0f, BH, BH);
        }
    }
    tq_cpu_amx_disable(0);
    b_constant = 0;
    tq_cpu_gemm_bf16_disable(1);
    CHECK(!tq_device_native_product(NULL, BH), "cpu: bf16 products said native when disabled");
    test_matmul_f16("bf16 widened");
    tq_cpu_gemm_bf16_disable(0);
}

/* layernorm's AVX-512 loop and its baseline loop give the same bits (both
 * in double, the same steps in the same order), with and without gamma and
 * beta, rows of whole groups of 8 and with a tail, a large mean. */
static void test_layernorm_cpu_ways(void)
{
    static const int64_t ds[] = {1, 7, 8, 384, 1001};
    for (size_t t = 0; t < sizeof ds / sizeof *ds; t++) {
        int64_t d = ds[t], dd[2] = {9, d};
        float *x = malloc((size_t)(9 * d) * 4), *g = malloc((size_t)d * 4),
              *b = malloc((size_t)d * 4), *y[2];
        fill(x, 9 * d, 1000, 1003);
        fill(g, d, -2, 2);
        fill(b, d, -1, 1);
        gt *gx = gt_new(TQ_DTYPE_F32, 2, dd, x), *gy = gt_new(TQ_DTYPE_F32, 2, dd, NULL);
        for (int gb = 0; gb < 2; gb++) {
            ln_arg a = {gb ? g : NULL, gb ? b : NULL, d, 1e-5f};
            for (int w = 0; w < 2; w++) {
                tq_cpu_layernorm_force_portable(w);
                y[w] = malloc((size_t)(9 * d) * 4);
                CHECK(op_layernorm(gx->t, gy->t, &a) == TQ_OK, "cpu: layernorm ways: %s",
                      tq_errmsg());
                gt_get(gy, y[w], "layernorm ways");
            }
            tq_cpu_layernorm_force_portable(0);
            CHECK(!memcmp(y[0], y[1], (size_t)(9 * d) * 4),
                  "cpu: layernorm d %lld%s: the vector and baseline loops' bits differ",
                  (long long)d, gb ? " gamma beta" : "");
            free(y[0]), free(y[1]);
        }
        gt_free(gx), gt_free(gy);
        free(x), free(g), free(b);
    }
    printf("ok cpu: layernorm's ways agree bit for bit\n");
}

static void test_cpu_engines(void)
{
    test_gelu_ulp();
    test_simscore_isa();
    char desc[256];
    tq_cpu_blas_describe(desc, sizeof desc);
    printf("ok cpu: %s\n", desc);
    /* OpenBLAS when it loaded and passed its check */
    if (tq_cpu_blas_sgemm()) {
        test_matmul("OpenBLAS");
        test_threads("OpenBLAS");
    } else {
        printf("ok cpu: OpenBLAS not in use: %s\n", desc);
    }
    tq_cpu_blas_force_builtin(1);
    static const char *kernels[] = {"avx512", "avx2", "portable"};
    for (size_t i = 0; i < 3; i++) {
        if (!tq_cpu_gemm_kernel_force(kernels[i])) {
            printf("ok cpu: skip the %s sgemm kernel: this CPU lacks it\n", kernels[i]);
            continue;
        }
        char engine[32];
        snprintf(engine, sizeof engine, "built-in %s", kernels[i]);
        test_matmul(engine);
        test_matmul_constant(engine);
        test_matmul_constant_bits(kernels[i]);
        test_threads(engine);
        test_builtin_direct(kernels[i]);
        snprintf(engine, sizeof engine, "%s kernel", kernels[i]);
        test_rowprod(engine);
    }
    tq_cpu_gemm_kernel_force(NULL);
    test_matmul_bf16_kernel();
    test_gelu_bf16();
    test_int8_cpu_ways();
    test_layernorm_cpu_ways();
    test_attention_cpu_rows();
    /* simtopk's portable stretch check against the references too */
    tq_cpu_simtopk_force_portable(1);
    test_simtopk();
    tq_cpu_simtopk_force_portable(0);

    /* OpenBLAS and the built-in sgemm agree on one product (both were held to
     * the float64 reference above; this ties them to each other too) */
    if (tq_cpu_blas_sgemm()) {
        int64_t ad[2] = {150, 90}, bd[2] = {90, 110}, cd[2] = {150, 110};
        float *a = malloc(150 * 90 * 4), *b = malloc(90 * 110 * 4);
        float *c1 = malloc(150 * 110 * 4), *c2 = malloc(150 * 110 * 4);
        double *r = malloc(150 * 110 * 8);
        fill(a, 150 * 90, -1, 1);
        fill(b, 90 * 110, -1, 1);
        gt *ga = gt_new(TQ_DTYPE_F32, 2, ad, a), *gb = gt_new(TQ_DTYPE_F32, 2, bd, b);
        gt *gc = gt_new(TQ_DTYPE_F32, 2, cd, NULL);
        tq_op_matmul(ga->t, 0, gb->t, 0, 1.0f, 0.0f, gc->t);
        gt_get(gc, c1, "matmul built-in");
        tq_cpu_blas_force_builtin(0);
        tq_op_matmul(ga->t, 0, gb->t, 0, 1.0f, 0.0f, gc->t);
        gt_get(gc, c2, "matmul OpenBLAS");
        for (int i = 0; i < 150 * 110; i++)
            r[i] = c1[i];
        CHECK_NMSE(c2, r, 150 * 110, 1e-12, "OpenBLAS against the built-in sgemm");
        gt_free(ga);
        gt_free(gb);
        gt_free(gc);
        free(a);
        free(b);
        free(c1);
        free(c2);
        free(r);
    }
    tq_cpu_blas_force_builtin(0);
}

/* ------------------------------------------------------------ plain variants */

/* A GPU backend picks shader variants by what the device can do (subgroup
 * operations, 16-bit types, workgroup size); the test machines can do it all,
 * so the plain variants would go untested. Here the ops that have variants
 * run again on the same device with only the plain ones. */
static void test_plain_variants(const char *spec, uint64_t seed)
{
    tq_device_force_plain(1);
    if (tq_device_open(spec, &dev) != TQ_OK) {
        tq_device_force_plain(0);
        CHECK(0, "%s: cannot open again with plain variants: %s", spec, tq_errmsg());
        return;
    }
    dev_name = tq_device_name(dev);
    printf("ok device %s\n", tq_device_describe(dev));
    rng = seed;
    test_matmul("plain variants");
    test_rowprod("plain variants");
    test_rows();
    test_elementwise();
    test_topk();
    test_simtopk(); /* its proof of candidates leans on rownorm's bound */
    test_attention();
    tq_device_close(dev);
    tq_device_force_plain(0);
}

/* ------------------------------------------------------------ host path */

/* Ops a device has no kernel for run through one host path in the op layer
 * (lib/op/hostpath.c). Here every op of a device takes it, and must give what
 * the references want, and the device must say which ops went that way. */
static void test_codetopk(void); /* below, with the other codetopk cases */
static void test_codescreen(void);

static void test_host_path(const char *spec, uint64_t seed)
{
    tq_device_force_host(1);
    if (tq_device_open(spec, &dev) != TQ_OK) {
        tq_device_force_host(0);
        CHECK(0, "%s: cannot open again for the host path: %s", spec, tq_errmsg());
        return;
    }
    dev_name = tq_device_name(dev);
    printf("ok device %s (every op through the host path)\n", tq_device_describe(dev));
    rng = seed;
    test_matmul("host path");
    test_rows();
    test_elementwise();
    test_topk();
    test_gather();
    test_convert();
    test_simtopk();
    test_rowprod("host path");
    test_attention();
    test_codetopk();
    test_codescreen();
    const char *ops = tq_device_host_ops(dev);
    static const char *want[] = {"matmul", "rownorm", "softmax", "topk", "gather", "convert",
                                 "simtopk", "rowprod", "attention", "codescreen"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(ops, want[i]), "%s: host path list \"%s\" lacks %s", spec, ops, want[i]);
    tq_device_close(dev);
    tq_device_force_host(0);
}

/* ------------------------------------------------------------ codetopk */

/* The reference score of int8 codes, exact then rounded once: with a = ma
 * 2^ea and b = mb 2^eb (24-bit integers), dot a b = (dot ma mb) 2^(ea+eb),
 * an integer of at most 31 + 48 bits, converted to f32 by the compiler's
 * correctly rounded __int128 conversion, then scaled by a power of two. */
static float ref_code_score(int64_t dot, float a, float b)
{
    int ea, eb;
    double fa = frexp(a, &ea), fb = frexp(b, &eb);
    __int128 m = (__int128)dot * (__int128)(int64_t)ldexp(fa, 24) * (__int128)(int64_t)ldexp(fb, 24);
    return ldexpf((float)m, ea - 24 + eb - 24);
}

/* The scores of one query row a (scale qs) with every row of x: the exact
 * integer sum, then the score rounded once, or minus the differing bits. */
static void ref_code_row(int i8, const unsigned char *a, float qs, const unsigned char *x,
                         const float *xs, int64_t ndb, int64_t d, float *row)
{
    size_t rb = i8 ? (size_t)d : (size_t)(d + 7) / 8;
    for (int64_t j = 0; j < ndb; j++) {
        const unsigned char *b = x + (size_t)j * rb;
        int64_t s = 0;
        for (int64_t p = 0; p < d; p++)
            s += i8 ? (int64_t)(int8_t)a[p] * (int8_t)b[p]
                    : ((a[p >> 3] ^ b[p >> 3]) >> (7 - (p & 7))) & 1;
        row[j] = i8 ? ref_code_score(s, qs, xs[j]) : (float)-s;
    }
}

/* Brute force over every pair, ranked as simtopk's reference ranks. */
static void ref_codetopk(int i8, const unsigned char *q, const float *qs, const unsigned char *x,
                         const float *xs, int64_t nq, int64_t ndb, int64_t d, int64_t k,
                         float *rv, int64_t *ri)
{
    size_t rb = i8 ? (size_t)d : (size_t)(d + 7) / 8;
    float *row = malloc((size_t)(ndb + 1) * 4);
    int64_t *order = malloc((size_t)(ndb + 1) * 8);
    for (int64_t i = 0; i < nq; i++) {
        ref_code_row(i8, q + (size_t)i * rb, i8 ? qs[i] : 0, x, xs, ndb, d, row);
        for (int64_t j = 0; j < ndb; j++)
            order[j] = j;
        cmp_row = row;
        qsort(order, (size_t)ndb, sizeof *order, rank_cmp);
        for (int64_t r = 0; r < k; r++) {
            rv[i * k + r] = r < ndb ? row[order[r]] : -INFINITY;
            ri[i * k + r] = r < ndb ? order[r] : -1;
        }
    }
    free(row);
    free(order);
}

static void run_codetopk(int i8, const unsigned char *q, const float *qs, const unsigned char *x,
                         const float *xs, int64_t nq, int64_t d, int64_t k, const int64_t *cuts,
                         int ncuts, float *v, int64_t *ix, const char *what)
{
    tq_dtype dt = i8 ? TQ_DTYPE_I8 : TQ_DTYPE_BIT;
    size_t rb = i8 ? (size_t)d : (size_t)(d + 7) / 8;
    int64_t qd[2] = {nq, d}, kd[2] = {nq, k};
    for (int64_t i = 0; i < nq * k; i++)
        v[i] = -INFINITY, ix[i] = -1;
    gt *gq = gt_new(dt, 2, qd, q), *gqs = i8 ? gt_new(TQ_DTYPE_F32, 1, qd, qs) : NULL;
    gt *gv = gt_new(TQ_DTYPE_F32, 2, kd, v), *gi = gt_new(TQ_DTYPE_I64, 2, kd, ix);
    int64_t at = 0;
    for (int c = 0; c < ncuts; c++) {
        int64_t xd[2] = {cuts[c], d};
        gt *gx = gt_new(dt, 2, xd, x + (size_t)at * rb);
        gt *gxs = i8 ? gt_new(TQ_DTYPE_F32, 1, xd, xs + at) : NULL;
        tq_status st = tq_op_codetopk(gq->t, gqs ? gqs->t : NULL, gx->t, gxs ? gxs->t : NULL,
                                      i8 ? TQ_METRIC_DOT : TQ_METRIC_HAMMING, at, gv->t, gi->t);
        CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
        gt_unchanged(gx, x + (size_t)at * rb, what);
        gt_free(gx), gt_free(gxs);
        at += cuts[c];
    }
    gt_get(gv, v, what);
    gt_get(gi, ix, what);
    gt_unchanged(gq, q, what);
    gt_free(gq), gt_free(gqs), gt_free(gv), gt_free(gi);
}

/* Codes and scales of queries and database rows for a case of kind:
 * 0: random codes and scales; 1: codes of three values and one scale (ties
 * everywhere); 2: -128 and 127 only (the extremes of the products); 3:
 * tq-quantize's codes (no -128) but for one database row, so that AVX2's
 * strip kernel takes some blocks and not others; 4: queries of -128 and 127,
 * rows of tq-quantize's codes. */
static void make_codes(int i8, int kind, unsigned char *q, float *qs, int64_t nq,
                       unsigned char *x, float *xs, int64_t ndb, int64_t d)
{
    size_t rb = i8 ? (size_t)d : (size_t)(d + 7) / 8;
    for (int side = 0; side < 2; side++) {
        unsigned char *c = side ? x : q;
        float *sc = side ? xs : qs;
        int64_t n = side ? ndb : nq;
        for (int64_t i = 0; i < n; i++) {
            sc[i] = kind == 1 ? 0.0078125f : randf(1e-4, 1e-2);
            for (size_t j = 0; j < rb; j++)
                c[(size_t)i * rb + j] = kind == 0 ? (unsigned char)rnd()
                                      : kind == 1 ? (unsigned char)(rnd() % 3 - 1)
                                      : kind == 2 || (kind == 4 && !side) ? (rnd() & 1 ? 0x80 : 0x7f)
                                                  : (unsigned char)(rnd() % 255 - 127);
            if (kind == 3 && side && i == n / 2)
                c[(size_t)i * rb] = 0x80;
            /* bit rows end with zero bits, as the format says */
            if (!i8 && d % 8)
                c[(size_t)i * rb + rb - 1] &= (unsigned char)(0xff00u >> (d % 8));
        }
    }
}

/* codetopk against the reference, on the codes of make_codes. */
static void codetopk_case(int i8, int64_t nq, int64_t ndb, int64_t d, int64_t k, int kind,
                          const int64_t *cuts, int ncuts)
{
    size_t rb = i8 ? (size_t)d : (size_t)(d + 7) / 8;
    unsigned char *q = calloc((size_t)nq * rb + 1, 1), *x = calloc((size_t)ndb * rb + 1, 1);
    float *qs = malloc((size_t)(nq + 1) * 4), *xs = malloc((size_t)(ndb + 1) * 4);
    float *v = malloc((size_t)(nq * k + 1) * 4), *rv = malloc((size_t)(nq * k + 1) * 4);
    int64_t *ix = malloc((size_t)(nq * k + 1) * 8), *ri = malloc((size_t)(nq * k + 1) * 8);
    make_codes(i8, kind, q, qs, nq, x, xs, ndb, d);
    int64_t whole[1] = {ndb};
    if (!cuts)
        cuts = whole, ncuts = 1;
    char what[128];
    snprintf(what, sizeof what, "codetopk %s q[%lld,%lld] db %lld k=%lld kind %d, %d block%s",
             i8 ? "i8" : "bit", (long long)nq, (long long)d, (long long)ndb, (long long)k, kind,
             ncuts, ncuts == 1 ? "" : "s");
    run_codetopk(i8, q, qs, x, xs, nq, d, k, cuts, ncuts, v, ix, what);
    ref_codetopk(i8, q, qs, x, xs, nq, ndb, d, k, rv, ri);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < nq * k; i++)
        if ((ix[i] != ri[i] || memcmp(&rv[i], &v[i], 4)) && !bad++)
            first = i;
    CHECK(bad == 0, "%s: %s: %lld entries differ from the reference, first %lld: idx %lld "
                    "score %.9g, expected idx %lld score %.9g",
          dev_name, what, (long long)bad, (long long)first, first < 0 ? -1LL : (long long)ix[first],
          first < 0 ? 0.0 : (double)v[first], first < 0 ? -1LL : (long long)ri[first],
          first < 0 ? 0.0 : (double)rv[first]);
    free(q), free(x), free(qs), free(xs), free(v), free(rv), free(ix), free(ri);
}

/* codematrix: every score, bit for bit the reference's (so codetopk's). */
static void codematrix_case(int i8, int64_t nq, int64_t ndb, int64_t d, int kind)
{
    size_t rb = i8 ? (size_t)d : (size_t)(d + 7) / 8;
    unsigned char *q = calloc((size_t)nq * rb + 1, 1), *x = calloc((size_t)ndb * rb + 1, 1);
    float *qs = malloc((size_t)(nq + 1) * 4), *xs = malloc((size_t)(ndb + 1) * 4);
    float *out = malloc((size_t)(nq * ndb + 1) * 4), *ref = malloc((size_t)(ndb + 1) * 4);
    make_codes(i8, kind, q, qs, nq, x, xs, ndb, d);
    char what[128];
    snprintf(what, sizeof what, "codematrix %s q[%lld,%lld] db %lld kind %d", i8 ? "i8" : "bit",
             (long long)nq, (long long)d, (long long)ndb, kind);
    tq_dtype dt = i8 ? TQ_DTYPE_I8 : TQ_DTYPE_BIT;
    int64_t qd[2] = {nq, d}, xd[2] = {ndb, d}, od[2] = {nq, ndb};
    gt *gq = gt_new(dt, 2, qd, q), *gqs = i8 ? gt_new(TQ_DTYPE_F32, 1, qd, qs) : NULL;
    gt *gx = gt_new(dt, 2, xd, x), *gxs = i8 ? gt_new(TQ_DTYPE_F32, 1, xd, xs) : NULL;
    gt *go = gt_new(TQ_DTYPE_F32, 2, od, NULL);
    tq_status st = tq_op_codematrix(gq->t, gqs ? gqs->t : NULL, gx->t, gxs ? gxs->t : NULL,
                                    i8 ? TQ_METRIC_DOT : TQ_METRIC_HAMMING, go->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(go, out, what);
    gt_unchanged(gq, q, what);
    gt_unchanged(gx, x, what);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < nq; i++) {
        ref_code_row(i8, q + (size_t)i * rb, i8 ? qs[i] : 0, x, xs, ndb, d, ref);
        for (int64_t j = 0; j < ndb; j++)
            if (memcmp(&ref[j], &out[i * ndb + j], 4) && !bad++)
                first = i * ndb + j;
    }
    CHECK(bad == 0, "%s: %s: %lld scores differ from the reference, first [%lld, %lld]: %.9g",
          dev_name, what, (long long)bad, first < 0 ? -1LL : (long long)(first / ndb),
          first < 0 ? -1LL : (long long)(first % ndb), first < 0 ? 0.0 : (double)out[first]);
    gt_free(gq), gt_free(gqs), gt_free(gx), gt_free(gxs), gt_free(go);
    free(q), free(x), free(qs), free(xs), free(out), free(ref);
}

/* A score that double rounding would get wrong: scales 1 - 2^-24 and
 * 1 + 2^-23, dot 2^23 + 1 (codes 127 x 127 520 times, 127 x 12, 5 x 1), so
 * the exact score is 2^23 + 1.5 - 2^-47, just below a midpoint: the nearest
 * f32 is 2^23 + 1, where rounding to double first gives the midpoint and
 * then 2^23 + 2. Negated queries too. codematrix and codetopk against the
 * reference. */
static void code_rounding_case(void)
{
    enum { D = 522 };
    unsigned char q[2 * D] = {0}, x[D] = {0};
    for (int p = 0; p < 520; p++)
        q[p] = x[p] = 127;
    q[520] = 127, x[520] = 12, q[521] = 5, x[521] = 1;
    for (int p = 0; p < D; p++)
        q[D + p] = (unsigned char)-(int8_t)q[p];
    float qs[2] = {1.0f - 0x1p-24f, 1.0f - 0x1p-24f}, xs[1] = {1.0f + 0x1p-23f};
    float ref[1], out[2], v[2];
    int64_t ix[2], one[1] = {1}, qd[2] = {2, D}, xd[2] = {1, D}, od[2] = {2, 1};
    gt *gq = gt_new(TQ_DTYPE_I8, 2, qd, q), *gqs = gt_new(TQ_DTYPE_F32, 1, qd, qs);
    gt *gx = gt_new(TQ_DTYPE_I8, 2, xd, x), *gxs = gt_new(TQ_DTYPE_F32, 1, xd, xs);
    gt *go = gt_new(TQ_DTYPE_F32, 2, od, NULL);
    tq_status st = tq_op_codematrix(gq->t, gqs->t, gx->t, gxs->t, TQ_METRIC_DOT, go->t);
    CHECK(st == TQ_OK, "%s: codematrix rounding: %s", dev_name, tq_errmsg());
    gt_get(go, out, "codematrix rounding");
    run_codetopk(1, q, qs, x, xs, 2, D, 1, one, 1, v, ix, "codetopk rounding");
    for (int i = 0; i < 2; i++) {
        ref_code_row(1, q + (size_t)i * D, qs[i], x, xs, 1, D, ref);
        CHECK(fabsf(ref[0]) == 0x1p23f + 1 && !memcmp(&ref[0], &out[i], 4) &&
                  !memcmp(&ref[0], &v[i], 4),
              "%s: score of dot %s(2^23 + 1) x (1 - 2^-24) x (1 + 2^-23): reference %.9g, "
              "codematrix %.9g, codetopk %.9g", dev_name, i ? "-" : "", (double)ref[0],
              (double)out[i], (double)v[i]);
    }
    gt_free(gq), gt_free(gqs), gt_free(gx), gt_free(gxs), gt_free(go);
}

/* ggml's reference block dot product, written out here: row x (q8_0 or
 * q4_0 blocks) with query y (q8_0): each block's integer sum, then in f32
 * sumf += sumi * (dx * dy) (q8_0) or sumf += sumi * dx * dy (q4_0). */
static float ref_block_score(tq_dtype xt, const unsigned char *x, const unsigned char *y, int64_t d)
{
    float sumf = 0;
    for (int64_t b = 0; b < d / 32; b++) {
        const unsigned char *xb = x + b * (xt == TQ_DTYPE_Q4_0 ? 18 : 34), *yb = y + b * 34;
        uint16_t hx = (uint16_t)(xb[0] | xb[1] << 8), hy = (uint16_t)(yb[0] | yb[1] << 8);
        float dx = tq_f16_to_f32(hx), dy = tq_f16_to_f32(hy);
        int sumi = 0;
        for (int j = 0; j < 32; j++) {
            int xv = xt == TQ_DTYPE_Q4_0 ? (j < 16 ? xb[2 + j] & 15 : xb[2 + j - 16] >> 4) - 8
                                         : (int8_t)xb[2 + j];
            sumi += xv * (int8_t)yb[2 + j];
        }
        if (xt == TQ_DTYPE_Q4_0) {
            float t = (float)sumi * dx;
            sumf += t * dy;
        } else {
            float p = dx * dy;
            sumf += (float)sumi * p;
        }
    }
    return sumf;
}

/* Random blocks: finite f16 scales of either sign, any codes (q8_0's -128
 * too, unless no128: ggml's quantizer never writes it, and AVX2's strip
 * kernel takes only blocks of rows without it). */
static int no128;
/* extreme: every block's sum large and odd, 7 x (31 x 127 + 126) = 28441
 * (15 bits) for q4_0 rows: sumi x dx is then no longer exact, and the order
 * of ggml's products shows */
static int extreme;
static void make_blocks(tq_dtype dt, unsigned char *p, int64_t rows, int64_t d)
{
    size_t bb = dt == TQ_DTYPE_Q4_0 ? 18 : 34;
    for (int64_t b = 0; b < rows * (d / 32); b++) {
        unsigned char *blk = p + (size_t)b * bb;
        uint16_t h = tq_f32_to_f16((rnd() & 1 ? -1.0f : 1.0f) * (float)randf(1e-4, 2.0));
        blk[0] = (unsigned char)h, blk[1] = (unsigned char)(h >> 8);
        for (size_t j = 2; j < bb; j++)
            blk[j] = extreme ? (dt == TQ_DTYPE_Q8_0 ? (j == 2 ? 126 : 127) : 0xff)
                     : no128 && dt == TQ_DTYPE_Q8_0 ? (unsigned char)(rnd() % 255 - 127)
                                                    : (unsigned char)rnd();
    }
}

/* codetopk and codematrix over q8_0 or q4_0 rows with q8_0 queries: every
 * score the reference's bits, the lists ranked by them. */
static void codeblocks_case(tq_dtype xt, int64_t nq, int64_t ndb, int64_t d, int64_t k)
{
    size_t xb = (size_t)(d / 32) * (xt == TQ_DTYPE_Q4_0 ? 18 : 34), qb = (size_t)(d / 32) * 34;
    unsigned char *q = malloc((size_t)nq * qb + 1), *x = malloc((size_t)ndb * xb + 1);
    float *out = malloc((size_t)(nq * ndb + 1) * 4), *ref = malloc((size_t)(ndb + 1) * 4);
    float *v = malloc((size_t)(nq * k + 1) * 4);
    int64_t *ix = malloc((size_t)(nq * k + 1) * 8), *order = malloc((size_t)(ndb + 1) * 8);
    make_blocks(TQ_DTYPE_Q8_0, q, nq, d);
    make_blocks(xt, x, ndb, d);
    char what[128];
    snprintf(what, sizeof what, "codetopk/codematrix %s db %lld, q8_0 q[%lld,%lld], k=%lld",
             tq_dtype_name(xt), (long long)ndb, (long long)nq, (long long)d, (long long)k);
    int64_t qd[2] = {nq, d}, xd[2] = {ndb, d}, od[2] = {nq, ndb}, kd[2] = {nq, k};
    for (int64_t i = 0; i < nq * k; i++)
        v[i] = -INFINITY, ix[i] = -1;
    gt *gq = gt_new(TQ_DTYPE_Q8_0, 2, qd, q), *gx = gt_new(xt, 2, xd, x);
    gt *go = gt_new(TQ_DTYPE_F32, 2, od, NULL);
    gt *gv = gt_new(TQ_DTYPE_F32, 2, kd, v), *gi = gt_new(TQ_DTYPE_I64, 2, kd, ix);
    tq_status st = tq_op_codematrix(gq->t, NULL, gx->t, NULL, TQ_METRIC_DOT, go->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    st = tq_op_codetopk(gq->t, NULL, gx->t, NULL, TQ_METRIC_DOT, 0, gv->t, gi->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(go, out, what);
    gt_get(gv, v, what);
    gt_get(gi, ix, what);
    int64_t bad = 0, badk = 0;
    for (int64_t i = 0; i < nq; i++) {
        for (int64_t j = 0; j < ndb; j++) {
            ref[j] = ref_block_score(xt, x + (size_t)j * xb, q + (size_t)i * qb, d);
            order[j] = j;
            bad += memcmp(&ref[j], &out[i * ndb + j], 4) != 0;
        }
        cmp_row = ref;
        qsort(order, (size_t)ndb, sizeof *order, rank_cmp);
        for (int64_t r = 0; r < k; r++)
            badk += r < ndb ? ix[i * k + r] != order[r] || memcmp(&v[i * k + r], &ref[order[r]], 4)
                            : ix[i * k + r] != -1;
    }
    CHECK(bad == 0 && badk == 0, "%s: %s: %lld matrix scores and %lld list entries differ from "
                                 "ggml's reference", dev_name, what, (long long)bad, (long long)badk);
    gt_free(gq), gt_free(gx), gt_free(go), gt_free(gv), gt_free(gi);
    free(q), free(x), free(out), free(ref), free(v), free(ix), free(order);
}

/* Every case of codetopk, codematrix and ggml's blocks against the
 * references (test_codetopk runs them with each strip kernel the CPU has). */
static void codetopk_cases(void)
{
    static const int64_t cuts[] = {700, 1, 0, 1299, 1000};
    for (int i8 = 0; i8 < 2; i8++) {
        codetopk_case(i8, 1, 1, 1, 1, 0, NULL, 0);
        codetopk_case(i8, 37, 3000, 67, 10, 0, NULL, 0);
        codetopk_case(i8, 20, 2500, 40, 20, 1, NULL, 0);  /* ties */
        codetopk_case(i8, 9, 700, 384, 5, 2, NULL, 0);    /* extremes */
        codetopk_case(i8, 37, 3000, 1024, 10, 0, cuts, 5); /* blocks via idx_base */
        codetopk_case(i8, 11, 22, 16, 30, 1, NULL, 0);    /* k beyond the database */
        codetopk_case(i8, 5, 40, 300, 0, 0, NULL, 0);
        codetopk_case(i8, 37, 3000, 1024, 10, 3, NULL, 0); /* codes of [-127, 127], one -128 */
        codetopk_case(i8, 38, 3000, 67, 10, 3, cuts, 5);
        codetopk_case(i8, 13, 1000, 384, 10, 4, NULL, 0); /* queries of -128 and 127 */
        codematrix_case(i8, 1, 1, 1, 0);
        codematrix_case(i8, 37, 700, 67, 0);
        codematrix_case(i8, 20, 250, 40, 1);
        codematrix_case(i8, 9, 300, 384, 2);
        codematrix_case(i8, 37, 1000, 1024, 3);
        codematrix_case(i8, 13, 600, 383, 4);
        codematrix_case(i8, 0, 10, 8, 0);
        codematrix_case(i8, 3, 0, 8, 0);
    }
    code_rounding_case();
    codeblocks_case(TQ_DTYPE_Q8_0, 13, 500, 96, 7);
    codeblocks_case(TQ_DTYPE_Q4_0, 13, 500, 96, 7);
    codeblocks_case(TQ_DTYPE_Q4_0, 5, 3, 384, 9); /* k beyond the database */
    codeblocks_case(TQ_DTYPE_Q8_0, 1, 1, 32, 1);
    no128 = 1;
    codeblocks_case(TQ_DTYPE_Q8_0, 13, 500, 96, 7);
    codeblocks_case(TQ_DTYPE_Q8_0, 6, 1000, 384, 10);
    codeblocks_case(TQ_DTYPE_Q4_0, 6, 1000, 384, 10);
    no128 = 0, extreme = 1;
    codeblocks_case(TQ_DTYPE_Q4_0, 6, 1000, 384, 10);
    codeblocks_case(TQ_DTYPE_Q8_0, 6, 1000, 384, 10);
    extreme = 0;
}

static void test_codetopk(void)
{
    codetopk_cases();
    if (tq_device_backend(dev) == TQ_BACKEND_CPU) {
        /* the AVX2 strip kernels too, on a CPU whose AVX512-VNNI ones ran
         * above (elsewhere the same kernels again: a few seconds) */
        tq_cpu_code_strips_force_avx2(1);
        codetopk_cases();
        tq_cpu_code_strips_force_avx2(0);
    }
    /* the same bits with 1 and 2 threads, and (CPU) with the portable kernels */
    for (int i8 = 0; i8 < 2; i8++) {
        int64_t nq = 300, ndb = 5000, d = 96, k = 7;
        size_t rb = i8 ? (size_t)d : (size_t)d / 8;
        unsigned char *q = malloc((size_t)nq * rb), *x = malloc((size_t)ndb * rb);
        float *qs = malloc((size_t)nq * 4), *xs = malloc((size_t)ndb * 4);
        for (size_t i = 0; i < (size_t)nq * rb; i++)
            q[i] = (unsigned char)(rnd() % 5);
        for (size_t i = 0; i < (size_t)ndb * rb; i++)
            x[i] = (unsigned char)(rnd() % 5);
        for (int64_t i = 0; i < nq; i++)
            qs[i] = 0.01f;
        for (int64_t i = 0; i < ndb; i++)
            xs[i] = randf(0.001, 0.002);
        float *v0 = malloc((size_t)(nq * k) * 4), *v1 = malloc((size_t)(nq * k) * 4);
        int64_t *i0 = malloc((size_t)(nq * k) * 8), *i1 = malloc((size_t)(nq * k) * 8);
        static const int64_t one[] = {5000};
        tq_threads_set(1);
        run_codetopk(i8, q, qs, x, xs, nq, d, k, one, 1, v0, i0, "codetopk 1 thread");
        tq_threads_set(2);
        run_codetopk(i8, q, qs, x, xs, nq, d, k, one, 1, v1, i1, "codetopk 2 threads");
        CHECK(!memcmp(v0, v1, (size_t)(nq * k) * 4) && !memcmp(i0, i1, (size_t)(nq * k) * 8),
              "%s: codetopk differs between 1 and 2 threads", dev_name);
        if (tq_device_backend(dev) == TQ_BACKEND_CPU) {
            tq_cpu_codetopk_force_portable(1);
            run_codetopk(i8, q, qs, x, xs, nq, d, k, one, 1, v1, i1, "codetopk portable");
            tq_cpu_codetopk_force_portable(0);
            CHECK(!memcmp(v0, v1, (size_t)(nq * k) * 4) && !memcmp(i0, i1, (size_t)(nq * k) * 8),
                  "%s: codetopk's portable kernels differ from the vector ones", dev_name);
        }
        tq_threads_set(0);
        free(q), free(x), free(qs), free(xs), free(v0), free(v1), free(i0), free(i1);
    }
    if (tq_device_backend(dev) == TQ_BACKEND_CPU) { /* codematrix's portable kernels */
        tq_cpu_codetopk_force_portable(1);
        codematrix_case(1, 13, 500, 67, 3);
        codematrix_case(0, 13, 500, 67, 0);
        code_rounding_case();
        no128 = 1;
        codeblocks_case(TQ_DTYPE_Q8_0, 13, 500, 96, 7);
        codeblocks_case(TQ_DTYPE_Q4_0, 13, 500, 96, 7);
        no128 = 0, extreme = 1;
        codeblocks_case(TQ_DTYPE_Q4_0, 5, 300, 96, 7);
        extreme = 0;
        tq_cpu_codetopk_force_portable(0);
    }
}

/* codescreen against a double reference: a pair whose value is >= 0 must be
 * set, one below -2^-30 M (the op's stated band) clear. kind 0: random codes,
 * scales and terms; kind 1: dyadic values, so that the reference is exact, and
 * the term of row r makes the value of query r % nq exactly 0 (the edge: it
 * must be set); kind 3: codes of [-127, 127] and a -128 (the widening
 * kernel). */
static void codescreen_case(int64_t nq, int64_t ndb, int64_t d, int m, int kind)
{
    unsigned char *q = calloc((size_t)nq * (size_t)d + 1, 1), *x = calloc((size_t)ndb * (size_t)d + 1, 1);
    float *qs = malloc((size_t)(nq + 1) * 4), *xs = malloc((size_t)(ndb + 1) * 4);
    float *qa = malloc((size_t)(nq * m + 1) * 4), *xb = malloc((size_t)(ndb * m + 1) * 4);
    int64_t words = (ndb + 31) / 32;
    int32_t *out = malloc((size_t)(nq * words + 1) * 4);
    make_codes(1, kind, q, qs, nq, x, xs, ndb, d);
    for (int64_t i = 0; i < nq * m; i++)
        qa[i] = kind == 1 ? (float)(int)(rnd() % 5) : randf(-1, 1);
    for (int64_t r = 0; r < ndb * m; r++)
        xb[r] = kind == 1 ? (float)((int)(rnd() % 9) - 4) * 0.25f : randf(-1, 1);
    const int8_t *qc = (const int8_t *)q, *xc = (const int8_t *)x;
    if (kind == 1 && nq)
        for (int64_t r = 0; r < ndb; r++) { /* query i = r % nq: value 0, its last term 1 */
            int64_t i = r % nq;
            int64_t dot = 0;
            for (int64_t t = 0; t < d; t++)
                dot += qc[i * d + t] * xc[r * d + t];
            double v = (double)dot * qs[i] * xs[r];
            qa[i * m + m - 1] = 1;
            for (int k = 0; k < m - 1; k++)
                v += (double)qa[i * m + k] * xb[r * m + k];
            xb[r * m + m - 1] = (float)-v; /* exact: v is a multiple of 2^-14 below 2^20 */
        }
    char what[128];
    snprintf(what, sizeof what, "codescreen q[%lld,%lld] db %lld m %d kind %d", (long long)nq,
             (long long)d, (long long)ndb, m, kind);
    int64_t qd[2] = {nq, d}, xd[2] = {ndb, d}, ad[2] = {nq, m}, bd[2] = {ndb, m}, od[2] = {nq, words};
    gt *gq = gt_new(TQ_DTYPE_I8, 2, qd, q), *gqs = gt_new(TQ_DTYPE_F32, 1, qd, qs);
    gt *gx = gt_new(TQ_DTYPE_I8, 2, xd, x), *gxs = gt_new(TQ_DTYPE_F32, 1, xd, xs);
    gt *gqa = gt_new(TQ_DTYPE_F32, 2, ad, qa), *gxb = gt_new(TQ_DTYPE_F32, 2, bd, xb);
    gt *go = gt_new(TQ_DTYPE_I32, 2, od, NULL);
    tq_status st = tq_op_codescreen(gq->t, gqs->t, gqa->t, gx->t, gxs->t, gxb->t, go->t);
    CHECK(st == TQ_OK, "%s: %s: %s", dev_name, what, tq_errmsg());
    gt_get(go, out, what);
    double xsmax = 0, xbmax[8] = {0};
    for (int64_t r = 0; r < ndb; r++) {
        xsmax = fmax(xsmax, fabs(xs[r]));
        for (int k = 0; k < m; k++)
            xbmax[k] = fmax(xbmax[k], fabs(xb[r * m + k]));
    }
    int64_t missed = 0, extra = 0, pad = 0, edges = 0, first = -1;
    for (int64_t i = 0; i < nq; i++) {
        double big = fabs(qs[i]) * xsmax * 16384.0 * (double)d;
        for (int k = 0; k < m; k++)
            big += fabs(qa[i * m + k]) * xbmax[k];
        for (int64_t r = 0; r < words * 32; r++) {
            int bit = (int)((uint32_t)out[i * words + r / 32] >> (r % 32) & 1);
            if (r >= ndb) {
                pad += bit;
                continue;
            }
            int64_t dot = 0;
            for (int64_t t = 0; t < d; t++)
                dot += qc[i * d + t] * xc[r * d + t];
            /* double: error below 2^-50 big, far inside the band (exact for kind 1) */
            double v = (double)dot * ((double)qs[i] * xs[r]);
            for (int k = 0; k < m; k++)
                v += (double)qa[i * m + k] * xb[r * m + k];
            edges += kind == 1 && v == 0;
            if (v >= 0 && !bit && !missed++)
                first = i * ndb + r;
            if (v < -0x1p-30 * big && bit && !extra++ && first < 0)
                first = i * ndb + r;
        }
    }
    CHECK(!missed && !extra && !pad, "%s: %s: %lld pairs of value >= 0 unset, %lld below the band "
          "set, %lld padding bits set (first pair %lld)", dev_name, what, (long long)missed,
          (long long)extra, (long long)pad, (long long)first);
    CHECK(kind != 1 || nq == 0 || edges >= ndb, "%s: %s: only %lld pairs of value 0", dev_name, what,
          (long long)edges);
    gt_free(gq), gt_free(gqs), gt_free(gx), gt_free(gxs), gt_free(gqa), gt_free(gxb), gt_free(go);
    free(q), free(x), free(qs), free(xs), free(qa), free(xb), free(out);
}

static void test_codescreen(void)
{
    codescreen_case(1, 1, 1, 1, 0);
    codescreen_case(37, 700, 96, 4, 0);
    codescreen_case(20, 1000, 67, 3, 1);
    codescreen_case(13, 530, 384, 8, 1);
    codescreen_case(9, 300, 40, 5, 3);
    codescreen_case(0, 10, 8, 2, 0);
    codescreen_case(3, 0, 8, 2, 0);
    if (tq_device_backend(dev) == TQ_BACKEND_CPU) { /* the portable kernels */
        tq_cpu_codetopk_force_portable(1);
        codescreen_case(13, 530, 96, 4, 1);
        codescreen_case(9, 300, 40, 5, 0);
        tq_cpu_codetopk_force_portable(0);
        /* and the AVX2 strips where the VNNI ones ran */
        tq_cpu_code_strips_force_avx2(1);
        codescreen_case(13, 530, 96, 4, 1);
        codescreen_case(9, 300, 40, 5, 0);
        codescreen_case(7, 1000, 384, 4, 3);
        tq_cpu_code_strips_force_avx2(0);
    }
}

/* ------------------------------------------------------------ timer */

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The device's timer (tq-bench's clock on a GPU). The CPU has none. A GPU's
 * names itself, and its seconds for a batch of matmuls lie between 0 and
 * the host's wall time around the same begin and end, which brackets them
 * (a time in the wrong unit, or one taken before the work ran, falls
 * outside; the CUDA and Vulkan clocks tick at the host's rate to well
 * within the margin). One refused during a graph recording stays the
 * device's. */
/* tq-bench's FMA peak probe (not an op): on a GPU, each element of out is
 * the sum of 8 chains acc = fma(acc, 0.9999, 1e-4) of iters rounds from
 * j + 1e-3 (i mod 1024), as the host computes them (one round more or less
 * moves a sum by ~2e-3, far over the tolerance, which allows Vulkan's fma to
 * be unfused); the flops reported are 2 * 8 * iters a thread, exactly; the
 * sentinels around out catch a write past it. The CPU has no probe. */
static void test_fma_peak(void)
{
    if (!tq_device_has_fma_peak(dev)) {
        CHECK(tq_device_backend(dev) == TQ_BACKEND_CPU, "%s: no FMA peak probe", dev_name);
        return;
    }
    const int64_t n = 1000, iters = 37;
    gt *g = gt_new(TQ_DTYPE_F32, 1, &n, NULL);
    double flops = -1;
    tq_status st = tq_device_fma_peak(dev, g->t, iters, &flops);
    CHECK(st == TQ_OK, "%s: fma_peak: %s", dev_name, tq_errmsg());
    CHECK(flops == 2.0 * 8 * (double)iters * (double)n, "%s: fma_peak counted %.0f flops, want %.0f",
          dev_name, flops, 2.0 * 8 * (double)iters * (double)n);
    float *y = malloc((size_t)n * sizeof *y);
    gt_get(g, y, "fma_peak");
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) {
        float a[8], base = 1e-3f * (float)(i & 1023);
        for (int j = 0; j < 8; j++)
            a[j] = base + (float)j;
        for (int64_t it = 0; it < iters; it++)
            for (int j = 0; j < 8; j++)
                a[j] = fmaf(a[j], 0.9999f, 1e-4f);
        float want = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
        if (!(fabsf(y[i] - want) <= 1e-4f) && !bad++)
            first = i;
    }
    CHECK(bad == 0, "%s: fma_peak: %lld sums differ from the host's, first [%lld] = %.9g",
          dev_name, (long long)bad, (long long)first, first >= 0 ? (double)y[first] : 0.0);
    /* bad arguments fail, launching nothing */
    CHECK(tq_device_fma_peak(dev, g->t, 0, &flops) == TQ_ERR_USAGE && flops == 0,
          "%s: fma_peak of 0 rounds", dev_name);
    free(y);
    gt_free(g);
}

static void test_timer(void)
{
    const char *name = tq_device_timer_name(dev);
    tq_backend_kind kind = tq_device_backend(dev);
    if (kind == TQ_BACKEND_CPU) {
        CHECK(!name && tq_device_timer_begin(dev) != TQ_OK && !tq_device_timer_why(dev)[0],
              "cpu: a device timer (%s)", name ? name : "begin worked");
        return;
    }
    const char *want = kind == TQ_BACKEND_VULKAN ? "timestamp queries" : "device events";
    CHECK(name && !strcmp(name, want), "%s: timer %s, want %s", dev_name, name ? name : "none",
          want);
    int64_t dims[2] = {96, 96};
    float *x = malloc(96 * 96 * sizeof *x);
    fill(x, 96 * 96, -1, 1);
    tq_tensor *a = NULL, *c = NULL;
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dims, &a);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dims, &c);
    if (!st)
        st = tq_tensor_upload(a, x, 96 * 96 * sizeof *x);
    if (!st) /* warm-up: pipelines and kernels loaded outside the timing */
        st = tq_op_matmul(a, 0, a, 0, 1.0f, 0.0f, c);
    if (!st)
        st = tq_device_sync(dev);
    CHECK(st == TQ_OK, "%s: timer: set-up: %s", dev_name, tq_errmsg());
    for (int round = 0; round < 2 && !st; round++) {
        double secs = -1, t0 = wall();
        st = tq_device_timer_begin(dev);
        if (st) {
            CHECK(!tq_device_timer_name(dev) && tq_device_timer_why(dev)[0],
                  "%s: the timer failed without saying why: %s", dev_name, tq_errmsg());
            printf("ok skip %s timer: %s\n", dev_name, tq_device_timer_why(dev));
            break;
        }
        for (int i = 0; i < 1 + 7 * round && !st; i++)
            st = tq_op_matmul(a, 0, a, 0, 1.0f, 0.0f, c);
        if (!st)
            st = tq_device_timer_end(dev, &secs);
        double host = wall() - t0;
        CHECK(st == TQ_OK && secs > 0 && secs <= host * 1.001 + 2e-6,
              "%s: timer: %d matmuls %g s on the device, %g s on the host around them: %s",
              dev_name, 1 + 7 * round, secs, host, st ? tq_errmsg() : "");
    }
    int recording = 0;
    if (!st && tq_graph_begin(dev, &recording) == TQ_OK && recording) {
        tq_graph *g = NULL;
        st = tq_device_timer_begin(dev);
        tq_graph_end(dev, 0, &g);
        CHECK(st == TQ_ERR_USAGE && tq_device_timer_name(dev),
              "%s: a timer while a graph records: status %d, then %s", dev_name, (int)st,
              tq_device_timer_name(dev) ? "kept" : "lost");
    }
    tq_tensor_free(a);
    tq_tensor_free(c);
    free(x);
}

/* ------------------------------------------------------------ main */

/* Whether the comma-separated list names name. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strcspn(p, ",") == n && !strncmp(p, name, n))
            return 1;
    return 0;
}

/* TQ_TEST_GROUPS=rows,elementwise runs those groups of checks only (a quick
 * look at a few kernels: the padded-launch test, a sanitizer run); unset or
 * empty, every group. TQ_TEST_SKIP_GROUPS=simtopk leaves those out (the
 * sanitized stand-in runs share the slowest groups between CUDA and HIP). */
static int group(const char *name)
{
    const char *list = getenv("TQ_TEST_GROUPS"), *skip = getenv("TQ_TEST_SKIP_GROUPS");
    if (skip && listed(skip, name))
        return 0;
    return !list || !*list || listed(list, name);
}

int main(void)
{
    static const char *specs[] = {"cpu", "vulkan", "cuda", "hip"};
    /* TQ_TEST_DEVICES=cuda,hip runs those only (the stand-in runs: the CPU
     * and Vulkan have had their turn in the plain run) */
    const char *only = getenv("TQ_TEST_DEVICES");
    int ran = 0, host_path_done = 0;
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        if (only && *only && !strstr(only, specs[s]))
            continue;
        if (tq_device_open(specs[s], &dev) != TQ_OK) {
            printf("ok skip %s: %s\n", specs[s], tq_errmsg());
            continue;
        }
        dev_name = tq_device_name(dev);
        printf("ok device %s\n", tq_device_describe(dev));
        ran++;
        rng = 0x9e3779b97f4a7c15u + s; /* the same data whatever ran before */
        if (!group("matmul"))
            ;
        else if (tq_device_backend(dev) == TQ_BACKEND_CPU)
            test_cpu_engines();
        else
            test_matmul("default");
        if (group("matmul_constant"))
            test_matmul_constant("default");
        if (group("matmul_then"))
            test_matmul_then();
        if (group("layernorm_low"))
            test_layernorm_low();
        if (group("int8_products"))
            test_int8_products();
        if (group("threads"))
            test_threads(NULL);
        if (group("rows"))
            test_rows();
        if (group("elementwise"))
            test_elementwise();
        if (group("topk"))
            test_topk();
        if (group("gather"))
            test_gather();
        if (group("convert"))
            test_convert();
        if (group("above"))
            test_above();
        if (group("simtopk")) {
            test_simtopk();
            /* again with bf16 ranking products, where the device takes them
             * (a CPU with AVX512-BF16): the same references must hold */
            if (tq_device_set_rank_precision(dev, TQ_DTYPE_BF16) == TQ_OK &&
                tq_device_rank_precision(dev) == TQ_DTYPE_BF16)
                test_simtopk();
            tq_device_set_rank_precision(dev, TQ_DTYPE_F32);
        }
        if (group("simtopk_same_bits"))
            test_simtopk_same_bits();
        if (group("rowprod"))
            test_rowprod("default");
        if (group("rowprod_same_bits"))
            test_rowprod_same_bits();
        if (group("attention"))
            test_attention();
        if (group("codetopk"))
            test_codetopk();
        if (group("codescreen"))
            test_codescreen();
        if (group("timer"))
            test_timer();
        if (group("fma_peak"))
            test_fma_peak();
        tq_device_close(dev);
        /* plain shader variants exist on Vulkan only; the host path is one
         * mechanism for every backend: checked on the first device it serves */
        if (!strcmp(specs[s], "vulkan") && group("plain_variants"))
            test_plain_variants(specs[s], 0x9e3779b97f4a7c15u + s);
        if (s > 0 && group("host_path") && !host_path_done++)
            test_host_path(specs[s], 0x9e3779b97f4a7c15u + s);
    }
    CHECK(ran > 0 || (only && *only), "no device opened (the CPU always should)");
    return CHECK_DONE();
}
