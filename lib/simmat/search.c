/* search.c: the modes of tq-simmat that take queries batch by batch against a
 * database held on the device: the full matrix, top-k search and the pairs
 * above a threshold. For the full matrix and top-k, frames of the query stream
 * other than the vectors pass through in order and each vector batch is
 * followed by its results. The pairs of --threshold are not rows of the
 * query batch, so there no query frame passes: the query keys become the
 * pairs' key_i (and the database's, key_j). */
#include "../internal.h"
#include "../op/simscore.h"
#include "simmat.h"

#include <float.h>

tq_status tq_sim_prepare(tq_sim *s)
{
    int64_t n = s->db.n, d = s->db.d;
    s->s0 = n * s->shard_i / s->shard_n;
    s->s1 = n * (s->shard_i + 1) / s->shard_n;
    int64_t dims[2] = {s->s1 - s->s0, d};
    float *x = s->db.x + s->s0 * d;
    /* the CPU works on the rows in place (one copy of the database, not two);
     * another device gets them uploaded */
    tq_status st = (uintptr_t)x % 16 ? TQ_OK : tq_tensor_wrap_host(s->dev, TQ_DTYPE_F32, 2, dims, x, &s->dbt);
    if (st || s->dbt)
        return st;
    st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, dims, &s->dbt);
    if (!st)
        st = tq_tensor_upload(s->dbt, x, (size_t)(dims[0] * d) * 4);
    return st;
}

void tq_sim_free(tq_sim *s)
{
    tq_tensor_free(s->dbt);
    tq_tensor_free(s->cxt);
    tq_tensor_free(s->cst);
    s->dbt = s->cxt = s->cst = NULL;
    free(s->cx), free(s->cscale);
    s->cx = NULL, s->cscale = NULL;
    tq_sim_rows_free(&s->rescore);
    tq_sim_rows_free(&s->db);
    tq_sim_ranges_free(&s->qranges);
}

/* ---- full matrix and threshold: products of row slices with the db ---- */

typedef struct slices {
    tq_sim *s;
    tq_rowprod *prod;   /* the shard's rows, prepared once */
    int64_t rows;       /* query rows per product */
    tq_tensor *a, *c;   /* [rows, d] and [rows, ndb] */
    float *ah, *ch;     /* host copies (or the tensors themselves on the CPU) */
    float *xsq;         /* [ndb] ||x||^2 of the db rows (L2) */
    float xmax;         /* max ||x|| (threshold margins) */
    /* --threshold on a device whose memory the host cannot read: the rows
     * of each product slice worth an exact score are listed there
     * (tq_op_above), and only the lists come back */
    int lists;          /* that way */
    tq_tensor *negsq;   /* [ndb] -||x||^2 on the device (L2) */
} slices;

/* Rows of the shard a query's list may hold before that query's row of the
 * product comes back whole instead (its threshold is then too low to gain). */
enum { ABOVE_CAP = 256 };

static tq_status slices_above_open(slices *t);

static tq_status slices_open(slices *t, tq_sim *s)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    int64_t d = s->db.d, n = s->s1 - s->s0;
    t->rows = tq_sim_slice_rows(n);
    int64_t ad[2] = {t->rows, d}, cd[2] = {t->rows, n};
    tq_status st = tq_rowprod_new(s->dbt, &t->prod);
    if (!st)
        st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, ad, &t->a);
    if (!st)
        st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, cd, &t->c);
    if (st)
        return st;
    t->ah = tq_tensor_host(t->a);
    t->ch = tq_tensor_host(t->c);
    if (!t->ah && !(t->ah = malloc((size_t)(t->rows * d) * 4)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!t->ch && !(t->ch = malloc((size_t)(t->rows * n) * 4)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!(t->xsq = malloc((size_t)(n + 1) * 4)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    /* the norms of the db rows: the full matrix of cosine or dot needs none */
    int64_t norms = s->mode != TQ_SIM_FULL || s->metric == TQ_SIM_L2 ? n : 0;
    for (int64_t j = 0; j < norms; j++) {
        const float *x = s->db.x + (s->s0 + j) * d;
        t->xsq[j] = (float)tq_simscore_dot(x, x, d);
        float nx = sqrtf(t->xsq[j]);
        t->xmax = nx > t->xmax || nx != nx ? nx : t->xmax;
    }
    return slices_above_open(t);
}

/* The device lists of --threshold (above): where the product stays on the
 * device. On the CPU (and a device the host reads) nothing is made. */
static tq_status slices_above_open(slices *t)
{
    tq_sim *s = t->s;
    int64_t nd = s->s1 - s->s0;
    tq_status st = TQ_OK;
    if (t->ch == tq_tensor_host(t->c) || s->mode != TQ_SIM_THRESHOLD)
        return TQ_OK;
    t->lists = 1;
    if (s->metric == TQ_SIM_L2 && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, &nd, &t->negsq))) {
        for (int64_t j = 0; j < nd; j++)
            t->ch[j] = -t->xsq[j]; /* ch: a free host buffer of at least nd floats */
        st = tq_tensor_upload(t->negsq, t->ch, (size_t)nd * 4);
    }
    return st;
}

static void slices_close(slices *t)
{
    tq_tensor_free(t->negsq);
    if (t->a && t->ah != tq_tensor_host(t->a))
        free(t->ah);
    if (t->c && t->ch != tq_tensor_host(t->c))
        free(t->ch);
    tq_tensor_free(t->a);
    tq_tensor_free(t->c);
    tq_rowprod_free(t->prod);
    free(t->xsq);
}

/* The n <= t->rows query rows q: on return t->c holds their q . x with the
 * shard's rows (times 2 for L2), n rows of ndb, and t->ch too unless keep
 * is set (the product then stays on the device). */
static tq_status slice_product_on(slices *t, const float *q, int64_t n, int keep)
{
    tq_sim *s = t->s;
    int64_t d = s->db.d, nd = s->s1 - s->s0, ad[2] = {n, d}, cd[2] = {n, nd};
    tq_tensor *a = NULL, *c = NULL;
    tq_status st = tq_tensor_view(t->a, 0, TQ_DTYPE_F32, 2, ad, &a);
    if (!st && t->ah == tq_tensor_host(t->a))
        memcpy(t->ah, q, (size_t)(n * d) * 4);
    else if (!st)
        st = tq_tensor_upload(a, q, (size_t)(n * d) * 4);
    if (!st)
        st = tq_tensor_view(t->c, 0, TQ_DTYPE_F32, 2, cd, &c);
    if (!st)
        st = tq_op_rowprod(t->prod, a, s->metric == TQ_SIM_L2 ? 2.0f : 1.0f, c);
    if (!st && !keep && t->ch != tq_tensor_host(t->c))
        st = tq_tensor_download(c, t->ch, (size_t)(n * nd) * 4);
    tq_tensor_free(a);
    tq_tensor_free(c);
    return st;
}

static tq_status slice_product(slices *t, const float *q, int64_t n)
{
    return slice_product_on(t, q, n, 0);
}

/* The batch's rows of the matrix, a frame a slice: the same values whatever
 * the batches and slices (tq_op_rowprod), in memory bounded by the slice. */
static tq_status run_full(tq_sim *s, slices *t, const float *q, int64_t n, tq_writer *w)
{
    int64_t nd = s->s1 - s->s0, d = s->db.d;
    char meta[64];
    size_t ml = (size_t)snprintf(meta, sizeof meta, "metric=%s", tq_sim_metric_name(s->metric)) + 1;
    for (int64_t i0 = 0; i0 < n; i0 += t->rows) {
        int64_t r = n - i0 < t->rows ? n - i0 : t->rows, dims[2] = {r, nd};
        tq_status st = slice_product(t, q + i0 * d, r);
        for (int64_t i = 0; !st && s->metric == TQ_SIM_L2 && i < r; i++) {
            const float *qr = q + (i0 + i) * d;
            float qq = (float)tq_simscore_dot(qr, qr, d), *o = t->ch + i * nd;
            for (int64_t j = 0; j < nd; j++) {
                float v = (o[j] - qq) - t->xsq[j];
                o[j] = v > 0 ? 0.0f : v; /* -||q - x||^2 is never positive; NaN stays NaN */
            }
        }
        if (!st)
            st = tq_writer_write(w, "sim", TQ_DTYPE_F32, 2, dims, meta, ml, t->ch,
                                 (uint64_t)(r * nd) * 4);
        if (st)
            return st;
    }
    return TQ_OK;
}

/* The least product value (for L2 less ||x||^2) with which a row can still
 * reach the threshold with query row qr: the exact score lies within a
 * proven margin of it. */
static float pair_floor(const tq_sim *s, const slices *t, const float *qr)
{
    int64_t d = s->db.d;
    int metric = s->metric == TQ_SIM_L2;
    float thr = (float)s->threshold;
    float qq = (float)tq_simscore_dot(qr, qr, d);
    double m = tq_simscore_margin(metric, d, sqrt(qq) * (1 + 1e-6), t->xmax * (1 + 1e-6));
    /* the product's value, bounded below the exact score by m */
    double lo = (double)thr + (metric ? (double)qq : 0.0) - m;
    lo -= 0x1p-22 * (fabs((double)thr) + (metric ? (double)qq : 0.0));
    float tl = !(lo > -(double)FLT_MAX) ? -INFINITY : (float)lo;
    if ((double)tl > lo)
        tl = nextafterf(tl, -INFINITY);
    return tl;
}

/* Input row g's pairs from its row c of the product (host memory): every
 * row whose value reaches tl gets its exact score, in row order. */
static tq_status row_pairs(tq_sim *s, const slices *t, const float *q, const float *c, int64_t g,
                           int64_t r0, float tl, tq_sim_pairs *p)
{
    int64_t nd = s->s1 - s->s0, d = s->db.d;
    int metric = s->metric == TQ_SIM_L2;
    float thr = (float)s->threshold;
    const float *qr = q + (g - r0) * d;
    int64_t j = s->self ? g + 1 - s->s0 : 0; /* i < j for the input with itself */
    for (j = j < 0 ? 0 : j; j < nd; j++) {
        float a = metric ? c[j] - t->xsq[j] : c[j];
        if (a < tl)
            continue;
        float v = tq_simscore(metric, qr, s->db.x + (s->s0 + j) * d, d);
        tq_status st;
        if (v >= thr && (st = tq_sim_pairs_add(p, g, s->s0 + j, v)))
            return st;
    }
    return TQ_OK;
}

static int cmp_i32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* The batch's product slice at row i0 (rows of them, the queries already
 * on the device in qt) into t->c, for L2 less ||x||^2 there: the same f32
 * values as the host's c - ||x||^2. */
static tq_status device_slice(tq_sim *s, slices *t, tq_tensor *qt, int64_t i0, int64_t rows,
                              tq_tensor **c)
{
    int64_t nd = s->s1 - s->s0, d = s->db.d, qd[2] = {rows, d}, cd[2] = {rows, nd};
    tq_tensor *qv = NULL;
    tq_status st;
    if (!(st = tq_tensor_view(qt, (size_t)(i0 * d) * 4, TQ_DTYPE_F32, 2, qd, &qv)) &&
        !(st = tq_tensor_view(t->c, 0, TQ_DTYPE_F32, 2, cd, c)) &&
        !(st = tq_op_rowprod(t->prod, qv, s->metric == TQ_SIM_L2 ? 2.0f : 1.0f, *c)) &&
        s->metric == TQ_SIM_L2)
        st = tq_op_add(*c, t->negsq, *c);
    tq_tensor_free(qv);
    return st;
}

/* The pairs of the batch's n rows (input row r0 first) as row_pairs finds
 * them, with the products kept on the device: the queries and each row's
 * floor go up once, each product slice is listed there (the rows not below
 * the floor, tq_op_above) into one list for the batch, and the counts and
 * lists come back once; the host scores the listed rows exactly. A row that
 * lists more than ABOVE_CAP gets its row of the product back and scanned as
 * the host does (its slice computed again). Waits: a few a batch, not a
 * slice. */
static tq_status device_pairs(tq_sim *s, slices *t, const float *q, int64_t n, int64_t r0,
                              tq_sim_pairs *p)
{
    int64_t nd = s->s1 - s->s0, d = s->db.d, qd[2] = {n, d}, ld[2] = {n, ABOVE_CAP};
    int metric = s->metric == TQ_SIM_L2;
    float thr = (float)s->threshold;
    tq_tensor *qt = NULL, *tt = NULL, *ct = NULL, *lt = NULL, *c = NULL;
    float *hthr = malloc((size_t)n * 4 + 4);
    int32_t *hcnt = malloc((size_t)n * 4 + 4), *hlst = malloc((size_t)(n * ABOVE_CAP) * 4 + 4);
    tq_status st = !hthr || !hcnt || !hlst ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    for (int64_t r = 0; !st && r < n; r++)
        hthr[r] = pair_floor(s, t, q + r * d);
    if (!st && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, qd, &qt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, &n, &tt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_I32, 1, &n, &ct)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_I32, 2, ld, &lt)) &&
        !(st = tq_tensor_upload(qt, q, (size_t)(n * d) * 4)))
        st = tq_tensor_upload(tt, hthr, (size_t)n * 4);
    for (int64_t i0 = 0; !st && i0 < n; i0 += t->rows) {
        int64_t rows = n - i0 < t->rows ? n - i0 : t->rows, td[1] = {rows}, sd[2] = {rows, ABOVE_CAP};
        tq_tensor *tv = NULL, *cv = NULL, *lv = NULL;
        if (!(st = device_slice(s, t, qt, i0, rows, &c)) &&
            !(st = tq_tensor_view(tt, (size_t)i0 * 4, TQ_DTYPE_F32, 1, td, &tv)) &&
            !(st = tq_tensor_view(ct, (size_t)i0 * 4, TQ_DTYPE_I32, 1, td, &cv)) &&
            !(st = tq_tensor_view(lt, (size_t)(i0 * ABOVE_CAP) * 4, TQ_DTYPE_I32, 2, sd, &lv)))
            st = tq_op_above(c, tv, cv, lv);
        tq_tensor_free(tv), tq_tensor_free(cv), tq_tensor_free(lv), tq_tensor_free(c);
        c = NULL;
    }
    if (!st && !(st = tq_tensor_download(ct, hcnt, (size_t)n * 4)))
        st = tq_tensor_download(lt, hlst, (size_t)(n * ABOVE_CAP) * 4);
    for (int64_t i0 = 0; !st && i0 < n; i0 += t->rows) {
        int64_t rows = n - i0 < t->rows ? n - i0 : t->rows, over = 0;
        for (int64_t r = i0; r < i0 + rows; r++)
            over |= hcnt[r] > ABOVE_CAP;
        /* a slice with a row past its list: computed again, brought back */
        if (over && !(st = device_slice(s, t, qt, i0, rows, &c)))
            st = tq_tensor_download(c, t->ch, (size_t)(rows * nd) * 4);
        tq_tensor_free(c);
        c = NULL;
        for (int64_t r = i0; !st && r < i0 + rows; r++) {
            int64_t g = r0 + r, j0 = s->self ? g + 1 - s->s0 : 0;
            const float *qr = q + r * d, *row = t->ch + (r - i0) * nd;
            int32_t *l = hlst + r * ABOVE_CAP;
            int64_t m = hcnt[r] > ABOVE_CAP ? nd : hcnt[r];
            if (hcnt[r] <= ABOVE_CAP) /* in row order, as the host adds them */
                qsort(l, (size_t)m, sizeof *l, cmp_i32);
            for (int64_t e = 0; !st && e < m; e++) {
                /* past the cap: the row as the device compared it (for L2
                 * already less ||x||^2), the rows not below the floor */
                int64_t j = hcnt[r] > ABOVE_CAP ? e : l[e];
                if (j < j0 || (hcnt[r] > ABOVE_CAP && row[j] < hthr[r]))
                    continue;
                float v = tq_simscore(metric, qr, s->db.x + (s->s0 + j) * d, d);
                if (v >= thr)
                    st = tq_sim_pairs_add(p, g, s->s0 + j, v);
            }
        }
    }
    tq_tensor_free(qt), tq_tensor_free(tt), tq_tensor_free(ct), tq_tensor_free(lt);
    free(hthr), free(hcnt), free(hlst);
    return st;
}

/* The pairs of query rows [i0, i0 + rows) of the batch q (its first row is
 * input row r0) by the matrix product: it ranks, within a proven margin, and
 * the exact score decides. */
static tq_status product_pairs(tq_sim *s, slices *t, const float *q, int64_t i0, int64_t rows,
                               int64_t r0, tq_sim_pairs *p)
{
    int64_t nd = s->s1 - s->s0, d = s->db.d;
    tq_status st = slice_product(t, q + i0 * d, rows);
    if (st)
        return st;
    for (int64_t g = r0 + i0; g < r0 + i0 + rows && !st; g++)
        st = row_pairs(s, t, q, t->ch + (g - r0 - i0) * nd, g, r0, pair_floor(s, t, q + (g - r0) * d), p);
    return st;
}

/* qk: the keys of the batch's rows (key_dtype TQ_DTYPE_INVALID: none); sc:
 * the int8 screen, or NULL. Either way the same pairs, in the same order. */
static tq_status run_threshold(tq_sim *s, slices *t, tq_sim_screen *sc, const float *q, int64_t n,
                               tq_writer *w, tq_sim_pairs *p, const tq_sim_rows *qk)
{
    int64_t r0 = s->q_seen, step = sc ? tq_sim_screen_rows() : t->rows;
    tq_status st = TQ_OK;
    p->n = 0;
    for (int64_t i0 = 0; !st && i0 < n; i0 += step) {
        int64_t rows = n - i0 < step ? n - i0 : step;
        int done = 0;
        if (sc)
            st = tq_sim_screen_run(s, sc, q + i0 * s->db.d, rows, r0 + i0, p, &done);
        if (!st && !done && !t->s)
            st = slices_open(t, s);
        if (!st && !done && t->lists) { /* the device lists the whole batch */
            st = device_pairs(s, t, q, n, r0, p);
            break;
        }
        for (int64_t k = 0; !st && !done && k < rows; k += t->rows)
            st = product_pairs(s, t, q, i0 + k, rows - k < t->rows ? rows - k : t->rows, r0, p);
    }
    return st ? st : tq_sim_pairs_write(s, p, qk, r0, w);
}

/* ---- top-k ---- */

static tq_status run_topk(tq_sim *s, const float *q, int64_t n, tq_writer *w)
{
    /* --rescore over q2 rows: the best m k of the decoded rows, then the k
     * best of those by the f32 rows, as over the other codes */
    int64_t d = s->db.d, k = s->k * (s->rescore.x ? s->rescore_m : 1), qd[2] = {n, d},
            kd[2] = {n, k};
    tq_tensor *qt = NULL, *vt = NULL, *it = NULL;
    float *v = malloc((size_t)(n * k + 1) * 4);
    int64_t *ix = malloc((size_t)(n * k + 1) * 8);
    tq_status st = !v || !ix ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    for (int64_t i = 0; !st && i < n * k; i++)
        v[i] = -INFINITY, ix[i] = -1;
    if (!st && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, qd, &qt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, kd, &vt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_I64, 2, kd, &it)) &&
        !(st = tq_tensor_upload(qt, q, (size_t)(n * d) * 4)) &&
        !(st = tq_tensor_upload(vt, v, (size_t)(n * k) * 4)) &&
        !(st = tq_tensor_upload(it, ix, (size_t)(n * k) * 8)) &&
        !(st = tq_op_simtopk(qt, s->dbt, s->metric == TQ_SIM_L2 ? TQ_METRIC_L2 : TQ_METRIC_DOT,
                             s->s0, vt, it)) &&
        !(st = tq_tensor_download(vt, v, (size_t)(n * k) * 4)))
        st = tq_tensor_download(it, ix, (size_t)(n * k) * 8);
    tq_tensor_free(qt), tq_tensor_free(vt), tq_tensor_free(it);
    if (!st && k != s->k)
        tq_sim_rescore(s, q, n, k, v, ix);
    if (!st)
        st = tq_sim_topk_write(s, v, ix, n, w);
    free(v);
    free(ix);
    return st;
}

/* ---- the loop over the query stream ---- */

tq_status tq_sim_dedup(tq_sim *s, tq_reader *in, tq_writer *out); /* dedup.c */

tq_status tq_sim_run(tq_sim *s, tq_reader *in, tq_writer *out)
{
    if (s->mode == TQ_SIM_DEDUP)
        return tq_sim_dedup(s, in, out);
    slices t;
    memset(&t, 0, sizeof t);
    tq_status st = TQ_OK;
    tq_sim_screen *sc = NULL;
    st = tq_sim_screen_open(s, &sc);
    /* with the screen, the matrix product only serves a slice of queries
     * that is not finite: its buffers and prepared rows wait until then */
    if (!st && (s->mode == TQ_SIM_FULL || (s->mode == TQ_SIM_THRESHOLD && !sc)))
        st = slices_open(&t, s);
    float *q = NULL;
    size_t qcap = 0;
    tq_sim_pairs p = {0};
    tq_sim_rows qk;            /* --threshold: the keys of the next batch */
    memset(&qk, 0, sizeof qk);
    int64_t qk_rows = -1;      /* rows of the last key frame, not yet matched */
    const char *qn = tq_sim_query_name(s);
    tq_frame *f;
    while (!st && (st = tq_reader_next(in, &f)) == TQ_OK) {
        int vec = tq_sim_is_vectors(f, qn);
        tq_sim_saw(s, f, vec);
        if (tq_sim_ranges_take(&s->qranges, f, qn, &st))
            continue; /* the ranges of the queries' codes: consumed with them */
        if (!vec) {
            st = tq_sim_side_frame(s, f, out, &qk, &qk_rows);
            continue;
        }
        if (f->rank == 2 && s->db_label &&
            (f->dtype == TQ_DTYPE_BIT || f->dtype == TQ_DTYPE_Q8_0 || f->dtype == TQ_DTYPE_Q4_0 ||
             (f->dtype == TQ_DTYPE_I8 && !tq_sim_ranges_has(&s->qranges, f)))) {
            /* codes against floats: their scores are no float scores */
            st = tq_fail(TQ_ERR_DATA, "the database holds float vectors (\"%s\" from %s) and "
                                      "the query vectors are %s codes (\"%s\" from %s): give "
                                      "float queries, or a database of the same codes "
                                      "(tq-quantize --to %s)",
                         s->db.name, s->db_label, tq_dtype_name(f->dtype), f->name, s->q_label,
                         f->dtype == TQ_DTYPE_I8 ? "int8" : tq_dtype_name(f->dtype));
            break;
        }
        if ((st = tq_sim_frame_f32(f, &s->qranges, &q, &qcap)))
            break;
        int64_t n = f->dims[0];
        if ((st = tq_sim_check_width(s, f)))
            break;
        if (s->metric == TQ_SIM_COSINE)
            tq_sim_normalize_rows(q, n, s->db.d);
        if (s->mode == TQ_SIM_TOPK)
            st = run_topk(s, q, n, out);
        else if (s->mode == TQ_SIM_FULL)
            st = run_full(s, &t, q, n, out);
        else if (qk_rows >= 0 && qk_rows != n)
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows after a key frame of %lld",
                         (unsigned long long)f->index, f->name, (long long)n, (long long)qk_rows);
        else {
            st = run_threshold(s, &t, sc, q, n, out, &p, &qk);
            tq_sim_rows_free(&qk);
            qk_rows = -1;
        }
        s->q_seen += n;
    }
    slices_close(&t);
    tq_sim_screen_free(sc);
    free(q);
    free(p.i), free(p.j), free(p.v);
    tq_sim_rows_free(&qk);
    return st == TQ_EOF ? TQ_OK : st;
}
