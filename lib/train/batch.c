/* batch.c: which rows a step or a pass takes, shared by the training loop
 * (train.c) and the fixed-order chunked gradient (parallel.c), which would
 * otherwise call each other. */
#include "../internal.h"
#include "trainer.h"

/* Units [u0, u1) of order (rows, or groups for listwise) of data d as the
 * batch: row indices, targets, weights and group bounds; returns its rows. */
int64_t tq_trainer_gather(tq_trainer *t, const tq_train_data *d, const int64_t *order, int64_t u0,
                          int64_t u1, int64_t *ng)
{
    int64_t n = 0;
    *ng = 0;
    t->gs[0] = 0;
    for (int64_t u = u0; u < u1; u++) {
        int64_t a = order ? order[u] : u, b = a + 1;
        if (t->loss == TQ_LOSS_LISTWISE) {
            b = d->gstart[a + 1];
            a = d->gstart[a];
        }
        for (int64_t r = a; r < b; r++) {
            t->idx[n] = r;
            t->yb[n] = d->y[r];
            t->wb[n++] = d->w ? d->w[r] : 1.0f;
        }
        t->gs[++*ng] = n;
    }
    return n;
}
