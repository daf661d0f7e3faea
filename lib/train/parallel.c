/* parallel.c: the gradient of a batch under data parallelism (train.h,
 * tq_train_comm): fixed chunks of the batch, each computed by one rank, the
 * ranks' chunk vectors summed (exactly: one rank fills each slot) and the
 * chunks added in chunk order on every rank. Neither the chunks nor the order
 * depend on the number of ranks, so neither does the model, to the bit. */
#include "../internal.h"
#include "loss.h"
#include "trainer.h"

#include <math.h>

tq_status tq_trainer_chunked_grad(tq_trainer *t, int64_t u0, int64_t u1, double *sum,
                                  double *wsum)
{
    const tq_train_comm *cm = t->c.comm;
    int64_t nch = (u1 - u0 + TQ_TRAIN_CHUNK - 1) / TQ_TRAIN_CHUNK, o = t->dims[t->nl], ng;
    size_t size = tq_net_size(t->net), slot = size + 1; /* a chunk's gradient, then its loss sum */
    if (!t->chunks) {
        int64_t most = (t->c.batch + TQ_TRAIN_CHUNK - 1) / TQ_TRAIN_CHUNK;
        if (!(t->chunks = malloc((size_t)most * slot * 4)))
            return tq_fail(TQ_ERR_NOMEM, "out of memory for the chunks' gradients");
    }
    /* the batch's whole weight: every rank has the data, so each knows it */
    int64_t n = tq_trainer_gather(t, t->tr, t->perm, u0, u1, &ng);
    double wtot = 0;
    if (t->loss == TQ_LOSS_LISTWISE)
        wtot = (double)ng;
    else
        for (int64_t i = 0; i < n; i++)
            wtot += t->wb[i];
    memset(t->chunks, 0, (size_t)nch * slot * 4);
    tq_status st = TQ_OK;
    for (int64_t c = cm->rank; c < nch && !st; c += cm->size) {
        int64_t a = u0 + c * TQ_TRAIN_CHUNK, b = a + TQ_TRAIN_CHUNK < u1 ? a + TQ_TRAIN_CHUNK : u1;
        int64_t rows = tq_trainer_gather(t, t->tr, t->perm, a, b, &ng);
        const float *z;
        double ws;
        if ((st = tq_net_input(t->net, t->ttr, t->idx, rows)) || (st = tq_net_forward(t->net, &z)))
            break;
        double s = tq_loss_batch(t->loss, z, rows, o, t->yb, t->tr->w ? t->wb : NULL, t->gs, ng,
                                 &ws, t->dout);
        /* d(s / ws) -> d(s / wtot), and the f16 loss scale */
        double f = wtot > 0 ? ws / wtot * t->scale : 0;
        for (int64_t i = 0; i < rows * o; i++)
            t->dout[i] = (float)(t->dout[i] * f);
        if (isfinite(s) && (st = tq_net_backward(t->net, t->dout)))
            break;
        float *dst = t->chunks + (size_t)c * slot;
        memcpy(dst, tq_net_grad(t->net), size * 4);
        dst[size] = (float)s;
    }
    /* every rank takes part in the sum, even one that failed (with zeros),
     * so that none waits forever; the tool ends the job on the failure */
    tq_status cst = cm->sum(cm->ctx, t->chunks, (size_t)nch * slot);
    if (!st)
        st = cst;
    if (st)
        return st;
    float *g = tq_net_grad(t->net);
    memset(g, 0, size * 4);
    *sum = 0;
    for (int64_t c = 0; c < nch; c++) {
        const float *src = t->chunks + (size_t)c * slot;
        for (size_t i = 0; i < size; i++)
            g[i] += src[i];
        *sum += src[size];
    }
    *wsum = wtot;
    return TQ_OK;
}
