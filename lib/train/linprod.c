/* linprod.c: the portable loops of linprod.h (any kp), which define the
 * order of the sums the vector kernels keep, and the choice of kernels by
 * CPUID. The loops are element-wise over the outputs (ISO C does not
 * contract a * b + c), so the compiler's vectors round as the scalar code. */
#include "linprod.h"
#include "../cpu/vmath.h"

static void forward_base(const double *x, int64_t nr, int64_t dim, const double *w, const double *b,
                         int64_t kp, double *z)
{
    enum { RB = 8 }; /* rows a pass over w: each row's sum still in feature order */
    for (int64_t i0 = 0; i0 < nr; i0 += RB) {
        int64_t n = nr - i0 < RB ? nr - i0 : RB;
        double *zb = z + i0 * kp;
        for (int64_t i = 0; i < n; i++)
            for (int64_t o = 0; o < kp; o++)
                zb[i * kp + o] = b[o];
        for (int64_t j = 0; j < dim; j++) {
            const double *wj = w + j * kp;
            for (int64_t i = 0; i < n; i++) {
                double v = x[(i0 + i) * dim + j], *zr = zb + i * kp;
                for (int64_t o = 0; o < kp; o++)
                    zr[o] += v * wj[o];
            }
        }
    }
}

static void gradient_base(const double *x, int64_t nr, int64_t dim, const float *wt,
                          const double *dz, int64_t kp, double *g)
{
    for (int64_t r = 0; r < nr; r++) {
        const double *xr = x + r * dim;
        const double *d = dz + r * kp;
        double wi = wt ? wt[r] : 1.0;
        if (kp == 1) { /* contiguous over the features: vectorized */
            double d0 = d[0];
            for (int64_t j = 0; j < dim; j++)
                g[j] += (xr[j] * wi) * d0;
            continue;
        }
        for (int64_t j = 0; j < dim; j++) {
            double v = xr[j] * wi, *gj = g + j * kp;
            for (int64_t o = 0; o < kp; o++)
                gj[o] += v * d[o];
        }
    }
}

static void widen_base(const float *x, size_t n, double *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = x[i];
}

static const tq_linprod base = {forward_base, gradient_base, widen_base, "portable"};

const tq_linprod *tq_linprod_for(int isa)
{
    if (isa > tq_cpu_isa())
        return NULL;
#ifdef TQ_HAVE_ISA_VARIANTS
    if (isa >= 1)
        return &tq_linprod_avx2;
#endif
    return &base;
}

const tq_linprod *tq_linprod_best(void)
{
    static const tq_linprod *best; /* the same answer from every thread */
    const tq_linprod *p = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (!p)
        __atomic_store_n(&best, p = tq_linprod_for(tq_cpu_isa()), __ATOMIC_RELAXED);
    return p;
}
