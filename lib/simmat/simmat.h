/* simmat.h: the similarity modes behind tq-simmat: full matrix, top-k search
 * (sharded, and the merge of shards), pairs above a threshold and
 * near-duplicate removal, on the op API (rowprod, simtopk). Every
 * score that decides something (a rank, a threshold, a dedup) is the exact
 * pair score of simscore.h, so the modes agree with each other and the
 * results do not depend on threads, batch sizes or shards. */
#ifndef TQ_SIMMAT_H
#define TQ_SIMMAT_H

#include "io/io.h"
#include "quant/quant.h"
#include "tq.h"

typedef enum { TQ_SIM_COSINE = 0, TQ_SIM_DOT, TQ_SIM_L2, TQ_SIM_HAMMING } tq_sim_metric;
typedef enum { TQ_SIM_FULL = 0, TQ_SIM_TOPK, TQ_SIM_THRESHOLD, TQ_SIM_DEDUP } tq_sim_mode;

/* Rows of vectors in host memory (f32, normalized for cosine), with their
 * keys when the stream had a key frame per batch. */
typedef struct tq_sim_rows {
    float *x;
    int64_t n, d, cap;
    void *map;             /* set: x lies in this mapping of the file, */
    size_t map_len;        /* map_len bytes (see tq_sim_rows_add_frame) */
    tq_dtype key_dtype;    /* TQ_DTYPE_INVALID (no keys), I64 or STR */
    int64_t *ikey;         /* i64 keys */
    tq_buf skey;           /* str keys: bytes back to back */
    uint64_t *skey_off;    /* n + 1 offsets into skey */
    char name[TQ_MAX_NAME + 1]; /* the vector frame's name */
    int decoded;           /* some rows came as q2 codes, decoded */
} tq_sim_rows;

/* uint8 and int8 codes over per-dimension ranges (tq-quantize --ranges): the
 * last frame NAME_ranges f32 [2, d] of a stream makes the int8 and uint8
 * frames NAME after it rows of their decoded values, searched as floats
 * (their search needs the ranges' offsets, which integer products lack). */
typedef struct tq_sim_ranges {
    char stem[TQ_MAX_NAME + 1]; /* NAME; "" before any ranges frame */
    tq_quant_side side;
} tq_sim_ranges;
/* Keeps f when it is a ranges frame, of NAME's codes (NULL: of any name),
 * and returns 1 (*st says whether it was well formed); 0 for any other frame. */
int tq_sim_ranges_take(tq_sim_ranges *g, tq_frame *f, const char *name, tq_status *st);
/* f is rank 2 int8 or uint8 rows after ranges of its name. */
int tq_sim_ranges_has(const tq_sim_ranges *g, const tq_frame *f);
void tq_sim_ranges_free(tq_sim_ranges *g);

typedef struct tq_sim {
    tq_sim_mode mode;
    tq_sim_metric metric;
    int64_t k;             /* --topk */
    double threshold;      /* --threshold, --dedup */
    int shard_i, shard_n;  /* --shard I/N (1 of 1 when not sharded) */
    int self;              /* no --db: the input against itself */
    const char *vec_name;  /* --name, or NULL: the first rank-2 float frame */
    const char *q_name;    /* the queries' vector frame, or NULL: db.name */
    const char *q_label;   /* the inputs in messages: "standard input", */
    const char *db_label;  /* the --db FILE; NULL: no --db (dedup of the input) */
    tq_device *dev;
    tq_sim_rows db;        /* the database (all rows; the shard is a range) */
    int64_t s0, s1;        /* the shard's rows of db */
    tq_tensor *dbt;        /* db rows s0..s1 on the device */
    int64_t q_seen;        /* query rows before the current batch */
    tq_sim_ranges qranges; /* the query stream's ranges codes */
    tq_dtype code;         /* quantized database (codes.c): i8 or bit; else 0 */
    unsigned char *cx;     /* its codes, db.n rows */
    float *cscale;         /* i8: a scale a row */
    tq_tensor *cxt, *cst;  /* the shard's codes and scales on the device */
    tq_sim_rows rescore;   /* --rescore: the database in f32 (no keys needed) */
    int64_t rescore_m;     /* --rescore-k: candidates a query = m k */
    int64_t pairs, kept, dropped;
    int64_t screen_dh;     /* --threshold's int8 screen: its head length (0: none) */
    int64_t screened;      /* the pairs it let through */
    int64_t in_frames;     /* frames of the query stream read, */
    int64_t q_frames;      /* of which query vector frames */
    char in_names[160];    /* the other frames' names, for the message */
} tq_sim;

/* Loads every row of the stream at PATH (a TQ file; LABEL names it in
 * messages) into rows: the vector frame NAME (NULL: the first rank-2 float
 * frame), any float dtype or ranges codes, and its keys. normalize: divide each row by its
 * norm (cosine). */
tq_status tq_sim_rows_load(tq_sim_rows *rows, const char *path, const char *label,
                           const char *name, int normalize);
void tq_sim_rows_free(tq_sim_rows *rows);
/* Appends the keys of a key frame (i64 or str; other dtypes are ignored) to
 * rows' keys, of which there are `have` already. */
tq_status tq_sim_rows_keys(tq_sim_rows *rows, tq_frame *f, int64_t have);
/* Appends the rows of a vector frame (rank 2, any float dtype; or codes
 * decoded with g, which may be NULL) as f32,
 * scaled to unit length when normalize is set. With r, the frame's reader,
 * the first frame of plain f32 rows mapped from a file and not normalized is
 * used where it lies (rows->map); a later frame moves the rows to memory. */
tq_status tq_sim_rows_add_frame(tq_sim_rows *rows, tq_frame *f, int normalize, tq_reader *r,
                                tq_sim_ranges *g);

/* Fixes the shard range and uploads the database to the device. */
tq_status tq_sim_prepare(tq_sim *s);
/* Runs the mode over the query stream, writing the result stream. */
tq_status tq_sim_run(tq_sim *s, tq_reader *in, tq_writer *out);
void tq_sim_free(tq_sim *s);

/* Query rows per product of the full matrix and --threshold: about 16 MiB
 * of scores, at least 96, a multiple of 48. */
int64_t tq_sim_slice_rows(int64_t ndb);
const char *tq_sim_metric_name(tq_sim_metric m);

/* The pairs of a batch for --threshold: added one by one, then written as
 * the frames i, j, score, and key_i (the keys qk of the batch's rows, the
 * first of which is row r0; none when qk has no key dtype) and key_j. */
typedef struct tq_sim_pairs {
    int64_t *i, *j;
    float *v;
    int64_t n, cap;
} tq_sim_pairs;
tq_status tq_sim_pairs_add(tq_sim_pairs *p, int64_t i, int64_t j, float v);
tq_status tq_sim_pairs_write(tq_sim *s, const tq_sim_pairs *p, const tq_sim_rows *qk, int64_t r0,
                             tq_writer *w);

/* --threshold over float vectors where the device runs tq_op_codescreen
 * itself (screen.c): open leaves *sc NULL where the matrix product's path is
 * the one (another mode, codes, no native screen, a database row not
 * finite); run adds the pairs of n queries q (rows g0.. of the input, at most
 * tq_sim_screen_rows()) in the order and with the scores of that path, or
 * leaves *done 0 (a query not finite) for the caller to take them. */
typedef struct tq_sim_screen tq_sim_screen;
tq_status tq_sim_screen_open(tq_sim *s, tq_sim_screen **sc);
void tq_sim_screen_free(tq_sim_screen *sc);
int64_t tq_sim_screen_rows(void);
tq_status tq_sim_screen_run(tq_sim *s, tq_sim_screen *sc, const float *q, int64_t n, int64_t g0,
                            tq_sim_pairs *p, int *done);
/* --dedup over float vectors with the same screen: dedup_open leaves *sc
 * NULL where simtopk's path is the one (codes, no native screen, rows that
 * are not finite or beyond 2^40, in x (the first batch's n rows) or --db);
 * dedup decides the n rows q of a batch (keep, and the kept ones' indices
 * ki) as that path would, each against the --db rows, the kept rows of earlier
 * batches and the earlier kept rows of its own; dedup_fits says whether a
 * batch's rows suit it (if not, the caller drops the screen for good);
 * dedup_moved says where the batch's kept rows now lie (rows, one after
 * another), since q is about to be reused. */
tq_status tq_sim_screen_dedup_open(tq_sim *s, const float *x, int64_t n, tq_sim_screen **sc);
int tq_sim_screen_dedup_fits(const float *x, int64_t n, int64_t d);
tq_status tq_sim_screen_dedup(tq_sim *s, tq_sim_screen *sc, const float *q, int64_t n,
                              unsigned char *keep, int64_t *ki, int64_t *kept);
void tq_sim_screen_dedup_moved(tq_sim_screen *sc, const float *rows, int64_t kept);
/* A frame of the query stream other than the vectors: passed on, except
 * with --threshold (whose pairs are no rows of the batch): there a key frame
 * becomes the next batch's keys (*qk, *qk_rows) and the others are dropped. */
tq_status tq_sim_side_frame(const tq_sim *s, tq_frame *f, tq_writer *w, tq_sim_rows *qk,
                            int64_t *qk_rows);

/* Writes the idx, score and db_key frames of n queries' top-k lists. */
tq_status tq_sim_topk_write(tq_sim *s, const float *v, const int64_t *ix, int64_t n, tq_writer *w);

/* Quantized vectors (codes.c): tq-quantize's int8 codes with their scales
 * (NAME_scale before each batch), searched by metric dot, sign bits, by
 * hamming, or ggml's q8_0/q4_0 blocks, by dot with q8_0 queries.
 * tq_sim_codes_probe says whether the database at path holds codes (*code
 * i8, bit, q8_0 or q4_0) or float vectors (0); load reads them (and their
 * keys) into s; run answers --topk, the full matrix or --threshold for the
 * query stream (codes of the queries' kind, or float vectors, quantized here
 * as tq-quantize would), through tq_op_codetopk and tq_op_codematrix; with
 * s->rescore loaded (--topk, float queries only), the best rescore_m x k
 * candidates of each query are ranked again by the exact f32 dot product with
 * the rows of s->rescore. --dedup over codes is tq_sim_dedup's. */
/* Puts "LABEL: " before the current message unless the reader's message
 * starts with it already; returns st. */
tq_status tq_sim_fail_label(tq_status st, const char *label);
/* label names the database in messages ("stdin" for the spool of standard input) */
tq_status tq_sim_codes_probe(const char *path, const char *label, const char *name, tq_dtype *code);
tq_status tq_sim_codes_load(tq_sim *s, const char *path, const char *label, const char *name);
tq_status tq_sim_codes_run(tq_sim *s, tq_reader *in, tq_writer *out);
/* The vector frame of a stream: NAME, or the first rank 2 frame that is not
 * a key, a scale or ranges, and is floats or codes (i8, bit). */
int tq_sim_codes_is_vectors(const tq_frame *f, const char *name);

/* Merges the top-k streams of the shards (in any order) into the stream of a
 * single run. */
tq_status tq_sim_merge(tq_reader **in, int n, tq_writer *out);

/* Query rows of frame f against the database's width: each input's frames
 * come from that input, and where they differ in width the error names both
 * (rows.c). */
tq_status tq_sim_check_width(const tq_sim *s, const tq_frame *f);

/* The queries' vector frame: its own name (q_name), else the database's,
 * else --name; NULL when none is known yet (dedup before its first rows). */
const char *tq_sim_query_name(const tq_sim *s);

/* Every mode counts each frame of the query stream here (vec: it is a
 * frame of query vectors), and tq-simmat calls check_queries at the end: a
 * query stream of frames none of which were vectors is an error, never a
 * pass-through that exits 0 (rows.c). */
void tq_sim_saw(tq_sim *s, const tq_frame *f, int vec);
tq_status tq_sim_check_queries(const tq_sim *s);

/* Helpers shared by the modes (rows.c). */
int tq_sim_is_vectors(const tq_frame *f, const char *name);
/* The k best of each query's mk candidates (vals v, idx ix [n, mk], best
 * first) by the exact dot product of the f32 queries qf with the rows of
 * s->rescore, into the first k of each list (codes.c). */
void tq_sim_rescore(const tq_sim *s, const float *qf, int64_t n, int64_t mk, float *v, int64_t *ix);
/* A dtype searched as f32 rows: the floats, and q2 (decoded). */
int tq_sim_floatlike(tq_dtype dt);
/* The rows of f as f32 (converted, or decoded with the ranges of g) in *buf
 * (grown). */
tq_status tq_sim_frame_f32(tq_frame *f, tq_sim_ranges *g, float **buf, size_t *cap);
/* Scales each of n rows of d values to unit norm (as tq_op_normalize does). */
void tq_sim_normalize_rows(float *x, int64_t n, int64_t d);

#endif
