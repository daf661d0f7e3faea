/* bert_int8.c: tq-embed --precision int8 (one unit with bert_forward.c, split
 * for size: its calibration runs that forward pass, which runs these
 * products). The products of the attention
 * (q, k, v, output) and the first feed-forward take int8 weights (a scale
 * per output channel) and int8 activations (a scale per row, quantized as
 * they come: tq_op_quantize_rows), summed exactly in int32
 * (tq_op_matmul_i8_rest), but for 8 columns of each input taken in f32.
 *
 * Why not plainly: a layer norm's output has a few columns (hidden
 * dimensions) far larger than the rest, and one scale per row then leaves
 * the other columns a handful of levels: simulated on all-MiniLM-L6-v2, the
 * smallest cosine to f32 over 360 texts was 0.9954. Two remedies, together:
 * - The 8 columns of each input with the largest |activation| on the
 *   calibration texts (a_j) stay out of the codes and are multiplied in f32
 *   beside the integer sums, as LLM.int8() (Dettmers et al., 2022) does: the
 *   row scales no longer see them, nor the weights' row scales their columns.
 * - Each other column j is divided by s_j = a_j^0.5 / w_j^0.5 before
 *   quantizing and the weights' column j multiplied by it (w_j the largest
 *   |weight| in column j), as SmoothQuant (Xiao et al., 2023) does: the
 *   product is unchanged, and the ranges of both sides meet half way.
 * Smoothing alone (exponent 0.6, its best) left the embeddings a mean
 * 1 - cosine of 4.0e-4 from f32's on 400 real man-page passages and 3.5e-4
 * on 3,000 man-page descriptions, and their top-10 neighbours agreeing at
 * 0.979 and 0.980, at the 0.98 bound; with the f32 columns, 2.0e-4
 * and 1.4e-4, 0.987 and 0.986, for 1-3% more time (the exponent was then
 * best at 0.5 of 0.3-0.6; 4 columns did worse, 2.1e-4, 16 no better, 1.9e-4).
 * Tried in a float32 PyTorch model of this recipe and left: smoothing
 * exponents per product, a layer in f32 (each about a sixth of the error),
 * asymmetric row codes (a zero point a row: 3.3e-4 alone), GPTQ's error
 * feedback on the weights (worse: it fits the 32 calibration sentences).
 * The second feed-forward product, whose input is GELU's output, loses the
 * most in int8, and it stays bf16 (f32 where the CPU has no bf16 products).
 * The word-embedding table becomes int8 too, a scale a row (bert_wemb.c
 * says why and what it costs).
 * The calibration runs the f32 model on the texts below, at load (~0.07 s). */
#include "bert.h"
#include "internal.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Calibration texts: everyday sentences of several kinds. (Three passages of
 * ~200 tokens more changed nothing measurable: smallest cosines within
 * 0.0001, top-10 overlaps within 0.005, and took 0.2 s a run.) */
static const char *const calib_texts[] = {
    "The meeting was moved to Thursday because the room was booked.",
    "How do I reset my password if I no longer have access to my email?",
    "A quick brown fox jumps over the lazy dog.",
    "Prices rose by 3.2% in October, the fastest pace in a year.",
    "She plays the violin in a small orchestra on weekends.",
    "Install the package with pip and import it in your script.",
    "The museum is closed on Mondays and public holidays.",
    "Heavy rain is expected across the north of the country tonight.",
    "Can you recommend a good restaurant near the train station?",
    "The patient was given antibiotics and discharged after two days.",
    "Our team won the final 2-1 after extra time.",
    "This recipe needs flour, butter, sugar, eggs and a pinch of salt.",
    "The court ruled that the contract was void.",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "Error: connection refused while reading the configuration file.",
    "I loved the book, but the ending felt rushed.",
    "The city council approved a new bike lane along the river.",
    "Quarterly revenue grew to $4.5 billion, beating analyst forecasts.",
    "Turn left at the second roundabout and follow the signs.",
    "Why is the sky blue during the day and red at sunset?",
    "The new phone has a larger battery and a brighter screen.",
    "Volunteers planted 500 trees in the park on Saturday.",
    "He apologized for the delay and promised a refund.",
    "The algorithm runs in linear time and constant memory.",
    "Children under 12 must be accompanied by an adult.",
    "The ancient temple was rebuilt in the 14th century.",
    "Please find the signed documents attached to this email.",
    "A strong earthquake struck off the coast early this morning.",
    "What are the side effects of this medication?",
    "The orchestra performed Beethoven's ninth symphony to a full house.",
    "Shares fell sharply after the company cut its outlook.",
    "My cat sleeps on the keyboard whenever I try to work.",
};

/* Folds the largest |value| of each column of t [b, len, H] into amax, over
 * each document's real tokens (key_len [b]; the padding rows are computed
 * and ignored, so they must not count). */
void tq_bert_calib_fold(const bert_model *m, int64_t layer, int which, const tq_tensor *t,
                        const tq_tensor *key_len)
{
    int64_t H = m->cfg.hidden, b = tq_tensor_numel(key_len), len = tq_tensor_numel(t) / H / b;
    const float *x = tq_tensor_host(t);
    const int64_t *kl = tq_tensor_host(key_len);
    float *amax = m->calib + (3 * layer + which) * H;
    for (int64_t d = 0; d < b; d++)
        for (int64_t i = d * len; i < d * len + kl[d]; i++)
            for (int64_t j = 0; j < H; j++) {
                float a = fabsf(x[i * H + j]);
                amax[j] = a > amax[j] ? a : amax[j];
            }
}

/* The f32 model on the texts, in one batch, the forward pass folding its
 * products' inputs into calib. */
static tq_status calibrate(bert_model *m, const tq_tokenizer *tok, float *calib)
{
    enum { NT = sizeof calib_texts / sizeof *calib_texts };
    int maxlen = m->cfg.max_seq, lens[NT], len = 0;
    int32_t *ids = malloc((size_t)(NT * maxlen) * sizeof *ids);
    int64_t *ids64 = calloc((size_t)(NT * maxlen), sizeof *ids64);
    float *out = malloc((size_t)(NT * maxlen * m->cfg.hidden) * sizeof *out);
    tq_status st = ids && ids64 && out ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int t = 0; !st && t < NT; t++) {
        st = tq_tokenizer_encode(tok, calib_texts[t], strlen(calib_texts[t]), ids + t * maxlen,
                                 maxlen, &lens[t], NULL);
        len = lens[t] > len ? lens[t] : len;
    }
    for (int t = 0; !st && t < NT; t++) /* padding stays 0 */
        for (int i = 0; i < lens[t]; i++)
            ids64[t * len + i] = ids[t * maxlen + i];
    m->calib = calib;
    if (!st)
        st = tq_bert_forward(m, NT, len, ids64, NULL, lens, out);
    m->calib = NULL;
    free(ids);
    free(ids64);
    free(out);
    return st;
}

/* The rest's width: TQ_BERT_I8_REST columns, or all of a smaller hidden. */
static int rest_width(int64_t H) { return H < TQ_BERT_I8_REST ? (int)H : TQ_BERT_I8_REST; }

int tq_bert_int8_rest(int64_t H) { return rest_width(H); }

/* A weight matrix w [n, k] (f32 on the host) with its column j times s[j],
 * as int8 codes with a scale per row, tq-quantize's int8, the rest columns
 * cols (rest_width(k) of them) taken out (0 in the codes, out of the
 * scales) and into *rest f32 [n, that] as they are: into *codes i8 [n, k]
 * and *scale f32 [n] on dev, all constant. */
static tq_status codes_of(tq_device *dev, const tq_tensor *w, const float *s, const int64_t *cols,
                          tq_tensor **codes, tq_tensor **scale, tq_tensor **rest)
{
    int64_t n = w->dims[0], k = w->dims[1], nr = rest_width(k), rd[2] = {n, nr};
    const float *x = tq_tensor_host(w);
    float *ws = malloc((size_t)(n * k) * sizeof *ws);
    tq_status st = ws ? tq_tensor_new(dev, TQ_DTYPE_F32, 2, rd, rest)
                      : tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (st) {
        free(ws);
        return st;
    }
    float *r = tq_tensor_host(*rest); /* the CPU's: int8 is its alone */
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < k; j++)
            ws[i * k + j] = x[i * k + j] * s[j];
        for (int p = 0; p < nr; p++) {
            r[i * nr + p] = x[i * k + cols[p]];
            ws[i * k + cols[p]] = 0.0f;
        }
    }
    tq_tensor_set_constant(*rest);
    st = tq_tensor_new(dev, TQ_DTYPE_I8, 2, w->dims, codes);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &n, scale);
    if (!st) /* finite weights: the model's (a NaN would fail here, saying so) */
        st = tq_quant_rows(TQ_QUANT_INT8, ws, n, k, NULL, tq_tensor_host(*codes),
                           tq_tensor_host(*scale));
    free(ws);
    if (!st) {
        tq_tensor_set_constant(*codes);
        tq_tensor_set_constant(*scale);
    }
    return st;
}

static int by_column(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The rest_width(H) columns of largest a[j] (the calibration's largest
 * |activation|), tq_op_topk's (ties to the lower column), in column order,
 * into cols. */
static tq_status rest_columns(tq_device *dev, const float *a, int64_t H, int64_t *cols)
{
    int64_t r = rest_width(H), dx[2] = {1, H}, dk[2] = {1, r};
    tq_tensor *x = NULL, *vals = NULL, *idx = NULL;
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dx, &x);
    if (!st)
        st = tq_tensor_upload(x, a, (size_t)H * sizeof *a);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dk, &vals);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_I64, 2, dk, &idx);
    if (!st)
        st = tq_op_topk(x, r, vals, idx);
    if (!st)
        st = tq_tensor_download(idx, cols, (size_t)r * sizeof *cols);
    tq_tensor_free(x);
    tq_tensor_free(vals);
    tq_tensor_free(idx);
    if (!st)
        qsort(cols, (size_t)r, sizeof *cols, by_column);
    return st;
}

/* The smoothing of one input: s[j] = a[j]^0.5 / w[j]^0.5, w[j] the largest
 * |weight| of column j over the matrices that multiply it; into *cs (on dev)
 * the activations' factor 1 / s[j], 0 for the rest columns cols (H >= their
 * count) kept out of the codes, and into *rc those columns. */
static tq_status smoothing(tq_device *dev, const float *a, const tq_tensor *const *w, int nw,
                           int64_t H, float *s, int64_t *cols, tq_tensor **cs, tq_tensor **rc)
{
    float *inv = malloc((size_t)H * sizeof *inv), *wmax = calloc((size_t)H, sizeof *wmax);
    if (!inv || !wmax) {
        free(inv);
        free(wmax);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    for (int m = 0; m < nw; m++) { /* row by row: the matrices are row-major */
        const float *x = tq_tensor_host(w[m]);
        for (int64_t i = 0; i < w[m]->dims[0]; i++)
            for (int64_t j = 0; j < H; j++) {
                float v = fabsf(x[i * H + j]);
                wmax[j] = v > wmax[j] ? v : wmax[j];
            }
    }
    for (int64_t j = 0; j < H; j++) {
        /* floors keep a dead column (all zeros) from a zero or infinite s */
        s[j] = sqrtf(fmaxf(a[j], 1e-5f)) / sqrtf(fmaxf(wmax[j], 1e-5f));
        inv[j] = 1.0f / s[j];
    }
    free(wmax);
    int64_t nr = rest_width(H);
    tq_status st = rest_columns(dev, a, H, cols);
    for (int p = 0; !st && p < nr; p++)
        inv[cols[p]] = 0.0f;
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &H, cs);
    if (!st)
        st = tq_tensor_upload(*cs, inv, (size_t)H * sizeof *inv);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &nr, rc);
    if (!st)
        st = tq_tensor_upload(*rc, cols, (size_t)nr * sizeof *cols);
    if (!st) {
        tq_tensor_set_constant(*cs);
        tq_tensor_set_constant(*rc);
    }
    free(inv);
    return st;
}

/* f32 w replaced by its int8 codes (and scales, and rest columns). */
static tq_status to_codes(tq_device *dev, tq_tensor **w, const float *s, const int64_t *cols,
                          tq_tensor **scale, tq_tensor **rest)
{
    tq_tensor *codes = NULL;
    tq_status st = codes_of(dev, *w, s, cols, &codes, scale, rest);
    if (st) {
        tq_tensor_free(codes);
        return st;
    }
    tq_tensor_free(*w);
    *w = codes;
    return TQ_OK;
}

static tq_status to_bf16(tq_device *dev, tq_tensor **w)
{
    tq_tensor *h;
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_BF16, 2, (*w)->dims, &h);
    if (!st)
        st = tq_op_convert(*w, h);
    if (st) {
        tq_tensor_free(h);
        return st;
    }
    tq_tensor_set_constant(h);
    tq_tensor_free(*w);
    *w = h;
    return TQ_OK;
}

static tq_status layer_int8(bert_model *m, bert_layer *L, const float *amax, float *s)
{
    int64_t H = m->cfg.hidden;
    const tq_tensor *qkv[3] = {L->wq, L->wk, L->wv};
    int64_t c[TQ_BERT_I8_REST];
    tq_status st;
    if ((st = smoothing(m->dev, amax, qkv, 3, H, s, c, &L->cs_x, &L->rc_x)) ||
        (st = to_codes(m->dev, &L->wq, s, c, &L->sq, &L->rq)) ||
        (st = to_codes(m->dev, &L->wk, s, c, &L->sk, &L->rk)) ||
        (st = to_codes(m->dev, &L->wv, s, c, &L->sv, &L->rv)) ||
        (st = smoothing(m->dev, amax + H, (const tq_tensor *const *)&L->wo, 1, H, s, c, &L->cs_ctx,
                        &L->rc_ctx)) ||
        (st = to_codes(m->dev, &L->wo, s, c, &L->so, &L->ro)) ||
        (st = smoothing(m->dev, amax + 2 * H, (const tq_tensor *const *)&L->wi, 1, H, s, c,
                        &L->cs_x1, &L->rc_x1)) ||
        (st = to_codes(m->dev, &L->wi, s, c, &L->si, &L->ri)))
        return st;
    return m->cfg.ffn2 == TQ_DTYPE_BF16 ? to_bf16(m->dev, &L->wo2) : TQ_OK;
}

tq_status tq_bert_int8(bert_model *m, const tq_tokenizer *tok)
{
    int64_t H = m->cfg.hidden, nl = m->cfg.layers;
    float *calib = calloc((size_t)(3 * nl * H), sizeof *calib);
    float *s = malloc((size_t)H * sizeof *s);
    tq_status st = calib && s ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = calibrate(m, tok, calib);
    m->cfg.ffn2 = tq_device_native_product(m->dev, TQ_DTYPE_BF16) ? TQ_DTYPE_BF16 : TQ_DTYPE_F32;
    for (int64_t i = 0; !st && i < nl; i++)
        st = layer_int8(m, &m->layer[i], calib + 3 * i * H, s);
    if (!st) /* after the calibration, which ran the f32 table */
        st = tq_bert_wemb_int8(m);
    if (!st)
        m->cfg.prec = TQ_DTYPE_I8;
    free(calib);
    free(s);
    return st;
}
