/* optim.h: what train.c shares with optim.c and net.c (not public). */
#ifndef TQ_TRAIN_OPTIM_H
#define TQ_TRAIN_OPTIM_H

#include "train.h"

/* The seeded generator: xoshiro256** from splitmix64 of the seed; its state
 * is four words, saved whole in checkpoints. */
typedef struct tq_rng {
    uint64_t s[4];
} tq_rng;
void tq_rng_seed(tq_rng *r, uint64_t seed);
uint64_t tq_rng_next(tq_rng *r);
/* Uniform in [0, n), n >= 1, without bias (rejection), the same on every
 * machine. */
uint64_t tq_rng_below(tq_rng *r, uint64_t n);
/* Uniform double in [0, 1) from 53 bits. */
double tq_rng_unit(tq_rng *r);
/* Fisher-Yates shuffle of v[0..n). */
void tq_rng_shuffle(tq_rng *r, int64_t *v, int64_t n);

/* A run of parameters: count values at offset of the flat vector; decay says
 * whether L2 and weight decay apply (weights yes, biases no). */
typedef struct tq_param_span {
    size_t offset, count;
    int decay;
} tq_param_span;

typedef struct tq_optim {
    int kind;
    double momentum, beta1, beta2, eps, l2, wd;
    size_t n;          /* values in the flat vector */
    double *m, *v;     /* first and second moments (momentum: m only), in double */
    int64_t t;         /* updates done */
} tq_optim;

tq_status tq_optim_init(tq_optim *o, const tq_train_cfg *c, size_t n);
void tq_optim_free(tq_optim *o);
/* One update of theta with the gradient g (the loss's, before L2) at learning
 * rate lr; spans say which values decay. Each value is updated in double and
 * rounded to f32 once, in a fixed order: no dependence on threads. */
void tq_optim_step(tq_optim *o, float *theta, const float *g, const tq_param_span *spans,
                   int nspans, double lr);
/* The learning rate of step t (0-based) of total steps. */
double tq_sched_lr(const tq_train_cfg *c, int64_t t, int64_t total);

#endif
