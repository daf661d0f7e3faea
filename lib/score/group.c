/* group.c: the features and scores of one group of candidates, and their ranks.
 * The products run on the op API's device; the weighted sum is done in double
 * on the host in a fixed order, so scores do not depend on threads. */
#include "score.h"
#include "internal.h"

#include <math.h>

typedef struct work {
    tq_device *dev;
    tq_tensor *x, *u, *col, *row, *nrm;
} work;

static tq_status new2(tq_device *dev, int64_t r, int64_t c, tq_tensor **t)
{
    int64_t dims[2] = {r, c};
    return tq_tensor_new(dev, TQ_DTYPE_F32, 2, dims, t);
}

/* f[i] = u[i] . q for the normalized query row q: cosine similarity. */
static tq_status query_feature(const tq_score_cfg *c, work *w, int64_t m, int64_t d,
                               int64_t gid, float *f)
{
    float *q = malloc((size_t)d * 4);
    if (!q)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_score_query_row(c->query, gid, q);
    if (!st)
        st = tq_tensor_upload(w->row, q, (size_t)d * 4);
    free(q);
    if (!st)
        st = tq_op_matmul(w->u, 0, w->row, 1, 1.0f, 0.0f, w->col);
    return st ? st : tq_tensor_download(w->col, f, (size_t)m * 4);
}

/* f[i] = mean over j != i of u[i] . u[j] = (u[i] . sum_j u[j] - |u[i]|^2) / (m - 1):
 * two thin products instead of the m x m matrix. A group of one gets 0. */
static tq_status consensus_feature(work *w, int64_t m, float *f)
{
    if (m == 1) {
        f[0] = 0;
        return TQ_OK;
    }
    tq_tensor *ones = NULL;
    float *nrm = malloc((size_t)m * 4), *one = malloc((size_t)m * 4);
    tq_status st = nrm && one ? new2(w->dev, 1, m, &ones) : tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < m; i++)
        one[i] = 1.0f;
    if (!st)
        st = tq_tensor_upload(ones, one, (size_t)m * 4);
    if (!st) /* row = sum of the rows of u */
        st = tq_op_matmul(ones, 0, w->u, 0, 1.0f, 0.0f, w->row);
    if (!st)
        st = tq_op_matmul(w->u, 0, w->row, 1, 1.0f, 0.0f, w->col);
    if (!st)
        st = tq_op_rownorm(w->u, w->nrm);
    if (!st)
        st = tq_tensor_download(w->col, f, (size_t)m * 4);
    if (!st)
        st = tq_tensor_download(w->nrm, nrm, (size_t)m * 4);
    for (int64_t i = 0; !st && i < m; i++)
        f[i] = (float)(((double)f[i] - (double)nrm[i] * nrm[i]) / (double)(m - 1));
    tq_tensor_free(ones);
    free(nrm);
    free(one);
    return st;
}

tq_status tq_score_group(const tq_score_cfg *c, const float *emb, int64_t m, int64_t d,
                         const float *const *extra, int64_t gid, float *score)
{
    if (m == 0)
        return TQ_OK;
    work w = {.dev = c->dev};
    int nf = c->nweights;
    float *f = malloc((size_t)(m * (nf ? nf : 1)) * 4);
    if (!f)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    int need_u = c->query || c->consensus ||
                 (c->model && tq_score_model_wants_normalized(c->model));
    tq_status st = new2(c->dev, m, d, &w.x);
    if (!st)
        st = tq_tensor_upload(w.x, emb, (size_t)(m * d) * 4);
    if (!st && need_u && !(st = new2(c->dev, m, d, &w.u)))
        st = tq_op_normalize(w.x, 1e-12f, w.u);
    if (!st && (c->query || c->consensus) && !(st = new2(c->dev, m, 1, &w.col)) &&
        !(st = new2(c->dev, 1, d, &w.row))) {
        int64_t nd = m;
        st = tq_tensor_new(c->dev, TQ_DTYPE_F32, 1, &nd, &w.nrm);
    }
    int k = 0;
    if (!st && c->query)
        st = query_feature(c, &w, m, d, gid, f + m * k++);
    if (!st && c->consensus)
        st = consensus_feature(&w, m, f + m * k++);
    if (!st && c->model)
        st = tq_score_model_run(c->model, tq_score_model_wants_normalized(c->model) ? w.u : w.x,
                                f + m * k++);
    for (int j = 0; !st && j < c->nextra; j++, k++)
        memcpy(f + m * k, extra[j], (size_t)m * 4);
    for (int64_t i = 0; !st && i < m; i++) {
        double s = 0;
        for (int j = 0; j < nf; j++)
            s += c->weights[j] * (double)f[m * j + i];
        score[i] = (float)s;
    }
    free(f);
    tq_tensor_free(w.x);
    tq_tensor_free(w.u);
    tq_tensor_free(w.col);
    tq_tensor_free(w.row);
    tq_tensor_free(w.nrm);
    return st;
}

/* Higher first; NaN after every number; ties (and NaNs) by row. */
static int rank_cmp(const void *pa, const void *pb, void *ctx)
{
    const float *sc = ctx;
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    float x = sc[a], y = sc[b];
    int nx = isnan(x), ny = isnan(y);
    if (nx != ny)
        return nx - ny;
    if (!nx && x != y)
        return x > y ? -1 : 1;
    return a < b ? -1 : a > b;
}

tq_status tq_score_rank(const float *score, int64_t m, int64_t *order, int64_t *rank)
{
    for (int64_t i = 0; i < m; i++)
        order[i] = i;
    /* the comparison is total (row breaks every tie), so qsort's lack of
     * stability cannot show */
    qsort_r(order, (size_t)m, sizeof *order, rank_cmp, (void *)score);
    for (int64_t r = 0; r < m; r++)
        rank[order[r]] = r + 1;
    return TQ_OK;
}
