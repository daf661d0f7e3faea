/* run.c: tq-quantize over a stream, batch by batch: each batch of a chosen
 * frame is replaced by its codes, a side frame before it where the code needs
 * one (NAME_scale f32 [n] before each int8 batch, NAME_ranges f32 [2, d] once
 * before the first batch of a ranges code); every other frame passes through.
 * Dequantizing reads the same layout back. Memory: one batch. */
#include "quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One chosen name and what the filter keeps about it between batches. */
typedef struct slot {
    tq_quant_stat *stat;
    int64_t rows;           /* rows seen before the current batch */
    int ranges_written;
    tq_quant_side side;     /* dequantize: NAME_scale and NAME_ranges as read */
} slot;

typedef struct runner {
    const tq_quant_opts *o;
    tq_writer *w;
    int dequant;
    slot slots[TQ_QUANT_MAX_NAMES];
    tq_quant_stat *stats;
    int nstats;
    float *x, *y;           /* a batch as f32, and its codes dequantized */
    size_t cap_x, cap_y;
    unsigned char *codes;
    size_t cap_codes;
    float *scales;
    size_t cap_scales;
    char meta[TQ_MAX_META];
} runner;

static tq_status grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return TQ_OK;
    void *n = realloc(*p, need);
    if (!n)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for a batch of %zu bytes", need);
    *p = n, *cap = need;
    return TQ_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && !strcmp(s + n - m, suffix);
}

static int is_code_dtype(tq_dtype dt)
{
    return dt == TQ_DTYPE_F16 || dt == TQ_DTYPE_BF16 || dt == TQ_DTYPE_I8 ||
           dt == TQ_DTYPE_U8 || dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0 ||
           dt == TQ_DTYPE_BIT || dt == TQ_DTYPE_Q2;
}

int tq_quant_is_default(const tq_frame *f, int dequantize)
{
    if (f->rank != 2 || !strcmp(f->name, "key") || ends_with(f->name, "_scale") ||
        ends_with(f->name, "_ranges"))
        return 0;
    return dequantize ? is_code_dtype(f->dtype) : tq_dtype_is_float(f->dtype);
}

/* The slot of a frame name, creating it for the default choice; NULL when the
 * frame is not chosen. */
static slot *find_slot(runner *r, const char *name)
{
    for (int i = 0; i < r->nstats; i++)
        if (!strcmp(r->stats[i].name, name))
            return &r->slots[i];
    return NULL;
}

static slot *add_slot(runner *r, const char *name)
{
    tq_quant_stat *st = &r->stats[r->nstats];
    memset(st, 0, sizeof *st);
    snprintf(st->name, sizeof st->name, "%s", name);
    st->cos_min = INFINITY;
    slot *s = &r->slots[r->nstats++];
    s->stat = st;
    tq_quant_side_init(&s->side);
    return s;
}

/* The frame's metadata with its quant= entry replaced by quant=VALUE (or
 * dropped, VALUE NULL). */
static tq_status meta_with(runner *r, const tq_frame *f, const char *value, size_t *len)
{
    size_t n = 0;
    for (size_t at = 0; f->meta && at < f->meta_len;) {
        size_t l = strnlen(f->meta + at, f->meta_len - at);
        if (strncmp(f->meta + at, "quant=", 6)) {
            memcpy(r->meta + n, f->meta + at, l + 1);
            n += l + 1;
        }
        at += l + 1;
    }
    if (value) {
        int l = snprintf(r->meta + n, sizeof r->meta - n, "quant=%s", value);
        if (l < 0 || (size_t)l + 1 > sizeof r->meta - n)
            return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": metadata too long to add quant=",
                           (unsigned long long)f->index, f->name);
        n += (size_t)l + 1;
    }
    *len = n;
    return TQ_OK;
}

static tq_status side_name(const tq_frame *f, const char *suffix, char *out)
{
    if (strlen(f->name) + strlen(suffix) > TQ_MAX_NAME)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": the name is too long for its %s frame",
                       (unsigned long long)f->index, f->name, suffix);
    sprintf(out, "%s%s", f->name, suffix);
    return TQ_OK;
}

/* Adds a batch to the error figures: x the input, y its codes decoded. */
static void measure(tq_quant_stat *st, const float *x, const float *y, int64_t n, int64_t d)
{
    for (int64_t i = 0; i < n; i++) {
        double xx = 0, yy = 0, xy = 0;
        for (int64_t j = 0; j < d; j++) {
            double a = x[i * d + j], b = y[i * d + j], e = fabs(a - b);
            xx += a * a, yy += b * b, xy += a * b;
            st->se += e * e;
            st->max_abs = e > st->max_abs ? e : st->max_abs;
        }
        st->sx += xx;
        /* two zero rows agree; a zero row and another do not */
        double c = xx > 0 && yy > 0 ? xy / sqrt(xx * yy) : xx == yy ? 1.0 : 0.0;
        st->cos_sum += c;
        st->cos_min = c < st->cos_min ? c : st->cos_min;
    }
}

static tq_status quantize_frame(runner *r, slot *s, tq_frame *f)
{
    const tq_quant_opts *o = r->o;
    if (f->rank != 2 || !tq_dtype_is_float(f->dtype))
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": vectors must be a rank 2 float frame, "
                                    "not %s rank %d",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), f->rank);
    int64_t n = f->dims[0], d = f->dims[1];
    if (d == 0 && n > 0) /* each row would be owed a scale, for no values */
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows of 0 values: nothing to quantize",
                       (unsigned long long)f->index, f->name, (long long)n);
    tq_quant_code c = o->code;
    if ((c == TQ_QUANT_Q8_0 || c == TQ_QUANT_Q4_0 || c == TQ_QUANT_Q2) && d % TQ_QK)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s needs rows of a multiple of %d "
                                    "values, not %lld",
                       (unsigned long long)f->index, f->name, tq_quant_code_name(c), TQ_QK,
                       (long long)d);
    int ranged = c == TQ_QUANT_UINT8_RANGES || c == TQ_QUANT_INT8_RANGES;
    if (ranged && d != o->ranges_d)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": the ranges from %s have %lld dimensions, "
                                    "the rows from %s %lld",
                       (unsigned long long)f->index, f->name,
                       o->ranges_from ? o->ranges_from : "--ranges", (long long)o->ranges_d,
                       o->input_from ? o->input_from : "the input", (long long)d);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    size_t nv = (size_t)(n * d);
    const float *x = data; /* f32 rows are used where they lie (often mapped) */
    if (!st && f->dtype != TQ_DTYPE_F32) {
        st = grow((void **)&r->x, &r->cap_x, nv * sizeof(float) + 1);
        if (!st && nv)
            st = tq_convert(TQ_DTYPE_F32, r->x, f->dtype, data, nv, 0);
        x = r->x;
    }
    if (st)
        return st;
    const char *why = "";
    int64_t bad = tq_quant_bad_row(c, x, n, d, &why);
    if (bad >= 0)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": row %lld has %s; %s cannot hold it",
                       (unsigned long long)f->index, f->name, (long long)(s->rows + bad), why,
                       tq_quant_code_name(c));
    uint64_t bytes;
    if ((st = tq_dtype_payload_bytes(tq_quant_code_dtype(c), 2, f->dims, &bytes)) ||
        (st = grow((void **)&r->codes, &r->cap_codes, bytes ? bytes : 1)) ||
        (st = grow((void **)&r->scales, &r->cap_scales, (size_t)(n ? n : 1) * sizeof(float))) ||
        (st = tq_quant_rows(c, x, n, d, o->ranges, r->codes, r->scales)))
        return st;
    tq_quant_stat *qs = s->stat;
    char side[TQ_MAX_NAME + 1];
    if (ranged && !s->ranges_written) {
        int64_t rd[2] = {2, d};
        if ((st = side_name(f, "_ranges", side)) ||
            (st = tq_writer_write(r->w, side, TQ_DTYPE_F32, 2, rd, NULL, 0, o->ranges,
                                  (uint64_t)(2 * d) * sizeof(float))))
            return st;
        s->ranges_written = 1;
        qs->bytes_out += (uint64_t)(2 * d) * sizeof(float);
    }
    if (c == TQ_QUANT_INT8) {
        if ((st = side_name(f, "_scale", side)) ||
            (st = tq_writer_write(r->w, side, TQ_DTYPE_F32, 1, f->dims, NULL, 0, r->scales,
                                  (uint64_t)n * sizeof(float))))
            return st;
        qs->bytes_out += (uint64_t)n * sizeof(float);
    }
    static const char *quant_meta[TQ_QUANT_COUNT] = {
        [TQ_QUANT_F16] = "f16", [TQ_QUANT_BF16] = "bf16", [TQ_QUANT_INT8] = "int8",
        [TQ_QUANT_UINT8_RANGES] = "uint8-ranges", [TQ_QUANT_INT8_RANGES] = "int8-ranges",
        [TQ_QUANT_Q8_0] = "q8_0", [TQ_QUANT_Q4_0] = "q4_0", [TQ_QUANT_BIT] = "bit",
        [TQ_QUANT_Q2] = "q2",
    };
    size_t ml;
    if ((st = meta_with(r, f, quant_meta[c], &ml)) ||
        (st = tq_writer_write(r->w, f->name, tq_quant_code_dtype(c), 2, f->dims, r->meta, ml,
                              r->codes, bytes)))
        return st;
    if (o->measure) {
        if ((st = grow((void **)&r->y, &r->cap_y, nv * sizeof(float) + 1)) ||
            (st = tq_quant_dequant(c, r->codes, n, d, o->ranges, r->scales, r->y)))
            return st;
        measure(qs, x, r->y, n, d);
        qs->measured = 1;
    }
    qs->from = f->dtype, qs->to = tq_quant_code_dtype(c);
    qs->rows += n, qs->d = d;
    qs->bytes_in += f->raw_size;
    qs->bytes_out += bytes;
    s->rows += n;
    return TQ_OK;
}

/* Keeps a side frame of a chosen name (dequantizing). */
static tq_status keep_side(tq_frame *f, slot *s)
{
    s->stat->bytes_in += f->raw_size;
    return tq_quant_side_keep(&s->side, f);
}

static tq_status dequantize_frame(runner *r, slot *s, tq_frame *f)
{
    size_t nv = tq_quant_decodable(f) ? (size_t)(f->dims[0] * f->dims[1]) : 0;
    size_t ml;
    tq_status st = grow((void **)&r->y, &r->cap_y, nv * sizeof(float) + 1);
    if (!st)
        st = tq_quant_side_decode(&s->side, f, r->y);
    if (!st)
        st = meta_with(r, f, NULL, &ml);
    if (!st)
        st = tq_writer_write(r->w, f->name, TQ_DTYPE_F32, 2, f->dims, r->meta, ml, r->y,
                             (uint64_t)nv * sizeof(float));
    if (st)
        return st;
    tq_quant_stat *qs = s->stat;
    qs->from = f->dtype, qs->to = TQ_DTYPE_F32;
    qs->rows += f->dims[0], qs->d = f->dims[1];
    qs->bytes_in += f->raw_size;
    qs->bytes_out += (uint64_t)nv * sizeof(float);
    s->rows += f->dims[0];
    return TQ_OK;
}

/* Dequantizing, a side frame's stem names its codes: "emb" for "emb_scale". */
static int side_of(const tq_frame *f, char *stem)
{
    const char *suffix = ends_with(f->name, "_scale") ? "_scale"
                         : ends_with(f->name, "_ranges") ? "_ranges" : NULL;
    if (!suffix)
        return 0;
    size_t n = strlen(f->name) - strlen(suffix);
    memcpy(stem, f->name, n);
    stem[n] = 0;
    return 1;
}

static tq_status step(runner *r, tq_frame *f)
{
    const tq_quant_opts *o = r->o;
    int chosen_default = o->nnames == 0;
    if (r->dequant) {
        char stem[TQ_MAX_NAME + 1];
        if (side_of(f, stem)) {
            slot *s = find_slot(r, stem);
            if (!s && chosen_default && r->nstats == 0)
                s = add_slot(r, stem);
            if (s)
                return keep_side(f, s);
        }
    }
    slot *s = find_slot(r, f->name);
    if (!s && chosen_default && r->nstats == 0 && tq_quant_is_default(f, r->dequant))
        s = add_slot(r, f->name);
    if (!s)
        return tq_writer_put(r->w, f);
    return r->dequant ? dequantize_frame(r, s, f) : quantize_frame(r, s, f);
}

tq_status tq_quant_run(const tq_quant_opts *o, tq_reader *rd, tq_writer *w,
                       tq_quant_stat *stats, int *nstats)
{
    runner r = {.o = o, .w = w, .dequant = o->code == TQ_QUANT_F32, .stats = stats};
    for (int i = 0; i < o->nnames; i++)
        if (!find_slot(&r, o->names[i]))
            add_slot(&r, o->names[i]);
    tq_status st;
    tq_frame *f;
    while (!(st = tq_reader_next(rd, &f)))
        if ((st = step(&r, f)))
            break;
    if (st == TQ_EOF) {
        st = TQ_OK;
        for (int i = 0; i < r.nstats && !st; i++)
            st = tq_quant_side_end(&r.slots[i].side, r.stats[i].name);
    }
    for (int i = 0; i < r.nstats; i++)
        tq_quant_side_free(&r.slots[i].side);
    free(r.x), free(r.y), free(r.codes), free(r.scales);
    *nstats = r.nstats;
    return st;
}

tq_status tq_quant_ranges_read(tq_reader *rd, const char *name, float **ranges, int64_t *d,
                               int64_t *rows)
{
    float *x = NULL, *rg = NULL;
    size_t cap = 0;
    char chosen[TQ_MAX_NAME + 1] = "";
    if (name)
        snprintf(chosen, sizeof chosen, "%s", name);
    *rows = 0;
    *d = -1;
    tq_status st;
    tq_frame *f;
    while (!(st = tq_reader_next(rd, &f))) {
        char want[TQ_MAX_NAME + 8];
        snprintf(want, sizeof want, "%s_ranges", chosen);
        int is_ranges = f->rank == 2 && f->dims[0] == 2 && f->dtype == TQ_DTYPE_F32 &&
                        (!strcmp(f->name, "ranges") || (*chosen && !strcmp(f->name, want)) ||
                         (!*chosen && ends_with(f->name, "_ranges")));
        if (is_ranges && !*rows) {
            /* ranges as such win over any calibration rows */
            const void *data;
            if ((st = tq_frame_data(f, &data)))
                break;
            free(rg);
            if (!(rg = malloc((size_t)(2 * f->dims[1] + 1) * sizeof(float)))) {
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(rg, data, (size_t)(2 * f->dims[1]) * sizeof(float));
            *d = f->dims[1];
            st = tq_quant_ranges_check(rg, *d);
            if (!st)
                st = TQ_EOF;
            break;
        }
        if (*chosen ? strcmp(f->name, chosen) : !tq_quant_is_default(f, 0))
            continue;
        if (!*chosen)
            snprintf(chosen, sizeof chosen, "%s", f->name);
        if (f->rank != 2 || !tq_dtype_is_float(f->dtype)) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": calibration vectors must be a rank 2 "
                                      "float frame",
                         (unsigned long long)f->index, f->name);
            break;
        }
        int64_t n = f->dims[0];
        if (!rg) {
            *d = f->dims[1];
            if (!(rg = malloc((size_t)(2 * *d + 1) * sizeof(float)))) {
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
                break;
            }
            for (int64_t j = 0; j < *d; j++)
                rg[j] = INFINITY, rg[*d + j] = -INFINITY;
        }
        const void *data;
        size_t nv = (size_t)(n * *d);
        if ((st = tq_frame_data(f, &data)) || (st = grow((void **)&x, &cap, nv * sizeof(float) + 1)) ||
            (st = nv ? tq_convert(TQ_DTYPE_F32, x, f->dtype, data, nv, 0) : TQ_OK))
            break;
        const char *why;
        int64_t bad = tq_quant_bad_row(TQ_QUANT_UINT8_RANGES, x, n, *d, &why);
        if (bad >= 0) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": calibration row %lld has %s",
                         (unsigned long long)f->index, f->name, (long long)(*rows + bad), why);
            break;
        }
        tq_quant_ranges_fold(rg, x, n, *d);
        *rows += n;
    }
    free(x);
    if (st == TQ_EOF && !rg)
        st = tq_fail(TQ_ERR_DATA, "no ranges frame and no vectors to calibrate ranges on");
    if (st != TQ_EOF) {
        free(rg);
        return st;
    }
    *ranges = rg;
    return TQ_OK;
}
