/* wordpiece.h: BERT's WordPiece tokenizer, as BertTokenizer (the reference
 * Python implementation) does it: basic tokenization, then greedy longest match. */
#ifndef TQ_WORDPIECE_H
#define TQ_WORDPIECE_H

#include "tq.h"

typedef struct tq_wordpiece tq_wordpiece;

typedef struct tq_wordpiece_opts {
    int lower_case;      /* lower-case (and, unless strip_accents == 0, strip accents) */
    int strip_accents;   /* -1: follow lower_case (BertTokenizer's None), 0 no, 1 yes */
    int chinese_chars;   /* put spaces around CJK ideographs (default 1) */
} tq_wordpiece_opts;

/* Loads vocab.txt (one token per line, id = line number from 0). It must hold
 * [CLS], [SEP] and [UNK]. */
tq_status tq_wordpiece_load(const char *vocab_path, const tq_wordpiece_opts *opts,
                            tq_wordpiece **wp);
void tq_wordpiece_free(tq_wordpiece *wp);
int64_t tq_wordpiece_vocab_size(const tq_wordpiece *wp);
/* The id of a token, or -1. */
int32_t tq_wordpiece_id(const tq_wordpiece *wp, const char *token, size_t len);

/* Encodes text as [CLS] pieces [SEP], the pieces cut so that the whole holds at
 * most max_len ids (max_len >= 2); *n = ids written into ids (room for max_len). */
tq_status tq_wordpiece_encode(const tq_wordpiece *wp, const char *text, size_t len,
                              int32_t *ids, int max_len, int *n);

#endif
