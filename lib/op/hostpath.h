/* hostpath.h: one way for every backend to run an op it has no kernel for:
 * the tensors are copied to the host, the CPU backend computes, the outputs
 * are copied back. op.c takes it for any NULL entry of a backend's table, and
 * a backend may call a tq_host_* function itself for the cases its kernel
 * does not cover (a k too large, a dtype pair). Exact (the CPU's results),
 * slow (a round trip each call), and said under -v (tq_device_host_ops). */
#ifndef TQ_HOSTPATH_H
#define TQ_HOSTPATH_H

#include "tq.h"

/* The op's tensors, copied as needed. At most TQ_HOSTPATH_MAX of them. */
#define TQ_HOSTPATH_MAX 12
typedef struct tq_hostpath {
    tq_status st;                        /* the first failure, sticky */
    int n;
    const tq_tensor *dev[TQ_HOSTPATH_MAX]; /* the device tensors */
    tq_tensor *host[TQ_HOSTPATH_MAX];    /* their host copies */
    unsigned char upload[TQ_HOSTPATH_MAX]; /* copied back at the end */
} tq_hostpath;

/* Starts a host run of op on dev's behalf (noted for tq_device_host_ops). */
void tq_hostpath_begin(tq_hostpath *h, tq_device *dev, const char *op);
/* A host tensor holding t's values (NULL for NULL). */
const tq_tensor *tq_hostpath_in(tq_hostpath *h, const tq_tensor *t);
/* A host tensor for an output; fetch = 1 when the op reads it too (beta,
 * running top-k lists). Copied back to t by tq_hostpath_end. */
tq_tensor *tq_hostpath_out(tq_hostpath *h, tq_tensor *t, int fetch);
/* Copies the outputs back when st (the CPU op's status) and the copies are
 * fine, frees the host tensors, and returns the first failure. */
tq_status tq_hostpath_end(tq_hostpath *h, tq_status st);

/* The ops through the host, with the op API's arguments. */
tq_status tq_host_matmul(const tq_tensor *a, int trans_a, const tq_tensor *b, int trans_b,
                         float alpha, float beta, tq_tensor *c);
tq_status tq_host_quantize_rows(const tq_tensor *x, const tq_tensor *colscale, tq_tensor *q,
                                tq_tensor *scale);
tq_status tq_host_matmul_i8(const tq_tensor *a, const tq_tensor *ascale, const tq_tensor *b,
                            const tq_tensor *bscale, const tq_i8_rest *rest, float beta,
                            const tq_matmul_then *then, tq_tensor *c);
tq_status tq_host_rownorm(const tq_tensor *x, tq_tensor *norms);
tq_status tq_host_normalize(const tq_tensor *x, float eps, tq_tensor *y);
tq_status tq_host_topk(const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx);
tq_status tq_host_softmax(const tq_tensor *x, tq_tensor *y);
tq_status tq_host_layernorm(const tq_tensor *x, const tq_tensor *gamma, const tq_tensor *beta,
                            float eps, tq_tensor *y);
tq_status tq_host_gelu(const tq_tensor *x, tq_tensor *y);
tq_status tq_host_activate(const tq_tensor *x, tq_activation act, tq_tensor *y);
tq_status tq_host_activate_grad(const tq_tensor *x, tq_activation act, const tq_tensor *dy,
                                tq_tensor *dx);
tq_status tq_host_gelu_grad(const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx);
tq_status tq_host_add(const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
tq_status tq_host_scale(const tq_tensor *x, float alpha, tq_tensor *y);
tq_status tq_host_gather(const tq_tensor *x, const tq_tensor *idx, tq_tensor *y);
tq_status tq_host_convert(const tq_tensor *x, tq_tensor *y);
tq_status tq_host_attention(const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                            const tq_attention_args *args, tq_tensor *out);
tq_status tq_host_above(const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt, tq_tensor *lst);
tq_status tq_host_simtopk(const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
tq_status tq_host_codetopk(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                           const tq_tensor *dbscale, tq_metric metric, int64_t idx_base,
                           tq_tensor *vals, tq_tensor *idx);
tq_status tq_host_codematrix(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                             const tq_tensor *dbscale, tq_metric metric, tq_tensor *out);
tq_status tq_host_codescreen(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *qterms,
                             const tq_tensor *db, const tq_tensor *dbscale,
                             const tq_tensor *dbterms, tq_tensor *out);
/* rowprod through the host: prepare keeps a host copy of db and the CPU's
 * prepared state; rowprod copies q in and out back. */
tq_status tq_host_rowprod_prepare(const tq_tensor *db, void **state);
tq_status tq_host_rowprod(void *state, const tq_tensor *q, float alpha, tq_tensor *out);
void tq_host_rowprod_release(void *state);

/* The process's CPU device (opened once, kept to exit), for a backend that
 * runs part of an op on the host itself (the device simtopk's leftovers). */
tq_status tq_hostpath_cpu(tq_device **dev);

#endif
