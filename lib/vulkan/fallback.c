/* fallback.c: ops or dtype pairs this backend has no shader for run on the
 * host: the tensors are copied to CPU tensors, the CPU backend computes, and
 * the results go back. Slow (a wait for the device each time) but exact, and
 * never a failure for want of a shader. */
#include "vk.h"

/* A CPU tensor with the shape and contents of t. */
static tq_status to_host(tq_vk_ctx *c, const tq_tensor *t, int fetch, tq_tensor **h)
{
    tq_status st = tq_tensor_new(c->host, t->dtype, t->rank, t->dims, h);
    if (!st && fetch && (st = tq_tensor_download(t, tq_tensor_host(*h), t->nbytes))) {
        tq_tensor_free(*h);
        *h = NULL;
    }
    return st;
}

tq_status tq_vk_host_convert(tq_vk_ctx *c, const tq_tensor *x, tq_tensor *y)
{
    tq_tensor *hx = NULL, *hy = NULL;
    tq_status st = to_host(c, x, 1, &hx);
    if (!st)
        st = to_host(c, y, 0, &hy);
    if (!st)
        st = tq_op_convert(hx, hy);
    if (!st)
        st = tq_tensor_upload(y, tq_tensor_host(hy), y->nbytes);
    tq_tensor_free(hx);
    tq_tensor_free(hy);
    return st;
}

tq_status tq_vk_host_topk(tq_vk_ctx *c, const tq_tensor *x, int64_t k, tq_tensor *vals,
                          tq_tensor *idx)
{
    tq_tensor *hx = NULL, *hv = NULL, *hi = NULL;
    tq_status st = to_host(c, x, 1, &hx);
    if (!st)
        st = to_host(c, vals, 0, &hv);
    if (!st)
        st = to_host(c, idx, 0, &hi);
    if (!st)
        st = tq_op_topk(hx, k, hv, hi);
    if (!st)
        st = tq_tensor_upload(vals, tq_tensor_host(hv), vals->nbytes);
    if (!st)
        st = tq_tensor_upload(idx, tq_tensor_host(hi), idx->nbytes);
    tq_tensor_free(hx);
    tq_tensor_free(hv);
    tq_tensor_free(hi);
    return st;
}

tq_status tq_vk_host_simtopk(tq_vk_ctx *c, const tq_tensor *q, const tq_tensor *db,
                             tq_metric metric, int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    tq_tensor *hq = NULL, *hd = NULL, *hv = NULL, *hi = NULL;
    tq_status st = to_host(c, q, 1, &hq);
    if (!st)
        st = to_host(c, db, 1, &hd);
    if (!st)
        st = to_host(c, vals, 1, &hv);
    if (!st)
        st = to_host(c, idx, 1, &hi);
    if (!st)
        st = tq_op_simtopk(hq, hd, metric, idx_base, hv, hi);
    if (!st)
        st = tq_tensor_upload(vals, tq_tensor_host(hv), vals->nbytes);
    if (!st)
        st = tq_tensor_upload(idx, tq_tensor_host(hi), idx->nbytes);
    tq_tensor_free(hq);
    tq_tensor_free(hd);
    tq_tensor_free(hv);
    tq_tensor_free(hi);
    return st;
}
