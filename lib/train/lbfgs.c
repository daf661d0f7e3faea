/* lbfgs.c: the convex models (linear, logistic, softmax, listwise on a linear
 * scorer) solved as scikit-learn's lbfgs solver does: full-batch L-BFGS
 * (memory 10) with a line search for the strong Wolfe conditions, to
 * max|g| <= tol or a relative reduction of the objective below 64 eps, in
 * float64 on the host. The objective is the weighted mean loss plus
 * l2/2 |W|^2 (biases free). Its sums run over fixed chunks of
 * TQ_LBFGS_CHUNK units, each chunk summed in row order and the chunks added
 * in chunk order, whichever thread or MPI rank computed them: the same bytes
 * for any --threads and any number of ranks. */
#include "../internal.h"
#include "linprod.h"
#include "loss.h"
#include "trainer.h"

#include <float.h>
#include <math.h>

#define WAVE 32 /* chunks held at once without MPI */

static const float *feats(const tq_trainer *t) { return t->xtr ? t->xtr : t->tr->x; }

static double softplus(double z) { return (z > 0 ? z : 0) + log1p(exp(-fabs(z))); }
static double sigmoid(double z)
{
    if (z >= 0)
        return 1 / (1 + exp(-z));
    double e = exp(z);
    return e / (1 + e);
}

/* log sum exp of z[0..m), the softmax into p (its terms summed in order):
 * loss.c's polynomial exp (glibc's was 12% of digits' run) */
static double lse(const double *z, int64_t m, double *p)
{
    double mx = z[0], s = 0;
    for (int64_t j = 1; j < m; j++)
        mx = z[j] > mx ? z[j] : mx;
    tq_loss_exp_terms(z, mx, m, p);
    for (int64_t j = 0; j < m; j++)
        s += p[j];
    double inv = 1 / s;
    for (int64_t j = 0; j < m; j++)
        p[j] *= inv;
    return mx + log(s);
}

typedef struct chunk_ctx {
    tq_trainer *t;
    const double *w, *b;   /* the point's weights and biases, outputs kp apart (linprod.h) */
    int64_t kp;
    int64_t first, stride; /* the i-th task is chunk first + i stride */
    double *out;           /* the i-th task's partial at out + i (n + 1) */
    int nomem;
} chunk_ctx;

/* The partial of chunk c: its loss sum (weighted) and gradient sums, in row
 * order, into out[0] and out[1 + i]. The products run in linprod.h's
 * kernels, which give the same bits on every CPU; the losses here, row by
 * row. Rows go through them in blocks (BLOCK rows, or a group for listwise),
 * their features converted to float64 once: each output's sum still runs
 * over the rows in order, whatever the blocks. */
static int chunk_partial(const chunk_ctx *cx, int64_t c, double *out)
{
    enum { BLOCK = 64 };
    tq_trainer *t = cx->t;
    const tq_train_data *d = t->tr;
    const tq_linprod *lp = tq_linprod_best();
    int listwise = t->loss == TQ_LOSS_LISTWISE;
    int64_t dim = t->dims[0], k = t->dims[1], kp = cx->kp;
    size_t n = t->lb.n, wo = tq_net_w_offset(t->net, 0), bo = tq_net_b_offset(t->net, 0);
    int64_t u0 = c * TQ_LBFGS_CHUNK, u1 = u0 + TQ_LBFGS_CHUNK < t->units ? u0 + TQ_LBFGS_CHUNK : t->units;
    int64_t most = BLOCK;
    for (int64_t u = u0; listwise && u < u1; u++)
        most = d->gstart[u + 1] - d->gstart[u] > most ? d->gstart[u + 1] - d->gstart[u] : most;
    /* a block's features, z and dz; the weights' gradient (padding zeroed) */
    size_t xn = (size_t)(most * dim), zn = (size_t)(most * kp), gn = (size_t)(tq_linprod_grad_rows(dim) * kp);
    double *xd = calloc(xn + 2 * zn + gn, 8), *z = xd ? xd + xn : NULL, *gz = z ? z + zn : NULL;
    double *gw = gz ? gz + zn : NULL;
    if (!xd)
        return 1;
    const float *xf = feats(t);
    memset(out, 0, (n + 1) * 8);
    for (int64_t u = u0; u < u1;) {
        int64_t ue = listwise ? u + 1 : (u + BLOCK < u1 ? u + BLOCK : u1);
        int64_t a = listwise ? d->gstart[u] : u, b = listwise ? d->gstart[u + 1] : ue, nr = b - a;
        lp->widen(xf + a * dim, (size_t)(nr * dim), xd);
        lp->forward(xd, nr, dim, cx->w, cx->b, kp, z);
        if (listwise) {
            double ys = 0, l = 0;
            for (int64_t j = 0; j < nr; j++)
                ys += d->y[a + j];
            double s = lse(z, nr, gz);
            for (int64_t j = 0; j < nr; j++) {
                double tj = d->y[a + j] / ys;
                l += tj * (s - z[j]);
                gz[j] -= tj;
            }
            out[0] += l;
        } else {
            for (int64_t i = 0; i < nr; i++) {
                double l, yi = d->y[a + i], wi = d->w ? d->w[a + i] : 1.0;
                const double *zi = z + i * kp;
                double *gi = gz + i * kp;
                if (t->loss == TQ_LOSS_MSE) {
                    double e = zi[0] - yi;
                    l = e * e;
                    gi[0] = 2 * e;
                } else if (t->loss == TQ_LOSS_LOGISTIC) {
                    l = softplus(zi[0]) - yi * zi[0];
                    gi[0] = sigmoid(zi[0]) - yi;
                } else {
                    int64_t cl = (int64_t)yi;
                    l = lse(zi, k, gi) - zi[cl];
                    gi[cl] -= 1;
                }
                out[0] += wi * l;
            }
        }
        lp->gradient(xd, nr, dim, !listwise && d->w ? d->w + a : NULL, gz, kp, gw);
        for (int64_t r = a; r < b; r++) { /* the biases' gradient, in row order */
            double wi = !listwise && d->w ? d->w[r] : 1.0;
            const double *g = gz + (r - a) * kp;
            for (int64_t q = 0; q < k; q++)
                out[1 + bo + (size_t)q] += wi * g[q];
        }
        u = ue;
    }
    for (int64_t j = 0; j < dim; j++)
        memcpy(out + 1 + wo + (size_t)(j * k), gw + j * kp, (size_t)k * 8);
    free(xd);
    return 0;
}

static void chunk_run(void *ctx, int64_t begin, int64_t end)
{
    chunk_ctx *cx = ctx;
    for (int64_t i = begin; i < end; i++)
        if (chunk_partial(cx, cx->first + i * cx->stride, cx->out + i * (int64_t)(cx->t->lb.n + 1)))
            __atomic_store_n(&cx->nomem, 1, __ATOMIC_RELAXED);
}

/* The chunks on the pool's threads, or on this one alone where the work is
 * below TQ_LBFGS_PARALLEL_MIN (lbfgs.h says why). Either way the same
 * chunks, the same bits. */
static void chunks_run(chunk_ctx *cx, int64_t count)
{
    const tq_trainer *t = cx->t;
    int64_t rows = count * TQ_LBFGS_CHUNK < t->tr->n ? count * TQ_LBFGS_CHUNK : t->tr->n;
    if ((double)rows * (double)t->dims[0] * (double)cx->kp < TQ_LBFGS_PARALLEL_MIN)
        chunk_run(cx, 0, count);
    else
        tq_parallel_for(count, 1, chunk_run, cx);
}

/* A double as three floats whose sum is it exactly (for |v| below FLT_MAX
 * and above FLT_MIN 2^48): how a partial crosses the ranks' float sum, where
 * 0 + f is f exactly. Every partial takes this trip, with MPI or without, so
 * a run's bytes do not depend on MPI either. */
static void split3(double v, float *f)
{
    f[0] = (float)v;
    double r = v - f[0];
    f[1] = (float)r;
    f[2] = (float)(r - f[1]);
}
static double join3(const float *f) { return ((double)f[0] + f[1]) + f[2]; }

/* The weights and biases of x for the kernels: outputs kp apart, the
 * padding zero; x itself where it is laid out so already. */
static void pad_weights(tq_trainer *t, const double *x, chunk_ctx *cx)
{
    int64_t dim = t->dims[0], k = t->dims[1], kp = cx->kp;
    const double *w = x + tq_net_w_offset(t->net, 0), *b = x + tq_net_b_offset(t->net, 0);
    if (kp == k) {
        cx->w = w, cx->b = b;
        return;
    }
    double *wp = t->lb.wpad, *bp = wp + dim * kp;
    for (int64_t j = 0; j < dim; j++)
        memcpy(wp + j * kp, w + j * k, (size_t)k * 8);
    memcpy(bp, b, (size_t)k * 8);
    cx->w = wp, cx->b = bp;
}

/* f and g of the objective at x (g of t->lb.n values). */
static tq_status evaluate_obj(tq_trainer *t, const double *x, double *f, double *g)
{
    tq_lbfgs *lb = &t->lb;
    size_t n = lb->n, slot = n + 1;
    int64_t nch = (t->units + TQ_LBFGS_CHUNK - 1) / TQ_LBFGS_CHUNK;
    const tq_train_comm *cm = t->c.comm;
    double *acc = lb->part; /* [slot] the running sum, then WAVE partials */
    memset(acc, 0, slot * 8);
    chunk_ctx cx = {.t = t, .out = acc + slot, .kp = tq_linprod_stride(t->dims[1])};
    pad_weights(t, x, &cx);
    if (!cm) {
        for (int64_t w0 = 0; w0 < nch; w0 += WAVE) {
            int64_t wn = nch - w0 < WAVE ? nch - w0 : WAVE;
            cx.first = w0, cx.stride = 1;
            chunks_run(&cx, wn);
            if (cx.nomem)
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            for (int64_t i = 0; i < wn; i++)
                for (size_t j = 0; j < slot; j++) {
                    float h[3];
                    split3(cx.out[(size_t)i * slot + j], h);
                    acc[j] += join3(h);
                }
        }
    } else {
        /* rank r: chunks r, r + size, ...; their partials as floats in the
         * slots of a buffer every rank sums */
        int64_t mine = nch > cm->rank ? (nch - cm->rank + cm->size - 1) / cm->size : 0;
        double *part = malloc((size_t)(mine ? mine : 1) * slot * 8);
        float *fl = calloc((size_t)nch * slot * 3, 4);
        tq_status st = part && fl ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory for the partial sums");
        if (!st) {
            cx.first = cm->rank, cx.stride = cm->size, cx.out = part;
            chunks_run(&cx, mine);
            if (cx.nomem)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            for (int64_t i = 0; !st && i < mine; i++) {
                int64_t c = cm->rank + i * cm->size;
                for (size_t j = 0; j < slot; j++)
                    split3(part[(size_t)i * slot + j], fl + ((size_t)c * slot + j) * 3);
            }
        }
        /* every rank takes part in the sum, even one that failed */
        tq_status cst = fl ? cm->sum(cm->ctx, fl, (size_t)nch * slot * 3) : TQ_OK;
        if (!st)
            st = cst;
        for (int64_t c = 0; !st && c < nch; c++)
            for (size_t j = 0; j < slot; j++)
                acc[j] += join3(fl + ((size_t)c * slot + j) * 3);
        free(part);
        free(fl);
        if (st)
            return st;
    }
    double inv = lb->wsum > 0 ? 1 / lb->wsum : 0, pen = 0, l2 = t->c.l2;
    int nspans;
    const tq_param_span *sp = tq_net_spans(t->net, &nspans);
    for (size_t j = 0; j < n; j++)
        g[j] = acc[1 + j] * inv;
    for (int s = 0; s < nspans; s++)
        for (size_t j = sp[s].offset; sp[s].decay && j < sp[s].offset + sp[s].count; j++) {
            pen += x[j] * x[j];
            g[j] += l2 * x[j];
        }
    /* the listwise loss does not see the bias: its gradient is 0 but for rounding */
    if (t->loss == TQ_LOSS_LISTWISE)
        g[tq_net_b_offset(t->net, 0)] = 0;
    *f = acc[0] * inv + 0.5 * l2 * pen;
    lb->fevals++;
    if (!isfinite(*f)) /* a trial step too long (mse overflowing): the line search shortens it */
        *f = INFINITY;
    return TQ_OK;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

static double max_abs(const double *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return m;
}

tq_status tq_trainer_lbfgs_init(tq_trainer *t)
{
    tq_lbfgs *lb = &t->lb;
    size_t n = tq_net_size(t->net), m = TQ_LBFGS_MEMORY;
    lb->n = n;
    lb->x = calloc(n, 8), lb->g = calloc(n, 8), lb->xt = calloc(n, 8), lb->gt = calloc(n, 8);
    lb->dir = calloc(n, 8), lb->s = calloc(n * m, 8), lb->y = calloc(n * m, 8);
    lb->rho = calloc(m, 8);
    lb->part = malloc((size_t)(WAVE + 1) * (n + 1) * 8);
    lb->wpad = calloc((size_t)((t->dims[0] + 1) * tq_linprod_stride(t->dims[1])), 8);
    if (!lb->x || !lb->g || !lb->xt || !lb->gt || !lb->dir || !lb->s || !lb->y || !lb->rho || !lb->part ||
        !lb->wpad)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for L-BFGS");
    const tq_train_data *d = t->tr;
    lb->wsum = 0;
    if (t->loss == TQ_LOSS_LISTWISE)
        lb->wsum = (double)d->ngroups;
    else
        for (int64_t i = 0; i < d->n; i++)
            lb->wsum += d->w ? d->w[i] : 1.0;
    const float *theta = tq_net_theta(t->net);
    for (size_t i = 0; i < n; i++)
        lb->x[i] = theta[i];
    tq_status st = evaluate_obj(t, lb->x, &lb->f, lb->g);
    if (st)
        return st;
    if (!isfinite(lb->f))
        return tq_fail(TQ_ERR_RUNTIME, "L-BFGS: the objective is not finite at the start "
                                       "(try --standardize)");
    lb->gmax = max_abs(lb->g, n);
    lb->fold = lb->f;
    if (lb->gmax <= t->c.tol)
        lb->state = TQ_LBFGS_GTOL;
    return TQ_OK;
}

void tq_trainer_lbfgs_free(tq_trainer *t)
{
    tq_lbfgs *lb = &t->lb;
    free(lb->x), free(lb->g), free(lb->xt), free(lb->gt), free(lb->dir);
    free(lb->s), free(lb->y), free(lb->rho), free(lb->part), free(lb->wpad);
}

/* dir = -H g, H the two-loop recursion's inverse Hessian estimate */
static void direction(tq_lbfgs *lb)
{
    size_t n = lb->n;
    int64_t m = TQ_LBFGS_MEMORY;
    double alpha[TQ_LBFGS_MEMORY], *q = lb->dir;
    for (size_t i = 0; i < n; i++)
        q[i] = -lb->g[i];
    for (int64_t k = 0; k < lb->count; k++) { /* newest first */
        int64_t i = ((lb->head - 1 - k) % m + m) % m;
        double *s = lb->s + (size_t)i * n, *y = lb->y + (size_t)i * n;
        alpha[i] = lb->rho[i] * dot(s, q, n);
        for (size_t j = 0; j < n; j++)
            q[j] -= alpha[i] * y[j];
    }
    if (lb->count) {
        int64_t i = ((lb->head - 1) % m + m) % m;
        double *s = lb->s + (size_t)i * n, *y = lb->y + (size_t)i * n;
        double gamma = dot(s, y, n) / dot(y, y, n);
        for (size_t j = 0; j < n; j++)
            q[j] *= gamma;
    }
    for (int64_t k = lb->count - 1; k >= 0; k--) { /* oldest first */
        int64_t i = ((lb->head - 1 - k) % m + m) % m;
        double *s = lb->s + (size_t)i * n, *y = lb->y + (size_t)i * n;
        double beta = lb->rho[i] * dot(y, q, n);
        for (size_t j = 0; j < n; j++)
            q[j] += (alpha[i] - beta) * s[j];
    }
}

/* phi(a) = f(x + a dir): into xt, gt; *ft, *dt the value and slope */
static tq_status phi(tq_trainer *t, double a, double *ft, double *dt)
{
    tq_lbfgs *lb = &t->lb;
    for (size_t i = 0; i < lb->n; i++)
        lb->xt[i] = lb->x[i] + a * lb->dir[i];
    tq_status st = evaluate_obj(t, lb->xt, ft, lb->gt);
    *dt = dot(lb->gt, lb->dir, lb->n);
    return st;
}

/* The minimizer of the cubic through (a, fa, da) and (b, fb, db), or NAN. */
static double cubic_min(double a, double fa, double da, double b, double fb, double db)
{
    double d1 = da + db - 3 * (fa - fb) / (a - b), r = d1 * d1 - da * db;
    if (!(r >= 0))
        return NAN;
    double d2 = (b > a ? 1 : -1) * sqrt(r);
    return b - (b - a) * (db + d2 - d1) / (db - da + 2 * d2);
}

/* A step for the strong Wolfe conditions (c1 1e-3, c2 0.9, as L-BFGS-B's
 * line search): bracketing then zoom with safeguarded cubic interpolation
 * (Nocedal and Wright, algorithms 3.5 and 3.6). On success xt, gt, *ft hold
 * the accepted point (the last evaluated); returns 1, 0 without one in
 * TQ_LBFGS_MAXLS evaluations. */
static tq_status line_search(tq_trainer *t, double a, double f0, double d0, double *ft, int *ok)
{
    const double c1 = 1e-3, c2 = 0.9;
    double ap = 0, fp = f0, dp = d0, fa, da;
    tq_status st;
    *ok = 0;
    int evals = 0;
    double lo, flo, dlo, hi, fhi, dhi;
    for (;;) {
        if ((st = phi(t, a, &fa, &da)))
            return st;
        evals++;
        if (fa > f0 + c1 * a * d0 || (evals > 1 && fa >= fp)) {
            lo = ap, flo = fp, dlo = dp, hi = a, fhi = fa, dhi = da;
            break;
        }
        if (fabs(da) <= -c2 * d0) {
            *ft = fa, *ok = 1;
            return TQ_OK;
        }
        if (da >= 0) {
            lo = a, flo = fa, dlo = da, hi = ap, fhi = fp, dhi = dp;
            break;
        }
        if (evals >= TQ_LBFGS_MAXLS)
            return TQ_OK;
        double next = cubic_min(ap, fp, dp, a, fa, da);
        if (!(next >= 1.1 * a && next <= 4 * a))
            next = 4 * a;
        ap = a, fp = fa, dp = da, a = next;
    }
    while (evals < TQ_LBFGS_MAXLS) { /* zoom: lo satisfies the decrease, hi brackets */
        double delta = fabs(hi - lo), mn = lo < hi ? lo : hi, mx = lo < hi ? hi : lo;
        if (delta <= 1e-16 * mx)
            return TQ_OK;
        a = cubic_min(lo, flo, dlo, hi, fhi, dhi);
        if (!(a >= mn + 0.1 * delta && a <= mx - 0.1 * delta))
            a = 0.5 * (lo + hi);
        if ((st = phi(t, a, &fa, &da)))
            return st;
        evals++;
        if (fa > f0 + c1 * a * d0 || fa >= flo) {
            hi = a, fhi = fa, dhi = da;
        } else {
            if (fabs(da) <= -c2 * d0) {
                *ft = fa, *ok = 1;
                return TQ_OK;
            }
            if (da * (hi - lo) >= 0)
                hi = lo, fhi = flo, dhi = dlo;
            lo = a, flo = fa, dlo = da;
        }
    }
    return TQ_OK;
}

tq_status tq_trainer_lbfgs_iter(tq_trainer *t)
{
    tq_lbfgs *lb = &t->lb;
    size_t n = lb->n;
    int64_t m = TQ_LBFGS_MEMORY;
    int ok = 0;
    double ft = 0;
    for (int tries = 0; tries < 2 && !ok; tries++) {
        direction(lb);
        double d0 = dot(lb->g, lb->dir, n);
        if (!(d0 < 0)) { /* not a descent direction: forget the pairs */
            lb->count = lb->head = 0;
            direction(lb);
            d0 = dot(lb->g, lb->dir, n);
        }
        double a = 1;
        if (!lb->count) /* L-BFGS-B's first step: a unit move */
            a = fmin(1 / sqrt(dot(lb->dir, lb->dir, n)), 1e10);
        tq_status st = line_search(t, a, lb->f, d0, &ft, &ok);
        if (st)
            return st;
        if (!ok && !lb->count)
            break;
        if (!ok) /* as L-BFGS-B: once more from steepest descent */
            lb->count = lb->head = 0;
    }
    lb->iter++;
    if (!ok) {
        lb->state = TQ_LBFGS_LINESEARCH;
        return TQ_OK;
    }
    /* s = x' - x into dir, y = g' - g into xt (both done with) */
    double *s = lb->dir, *y = lb->xt;
    for (size_t i = 0; i < n; i++) {
        s[i] = lb->xt[i] - lb->x[i];
        lb->x[i] = lb->xt[i];
        y[i] = lb->gt[i] - lb->g[i];
        lb->g[i] = lb->gt[i];
    }
    double sy = dot(s, y, n), yy = dot(y, y, n);
    lb->step = sqrt(dot(s, s, n));
    if (sy > DBL_EPSILON * yy) { /* keep the pair only where the curvature is positive */
        memcpy(lb->s + (size_t)lb->head * n, s, n * 8);
        memcpy(lb->y + (size_t)lb->head * n, y, n * 8);
        lb->rho[lb->head] = 1 / sy;
        lb->head = (lb->head + 1) % m;
        lb->count += lb->count < m;
    }
    lb->fold = lb->f;
    lb->f = ft;
    lb->gmax = max_abs(lb->g, n);
    double scale = fmax(fmax(fabs(lb->fold), fabs(lb->f)), 1);
    if (lb->gmax <= t->c.tol)
        lb->state = TQ_LBFGS_GTOL;
    else if (lb->fold - lb->f <= 64 * DBL_EPSILON * scale)
        lb->state = TQ_LBFGS_FTOL;
    else if (lb->iter >= t->c.max_iter)
        lb->state = TQ_LBFGS_MAXITER;
    return TQ_OK;
}
