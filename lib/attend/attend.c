/* attend.c: tq-attend's layer: uploads q, k, v, projects them when weights
 * are given, runs the fused attention op, projects the output, downloads.
 * Tensors are freed as soon as they are used, so that peak memory stays a
 * small multiple of the inputs and outputs. */
#include "attend/attend.h"
#include "internal.h"
#include "../tool/pick.h"
#include "quant/quant.h"

#include <float.h>
#include <math.h>

static const char *const wname[4] = {"wq", "wk", "wv", "wo"}, *const bname[4] = {"bq", "bk", "bv", "bo"};

void tq_attend_weights_free(tq_attend_weights *w)
{
    for (int i = 0; i < 4; i++) {
        free(w->w[i]);
        free(w->b[i]);
    }
    memset(w, 0, sizeof *w);
}

tq_status tq_attend_finite(const tq_frame *f, const void *raw, const float *x,
                           const char *from, int64_t row0)
{
    int64_t n = 1, d = f->rank ? f->dims[f->rank - 1] : 1, col;
    for (int i = 0; i < f->rank; i++)
        n *= f->dims[i];
    int64_t r = d > 0 ? tq_quant_first_nonfinite(x, n / d, d, &col) : -1;
    if (r < 0)
        return TQ_OK;
    char where[80] = "", what[80];
    if (f->rank == 3)
        snprintf(where, sizeof where, ", sequence %lld, row %lld",
                 (long long)(row0 + r / f->dims[1]), (long long)(r % f->dims[1]));
    else if (f->rank == 2)
        snprintf(where, sizeof where, ", row %lld", (long long)(row0 + r));
    int wide = f->dtype == TQ_DTYPE_F64 && raw;
    double v = wide ? ((const double *)raw)[r * d + col] : 0;
    if (isnan(x[r * d + col]))
        snprintf(what, sizeof what, "is NaN");
    else if (wide && isfinite(v))
        snprintf(what, sizeof what, "is %g, beyond the range of f32", v);
    else
        snprintf(what, sizeof what, "is infinite");
    return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\" of %s%s: value %lld %s; attention has no "
                                "answer for it",
                   (unsigned long long)f->index, f->name, from, where, (long long)col, what);
}

/* One frame's payload as f32 (float dtypes converted), malloc'd; NaN and
 * infinities refused. */
static tq_status frame_f32(tq_frame *f, const char *path, float **out)
{
    if (!tq_dtype_is_float(f->dtype))
        return tq_fail(TQ_ERR_DATA, "frame \"%s\" must be a float tensor, not %s", f->name,
                       tq_dtype_name(f->dtype));
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    size_t n = 1;
    for (int i = 0; i < f->rank; i++)
        n *= (size_t)f->dims[i];
    if (!(*out = malloc(n * sizeof **out + 1)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if ((st = tq_convert(TQ_DTYPE_F32, *out, f->dtype, data, n, 0)))
        return st;
    return tq_attend_finite(f, data, *out, tq_took_label(path), 0);
}

tq_status tq_attend_weights_load(const char *path, tq_attend_weights *w)
{
    memset(w, 0, sizeof *w);
    tq_reader *r;
    tq_status st = tq_reader_open_path(&r, path);
    if (st)
        return st;
    tq_frame *f;
    int64_t blen[4] = {0};
    while (!st && (st = tq_reader_next(r, &f)) == TQ_OK)
        for (int i = 0; i < 4 && !st; i++) {
            int isw = !strcmp(f->name, wname[i]), isb = !strcmp(f->name, bname[i]);
            if (!isw && !isb)
                continue;
            if ((isw ? w->w[i] : w->b[i]) != NULL)
                st = tq_fail(TQ_ERR_DATA, "%s: frame \"%s\" given twice (one batch only)", path,
                             f->name);
            else if (isw && f->rank != 2)
                st = tq_fail(TQ_ERR_DATA, "%s: \"%s\" must be rank 2 [out, in]", path, f->name);
            else if (isb && f->rank != 1)
                st = tq_fail(TQ_ERR_DATA, "%s: \"%s\" must be rank 1 [out]", path, f->name);
            else if (!(st = frame_f32(f, path, isw ? &w->w[i] : &w->b[i]))) {
                if (isw) {
                    w->out[i] = f->dims[0];
                    w->in[i] = f->dims[1];
                } else {
                    blen[i] = f->dims[0];
                }
            }
        }
    tq_reader_close(r);
    if (st == TQ_EOF)
        st = TQ_OK;
    for (int i = 0; i < 4 && !st; i++) {
        if (!w->w[i])
            st = tq_fail(TQ_ERR_DATA, "%s: no frame \"%s\"", path, wname[i]);
        else if (w->b[i] && blen[i] != w->out[i])
            st = tq_fail(TQ_ERR_DATA, "%s: \"%s\" has %lld values, \"%s\" %lld rows", path,
                         bname[i], (long long)blen[i], wname[i], (long long)w->out[i]);
    }
    if (!st && w->out[0] != w->out[1])
        st = tq_fail(TQ_ERR_DATA, "%s: wq and wk differ in rows (%lld and %lld)", path,
                     (long long)w->out[0], (long long)w->out[1]);
    if (!st && w->in[3] != w->out[2])
        st = tq_fail(TQ_ERR_DATA, "%s: wo takes %lld inputs, wv gives %lld", path,
                     (long long)w->in[3], (long long)w->out[2]);
    if (st)
        tq_attend_weights_free(w);
    return st;
}

static tq_status upload(tq_device *dev, int rank, const int64_t *dims, const void *host,
                        tq_dtype dt, tq_tensor **t)
{
    tq_status st = tq_tensor_new(dev, dt, rank, dims, t);
    return st ? st : tq_tensor_upload(*t, host, (*t)->nbytes);
}

/* x [B, L, in] -> x W^T + b [B, L, out], in a new tensor; frees x. */
static tq_status project(tq_device *dev, const tq_attend_weights *w, int i, tq_tensor **x)
{
    int64_t wd[2] = {w->out[i], w->in[i]}, yd[3] = {(*x)->dims[0], (*x)->dims[1], w->out[i]};
    tq_tensor *wt = NULL, *bt = NULL, *y = NULL;
    tq_status st;
    if (!(st = upload(dev, 2, wd, w->w[i], TQ_DTYPE_F32, &wt)) &&
        !(st = tq_tensor_new(dev, TQ_DTYPE_F32, 3, yd, &y)) &&
        !(st = tq_op_matmul(*x, 0, wt, 1, 1.0f, 0.0f, y)) && w->b[i] &&
        !(st = upload(dev, 1, &w->out[i], w->b[i], TQ_DTYPE_F32, &bt)))
        st = tq_op_add(y, bt, y);
    tq_tensor_free(wt);
    tq_tensor_free(bt);
    tq_tensor_free(*x);
    *x = y;
    return st;
}

/* The largest Euclidean norm of n rows of d values, and which row has it. */
static double max_row_norm(const float *x, int64_t n, int64_t d, int64_t *which)
{
    double best = 0;
    *which = 0;
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        for (int64_t c = 0; c < d; c++)
            s += (double)x[r * d + c] * x[r * d + c];
        if (s > best)
            best = s, *which = r;
    }
    return sqrt(best);
}

/* The Frobenius norm of a weight matrix (a bound on its operator norm) and
 * the norm of its bias. */
static double frob(const float *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return sqrt(s);
}

/* "row R", or "sequence S, row R" when there are several sequences. */
static const char *where(int64_t flat, int64_t B, int64_t L, char *buf, size_t n)
{
    if (B > 1)
        snprintf(buf, n, "sequence %lld, row %lld", (long long)(flat / L), (long long)(flat % L));
    else
        snprintf(buf, n, "row %lld", (long long)flat);
    return buf;
}

/* Finite inputs can still give scores beyond f32 (values near 1e20: q.k is
 * 1e40), and then the softmax has no answer: the kernels would give a row of
 * zeros, silently. By Cauchy-Schwarz every partial sum of q.k is within
 * |q| |k|, and through a projection |W x + b| <= |W|_F |x| + |b|; the
 * unnormalised output sums at most Lk values of |v| each. Inputs whose bound
 * stays under f32's largest value cannot overflow, on any device; the rest
 * are refused (bad data), naming the largest row. */
static tq_status check_range(const tq_attend_job *j)
{
    const tq_attend_weights *w = j->w;
    int64_t rq, rk, rv;
    double nq = max_row_norm(j->q, j->B * j->Lq, j->dq, &rq);
    double nk = max_row_norm(j->k, j->B * j->Lk, j->dk, &rk);
    double nv = max_row_norm(j->v, j->B * j->Lk, j->dv, &rv);
    double pq = nq, pk = nk, pv = nv;
    if (w) {
        pq = frob(w->w[0], w->out[0] * w->in[0]) * nq + (w->b[0] ? frob(w->b[0], w->out[0]) : 0);
        pk = frob(w->w[1], w->out[1] * w->in[1]) * nk + (w->b[1] ? frob(w->b[1], w->out[1]) : 0);
        pv = frob(w->w[2], w->out[2] * w->in[2]) * nv + (w->b[2] ? frob(w->b[2], w->out[2]) : 0);
    }
    int64_t dh = (w ? w->out[0] : j->dq) / j->heads;
    double scale = j->scale ? fabs((double)j->scale) : 1 / sqrt((double)(dh ? dh : 1));
    double scores = pq * pk * (scale > 1 ? scale : 1), sums = pv * (double)j->Lk;
    if (w)
        sums = sums > pv ? sums : pv; /* and the output projection below */
    double outp = w ? frob(w->w[3], w->out[3] * w->in[3]) * pv +
                          (w->b[3] ? frob(w->b[3], w->out[3]) : 0)
                    : 0;
    if (scores < FLT_MAX && sums < FLT_MAX && outp < FLT_MAX && pq < FLT_MAX && pk < FLT_MAX)
        return TQ_OK;
    char a[48], b[48];
    if (scores >= FLT_MAX || pq >= FLT_MAX || pk >= FLT_MAX)
        return tq_fail(TQ_ERR_DATA,
                       "the scores could overflow f32: query %s has norm %.3g and key %s %.3g%s, "
                       "beyond f32's largest value (3.4e38) together; scale the inputs down",
                       where(rq, j->B, j->Lq, a, sizeof a), nq, where(rk, j->B, j->Lk, b, sizeof b),
                       nk, w ? " (before the projections)" : "");
    return tq_fail(TQ_ERR_DATA,
                   "the outputs could overflow f32: value %s has norm %.3g%s, over %lld keys "
                   "beyond f32's largest value (3.4e38); scale the inputs down",
                   where(rv, j->B, j->Lk, a, sizeof a), nv, w ? " (before the projections)" : "",
                   (long long)j->Lk);
}

tq_status tq_attend_run(tq_device *dev, tq_attend_job *j)
{
    const tq_attend_weights *w = j->w;
    if (w && (w->in[0] != j->dq || w->in[1] != j->dk || w->in[2] != j->dv))
        return tq_fail(TQ_ERR_DATA,
                       "the weights take widths %lld (q), %lld (k), %lld (v); the inputs "
                       "have %lld, %lld, %lld",
                       (long long)w->in[0], (long long)w->in[1], (long long)w->in[2],
                       (long long)j->dq, (long long)j->dk, (long long)j->dv);
    int64_t dqk = w ? w->out[0] : j->dq, dvv = w ? w->out[2] : j->dv;
    if (!w && j->dq != j->dk)
        return tq_fail(TQ_ERR_DATA, "q has width %lld, k %lld: they must match",
                       (long long)j->dq, (long long)j->dk);
    if (dqk % j->heads || dvv % j->heads)
        return tq_fail(TQ_ERR_USAGE, "%d heads do not divide the widths %lld and %lld",
                       j->heads, (long long)dqk, (long long)dvv);
    tq_status rs = check_range(j);
    if (rs)
        return rs;
    int64_t qd[3] = {j->B, j->Lq, j->dq}, kd[3] = {j->B, j->Lk, j->dk},
            vd[3] = {j->B, j->Lk, j->dv};
    tq_tensor *q = NULL, *k = NULL, *v = NULL, *o = NULL, *kl = NULL, *qg = NULL, *kg = NULL,
              *rc = NULL, *wt = NULL;
    int shared = j->k == j->q && !w; /* self-attention without projections: one tensor */
    tq_status st;
    if ((st = upload(dev, 3, qd, j->q, TQ_DTYPE_F32, &q)))
        goto done;
    if (!shared && (st = upload(dev, 3, kd, j->k, TQ_DTYPE_F32, &k)))
        goto done;
    if (!(j->v == j->q && shared) && !(j->v == j->k && !shared && !w)) {
        if ((st = upload(dev, 3, vd, j->v, TQ_DTYPE_F32, &v)))
            goto done;
    }
    if (w && ((st = project(dev, w, 0, &q)) || (st = project(dev, w, 1, &k)) ||
              (st = project(dev, w, 2, &v))))
        goto done;
    int64_t od[3] = {j->B, j->Lq, dvv}, gq[2] = {j->B, j->Lq}, gk[2] = {j->B, j->Lk},
            wd[4] = {j->B, j->heads, j->Lq, j->Lk};
    if ((st = tq_tensor_new(dev, TQ_DTYPE_F32, 3, od, &o)))
        goto done;
    if (j->key_len && (st = upload(dev, 1, &j->B, j->key_len, TQ_DTYPE_I64, &kl)))
        goto done;
    if (j->qgroup && ((st = upload(dev, 2, gq, j->qgroup, TQ_DTYPE_I64, &qg)) ||
                      (st = upload(dev, 2, gk, j->kgroup, TQ_DTYPE_I64, &kg))))
        goto done;
    if (j->want_received && (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, gk, &rc)))
        goto done;
    if (j->want_weights && (st = tq_tensor_new(dev, TQ_DTYPE_F32, 4, wd, &wt)))
        goto done;
    tq_attention_args args = {j->heads, j->scale, j->causal, kl, qg, kg, rc, wt, 0, NULL, NULL};
    const tq_tensor *kk = k ? k : q, *vv = v ? v : (k ? k : q);
    if ((st = tq_op_attention(q, kk, vv, &args, o)))
        goto done;
    tq_tensor_free(q), tq_tensor_free(k), tq_tensor_free(v);
    q = k = v = NULL;
    if (w && (st = project(dev, w, 3, &o)))
        goto done;
    j->dout = o->dims[o->rank - 1];
    size_t on = (size_t)(j->B * j->Lq * j->dout);
    if (!(j->out = malloc(on * sizeof *j->out + 1)) ||
        (j->want_received && !(j->received = malloc((size_t)(j->B * j->Lk) * 4 + 1))) ||
        (j->want_weights && !(j->weights = malloc(wt->nbytes + 1)))) {
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = tq_tensor_download(o, j->out, on * sizeof *j->out)) ||
        (rc && (st = tq_tensor_download(rc, j->received, rc->nbytes))) ||
        (wt && (st = tq_tensor_download(wt, j->weights, wt->nbytes))))
        goto done;
done:
    tq_tensor_free(q), tq_tensor_free(k), tq_tensor_free(v), tq_tensor_free(o);
    tq_tensor_free(kl), tq_tensor_free(qg), tq_tensor_free(kg), tq_tensor_free(rc),
        tq_tensor_free(wt);
    return st;
}
