/* rows.h: the rows of one aligned frame held between input and output, so
 * that tq-score can keep, drop and reorder rows a group at a time. */
#ifndef TQ_SCORE_ROWS_H
#define TQ_SCORE_ROWS_H

#include "tq.h"

typedef struct tq_rowcol {
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];  /* dims[1..] of every row; dims[0] unused */
    char *meta;                 /* the first frame's metadata, carried to the output */
    size_t meta_len;
    uint64_t row_bytes;         /* fixed-size dtypes */
    unsigned char *data;        /* rows back to back (str: the string bytes) */
    size_t len, cap;            /* bytes used and held in data */
    uint64_t *ends;             /* str: where each row's bytes end */
    int64_t n, cap_rows;        /* rows held */
} tq_rowcol;

/* Sets up a column with the name, dtype, shape and metadata of f; fails (data)
 * when f's rows cannot be split (block or bit codes of rank 1). */
tq_status tq_rowcol_init(tq_rowcol *c, const tq_frame *f);
/* Appends the rows of f (same name, dtype and row shape). */
tq_status tq_rowcol_append(tq_rowcol *c, tq_frame *f);
/* Host address of row i (fixed-size dtypes). */
const void *tq_rowcol_row(const tq_rowcol *c, int64_t i);
/* Writes rows idx[0..k) as one frame. */
tq_status tq_rowcol_write(const tq_rowcol *c, const int64_t *idx, int64_t k, tq_writer *w);
/* Forgets the first n rows. */
void tq_rowcol_drop(tq_rowcol *c, int64_t n);
void tq_rowcol_free(tq_rowcol *c);

#endif
