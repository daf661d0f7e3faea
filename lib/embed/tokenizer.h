/* tokenizer.h: a model folder's tokenizer, whichever file defines it:
 * tokenizer.json (the Hugging Face tokenizers library's format, read by
 * tok_json.c) when the folder has one, else vocab.txt WordPiece (wordpiece.c). */
#ifndef TQ_TOKENIZER_H
#define TQ_TOKENIZER_H

#include "wordpiece.h"

typedef struct tq_tokenizer tq_tokenizer;

/* Opens MODEL_DIR/tokenizer.json, or without it MODEL_DIR/vocab.txt with
 * vocab_txt_opts (BertTokenizer's settings, from tokenizer_config.json).
 * A part of tokenizer.json tq does not implement is TQ_ERR_DATA naming the
 * file and the part's type. */
tq_status tq_tokenizer_open(const char *model_dir, const tq_wordpiece_opts *vocab_txt_opts,
                            tq_tokenizer **tok);
void tq_tokenizer_free(tq_tokenizer *tok);

/* The ids of one text, with the post-processor's special tokens ([CLS] A
 * [SEP] and the like), the text's own tokens cut (right side) so that the
 * whole holds at most max_len ids, as the library truncates; *truncated = 1
 * when tokens were cut. ids has room for max_len. Invalid UTF-8 reads as
 * U+FFFD, one per maximal invalid subsequence (Rust's from_utf8_lossy). */
tq_status tq_tokenizer_encode(const tq_tokenizer *tok, const char *text, size_t len,
                              int32_t *ids, int max_len, int *n, int *truncated);
/* A pair (a cross-encoder's query and passage): the pair template's ids and
 * token type ids, the pair cut to max_len by longest_first. */
tq_status tq_tokenizer_encode_pair(const tq_tokenizer *tok, const char *a, size_t alen,
                                   const char *b, size_t blen, int32_t *ids,
                                   int32_t *type_ids, int max_len, int *n, int *truncated);

/* The largest id plus one (the embedding table must be at least this tall). */
int64_t tq_tokenizer_vocab_size(const tq_tokenizer *tok);
/* The padding id (tokenizer.json's padding.pad_id, else the id of [PAD] or
 * <pad>), or -1 when there is none. */
int32_t tq_tokenizer_pad_id(const tq_tokenizer *tok);
/* tokenizer.json's truncation.max_length, or 0. sentence-transformers
 * overrides it with its max_seq_length; it is the window where none is set. */
int tq_tokenizer_max_length(const tq_tokenizer *tok);
/* "tokenizer.json" or "vocab.txt": which file the ids come from (for -v). */
const char *tq_tokenizer_source(const tq_tokenizer *tok);

#endif
