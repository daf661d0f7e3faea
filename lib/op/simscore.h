/* simscore.h: the exact similarity score of one pair of rows, shared by the
 * CPU simtopk op and the similarity modes of lib/simmat, so that top-k lists,
 * thresholds and dedup decisions agree to the bit. A matrix product ranks
 * candidates fast, but its last bits depend on how it blocks the work (and so
 * on shapes, threads and the BLAS); these scores do not: a fixed order of
 * double-precision additions over exact products, rounded once to f32. */
#ifndef TQ_SIMSCORE_H
#define TQ_SIMSCORE_H

#include "tq.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

/* The order of operations, fixed: lane j (0..7) sums the exact double
 * products (or squared differences) of the elements i = j mod 8 below the
 * last multiple of 8, lane 0 then the rest in order, and the lanes add up as
 * ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)). simscore.c runs it with
 * the widest vectors the CPU has; each gives these bits. */
double tq_simscore_dot(const float *a, const float *b, int64_t d);
double tq_simscore_l2(const float *a, const float *b, int64_t d);
/* The same with the portable code only (for the tests: the vector versions
 * must match it bit for bit). */
double tq_simscore_dot_portable(const float *a, const float *b, int64_t d);
double tq_simscore_l2_portable(const float *a, const float *b, int64_t d);

/* The score of a pair of tq-quantize's codes (tq_op_codetopk's), of dtype
 * dt: i8 (scales sa and sb) the integer dot product times sa times sb
 * rounded once to f32 (tq_codescore_i8 from the dot product); bit (d of
 * them, padded to whole bytes with zeros) minus the number that differ;
 * q8_0 or q4_0 (a; b is q8_0) ggml's reference block dot product. */
float tq_codescore_i8(int32_t dot, float a, float b);
float tq_codescore(tq_dtype dt, const unsigned char *a, const unsigned char *b, int64_t d, float sa,
                   float sb);

/* The score of a pair: metric 0 (dot) a . b, metric 1 (L2) -||a - b||^2,
 * rounded once to f32. */
static inline float tq_simscore(int metric, const float *a, const float *b, int64_t d)
{
    /* 0 - x, not -x: a row against itself scores +0, not -0 */
    return metric ? (float)(0.0 - tq_simscore_l2(a, b, d)) : (float)tq_simscore_dot(a, b, d);
}

/* The order of top-k lists, the same wherever lists are built or merged (the
 * CPU and Vulkan simtopk, tq-simmat --merge): 1 if (av, ai) ranks before
 * (bv, bi): larger first, NaN below every number, ties to the lower index,
 * an empty slot (idx < 0) below all. */
static inline int tq_simscore_better(float av, int64_t ai, float bv, int64_t bi)
{
    if ((ai < 0) != (bi < 0))
        return bi < 0;
    int an = av != av, bn = bv != bv;
    if (an != bn)
        return bn;
    if (!an && av != bv)
        return av > bv;
    return ai < bi;
}

/* How far an f32 matrix product's value (any order of summation, with or
 * without FMA) may lie from tq_simscore, for rows of norms nq and nx: the
 * classic bound gamma_d = d u / (1 - d u) on sum |a_i b_i| <= nq nx, twice
 * over (the product's error and the score's rounding), plus slack for the
 * few roundings around it. For L2 the product is turned into
 * 2 a.b - ||a||^2 - ||b||^2, all bounded by (nq + nx)^2. Infinite when the
 * bound is meaningless (huge d or values): then nothing may be skipped. */
static inline double tq_simscore_margin(int metric, int64_t d, double nq, double nx)
{
    const double u = 0x1p-24;
    double du = (double)d * u;
    if (du >= 0.25)
        return INFINITY;
    double gam = du / (1 - du);
    double m = metric ? (2 * gam + 16 * u) * (nq + nx) * (nq + nx) : (2 * gam + 8 * u) * nq * nx;
    return isfinite(m) ? m * (1 + 1e-6) + 1e-300 : INFINITY;
}

/* A bound m of an f32 product's error (as above) widened for bf16 operands
 * (tq_device_set_rank_precision), given eq >= ||q - q'|| and ex >= ||x - x'||
 * for q', x' the operands as rounded (to nearest; subnormals read as zero):
 * q . x - q' . x' = q' . (x - x') + (q - q') . x, so by Cauchy-Schwarz the
 * rounding moves the product by at most ||q'|| ex + eq ||x||, ||q'|| <=
 * (1 + u) ||q|| with u = 2^-8 (8 significant bits); the f32 sums of those
 * exact products are within m for operands (1 + u) larger; values under
 * 2^-126 read (and sums written) as zero, each off by 2^-126 at most, fewer
 * than d (1 + ||q|| + ||x||) of them in all. L2 ranks by 2 q . x - ||x||^2:
 * twice the product's error. Norms past 2^100: no bound (bf16 rounding may
 * overflow to infinity); nor for a NaN residual. The residuals measured row
 * by row (the CPU op's) are about half the worst case below. */
static inline double tq_simscore_margin_bf16_res(int metric, int64_t d, double m, double nq,
                                                 double nx, double eq, double ex)
{
    if (!isfinite(m) || !(nq < 0x1p100 && nx < 0x1p100) || !(eq >= 0 && ex >= 0))
        return INFINITY;
    const double u = 0x1p-8;
    double e = (1 + u) * nq * ex + eq * nx + 0x1p-125 * (double)d * (1 + nq + nx);
    return (m * (1 + u) * (1 + u) + (metric ? 2 : 1) * e) * (1 + 1e-6);
}

/* The same for residuals known only by their worst case: each element within
 * u of itself, so eq = u ||q|| and ex = u ||x||, (2u + u^2) ||q|| ||x|| in
 * all (the devices' bound: they do not measure the residuals). */
static inline double tq_simscore_margin_bf16(int metric, int64_t d, double m, double nq,
                                             double nx)
{
    const double u = 0x1p-8;
    return tq_simscore_margin_bf16_res(metric, d, m, nq, nx, u * nq, u * nx);
}

#endif
