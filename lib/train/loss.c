/* loss.c: the losses of tq-train (mean squared error, logistic, softmax
 * cross-entropy, listwise softmax within groups) with their gradients, and the
 * validation metrics (accuracy, AUC, MRR). Everything here runs on the host
 * in double precision, row by row in order, so it adds no dependence on
 * threads; the matrix work is in net.c. */
#include "../internal.h"
#include "loss.h"
#include "../cpu/vmath.h"

#include <math.h>

/* log(1 + e^z) without overflow */
static double softplus(double z) { return (z > 0 ? z : 0) + log1p(exp(-fabs(z))); }

/* e^x for x <= 0, the terms of a log-sum-exp after its max: vmath.h's
 * polynomial (relative error below 3e-14; glibc's exp was a fifth of a small
 * softmax run), branch-free so that the loops over a row vectorize, and the
 * same bits from the vector and the scalar code (unfused: ISO C does not
 * contract a * b + c, so every build rounds the same way). Below -708, where its 2^n leaves the normal range: 0
 * (such a term is under 1e-307 of the row's largest, 1). NaN stays NaN. */
static inline double exp_term(double x)
{
    int under = x < -708;
    double e = tq_exp_neg_estrin(tq_select(under, -708, x), 0);
    return tq_select(under, 0.0, e);
}

/* e[j] = exp_term(z[j] - mx), j < m: built for AVX2 and for the baseline
 * (GCC vectorizes the 64-bit integer steps of 2^n only with AVX2); the same
 * operations in each, so the same bits on every machine. For float z (the
 * net's outputs) and double z (lbfgs.c's). */
static inline __attribute__((always_inline)) void exp_terms_body(const float *z, double mx,
                                                                 int64_t m, double *e)
{
    for (int64_t j = 0; j < m; j++)
        e[j] = exp_term((double)z[j] - mx);
}
static inline __attribute__((always_inline)) void exp_terms64_body(const double *z, double mx,
                                                                   int64_t m, double *e)
{
    for (int64_t j = 0; j < m; j++)
        e[j] = exp_term(z[j] - mx);
}
#ifdef TQ_HAVE_ISA_VARIANTS
static TQ_TARGET_AVX2 void exp_terms_avx2(const float *z, double mx, int64_t m, double *e)
{
    exp_terms_body(z, mx, m, e);
}
static TQ_TARGET_AVX2 void exp_terms64_avx2(const double *z, double mx, int64_t m, double *e)
{
    exp_terms64_body(z, mx, m, e);
}
#endif

/* tq_cpu_isa(), asked once (the same answer from every thread) */
static int isa_level(void)
{
    static int isa = -1;
    int v = __atomic_load_n(&isa, __ATOMIC_RELAXED);
    if (v < 0)
        __atomic_store_n(&isa, v = tq_cpu_isa(), __ATOMIC_RELAXED);
    return v;
}

static void exp_terms(const float *z, double mx, int64_t m, double *e)
{
#ifdef TQ_HAVE_ISA_VARIANTS
    if (isa_level() >= 1) {
        exp_terms_avx2(z, mx, m, e);
        return;
    }
#endif
    exp_terms_body(z, mx, m, e);
}

void tq_loss_exp_terms(const double *z, double mx, int64_t m, double *e)
{
#ifdef TQ_HAVE_ISA_VARIANTS
    if (isa_level() >= 1) {
        exp_terms64_avx2(z, mx, m, e);
        return;
    }
#endif
    exp_terms64_body(z, mx, m, e);
}

/* log sum exp of z[0..o) and the softmax into p (may be NULL) */
static double logsumexp(const float *z, int64_t o, double *p)
{
    double mx = z[0], s = 0, buf[64];
    for (int64_t j = 1; j < o; j++)
        mx = z[j] > mx ? z[j] : mx;
    /* each exp once, 64 at a time: the terms wait in p (or buf), then are
     * summed in order, so the sum does not depend on the vector width */
    for (int64_t j0 = 0; j0 < o; j0 += 64) {
        int64_t m = o - j0 < 64 ? o - j0 : 64;
        double *e = p ? p + j0 : buf;
        exp_terms(z + j0, mx, m, e);
        for (int64_t j = 0; j < m; j++)
            s += e[j];
    }
    if (p)
        for (int64_t j = 0; j < o; j++)
            p[j] /= s;
    return mx + log(s);
}

/* The loss of one row (o outputs) and, with g, d loss / d z. */
static double row_loss(int loss, const float *z, int64_t o, double y, double *g)
{
    switch (loss) {
    case TQ_LOSS_MSE: {
        double e = z[0] - y;
        if (g)
            g[0] = 2 * e;
        return e * e;
    }
    case TQ_LOSS_LOGISTIC:
        if (g)
            g[0] = 1 / (1 + exp(-(double)z[0])) - y;
        return softplus(z[0]) - y * z[0];
    default: { /* softmax: g = p - onehot */
        int64_t c = (int64_t)y;
        double l = logsumexp(z, o, g) - z[c];
        if (g)
            g[c] -= 1;
        return l;
    }
    }
}

/* The listwise loss of one group of m rows: the cross-entropy of the softmax
 * of the scores against the targets normalized to sum 1. */
static double group_loss(const float *z, int64_t m, const double *y, double *g)
{
    double ysum = 0, l = 0;
    for (int64_t j = 0; j < m; j++)
        ysum += y[j];
    double lse = logsumexp(z, m, g);
    for (int64_t j = 0; j < m; j++) {
        double t = y[j] / ysum;
        l += t * (lse - z[j]);
        if (g)
            g[j] -= t;
    }
    return l;
}

double tq_loss_batch(int loss, const float *z, int64_t n, int64_t o, const double *y,
                     const float *w, const int64_t *gs, int64_t ng, double *wsum, float *dout)
{
    double sum = 0, ws = 0, gbuf[64], *g = NULL;
    int64_t width = loss == TQ_LOSS_LISTWISE ? 0 : o;
    if (loss == TQ_LOSS_LISTWISE)
        for (int64_t k = 0; k < ng; k++)
            width = gs[k + 1] - gs[k] > width ? gs[k + 1] - gs[k] : width;
    if (dout && !(g = width <= 64 ? gbuf : malloc((size_t)width * 8)))
        dout = NULL; /* out of memory: the caller's check of dout catches it */
    if (loss == TQ_LOSS_LISTWISE) {
        ws = (double)ng;
        for (int64_t k = 0; k < ng; k++) {
            int64_t a = gs[k], m = gs[k + 1] - a;
            sum += group_loss(z + a, m, y + a, g);
            for (int64_t j = 0; dout && j < m; j++)
                dout[a + j] = (float)(g[j] / ws);
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            ws += w ? w[i] : 1.0;
        for (int64_t i = 0; i < n; i++) {
            double wi = w ? w[i] : 1.0;
            sum += wi * row_loss(loss, z + i * o, o, y[i], g);
            for (int64_t j = 0; dout && j < o; j++)
                dout[i * o + j] = ws > 0 ? (float)(wi * g[j] / ws) : 0.0f;
        }
    }
    if (g != gbuf)
        free(g);
    *wsum = ws;
    return sum;
}

void tq_metric_add(tq_metric_acc *m, const float *z, int64_t n, int64_t o, const double *y,
                   const int64_t *gs, int64_t ng)
{
    switch (m->loss) {
    case TQ_LOSS_SOFTMAX:
        for (int64_t i = 0; i < n; i++) {
            int64_t best = 0;
            for (int64_t j = 1; j < o; j++)
                if (z[i * o + j] > z[i * o + best])
                    best = j;
            m->hits += best == (int64_t)y[i];
            m->count++;
        }
        break;
    case TQ_LOSS_LOGISTIC:
        if (m->n + n > m->cap) {
            int64_t c = m->cap ? m->cap : 1024;
            while (c < m->n + n)
                c *= 2;
            float *s = realloc(m->score, (size_t)c * 4);
            unsigned char *p = s ? realloc(m->pos, (size_t)c) : NULL;
            if (s)
                m->score = s;
            if (!p) { /* out of memory: the AUC comes out NaN */
                m->count = -1;
                return;
            }
            m->pos = p, m->cap = c;
        }
        for (int64_t i = 0; i < n; i++) {
            m->score[m->n] = z[i];
            m->pos[m->n++] = y[i] >= 0.5;
        }
        break;
    case TQ_LOSS_LISTWISE:
        /* rank of the best positive row, ties toward the earlier row (as
         * tq-score ranks) */
        for (int64_t k = 0; k < ng; k++) {
            int64_t a = gs[k], b = gs[k + 1], bestrank = 0;
            for (int64_t i = a; i < b; i++) {
                if (y[i] <= 0)
                    continue;
                int64_t r = 1;
                for (int64_t j = a; j < b; j++)
                    r += z[j] > z[i] || (z[j] == z[i] && j < i);
                if (!bestrank || r < bestrank)
                    bestrank = r;
            }
            m->hits += bestrank ? 1.0 / (double)bestrank : 0;
            m->count++;
        }
        break;
    default:
        break;
    }
}

static const float *auc_scores;
static int by_score(const void *a, const void *b)
{
    float x = auc_scores[*(const int64_t *)a], y = auc_scores[*(const int64_t *)b];
    return (x > y) - (x < y);
}

/* AUC = (sum of the positives' ranks - P(P+1)/2) / (P N), ties sharing the
 * mean rank. */
static double auc(tq_metric_acc *m)
{
    int64_t *ord = malloc((size_t)(m->n ? m->n : 1) * 8);
    if (!ord || m->count < 0)
        return free(ord), NAN;
    for (int64_t i = 0; i < m->n; i++)
        ord[i] = i;
    auc_scores = m->score;
    qsort(ord, (size_t)m->n, 8, by_score);
    double rsum = 0, np = 0;
    for (int64_t i = 0; i < m->n;) {
        int64_t j = i;
        while (j < m->n && m->score[ord[j]] == m->score[ord[i]])
            j++;
        double r = 0.5 * (double)(i + 1 + j); /* mean of ranks i+1..j */
        for (int64_t k = i; k < j; k++)
            if (m->pos[ord[k]])
                rsum += r, np++;
        i = j;
    }
    free(ord);
    double nn = (double)m->n - np;
    return np > 0 && nn > 0 ? (rsum - np * (np + 1) / 2) / (np * nn) : NAN;
}

double tq_metric_end(tq_metric_acc *m)
{
    double v = NAN;
    if (m->loss == TQ_LOSS_LOGISTIC)
        v = auc(m);
    else if (m->loss != TQ_LOSS_MSE && m->count > 0)
        v = m->hits / m->count;
    free(m->score);
    free(m->pos);
    memset(m, 0, sizeof *m);
    return v;
}
