/* gelu.c: GELU in its exact erf form, 0.5 x (1 + erf(x / sqrt 2)), on the CPU,
 * to about 1e-10 relative before the final rounding to f32. libm's erf and
 * erfc take 20-35 ns an element, which would make GELU a third of a BERT
 * encoder's time; this loop is branch-free double arithmetic that the
 * compiler vectorizes, ~2 ns an element on one AVX2 core. */
#include "../internal.h"
#include "cpu.h"
#include "vmath.h"

/* erfc(t) = exp(-t^2) g(t) for t >= 0, g a polynomial in s, where
 * u = 1 / (1 + t/2) on [U_MIN, 1] maps onto s in [-1, 1]. Fitted by
 * scripts/gelu-fit.py: T = 10.5, degree 12, max relative error 8.2e-11.
 * Beyond T, x Phi(x) is below half the smallest f32 subnormal. */
#define T_MAX 10.5
#define U_MIN (1.0 / (1.0 + 0.5 * T_MAX))
static const double erfc_poly[13] = {
    0.33025705900839142,     0.42892066330987855,     0.19746110787684534,
    0.047137420883527154,    -0.0010205336364466958,  -0.0030473133978105573,
    8.0355043836439225e-05,  0.00026457881888193856,  -3.9943345143307089e-05,
    -2.2376964097138935e-05, 8.9526262859340292e-06,  1.0774364679758807e-06,
    -1.0477422842814866e-06,
};

typedef struct gelu_job {
    const float *x;
    float *y;
} gelu_job;

static inline __attribute__((always_inline)) float gelu_one(float xf)
{
    double x = xf;
    double t_raw = fabs(x) * M_SQRT1_2;
    int inside = t_raw < T_MAX; /* 0 for NaN too: x keeps it NaN below */
    double t = tq_select(inside, t_raw, T_MAX);
    double u = 1.0 / (1.0 + 0.5 * t);
    double s = (u - U_MIN) * (2.0 / (1.0 - U_MIN)) - 1.0;
    /* Estrin's order: the loop's speed is its dependent chain, a third of
     * Horner's (same fma() argument as tq_exp_neg_fma for the bits) */
    const double *c = erfc_poly;
    double s2 = s * s, s4 = s2 * s2, s8 = s4 * s4;
    double h0 = fma(fma(c[3], s, c[2]), s2, fma(c[1], s, c[0]));
    double h1 = fma(fma(c[7], s, c[6]), s2, fma(c[5], s, c[4]));
    double h2 = fma(fma(c[11], s, c[10]), s2, fma(c[9], s, c[8]));
    double g = fma(fma(c[12], s4, h2), s8, fma(h1, s4, h0));
    /* 0.5 erfc(|x| / sqrt 2); 0 beyond T, where it is below any f32 result */
    double half_erfc = tq_select(inside, 0.5 * tq_exp_neg_fma(-t * t) * g, 0.0);
    /* Phi(x) = 0.5 erfc(-x / sqrt 2): no cancellation for x < 0 */
    double phi = tq_select(x < 0, half_erfc, 1.0 - half_erfc);
    /* gelu(-inf) is its limit, -0, not the -inf * 0 = NaN of the formula */
    return (float)tq_select(x == -INFINITY, -0.0, x * phi);
}

#define GELU_LOOP(name, attr)                                                      \
    attr static void name(const float *x, float *y, int64_t n)                     \
    {                                                                              \
        for (int64_t i = 0; i < n; i++)                                            \
            y[i] = gelu_one(x[i]);                                                 \
    }

#ifdef TQ_HAVE_ISA_VARIANTS
GELU_LOOP(gelu_avx512, TQ_TARGET_AVX512)
GELU_LOOP(gelu_avx2, TQ_TARGET_AVX2)
#endif
GELU_LOOP(gelu_base, )

typedef void (*gelu_fn)(const float *x, float *y, int64_t n);

static gelu_fn gelu_pick(void)
{
    switch (tq_cpu_isa()) {
#ifdef TQ_HAVE_ISA_VARIANTS
    case 2: return gelu_avx512;
    case 1: return gelu_avx2;
#endif
    default: return gelu_base;
    }
}

static void gelu_range(void *ctx, int64_t begin, int64_t end)
{
    const gelu_job *p = ctx;
    static gelu_fn fn;
    gelu_fn f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
    if (!f) {
        f = gelu_pick();
        __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
    }
    f(p->x + begin, p->y + begin, end - begin);
}

tq_status tq_cpu_gelu(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    (void)ctx;
    gelu_job p = {tq_cpu_ptr(x), tq_cpu_ptr(y)};
    tq_parallel_for(tq_tensor_numel(x), 4096, gelu_range, &p);
    return TQ_OK;
}
