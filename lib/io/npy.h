/* npy.h: the NumPy .npy header, shared by the import and the export of npy. */
#ifndef TQ_NPY_H
#define TQ_NPY_H

#include "io.h"

typedef struct tq_npy_header {
    tq_dtype dtype;
    int swap;          /* big-endian data: bytes to swap per element */
    int fortran;
    int rank;
    int64_t dims[TQ_MAX_RANK];
    uint64_t data_offset; /* bytes before the data */
} tq_npy_header;

/* Reads and checks the header from fd (label names it in messages). */
tq_status tq_npy_read_header(int fd, const char *label, tq_npy_header *h);

/* Writes a version 1.0 header for dt and dims into buf (at least
 * TQ_NPY_HEADER_MAX bytes), padded with spaces to `width` bytes when width is
 * not 0 (so a later header can replace it in place); returns its length. */
#define TQ_NPY_HEADER_MAX 512
size_t tq_npy_format_header(char *buf, tq_dtype dt, int rank, const int64_t *dims,
                            size_t width);
/* The npy descr of a tq dtype ("<f4"), NULL when npy has none. */
const char *tq_npy_descr(tq_dtype dt);

/* Swaps the byte order of n elements of es bytes in place. */
void tq_npy_swap(void *p, size_t n, size_t es);

#endif
