/* quantize.c: a model file of tq-train's (man/tq-score.1, MODEL FILES) with
 * its weight matrices in a smaller code, as tq-quantize writes it: i8 (a
 * scale per output), q8_0 or q4_0 rows of the transposed matrix [out, in],
 * after each input's weights are scaled by a power of 2 (WNAME_shift), or
 * f16/bf16 as they are; biases and every other frame pass through. */
#include "score.h"
#include "internal.h"
#include "../quant/quant.h"

#include <math.h>

static int is_matrix_name(const char *s)
{
    if (s[0] != 'w')
        return 0;
    for (const char *p = s + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

int tq_score_is_model(tq_reader *r)
{
    size_t n;
    if (tq_reader_lookahead(r, &n) || !n)
        return 0;
    const tq_frame *f = tq_reader_ahead(r, 0);
    return f && !strcmp(f->name, "model") && f->rank == 0 && f->dtype == TQ_DTYPE_I64;
}

/* shift[j]: the power of 2 nearest the largest |w[j, o]| over the outputs,
 * within -64..64 (0 for a row of zeros); 1 when some shift is not 0. */
static int shifts(const float *w, int64_t in, int64_t out, int8_t *shift)
{
    int any = 0;
    for (int64_t j = 0; j < in; j++) {
        float amax = 0;
        for (int64_t o = 0; o < out; o++)
            amax = fabsf(w[j * out + o]) > amax ? fabsf(w[j * out + o]) : amax;
        int e = 0;
        if (amax > 0) {
            e = (int)lrint(log2((double)amax));
            e = e < -64 ? -64 : e > 64 ? 64 : e;
        }
        shift[j] = (int8_t)e;
        any |= e != 0;
    }
    return any;
}

static tq_status code_matrix(tq_writer *w, tq_frame *f, tq_quant_code code,
                             tq_score_quant_stat *qs)
{
    int64_t in = f->dims[0], out = f->rank == 2 ? f->dims[1] : 1;
    if ((code == TQ_QUANT_Q8_0 || code == TQ_QUANT_Q4_0) && in % TQ_QK)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s weights need a multiple of %d inputs, "
                                    "not %lld (int8 takes any)",
                       (unsigned long long)f->index, f->name, tq_quant_code_name(code), TQ_QK,
                       (long long)in);
    size_t nv = (size_t)(in * out);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    float *x = malloc((nv ? nv : 1) * 4), *t = malloc((nv ? nv : 1) * 4);
    float *scale = malloc((size_t)out * 4);
    int8_t *shift = malloc((size_t)in);
    unsigned char *codes = NULL;
    uint64_t bytes = 0;
    int64_t cd[2] = {out, in};
    if (!x || !t || !scale || !shift) {
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = tq_convert(TQ_DTYPE_F32, x, f->dtype, data, nv, 0)))
        goto done;
    const char *why = "";
    if (tq_quant_bad_row(TQ_QUANT_F32, x, in, out, &why) >= 0) {
        st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": a weight is not finite",
                     (unsigned long long)f->index, f->name);
        goto done;
    }
    int any = shifts(x, in, out, shift);
    /* the transpose, each input's weights over 2^shift (exact in f32 but for
     * subnormals) */
    for (int64_t j = 0; j < in; j++)
        for (int64_t o = 0; o < out; o++)
            t[o * in + j] = ldexpf(x[j * out + o], -shift[j]);
    int64_t bad = tq_quant_bad_row(code, t, out, in, &why);
    if (bad >= 0) {
        st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": output %lld has %s; %s cannot hold it",
                     (unsigned long long)f->index, f->name, (long long)bad, why,
                     tq_quant_code_name(code));
        goto done;
    }
    if ((st = tq_dtype_payload_bytes(tq_quant_code_dtype(code), 2, cd, &bytes)))
        goto done;
    if (!(codes = malloc(bytes ? bytes : 1))) {
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = tq_quant_rows(code, t, out, in, NULL, codes, scale)))
        goto done;
    char side[TQ_MAX_NAME + 8];
    if (code == TQ_QUANT_INT8) {
        snprintf(side, sizeof side, "%s_scale", f->name);
        if ((st = tq_writer_write(w, side, TQ_DTYPE_F32, 1, &out, NULL, 0, scale,
                                  (uint64_t)out * 4)))
            goto done;
    }
    if (any) {
        snprintf(side, sizeof side, "%s_shift", f->name);
        if ((st = tq_writer_write(w, side, TQ_DTYPE_I8, 1, &in, NULL, 0, shift, (uint64_t)in)))
            goto done;
    }
    st = tq_writer_write(w, f->name, tq_quant_code_dtype(code), 2, cd, f->meta, f->meta_len,
                         codes, bytes);
    /* the error of the weights as tq-score decodes them */
    if (!st && (st = tq_quant_dequant(code, codes, out, in, NULL, scale, t)) == TQ_OK)
        for (int64_t o = 0; o < out; o++)
            for (int64_t j = 0; j < in; j++) {
                double a = x[j * out + o], b = ldexpf(t[o * in + j], shift[j]), e = fabs(a - b);
                qs->se += e * e, qs->sx += a * a;
                qs->max_abs = e > qs->max_abs ? e : qs->max_abs;
            }
    qs->weights += (int64_t)nv;
    qs->bytes_out += bytes + (code == TQ_QUANT_INT8 ? (uint64_t)out * 4 : 0) +
                     (any ? (uint64_t)in : 0);
done:
    free(x), free(t), free(scale), free(shift), free(codes);
    return st;
}

tq_status tq_score_model_quantize(tq_reader *r, tq_writer *w, int code_,
                                  tq_score_quant_stat *qs)
{
    tq_quant_code code = (tq_quant_code)code_;
    memset(qs, 0, sizeof *qs);
    if (code != TQ_QUANT_INT8 && code != TQ_QUANT_Q8_0 && code != TQ_QUANT_Q4_0 &&
        code != TQ_QUANT_F16 && code != TQ_QUANT_BF16)
        return tq_fail(TQ_ERR_USAGE, "a model's weights take int8, q8_0, q4_0, f16 or bf16, "
                                     "not %s",
                       tq_quant_code_name(code));
    tq_status st;
    tq_frame *f;
    while (!(st = tq_reader_next(r, &f))) {
        qs->bytes_in += f->raw_size;
        int matrix = is_matrix_name(f->name);
        if (matrix && !tq_dtype_is_float(f->dtype))
            return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": the weights are %s already: quantize "
                                        "the float model tq-train wrote",
                           (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype));
        if (matrix && (f->rank < 1 || f->rank > 2))
            return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": weights must be [in, out] or [in], "
                                        "not of rank %d",
                           (unsigned long long)f->index, f->name, f->rank);
        if (!matrix) {
            st = tq_writer_put(w, f);
            qs->bytes_out += f->raw_size;
        } else if (code == TQ_QUANT_F16 || code == TQ_QUANT_BF16) {
            /* the float codes keep the [in, out] layout of the f32 weights */
            size_t nv = (size_t)f->dims[0] * (size_t)(f->rank == 2 ? f->dims[1] : 1);
            const void *data;
            void *buf = malloc(nv * 2 + 1);
            float *x = malloc(nv * 4 + 1);
            if (!buf || !x)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            else if (!(st = tq_frame_data(f, &data)) &&
                     !(st = tq_convert(TQ_DTYPE_F32, x, f->dtype, data, nv, 0))) {
                const char *why;
                if (tq_quant_bad_row(code, x, 1, (int64_t)nv, &why) >= 0)
                    st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": a weight has %s; %s cannot hold it",
                                 (unsigned long long)f->index, f->name, why,
                                 tq_quant_code_name(code));
                else if (!(st = tq_convert(tq_quant_code_dtype(code), buf, TQ_DTYPE_F32, x, nv, 0)))
                    st = tq_writer_write(w, f->name, tq_quant_code_dtype(code), f->rank, f->dims,
                                         f->meta, f->meta_len, buf, (uint64_t)nv * 2);
                float *y = st ? NULL : malloc(nv * 4 + 1);
                if (!st && !y)
                    st = tq_fail(TQ_ERR_NOMEM, "out of memory");
                if (!st && !(st = tq_convert(TQ_DTYPE_F32, y, tq_quant_code_dtype(code), buf, nv, 0)))
                    for (size_t k = 0; k < nv; k++) {
                        double e = fabs((double)x[k] - (double)y[k]);
                        qs->se += e * e, qs->sx += (double)x[k] * x[k];
                        qs->max_abs = e > qs->max_abs ? e : qs->max_abs;
                    }
                free(y);
            }
            qs->weights += (int64_t)nv;
            qs->bytes_out += (uint64_t)nv * 2;
            free(buf);
            free(x);
        } else {
            st = code_matrix(w, f, code, qs);
        }
        if (st)
            return st;
    }
    return st == TQ_EOF ? TQ_OK : st;
}
