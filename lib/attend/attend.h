/* attend.h: the attention layer tq-attend runs: optional input and output
 * projections (PyTorch Linear layout, y = x W^T + b) around the fused
 * attention op, on host arrays in, host arrays out. */
#ifndef TQ_ATTEND_H
#define TQ_ATTEND_H

#include "tq.h"

/* Projection weights, host f32, each NULL when absent (no projection). */
typedef struct tq_attend_weights {
    float *w[4], *b[4];      /* q, k, v, o: W [out, in], b [out] or NULL */
    int64_t out[4], in[4];
} tq_attend_weights;

/* Reads frames wq, wk, wv, wo (rank 2, required) and bq, bk, bv, bo (rank 1,
 * optional: 0) from a TQ file. */
tq_status tq_attend_weights_load(const char *path, tq_attend_weights *w);
void tq_attend_weights_free(tq_attend_weights *w);

/* Refuses a NaN or an infinity among x, the values of frame f read from
 * `from` as f32 (raw: its payload as stored, to tell an f64 beyond f32's range
 * from an infinity; NULL for codes): TQ_ERR_DATA naming the frame, row and
 * value. Rows (sequences for rank 3) count on from row0, the earlier batches
 * of the same tensor. Attention has no answer for them, and IEEE arithmetic
 * would spread them past the rows that see them (0 weight times NaN). */
tq_status tq_attend_finite(const tq_frame *f, const void *raw, const float *x,
                           const char *from, int64_t row0);

typedef struct tq_attend_job {
    int64_t B, Lq, Lk, dq, dk, dv; /* input widths of q, k, v */
    const float *q, *k, *v;        /* [B, Lq, dq], [B, Lk, dk], [B, Lk, dv]; k may be q */
    const tq_attend_weights *w;    /* or NULL: dq == dk, heads split dq and dv */
    int heads, causal;
    float scale;                   /* 0: 1/sqrt(head width) */
    const int64_t *key_len;        /* [B] or NULL */
    const int64_t *qgroup, *kgroup; /* [B, Lq], [B, Lk] or NULL */
    /* results, malloc'd here */
    float *out;                    /* [B, Lq, dout] */
    int64_t dout;
    float *received;               /* [B, Lk] when want_received */
    float *weights;                /* [B, H, Lq, Lk] when want_weights */
    int want_received, want_weights;
} tq_attend_job;

/* Runs the layer on dev. Checks the widths against the weights. */
tq_status tq_attend_run(tq_device *dev, tq_attend_job *job);

#endif
