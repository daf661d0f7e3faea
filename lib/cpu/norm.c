/* norm.c: the row-wise reductions on the CPU: rownorm, normalize, softmax and
 * layernorm. Each row is reduced by one thread in a fixed order, in double
 * precision, so results do not depend on the thread count and do not
 * overflow or cancel in f32. */
#include "../internal.h"
#include "cpu.h"
#include "vmath.h"

typedef struct rows {
    const float *x;
    float *y;
    const float *gamma, *beta;
    int64_t d;
    float eps;
    unsigned char *low; /* layernorm_low: each row of y rounded into it */
    tq_dtype low_dt;
} rows;

/* Row r of y (just written: in L1) into low, as tq_op_convert rounds it. */
static void row_low(const rows *p, int64_t r, const float *y)
{
    if (p->low) /* f32 to bf16 or f16: cannot fail */
        (void)tq_convert(p->low_dt, p->low + (size_t)(r * p->d) * tq_dtype_size(p->low_dt),
                         TQ_DTYPE_F32, y, (size_t)p->d, 0);
}

/* Rows per chunk: about 16k elements, so small rows still share out. */
static int64_t row_chunk(int64_t d) { return 1 + 16384 / (d ? d : 1); }

/* Sum of squares in eight fixed lanes: a short dependency chain, and a fixed
 * order of additions. */
static double sum_squares(const float *x, int64_t d)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += (double)x[i + j] * x[i + j];
    for (; i < d; i++)
        s[0] += (double)x[i] * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static double sum(const float *x, int64_t d)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += x[i + j];
    for (; i < d; i++)
        s[0] += x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Sum of (x - mean)^2, in eight fixed lanes as above. */
static double sum_sq_dev(const float *x, int64_t d, double mean)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += (x[i + j] - mean) * (x[i + j] - mean);
    for (; i < d; i++)
        s[0] += (x[i] - mean) * (x[i] - mean);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void rownorm_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows *p = ctx;
    for (int64_t r = begin; r < end; r++)
        p->y[r] = (float)sqrt(sum_squares(p->x + r * p->d, p->d));
}

tq_status tq_cpu_rownorm(void *ctx, const tq_tensor *x, tq_tensor *norms)
{
    (void)ctx;
    rows p = {tq_cpu_ptr(x), tq_cpu_ptr(norms), NULL, NULL, tq_cpu_cols(x), 0, NULL, TQ_DTYPE_F32};
    tq_parallel_for(tq_cpu_rows(x), row_chunk(p.d), rownorm_rows, &p);
    return TQ_OK;
}

static void normalize_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows *p = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *x = p->x + r * p->d;
        float *y = p->y + r * p->d;
        double norm = sqrt(sum_squares(x, p->d));
        /* written so that a NaN norm stays NaN rather than becoming eps; a
         * zero row with eps == 0 gives 0/0 = NaN, as the formula says */
        double inv = 1.0 / (norm < p->eps ? (double)p->eps : norm);
        for (int64_t i = 0; i < p->d; i++)
            y[i] = (float)(x[i] * inv);
    }
}

tq_status tq_cpu_normalize(void *ctx, const tq_tensor *x, float eps, tq_tensor *y)
{
    (void)ctx;
    rows p = {tq_cpu_ptr(x), tq_cpu_ptr(y), NULL, NULL, tq_cpu_cols(x), eps, NULL, TQ_DTYPE_F32};
    tq_parallel_for(tq_cpu_rows(x), row_chunk(p.d), normalize_rows, &p);
    return TQ_OK;
}

/* y = exp(x - m) rounded to f32, for x - m in [-inf, 0]: below -104 the f32
 * result is 0 (exp(-104) is under half the smallest subnormal). Built once
 * per ISA: libm's expf would take most of softmax's time. */
#define EXP_LOOP(name, attr)                                                       \
    attr static void name(const float *x, float *y, int64_t d, double m)          \
    {                                                                              \
        for (int64_t i = 0; i < d; i++) {                                          \
            double a = (double)x[i] - m;                                           \
            int live = a > -104.0;                                                 \
            double e = tq_exp_neg(tq_select(live, a, -104.0));                     \
            y[i] = (float)tq_select(live, e, 0.0);                                 \
        }                                                                          \
    }
#ifdef TQ_HAVE_ISA_VARIANTS
EXP_LOOP(exp_shift_avx512, TQ_TARGET_AVX512)
EXP_LOOP(exp_shift_avx2, TQ_TARGET_AVX2)
#endif
EXP_LOOP(exp_shift_base, )

typedef void (*exp_shift_fn)(const float *x, float *y, int64_t d, double m);

static exp_shift_fn exp_shift(void)
{
    static exp_shift_fn fn;
    exp_shift_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
    if (f)
        return f;
    switch (tq_cpu_isa()) {
#ifdef TQ_HAVE_ISA_VARIANTS
    case 2: f = exp_shift_avx512; break;
    case 1: f = exp_shift_avx2; break;
#endif
    default: f = exp_shift_base;
    }
    __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
    return f;
}

/* Softmax of one row. Defined results for every input:
 * - a NaN anywhere makes the whole row NaN;
 * - a row that is all -inf (every choice masked out) gives all zeros, not
 *   NaN and not a uniform row: attention over nothing should add nothing;
 * - +inf entries share the whole mass equally (the limit of the finite case);
 * - finite input never gives NaN: the max is subtracted before exp. */
static void softmax_row(const float *x, float *y, int64_t d)
{
    float m = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < d; i++) {
        m = x[i] > m ? x[i] : m;
        nan |= x[i] != x[i];
    }
    if (nan || m == -INFINITY) {
        float v = nan ? NAN : 0.0f;
        for (int64_t i = 0; i < d; i++)
            y[i] = v;
        return;
    }
    if (m == INFINITY) {
        int64_t n_inf = 0;
        for (int64_t i = 0; i < d; i++)
            n_inf += x[i] == INFINITY;
        for (int64_t i = 0; i < d; i++)
            y[i] = x[i] == INFINITY ? (float)(1.0 / (double)n_inf) : 0.0f;
        return;
    }
    exp_shift()(x, y, d, m); /* in place is fine: element by element */
    double inv = 1.0 / sum(y, d); /* the sum is >= 1: the max gives exp(0) */
    for (int64_t i = 0; i < d; i++)
        y[i] = (float)(y[i] * inv);
}

static void softmax_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows *p = ctx;
    for (int64_t r = begin; r < end; r++)
        softmax_row(p->x + r * p->d, p->y + r * p->d, p->d);
}

tq_status tq_cpu_softmax(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    (void)ctx;
    rows p = {tq_cpu_ptr(x), tq_cpu_ptr(y), NULL, NULL, tq_cpu_cols(x), 0, NULL, TQ_DTYPE_F32};
    tq_parallel_for(tq_cpu_rows(x), row_chunk(p.d), softmax_rows, &p);
    return TQ_OK;
}

/* A layer norm row's y[i] for i from `from` on, in double, rounded once. */
static void ln_scale(const rows *p, const float *x, float *y, int64_t from, double mean,
                     double inv)
{
    for (int64_t i = from; i < p->d; i++) {
        double v = (x[i] - mean) * inv;
        if (p->gamma)
            v *= p->gamma[i];
        if (p->beta)
            v += p->beta[i];
        y[i] = (float)v;
    }
}

#ifdef TQ_HAVE_ISA_VARIANTS
#include <immintrin.h>

/* sum and sum_sq_dev's eight lanes in one register: lane j adds what s[j]
 * adds, in the same order, then the same fold: the same bits. */
TQ_TARGET_AVX512 static double fold8(__m512d v, const float *x, int64_t i, int64_t d, double mean,
                                     int dev)
{
    double s[8];
    _mm512_storeu_pd(s, v);
    for (; i < d; i++)
        s[0] += dev ? (x[i] - mean) * (x[i] - mean) : x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* layernorm_rows in AVX-512 double: every step the scalar loop's, no fused
 * multiply-adds (the baseline build has none), so the same bits, 8 doubles
 * an instruction where the baseline build does 2 (tq-embed's two layer norms
 * a layer were 2.8% of its time with bf16 products). */
TQ_TARGET_AVX512 static void layernorm_rows512(const rows *p, int64_t begin, int64_t end)
{
    const int64_t d = p->d;
    for (int64_t r = begin; r < end; r++) {
        const float *x = p->x + r * d;
        float *y = p->y + r * d;
        __m512d s = _mm512_setzero_pd();
        int64_t i = 0;
        for (; i + 8 <= d; i += 8)
            s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
        double mean = fold8(s, x, i, d, 0.0, 0) / (double)d;
        __m512d vm = _mm512_set1_pd(mean);
        s = _mm512_setzero_pd();
        for (i = 0; i + 8 <= d; i += 8) {
            __m512d t = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), vm);
            s = _mm512_add_pd(s, _mm512_mul_pd(t, t));
        }
        double inv = 1.0 / sqrt(fold8(s, x, i, d, mean, 1) / (double)d + p->eps);
        __m512d vi = _mm512_set1_pd(inv);
        for (i = 0; i + 8 <= d; i += 8) {
            __m512d v = _mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), vm), vi);
            if (p->gamma)
                v = _mm512_mul_pd(v, _mm512_cvtps_pd(_mm256_loadu_ps(p->gamma + i)));
            if (p->beta)
                v = _mm512_add_pd(v, _mm512_cvtps_pd(_mm256_loadu_ps(p->beta + i)));
            _mm256_storeu_ps(y + i, _mm512_cvtpd_ps(v));
        }
        ln_scale(p, x, y, i, mean, inv);
        row_low(p, r, y);
    }
}
#endif

static int ln_portable; /* tq_cpu_layernorm_force_portable: the tests' switch */

void tq_cpu_layernorm_force_portable(int on)
{
    __atomic_store_n(&ln_portable, on, __ATOMIC_RELAXED);
}

/* Two passes in double: the mean, then the mean square deviation from it;
 * unlike E[x^2] - E[x]^2 this does not cancel when the mean is large. */
static void layernorm_rows(void *ctx, int64_t begin, int64_t end)
{
    const rows *p = ctx;
    const int64_t d = p->d;
#ifdef TQ_HAVE_ISA_VARIANTS
    if (tq_cpu_isa() >= 2 && !__atomic_load_n(&ln_portable, __ATOMIC_RELAXED)) {
        layernorm_rows512(p, begin, end);
        return;
    }
#endif
    for (int64_t r = begin; r < end; r++) {
        const float *x = p->x + r * d;
        float *y = p->y + r * d;
        double mean = sum(x, d) / (double)d;
        double inv = 1.0 / sqrt(sum_sq_dev(x, d, mean) / (double)d + p->eps);
        ln_scale(p, x, y, 0, mean, inv);
        row_low(p, r, y);
    }
}

tq_status tq_cpu_layernorm(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                           const tq_tensor *beta, float eps, tq_tensor *y)
{
    (void)ctx;
    rows p = {tq_cpu_ptr(x), tq_cpu_ptr(y), gamma ? tq_cpu_ptr(gamma) : NULL,
              beta ? tq_cpu_ptr(beta) : NULL, tq_cpu_cols(x), eps, NULL, TQ_DTYPE_F32};
    tq_parallel_for(tq_cpu_rows(x), row_chunk(p.d), layernorm_rows, &p);
    return TQ_OK;
}

tq_status tq_cpu_layernorm_low(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                               const tq_tensor *beta, float eps, tq_tensor *y, tq_tensor *low)
{
    (void)ctx;
    rows p = {tq_cpu_ptr(x), tq_cpu_ptr(y), gamma ? tq_cpu_ptr(gamma) : NULL,
              beta ? tq_cpu_ptr(beta) : NULL, tq_cpu_cols(x), eps, tq_cpu_ptr(low), low->dtype};
    tq_parallel_for(tq_cpu_rows(x), row_chunk(p.d), layernorm_rows, &p);
    return TQ_OK;
}
