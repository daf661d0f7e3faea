/* save.h: writing the model file (not public). */
#ifndef TQ_TRAIN_SAVE_H
#define TQ_TRAIN_SAVE_H

#include "train.h"

enum { TQ_OUT_LINEAR, TQ_OUT_SIGMOID, TQ_OUT_SOFTMAX };

typedef struct tq_model_desc {
    int kind, loss, act, output, nl;
    const int64_t *dims;          /* nl + 1 */
    const float *theta;           /* flat parameters */
    const size_t *woff, *boff;    /* each layer's weights [in, out] and biases */
    const double *mu, *sd;        /* standardization of the inputs, or NULL */
} tq_model_desc;

tq_status tq_train_save(const tq_model_desc *m, tq_writer *w);

#endif
