/* codes.c: the codes of tq-quantize on f32 rows, and their inverses. int8 per
 * row (scale = max|x| / 127, q = x / scale rounded half to even) and the
 * per-dimension ranges of sentence-transformers (floor((x - min) / step),
 * step = (max - min) / 255, clipped to 0..255) are here; f16, bf16, q8_0, q4_0
 * and bit are tq_convert's (dtype.c), row by row. Every operation is a single
 * f32 operation in C's order, never contracted or reassociated, so that the
 * bytes are the definitions' (no -ffast-math here). */
#include "quant.h"
#include "simd.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static const struct {
    const char *name;
    tq_dtype dtype;
} codes[TQ_QUANT_COUNT] = {
    [TQ_QUANT_F32] = {"f32", TQ_DTYPE_F32},
    [TQ_QUANT_F16] = {"f16", TQ_DTYPE_F16},
    [TQ_QUANT_BF16] = {"bf16", TQ_DTYPE_BF16},
    [TQ_QUANT_INT8] = {"int8", TQ_DTYPE_I8},
    [TQ_QUANT_UINT8_RANGES] = {"uint8", TQ_DTYPE_U8},
    [TQ_QUANT_INT8_RANGES] = {"int8", TQ_DTYPE_I8},
    [TQ_QUANT_Q8_0] = {"q8_0", TQ_DTYPE_Q8_0},
    [TQ_QUANT_Q4_0] = {"q4_0", TQ_DTYPE_Q4_0},
    [TQ_QUANT_BIT] = {"bit", TQ_DTYPE_BIT},
    [TQ_QUANT_Q2] = {"q2", TQ_DTYPE_Q2},
};

const char *tq_quant_code_name(tq_quant_code c)
{
    return c < TQ_QUANT_COUNT ? codes[c].name : "?";
}

tq_dtype tq_quant_code_dtype(tq_quant_code c)
{
    return c < TQ_QUANT_COUNT ? codes[c].dtype : TQ_DTYPE_INVALID;
}

/* The largest |x| whose f16 is finite (65504 and up to the rounding boundary). */
#define F16_LIMIT 65519.996f

static float row_amax(const float *r, int64_t d, int simd, int *finite)
{
#if defined(__x86_64__)
    if (simd) {
        float amax;
        *finite = tq_quant_amax_avx2(r, d, &amax);
        return amax;
    }
#endif
    (void)simd;
    float amax = 0;
    int ok = 1;
    for (int64_t j = 0; j < d; j++) {
        ok &= isfinite(r[j]) != 0;
        amax = fabsf(r[j]) > amax ? fabsf(r[j]) : amax;
    }
    *finite = ok;
    return amax;
}

/* Why row r cannot be coded (NULL: it can). */
static const char *row_bad(tq_quant_code c, const float *r, int64_t d, int simd)
{
    int finite;
    float amax = row_amax(r, d, simd, &finite);
    if (!finite)
        return "a NaN or an infinity";
    /* f16 values, and the f16 scales of the ggml blocks (amax / 127 for
     * q8_0, up to amax / 8 for q4_0) must stay finite */
    if ((c == TQ_QUANT_F16 && amax >= F16_LIMIT) ||
        (c == TQ_QUANT_Q8_0 && amax / 127.0f >= F16_LIMIT) ||
        (c == TQ_QUANT_Q4_0 && amax / 8.0f >= F16_LIMIT) ||
        (c == TQ_QUANT_Q2 && amax >= F16_LIMIT)) /* its offset is the block's minimum */
        return "a value beyond the range of f16";
    return NULL;
}

typedef struct bad_job {
    tq_quant_code c;
    const float *x;
    int64_t d;
    int simd;
    int64_t first; /* the first bad row found, INT64_MAX: none */
} bad_job;

static void bad_rows(void *ctx, int64_t begin, int64_t end)
{
    bad_job *j = ctx;
    for (int64_t i = begin; i < end && i < __atomic_load_n(&j->first, __ATOMIC_RELAXED); i++)
        if (row_bad(j->c, j->x + i * j->d, j->d, j->simd)) {
            int64_t f = __atomic_load_n(&j->first, __ATOMIC_RELAXED);
            while (i < f && !__atomic_compare_exchange_n(&j->first, &f, i, 0, __ATOMIC_RELAXED,
                                                         __ATOMIC_RELAXED))
                ;
            return;
        }
}

int64_t tq_quant_bad_row(tq_quant_code c, const float *x, int64_t n, int64_t d,
                         const char **why)
{
    /* on the pool (a serial pass was a third of tq-quantize's time); the
     * first bad row is the least found, whatever the threads */
    bad_job j = {c, x, d, tq_quant_have_avx2(), INT64_MAX};
    tq_parallel_for(n, d ? 16384 / d + 1 : n + 1, bad_rows, &j);
    if (j.first == INT64_MAX)
        return -1;
    *why = row_bad(c, x + j.first * d, d, j.simd);
    return j.first;
}

int64_t tq_quant_first_nonfinite(const float *x, int64_t n, int64_t d, int64_t *col)
{
    const char *why;
    /* f32 is the code that holds every finite value: only the scan remains */
    int64_t r = d > 0 ? tq_quant_bad_row(TQ_QUANT_F32, x, n, d, &why) : -1;
    *col = 0;
    while (r >= 0 && isfinite(x[r * d + *col]))
        ++*col;
    return r;
}

/* ---- int8 per row ---- */

static void int8_row(const float *x, int64_t d, int8_t *q, float *scale, int simd)
{
    int finite;
    float s = row_amax(x, d, simd, &finite) / 127.0f;
    *scale = s;
#if defined(__x86_64__)
    if (simd) {
        tq_quant_int8_row_avx2(x, d, q, s);
        return;
    }
#endif
    for (int64_t j = 0; j < d; j++) {
        /* nearbyintf rounds half to even in the default rounding mode; the
         * clamp only acts when s is subnormal and lost precision */
        float v = s != 0.0f ? nearbyintf(x[j] / s) : 0.0f;
        q[j] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
}

/* ---- per-dimension ranges (sentence-transformers' quantize_embeddings) ---- */

static float range_step(const float *ranges, int64_t d, int64_t j)
{
    float step = (ranges[d + j] - ranges[j]) / 255.0f;
    return step == 0.0f ? 1.0f : step;
}

static void ranges_row(const float *x, int64_t d, const float *ranges, int sub128,
                       unsigned char *q)
{
    for (int64_t j = 0; j < d; j++) {
        float v = floorf((x[j] - ranges[j]) / range_step(ranges, d, j));
        int u = v < 0.0f ? 0 : v > 255.0f ? 255 : (int)v;
        q[j] = (unsigned char)(sub128 ? (unsigned char)(int8_t)(u - 128) : u);
    }
}

void tq_quant_ranges_fold(float *ranges, const float *x, int64_t n, int64_t d)
{
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            float v = x[i * d + j];
            ranges[j] = v < ranges[j] ? v : ranges[j];
            ranges[d + j] = v > ranges[d + j] ? v : ranges[d + j];
        }
}

tq_status tq_quant_ranges_check(const float *ranges, int64_t d)
{
    for (int64_t j = 0; j < d; j++)
        if (!isfinite(ranges[j]) || !isfinite(ranges[d + j]) || ranges[j] > ranges[d + j])
            return tq_fail(TQ_ERR_DATA, "dimension %lld: the range [%g, %g] is not a finite "
                                        "minimum and maximum",
                           (long long)j, (double)ranges[j], (double)ranges[d + j]);
    return TQ_OK;
}

/* ---- rows of any code, on the pool ---- */

/* The 8 values of each byte of sign bits, most significant bit first. */
static float sign_table[256][8];
static pthread_once_t sign_once = PTHREAD_ONCE_INIT;
static void sign_init(void)
{
    for (int b = 0; b < 256; b++)
        for (int k = 0; k < 8; k++)
            sign_table[b][k] = (b >> (7 - k)) & 1 ? 1.0f : -1.0f;
}

typedef struct job {
    tq_quant_code c;
    int inverse;
    const float *x;       /* quantize: input rows; dequantize: output rows */
    float *y;
    const unsigned char *in;
    unsigned char *out;
    int64_t d;
    size_t row_bytes;     /* of the codes */
    const float *ranges;
    float *scales;
    const float *cscales;
    int simd;             /* the AVX2 kernels of simd.c */
    tq_status st;
} job;

static void run_rows(void *ctx, int64_t begin, int64_t end)
{
    job *j = ctx;
    int64_t d = j->d;
    tq_dtype dt = tq_quant_code_dtype(j->c);
    size_t n = (size_t)((end - begin) * d);
    tq_status st = TQ_OK;
    if (!j->inverse) {
        const float *x = j->x + begin * d;
        unsigned char *q = j->out + (size_t)begin * j->row_bytes;
        if (j->c == TQ_QUANT_INT8) {
            for (int64_t i = begin; i < end; i++)
                int8_row(j->x + i * d, d, (int8_t *)(j->out + (size_t)i * j->row_bytes),
                         j->scales + i, j->simd);
        } else if (j->c == TQ_QUANT_UINT8_RANGES || j->c == TQ_QUANT_INT8_RANGES) {
            for (int64_t i = begin; i < end; i++)
                ranges_row(j->x + i * d, d, j->ranges, j->c == TQ_QUANT_INT8_RANGES,
                           j->out + (size_t)i * j->row_bytes);
#if defined(__x86_64__)
        } else if (j->simd && j->c == TQ_QUANT_Q8_0) {
            tq_quant_q8_0_avx2(x, (int64_t)n, q);
        } else if (j->simd && j->c == TQ_QUANT_Q4_0) {
            tq_quant_q4_0_avx2(x, (int64_t)n, q);
        } else if (j->simd && j->c == TQ_QUANT_BIT) {
            for (int64_t i = begin; i < end; i++)
                tq_quant_bits_row_avx2(j->x + i * d, d, j->out + (size_t)i * j->row_bytes);
#endif
        } else if (n) {
            st = tq_convert(dt, q, TQ_DTYPE_F32, x, n, d);
        }
    } else {
        float *y = j->y + begin * d;
        const unsigned char *q = j->in + (size_t)begin * j->row_bytes;
        if (j->c == TQ_QUANT_INT8) {
            for (int64_t i = begin; i < end; i++) {
                const int8_t *r = (const int8_t *)(j->in + (size_t)i * j->row_bytes);
                float s = j->cscales[i];
#if defined(__x86_64__)
                if (j->simd) {
                    tq_quant_int8_back_avx2(r, d, s, j->y + i * d);
                    continue;
                }
#endif
                for (int64_t k = 0; k < d; k++)
                    j->y[i * d + k] = (float)r[k] * s;
            }
        } else if (j->c == TQ_QUANT_UINT8_RANGES || j->c == TQ_QUANT_INT8_RANGES) {
            /* as sentence-transformers undoes it: in f64, then to f32 */
            for (int64_t i = begin; i < end; i++) {
                const unsigned char *r = j->in + (size_t)i * j->row_bytes;
                for (int64_t k = 0; k < d; k++) {
                    double v = j->c == TQ_QUANT_INT8_RANGES ? (double)(int8_t)r[k] + 128.0
                                                            : (double)r[k];
                    j->y[i * d + k] = (float)(v * (double)range_step(j->ranges, d, k) +
                                              (double)j->ranges[k]);
                }
            }
        } else if (j->c == TQ_QUANT_BIT) {
            /* +1 and -1 by byte, from a table: tq_convert's bit loop is slow */
            for (int64_t i = begin; i < end; i++) {
                const unsigned char *r = j->in + (size_t)i * j->row_bytes;
                float *yr = j->y + i * d;
                int64_t k = 0;
                for (; k + 8 <= d; k += 8)
                    memcpy(yr + k, sign_table[r[k >> 3]], sizeof sign_table[0]);
                for (; k < d; k++)
                    yr[k] = (r[k >> 3] >> (7 - (k & 7))) & 1 ? 1.0f : -1.0f;
            }
        } else if (n) {
            st = tq_convert(TQ_DTYPE_F32, y, dt, q, n, d);
        }
    }
    if (st)
        __atomic_store_n(&j->st, st, __ATOMIC_RELAXED);
}

static size_t row_bytes(tq_quant_code c, int64_t d)
{
    uint64_t b = 0;
    int64_t dims[2] = {1, d};
    tq_dtype_payload_bytes(tq_quant_code_dtype(c), 2, dims, &b);
    return (size_t)b;
}

static tq_status run(job *j, int64_t n)
{
    if (j->c >= TQ_QUANT_COUNT || j->c == TQ_QUANT_F32)
        return tq_fail(TQ_ERR_USAGE, "no such code");
    if ((j->c == TQ_QUANT_Q8_0 || j->c == TQ_QUANT_Q4_0 || j->c == TQ_QUANT_Q2) && j->d % TQ_QK)
        return tq_fail(TQ_ERR_DATA, "%s needs rows of a multiple of %d values, not %lld",
                       tq_quant_code_name(j->c), TQ_QK, (long long)j->d);
    j->row_bytes = row_bytes(j->c, j->d);
    j->simd = tq_quant_have_avx2();
    pthread_once(&sign_once, sign_init);
    /* chunks of at least 64 KiB of input: below that a thread costs more */
    int64_t min_chunk = j->d ? 16384 / j->d + 1 : n + 1;
    tq_parallel_for(n, min_chunk, run_rows, j);
    /* only tq_convert fails, on shapes checked above: its message stayed on
     * the worker's thread */
    if (j->st)
        return tq_fail(j->st, "cannot convert rows of %lld values to %s", (long long)j->d,
                       tq_quant_code_name(j->c));
    return TQ_OK;
}

tq_status tq_quant_rows(tq_quant_code c, const float *x, int64_t n, int64_t d,
                        const float *ranges, void *codes_out, float *scales)
{
    job j = {.c = c, .x = x, .out = codes_out, .d = d, .ranges = ranges, .scales = scales};
    return run(&j, n);
}

tq_status tq_quant_dequant(tq_quant_code c, const void *codes_in, int64_t n, int64_t d,
                           const float *ranges, const float *scales, float *y)
{
    job j = {.c = c, .inverse = 1, .y = y, .in = codes_in, .d = d, .ranges = ranges,
             .cscales = scales};
    return run(&j, n);
}
