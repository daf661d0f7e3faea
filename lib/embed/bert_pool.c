/* bert_pool.c: what follows the encoder in a sentence-transformers folder:
 * the Pooling module (its six modes, concatenated when several are on), the
 * Dense modules (on the model's device, a batch at a time) and Normalize. */
#include "bert.h"
#include "internal.h"

#include <math.h>

void tq_bert_pool(const bert_config *c, const float *hs, int n, int skip, float *out)
{
    int64_t H = c->hidden;
    /* the tokens pooled: past a prompt the module excludes (never all of
     * them: a text of nothing but the prompt pools its last token, as the
     * module's mask then keeps none and its clamps give that or 0) */
    int t0 = skip < n ? skip : n - 1;
    for (int k = 0; k < c->npool; k++, out += H) {
        int mode = c->pool[k];
        for (int64_t d = 0; d < H; d++) {
            double v = 0, w = 0;
            switch (mode) {
            case BERT_POOL_CLS: v = hs[t0 * H + d]; break;
            case BERT_POOL_LAST: v = hs[(int64_t)(n - 1) * H + d]; break;
            case BERT_POOL_MAX:
                v = hs[t0 * H + d];
                for (int t = t0 + 1; t < n; t++)
                    v = hs[t * H + d] > v ? hs[t * H + d] : v;
                break;
            case BERT_POOL_WEIGHTED: /* token t weighs t + 1 */
                for (int t = t0; t < n; t++) {
                    v += (t + 1.0) * hs[t * H + d];
                    w += t + 1.0;
                }
                v /= w;
                break;
            default: /* mean, mean_sqrt_len_tokens: the sum over sqrt(count) */
                for (int t = t0; t < n; t++)
                    v += hs[t * H + d];
                v /= mode == BERT_POOL_MEAN ? (double)(n - t0) : sqrt((double)(n - t0));
            }
            out[d] = (float)v;
        }
    }
}

/* as torch.nn.functional.normalize: each row over max(its norm, 1e-12) */
static void normalize_rows(int64_t n, int64_t d, float *x)
{
    for (int64_t i = 0; i < n; i++) {
        float *row = x + i * d;
        double ss = 0;
        for (int64_t j = 0; j < d; j++)
            ss += (double)row[j] * row[j];
        double norm = sqrt(ss), inv = 1.0 / (norm > 1e-12 ? norm : 1e-12);
        for (int64_t j = 0; j < d; j++)
            row[j] = (float)(row[j] * inv);
    }
}

tq_status tq_bert_linear(tq_device *dev, const tq_tensor *w, const tq_tensor *b, int act,
                         int64_t n, const float *x, float *y)
{
    int64_t in = w->dims[1], out = w->dims[0], xd[2] = {n, in}, yd[2] = {n, out};
    tq_tensor *tx = NULL, *ty = NULL;
    tq_matmul_then bias = {b, 0, NULL, 0};
    tq_status st;
    if (!(st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, xd, &tx)) &&
        !(st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, yd, &ty)) &&
        !(st = tq_tensor_upload(tx, x, (size_t)(n * in) * sizeof *x)) &&
        !(st = tq_op_matmul_then(tx, 0, w, 1, 1.0f, 0.0f, &bias, ty)) &&
        (act < 0 || !(st = tq_op_activate(ty, (tq_activation)act, ty))))
        st = tq_tensor_download(ty, y, (size_t)(n * out) * sizeof *y);
    tq_tensor_free(tx);
    tq_tensor_free(ty);
    return st;
}

/* Dense module i on n rows */
static tq_status dense(const bert_model *m, int i, int64_t n, const float *x, float *y)
{
    return tq_bert_linear(m->dev, m->dense_w[i], m->dense_b[i], m->cfg.dense[i].act, n, x, y);
}

tq_status tq_bert_head(const bert_model *m, int64_t n, const float *rows, float *out)
{
    const bert_config *c = &m->cfg;
    if (!c->ndense) {
        memcpy(out, rows, (size_t)(n * c->pooled) * sizeof *out);
    } else {
        /* through the modules, ping-ponging between two buffers of the
         * widest width, the last one into out */
        int64_t wide = c->pooled;
        for (int i = 0; i < c->ndense; i++)
            wide = c->dense[i].out > wide ? c->dense[i].out : wide;
        float *buf = malloc((size_t)(2 * n * wide + 1) * sizeof *buf);
        if (!buf)
            return tq_fail(TQ_ERR_NOMEM, "bert: out of memory for the Dense modules");
        const float *x = rows;
        tq_status st = TQ_OK;
        for (int i = 0; !st && i < c->ndense; i++) {
            float *y = i == c->ndense - 1 ? out : buf + (i % 2) * n * wide;
            st = dense(m, i, n, x, y);
            x = y;
        }
        free(buf);
        if (st)
            return st;
    }
    if (c->normalize)
        normalize_rows(n, c->dim, out);
    return TQ_OK;
}
