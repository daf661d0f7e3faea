/* score.h: tq-score's capability: scoring and ranking candidate vectors within
 * groups by a weighted sum of features (cosine to a query, consensus within the
 * group, a trained model, extra columns). The numerics go through the op API;
 * the stream handling (batches, groups, aligned frames) is in run.c. */
#ifndef TQ_SCORE_H
#define TQ_SCORE_H

#include "tq.h"

#define TQ_SCORE_MAX_LAYERS 16
#define TQ_SCORE_MAX_FEATURES 64

/* ---- models (model.c): the file format is specified in man/tq-score.1 ---- */

typedef struct tq_score_model tq_score_model;
/* Loads a model file onto dev. Errors: TQ_ERR_NOINPUT when it cannot be opened,
 * TQ_ERR_DATA (message "PATH: what is wrong") for a bad model. */
tq_status tq_score_model_load(const char *path, tq_device *dev, tq_score_model **m);
/* How a model of i8 weights computes: int8 products where the device has
 * int8 instructions, else its weights decoded to f32 (auto); int8 products
 * everywhere (int8); decoded to f32 (f32). Other weights: always f32. */
typedef enum tq_score_prec {
    TQ_SCORE_PREC_AUTO,
    TQ_SCORE_PREC_F32,
    TQ_SCORE_PREC_INT8,
} tq_score_prec;
tq_status tq_score_model_load_prec(const char *path, tq_device *dev, tq_score_prec prec,
                                   tq_score_model **m);
/* Whether some layer runs as int8 products. */
int tq_score_model_products_i8(const tq_score_model *m);
int64_t tq_score_model_dim(const tq_score_model *m);       /* input dim */
int tq_score_model_wants_normalized(const tq_score_model *m);
const char *tq_score_model_describe(const tq_score_model *m); /* "mlp 8-16-1 relu" */
/* out[i] = the model's score of row i of x (f32 [n, dim], on the model's device). */
tq_status tq_score_model_run(const tq_score_model *m, const tq_tensor *x, float *out);
void tq_score_model_free(tq_score_model *m);

/* ---- quantized models (quantize.c) ---- */

/* Whether the stream r (before its first tq_reader_next) starts with a
 * "model" frame: a model file rather than vectors. */
int tq_score_is_model(tq_reader *r);
typedef struct tq_score_quant_stat {
    int64_t weights;              /* weights coded */
    uint64_t bytes_in, bytes_out; /* payloads of every frame */
    double se, sx, max_abs;       /* of the weights as decoded, against the input's */
} tq_score_quant_stat;
/* Copies the model stream r to w with its weight matrices w, w1, w2 ... in
 * code (TQ_QUANT_INT8, _Q8_0, _Q4_0, _F16 or _BF16; int quant.h's enum, as
 * tq_quant_code): see man/tq-score.1, MODEL FILES. */
tq_status tq_score_model_quantize(tq_reader *r, tq_writer *w, int code, tq_score_quant_stat *qs);

/* ---- query vectors (query.c) ---- */

typedef struct tq_score_query tq_score_query;
/* Reads the frames EMB (f32 or another float dtype, [k, d]) and, optionally,
 * GROUP (integer [k]) of a stream file; rows are L2-normalized on dev. */
tq_status tq_score_query_load(const char *path, const char *emb, const char *group,
                              tq_device *dev, tq_score_query **q);
int64_t tq_score_query_dim(const tq_score_query *q);
int64_t tq_score_query_rows(const tq_score_query *q);
int tq_score_query_has_groups(const tq_score_query *q);
/* The normalized query row for group gid (or the single row when the file has
 * no groups) into dst [d]; TQ_ERR_DATA when there is none for gid. */
tq_status tq_score_query_row(const tq_score_query *q, int64_t gid, float *dst);
void tq_score_query_free(tq_score_query *q);

/* ---- one group's scores (group.c) ---- */

typedef struct tq_score_cfg {
    tq_device *dev;
    const tq_score_query *query;   /* NULL: no query feature */
    int consensus;
    const tq_score_model *model;   /* NULL: no model feature */
    int nextra;                    /* --feature columns */
    int nweights;                  /* features in use, in the order above */
    double weights[TQ_SCORE_MAX_FEATURES];
} tq_score_cfg;

/* Scores the m rows of one group: emb f32 [m, d] on the host, extra[j] the
 * j-th --feature column (f32 [m]), gid the group id (for the query).
 * score[i] = sum_k weights[k] * feature_k(i), summed in double. */
tq_status tq_score_group(const tq_score_cfg *c, const float *emb, int64_t m, int64_t d,
                         const float *const *extra, int64_t gid, float *score);

/* rank[i] (1 = best) of each of m scores, and order[r] = the row of rank r+1:
 * higher first, ties toward the earlier row, NaN after every number. */
tq_status tq_score_rank(const float *score, int64_t m, int64_t *order, int64_t *rank);

/* ---- the stream (run.c) ---- */

typedef struct tq_score_run_opts {
    const char *emb;               /* frame of the candidates (default "emb") */
    const char *group;             /* frame of the group ids (default "group") */
    const char *const *extra;      /* --feature frame names, cfg.nextra of them */
    tq_score_cfg cfg;
    int64_t top;                   /* keep the top N of each group; 0: all */
    int sort;                      /* rows by rank within each group */
    int64_t batch;                 /* rows per output frame at most */
    const char *query_path, *model_path; /* for messages */
    const char *query_emb;         /* the query's frame in query_path */
    const char *in_label;          /* the candidates' input: "standard input", FILE */
    const char *meta;              /* metadata of the score frames */
    size_t meta_len;
} tq_score_run_opts;

typedef struct tq_score_stats {
    int64_t rows_in, rows_out, groups;
    int64_t d;                     /* the candidates' width (0: no rows) */
} tq_score_stats;

tq_status tq_score_run(const tq_score_run_opts *o, tq_reader *r, tq_writer *w,
                       tq_score_stats *stats);

/* ---- text pairs and a cross-encoder (pairs.c) ---- */

typedef struct tq_cross tq_cross;
typedef struct tq_score_pairs_opts {
    tq_cross *ce;
    int64_t label;    /* the model's output ranked by */
    int64_t top;      /* keep the top N of each group; 0: all */
    int sort;
    int64_t batch;    /* pairs scored at once (whole groups), and rows a frame */
    size_t max_line;  /* longest line */
    const char *meta; /* of the score frames */
    size_t meta_len;
} tq_score_pairs_opts;

typedef struct tq_score_pairs_stats {
    int64_t rows_in, rows_out, groups, cut; /* cut: pairs cut to the window */
} tq_score_pairs_stats;

/* Reads QID<TAB>QUERY<TAB>DOCID<TAB>TEXT lines from files ("-": standard
 * input), scores each pair with o->ce and ranks each run of one QID: frames
 * "group", "key" (str), "score" (f32), "rank" (i64). */
tq_status tq_score_pairs(const tq_score_pairs_opts *o, const char *const *files, int nfiles,
                         tq_writer *w, tq_score_pairs_stats *stats);
/* The same for tq-simmat --topk's lists in r (frames "key", "idx",
 * "db_key"): each query row a group of its candidates, the texts by key
 * from the TSV files query_texts and texts (ID<TAB>TEXT lines) (lists.c). */
tq_status tq_score_lists(const tq_score_pairs_opts *o, tq_reader *r, const char *query_texts,
                         const char *texts, tq_writer *w, tq_score_pairs_stats *stats);

#endif
