/* trainer.h: the trainer's state, shared by train.c (the loop) and
 * checkpoint.c (which saves and restores all of it); not public. */
#ifndef TQ_TRAIN_TRAINER_H
#define TQ_TRAIN_TRAINER_H

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
    double scale;               /* f16's loss scale (1 otherwise) */
    int64_t clean;              /* steps since the scale last changed */
    int have_best, done, stopped;
    char describe[256];
};

#endif
