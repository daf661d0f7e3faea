/* io.h: tq-cat's ways in and out beyond the TQ stream itself: frame sinks (the
 * stream, a table of frames, text, .npy, safetensors) and imports (.npy files,
 * numeric TSV/CSV/JSON lines). A tool feeds frames from a reader or an import
 * into one sink; the library never prints, notes go through a callback. */
#ifndef TQ_IO_H
#define TQ_IO_H

#include "tq.h"

#include <stdio.h>

/* ---------------------------------------------------------------- sinks */

/* A sink takes frames one at a time. put keeps nothing that points into f (a
 * reader reuses its frame); close flushes and frees the sink; commit = 0
 * abandons the output (a file being written is removed). */
typedef struct tq_sink tq_sink;
struct tq_sink {
    tq_status (*put)(tq_sink *s, tq_frame *f);
    tq_status (*close)(tq_sink *s, int commit);
};

/* Notes that are not errors (a frame skipped): the tool decides to print them. */
typedef void (*tq_note_fn)(void *ctx, const char *msg);

/* Fills f to describe raw (uncompressed) data the caller owns, as a sink wants. */
void tq_io_frame(tq_frame *f, const char *name, tq_dtype dt, int rank, const int64_t *dims,
                 const void *data, uint64_t nbytes);

/* TQ_OK, or the error a stdio stream met (TQ_ERR_PIPE when the reader left). */
tq_status tq_io_file_status(FILE *out);

/* Checks a frame name as the format wants it (for --name, --as). */
tq_status tq_io_name_check(const char *name);

/* Default rows of an imported frame: up to 65536 rows and about 16 MiB. */
int64_t tq_io_default_batch(uint64_t row_bytes);

/* The TQ stream: frames read pass through byte for byte (level < 0), or are
 * rewritten with zlib level 1..9, or uncompressed (level 0). Frames that share
 * a name must agree on dtype, rank and trailing dims. Owns w. */
tq_status tq_sink_stream(tq_sink **s, tq_writer *w, int level);
/* Passes on only the frames whose name is one of names[0..n); owns inner. */
tq_status tq_sink_select(tq_sink **s, tq_sink *inner, char *const *names, size_t n);
/* A table of frames (index, name, dtype, shape, stored and raw bytes, codec). */
tq_status tq_sink_info(tq_sink **s, FILE *out);

typedef enum tq_text_format { TQ_TEXT_TSV, TQ_TEXT_CSV, TQ_TEXT_JSONL } tq_text_format;
/* "tsv" "csv" "jsonl" -> 0 and *fmt, else -1. */
int tq_text_format_from_name(const char *name, tq_text_format *fmt);

typedef struct tq_text_opts {
    tq_text_format format;
    int64_t head;  /* rows of each table, from its start; -1: all */
    int64_t tail;  /* rows of each table, from its end (kept in memory); -1: off */
    int header;    /* TSV/CSV: print a header line naming the columns */
    /* The only names that can reach the sink (tq-cat --name), or nonly 0: any.
     * With head, put returns TQ_EOF once each of them is in a table that has
     * its rows: nothing later can print (tq-cat(1), --head). */
    char *const *only;
    size_t nonly;
} tq_text_opts;
/* Text, one line per tensor row; tq-cat(1) describes the layout. The caller
 * owns out and closes it after the sink. */
tq_status tq_sink_text(tq_sink **s, FILE *out, const tq_text_opts *o);

/* One tensor as a .npy file (its batches concatenated); path NULL or "-" is
 * standard output, which must then be seekable (the shape is written last). */
tq_status tq_sink_npy(tq_sink **s, const char *path);
/* A safetensors file of every tensor (batches of a name concatenated); str and
 * block-coded frames are skipped with a note. */
tq_status tq_sink_safetensors(tq_sink **s, const char *path, tq_note_fn note, void *ctx);
/* A dtype's name in a safetensors header ("F32", "BF16", "I8" ...); NULL for
 * the dtypes safetensors has none for (safetensors_dtype.c). */
const char *tq_safetensors_dtype_name(tq_dtype dt);

/* ---------------------------------------------------------------- imports */

typedef struct tq_import_opts {
    const char *name;  /* name of the data frame (default "x") */
    tq_dtype dtype;    /* text: dtype of numbers (default f32) */
    int64_t batch;     /* rows per frame; 0: tq_io_default_batch */
} tq_import_opts;

/* A .npy file (path "-": standard input) as frames of rows. */
tq_status tq_import_npy(const char *path, const tq_import_opts *o, tq_sink *s);
/* Numeric TSV or CSV; a first line that is not all numbers is a header, and a
 * column named "key" in it becomes a str "key" frame. */
tq_status tq_import_delim(const char *path, tq_text_format fmt, const tq_import_opts *o,
                          tq_sink *s);
/* JSON lines: each an object (a member per frame), an array or a number. */
tq_status tq_import_jsonl(const char *path, const tq_import_opts *o, tq_sink *s);

/* ---------------------------------------------------------------- numbers */

/* Shortest decimal that reads back (strtod, strtof) to exactly the same value
 * of dtype dt (f32 f64 f16 bf16); "nan", "inf", "-inf" for the rest. buf holds
 * at least TQ_NUM_MAX bytes; returns the length. */
#define TQ_NUM_MAX 40
size_t tq_fmt_float(char *buf, tq_dtype dt, const void *v);
/* The two ways tq_fmt_float takes: printf and read back, digit count by digit
 * count (exact, slow), and for f32 the same choice in double arithmetic, which
 * returns 0 (nothing written) whenever it cannot be sure of the exact answer. */
size_t tq_fmt_float_exact(char *buf, tq_dtype dt, const void *v);
size_t tq_fmt_f32_fast(char *buf, float x);
/* One element of a plain numeric dtype, integers in full. */
size_t tq_fmt_number(char *buf, tq_dtype dt, const void *v);
/* Parses s[0..len) as one number of dtype dt into dst: floats correctly
 * rounded (f16/bf16 through f32), integers exact and in range. 0 if fine, else
 * -1 with a reason in *why. */
int tq_parse_number(const char *s, size_t len, tq_dtype dt, void *dst, const char **why);

/* ---------------------------------------------------------------- files */

/* A binary output file written atomically: a temporary file beside path, then
 * rename on a committed close; path NULL or "-" is standard output. */
typedef struct tq_outfile tq_outfile;
tq_status tq_outfile_open(tq_outfile **o, const char *path);
tq_status tq_outfile_write(tq_outfile *o, const void *p, size_t n);
/* Writes at an absolute offset (the file must be seekable). */
tq_status tq_outfile_pwrite(tq_outfile *o, const void *p, size_t n, uint64_t off);
int tq_outfile_fd(const tq_outfile *o);
/* The current offset of a seekable output (standard output may not start at 0). */
uint64_t tq_outfile_tell(const tq_outfile *o);
const char *tq_outfile_label(const tq_outfile *o);
/* Is the output seekable (a file or /dev/null, not a pipe or terminal)? */
int tq_outfile_seekable(const tq_outfile *o);
tq_status tq_outfile_close(tq_outfile *o, int commit);

/* A growing byte buffer for text. */
typedef struct tq_buf {
    char *p;
    size_t len, cap;
} tq_buf;
tq_status tq_buf_reserve(tq_buf *b, size_t extra);
tq_status tq_buf_add(tq_buf *b, const void *p, size_t n);
/* Appends s[0..n) as a JSON string literal, quoted and escaped. */
tq_status tq_buf_json(tq_buf *b, const char *s, size_t n);
void tq_buf_free(tq_buf *b);

/* Frame-shape bookkeeping shared by the sinks: one entry per tensor name, its
 * dtype and trailing dims fixed by the first batch, rows summed over batches. */
typedef struct tq_tensor_entry {
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK]; /* dims[0]: rows so far (rank 0: frames so far) */
    uint64_t frames;
} tq_tensor_entry;
typedef struct tq_catalog {
    tq_tensor_entry *e;
    size_t n, cap;
} tq_catalog;
/* Adds frame f to the entry of its name (made on first sight); fails with
 * TQ_ERR_DATA when f disagrees with the earlier batches. *idx: the entry. */
tq_status tq_catalog_add(tq_catalog *c, const tq_frame *f, size_t *idx);
void tq_catalog_free(tq_catalog *c);

#endif
