/* text_input.h: documents for tq-embed: lines of bounded length from a file,
 * UTF-8 checks and repair, and a strict extractor of JSON-lines fields. */
#ifndef TQ_TEXT_INPUT_H
#define TQ_TEXT_INPUT_H

#include "tq.h"

#include <stddef.h>

/* A growable byte buffer. */
typedef struct tq_buf {
    char *p;
    size_t len, cap;
} tq_buf;
tq_status tq_buf_add(tq_buf *b, const void *s, size_t n);
void tq_buf_free(tq_buf *b);

typedef struct tq_lines tq_lines;
/* Opens PATH ("-": standard input) for reading lines of at most max bytes. */
tq_status tq_lines_open(tq_lines **r, const char *path, size_t max);
/* The next line without its LF (and without a CR before the LF): the first
 * min(length, max) bytes (the byte after them, when the line is longer, is
 * still readable at line[max]), valid until the next call; *too_long says whether
 * more bytes were dropped. TQ_EOF at the end; a last line without LF counts. */
tq_status tq_lines_next(tq_lines *r, const char **line, size_t *len, int *too_long);
/* The byte offset in the input of the last line tq_lines_next gave. */
uint64_t tq_lines_offset(const tq_lines *r);
void tq_lines_close(tq_lines *r);

/* Byte offset of the first byte that does not start valid UTF-8, or n. */
size_t tq_utf8_valid(const char *s, size_t n);
/* Appends s to out with every byte that does not start a valid sequence
 * replaced by U+FFFD; returns how many were replaced (or -1: out of memory). */
int64_t tq_utf8_repair(const char *s, size_t n, tq_buf *out);
/* From one JSON-lines object: the string value of member FIELD into text, and
 * (if id_field) the value of member ID_FIELD, a string or an integer, into id.
 * A malformed line or a missing or mistyped member is TQ_ERR_DATA. */
tq_status tq_json_fields(const char *s, size_t n, const char *field, const char *id_field,
                         tq_buf *text, tq_buf *id);

#endif
