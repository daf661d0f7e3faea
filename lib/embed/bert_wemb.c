/* bert_wemb.c: the word-embedding table under --precision int8: int8 codes
 * with one f32 scale a row, and the lookup that dequantizes only the rows
 * a batch looks up.
 *
 * Why: the table (vocab x hidden f32) is about half of a small encoder's
 * weights (all-MiniLM-L6-v2: 30522 x 384, 46.9 of 90.9 MB), so an int8
 * folder of tq-quantize --model that kept it f32 was 0.69x the f32 file.
 * ONNX Runtime's quantize_dynamic does the same to the lookup: by default
 * it quantizes every op type of its IntegerOpsRegistry
 * (onnxruntime/python/tools/quantization/quantize.py), which takes in
 * CommonOpsRegistry's "Gather": GatherQuant (registry.py,
 * operators/gather.py), whose table, a constant initializer, becomes int8
 * codes (one scale for the whole tensor: quantize_inputs without
 * per-channel). One scale a row here instead, since a lookup reads whole
 * rows and a row's scale costs nothing there: this table's rows' largest
 * |value| run from 0.044 to 1.05 (median 0.18), and one scale for all of
 * them left a mean relative RMS error of 4.7% a row against 0.73% with a
 * scale a row (bf16: 0.17%). Against f32's vectors, on the corpora of
 * tq-embed(1) (--precision), this table added 8-12% to the mean
 * 1 - cosine and took the smallest cosine from 0.99965 to 0.99937 at worst
 * (400 man page sections), the top-10 overlaps within 0.0011 of before:
 * inside the documented 0.999 and 0.98, so the rows stay int8 and not bf16
 * (a folder 0.43x the f32 file rather than 0.30x).
 *
 * The codes are tq-quantize's int8 (tq_quant_rows): scale = the row's
 * largest |value| / 127 (in f32), code = value / scale rounded to nearest,
 * ties to even, in [-127, 127]; a row of zeros has scale 0 and codes 0.
 * A looked-up value is (float)code * scale in f32: the one rounding of a
 * product exact in f64, as the tests' reference computes it. Only the word
 * embeddings:
 * the position and token-type tables are 0.8 MB together and stay f32.
 * The calibration (bert_int8.c) runs before, on the f32 table. */
#include "bert.h"
#include "internal.h"
#include "quant/quant.h"

tq_status tq_bert_wemb_int8(bert_model *m)
{
    const tq_tensor *w = m->wemb;
    int64_t n = w->dims[0], d = w->dims[1];
    /* the CPU's (int8 models are its alone): the f32 rows in host memory */
    const float *x = tq_tensor_host(w);
    const char *why = NULL;
    int64_t bad = tq_quant_bad_row(TQ_QUANT_INT8, x, n, d, &why);
    if (bad >= 0)
        return tq_fail(TQ_ERR_DATA, "%s: embeddings.word_embeddings.weight: row %lld has %s: "
                       "no int8 codes for it", m->cfg.model_dir, (long long)bad, why);
    tq_tensor *codes = NULL, *scale = NULL;
    tq_status st = tq_tensor_new(m->dev, TQ_DTYPE_I8, 2, w->dims, &codes);
    if (!st)
        st = tq_tensor_new(m->dev, TQ_DTYPE_F32, 1, &n, &scale);
    if (!st)
        st = tq_quant_rows(TQ_QUANT_INT8, x, n, d, NULL, tq_tensor_host(codes),
                           tq_tensor_host(scale));
    if (st) {
        tq_tensor_free(codes);
        tq_tensor_free(scale);
        return st;
    }
    tq_tensor_set_constant(codes);
    tq_tensor_set_constant(scale);
    tq_tensor_free(m->wemb);
    m->wemb = codes;
    m->wemb_scale = scale;
    return TQ_OK;
}

tq_status tq_bert_wemb_lookup(const bert_model *m, const tq_tensor *idx, tq_tensor *x)
{
    if (!m->wemb_scale)
        return tq_op_gather(m->wemb, idx, x);
    if (tq_device_backend(m->dev) != TQ_BACKEND_CPU)
        return tq_fail(TQ_ERR_USAGE, "bert: int8 word embeddings are the CPU's in this version");
    int64_t n = tq_tensor_numel(idx), H = m->cfg.hidden;
    /* the ids were checked against the vocabulary (tq_bert_forward) */
    const int64_t *id = tq_tensor_host(idx);
    const int8_t *q = tq_tensor_host(m->wemb);
    const float *s = tq_tensor_host(m->wemb_scale);
    float *y = tq_tensor_host(x);
    for (int64_t i = 0; i < n; i++) {
        const int8_t *r = q + id[i] * H;
        float si = s[id[i]];
        for (int64_t j = 0; j < H; j++)
            y[i * H + j] = (float)r[j] * si;
    }
    return TQ_OK;
}
