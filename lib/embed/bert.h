/* bert.h: what the BERT-family embedder's files share: the model folder's
 * settings, the weights on the device, and the encoder's forward pass. */
#ifndef TQ_BERT_H
#define TQ_BERT_H

#include "embed.h"
#include "tokenizer.h"

enum { BERT_POOL_MEAN, BERT_POOL_CLS, BERT_POOL_MAX };

typedef struct bert_config {
    int64_t hidden, layers, heads, inter, max_pos, types, vocab;
    double eps;
    int max_seq;        /* tokens per document, [CLS] and [SEP] included */
    int pool;           /* BERT_POOL_* */
    int normalize;      /* an L2 Normalize module follows the pooling */
    tq_wordpiece_opts wp;
    char *model_dir;    /* where config.json, model.safetensors, the tokenizer are */
    /* the layers' product operands (weights and the activations they
     * multiply): f32, or bf16/f16 where the device's GEMM takes them
     * natively (bert.c decides) */
    tq_dtype prec;
    /* with prec i8: the second feed-forward product's dtype (bf16 where the
     * device multiplies bf16 natively, else f32; bert_int8.c says why) */
    tq_dtype ffn2;
} bert_config;

/* One encoder layer, weights as PyTorch's Linear stores them (y = x W^T + b):
 * the query, key, value and attention output projections [hidden, hidden],
 * all heads together (the fused attention op splits the heads itself). */
typedef struct bert_layer {
    tq_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo;
    tq_tensor *bo, *ln1_g, *ln1_b, *wi, *bi, *wo2, *bo2, *ln2_g, *ln2_b;
    /* with prec i8, wq, wk, wv, wo and wi hold int8 codes and these their
     * rows' scales, and cs_x, cs_ctx, cs_x1 the column scales of the
     * activations they multiply (bert_int8.c); NULL otherwise */
    tq_tensor *sq, *sk, *sv, *so, *si, *cs_x, *cs_ctx, *cs_x1;
    /* and the columns of x, ctx and x1 kept out of the codes (i64
     * [TQ_BERT_I8_REST]), with the weights' columns there (f32 [n, that]):
     * tq_op_matmul_i8_rest's rest */
    tq_tensor *rc_x, *rc_ctx, *rc_x1, *rq, *rk, *rv, *ro, *ri;
} bert_layer;

typedef struct bert_plans bert_plans; /* bert_forward.c: kept per batch shape */

typedef struct bert_model {
    bert_config cfg;
    tq_device *dev;
    bert_plans *plans; /* on devices with graphs, else NULL */
    tq_tensor *wemb, *pemb, *temb0, *eln_g, *eln_b; /* temb0: token type 0's row */
    bert_layer *layer;
    /* while bert_int8.c calibrates: [layers][3][hidden], the largest |value|
     * of each column of the products' inputs (x, ctx, x1); NULL otherwise */
    float *calib;
} bert_model;

/* The columns of each int8 product's input multiplied in f32 (bert_int8.c) */
#define TQ_BERT_I8_REST 8
/* --precision int8 (bert_int8.c): calibrates m, loaded in f32 on the CPU,
 * on built-in texts, then makes its products int8 (cfg.prec i8). */
tq_status tq_bert_int8(bert_model *m, const tq_tokenizer *tok);
/* Calibration's hook in the forward pass: the input t [b, len, hidden] of
 * layer's products, which = 0 for q, k, v, 1 for the attention's output
 * projection, 2 for the first feed-forward; key_len [b] its real tokens. */
void tq_bert_calib_fold(const bert_model *m, int64_t layer, int which, const tq_tensor *t,
                        const tq_tensor *key_len);
/* Reads the sentence-transformers folder's JSON files into cfg. */
tq_status tq_bert_config_load(const char *folder, bert_config *cfg);
void tq_bert_config_free(bert_config *cfg);
/* Loads model.safetensors from cfg->model_dir onto dev. Takes cfg over. */
tq_status tq_bert_model_load(bert_config *cfg, tq_device *dev, bert_model **m);
void tq_bert_model_free(bert_model *m);
/* The per-shape tensors and graphs, for a device that records graphs. */
tq_status tq_bert_plans_new(tq_device *dev, bert_plans **ps);
void tq_bert_plans_free(bert_plans *ps);
/* The last hidden states of a padded batch: ids [b, len] (i64), doc i's real
 * tokens are the first lens[i]; out gets b * len * hidden floats. */
tq_status tq_bert_forward(const bert_model *m, int64_t b, int64_t len, const int64_t *ids,
                          const int *lens, float *out);

#endif
