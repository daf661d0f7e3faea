/* gelu_bf16.c: GELU rounded to bf16, for a product whose caller wants only
 * the bf16 copy of its C (tq_matmul_then.low_only): the first feed-forward
 * of tq-embed --precision bf16, whose GELU output goes on to the second
 * product in bf16 only. Rounding to bf16 moves a value by up to 2^-9 of
 * itself, so an exact GELU (gelu.c: ~40 instructions for 16 values, 4
 * units of 2^-23) buys nothing there; this one takes ~20.
 *
 * GELU(x) = x Phi(x), Phi(t) for t = |x| in [0, 5.5] by a polynomial of
 * degree 4 on each of 16 equal pieces (scripts/gelu-bf16-fit.py: largest
 * error 1.54e-7 with Horner's rule in f32), the piece's coefficients picked
 * per lane by permutes; Phi(x) = 1 - Phi(|x|) for x < 0 (exact in f32: Phi
 * >= 1/2 there). Beyond |x| = 5.5, 1 - Phi < 1.9e-8: x >= 5.5 takes the
 * last piece's end and x < -5.5 gives -0 (the limit at -inf, where x Phi(x)
 * would be -inf * 0). So GELU is within 1.6e-7 |x| + 1e-7 |GELU(x)| of
 * exact before its rounding to nearest even (VCVTNE2PS2BF16, which flushes
 * subnormal results to zero); NaN stays NaN. Each lane on its own: the bits
 * depend on x alone. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TQ_GELU_BF16_X86 1
#define TQ_TARGET_BF16DQ __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))

enum { PIECES = 16, DEG = 4 };
static const float T_END = 5.5f;
static const float phi_piece[5][16] = {
    {0.000115768416, 0.000284248061, 0.00030987215, 0.000209614111, 6.64876061e-05, -4.11997753e-05, -8.44032329e-05, -7.83530631e-05, -5.26137665e-05, -2.82178353e-05, -1.2572792e-05, -4.74875742e-06, -1.53865426e-06, -4.30988706e-07, -1.04922862e-07, -2.22860574e-08},
    {-0.00280027906, -0.00229798956, -0.00111090345, 0.000158231487, 0.000995638547, 0.00124176661, 0.00105641154, 0.000707501138, 0.000391941372, 0.000183868629, 7.40136893e-05, 2.57756037e-05, 7.80905793e-06, 2.06624554e-06, 4.78864877e-07, 9.74199352e-08},
    {3.51295821e-05, -0.00761974417, -0.0127998879, -0.0143033052, -0.0126143834, -0.00926177949, -0.00579748815, -0.00313328253, -0.00147318072, -0.00060551503, -0.000218299436, -6.91946116e-05, -1.93174001e-05, -4.75624665e-06, -1.03388936e-06, -1.98582157e-07},
    {0.137132049, 0.129266709, 0.108273007, 0.0805816427, 0.0532881357, 0.0313111432, 0.0163469538, 0.00758297043, 0.0031253749, 0.00114451267, 0.000372383627, 0.000107648542, 2.76483843e-05, 6.30916793e-06, 1.27912278e-06, 2.30402776e-07},
    {0.50000006, 0.634482861, 0.754116118, 0.848788142, 0.915434241, 0.95717001, 0.980419934, 0.991941392, 0.997020245, 0.999011815, 0.999706447, 0.999921978, 0.999981463, 0.999996066, 0.999999225, 0.999999881},
};

TQ_TARGET_BF16DQ static inline __m512 gelu16(__m512 x, const __m512 *c)
{
    __m512 ax = _mm512_min_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), x), _mm512_set1_ps(T_END));
    __m512 ts = _mm512_mul_ps(ax, _mm512_set1_ps(PIECES / T_END));
    __m512 piece = _mm512_min_ps(_mm512_roundscale_ps(ts, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                                 _mm512_set1_ps(PIECES - 1));
    __m512i idx = _mm512_cvttps_epi32(piece);
    __m512 u = _mm512_sub_ps(ts, piece);
    __m512 p = _mm512_permutexvar_ps(idx, c[0]);
    for (int d = 1; d <= DEG; d++)
        p = _mm512_fmadd_ps(p, u, _mm512_permutexvar_ps(idx, c[d]));
    __m512 phi = _mm512_mask_sub_ps(p, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ),
                                    _mm512_set1_ps(1.0f), p);
    __m512 y = _mm512_mul_ps(x, phi);
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-T_END), _CMP_LT_OQ),
                              _mm512_set1_ps(-0.0f));
}

TQ_TARGET_BF16DQ static void rows_avx512(const float *x, int64_t ldx, int rows, int n,
                                         uint16_t *y, int64_t ldy)
{
    __m512 c[DEG + 1];
    for (int d = 0; d <= DEG; d++)
        c[d] = _mm512_loadu_ps(phi_piece[d]);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j += 32) {
            int live = n - j < 32 ? n - j : 32;
            __mmask16 m0 = (__mmask16)(live >= 16 ? 0xffff : (1u << live) - 1);
            __mmask16 m1 = (__mmask16)(live >= 32 ? 0xffff : live > 16 ? (1u << (live - 16)) - 1 : 0);
            __mmask32 m = live == 32 ? 0xffffffffu : (1u << live) - 1;
            const float *xr = x + r * ldx + j;
            __m512 a = gelu16(_mm512_maskz_loadu_ps(m0, xr), c);
            __m512 b = gelu16(_mm512_maskz_loadu_ps(m1, xr + 16), c);
            /* the second operand's 16 go to the low half */
            _mm512_mask_storeu_epi16(y + r * ldy + j, m, (__m512i)_mm512_cvtne2ps_pbh(b, a));
        }
}
#endif

int tq_cpu_gelu_bf16_use(void)
{
#ifdef TQ_GELU_BF16_X86
    __builtin_cpu_init();
    return tq_cpu_gemm_bf16_supported() && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

void tq_cpu_gelu_bf16_rows(const float *x, int64_t ldx, int rows, int n, uint16_t *y,
                           int64_t ldy)
{
#ifdef TQ_GELU_BF16_X86
    rows_avx512(x, ldx, rows, n, y, ldy);
#else
    (void)x, (void)ldx, (void)rows, (void)n, (void)y, (void)ldy;
#endif
}
