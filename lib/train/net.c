/* net.c: forward and backward of tq-train's networks through the op API:
 *   forward   Z_i = A_{i-1} W_i + b_i,  A_i = f(Z_i)  (A_0 the input rows)
 *   backward  dW_i = A_{i-1}^T dZ_i,  db_i = 1^T dZ_i,
 *             dZ_{i-1} = f'(Z_{i-1}) * (dZ_i W_i^T)
 * Each product is one matmul whose blocks depend on the shape alone, so the
 * gradient is the same bits whatever the thread count. On a device that works
 * in host memory (the CPU) the tensors wrap the host parameter and gradient
 * vectors; elsewhere they are copied each step. */
#include "../internal.h"
#include "net.h"

#define L_MAX TQ_TRAIN_MAX_LAYERS

struct tq_net {
    tq_device *dev;
    int nl, act, host;
    int64_t dim[L_MAX + 1], cap, n;
    size_t woff[L_MAX], boff[L_MAX], size;
    float *theta, *grad, *out, *dout; /* out, dout: host copies off a host device */
    tq_param_span spans[2 * L_MAX];
    tq_tensor *w[L_MAX], *b[L_MAX], *dw[L_MAX], *db[L_MAX];
    /* work tensors of cap rows, and views of them for the current n */
    tq_tensor *z[L_MAX], *a[L_MAX], *d[L_MAX], *ones, *idx, *xb;
    tq_tensor *zv[L_MAX], *av[L_MAX], *dv[L_MAX], *onesv, *idxv, *xbv;
    /* --precision bf16|f16: the products' operands in prec (inputs, weights
     * and output gradients), which matmul takes as they are: widened exactly
     * on the CPU, a tensor-core GEMM on a GPU with a BLAS library */
    tq_dtype prec;
    tq_tensor *lin[L_MAX], *lw[L_MAX], *ld[L_MAX];
    tq_tensor *linv[L_MAX], *ldv[L_MAX];
};

static size_t pad16(size_t n) { return (n + 15) & ~(size_t)15; }

/* A tensor over host memory where the device allows, else a device tensor. */
static tq_status param_tensor(tq_net *net, float *host, int rank, const int64_t *dims,
                              tq_tensor **t)
{
    tq_status st = tq_tensor_wrap_host(net->dev, TQ_DTYPE_F32, rank, dims, host, t);
    if (st || *t)
        return st;
    net->host = 0;
    return tq_tensor_new(net->dev, TQ_DTYPE_F32, rank, dims, t);
}

static tq_status work(tq_net *net, int64_t rows, int64_t cols, tq_dtype dt, tq_tensor **t)
{
    int64_t dims[2] = {rows, cols};
    return tq_tensor_new(net->dev, dt, cols ? 2 : 1, dims, t);
}

tq_status tq_net_new(tq_device *dev, int nl, const int64_t *dims, int act, int64_t cap,
                     tq_net **out)
{
    *out = NULL;
    tq_net *net = calloc(1, sizeof *net);
    if (!net)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    net->dev = dev;
    net->nl = nl;
    net->act = act;
    net->cap = cap;
    net->host = 1;
    memcpy(net->dim, dims, (size_t)(nl + 1) * sizeof *dims);
    size_t at = 0;
    for (int i = 0; i < nl; i++) {
        size_t nw = (size_t)(dims[i] * dims[i + 1]);
        net->woff[i] = at;
        net->spans[2 * i] = (tq_param_span){at, nw, 1};
        at += pad16(nw);
        net->boff[i] = at;
        net->spans[2 * i + 1] = (tq_param_span){at, (size_t)dims[i + 1], 0};
        at += pad16((size_t)dims[i + 1]);
    }
    net->size = at;
    tq_status st = TQ_OK;
    net->theta = aligned_alloc(64, at * 4);
    net->grad = aligned_alloc(64, at * 4);
    if (!net->theta || !net->grad)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory for %zu parameters", at);
    else {
        memset(net->theta, 0, at * 4);
        memset(net->grad, 0, at * 4);
    }
    for (int i = 0; i < nl && !st; i++) {
        int64_t wd[2] = {dims[i], dims[i + 1]}, bd = dims[i + 1];
        if ((st = param_tensor(net, net->theta + net->woff[i], 2, wd, &net->w[i])) ||
            (st = param_tensor(net, net->theta + net->boff[i], 1, &bd, &net->b[i])) ||
            (st = param_tensor(net, net->grad + net->woff[i], 2, wd, &net->dw[i])) ||
            (st = param_tensor(net, net->grad + net->boff[i], 2, (int64_t[]){1, bd}, &net->db[i])))
            break;
        if ((st = work(net, cap, dims[i + 1], TQ_DTYPE_F32, &net->z[i])) ||
            (st = work(net, cap, dims[i + 1], TQ_DTYPE_F32, &net->d[i])) ||
            (i + 1 < nl && (st = work(net, cap, dims[i + 1], TQ_DTYPE_F32, &net->a[i]))))
            break;
    }
    if (!st && !(st = work(net, 1, cap, TQ_DTYPE_F32, &net->ones)) &&
        !(st = work(net, cap, 0, TQ_DTYPE_I64, &net->idx)))
        st = work(net, cap, dims[0], TQ_DTYPE_F32, &net->xb);
    if (!st) {
        float *one = malloc((size_t)cap * 4);
        if (!one)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; !st && i < cap; i++)
            one[i] = 1.0f;
        if (!st)
            st = tq_tensor_upload(net->ones, one, (size_t)cap * 4);
        free(one);
    }
    size_t o = (size_t)(cap * dims[nl]);
    if (!st && !net->host && (!(net->out = malloc(o * 4)) || !(net->dout = malloc(o * 4))))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (st) {
        tq_net_free(net);
        return st;
    }
    *out = net;
    return TQ_OK;
}

static void free_views(tq_net *net)
{
    for (int i = 0; i < net->nl; i++) {
        tq_tensor_free(net->zv[i]);
        tq_tensor_free(net->av[i]);
        tq_tensor_free(net->dv[i]);
        net->zv[i] = net->av[i] = net->dv[i] = NULL;
        tq_tensor_free(net->linv[i]);
        tq_tensor_free(net->ldv[i]);
        net->linv[i] = net->ldv[i] = NULL;
    }
    tq_tensor_free(net->onesv);
    tq_tensor_free(net->idxv);
    tq_tensor_free(net->xbv);
    net->onesv = net->idxv = net->xbv = NULL;
    net->n = 0;
}

void tq_net_free(tq_net *net)
{
    if (!net)
        return;
    free_views(net);
    for (int i = 0; i < net->nl; i++) {
        tq_tensor_free(net->w[i]);
        tq_tensor_free(net->b[i]);
        tq_tensor_free(net->dw[i]);
        tq_tensor_free(net->db[i]);
        tq_tensor_free(net->z[i]);
        tq_tensor_free(net->a[i]);
        tq_tensor_free(net->d[i]);
        tq_tensor_free(net->lin[i]);
        tq_tensor_free(net->lw[i]);
        tq_tensor_free(net->ld[i]);
    }
    tq_tensor_free(net->ones);
    tq_tensor_free(net->idx);
    tq_tensor_free(net->xb);
    free(net->theta);
    free(net->grad);
    free(net->out);
    free(net->dout);
    free(net);
}

float *tq_net_theta(tq_net *net) { return net->theta; }
float *tq_net_grad(tq_net *net) { return net->grad; }
size_t tq_net_size(const tq_net *net) { return net->size; }
size_t tq_net_w_offset(const tq_net *net, int layer) { return net->woff[layer]; }
size_t tq_net_b_offset(const tq_net *net, int layer) { return net->boff[layer]; }
const tq_param_span *tq_net_spans(const tq_net *net, int *n)
{
    *n = 2 * net->nl;
    return net->spans;
}

tq_status tq_net_push(tq_net *net)
{
    tq_status st = TQ_OK;
    for (int i = 0; i < net->nl && !net->host && !st; i++) {
        st = tq_tensor_upload(net->w[i], net->theta + net->woff[i],
                              (size_t)(net->dim[i] * net->dim[i + 1]) * 4);
        if (!st)
            st = tq_tensor_upload(net->b[i], net->theta + net->boff[i], (size_t)net->dim[i + 1] * 4);
    }
    return st;
}

static tq_status view(const tq_tensor *parent, int64_t rows, int64_t cols, tq_tensor **t)
{
    int64_t dims[2] = {rows, cols};
    return tq_tensor_view(parent, 0, parent->dtype, cols ? 2 : 1, dims, t);
}

/* Views of the work tensors for batches of n rows (remade when n changes:
 * at most twice an epoch, for the last short batch). */
static tq_status set_rows(tq_net *net, int64_t n)
{
    if (n == net->n)
        return TQ_OK;
    free_views(net);
    tq_status st = TQ_OK;
    for (int i = 0; i < net->nl && !st; i++)
        if ((st = view(net->z[i], n, net->dim[i + 1], &net->zv[i])) ||
            (st = view(net->d[i], n, net->dim[i + 1], &net->dv[i])) ||
            (net->a[i] && (st = view(net->a[i], n, net->dim[i + 1], &net->av[i]))) ||
            (net->prec && ((st = view(net->lin[i], n, net->dim[i], &net->linv[i])) ||
                           (st = view(net->ld[i], n, net->dim[i + 1], &net->ldv[i])))))
            break;
    if (!st && !(st = view(net->ones, 1, n, &net->onesv)) && !(st = view(net->idx, n, 0, &net->idxv)))
        st = view(net->xb, n, net->dim[0], &net->xbv);
    if (st)
        free_views(net);
    else
        net->n = n;
    return st;
}

tq_status tq_net_set_precision(tq_net *net, tq_dtype prec)
{
    if (prec == TQ_DTYPE_F32)
        return TQ_OK;
    tq_status st = TQ_OK;
    for (int i = 0; i < net->nl && !st; i++) {
        int64_t in = net->dim[i], out = net->dim[i + 1];
        if ((st = work(net, net->cap, in, prec, &net->lin[i])) ||
            (st = tq_tensor_new(net->dev, prec, 2, (int64_t[]){in, out}, &net->lw[i])))
            break;
        st = work(net, net->cap, out, prec, &net->ld[i]);
    }
    free_views(net); /* remade with the rounding views on the next batch */
    if (!st)
        net->prec = prec;
    return st;
}

tq_status tq_net_input(tq_net *net, const tq_tensor *x, const int64_t *idx, int64_t n)
{
    tq_status st = set_rows(net, n);
    if (!st)
        st = tq_tensor_upload(net->idxv, idx, (size_t)n * 8);
    return st ? st : tq_op_gather(x, net->idxv, net->xbv);
}

tq_status tq_net_forward(tq_net *net, const float **out)
{
    tq_status st = TQ_OK;
    const tq_tensor *in = net->xbv;
    int last = net->nl - 1;
    for (int i = 0; i <= last && !st; i++) {
        const tq_tensor *w = net->w[i];
        if (net->prec) { /* rounded to nearest even, as the products take them */
            if ((st = tq_op_convert(in, net->linv[i])) || (st = tq_op_convert(w, net->lw[i])))
                break;
            in = net->linv[i], w = net->lw[i];
        }
        if ((st = tq_op_matmul(in, 0, w, 0, 1.0f, 0.0f, net->zv[i])) ||
            (st = tq_op_add(net->zv[i], net->b[i], net->zv[i])))
            break;
        if (i < last) {
            st = net->act == TQ_TRAIN_GELU
                     ? tq_op_gelu(net->zv[i], net->av[i])
                     : tq_op_activate(net->zv[i], (tq_activation)net->act, net->av[i]);
            in = net->av[i];
        }
    }
    if (st)
        return st;
    size_t bytes = (size_t)(net->n * net->dim[net->nl]) * 4;
    if (net->host) {
        *out = tq_tensor_host(net->zv[last]);
        return TQ_OK;
    }
    *out = net->out;
    return tq_tensor_download(net->zv[last], net->out, bytes);
}

tq_status tq_net_backward(tq_net *net, const float *dout)
{
    int last = net->nl - 1;
    size_t bytes = (size_t)(net->n * net->dim[net->nl]) * 4;
    tq_status st = tq_tensor_upload(net->dv[last], dout, bytes);
    for (int i = last; i >= 0 && !st; i--) {
        const tq_tensor *in = i ? net->av[i - 1] : net->xbv, *d = net->dv[i], *w = net->w[i];
        if (net->prec) { /* the forward rounded in and w already */
            if ((st = tq_op_convert(d, net->ldv[i])))
                break;
            in = net->linv[i], d = net->ldv[i], w = net->lw[i];
        }
        if ((st = tq_op_matmul(in, 1, d, 0, 1.0f, 0.0f, net->dw[i])) ||
            (st = tq_op_matmul(net->onesv, 0, net->dv[i], 0, 1.0f, 0.0f, net->db[i])))
            break;
        if (i == 0)
            break;
        if ((st = tq_op_matmul(d, 0, w, 1, 1.0f, 0.0f, net->dv[i - 1])))
            break;
        st = net->act == TQ_TRAIN_GELU
                 ? tq_op_gelu_grad(net->zv[i - 1], net->dv[i - 1], net->dv[i - 1])
                 : tq_op_activate_grad(net->zv[i - 1], (tq_activation)net->act, net->dv[i - 1],
                                       net->dv[i - 1]);
    }
    for (int i = 0; i < net->nl && !net->host && !st; i++) {
        st = tq_tensor_download(net->dw[i], net->grad + net->woff[i],
                                (size_t)(net->dim[i] * net->dim[i + 1]) * 4);
        if (!st)
            st = tq_tensor_download(net->db[i], net->grad + net->boff[i],
                                    (size_t)net->dim[i + 1] * 4);
    }
    return st;
}
