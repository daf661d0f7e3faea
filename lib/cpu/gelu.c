/* gelu.c: GELU in its exact erf form, 0.5 x (1 + erf(x / sqrt 2)), on the CPU.
 * libm's erf and erfc take 20-35 ns an element, which would make GELU a third
 * of a BERT encoder's time. Two ways here:
 *  - AVX2 and AVX-512 machines: f32 arithmetic, 8 or 16 values an
 *    instruction (the same operations in every lane: the same bits), each
 *    result within 4 units of 2^-23 relative of the exact value (at most
 *    2.73 over every f32 in [-16, 16]: the f32 steps' roundings add up: exp,
 *    the fitted polynomial, three products); on one Zen 4 core, 0.96 ns an
 *    element with 8 lanes, 0.67 with 16;
 *  - the baseline build, and x below -12.5 (or NaN) everywhere: branch-free
 *    double arithmetic that the compiler vectorizes, to about 1e-10 relative
 *    before the final rounding (~3.5 ns an element as AVX2 code).
 * Which way an element takes depends on its value alone, never on where the
 * threads' ranges fall, so the bytes do not depend on the thread count. */
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

/* GELU of a block of at most GELU_BLOCK values, in stages over the block
 * rather than value by value: each stage's loop is short, so the processor
 * overlaps many values' dependent chains (value by value, one value's chain
 * of ~100 cycles filled the reorder window: 4.3 against 3.1-3.7 ns). */
enum { GELU_BLOCK = 64 };

static inline __attribute__((always_inline)) void gelu_block(const float *x, float *y, int n,
                                                             int fused)
{
#define F(a, b, c) tq_fma(a, b, c, fused)
    double t[GELU_BLOCK], s[GELU_BLOCK], g[GELU_BLOCK], e[GELU_BLOCK];
    for (int i = 0; i < n; i++) {
        double t_raw = fabs((double)x[i]) * M_SQRT1_2;
        /* clamped at T (NaN too: x keeps it NaN below), so t < T says inside */
        t[i] = tq_select(t_raw < T_MAX, t_raw, T_MAX);
        double u = 1.0 / (1.0 + 0.5 * t[i]);
        s[i] = (u - U_MIN) * (2.0 / (1.0 - U_MIN)) - 1.0;
    }
    /* Estrin's order: a third of Horner's dependent chain */
    const double *c = erfc_poly;
    for (int i = 0; i < n; i++) {
        double v = s[i], v2 = v * v, v4 = v2 * v2, v8 = v4 * v4;
        double h0 = F(F(c[3], v, c[2]), v2, F(c[1], v, c[0]));
        double h1 = F(F(c[7], v, c[6]), v2, F(c[5], v, c[4]));
        double h2 = F(F(c[11], v, c[10]), v2, F(c[9], v, c[8]));
        g[i] = F(F(c[12], v4, h2), v8, F(h1, v4, h0));
    }
    for (int i = 0; i < n; i++)
        e[i] = tq_exp_neg_estrin(-t[i] * t[i], fused);
    for (int i = 0; i < n; i++) {
        double xd = x[i];
        /* 0.5 erfc(|x| / sqrt 2); 0 beyond T, where it is below any f32 result */
        double half_erfc = tq_select(t[i] < T_MAX, 0.5 * e[i] * g[i], 0.0);
        /* Phi(x) = 0.5 erfc(-x / sqrt 2): no cancellation for x < 0 */
        double phi = tq_select(xd < 0, half_erfc, 1.0 - half_erfc);
        /* gelu(-inf) is its limit, -0, not the -inf * 0 = NaN of the formula */
        y[i] = (float)tq_select(xd == -INFINITY, -0.0, xd * phi);
    }
#undef F
}

/* fused: the build has FMA instructions (AVX2 and AVX-512 ones) */
#define GELU_LOOP(name, attr, fused)                                               \
    attr static void name(const float *x, float *y, int64_t n)                     \
    {                                                                              \
        for (int64_t i = 0; i < n; i += GELU_BLOCK)                                \
            gelu_block(x + i, y + i, n - i < GELU_BLOCK ? (int)(n - i) : GELU_BLOCK, \
                       fused);                                                     \
    }

GELU_LOOP(gelu_base, , 0)

#ifdef TQ_HAVE_ISA_VARIANTS
#include <immintrin.h>

/* The f32 way: erfc(t) = exp(-t^2) g(t) again, g now by a polynomial of
 * degree 8 on each of 8 equal pieces of t in [0, TF] (scripts/gelu-fit.py),
 * the piece's coefficients picked per lane by permutes; exp(-t^2) with t^2 =
 * x^2 / 2 carried as hi + lo, since t^2's own rounding would cost up to 80
 * units at t = 8. TF is where x = -12.5: below, x Phi(x) nears the smallest
 * normal f32 and the double way takes over. */
static const float erfc_piece[9][8] = {
    {0.589768112, 0.297613919, 0.192897558, 0.141442925, 0.111308493, 0.091635488, 0.077820465, 0.0676008165},
    {-0.263381064, -0.078399919, -0.0346706994, -0.0190379117, -0.0119115049, -0.00811881572, -0.00587537745, -0.0044433563},
    {0.0996056795, 0.0190472901, 0.00596437044, 0.00249559013, 0.00125273003, 0.000710607681, 0.000439623196, 0.000290060736},
    {-0.0333249345, -0.00432506902, -0.000986505765, -0.000319169601, -0.000129584747, -6.14687306e-05, -3.26082263e-05, -1.88080594e-05},
    {0.0101131089, 0.00092656567, 0.000157450268, 3.98874035e-05, 1.31939378e-05, 5.25692349e-06, 2.39810993e-06, 1.21152516e-06},
    {-0.00281589292, -0.000188251506, -2.43042032e-05, -4.87606076e-06, -1.32295258e-06, -4.44613846e-07, -1.74894296e-07, -7.75347786e-08},
    {0.00074062089, 3.66685235e-05, 3.64443213e-06, 5.84225404e-07, 1.30763411e-07, 3.72078404e-08, 1.26525164e-08, 4.93078289e-09},
    {-0.000204879922, -7.34883224e-06, -5.5546883e-07, -7.07036776e-08, -1.30106459e-08, -3.12821946e-09, -9.18451204e-10, -3.1438388e-10},
    {4.56078124e-05, 1.29502416e-06, 7.80959084e-08, 8.10962941e-09, 1.24684962e-09, 2.5589314e-10, 6.52995297e-11, 1.97201352e-11},
};
#define TF 8.8388347648318426
enum { PIECES = 8, PIECE_DEG = 8 };
static const float X_F32_MIN = -12.5f;

TQ_TARGET_AVX2 static inline __m256 gelu8_f32(__m256 x, const __m256 *c)
{
    const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
    /* |x| clamped at 12.5: beyond, Phi(x) rounds to 1 (x > 0; x < 0 is the
     * double way's), and x^2 stays finite */
    __m256 ax = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x),
                              _mm256_set1_ps(-X_F32_MIN));
    __m256 x2 = _mm256_mul_ps(ax, ax), x2lo = _mm256_fmsub_ps(ax, ax, x2);
    /* exp(-x2 / 2): k = round(a log2 e), a - k ln 2 in two parts (the high
     * one short enough that k times it is exact), Taylor to degree 7 on
     * |r| <= 0.35 (truncation 5e-9), times 2^k (k >= -113: a normal f32) */
    __m256 a = _mm256_mul_ps(x2, _mm256_set1_ps(-0.5f));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), a);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, half);
    p = _mm256_fmadd_ps(p, r, one);
    p = _mm256_fmadd_ps(p, r, one);
    __m256i e2k = _mm256_slli_epi32(
        _mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(e2k));
    e = _mm256_fnmadd_ps(e, _mm256_mul_ps(x2lo, half), e); /* exp(-lo/2) = 1 - lo/2 */
    /* g(t) on t's piece, z in [-1, 1] across it (ts - piece is exact) */
    __m256 ts = _mm256_mul_ps(ax, _mm256_set1_ps((float)(M_SQRT1_2 * PIECES / TF)));
    __m256 piece = _mm256_min_ps(_mm256_floor_ps(ts), _mm256_set1_ps(PIECES - 1));
    __m256i idx = _mm256_cvttps_epi32(piece);
    __m256 z = _mm256_fmsub_ps(_mm256_set1_ps(2.0f), _mm256_sub_ps(ts, piece), one);
    __m256 g = _mm256_permutevar8x32_ps(c[PIECE_DEG], idx);
    for (int d = PIECE_DEG - 1; d >= 0; d--)
        g = _mm256_fmadd_ps(g, z, _mm256_permutevar8x32_ps(c[d], idx));
    __m256 half_erfc = _mm256_mul_ps(_mm256_mul_ps(e, g), half);
    /* Phi(x) = 0.5 erfc(-x / sqrt 2): no cancellation for x < 0 */
    __m256 phi = _mm256_blendv_ps(_mm256_sub_ps(one, half_erfc), half_erfc,
                                  _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_mul_ps(x, phi);
}

/* The lanes of 8 values that the f32 way leaves to the double one: those
 * below X_F32_MIN or NaN, bit j of inside clear (rare: a call of its own,
 * so that gelu8 stays small enough to inline) */
TQ_TARGET_AVX2 __attribute__((noinline, cold)) static void gelu8_outside(const float *xs, float *y,
                                                                        int inside)
{
    for (int j = 0; j < 8; j++)
        if (!(inside >> j & 1))
            gelu_block(xs + j, y + j, 1, 1);
}

/* 8 values: the f32 way, then the double way for the lanes it leaves (xs
 * keeps the inputs: y may be x). Inlined into the loop: as a call of its own
 * (the double way inlined into it), one EPYC core took 1.1 ns an element. */
TQ_TARGET_AVX2 static inline __attribute__((always_inline)) void gelu8(const float *x, float *y,
                                                                      const __m256 *c)
{
    __m256 v = _mm256_loadu_ps(x);
    int inside = _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(X_F32_MIN), _CMP_GE_OQ));
    _mm256_storeu_ps(y, gelu8_f32(v, c));
    if (__builtin_expect(inside != 0xff, 0)) {
        float xs[8];
        _mm256_storeu_ps(xs, v);
        gelu8_outside(xs, y, inside);
    }
}

TQ_TARGET_AVX2 static void gelu_avx2(const float *x, float *y, int64_t n)
{
    __m256 c[PIECE_DEG + 1];
    for (int d = 0; d <= PIECE_DEG; d++)
        c[d] = _mm256_loadu_ps(erfc_piece[d]);
    int64_t i = 0;
#pragma GCC unroll 4
    for (; i + 8 <= n; i += 8)
        gelu8(x + i, y + i, c);
    if (i < n) { /* the last few through a padded copy: each lane is on its own */
        float tx[8] = {0}, ty[8];
        memcpy(tx, x + i, (size_t)(n - i) * sizeof *tx);
        gelu8(tx, ty, c);
        memcpy(y + i, ty, (size_t)(n - i) * sizeof *ty);
    }
}

/* gelu8_f32 on 16 lanes, instruction for instruction (so the same bits in
 * every lane). Zen 4 runs a 512-bit operation as two 256-bit halves, yet
 * this is faster there: its 32 registers hold the pieces' coefficients that
 * the AVX2 loop kept reloading, and half the instructions pass the front end. */
TQ_TARGET_AVX512 static inline __attribute__((always_inline)) __m512 gelu16_f32(__m512 x,
                                                                                const __m512 *c)
{
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    __m512 ax = _mm512_min_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), x),
                              _mm512_set1_ps(-X_F32_MIN));
    __m512 x2 = _mm512_mul_ps(ax, ax), x2lo = _mm512_fmsub_ps(ax, ax, x2);
    __m512 a = _mm512_mul_ps(x2, _mm512_set1_ps(-0.5f));
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), a);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, half);
    p = _mm512_fmadd_ps(p, r, one);
    p = _mm512_fmadd_ps(p, r, one);
    __m512i e2k = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(e2k));
    e = _mm512_fnmadd_ps(e, _mm512_mul_ps(x2lo, half), e);
    __m512 ts = _mm512_mul_ps(ax, _mm512_set1_ps((float)(M_SQRT1_2 * PIECES / TF)));
    __m512 piece = _mm512_min_ps(_mm512_roundscale_ps(ts, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                                 _mm512_set1_ps(PIECES - 1));
    __m512i idx = _mm512_cvttps_epi32(piece);
    __m512 z = _mm512_fmsub_ps(_mm512_set1_ps(2.0f), _mm512_sub_ps(ts, piece), one);
    __m512 g = _mm512_permutexvar_ps(idx, c[PIECE_DEG]);
    for (int d = PIECE_DEG - 1; d >= 0; d--)
        g = _mm512_fmadd_ps(g, z, _mm512_permutexvar_ps(idx, c[d]));
    __m512 half_erfc = _mm512_mul_ps(_mm512_mul_ps(e, g), half);
    __m512 phi = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                                      _mm512_sub_ps(one, half_erfc), half_erfc);
    return _mm512_mul_ps(x, phi);
}

TQ_TARGET_AVX512 static void gelu_avx512(const float *x, float *y, int64_t n)
{
    __m512 c[PIECE_DEG + 1];
    for (int d = 0; d <= PIECE_DEG; d++) /* the 8 pieces' in both halves */
        c[d] = _mm512_broadcast_f32x8(_mm256_loadu_ps(erfc_piece[d]));
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 inside = _mm512_cmp_ps_mask(v, _mm512_set1_ps(X_F32_MIN), _CMP_GE_OQ);
        _mm512_storeu_ps(y + i, gelu16_f32(v, c));
        if (__builtin_expect(inside != 0xffff, 0)) {
            float xs[16];
            _mm512_storeu_ps(xs, v);
            gelu8_outside(xs, y + i, inside & 0xff);
            gelu8_outside(xs + 8, y + i + 8, inside >> 8);
        }
    }
    if (i < n) /* the last few as the AVX2 loop takes them: lanes are on their own */
        gelu_avx2(x + i, y + i, n - i);
}
#endif

typedef void (*gelu_fn)(const float *x, float *y, int64_t n);

/* The way for an ISA level (tq_cpu_isa's numbers), at most the CPU's. */
static gelu_fn gelu_for(int isa)
{
    switch (isa) {
#ifdef TQ_HAVE_ISA_VARIANTS
    case 2: return gelu_avx512;
    case 1: return gelu_avx2;
#endif
    default: return gelu_base;
    }
}

static int forced = -1; /* tq_cpu_gelu_force: the tests' switch */

int tq_cpu_gelu_force(int isa)
{
    if (isa > tq_cpu_isa())
        return 0;
    __atomic_store_n(&forced, isa, __ATOMIC_RELAXED);
    return 1;
}

void tq_cpu_gelu_span(const float *x, float *y, int64_t n)
{
    static gelu_fn fn;
    int isa = __atomic_load_n(&forced, __ATOMIC_RELAXED);
    gelu_fn f = isa >= 0 ? gelu_for(isa) : __atomic_load_n(&fn, __ATOMIC_RELAXED);
    if (!f) {
        f = gelu_for(tq_cpu_isa());
        __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
    }
    f(x, y, n);
}

static void gelu_range(void *ctx, int64_t begin, int64_t end)
{
    const gelu_job *p = ctx;
    tq_cpu_gelu_span(p->x + begin, p->y + begin, end - begin);
}

tq_status tq_cpu_gelu(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    (void)ctx;
    gelu_job p = {tq_cpu_ptr(x), tq_cpu_ptr(y)};
    tq_parallel_for(tq_tensor_numel(x), 4096, gelu_range, &p);
    return TQ_OK;
}
