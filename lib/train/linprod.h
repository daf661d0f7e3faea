/* linprod.h: the two products of the convex models' objective (lbfgs.c),
 * z = x W + b over a block of rows and the weight gradient x^T dz, in
 * float64. Each output's sum runs in one fixed order, every product rounded
 * and then added (never fused), so that the portable loops and the vector
 * kernels give the same bits: a model's bytes do not depend on the CPU's
 * ISA. Not public. */
#ifndef TQ_TRAIN_LINPROD_H
#define TQ_TRAIN_LINPROD_H

#include <stddef.h>
#include <stdint.h>

/* Outputs are held kp apart, kp = tq_linprod_stride(k): 1 for one output,
 * else k rounded up to 4 (a vector of doubles); the caller zeroes the
 * padding of w, b and dz. x is row-major, dim values a row: the features
 * in float64 (a block of rows converted once, so that the kernels broadcast
 * them from memory rather than convert each one per output tile). */
typedef struct tq_linprod {
    /* z[i kp + o] = b[o] + x[i][0] w[o] + x[i][1] w[kp + o] + ..., the sum in
     * feature order, for rows i < nr and o < kp */
    void (*forward)(const double *x, int64_t nr, int64_t dim, const double *w, const double *b,
                    int64_t kp, double *z);
    /* g[j kp + o] += (x[r][j] wt[r]) dz[r kp + o], for r = 0, 1, ... nr - 1 in
     * that order, j < dim, o < kp (wt NULL: x[r][j] alone, which is the same
     * bits as x[r][j] 1). g holds tq_linprod_grad_rows(dim) rows of kp. */
    void (*gradient)(const double *x, int64_t nr, int64_t dim, const float *wt, const double *dz,
                     int64_t kp, double *g);
    /* out[i] = x[i], i < n: a block of features widened (exactly) for the above */
    void (*widen)(const float *x, size_t n, double *out);
    const char *name;
} tq_linprod;

static inline int64_t tq_linprod_stride(int64_t k) { return k == 1 ? 1 : (k + 3) & ~(int64_t)3; }
/* the rows of g: dim rounded up to 4, so a kernel's last vector of one
 * output's gradient (kp 1) stays inside it */
static inline int64_t tq_linprod_grad_rows(int64_t dim) { return (dim + 3) & ~(int64_t)3; }

/* The kernels for an ISA level (tq_cpu_isa's: 0 the portable loops, 1 AVX2;
 * 2, AVX-512, takes AVX2's), NULL above the CPU's; tq_linprod_best the
 * CPU's own, chosen once by CPUID. */
const tq_linprod *tq_linprod_for(int isa);
const tq_linprod *tq_linprod_best(void);

/* linprod_avx2.c */
extern const tq_linprod tq_linprod_avx2;

#endif
