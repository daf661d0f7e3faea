/* hostpath.c: ops a backend has no kernel for, run on the host: copy in,
 * compute on the CPU backend, copy out. One implementation for every backend
 * (hostpath.h says when it is taken). One unit with op.c by design: it is
 * called from op.c's dispatch and calls op.c's entries on the CPU device. */
#include "hostpath.h"
#include "backend.h"
#include "internal.h"

#include <pthread.h>

static tq_device *host_dev;
static tq_status host_st;
static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t note_lock = PTHREAD_MUTEX_INITIALIZER;

/* One CPU device for the process, kept to exit: opening one per call would
 * cost more than most of the ops it serves. */
static void host_open(void) { host_st = tq_device_open("cpu", &host_dev); }

/* Adds op to the device's list of ops that ran on the host, once. */
static void note(tq_device *dev, const char *op)
{
    pthread_mutex_lock(&note_lock);
    size_t n = strlen(dev->host_ops), l = strlen(op);
    const char *p = dev->host_ops;
    int seen = 0;
    while ((p = strstr(p, op))) {
        if ((p == dev->host_ops || p[-1] == ' ') && (p[l] == ',' || !p[l]))
            seen = 1;
        p += l;
    }
    if (!seen && n + l + 3 < sizeof dev->host_ops)
        snprintf(dev->host_ops + n, sizeof dev->host_ops - n, "%s%s", n ? ", " : "", op);
    pthread_mutex_unlock(&note_lock);
}

const char *tq_device_host_ops(const tq_device *dev) { return dev->host_ops; }

void tq_hostpath_begin(tq_hostpath *h, tq_device *dev, const char *op)
{
    memset(h, 0, sizeof *h);
    pthread_once(&host_once, host_open);
    h->st = host_st;
    if (!h->st && dev->recording) /* a copy to the host would wait mid-recording */
        h->st = tq_fail(TQ_ERR_RUNTIME, "%s: op %s runs on the host and cannot be recorded in a graph",
                        dev->name, op);
    if (!h->st)
        note(dev, op);
}

static tq_tensor *copy(tq_hostpath *h, const tq_tensor *t, int fetch, int upload)
{
    if (!t || h->st)
        return NULL;
    if (h->n == TQ_HOSTPATH_MAX) {
        h->st = tq_fail(TQ_ERR_RUNTIME, "host path: too many tensors");
        return NULL;
    }
    tq_tensor *c = NULL;
    h->st = tq_tensor_new(host_dev, t->dtype, t->rank, t->dims, &c);
    if (!h->st && fetch)
        h->st = tq_tensor_download(t, tq_tensor_host(c), t->nbytes);
    if (!c)
        return NULL;
    h->dev[h->n] = t;
    h->host[h->n] = c;
    h->upload[h->n++] = (unsigned char)upload;
    return c;
}

const tq_tensor *tq_hostpath_in(tq_hostpath *h, const tq_tensor *t) { return copy(h, t, 1, 0); }
tq_tensor *tq_hostpath_out(tq_hostpath *h, tq_tensor *t, int fetch) { return copy(h, t, fetch, 1); }

tq_status tq_hostpath_end(tq_hostpath *h, tq_status st)
{
    if (!st)
        st = h->st;
    for (int i = 0; i < h->n; i++) {
        if (!st && h->upload[i])
            st = tq_tensor_upload((tq_tensor *)h->dev[i], tq_tensor_host(h->host[i]),
                                  h->dev[i]->nbytes);
        tq_tensor_free(h->host[i]);
    }
    return st;
}

/* h->st set means a copy failed: the op is not run, end reports the failure. */
#define RUN(h, call) tq_hostpath_end(&h, h.st ? h.st : (call))

tq_status tq_host_matmul(const tq_tensor *a, int trans_a, const tq_tensor *b, int trans_b,
                         float alpha, float beta, tq_tensor *c)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, c->dev, "matmul");
    const tq_tensor *ha = tq_hostpath_in(&h, a), *hb = tq_hostpath_in(&h, b);
    tq_tensor *hc = tq_hostpath_out(&h, c, beta != 0);
    return RUN(h, tq_op_matmul(ha, trans_a, hb, trans_b, alpha, beta, hc));
}

tq_status tq_host_quantize_rows(const tq_tensor *x, const tq_tensor *colscale, tq_tensor *q,
                                tq_tensor *scale)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "quantize_rows");
    const tq_tensor *hx = tq_hostpath_in(&h, x), *hcs = tq_hostpath_in(&h, colscale);
    tq_tensor *hq = tq_hostpath_out(&h, q, 0), *hs = tq_hostpath_out(&h, scale, 0);
    return RUN(h, tq_op_quantize_rows(hx, hcs, hq, hs));
}

tq_status tq_host_matmul_i8(const tq_tensor *a, const tq_tensor *ascale, const tq_tensor *b,
                            const tq_tensor *bscale, const tq_i8_rest *rest, float beta,
                            const tq_matmul_then *then, tq_tensor *c)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, c->dev, "matmul_i8");
    const tq_tensor *ha = tq_hostpath_in(&h, a), *has = tq_hostpath_in(&h, ascale),
                    *hb = tq_hostpath_in(&h, b), *hbs = tq_hostpath_in(&h, bscale);
    tq_matmul_then ht = {tq_hostpath_in(&h, then->bias), then->gelu,
                         then->low ? tq_hostpath_out(&h, then->low, 0) : NULL,
                         0 /* C comes back to the device: computed */};
    tq_i8_rest hr = {NULL, NULL, NULL};
    if (rest)
        hr = (tq_i8_rest){tq_hostpath_in(&h, rest->x), tq_hostpath_in(&h, rest->cols),
                          tq_hostpath_in(&h, rest->w)};
    tq_tensor *hc = tq_hostpath_out(&h, c, beta != 0);
    return RUN(h, tq_op_matmul_i8_rest(ha, has, hb, hbs, rest ? &hr : NULL, beta, &ht, hc));
}

tq_status tq_host_rownorm(const tq_tensor *x, tq_tensor *norms)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "rownorm");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hn = tq_hostpath_out(&h, norms, 0);
    return RUN(h, tq_op_rownorm(hx, hn));
}

tq_status tq_host_normalize(const tq_tensor *x, float eps, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "normalize");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_normalize(hx, eps, hy));
}

tq_status tq_host_topk(const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "topk");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hv = tq_hostpath_out(&h, vals, 0), *hi = tq_hostpath_out(&h, idx, 0);
    return RUN(h, tq_op_topk(hx, k, hv, hi));
}

tq_status tq_host_softmax(const tq_tensor *x, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "softmax");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_softmax(hx, hy));
}

tq_status tq_host_layernorm(const tq_tensor *x, const tq_tensor *gamma, const tq_tensor *beta,
                            float eps, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "layernorm");
    const tq_tensor *hx = tq_hostpath_in(&h, x), *hg = tq_hostpath_in(&h, gamma),
                    *hb = tq_hostpath_in(&h, beta);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_layernorm(hx, hg, hb, eps, hy));
}

tq_status tq_host_gelu(const tq_tensor *x, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "gelu");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_gelu(hx, hy));
}

tq_status tq_host_activate(const tq_tensor *x, tq_activation act, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "activate");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_activate(hx, act, hy));
}

tq_status tq_host_add(const tq_tensor *a, const tq_tensor *b, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, a->dev, "add");
    const tq_tensor *ha = tq_hostpath_in(&h, a), *hb = tq_hostpath_in(&h, b);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_add(ha, hb, hy));
}

tq_status tq_host_scale(const tq_tensor *x, float alpha, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "scale");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_scale(hx, alpha, hy));
}

tq_status tq_host_gather(const tq_tensor *x, const tq_tensor *idx, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "gather");
    const tq_tensor *hx = tq_hostpath_in(&h, x), *hi = tq_hostpath_in(&h, idx);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_gather(hx, hi, hy));
}

tq_status tq_host_convert(const tq_tensor *x, tq_tensor *y)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "convert");
    const tq_tensor *hx = tq_hostpath_in(&h, x);
    tq_tensor *hy = tq_hostpath_out(&h, y, 0);
    return RUN(h, tq_op_convert(hx, hy));
}

tq_status tq_host_attention(const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                            const tq_attention_args *args, tq_tensor *out)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, q->dev, "attention");
    tq_attention_args a = *args;
    const tq_tensor *hq = tq_hostpath_in(&h, q), *hk = tq_hostpath_in(&h, k),
                    *hv = tq_hostpath_in(&h, v);
    a.key_len = tq_hostpath_in(&h, args->key_len);
    a.qgroup = tq_hostpath_in(&h, args->qgroup);
    a.kgroup = tq_hostpath_in(&h, args->kgroup);
    a.bias = tq_hostpath_in(&h, args->bias);
    a.received = tq_hostpath_out(&h, args->received, 0);
    a.weights = tq_hostpath_out(&h, args->weights, 0);
    a.low = NULL; /* (op.c rounds out on the device afterwards) */
    tq_tensor *ho = tq_hostpath_out(&h, out, 0);
    return RUN(h, tq_op_attention(hq, hk, hv, &a, ho));
}

tq_status tq_host_above(const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt, tq_tensor *lst)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "above");
    const tq_tensor *hx = tq_hostpath_in(&h, x), *ht = tq_hostpath_in(&h, thr);
    tq_tensor *hc = tq_hostpath_out(&h, cnt, 0), *hl = tq_hostpath_out(&h, lst, 0);
    return RUN(h, tq_op_above(hx, ht, hc, hl));
}

tq_status tq_host_simtopk(const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, q->dev, "simtopk");
    const tq_tensor *hq = tq_hostpath_in(&h, q), *hd = tq_hostpath_in(&h, db);
    tq_tensor *hv = tq_hostpath_out(&h, vals, 1), *hi = tq_hostpath_out(&h, idx, 1);
    return RUN(h, tq_op_simtopk(hq, hd, metric, idx_base, hv, hi));
}

tq_status tq_host_codetopk(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                           const tq_tensor *dbscale, tq_metric metric, int64_t idx_base,
                           tq_tensor *vals, tq_tensor *idx)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, q->dev, "codetopk");
    const tq_tensor *hq = tq_hostpath_in(&h, q), *hd = tq_hostpath_in(&h, db);
    const tq_tensor *hqs = tq_hostpath_in(&h, qscale), *hds = tq_hostpath_in(&h, dbscale);
    tq_tensor *hv = tq_hostpath_out(&h, vals, 1), *hi = tq_hostpath_out(&h, idx, 1);
    return RUN(h, tq_op_codetopk(hq, hqs, hd, hds, metric, idx_base, hv, hi));
}

tq_status tq_host_codematrix(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                             const tq_tensor *dbscale, tq_metric metric, tq_tensor *out)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, q->dev, "codematrix");
    const tq_tensor *hq = tq_hostpath_in(&h, q), *hd = tq_hostpath_in(&h, db);
    const tq_tensor *hqs = tq_hostpath_in(&h, qscale), *hds = tq_hostpath_in(&h, dbscale);
    tq_tensor *ho = tq_hostpath_out(&h, out, 0);
    return RUN(h, tq_op_codematrix(hq, hqs, hd, hds, metric, ho));
}

tq_status tq_host_codescreen(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *qterms,
                             const tq_tensor *db, const tq_tensor *dbscale,
                             const tq_tensor *dbterms, tq_tensor *out)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, q->dev, "codescreen");
    const tq_tensor *hq = tq_hostpath_in(&h, q), *hd = tq_hostpath_in(&h, db);
    const tq_tensor *hqs = tq_hostpath_in(&h, qscale), *hds = tq_hostpath_in(&h, dbscale);
    const tq_tensor *hqa = tq_hostpath_in(&h, qterms), *hxb = tq_hostpath_in(&h, dbterms);
    tq_tensor *ho = tq_hostpath_out(&h, out, 0);
    return RUN(h, tq_op_codescreen(hq, hqs, hqa, hd, hds, hxb, ho));
}

typedef struct host_rowprod {
    tq_tensor *db;   /* host copy of the database */
    tq_rowprod *p;   /* the CPU's prepared product */
} host_rowprod;

tq_status tq_host_rowprod_prepare(const tq_tensor *db, void **state)
{
    *state = NULL;
    tq_hostpath h;
    tq_hostpath_begin(&h, db->dev, "rowprod");
    host_rowprod *r = calloc(1, sizeof *r);
    tq_status st = h.st ? h.st : r ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_tensor_new(host_dev, db->dtype, db->rank, db->dims, &r->db);
    if (!st)
        st = tq_tensor_download(db, tq_tensor_host(r->db), db->nbytes);
    if (!st)
        st = tq_rowprod_new(r->db, &r->p);
    if (st) {
        tq_host_rowprod_release(r);
        return st;
    }
    *state = r;
    return TQ_OK;
}

tq_status tq_host_rowprod(void *state, const tq_tensor *q, float alpha, tq_tensor *out)
{
    host_rowprod *r = state;
    tq_hostpath h;
    tq_hostpath_begin(&h, q->dev, "rowprod");
    const tq_tensor *hq = tq_hostpath_in(&h, q);
    tq_tensor *ho = tq_hostpath_out(&h, out, 0);
    return RUN(h, tq_op_rowprod(r->p, hq, alpha, ho));
}

void tq_host_rowprod_release(void *state)
{
    host_rowprod *r = state;
    if (!r)
        return;
    tq_rowprod_free(r->p);
    tq_tensor_free(r->db);
    free(r);
}

tq_status tq_hostpath_cpu(tq_device **dev)
{
    pthread_once(&host_once, host_open);
    *dev = host_st ? NULL : host_dev;
    return host_st;
}

tq_status tq_host_activate_grad(const tq_tensor *x, tq_activation act, const tq_tensor *dy,
                                tq_tensor *dx)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "activate_grad");
    const tq_tensor *hx = tq_hostpath_in(&h, x), *hd = tq_hostpath_in(&h, dy);
    tq_tensor *hy = tq_hostpath_out(&h, dx, 0);
    return RUN(h, tq_op_activate_grad(hx, act, hd, hy));
}

tq_status tq_host_gelu_grad(const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx)
{
    tq_hostpath h;
    tq_hostpath_begin(&h, x->dev, "gelu_grad");
    const tq_tensor *hx = tq_hostpath_in(&h, x), *hd = tq_hostpath_in(&h, dy);
    tq_tensor *hy = tq_hostpath_out(&h, dx, 0);
    return RUN(h, tq_op_gelu_grad(hx, hd, hy));
}
