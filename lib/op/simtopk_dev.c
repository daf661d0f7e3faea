/* simtopk_dev.c: the fused similarity top-k on a device (Vulkan, CUDA, HIP:
 * the backend lends its ops and two kernels, simtopk_dev.h), a filter as the
 * CPU op is one (lib/cpu/simtopk.c). The device scores the block in f32 tiles
 * (the backend's matmul) and keeps the KP > k best of each query by those
 * scores (its select kernel, carried on from tile to tile); only
 * those [nq, KP] candidates come back, the host scores them exactly
 * (tq_simscore) and merges them into the lists. A query is decided by its
 * candidates when its new k-th exact score lies above the least candidate's
 * f32 score by more than the proven error of an f32 score: no row left out
 * can then reach the list. For another query the host knows a threshold of
 * f32 score below which no row can enter; the device lists the rows above it
 * (its above kernel) and the host scores those (many rows tied or
 * repeated across the k-th place). What is left (NaN, huge values, more rows
 * above the threshold than the list holds) goes through the CPU op over the
 * whole block. Either way the lists are the CPU's, bit for bit, whatever the
 * tiles and the blocks. With the device's rank precision bf16
 * (tq_device_set_rank_precision) the tiles' operands are bf16 copies of the
 * queries and the block (tensor cores), and the proofs take the wider bound
 * (simtopk_exact.c): the lists are the same. */
#include "simtopk_dev.h"
#include "hostpath.h"
#include "simtopk_exact.h"

#include <math.h>

/* Score tiles of TILE_Q queries x TILE_D database rows unless the backend
 * asks for others: 16 MiB of f32 on the device whatever the block. KP_MAX:
 * the candidates a select kernel keeps. */
enum { TILE_Q = 512, TILE_D = 8192, KP_MAX = TQ_SIMDEV_KP_MAX };

/* Rows [r0, r0 + n) of a tensor, as a view (no allocation: the struct only). */
static tq_tensor rows_view(const tq_tensor *t, int64_t r0, int64_t n)
{
    tq_tensor v = *t;
    size_t row = tq_dtype_size(t->dtype) * (t->rank == 1 ? 1 : (size_t)t->dims[1]);
    v.offset += (size_t)r0 * row;
    v.dims[0] = n;
    v.nbytes = (size_t)n * row;
    v.owns = 0;
    return v;
}

/* What is done with each score tile [mq, nb] of queries q0.. and rows j0.. */
typedef tq_status (*tile_fn)(const tq_simdev_backend *be, void *c, const tq_tensor *scores,
                             int64_t q0, int64_t j0, void *ctx);

/* The f32 scores of q against db, tile by tile (TILE_Q x TILE_D): dot, or
 * for L2 2 q.x - ||x||^2 (negsq holds -||x||^2; -||q||^2 is the same along
 * a row), each tile handed to fn. Row tiles run in order for each query tile. */
static tq_status score_tiles(const tq_simdev_backend *be, void *c, const tq_tensor *q, const tq_tensor *db, int metric,
                             const tq_tensor *negsq, tile_fn fn, void *ctx)
{
    int64_t nq = q->dims[0], ndb = db->dims[0];
    int64_t tile_q = be->tile_q > 0 ? be->tile_q : TILE_Q, tile_d = be->tile_d > KP_MAX ? be->tile_d : TILE_D;
    int64_t tq = nq < tile_q ? nq : tile_q, td = ndb < tile_d ? ndb : tile_d, dims[2] = {tq, td};
    tq_tensor *tile = NULL;
    tq_status st = tq_tensor_new(q->dev, TQ_DTYPE_F32, 2, dims, &tile);
    for (int64_t q0 = 0; !st && q0 < nq; q0 += tq) {
        int64_t mq = nq - q0 < tq ? nq - q0 : tq;
        tq_tensor qv = rows_view(q, q0, mq);
        for (int64_t j0 = 0; !st && j0 < ndb; j0 += td) {
            int64_t nb = ndb - j0 < td ? ndb - j0 : td;
            tq_tensor xv = rows_view(db, j0, nb), sv = *tile;
            sv.dims[0] = mq, sv.dims[1] = nb, sv.nbytes = (size_t)(mq * nb) * 4;
            st = be->matmul(c, &qv, 0, &xv, 1, metric ? 2.0f : 1.0f, 0.0f, &sv);
            if (!st && metric) {
                tq_tensor nv = rows_view(negsq, j0, nb);
                st = be->add(c, &sv, &nv, &sv);
            }
            if (!st)
                st = fn(be, c, &sv, q0, j0, ctx);
        }
    }
    tq_tensor_free(tile);
    return st;
}

/* The candidates: the kp best of each query, carried on over the row tiles
 * into cvt and cit. The first row tile holds at least kp rows (kp <= the
 * block and KP_MAX < TILE_D), as a select kernel needs. */
typedef struct sel_ctx {
    tq_tensor *cvt, *cit, *thr;
    int64_t kp, base;
} sel_ctx;

static tq_status select_tile(const tq_simdev_backend *be, void *c, const tq_tensor *sv, int64_t q0,
                             int64_t j0, void *ctx)
{
    sel_ctx *x = ctx;
    int64_t mq = sv->dims[0];
    tq_tensor cv = rows_view(x->cvt, q0, mq), iv = rows_view(x->cit, q0, mq),
              tv = rows_view(x->thr, q0, mq);
    return be->select(c, sv, x->kp, x->base + j0, j0 > 0, &cv, &iv, &tv);
}

/* The rows above each query's threshold: counts in cnt [nu], their numbers
 * in the block in lst [nu, TQ_SIMDEV_ABOVE_CAP]. */
typedef struct above_ctx {
    tq_tensor *thr, *cnt, *lst;
} above_ctx;

static tq_status above_tile(const tq_simdev_backend *be, void *c, const tq_tensor *sv, int64_t q0,
                            int64_t j0, void *ctx)
{
    above_ctx *x = ctx;
    int64_t mq = sv->dims[0];
    tq_tensor tv = rows_view(x->thr, q0, mq), cv = rows_view(x->cnt, q0, mq),
              lv = rows_view(x->lst, q0, mq);
    return be->above(c, sv, &tv, &cv, &lv, j0);
}

static int cmp_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* x as a new tensor of dtype dt on its device (tq_op_convert's rounding). */
static tq_status converted(const tq_simdev_backend *be, void *c, const tq_tensor *x, tq_dtype dt,
                           tq_tensor **out)
{
    tq_status st = tq_tensor_new(x->dev, dt, x->rank, x->dims, out);
    return st ? st : be->convert(c, x, *out);
}

/* The undecided queries that have a threshold: the device lists the rows
 * whose value reaches it, the host scores those and the rows without a
 * bound. Every other row scores below the query's k-th so far, so the list
 * is final, unless more than TQ_SIMDEV_ABOVE_CAP rows reached the threshold.
 * dbs: the block as the tiles score it (db, or its bf16 copy). */
static tq_status settle_above(const tq_simdev_backend *be, void *c, const tq_simdev_sim *s, const tq_tensor *db,
                              const tq_tensor *dbs, const tq_tensor *negsq)
{
    int64_t nu = 0, d = s->d;
    for (int64_t i = 0; i < s->nq; i++)
        nu += s->undecided[i] && s->thr[i] == s->thr[i];
    /* none, or lists past 32-bit offsets (Vulkan's): the CPU op does them */
    if (!nu || (uint64_t)nu * TQ_SIMDEV_ABOVE_CAP > UINT32_MAX / 2)
        return TQ_OK;
    int64_t qd[2] = {nu, d}, ld[2] = {nu, TQ_SIMDEV_ABOVE_CAP}, nrows = 0;
    tq_tensor *qt = NULL, *tt = NULL, *ct = NULL, *lt = NULL, *q16 = NULL;
    int64_t *qs = malloc((size_t)nu * 8), *rows = NULL;
    float *hq = malloc((size_t)(nu * d) * 4), *ht = malloc((size_t)nu * 4), *x = NULL;
    uint32_t *hc = calloc((size_t)nu, 4), *hl = malloc((size_t)(nu * TQ_SIMDEV_ABOVE_CAP) * 4);
    tq_status st = TQ_OK;
    if (!qs || !hq || !ht || !hc || !hl) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    for (int64_t i = 0, u = 0; i < s->nq; i++)
        if (s->undecided[i] && s->thr[i] == s->thr[i]) {
            qs[u] = i, ht[u] = s->thr[i];
            memcpy(hq + u * d, s->q + i * d, (size_t)d * 4);
            u++;
        }
    if ((st = tq_tensor_new(db->dev, TQ_DTYPE_F32, 2, qd, &qt)) ||
        (st = tq_tensor_new(db->dev, TQ_DTYPE_F32, 1, &nu, &tt)) ||
        (st = tq_tensor_new(db->dev, TQ_DTYPE_I32, 1, &nu, &ct)) ||
        (st = tq_tensor_new(db->dev, TQ_DTYPE_I32, 2, ld, &lt)) ||
        (st = tq_tensor_upload(qt, hq, (size_t)(nu * d) * 4)) ||
        (st = tq_tensor_upload(tt, ht, (size_t)nu * 4)) ||
        (st = tq_tensor_upload(ct, hc, (size_t)nu * 4)) ||
        (s->bf16 && (st = converted(be, c, qt, TQ_DTYPE_BF16, &q16))) ||
        (st = score_tiles(be, c, s->bf16 ? q16 : qt, dbs, s->metric, negsq, above_tile,
                          &(above_ctx){tt, ct, lt})) ||
        (st = tq_tensor_download(ct, hc, (size_t)nu * 4)) ||
        (st = tq_tensor_download(lt, hl, (size_t)(nu * TQ_SIMDEV_ABOVE_CAP) * 4)))
        goto done;
    /* their rows, each once */
    size_t most = (size_t)s->nbad;
    for (int64_t u = 0; u < nu; u++)
        most += hc[u] <= TQ_SIMDEV_ABOVE_CAP ? hc[u] : 0;
    if (!(rows = malloc(most * 8 + 8))) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    memcpy(rows, s->bad, (size_t)s->nbad * 8);
    size_t at = (size_t)s->nbad;
    for (int64_t u = 0; u < nu; u++)
        for (uint32_t r = 0; hc[u] <= TQ_SIMDEV_ABOVE_CAP && r < hc[u]; r++)
            rows[at++] = hl[u * TQ_SIMDEV_ABOVE_CAP + r];
    qsort(rows, at, 8, cmp_i64);
    for (size_t i = 0; i < at; i++)
        if (!nrows || rows[i] != rows[nrows - 1])
            rows[nrows++] = rows[i];
    if (!(x = malloc((size_t)(nrows * d) * 4 + 4))) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    if ((st = be->download_rows(c, db, rows, (size_t)nrows, x)))
        goto done;
    tq_simdev_sim s2 = *s;
    s2.rows = rows, s2.nrows = nrows, s2.x = x;
    tq_simdev_above job = {&s2, qs, hc, hl};
    tq_parallel_for(nu, 1 + 65536 / (TQ_SIMDEV_ABOVE_CAP * d + 1), tq_simdev_settle, &job);
done:
    tq_tensor_free(qt), tq_tensor_free(tt), tq_tensor_free(ct), tq_tensor_free(lt);
    tq_tensor_free(q16);
    free(qs), free(rows), free(hq), free(ht), free(x), free(hc), free(hl);
    return st;
}

/* The undecided queries through the CPU op over the whole block (x, all of
 * it on the host), from their lists as the caller gave them. */
static tq_status host_rest(tq_simdev_sim *s, const float *x)
{
    int64_t nu = 0, d = s->d, k = s->k;
    for (int64_t i = 0; i < s->nq; i++)
        nu += s->undecided[i];
    if (!nu)
        return TQ_OK;
    int64_t qd[2] = {nu, d}, kd[2] = {nu, k}, xd[2] = {s->ndb, d};
    tq_tensor *hq = NULL, *hx = NULL, *hv = NULL, *hi = NULL;
    tq_device *host = NULL;
    tq_status st;
    if (!(st = tq_hostpath_cpu(&host)) && !(st = tq_tensor_new(host, TQ_DTYPE_F32, 2, qd, &hq)) &&
        !(st = tq_tensor_wrap_host(host, TQ_DTYPE_F32, 2, xd, (void *)x, &hx)) &&
        !(st = tq_tensor_new(host, TQ_DTYPE_F32, 2, kd, &hv)) &&
        !(st = tq_tensor_new(host, TQ_DTYPE_I64, 2, kd, &hi))) {
        float *pq = tq_tensor_host(hq), *pv = tq_tensor_host(hv);
        int64_t *pi = tq_tensor_host(hi);
        for (int64_t i = 0, u = 0; i < s->nq; i++)
            if (s->undecided[i]) {
                memcpy(pq + u * d, s->q + i * d, (size_t)d * 4);
                memcpy(pv + u * k, s->vals + i * k, (size_t)k * 4);
                memcpy(pi + u * k, s->idx + i * k, (size_t)k * 8);
                u++;
            }
        st = tq_op_simtopk(hq, hx, s->metric ? TQ_METRIC_L2 : TQ_METRIC_DOT, s->base, hv, hi);
        for (int64_t i = 0, u = 0; !st && i < s->nq; i++)
            if (s->undecided[i]) {
                memcpy(s->out_v + i * k, pv + u * k, (size_t)k * 4);
                memcpy(s->out_i + i * k, pi + u * k, (size_t)k * 8);
                u++;
            }
    }
    tq_tensor_free(hq);
    tq_tensor_free(hx);
    tq_tensor_free(hv);
    tq_tensor_free(hi);
    return st;
}

/* The candidates cit [nq, kp] scored exactly on the device: only their
 * scores travel (into *ce), and the host needs the rows without a bound
 * alone (into *x, s->bad's rows). */
static tq_status device_scores(const tq_simdev_backend *be, void *c, const tq_tensor *q,
                               const tq_tensor *db, const tq_tensor *cit, tq_simdev_sim *s,
                               float **ce, float **x)
{
    size_t nc = (size_t)(s->nq * s->kp);
    int64_t cd[2] = {s->nq, s->kp};
    tq_tensor *cet = NULL;
    tq_status st = TQ_OK;
    if (!(*ce = malloc(nc * 4 + 4)) || !(*x = malloc((size_t)(s->nbad * s->d) * 4 + 4)))
        return tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
    if (!(st = tq_tensor_new(q->dev, TQ_DTYPE_F32, 2, cd, &cet)) &&
        !(st = be->rescore(c, q, db, cit, s->base, s->metric, cet)) &&
        !(st = tq_tensor_download(cet, *ce, nc * 4)) &&
        !(st = be->download_rows(c, db, s->bad, (size_t)s->nbad, *x)))
        s->ce = *ce, s->rows = s->bad, s->nrows = s->nbad, s->x = *x;
    tq_tensor_free(cet);
    return st;
}

tq_status tq_simdev_simtopk(const tq_simdev_backend *be, void *c, const tq_tensor *q,
                            const tq_tensor *db, tq_metric metric, int64_t idx_base,
                            tq_tensor *vals, tq_tensor *idx)
{
    int64_t nq = q->dims[0], d = q->dims[1], ndb = db->dims[0], k = vals->dims[1];
    if (!k || !nq || !ndb)
        return TQ_OK;
    /* candidates: twice k, at least k + 32, within the sort and the block */
    int64_t kp = k + (k > 32 ? k : 32);
    kp = kp < KP_MAX ? kp : KP_MAX;
    kp = kp < ndb ? kp : ndb;
    /* the host for k past the selection and rows of nothing (every score 0,
     * no norm to bound) */
    if (k > KP_MAX || d == 0)
        return tq_host_simtopk(q, db, metric, idx_base, vals, idx);

    tq_simdev_sim s = {.metric = metric == TQ_METRIC_L2, .nq = nq, .ndb = ndb, .d = d, .k = k, .kp = kp,
             .base = idx_base};
    s.bf16 = be->convert && tq_device_rank_precision(q->dev) == TQ_DTYPE_BF16;
    size_t nk = (size_t)(nq * k), nc = (size_t)(nq * kp), xbytes = (size_t)(ndb * d) * 4;
    int64_t cd[2] = {nq, kp};
    tq_tensor *norms = NULL, *negsq = NULL, *cvt = NULL, *cit = NULL, *thrt = NULL;
    tq_tensor *q16 = NULL, *db16 = NULL; /* bf16 copies, when s.bf16 */
    float *hn = malloc((size_t)ndb * 4), *hq = malloc((size_t)(nq * d) * 4), *hce = NULL;
    float *hv = malloc(nk * 4), *ov = malloc(nk * 4), *hcv = malloc(nc * 4);
    int64_t *hi = malloc(nk * 8), *oi = malloc(nk * 8), *hci = malloc(nc * 8);
    int64_t *bad = NULL, *rows = NULL;
    float *x = NULL;
    unsigned char *und = calloc((size_t)nq, 1);
    float *thr = malloc((size_t)nq * 4);
    tq_status st = TQ_OK;
    if (!hn || !hq || !hv || !ov || !hcv || !hi || !oi || !hci || !und || !thr) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }

    /* row norms: the margin's bound and L2's ||x||^2. A row without a finite
     * norm (NaN, inf) has no bound, and one of 2^50 or more would loosen the
     * bound of all: both are candidates of every query instead */
    if ((st = tq_tensor_new(q->dev, TQ_DTYPE_F32, 1, &ndb, &norms)) ||
        (st = be->rownorm(c, db, norms)) || (st = tq_tensor_download(norms, hn, (size_t)ndb * 4)))
        goto done;
    int64_t nbad = 0;
    double nx = 0;
    for (int64_t j = 0; j < ndb; j++)
        if (!(hn[j] < 0x1p50f))
            nbad++;
        else if (hn[j] > nx)
            nx = hn[j];
    if (nbad > kp) { /* a bound for so few rows is not worth the device's time */
        st = tq_host_simtopk(q, db, metric, idx_base, vals, idx);
        goto done;
    }
    if (!(bad = malloc((size_t)(nbad + 1) * 8))) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    for (int64_t j = 0, b = 0; j < ndb; j++) {
        if (!(hn[j] < 0x1p50f))
            bad[b++] = j;
        /* the device's ||x||^2: one f32 rounding of the norm squared (as
         * device_margin assumes); NaN ranks the rows without a bound last */
        hn[j] = hn[j] < 0x1p50f ? -(hn[j] * hn[j]) : NAN;
    }
    s.bad = bad, s.nbad = nbad;
    /* the f32 norm is within gamma_d / 2 + 2u of the true one (the rownorm
     * kernels sum squares of the row scaled by a power of two, in f32) */
    s.nx = nx * (1 + (double)d * 0x1p-23 + 0x1p-20);
    if (s.metric && ((st = tq_tensor_new(q->dev, TQ_DTYPE_F32, 1, &ndb, &negsq)) ||
                     (st = tq_tensor_upload(negsq, hn, (size_t)ndb * 4))))
        goto done;

    if (s.bf16 && ((st = converted(be, c, q, TQ_DTYPE_BF16, &q16)) ||
                   (st = converted(be, c, db, TQ_DTYPE_BF16, &db16))))
        goto done;
    if ((st = tq_tensor_new(q->dev, TQ_DTYPE_F32, 2, cd, &cvt)) ||
        (st = tq_tensor_new(q->dev, TQ_DTYPE_I64, 2, cd, &cit)) ||
        (st = tq_tensor_new(q->dev, TQ_DTYPE_I32, 1, &nq, &thrt)) ||
        (st = score_tiles(be, c, s.bf16 ? q16 : q, s.bf16 ? db16 : db, s.metric, negsq, select_tile,
                          &(sel_ctx){cvt, cit, thrt, kp, idx_base})) ||
        (st = tq_tensor_download(cvt, hcv, nc * 4)) ||
        (st = tq_tensor_download(cit, hci, nc * 8)) ||
        (st = tq_tensor_download(q, hq, (size_t)(nq * d) * 4)) ||
        (st = tq_tensor_download(vals, hv, nk * 4)) || (st = tq_tensor_download(idx, hi, nk * 8)))
        goto done;
    s.q = hq, s.vals = hv, s.idx = hi, s.out_v = ov, s.out_i = oi, s.cv = hcv, s.ci = hci;
    s.undecided = und, s.thr = thr;

    int whole = 0;
    if (be->rescore) {
        if ((st = device_scores(be, c, q, db, cit, &s, &hce, &x)))
            goto done;
        goto scored;
    }

    /* the candidates' rows, each once; the whole block when they are most of it */
    if (!(rows = malloc((nc + (size_t)nbad) * 8))) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    for (size_t i = 0; i < nc; i++)
        rows[i] = hci[i] - idx_base;
    memcpy(rows + nc, bad, (size_t)nbad * 8);
    qsort(rows, nc + (size_t)nbad, 8, cmp_i64);
    int64_t nrows = 0;
    for (size_t i = 0; i < nc + (size_t)nbad; i++)
        if (!nrows || rows[i] != rows[nrows - 1])
            rows[nrows++] = rows[i];
    whole = nrows * 2 > ndb;
    if (!(x = aligned_alloc(64, ((whole ? xbytes : (size_t)(nrows * d) * 4) + 63) & ~(size_t)63))) {
        st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    st = whole ? tq_tensor_download(db, x, xbytes)
               : be->download_rows(c, db, rows, (size_t)nrows, x);
    if (st)
        goto done;
    s.rows = whole ? NULL : rows, s.nrows = nrows, s.x = x;

scored:
    tq_parallel_for(nq, 1 + 65536 / (kp * d + 1), tq_simdev_rescore, &s);
    if ((st = settle_above(be, c, &s, db, s.bf16 ? db16 : db, negsq)))
        goto done;

    int any = 0;
    for (int64_t i = 0; i < nq; i++)
        any |= und[i];
    if (any && !whole) { /* the CPU op needs the whole block */
        free(x);
        s.x = x = aligned_alloc(64, (xbytes + 63) & ~(size_t)63);
        if (!x) {
            st = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
            goto done;
        }
        if ((st = tq_tensor_download(db, x, xbytes)))
            goto done;
    }
    if ((st = host_rest(&s, x)))
        goto done;
    if (!(st = tq_tensor_upload(vals, ov, nk * 4)))
        st = tq_tensor_upload(idx, oi, nk * 8);
done:
    tq_tensor_free(q16);
    tq_tensor_free(db16);
    tq_tensor_free(norms);
    tq_tensor_free(negsq);
    tq_tensor_free(cvt);
    tq_tensor_free(cit);
    tq_tensor_free(thrt);
    free(hce);
    free(hn), free(hq), free(hv), free(ov), free(hcv), free(hi), free(oi), free(hci);
    free(bad), free(rows), free(x), free(und), free(thr);
    return st;
}
