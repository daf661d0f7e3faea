/* trainer.h: the trainer's state, shared by train.c (the loop) and
 * checkpoint.c (which saves and restores all of it); not public. */
#ifndef TQ_TRAIN_TRAINER_H
#define TQ_TRAIN_TRAINER_H

#include "lbfgs.h"
#include "net.h"

struct tq_trainer {
    tq_train_cfg c;
    const tq_train_data *tr, *va;
    int loss, output, nl;
    int64_t dims[TQ_TRAIN_MAX_LAYERS + 1], classes, cap;
    double *mu, *sd;
    float *xtr, *xva;           /* standardized copies, or NULL */
    tq_tensor *ttr, *tva;       /* the features on the device */
    tq_net *net;
    tq_optim opt;
    tq_rng rng;
    int64_t units, *perm, *idx, *gs;
    double *yb;
    float *wb, *dout, *best;
    int64_t epoch, pos, step, total_steps, per_epoch, examples, ep_batches, bad_epochs;
    double ep_loss, best_metric;
    double best_loss;           /* no_change without a validation set: the lowest epoch loss */
    double scale;               /* f16's loss scale (1 otherwise) */
    int64_t clean;              /* steps since the scale last changed */
    tq_lbfgs lb;                /* --optimizer lbfgs */
    float *chunks;              /* under a comm: the chunks' gradients and loss sums */
    int have_best, done, stopped;
    char describe[256];
};

/* Units [u0, u1) of order (rows, or groups for listwise) of d as the batch
 * (row indices, targets, weights, group bounds in t's buffers); returns its
 * rows, *ng the groups. */
int64_t tq_trainer_gather(tq_trainer *t, const tq_train_data *d, const int64_t *order, int64_t u0,
                          int64_t u1, int64_t *ng);
/* The gradient of the batch's mean loss over units [u0, u1) of the epoch's
 * order into the net's gradient, scaled by t->scale; *sum, *wsum: the loss
 * sum and the weight it is a mean over. parallel.c: the chunked version. */
tq_status tq_trainer_chunked_grad(tq_trainer *t, int64_t u0, int64_t u1, double *sum,
                                  double *wsum);

/* lbfgs.c: the full-batch solver: init evaluates the start (the weights
 * as they are), iter runs one iteration (a line search) and sets lb.state. */
tq_status tq_trainer_lbfgs_init(tq_trainer *t);
tq_status tq_trainer_lbfgs_iter(tq_trainer *t);
void tq_trainer_lbfgs_free(tq_trainer *t);

#endif
