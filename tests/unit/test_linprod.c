/* test_linprod.c: the products of tq-train's L-BFGS objective
 * (lib/train/linprod*.c). Every kernel the CPU runs gives the bytes of the
 * portable loops (the order of the sums that makes a model's bytes the same
 * on every machine), over shapes that cross each edge of the kernels' tiles
 * (rows by 1, 4 and 16; features by 1, 2, 4 and 32; outputs by 4 and 12),
 * with and without row weights; each result is also held to a long double
 * reference within the rounding of its sum, so that a wrong formula both
 * followed cannot pass; and nothing is written past the outputs. */
#include "train/linprod.h"
#include "cpu/vmath.h"
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 12345.678

static double unit(void) { return (double)(check_rand64() >> 11) * 0x1p-53; }
static double urand(double lo, double hi) { return lo + (hi - lo) * unit(); }

typedef struct prob {
    int64_t nr, dim, k, kp;
    double *x, *w, *b, *dz, *g0;
    float *xf, *wt;
} prob;

static void prob_make(prob *p, int64_t nr, int64_t dim, int64_t k, int weighted)
{
    p->nr = nr, p->dim = dim, p->k = k, p->kp = tq_linprod_stride(k);
    int64_t kp = p->kp, grows = tq_linprod_grad_rows(dim);
    p->xf = malloc((size_t)(nr * dim) * 4);
    p->x = malloc((size_t)(nr * dim) * 8);
    p->w = calloc((size_t)(dim * kp), 8);
    p->b = calloc((size_t)kp, 8);
    p->dz = calloc((size_t)(nr * kp), 8);
    p->g0 = calloc((size_t)(grows * kp), 8);
    p->wt = weighted ? malloc((size_t)nr * 4) : NULL;
    for (int64_t i = 0; i < nr * dim; i++) /* standardized features: floats near 0 */
        p->xf[i] = (float)urand(-4, 4);
    for (int64_t j = 0; j < dim; j++)
        for (int64_t o = 0; o < k; o++)
            p->w[j * kp + o] = urand(-1, 1);
    for (int64_t o = 0; o < k; o++)
        p->b[o] = urand(-1, 1);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t o = 0; o < k; o++)
            p->dz[r * kp + o] = urand(-1, 1);
    for (int64_t j = 0; j < dim; j++) /* the gradient adds to what is there */
        for (int64_t o = 0; o < k; o++)
            p->g0[j * kp + o] = urand(-0.5, 0.5);
    for (int64_t r = 0; weighted && r < nr; r++)
        p->wt[r] = (float)urand(0, 2);
}

static void prob_free(prob *p)
{
    free(p->xf), free(p->x), free(p->w), free(p->b), free(p->dz), free(p->g0), free(p->wt);
}

/* z and g of one kernel set into fresh buffers, with sentinels past them */
static void run(const tq_linprod *lp, const prob *p, double **z, double **g)
{
    int64_t kp = p->kp, grows = tq_linprod_grad_rows(p->dim);
    size_t zn = (size_t)(p->nr * kp), gn = (size_t)(grows * kp);
    *z = malloc((zn + 4) * 8);
    *g = malloc((gn + 4) * 8);
    for (int s = 0; s < 4; s++)
        (*z)[zn + s] = (*g)[gn + s] = SENTINEL;
    memcpy(*g, p->g0, gn * 8);
    lp->widen(p->xf, (size_t)(p->nr * p->dim), p->x);
    lp->forward(p->x, p->nr, p->dim, p->w, p->b, kp, *z);
    lp->gradient(p->x, p->nr, p->dim, p->wt, p->dz, kp, *g);
}

/* each value against a long double sum, within the rounding of a float64
 * sum of that many terms (and of the products' own) */
static int check_ref(const char *name, const prob *p, const double *z, const double *g)
{
    int64_t kp = p->kp, bad = 0;
    const double eps = 0x1p-52;
    for (int64_t i = 0; i < p->nr; i++)
        for (int64_t o = 0; o < p->k; o++) {
            long double s = p->b[o], mag = fabs(p->b[o]);
            for (int64_t j = 0; j < p->dim; j++) {
                long double t = (long double)p->xf[i * p->dim + j] * p->w[j * kp + o];
                s += t, mag += fabsl(t);
            }
            bad += !(fabsl(z[i * kp + o] - s) <= (p->dim + 2) * eps * mag);
        }
    for (int64_t j = 0; j < p->dim; j++)
        for (int64_t o = 0; o < p->k; o++) {
            long double s = p->g0[j * kp + o], mag = fabs(p->g0[j * kp + o]);
            for (int64_t r = 0; r < p->nr; r++) {
                long double t = (long double)p->xf[r * p->dim + j] * (p->wt ? p->wt[r] : 1.0f) *
                                p->dz[r * kp + o];
                s += t, mag += fabsl(t);
            }
            bad += !(fabsl(g[j * kp + o] - s) <= (p->nr + 3) * eps * mag);
        }
    CHECK(!bad, "%s nr %lld dim %lld k %lld%s: %lld values off the long double reference", name,
          (long long)p->nr, (long long)p->dim, (long long)p->k, p->wt ? " weighted" : "", (long long)bad);
    return !bad;
}

static int sentinels_ok(const prob *p, const double *z, const double *g)
{
    size_t zn = (size_t)(p->nr * p->kp), gn = (size_t)(tq_linprod_grad_rows(p->dim) * p->kp);
    for (int s = 0; s < 4; s++)
        if (z[zn + s] != SENTINEL || g[gn + s] != SENTINEL)
            return 0;
    return 1;
}

int main(void)
{
    static const int64_t rows[] = {1, 3, 4, 5, 15, 16, 17, 33, 64};
    static const int64_t dims[] = {1, 2, 3, 4, 5, 8, 30, 33, 64, 65};
    static const int64_t ks[] = {1, 2, 3, 4, 5, 8, 10, 12, 13, 20, 25};
    const tq_linprod *base = tq_linprod_for(0);
    CHECK(base && !strcmp(base->name, "portable"), "level 0 is the portable loops");
    CHECK(tq_linprod_best() == tq_linprod_for(tq_cpu_isa()), "the best kernels are the CPU's");
    int levels = 0;
    for (int isa = 1; isa <= 2; isa++)
        levels += tq_linprod_for(isa) != NULL;
    printf("ok kernels: portable%s (CPU ISA level %d)\n", levels ? " and avx2" : " only", tq_cpu_isa());
    int64_t cases = 0;
    for (size_t a = 0; a < sizeof rows / sizeof *rows; a++)
        for (size_t c = 0; c < sizeof dims / sizeof *dims; c++)
            for (size_t e = 0; e < sizeof ks / sizeof *ks; e++)
                for (int weighted = 0; weighted < 2; weighted++) {
                    prob p;
                    prob_make(&p, rows[a], dims[c], ks[e], weighted);
                    double *z0, *g0;
                    run(base, &p, &z0, &g0);
                    int ok = check_ref("portable", &p, z0, g0);
                    CHECK(sentinels_ok(&p, z0, g0), "portable nr %lld dim %lld k %lld: wrote past its outputs",
                          (long long)p.nr, (long long)p.dim, (long long)p.k);
                    for (int isa = 1; ok && isa <= 2; isa++) {
                        const tq_linprod *lp = tq_linprod_for(isa);
                        if (!lp || lp == tq_linprod_for(isa - 1))
                            continue;
                        double *z, *g;
                        run(lp, &p, &z, &g);
                        size_t zn = (size_t)(p.nr * p.kp), gn = (size_t)(tq_linprod_grad_rows(p.dim) * p.kp);
                        CHECK(!memcmp(z, z0, zn * 8) && !memcmp(g, g0, gn * 8),
                              "%s nr %lld dim %lld k %lld%s: not the portable loops' bits", lp->name,
                              (long long)p.nr, (long long)p.dim, (long long)p.k, weighted ? " weighted" : "");
                        CHECK(sentinels_ok(&p, z, g), "%s nr %lld dim %lld k %lld: wrote past its outputs",
                              lp->name, (long long)p.nr, (long long)p.dim, (long long)p.k);
                        check_ref(lp->name, &p, z, g);
                        free(z), free(g);
                    }
                    free(z0), free(g0);
                    prob_free(&p);
                    cases++;
                }
    printf("ok %lld shapes\n", (long long)cases);
    return CHECK_DONE();
}
