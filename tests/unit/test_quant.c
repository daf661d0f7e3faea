/* test_quant.c: tq-quantize's codes (lib/quant): the AVX2 kernels give the
 * bytes of the portable loops for every code, row length and kind of value
 * (random, exact ties, zero rows, tiny rows whose 1/d overflows, one value
 * repeated); the portable q8_0, q4_0 and bit rows are tq_convert's (held to
 * ggml and numpy.packbits by test_dtype.c); int8 per row against a reference
 * in double; every code comes back within its bound (man/tq-quantize.1).
 * The byte-for-byte agreement with the Python definitions is in
 * tests/bats/tq-quantize.bats. */
#include "quant/quant.h"
#include "quant/simd.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rand64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float uniform(void) { return (float)((double)(rand64() >> 11) * 0x1p-53 * 2 - 1); }

/* Rows of the kinds the kernels must agree on. */
static void fill(float *x, int64_t n, int64_t d)
{
    for (int64_t i = 0; i < n; i++) {
        float *r = x + i * d;
        int kind = (int)(i % 7);
        for (int64_t j = 0; j < d; j++) {
            switch (kind) {
            case 0: r[j] = uniform() * 0.1f; break;
            case 1: r[j] = 0; break;
            /* ties: x / s = k + 1/2 (int8, q8_0), x / d + 8.5 whole (q4_0) */
            case 2: r[j] = j % 32 == 0 ? 127 * 0x1p-5f : (float)((int)(j % 40) - 20) * 0x1p-5f + 0x1p-6f; break;
            case 3: r[j] = j % 32 == 0 ? -8 * 0x1p-4f : (float)((int)(j % 16) - 8) * 0x1p-4f + 0x1p-5f; break;
            case 4: r[j] = j % 5 ? uniform() * 1e-39f : 0; break; /* subnormal: 1/d overflows, 0 * inf */
            case 5: r[j] = 0.25f; break;              /* one value: ties for the max */
            default: r[j] = uniform() * 1000.0f;
            }
        }
    }
}

static int same_codes(tq_quant_code c, const float *x, int64_t n, int64_t d)
{
    uint64_t bytes;
    int64_t dims[2] = {n, d};
    tq_dtype_payload_bytes(tq_quant_code_dtype(c), 2, dims, &bytes);
    unsigned char *a = calloc(bytes + 1, 1), *b = calloc(bytes + 1, 1);
    float *sa = calloc((size_t)n + 1, 4), *sb = calloc((size_t)n + 1, 4);
    tq_quant_force_portable(1);
    tq_status st = tq_quant_rows(c, x, n, d, NULL, a, sa);
    tq_quant_force_portable(0);
    st |= tq_quant_rows(c, x, n, d, NULL, b, sb);
    int ok = !st && !memcmp(a, b, bytes) && !memcmp(sa, sb, (size_t)n * 4);
    if (!ok)
        for (uint64_t i = 0; i < bytes; i++)
            if (a[i] != b[i]) {
                fprintf(stderr, "%s d=%lld: byte %llu portable %u vector %u\n",
                        tq_quant_code_name(c), (long long)d, (unsigned long long)i, a[i], b[i]);
                break;
            }
    /* the portable block and bit codes are tq_convert's */
    if (ok && (c == TQ_QUANT_Q8_0 || c == TQ_QUANT_Q4_0 || c == TQ_QUANT_BIT)) {
        tq_convert(tq_quant_code_dtype(c), b, TQ_DTYPE_F32, x, (size_t)(n * d), d);
        ok = !memcmp(a, b, bytes);
    }
    free(a), free(b), free(sa), free(sb);
    return ok;
}

static void test_vector_matches_portable(void)
{
    static const int64_t ds[] = {1, 7, 8, 9, 31, 32, 33, 64, 100, 384, 1024};
    if (!tq_quant_have_avx2())
        printf("ok (no AVX2 here: the vector kernels are not run)\n");
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        int64_t d = ds[k], n = 50;
        float *x = malloc((size_t)(n * d) * sizeof *x);
        fill(x, n, d);
        CHECK(same_codes(TQ_QUANT_INT8, x, n, d), "int8, d = %lld", (long long)d);
        CHECK(same_codes(TQ_QUANT_BIT, x, n, d), "bit, d = %lld", (long long)d);
        if (d % 32 == 0) {
            CHECK(same_codes(TQ_QUANT_Q8_0, x, n, d), "q8_0, d = %lld", (long long)d);
            CHECK(same_codes(TQ_QUANT_Q4_0, x, n, d), "q4_0, d = %lld", (long long)d);
        }
        free(x);
    }
}

/* int8 per row from its definition, in double: s = max|x| / 127 rounded to
 * f32, x / s rounded to f32, then to the nearest integer, ties to even. */
static void test_int8_reference(void)
{
    int64_t n = 70, d = 100;
    float *x = malloc((size_t)(n * d) * sizeof *x), *s = malloc((size_t)n * 4);
    int8_t *q = malloc((size_t)(n * d));
    fill(x, n, d);
    CHECK(!tq_quant_rows(TQ_QUANT_INT8, x, n, d, NULL, q, s), "int8: %s", tq_errmsg());
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double amax = 0;
        for (int64_t j = 0; j < d; j++)
            amax = fmax(amax, fabs(x[i * d + j]));
        float si = (float)(amax / 127.0);
        bad += s[i] != si;
        for (int64_t j = 0; j < d; j++) {
            double v = si ? nearbyint((double)(float)((double)x[i * d + j] / si)) : 0;
            v = fmin(127, fmax(-127, v));
            bad += q[i * d + j] != (int8_t)v;
        }
    }
    CHECK(bad == 0, "int8: %d values differ from the reference", bad);
    free(x), free(s), free(q);
}

/* Every code comes back within man/tq-quantize.1's bound; ranges too. */
static void test_bounds(void)
{
    int64_t n = 60, d = 96;
    float *x = malloc((size_t)(n * d) * sizeof *x), *y = malloc((size_t)(n * d) * sizeof *y);
    float *s = malloc((size_t)n * 4), rg[2 * 96];
    unsigned char *q = malloc((size_t)(n * d) * 2);
    for (int64_t i = 0; i < n * d; i++)
        x[i] = uniform() * 0.2f;
    for (int64_t j = 0; j < d; j++)
        rg[j] = INFINITY, rg[d + j] = -INFINITY;
    tq_quant_ranges_fold(rg, x, n, d);
    for (int c = TQ_QUANT_F16; c < TQ_QUANT_COUNT; c++) {
        const char *why;
        CHECK(tq_quant_bad_row((tq_quant_code)c, x, n, d, &why) < 0, "finite rows refused");
        CHECK(!tq_quant_rows((tq_quant_code)c, x, n, d, rg, q, s) &&
                  !tq_quant_dequant((tq_quant_code)c, q, n, d, rg, s, y),
              "%s: %s", tq_quant_code_name((tq_quant_code)c), tq_errmsg());
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            double amax = 0;
            for (int64_t j = 0; j < d; j++)
                amax = fmax(amax, fabs(x[i * d + j]));
            for (int64_t j = 0; j < d; j++) {
                double xv = x[i * d + j], e = fabs((double)y[i * d + j] - xv), lim;
                double bmax = 0, bmin = INFINITY, bhi = -INFINITY;
                for (int64_t k = j / 32 * 32; k < j / 32 * 32 + 32; k++) {
                    bmax = fmax(bmax, fabs(x[i * d + k]));
                    bmin = fmin(bmin, x[i * d + k]);
                    bhi = fmax(bhi, x[i * d + k]);
                }
                double D = (bhi - bmin) / 3;
                double step = ((double)rg[d + j] - rg[j]) / 255;
                switch (c) {
                case TQ_QUANT_F16: lim = fmax(fabs(xv) * 0x1p-11, 0x1p-25); break;
                case TQ_QUANT_BF16: lim = fabs(xv) * 0x1p-8; break;
                case TQ_QUANT_INT8: lim = amax / 254 + amax * 0x1p-20; break;
                case TQ_QUANT_Q8_0: lim = bmax / 127 * (0.5 + 127 * 0x1p-11) + 0x1p-18; break;
                case TQ_QUANT_Q4_0: lim = bmax / 8 * (1 + 8 * 0x1p-11) + 0x1p-22; break;
                case TQ_QUANT_BIT: lim = 0, e = y[i * d + j] != (xv > 0 ? 1.0f : -1.0f); break;
                case TQ_QUANT_Q2: /* tq-quantize.1's bound, D = (max - min) / 3 of the block */
                    lim = D / 2 + 3 * (D * 0x1p-11 + 0x1p-25) + fabs(bmin) * 0x1p-11 + 0x1p-25;
                    break;
                default: /* ranges: floor, within one step above */
                    lim = step * (1 + 1e-5) + 1e-7;
                    e = xv - y[i * d + j] < -1e-7 ? INFINITY : e;
                }
                bad += e > lim;
            }
        }
        CHECK(bad == 0, "%s: %d values beyond the bound", tq_quant_code_name((tq_quant_code)c), bad);
    }
    free(x), free(y), free(s), free(q);
}

static void test_bad_rows(void)
{
    float x[4 * 32];
    for (int i = 0; i < 4 * 32; i++)
        x[i] = uniform();
    const char *why;
    CHECK(tq_quant_bad_row(TQ_QUANT_INT8, x, 4, 32, &why) == -1, "finite rows");
    x[2 * 32 + 31] = NAN;
    CHECK(tq_quant_bad_row(TQ_QUANT_BIT, x, 4, 32, &why) == 2, "NaN in row 2");
    x[2 * 32 + 31] = 0, x[3 * 32 + 5] = -INFINITY;
    CHECK(tq_quant_bad_row(TQ_QUANT_F16, x, 4, 32, &why) == 3, "-inf in row 3");
    x[3 * 32 + 5] = 70000;
    CHECK(tq_quant_bad_row(TQ_QUANT_F16, x, 4, 32, &why) == 3, "beyond f16");
    CHECK(tq_quant_bad_row(TQ_QUANT_Q4_0, x, 4, 32, &why) == -1, "q4_0 holds 70000");
    x[3 * 32 + 5] = 6e6f;
    CHECK(tq_quant_bad_row(TQ_QUANT_Q4_0, x, 4, 32, &why) == 3, "q4_0's scale beyond f16");
    CHECK(tq_quant_bad_row(TQ_QUANT_Q8_0, x, 4, 32, &why) == -1, "q8_0 holds 6e6");
    float r[4] = {0, 1, 2, 0.5f};
    CHECK(tq_quant_ranges_check(r, 2) == TQ_ERR_DATA, "a range with max < min");
    /* the pool's chunks: the first bad row of many, with 1 and 2 threads */
    enum { N = 20000, D = 64 };
    float *y = malloc((size_t)N * D * sizeof *y);
    for (int i = 0; i < N * D; i++)
        y[i] = uniform();
    y[(size_t)17777 * D + 3] = NAN, y[(size_t)9001 * D] = INFINITY, y[(size_t)12345 * D + 63] = NAN;
    for (int t = 1; t <= 2; t++) {
        tq_threads_set(t);
        why = NULL;
        CHECK(tq_quant_bad_row(TQ_QUANT_INT8, y, N, D, &why) == 9001 && why && strstr(why, "NaN"),
              "%d threads: the first of three bad rows is 9001", t);
    }
    tq_threads_set(0);
    free(y);
}

/* tq_quant_first_nonfinite (tq-attend's check): the first NaN or infinity by
 * rows, its column too, in the vector lanes and in the tail, either way */
static void test_first_nonfinite(void)
{
    enum { N = 50, D = 19 }; /* 19: two lanes of 8 and a tail of 3 */
    float x[N * D];
    for (int i = 0; i < N * D; i++)
        x[i] = uniform() * 1e30f;
    for (int portable = 0; portable <= 1; portable++) {
        tq_quant_force_portable(portable);
        int64_t col = -2;
        CHECK(tq_quant_first_nonfinite(x, N, D, &col) == -1, "finite values");
        CHECK(tq_quant_first_nonfinite(x, 0, D, &col) == -1 && tq_quant_first_nonfinite(x, N, 0, &col) == -1,
              "no values");
        static const int at[][2] = {{0, 0}, {7, 5}, {31, 16}, {49, 17}};
        for (int k = 0; k < 4; k++) {
            float *v = &x[at[k][0] * D + at[k][1]], keep = *v;
            *v = k % 2 ? -INFINITY : NAN;
            x[N * D - 1] = INFINITY; /* a later one is not the first */
            int64_t r = tq_quant_first_nonfinite(x, N, D, &col);
            CHECK(r == at[k][0] && col == at[k][1], "portable %d: (%d, %d) found at (%lld, %lld)",
                  portable, at[k][0], at[k][1], (long long)r, (long long)col);
            *v = keep, x[N * D - 1] = 1;
        }
    }
    tq_quant_force_portable(0);
}

int main(void)
{
    test_vector_matches_portable();
    test_int8_reference();
    test_bounds();
    test_bad_rows();
    test_first_nonfinite();
    return CHECK_DONE();
}
