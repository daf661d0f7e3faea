/* columns.h: frames built row by row from text (numbers or strings), emitted
 * to a sink every batch; shared by the TSV/CSV and the JSON lines imports. */
#ifndef TQ_COLUMNS_H
#define TQ_COLUMNS_H

#include "io.h"

typedef struct tq_column {
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;          /* a plain numeric dtype, or str */
    int rank;
    int64_t dims[TQ_MAX_RANK]; /* dims[0]: rows held now */
    uint64_t row_elems, row_bytes;
    unsigned char *data;     /* numbers: rows of row_bytes */
    size_t cap;
    tq_buf chars;            /* str: the bytes of the rows */
    uint64_t *ends;          /* str: where each row's bytes end */
    size_t cap_ends;
} tq_column;

/* Sets up a column of the row shape dims[0..rank-1) (rank counts the row axis). */
void tq_column_init(tq_column *c, const char *name, tq_dtype dt, int rank,
                    const int64_t *row_dims);
/* Room for one more numeric row; returns where it goes (NULL: out of memory). */
void *tq_column_next_row(tq_column *c);
/* Appends a string row. */
tq_status tq_column_add_str(tq_column *c, const char *s, size_t n);
/* Emits the rows held as one frame (nothing when empty) and forgets them. */
tq_status tq_column_emit(tq_column *c, tq_sink *s);
void tq_column_free(tq_column *c);

#endif
