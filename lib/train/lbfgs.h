/* lbfgs.h: the full-batch L-BFGS solver of tq-train's convex models (not
 * public): its state, which checkpoint.c saves whole, and its step. */
#ifndef TQ_TRAIN_LBFGS_H
#define TQ_TRAIN_LBFGS_H

#include <stddef.h>
#include <stdint.h>

#include "train.h"

#define TQ_LBFGS_MEMORY 10 /* scipy's L-BFGS-B maxcor */
#define TQ_LBFGS_MAXLS 50  /* evaluations a line search may take (scikit-learn's maxls) */
#define TQ_LBFGS_CHUNK TQ_TRAIN_LBFGS_CHUNK /* units a partial sum covers: fixed, so the sums' order is too */
/* rows x features x outputs (padded) an evaluation must reach before its
 * chunks go to the thread pool: below, the pool's fixed cost (a wake-up, and
 * each helper's spin of 50 us after the call, processor time the run pays)
 * is much of the work: one thread takes a fifth to a third less processor
 * time, and on a busy machine less wall time too (digits, 1257 x 64 x 12) */
#define TQ_LBFGS_PARALLEL_MIN (1 << 20)

/* how it ended: TQ_LBFGS_* (train.h) */

typedef struct tq_lbfgs {
    size_t n;                 /* parameters: the net's flat vector, padding included */
    double *x, *g;            /* the iterate and the objective's gradient there */
    double *xt, *gt, *dir;    /* a trial point, its gradient, the search direction */
    double *s, *y, *rho;      /* TQ_LBFGS_MEMORY pairs s = x' - x, y = g' - g; rho = 1 / s.y */
    double *part;             /* partial sums of chunks (loss sum then gradient sums) */
    double *wpad;             /* W and b of a point, outputs apart by linprod.h's stride */
    double f, fold, step, gmax;
    double wsum;              /* the weight the loss is a mean over (rows' weights, or groups) */
    int64_t head, count;      /* the newest pair is at (head - 1) mod memory; count held */
    int64_t iter, fevals;
    int64_t state;            /* TQ_LBFGS_* */
} tq_lbfgs;

#endif
