/* json.h: a small strict JSON reader (RFC 8259) into a tree, for the model
 * folders' config files and the safetensors header. */
#ifndef TQ_JSON_H
#define TQ_JSON_H

#include "tq.h"

typedef enum tq_json_type {
    TQ_JSON_NULL,
    TQ_JSON_BOOL,
    TQ_JSON_NUM,
    TQ_JSON_STR,
    TQ_JSON_ARR,
    TQ_JSON_OBJ
} tq_json_type;

typedef struct tq_json {
    tq_json_type type;
    int b;                 /* BOOL */
    double num;            /* NUM: correctly rounded (strtod) */
    double num_serde;      /* NUM: as the tokenizers library reads it, see below */
    char *str;             /* STR: NUL-terminated (may hold NULs; len says) */
    size_t len;
    struct tq_json *items; /* ARR, OBJ: n values */
    char **keys;           /* OBJ: n keys, NUL-terminated */
    size_t n;
} tq_json;

/* Parses exactly one JSON value (surrounding whitespace allowed). A syntax
 * error is TQ_ERR_DATA "byte N: WHY"; the caller adds the file name. */
tq_status tq_json_parse(const char *s, size_t n, tq_json **out);
/* Reads and parses a whole file: TQ_ERR_NOINPUT if it cannot be opened,
 * TQ_ERR_DATA "PATH: byte N: WHY" if it is not JSON. */
tq_status tq_json_load(const char *path, tq_json **out);
void tq_json_free(tq_json *v);
/* The value of the JSON number text T (already checked; NUL-terminated) as
 * Rust's serde_json reads it by default, which the tokenizers library loads
 * tokenizer.json with: not always correctly rounded (json_serde.c says how). */
double tq_json_serde_num(const char *t);
/* The member KEY of an object (the last one if repeated), or NULL. */
const tq_json *tq_json_get(const tq_json *obj, const char *key);

#endif
