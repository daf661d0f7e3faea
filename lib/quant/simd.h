/* simd.h: the vector kernels of simd.c, for codes.c; each writes the bytes of
 * its portable counterpart. Call them only when tq_quant_have_avx2() says so. */
#ifndef TQ_QUANT_SIMD_H
#define TQ_QUANT_SIMD_H

#include "tq.h"

/* 1 when the AVX2 kernels may run (CPUID, and not forced off for a test). */
int tq_quant_have_avx2(void);
/* Tests: 1 runs the portable loops even where AVX2 is present. */
void tq_quant_force_portable(int on);

/* max |x| of a row into *amax; returns 0 when the row holds NaN or infinity. */
int tq_quant_amax_avx2(const float *x, int64_t d, float *amax);
void tq_quant_int8_row_avx2(const float *x, int64_t d, int8_t *q, float s);
/* n values (a multiple of 32) to ggml blocks */
void tq_quant_q8_0_avx2(const float *x, int64_t n, unsigned char *dst);
void tq_quant_q4_0_avx2(const float *x, int64_t n, unsigned char *dst);
void tq_quant_bits_row_avx2(const float *x, int64_t d, unsigned char *dst);
/* y = q * s for a row of int8 codes (exact products, as the portable loop) */
void tq_quant_int8_back_avx2(const int8_t *q, int64_t d, float s, float *y);

#endif
