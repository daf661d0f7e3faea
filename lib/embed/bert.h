/* bert.h: what the BERT-family embedder's files share: the model folder's
 * settings, the weights on the device, and the encoder's forward pass. */
#ifndef TQ_BERT_H
#define TQ_BERT_H

#include "embed.h"
#include "tokenizer.h"

/* sentence-transformers' pooling modes, in the order its Pooling module
 * concatenates them when several are on */
enum { BERT_POOL_CLS, BERT_POOL_MAX, BERT_POOL_MEAN, BERT_POOL_MEAN_SQRT, BERT_POOL_WEIGHTED,
       BERT_POOL_LAST, BERT_POOL_MODES };

/* The encoder families: one forward pass, which differ in the weights'
 * names, where positions start and MPNet's relative position bias. */
enum { BERT_ARCH_BERT, BERT_ARCH_ROBERTA, BERT_ARCH_MPNET };

/* A sentence-transformers Dense module after the pooling: y = act(W x + b) */
#define BERT_MAX_DENSE 4
typedef struct bert_dense_cfg {
    int64_t in, out;
    int bias;
    int act;   /* -1 identity, else a tq_activation (tanh, the module's default) */
    char *dir; /* the module's folder (model.safetensors: linear.weight, linear.bias) */
} bert_dense_cfg;

typedef struct bert_config {
    int64_t hidden, layers, heads, inter, max_pos, types, vocab;
    double eps;
    int max_seq;        /* tokens per document, [CLS] and [SEP] included */
    int arch;           /* BERT_ARCH_* (config.json's model_type) */
    const char *arch_name;
    /* the first real token's position id: 0 for BERT, padding_idx + 1 for
     * RoBERTa and MPNet (their positions count from past the padding id) */
    int64_t pos_offset;
    int64_t rel_buckets; /* MPNet: relative_attention_num_buckets */
    int pool[BERT_POOL_MODES]; /* the modes on, in concatenation order */
    int npool;
    int include_prompt; /* the Pooling module pools the prompt's tokens too */
    int64_t pooled;     /* npool * hidden: the pooled width */
    bert_dense_cfg dense[BERT_MAX_DENSE];
    int ndense;
    int64_t dim;        /* the output width: pooled, or the last Dense's out */
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
    tq_tensor *wemb, *pemb, *temb0, *eln_g, *eln_b; /* temb0: token type 0's row (NULL: MPNet) */
    /* with prec i8, wemb holds int8 codes [vocab, hidden] and this their
     * rows' scales f32 [vocab] (bert_wemb.c); NULL otherwise */
    tq_tensor *wemb_scale;
    tq_tensor *temb; /* [types, hidden], for pairs of texts (NULL: MPNet) */
    float *rel_table; /* MPNet: [rel_buckets, heads], the relative position bias */
    tq_tensor *dense_w[BERT_MAX_DENSE], *dense_b[BERT_MAX_DENSE]; /* [out, in], [out] */
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
/* The count of rest columns of an int8 product whose input has H columns. */
int tq_bert_int8_rest(int64_t H);
/* The word-embedding table of a calibrated model (bert_wemb.c): its f32
 * rows replaced by int8 codes with a scale a row, tq-quantize's int8. */
tq_status tq_bert_wemb_int8(bert_model *m);
/* x [n, hidden] f32 = the table's rows idx (i64 [n], in range): a gather,
 * or with int8 codes each looked-up row dequantized (bert_wemb.c). */
tq_status tq_bert_wemb_lookup(const bert_model *m, const tq_tensor *idx, tq_tensor *x);
/* The int8 model's weights file (bert_int8_file.c): everything an int8
 * load needs (the word embeddings' codes and row scales, the other
 * embeddings in f32, each layer's codes, scales, rest
 * columns and column scales, the second feed-forward product as cfg.ffn2
 * keeps it), m loaded on the CPU and through tq_bert_int8; meta pairs go
 * to __metadata__; *bytes gets the tensors' bytes. */
tq_status tq_bert_int8_save(const bert_model *m, const char *path, const char *const *meta,
                            size_t nmeta, uint64_t *bytes);
typedef struct tq_st_file tq_st_file;
/* Layer li of such a file f (named file in messages) onto dev (the CPU),
 * the second feed-forward product in c->ffn2, every index checked. */
tq_status tq_bert_int8_layer_load(const tq_st_file *f, const char *file, const bert_config *c,
                                  tq_device *dev, int64_t li, bert_layer *L);
/* The word embeddings of such a file f onto dev (the CPU): codes i8
 * [vocab, hidden] and scales f32 [vocab], checked. */
tq_status tq_bert_int8_wemb_load(const tq_st_file *f, const char *file, const bert_config *c,
                                 tq_device *dev, tq_tensor **codes, tq_tensor **scale);
/* The int8 weights' file in the Transformer module's folder, and the
 * version of its layout (its __metadata__'s "version"; 1, before the word
 * embeddings were int8, is refused: tq-quantize --model makes it again) */
#define TQ_BERT_INT8_FILE "model.int8.safetensors"
#define TQ_BERT_INT8_VERSION "2"
/* Calibration's hook in the forward pass: the input t [b, len, hidden] of
 * layer's products, which = 0 for q, k, v, 1 for the attention's output
 * projection, 2 for the first feed-forward; key_len [b] its real tokens. */
void tq_bert_calib_fold(const bert_model *m, int64_t layer, int which, const tq_tensor *t,
                        const tq_tensor *key_len);
/* MPNet's relative position bias of a batch shape: bias [heads, len, len],
 * bias[h, i, j] = rel_table[bucket(j - i), h] (bert_relpos.c). */
void tq_bert_rel_bias(const bert_model *m, int64_t len, float *bias);
/* The pooling of one document's last hidden states hs [n, hidden] (its real
 * tokens; the first skip of them left out of the means, max and last token,
 * for a prompt the Pooling module excludes) into out [pooled] (bert_pool.c). */
void tq_bert_pool(const bert_config *c, const float *hs, int n, int skip, float *out);
/* y [n, out] = act(x [n, in] w^T + b) on dev, w [out, in] and b [out] on
 * it, act a tq_activation or -1 for none (bert_pool.c). */
tq_status tq_bert_linear(tq_device *dev, const tq_tensor *w, const tq_tensor *b, int act,
                         int64_t n, const float *x, float *y);
/* The Dense modules and the Normalize on n pooled rows: rows [n, pooled] in,
 * out [n, dim] (bert_pool.c). */
tq_status tq_bert_head(const bert_model *m, int64_t n, const float *rows, float *out);
/* Reads the sentence-transformers folder's JSON files into cfg. */
tq_status tq_bert_config_load(const char *folder, bert_config *cfg);
void tq_bert_config_free(bert_config *cfg);
/* The tq_activation of a torch.nn class name (Tanh, ReLU, Sigmoid), -1 for
 * Identity, -2 for any other. */
int tq_bert_torch_act(const char *cls);
/* The same settings of a bare Hugging Face model folder (config.json,
 * vocab.txt, tokenizer_config.json: a cross-encoder's), no modules: the
 * window is tokenizer_config.json's model_max_length where it has one. */
tq_status tq_bert_config_bare(const char *folder, bert_config *cfg);
/* The text of the folder's prompt name (NULL: its default prompt; *text NULL
 * when none), from config_sentence_transformers.json. */
tq_status tq_bert_prompt(const char *folder, const char *name, char **text);
/* Loads model.safetensors from cfg->model_dir onto dev. Takes cfg over. */
tq_status tq_bert_model_load(bert_config *cfg, tq_device *dev, bert_model **m);
void tq_bert_model_free(bert_model *m);
/* A sequence-classification head's two products from the model's file: t =
 * {W1 [hidden, hidden], b1, W2 [labels, hidden], b2}, the first followed by
 * tanh (BERT's pooler, RoBERTa's and MPNet's classifier.dense). */
tq_status tq_bert_head_load(const bert_model *m, int64_t labels, tq_tensor *t[4]);
/* The per-shape tensors and graphs, for a device that records graphs. */
tq_status tq_bert_plans_new(tq_device *dev, bert_plans **ps);
void tq_bert_plans_free(bert_plans *ps);
/* The last hidden states of a padded batch: ids [b, len] (i64), doc i's real
 * tokens are the first lens[i]; types [b, len] their token types (a pair of
 * texts), or NULL for all 0; out gets b * len * hidden floats. */
tq_status tq_bert_forward(const bert_model *m, int64_t b, int64_t len, const int64_t *ids,
                          const int64_t *types, const int *lens, float *out);

#endif
