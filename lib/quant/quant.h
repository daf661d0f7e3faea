/* quant.h: tq-quantize's codes for rows of vectors (f16, bf16, int8 with a
 * scale per row, uint8/int8 over per-dimension ranges as sentence-transformers
 * defines them, ggml's q8_0/q4_0 blocks, sign bits) and their inverses, and the
 * stream filter that replaces the chosen frames by their codes. */
#ifndef TQ_QUANT_H
#define TQ_QUANT_H

#include "tq.h"

typedef enum tq_quant_code {
    TQ_QUANT_F32 = 0,     /* dequantize: any code below back to f32 */
    TQ_QUANT_F16,
    TQ_QUANT_BF16,
    TQ_QUANT_INT8,        /* symmetric per row: NAME_scale f32 [n] */
    TQ_QUANT_UINT8_RANGES,/* per dimension: NAME_ranges f32 [2, d] */
    TQ_QUANT_INT8_RANGES, /* the same, minus 128 */
    TQ_QUANT_Q8_0,
    TQ_QUANT_Q4_0,
    TQ_QUANT_BIT,
    TQ_QUANT_Q2,          /* blocks of 32: 2 bits a value, a step and an offset */
    TQ_QUANT_COUNT
} tq_quant_code;

/* "f16", "int8", "uint8" ... (both ranges codes read as their dtype's name). */
const char *tq_quant_code_name(tq_quant_code c);
/* The dtype of a code's frame. */
tq_dtype tq_quant_code_dtype(tq_quant_code c);

/* The first row of x [n, d] (f32) that code c cannot hold, or -1: a NaN or an
 * infinity anywhere, or a value beyond what the code's f16 numbers reach (f16,
 * the q8_0/q4_0 block scales). *why names the reason. */
int64_t tq_quant_bad_row(tq_quant_code c, const float *x, int64_t n, int64_t d,
                         const char **why);
/* The first value of x [n, d] (f32) that is NaN or infinite, by rows: its row,
 * its column in *col; -1 when all are finite. The scan above (AVX2, on the
 * pool): the tools that refuse such values (tq-attend) check with it. */
int64_t tq_quant_first_nonfinite(const float *x, int64_t n, int64_t d, int64_t *col);

/* Quantizes x [n, d] f32 into codes (the payload of the code's frame); scales
 * [n] for TQ_QUANT_INT8, ranges [2, d] (row 0 the minimum, row 1 the maximum
 * of each dimension) for the ranges codes; the rows must have passed
 * tq_quant_bad_row. Runs on the thread pool; the bytes do not depend on it. */
tq_status tq_quant_rows(tq_quant_code c, const float *x, int64_t n, int64_t d,
                        const float *ranges, void *codes, float *scales);
/* The inverse: y [n, d] f32 from the codes (ranges and scales as above). */
tq_status tq_quant_dequant(tq_quant_code c, const void *codes, int64_t n, int64_t d,
                           const float *ranges, const float *scales, float *y);

/* Widens ranges [2, d] to hold the rows x [n, d] (start them at +inf, -inf). */
void tq_quant_ranges_fold(float *ranges, const float *x, int64_t n, int64_t d);
/* Checks ranges [2, d] read from a file: finite, minimum <= maximum. */
tq_status tq_quant_ranges_check(const float *ranges, int64_t d);

/* ---- codes read back as f32 rows (side.c) ---- */

/* What a reader has met of the side frames of one name's codes: NAME_scale
 * before each int8 batch, NAME_ranges once before the first batch of a ranges
 * code. tq-quantize --to f32 and the tools that take vectors (tq-simmat,
 * tq-score, tq-attend, tq-train) decode through it, so a code reads as the
 * same values everywhere. */
typedef struct tq_quant_side {
    float *scale;     /* the scales waiting for the next int8 batch */
    int64_t scale_n;  /* how many; -1: none waiting */
    float *ranges;    /* [2, ranges_d] from the ranges frame on; NULL: none */
    int64_t ranges_d;
} tq_quant_side;

void tq_quant_side_init(tq_quant_side *s);
void tq_quant_side_free(tq_quant_side *s);
/* 1 when f is NAME_scale, 2 when it is NAME_ranges, 0 otherwise. */
int tq_quant_side_of(const tq_frame *f, const char *name);
/* f is a side frame of some codes by its name and shape, whatever the name:
 * 1 for NAME_scale f32 [n], 2 for NAME_ranges f32 [2, d], NAME into stem
 * (TQ_MAX_NAME + 1 bytes, or NULL); 0 for any other frame. */
int tq_quant_side_stem(const tq_frame *f, char *stem);
/* Keeps a side frame (its name tells which): scales f32 [n], ranges f32
 * [2, d] (finite, minimum <= maximum); a second scale frame before the codes
 * is an error. */
tq_status tq_quant_side_keep(tq_quant_side *s, tq_frame *f);
/* An error when scales wait for codes that never came (at the end of input). */
tq_status tq_quant_side_end(const tq_quant_side *s, const char *name);
/* The code of rows of dtype dt (int8: with scales if scaled, else ranges);
 * TQ_QUANT_F32 for f32 and f64, which convert as they are. */
tq_quant_code tq_quant_code_of(tq_dtype dt, int scaled);
/* Rank 2 rows of a float dtype or of a code's (i8, u8, q8_0, q4_0, bit). */
int tq_quant_decodable(const tq_frame *f);
/* The rows of f as f32 into y [n, d]: floats converted, codes decoded as
 * tq-quantize --to f32 decodes them (int8 with the scales kept just before,
 * which it uses up, else with the ranges; uint8 with the ranges); a code
 * whose side frame is missing or does not fit fails with one line. Runs on
 * the thread pool: never call it from a pool job. */
tq_status tq_quant_side_decode(tq_quant_side *s, tq_frame *f, float *y);

/* ---- the stream filter (run.c) ---- */

#define TQ_QUANT_MAX_NAMES 16

/* What -v and --report say about one quantized (or dequantized) name. */
typedef struct tq_quant_stat {
    char name[TQ_MAX_NAME + 1];
    tq_dtype from, to;
    int64_t rows, d;
    uint64_t bytes_in, bytes_out; /* payloads, side frames (scales, ranges) included */
    int measured;                 /* the error figures below are known */
    double se, sx;                /* sum of squared errors, of squared inputs */
    double cos_sum, cos_min;      /* row cosines of the input and its dequantized codes */
    double max_abs;               /* largest |error| */
} tq_quant_stat;

typedef struct tq_quant_opts {
    tq_quant_code code;
    const char *names[TQ_QUANT_MAX_NAMES]; /* the frames to replace; none: the default */
    int nnames;
    const float *ranges;          /* the ranges codes: [2, ranges_d] */
    int64_t ranges_d;
    const char *ranges_from, *input_from; /* the inputs, for messages (NULL: unnamed) */
    int measure;                  /* fill the error figures of the stats */
} tq_quant_opts;

/* Copies the stream r to w with the chosen frames replaced by their codes (or,
 * for TQ_QUANT_F32, the codes of tq-quantize replaced by f32 rows, their scale
 * and range frames dropped). Memory is bounded by a batch. stats receives one
 * entry per name replaced, *nstats of them (at most TQ_QUANT_MAX_NAMES). */
tq_status tq_quant_run(const tq_quant_opts *o, tq_reader *r, tq_writer *w,
                       tq_quant_stat *stats, int *nstats);

/* Ranges from a stream: its frame NAME_ranges (or "ranges") f32 [2, d] when it
 * has one, else the minimum and maximum of each dimension over every row of its
 * vector frame (NAME, or the default choice), the calibration set. *ranges is
 * malloc'd [2, *d]; *rows says how many rows calibrated it (0: read as such). */
tq_status tq_quant_ranges_read(tq_reader *r, const char *name, float **ranges, int64_t *d,
                               int64_t *rows);

/* The default vector frame of a stream, as the other tools choose it: a rank 2
 * frame of a float dtype (to quantize) or of a code (to dequantize), not "key"
 * and not a scale or ranges frame. */
int tq_quant_is_default(const tq_frame *f, int dequantize);

#endif
