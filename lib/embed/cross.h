/* cross.h: cross-encoders (rerankers): a BERT-family model with a
 * sequence-classification head that scores a pair of texts read together,
 * as sentence-transformers' CrossEncoder.predict does. tq-score's
 * --cross-encoder runs it. */
#ifndef TQ_CROSS_H
#define TQ_CROSS_H

#include "tq.h"

typedef struct tq_cross tq_cross;

/* Opens a Hugging Face model folder of BertForSequenceClassification,
 * RobertaForSequenceClassification, XLMRobertaForSequenceClassification or
 * MPNetForSequenceClassification (config.json, model.safetensors,
 * vocab.txt, tokenizer_config.json) onto dev. */
tq_status tq_cross_open(const char *folder, tq_device *dev, tq_cross **c);
void tq_cross_close(tq_cross *c);
int64_t tq_cross_labels(const tq_cross *c);
/* The tokens a pair may hold, the special ones included. */
int tq_cross_window(const tq_cross *c);
/* "cross:FOLDER", then the family, labels and activation, for -v */
const char *tq_cross_describe(const tq_cross *c);
/* out [n, labels]: the activation (the model's, else sigmoid for one label
 * and none for more) of the logits of each pair (a[i], b[i]), UTF-8; pairs
 * longer than the window are cut as the tokenizers library cuts them
 * (longest first), and *cut counts them. */
tq_status tq_cross_score(tq_cross *c, int64_t n, const char *const *a, const size_t *al,
                         const char *const *b, const size_t *bl, float *out, int64_t *cut);

#endif
