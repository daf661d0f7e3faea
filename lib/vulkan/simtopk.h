/* simtopk.h: what the two halves of the Vulkan simtopk share: the device's
 * passes (ops_simtopk.c) and the host's exact scoring and proofs
 * (simtopk_exact.c). */
#ifndef TQ_VK_SIMTOPK_H
#define TQ_VK_SIMTOPK_H

#include "vk.h"

/* Rows above the threshold a query may list (above.comp). */
enum { TQ_VK_ABOVE_CAP = 2048 };

typedef struct tq_vk_cand {
    float v;
    int64_t i;
} tq_vk_cand;

typedef struct tq_vk_sim {
    int metric;
    int64_t nq, ndb, d, k, kp, base;
    const float *q;          /* [nq, d] */
    const float *vals;       /* [nq, k] the caller's lists */
    const int64_t *idx;
    float *out_v;            /* [nq, k] the new lists of decided queries */
    int64_t *out_i;
    const float *cv;         /* [nq, kp] device values of the candidates (unordered) */
    const int64_t *ci;       /* [nq, kp] their indices (base + row) */
    const int64_t *rows;     /* the block rows on the host, ascending; NULL: all */
    int64_t nrows;
    const float *x;          /* their values [nrows, d] */
    const int64_t *bad;      /* rows of no useful norm: candidates of every query */
    int64_t nbad;
    double nx;               /* bound on the norms of the other rows */
    unsigned char *undecided; /* [nq] */
    float *thr;              /* [nq] an undecided query's threshold of device value, or NaN */
} tq_vk_sim;

/* tq_parallel_for bodies over queries [begin, end) of a tq_vk_sim: the first pass
 * (each query's candidates scored and merged; decided, or its threshold set
 * in thr) and the second (the rows above the threshold, for the queries of
 * a tq_vk_sim_above). */
void tq_vk_sim_rescore(void *sim, int64_t begin, int64_t end);

typedef struct tq_vk_sim_above {
    const tq_vk_sim *s;
    const int64_t *qs;   /* [nu] the queries */
    const uint32_t *cnt; /* [nu] how many rows reached each one's threshold */
    const uint32_t *lst; /* [nu, TQ_VK_ABOVE_CAP] those rows */
} tq_vk_sim_above;
void tq_vk_sim_settle(void *job, int64_t begin, int64_t end);

#endif
