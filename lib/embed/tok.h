/* tok.h: what the tokenizer.json files share (tok_*.c): the text as code
 * points through normalizers and pre-tokenizers, the vocabulary, the models
 * and the post-processor's template. Offsets are not tracked: tq needs ids. */
#ifndef TQ_TOK_H
#define TQ_TOK_H

#include "tq.h"
#include "io/json.h"
#include "wordpiece.h"

#include <stdint.h>
#include <stddef.h>

typedef struct tok_u32 { uint32_t *v; size_t n, cap; } tok_u32;
typedef struct tok_i32 { int32_t *v; size_t n, cap; } tok_i32;
/* 0, or -1 out of memory */
int tok_u32_add(tok_u32 *b, const uint32_t *s, size_t n);
int tok_u32_push(tok_u32 *b, uint32_t x);
int tok_i32_push(tok_i32 *b, int32_t x);

/* Spans of one code point buffer: the pre-tokenizers' pieces. at_origin: the
 * piece begins the original text (Metaspace's prepend_scheme "first"). */
typedef struct tok_pieces {
    tok_u32 cp;
    size_t *at, *len;
    unsigned char *origin;
    size_t n, cap;
} tok_pieces;
int tok_pieces_add(tok_pieces *p, const uint32_t *s, size_t n, int origin);
void tok_pieces_free(tok_pieces *p);

/* Decodes UTF-8, each maximal invalid subsequence as one U+FFFD. */
int tok_decode(const char *s, size_t n, tok_u32 *out);
/* Encodes code points as UTF-8 into out (4 * n bytes room); the byte count. */
size_t tok_encode(const uint32_t *cp, size_t n, char *out);

/* ---- vocabulary: token bytes <-> id ---- */
/* ids past this are refused as bad data (vocabularies hold ~10^5 tokens; the
 * table is indexed by id, so a huge one would only exhaust memory) */
#define TOK_MAX_ID (1 << 26)
typedef struct tok_vocab {
    char **tok;        /* by id (NULL where an id has no token) */
    uint32_t *len;
    int64_t n, cap;    /* ids 0 .. n-1 */
    int32_t *slots;    /* open addressing, -1 empty */
    uint64_t mask;
    int64_t count;
} tok_vocab;
/* Adds token -> id (a repeated token keeps the later id). -1 out of memory. */
int tok_vocab_put(tok_vocab *v, const char *s, size_t len, int32_t id);
int32_t tok_vocab_get(const tok_vocab *v, const char *s, size_t len);
void tok_vocab_free(tok_vocab *v);

/* ---- normalizers (tok_norm.c) ---- */
enum { TN_BERT, TN_LOWER, TN_STRIP_ACCENTS, TN_NFD, TN_NFKD, TN_NFC, TN_NFKC, TN_REPLACE,
       TN_PREPEND, TN_STRIP, TN_PRECOMPILED };
typedef struct tok_charsmap tok_charsmap; /* tok_precompiled.c */
typedef struct tok_norm {
    int type;
    int clean, chinese, strip_acc, lower;  /* BertNormalizer */
    int left, right;                       /* Strip */
    /* Replace: a literal pattern, or one character class repeated qmin..qmax
     * times (class_ws: regex \s, else the character pat[0]) */
    uint32_t *pat, *rep;
    size_t npat, nrep;
    int regex, class_ws;
    size_t qmin, qmax;
    tok_charsmap *cm;
} tok_norm;
/* Runs the normalizers over s (tmp is scratch). -1 out of memory. */
int tok_normalize(const tok_norm *ns, size_t n, tok_u32 *s, tok_u32 *tmp);
void tok_norm_free(tok_norm *ns, size_t n);
tq_status tok_norm_parse(const char *file, const tq_json *j, tok_norm **ns, size_t *n);

/* ---- pre-tokenizers (tok_pretok.c) ---- */
enum { TP_BERT, TP_WHITESPACE, TP_WSSPLIT, TP_PUNCT, TP_DIGITS, TP_METASPACE, TP_BYTELEVEL,
       TP_SPLIT };
enum { TB_REMOVED, TB_ISOLATED, TB_PREVIOUS, TB_NEXT, TB_CONTIGUOUS };
typedef struct tok_pretok {
    int type;
    int behavior;        /* Punctuation, Split */
    int individual;      /* Digits */
    uint32_t repl;       /* Metaspace */
    int prepend;         /* Metaspace: 0 never, 1 first, 2 always */
    int split;           /* Metaspace */
    int prefix_space;    /* ByteLevel */
    int use_regex;       /* ByteLevel */
    uint32_t *pat;       /* Split: a literal pattern, or NULL for GPT-2's */
    size_t npat;
    int invert;          /* Split */
} tok_pretok;
int tok_pretokenize(const tok_pretok *ps, size_t n, tok_pieces *p, tok_pieces *tmp);
tq_status tok_pretok_parse(const char *file, const tq_json *j, tok_pretok **ps, size_t *n);
void tok_pretok_free(tok_pretok *ps, size_t n);
/* GPT-2's byte-to-character table (ByteLevel) */
uint32_t tok_byte_char(unsigned char b);

/* ---- models (tok_wordpiece.c, tok_bpe.c, tok_unigram.c) ---- */
enum { TM_WORDPIECE, TM_BPE, TM_UNIGRAM };
typedef struct tok_merge { int32_t a, b, rank, id; } tok_merge;
typedef struct tok_model {
    int type;
    tok_vocab vocab;
    int32_t unk;               /* -1: none */
    char *prefix, *suffix;     /* continuing_subword_prefix, end_of_word_suffix */
    size_t nprefix, nsuffix;
    int max_chars;             /* WordPiece's max_input_chars_per_word */
    /* BPE: merges by pair of ids, open addressing */
    tok_merge *merges;
    uint64_t mmask;
    int fuse_unk, byte_fallback, ignore_merges;
    /* Unigram */
    double *score, min_score;
    size_t max_piece;          /* longest piece in bytes */
} tok_model;
/* Appends the ids of one pre-tokenized piece (UTF-8). -1 out of memory. */
int tok_model_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out);
tq_status tok_model_parse(const char *file, const tq_json *j, tok_model *m);
void tok_model_free(tok_model *m);
int tok_wordpiece_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out);
int tok_bpe_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out);
int tok_unigram_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out);
tq_status tok_bpe_merges(const char *file, const tq_json *merges, tok_model *m);

/* ---- Precompiled (tok_precompiled.c): SentencePiece's charsmap ---- */
tq_status tok_charsmap_load(const char *file, const char *b64, size_t len, tok_charsmap **cm);
void tok_charsmap_free(tok_charsmap *cm);
int tok_charsmap_apply(const tok_charsmap *cm, const tok_u32 *in, tok_u32 *out);

/* ---- the whole tokenizer.json (tok_json.c) ---- */
typedef struct tok_added {
    uint32_t *cp;        /* content; for a normalized token, normalized */
    size_t n;
    int32_t id;
    int lstrip, rstrip, single_word, normalized;
} tok_added;
typedef struct tok_tpl { int seq; int32_t *ids; size_t nids; int type_id; } tok_tpl; /* seq: -1 special, 0 A, 1 B */
typedef struct tok_json {
    tok_norm *norm;
    size_t nnorm;
    tok_pretok *pre;
    size_t npre;
    tok_model model;
    tok_added *added;
    size_t nadded;
    tok_tpl *single, *pair;
    size_t nsingle, npair;
    int has_post;
    int max_length;      /* truncation.max_length, 0 none */
    int32_t pad_id;
    int64_t vocab_size;
} tok_json;
tq_status tok_json_load(const char *path, tok_json *t);
void tok_json_free(tok_json *t);
/* The model's ids of one text, no special tokens added by the template. */
int tok_json_ids(const tok_json *t, const char *text, size_t len, tok_i32 *out);
/* A vocab.txt folder with special tokens other than BERT's, as tok_json
 * (tok_vocabtxt.c); *used = 0 when its names are BERT's (wordpiece.c then). */

tq_status tok_json_from_vocab(const char *dir, const tq_wordpiece_opts *o, tok_json *t, int *used);
tq_status tok_post_parse(const char *file, const tq_json *j, const tok_json *t,
                         tok_tpl **single, size_t *ns, tok_tpl **pair, size_t *np);

#endif
