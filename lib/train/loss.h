/* loss.h: the losses and validation metrics of tq-train (not public). */
#ifndef TQ_TRAIN_LOSS_H
#define TQ_TRAIN_LOSS_H

#include "train.h"

/* The loss over a batch of n rows with o outputs each (z, row-major, before
 * any output function): returns the sum of the units' weighted losses and
 * sets *wsum to the sum of their weights (units: rows, or for listwise the ng
 * groups whose rows are [gs[g], gs[g+1]) of the batch, weight 1 each). With
 * dout, it gets the gradient of (that sum / *wsum) with respect to z. w NULL:
 * weights 1. Sums are in double, in row order. */
double tq_loss_batch(int loss, const float *z, int64_t n, int64_t o, const double *y,
                     const float *w, const int64_t *gs, int64_t ng, double *wsum, float *dout);

/* e[j] = e^(z[j] - mx) for j < m, each z[j] <= mx (the terms of a log sum
 * exp after its max): a polynomial of relative error below 3e-14, 0 below
 * e^-708, the same bits on every CPU; several times glibc's exp's speed. */
void tq_loss_exp_terms(const double *z, double mx, int64_t m, double *e);

/* Metric state over a validation pass, added to a batch at a time. */
typedef struct tq_metric_acc {
    int loss;
    double hits, count;      /* accuracy; MRR: sum of 1/rank, groups */
    float *score;            /* AUC: every score and label, ranked at the end */
    unsigned char *pos;
    int64_t n, cap;
} tq_metric_acc;
void tq_metric_add(tq_metric_acc *m, const float *z, int64_t n, int64_t o, const double *y,
                   const int64_t *gs, int64_t ng);
/* The metric (higher is better): accuracy, AUC (NaN without both classes),
 * MRR; for mse, NaN (the caller uses the loss). Frees the state. */
double tq_metric_end(tq_metric_acc *m);

#endif
