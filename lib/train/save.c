/* save.c: the model file tq-score reads (man/tq-score.1, MODEL FILES), from
 * the trained parameters, with the inputs' standardization folded into the
 * first layer: x' = (x - mu) / sd, so x' W + b = x (W / sd) + (b - (mu / sd) W),
 * computed in double and rounded to f32 once. */
#include "../internal.h"
#include "save.h"

#include <math.h>

static tq_status put(tq_writer *w, const char *name, int rank, const int64_t *dims, const float *v,
                     size_t n)
{
    return tq_writer_write(w, name, TQ_DTYPE_F32, rank, dims, NULL, 0, v, n * 4);
}

tq_status tq_train_save(const tq_model_desc *m, tq_writer *w)
{
    static const char *outs[] = {"linear", "sigmoid", "softmax"};
    char meta[512];
    size_t ml = 0;
    int single = m->kind != TQ_TRAIN_MLP;
    ml += (size_t)snprintf(meta + ml, sizeof meta - ml, "kind=%s", tq_train_kind_names[m->kind]) + 1;
    if (!single) {
        ml += (size_t)snprintf(meta + ml, sizeof meta - ml, "activation=%s",
                               tq_train_act_names[m->act]) + 1;
        ml += (size_t)snprintf(meta + ml, sizeof meta - ml, "output=%s", outs[m->output]) + 1;
    }
    ml += (size_t)snprintf(meta + ml, sizeof meta - ml, "loss=%s", tq_train_loss_names[m->loss]) + 1;
    ml += (size_t)snprintf(meta + ml, sizeof meta - ml, "trainer=tq-train %s", TQ_VERSION) + 1;
    int64_t one = 1;
    tq_status st = tq_writer_write(w, "model", TQ_DTYPE_I64, 0, NULL, meta, ml, &one, 8);
    for (int i = 0; i < m->nl && !st; i++) {
        int64_t in = m->dims[i], out = m->dims[i + 1];
        const float *W = m->theta + m->woff[i], *B = m->theta + m->boff[i];
        float *fw = malloc((size_t)(in * out) * 4), *fb = malloc((size_t)out * 4);
        if (!fw || !fb) {
            free(fw);
            free(fb);
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        }
        for (int64_t c = 0; c < out; c++) {
            double b = B[c];
            for (int64_t r = 0; r < in; r++) {
                double s = i == 0 && m->sd ? m->sd[r] : 1, mu = i == 0 && m->mu ? m->mu[r] : 0;
                fw[r * out + c] = (float)(W[r * out + c] / s);
                b -= mu / s * W[r * out + c];
            }
            fb[c] = (float)b;
        }
        char wn[16], bn[16];
        snprintf(wn, sizeof wn, single ? "w" : "w%d", i + 1);
        snprintf(bn, sizeof bn, single ? "b" : "b%d", i + 1);
        int64_t wd[2] = {in, out};
        /* linear and logistic: w [d] and b [1], as tq-score reads them */
        if (single && out == 1)
            st = put(w, wn, 1, wd, fw, (size_t)in);
        else
            st = put(w, wn, 2, wd, fw, (size_t)(in * out));
        if (!st)
            st = put(w, bn, 1, &out, fb, (size_t)out);
        free(fw);
        free(fb);
    }
    return st;
}
