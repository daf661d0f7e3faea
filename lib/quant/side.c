/* side.c: tq-quantize's codes read back as f32 rows, with the side frames
 * that some of them need (NAME_scale before each int8 batch, NAME_ranges once
 * before the first batch of a ranges code). tq-quantize --to f32 and every
 * tool that takes vectors decode through here, so a code means the same
 * values wherever it is read. */
#include "quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tq_quant_side_init(tq_quant_side *s)
{
    memset(s, 0, sizeof *s);
    s->scale_n = -1;
}

void tq_quant_side_free(tq_quant_side *s)
{
    free(s->scale);
    free(s->ranges);
    tq_quant_side_init(s);
}

static int is_suffixed(const char *f, const char *name, const char *suffix)
{
    size_t n = strlen(name);
    return !strncmp(f, name, n) && !strcmp(f + n, suffix);
}

int tq_quant_side_stem(const tq_frame *f, char *stem)
{
    size_t n = strlen(f->name);
    int scale = n > 6 && !strcmp(f->name + n - 6, "_scale") && f->rank == 1;
    int ranges = n > 7 && !strcmp(f->name + n - 7, "_ranges") && f->rank == 2 && f->dims[0] == 2;
    if (f->dtype != TQ_DTYPE_F32 || !(scale || ranges))
        return 0;
    if (stem)
        snprintf(stem, TQ_MAX_NAME + 1, "%.*s", (int)(n - (scale ? 6 : 7)), f->name);
    return scale ? 1 : 2;
}

int tq_quant_side_of(const tq_frame *f, const char *name)
{
    return is_suffixed(f->name, name, "_scale") ? 1 : is_suffixed(f->name, name, "_ranges") ? 2 : 0;
}

int tq_quant_decodable(const tq_frame *f)
{
    tq_dtype dt = f->dtype;
    return f->rank == 2 && (tq_dtype_is_float(dt) || dt == TQ_DTYPE_I8 || dt == TQ_DTYPE_U8 ||
                            dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0 || dt == TQ_DTYPE_BIT ||
                            dt == TQ_DTYPE_Q2);
}

tq_status tq_quant_side_keep(tq_quant_side *s, tq_frame *f)
{
    int scale = f->name[strlen(f->name) - 1] == 'e'; /* _scale, else _ranges */
    int ok = f->dtype == TQ_DTYPE_F32 && (scale ? f->rank == 1 : f->rank == 2 && f->dims[0] == 2);
    if (!ok)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s must be f32 %s, not %s rank %d",
                       (unsigned long long)f->index, f->name, scale ? "a scale frame" : "ranges",
                       scale ? "[n]" : "[2, d]", tq_dtype_name(f->dtype), f->rank);
    if (scale && s->scale_n >= 0)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": a second scale frame before any codes",
                       (unsigned long long)f->index, f->name);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    size_t n = (size_t)(scale ? f->dims[0] : 2 * f->dims[1]);
    float **dst = scale ? &s->scale : &s->ranges;
    float *p = realloc(*dst, (n ? n : 1) * sizeof(float));
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memcpy(p, data, n * sizeof(float));
    *dst = p;
    if (scale) {
        s->scale_n = f->dims[0];
        return TQ_OK;
    }
    s->ranges_d = f->dims[1];
    if ((st = tq_quant_ranges_check(p, s->ranges_d)))
        return tq_fail_context(st, "frame %llu \"%s\"", (unsigned long long)f->index, f->name);
    return TQ_OK;
}

tq_status tq_quant_side_end(const tq_quant_side *s, const char *name)
{
    if (s->scale_n >= 0)
        return tq_fail(TQ_ERR_DATA, "\"%s_scale\": a scale frame with no codes after it", name);
    return TQ_OK;
}

tq_quant_code tq_quant_code_of(tq_dtype dt, int scaled)
{
    switch (dt) {
    case TQ_DTYPE_I8: return scaled ? TQ_QUANT_INT8 : TQ_QUANT_INT8_RANGES;
    case TQ_DTYPE_U8: return TQ_QUANT_UINT8_RANGES;
    case TQ_DTYPE_Q8_0: return TQ_QUANT_Q8_0;
    case TQ_DTYPE_Q4_0: return TQ_QUANT_Q4_0;
    case TQ_DTYPE_BIT: return TQ_QUANT_BIT;
    case TQ_DTYPE_Q2: return TQ_QUANT_Q2;
    case TQ_DTYPE_F16: return TQ_QUANT_F16;
    case TQ_DTYPE_BF16: return TQ_QUANT_BF16;
    default: return TQ_QUANT_F32; /* f32, f64: converted as they are */
    }
}

tq_status tq_quant_side_decode(tq_quant_side *s, tq_frame *f, float *y)
{
    if (!tq_quant_decodable(f))
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": vectors must be a rank 2 frame of a float "
                                    "or code dtype, not %s rank %d",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), f->rank);
    int64_t n = f->dims[0], d = f->dims[1];
    tq_quant_code c = tq_quant_code_of(f->dtype, s->scale_n >= 0);
    if (c == TQ_QUANT_INT8 && s->scale_n != n)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows after a scale frame of %lld",
                       (unsigned long long)f->index, f->name, (long long)n, (long long)s->scale_n);
    if ((c == TQ_QUANT_INT8_RANGES || c == TQ_QUANT_UINT8_RANGES) && (!s->ranges || s->ranges_d != d)) {
        char scale[TQ_MAX_NAME + 80] = "";
        if (c == TQ_QUANT_INT8_RANGES)
            snprintf(scale, sizeof scale, "a scale frame \"%s_scale\" f32 [%lld] just before them or ",
                     f->name, (long long)n);
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s codes need %sranges \"%s_ranges\" "
                                    "f32 [2, %lld] before the first batch (tq-quantize)",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), scale,
                       f->name, (long long)d);
    }
    if (c == TQ_QUANT_INT8)
        s->scale_n = -1; /* each batch of int8 codes has its own scales (kept in s->scale) */
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st || !n || !d)
        return st;
    if (c == TQ_QUANT_F32)
        return tq_convert(TQ_DTYPE_F32, y, f->dtype, data, (size_t)(n * d), 0);
    return tq_quant_dequant(c, data, n, d, s->ranges, s->scale, y);
}
