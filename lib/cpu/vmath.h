/* vmath.h: branch-free scalar math that compilers vectorize, for the CPU
 * kernels' hot loops, and the choice of instruction set those loops are
 * compiled for (each is built once per ISA with target attributes). */
#ifndef TQ_CPU_VMATH_H
#define TQ_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* c ? a : b on the bits of values computed anyway. With FP exceptions
 * observable in C, GCC will not turn a ?: whose arms compute into a blend
 * (it sinks the arithmetic into the arm, then may not speculate it); masks
 * it vectorizes. */
static inline double tq_select(int c, double a, double b)
{
    uint64_t ua, ub, m = -(uint64_t)(c != 0);
    memcpy(&ua, &a, 8);
    memcpy(&ub, &b, 8);
    uint64_t r = (ua & m) | (ub & ~m);
    double d;
    memcpy(&d, &r, 8);
    return d;
}

/* 2^n for the integer n = k - shifter that adding shifter (0x1.8p52) rounded
 * into k's low bits, built from those bits; n in [-1022, 1023]. */
static inline double tq_pow2_shifted(double k, double shifter)
{
    uint64_t kb, sb;
    memcpy(&kb, &k, 8);
    memcpy(&sb, &shifter, 8);
    uint64_t scale_bits = (kb - sb + 1023) << 52; /* n + 1023 in the exponent */
    double scale;
    memcpy(&scale, &scale_bits, 8);
    return scale;
}

/* exp(x) for x in [-708, 0]: x = n ln2 + r with |r| <= ln2/2, exp(r) by its
 * Taylor series to degree 12 (error < 1e-15), 2^n built from its bits. n ln2
 * is off by at most |n| 2.3e-17 < 3e-14. Far more than f32 results need. */
static inline double tq_exp_neg(double x)
{
    const double shifter = 0x1.8p52; /* adding it rounds to an integer */
    double k = x * M_LOG2E + shifter, n = k - shifter;
    double r = x - n * M_LN2;
    static const double inv_fact[13] = {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800,
                                        1.0 / 362880,    1.0 / 40320,    1.0 / 5040,
                                        1.0 / 720,       1.0 / 120,      1.0 / 24,
                                        1.0 / 6,         1.0 / 2,        1.0,
                                        1.0};
    double e = inv_fact[0];
    for (int i = 1; i < 13; i++)
        e = e * r + inv_fact[i];
    return e * tq_pow2_shifted(k, shifter);
}

/* a * b + c, rounded once where fused (a constant in the build for FMA: the
 * instruction) or twice (the baseline build, where libm's exact emulation
 * of fma() would cost ~30 ns a call). */
static inline __attribute__((always_inline)) double tq_fma(double a, double b, double c, int fused)
{
    return fused ? fma(a, b, c) : a * b + c;
}

/* tq_exp_neg's result to the same accuracy in a third of its dependent
 * chain, for loops whose speed is their latency: the Taylor polynomial to
 * degree 11 (error < 6e-15 on |r| <= ln2/2) in Estrin's order, with fused
 * multiply-adds where the build has them. */
static inline __attribute__((always_inline)) double tq_exp_neg_estrin(double x, int fused)
{
#define F(a, b, c) tq_fma(a, b, c, fused)
    const double shifter = 0x1.8p52; /* adding it rounds to an integer */
    double k = F(x, M_LOG2E, shifter), n = k - shifter;
    double r = F(-n, M_LN2, x);
    double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
    double h0 = F(F(r, 1.0 / 6, 1.0 / 2), r2, F(r, 1.0, 1.0));
    double h1 = F(F(r, 1.0 / 5040, 1.0 / 720), r2, F(r, 1.0 / 120, 1.0 / 24));
    double h2 = F(F(r, 1.0 / 39916800, 1.0 / 3628800), r2, F(r, 1.0 / 362880, 1.0 / 40320));
    double e = F(h2, r8, F(h1, r4, h0));
#undef F
    return e * tq_pow2_shifted(k, shifter);
}

/* Which build of a vectorized loop to run: 2 AVX-512 (F, DQ, VL), 1 AVX2 +
 * FMA, 0 the baseline. __builtin_cpu_supports checks the OS support too. */
static inline int tq_cpu_isa(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return 2;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 1;
#endif
    return 0;
}

#if defined(__x86_64__) || defined(__i386__)
#define TQ_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))
#define TQ_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TQ_HAVE_ISA_VARIANTS 1
#endif

#endif
