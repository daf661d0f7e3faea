/* simtopk_exact.h: what the two halves of the device simtopk share (Vulkan,
 * CUDA, HIP): the driver that runs the device's passes (simtopk_dev.c) and
 * the host's exact scoring and proofs (simtopk_exact.c). */
#ifndef TQ_SIMTOPK_EXACT_H
#define TQ_SIMTOPK_EXACT_H

#include "internal.h"

/* Rows above the threshold a query may list (the backends' above kernels). */
enum { TQ_SIMDEV_ABOVE_CAP = 2048 };

typedef struct tq_simdev_cand {
    float v;
    int64_t i;
} tq_simdev_cand;

typedef struct tq_simdev_sim {
    int metric;
    int bf16;                /* the device values came from bf16 operands */
    int64_t nq, ndb, d, k, kp, base;
    const float *q;          /* [nq, d] */
    const float *vals;       /* [nq, k] the caller's lists */
    const int64_t *idx;
    float *out_v;            /* [nq, k] the new lists of decided queries */
    int64_t *out_i;
    const float *cv;         /* [nq, kp] device values of the candidates (unordered) */
    const int64_t *ci;       /* [nq, kp] their indices (base + row) */
    const float *ce;         /* [nq, kp] their exact scores, when the device gave them (else NULL) */
    const int64_t *rows;     /* the block rows on the host, ascending; NULL: all */
    int64_t nrows;
    const float *x;          /* their values [nrows, d] */
    const int64_t *bad;      /* rows of no useful norm: candidates of every query */
    int64_t nbad;
    double nx;               /* bound on the norms of the other rows */
    unsigned char *undecided; /* [nq] */
    float *thr;              /* [nq] an undecided query's threshold of device value, or NaN */
} tq_simdev_sim;

/* tq_parallel_for bodies over queries [begin, end) of a tq_simdev_sim: the
 * first pass (each query's candidates scored and merged; decided, or its
 * threshold set in thr) and the second (the rows above the threshold, for
 * the queries of a tq_simdev_above). */
void tq_simdev_rescore(void *sim, int64_t begin, int64_t end);

typedef struct tq_simdev_above {
    const tq_simdev_sim *s;
    const int64_t *qs;   /* [nu] the queries */
    const uint32_t *cnt; /* [nu] how many rows reached each one's threshold */
    const uint32_t *lst; /* [nu, TQ_SIMDEV_ABOVE_CAP] those rows */
} tq_simdev_above;
void tq_simdev_settle(void *job, int64_t begin, int64_t end);

#endif
