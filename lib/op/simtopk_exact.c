/* simtopk_exact.c: the host's half of the device simtopk (Vulkan, CUDA, HIP;
 * simtopk_dev.c drives it): the candidates' exact scores (tq_simscore, as
 * the CPU op scores) merged into the caller's lists, and the proof that
 * decides whether the rows left out could still enter, or else the
 * threshold of device score they would need. */
#include "simtopk_exact.h"

#include "simscore.h"

#include <float.h>
#include <math.h>

/* How far the device's value for a pair may lie from its exact score, for a
 * query of norm at most nq and a row of norm at most nx (both bounds).
 * Dot: the value is an f32 dot product summed in some order, FMA or not;
 * tq_simscore_margin bounds that error and the score's own rounding, with a
 * factor 2 to spare. L2: the value is 2 q.x - fl(nx_j^2), nx_j the f32 norm
 * of the row (relative error under gamma_d / 2 + 2u, so fl(nx_j^2) within
 * (gamma_d + 6u) ||x||^2), and the host subtracts ||q||^2 in double: in all
 * within (gamma_d + 8u)(nq + nx)^2, half of tq_simscore_margin's bound.
 * CUDA's cuBLAS (f32 compute, no TF32) and our kernels stay inside that.
 * Vulkan lets a device flush subnormals to zero: a flushed input moves a
 * product sum by at most 2^-126 times the other side's 1-norm (<= sqrt(d)
 * times its norm), a flushed result or partial sum by 2^-126; the last term
 * covers all of them 8 times over. With bf16 operands (s->bf16: the
 * device's rank precision), that bound widened by their rounding
 * (tq_simscore_margin_bf16); a tensor core's f32 sums, which may truncate
 * rather than round, stay inside the factor 2 of the f32 part. */
static double device_margin(const tq_simdev_sim *s, double nq, double nx)
{
    double m = tq_simscore_margin(s->metric, s->d, nq, nx);
    m += 0x1p-122 * (sqrt((double)s->d) * (nq + nx) * 2 + (double)s->d + 2);
    return s->bf16 ? tq_simscore_margin_bf16(s->metric, s->d, m, nq, nx) : m;
}

static int cand_cmp(const void *pa, const void *pb)
{
    const tq_simdev_cand *a = pa, *b = pb;
    if (tq_simscore_better(a->v, a->i, b->v, b->i))
        return -1;
    return tq_simscore_better(b->v, b->i, a->v, a->i);
}

/* The first place of the ascending a[0..n) whose value is not below j. */
static int64_t lower_bound(const int64_t *a, int64_t n, int64_t j)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < j)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const float *row_of(const tq_simdev_sim *s, int64_t j)
{
    if (!s->rows)
        return s->x + j * s->d;
    int64_t at = lower_bound(s->rows, s->nrows, j);
    return s->x + (at < s->nrows || !s->nrows ? at : s->nrows - 1) * s->d;
}

/* Whether block row j has no bound (s->bad is ascending). */
static int is_bad(const tq_simdev_sim *s, int64_t j)
{
    int64_t at = lower_bound(s->bad, s->nbad, j);
    return at < s->nbad && s->bad[at] == j;
}

/* Query qi's list from the caller's and the exact scores of the rows ci
 * (n0 indices, base + row; their scores in ce when the device gave them)
 * and of the rows without a bound: into mv, mi. A row without a bound is
 * scored here even when the device scored it: its NaN's bits are the CPU's. */
static void merge_rows(const tq_simdev_sim *s, int64_t qi, const int64_t *ci, const float *ce,
                       int64_t n0, tq_simdev_cand *cs, float *mv, int64_t *mi)
{
    const float *q = s->q + qi * s->d;
    int64_t n = 0;
    for (int64_t r = 0; r < n0; r++) {
        int64_t j = ci[r] - s->base;
        float v = ce && !is_bad(s, j) ? ce[r] : tq_simscore(s->metric, q, row_of(s, j), s->d);
        cs[n++] = (tq_simdev_cand){v, ci[r]};
    }
    for (int64_t b = 0; b < s->nbad; b++) {
        int64_t gi = s->base + s->bad[b], seen = 0;
        for (int64_t r = 0; r < n0 && !seen; r++)
            seen = ci[r] == gi;
        if (!seen)
            cs[n++] = (tq_simdev_cand){tq_simscore(s->metric, q, row_of(s, s->bad[b]), s->d), gi};
    }
    qsort(cs, (size_t)n, sizeof *cs, cand_cmp);
    const float *lv = s->vals + qi * s->k;
    const int64_t *li = s->idx + qi * s->k;
    for (int64_t o = 0, a = 0, c = 0; o < s->k; o++) {
        float bv = a < s->k ? lv[a] : NAN;
        int64_t bi = a < s->k ? li[a] : -1;
        if (c < n && tq_simscore_better(cs[c].v, cs[c].i, bv, bi))
            bv = cs[c].v, bi = cs[c++].i;
        else
            a++;
        mv[o] = bi < 0 ? -INFINITY : bv;
        mi[o] = bi;
    }
}

/* Query qi: its candidates scored exactly and merged into its list; 1 when
 * that list is final (written to out_v/out_i), else 0 with thr[qi] set. */
static int rescore_one(const tq_simdev_sim *s, int64_t qi, tq_simdev_cand *cs, float *mv, int64_t *mi)
{
    const float *q = s->q + qi * s->d;
    s->thr[qi] = NAN;
    /* a NaN from the device for a row with a bound comes of the query (NaN,
     * or infinities times 0): the CPU op does it, whose NaN bits the output
     * keeps */
    for (int64_t r = 0; s->ce && r < s->kp; r++)
        if (s->ce[qi * s->kp + r] != s->ce[qi * s->kp + r] &&
            !is_bad(s, s->ci[qi * s->kp + r] - s->base))
            return 0;
    merge_rows(s, qi, s->ci + qi * s->kp, s->ce ? s->ce + qi * s->kp : NULL, s->kp, cs, mv, mi);
    if (s->kp < s->ndb) { /* rows were left out: may one of them still enter? */
        double qq = 0;
        for (int64_t p = 0; p < s->d; p++)
            qq += (double)q[p] * q[p];
        double nq = sqrt(qq) * (1 + 0x1p-20);
        double size = s->metric ? (nq + s->nx) * (nq + s->nx) : nq * s->nx;
        float kv = mv[s->k - 1];
        /* a row left out has a device value at most the least candidate's:
         * an exact score at most that plus the margin (for L2 less ||q||^2,
         * which the device values leave out), in double with room for the
         * few roundings of qq and of these sums. A NaN among the candidates
         * (a row without a bound) leaves nothing proven. */
        double amin = INFINITY;
        for (int64_t r = 0; r < s->kp; r++) {
            double v = s->cv[qi * s->kp + r];
            amin = v < amin || v != v || amin != amin ? v : amin;
        }
        double top = (s->metric ? amin - qq : amin) + device_margin(s, nq, s->nx) +
                     (double)(s->d + 4) * 0x1p-52 * (fabs(amin) + qq);
        /* values of 2^120 and more may have overflowed on the device */
        if (mi[s->k - 1] < 0 || !(size < 0x1p120) || kv != kv)
            return 0;
        if (!(top < (double)kv)) {
            /* a row whose device value lies below kv less the margin (plus
             * ||q||^2 for L2) cannot reach kv: the threshold for above.comp,
             * rounded down to an f32 */
            double m = device_margin(s, nq, s->nx);
            double t = (double)kv + (s->metric ? qq : 0) - m -
                       (double)(s->d + 4) * 0x1p-51 * (fabs((double)kv) + qq + m);
            float f = (float)t;
            if (t > -(double)FLT_MAX && t < (double)FLT_MAX)
                s->thr[qi] = (double)f > t ? nextafterf(f, -INFINITY) : f;
            return 0;
        }
    }
    memcpy(s->out_v + qi * s->k, mv, (size_t)s->k * sizeof *mv);
    memcpy(s->out_i + qi * s->k, mi, (size_t)s->k * sizeof *mi);
    return 1;
}

void tq_simdev_rescore(void *ctx, int64_t begin, int64_t end)
{
    const tq_simdev_sim *s = ctx;
    tq_simdev_cand *cs = malloc((size_t)(s->kp + s->nbad) * sizeof *cs);
    float *mv = malloc((size_t)s->k * sizeof *mv);
    int64_t *mi = malloc((size_t)s->k * sizeof *mi);
    for (int64_t qi = begin; qi < end; qi++) /* no memory: the CPU op does them */
        s->undecided[qi] = !cs || !mv || !mi || !rescore_one(s, qi, cs, mv, mi);
    free(cs);
    free(mv);
    free(mi);
}

void tq_simdev_settle(void *ctx, int64_t begin, int64_t end)
{
    const tq_simdev_above *a = ctx;
    const tq_simdev_sim *s = a->s;
    tq_simdev_cand *cs = malloc((size_t)(TQ_SIMDEV_ABOVE_CAP + s->nbad) * sizeof *cs);
    int64_t *gi = malloc(TQ_SIMDEV_ABOVE_CAP * sizeof *gi), *mi = malloc((size_t)s->k * sizeof *mi);
    float *mv = malloc((size_t)s->k * sizeof *mv);
    for (int64_t u = begin; cs && gi && mi && mv && u < end; u++) {
        if (a->cnt[u] > TQ_SIMDEV_ABOVE_CAP) /* the list overflowed: the CPU op does it */
            continue;
        int64_t qi = a->qs[u], n = a->cnt[u];
        for (int64_t r = 0; r < n; r++)
            gi[r] = s->base + a->lst[u * TQ_SIMDEV_ABOVE_CAP + r];
        merge_rows(s, qi, gi, NULL, n, cs, mv, mi);
        memcpy(s->out_v + qi * s->k, mv, (size_t)s->k * sizeof *mv);
        memcpy(s->out_i + qi * s->k, mi, (size_t)s->k * sizeof *mi);
        s->undecided[qi] = 0;
    }
    free(cs), free(gi), free(mi), free(mv);
}
