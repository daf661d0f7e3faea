/* dtype.c: the dtypes of the stream format, their sizes, and conversions between
 * them (f16/bf16 round to nearest even; ggml's q8_0/q4_0 blocks; q2; sign bits). */
#include "tq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[TQ_DTYPE_COUNT] = {
    [TQ_DTYPE_F32] = {"f32", 4},  [TQ_DTYPE_F64] = {"f64", 8},
    [TQ_DTYPE_F16] = {"f16", 2},  [TQ_DTYPE_BF16] = {"bf16", 2},
    [TQ_DTYPE_I8] = {"i8", 1},    [TQ_DTYPE_U8] = {"u8", 1},
    [TQ_DTYPE_I16] = {"i16", 2},  [TQ_DTYPE_I32] = {"i32", 4},
    [TQ_DTYPE_I64] = {"i64", 8},  [TQ_DTYPE_STR] = {"str", 0},
    [TQ_DTYPE_Q8_0] = {"q8_0", 0}, [TQ_DTYPE_Q4_0] = {"q4_0", 0},
    [TQ_DTYPE_BIT] = {"bit", 0},  [TQ_DTYPE_Q2] = {"q2", 0},
};

const char *tq_dtype_name(tq_dtype dt)
{
    return dt > TQ_DTYPE_INVALID && dt < TQ_DTYPE_COUNT ? dtypes[dt].name : NULL;
}

tq_dtype tq_dtype_from_name(const char *name)
{
    for (int i = 1; i < TQ_DTYPE_COUNT; i++)
        if (name && strcmp(name, dtypes[i].name) == 0)
            return (tq_dtype)i;
    return TQ_DTYPE_INVALID;
}

size_t tq_dtype_size(tq_dtype dt)
{
    return dt > TQ_DTYPE_INVALID && dt < TQ_DTYPE_COUNT ? dtypes[dt].size : 0;
}

int tq_dtype_is_float(tq_dtype dt)
{
    return dt == TQ_DTYPE_F32 || dt == TQ_DTYPE_F64 || dt == TQ_DTYPE_F16 ||
           dt == TQ_DTYPE_BF16;
}

int tq_dtype_is_int(tq_dtype dt)
{
    return dt >= TQ_DTYPE_I8 && dt <= TQ_DTYPE_I64;
}

tq_status tq_dtype_payload_bytes(tq_dtype dt, int rank, const int64_t *dims,
                                 uint64_t *bytes)
{
    if (dt <= TQ_DTYPE_INVALID || dt >= TQ_DTYPE_COUNT)
        return tq_fail(TQ_ERR_DATA, "unknown dtype %d", (int)dt);
    if (dt == TQ_DTYPE_STR)
        return tq_fail(TQ_ERR_USAGE, "str payloads have no fixed size");
    if (rank < 0 || rank > TQ_MAX_RANK)
        return tq_fail(TQ_ERR_DATA, "rank %d is over the limit of %d", rank, TQ_MAX_RANK);
    /* Elements first, each empty dim counted as 1, so that no product of dims
     * a reader computes can overflow, even in a frame without rows. */
    const uint64_t max_elems = TQ_MAX_FRAME_BYTES * 8; /* as many as bit can hold */
    uint64_t elems = 1, outer = 1, last = rank ? 0 : 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return tq_fail(TQ_ERR_DATA, "dim %d is negative (%lld)", i, (long long)dims[i]);
        uint64_t d = dims[i] ? (uint64_t)dims[i] : 1;
        if (d > max_elems / elems)
            return tq_fail(TQ_ERR_DATA, "shape has more than 2^39 elements, the frame limit");
        elems *= d;
        if (i + 1 < rank)
            outer *= (uint64_t)dims[i];
        else
            last = (uint64_t)dims[i];
    }
    uint64_t row; /* bytes of one row along the last dim: no overflow below 2^42 */
    switch (dt) {
    case TQ_DTYPE_Q8_0:
    case TQ_DTYPE_Q4_0:
    case TQ_DTYPE_Q2:
        if (rank == 0 || last % TQ_QK)
            return tq_fail(TQ_ERR_DATA, "%s needs a last dim that is a multiple of %d",
                           tq_dtype_name(dt), TQ_QK);
        row = last / TQ_QK * (dt == TQ_DTYPE_Q8_0 ? 34u : dt == TQ_DTYPE_Q4_0 ? 18u : 12u);
        break;
    case TQ_DTYPE_BIT:
        if (rank == 0)
            return tq_fail(TQ_ERR_DATA, "bit needs rank 1 or more");
        row = (last + 7) / 8;
        break;
    default:
        row = last * dtypes[dt].size;
    }
    *bytes = outer * row;
    if (*bytes > TQ_MAX_FRAME_BYTES)
        return tq_fail(TQ_ERR_DATA, "shape needs %llu bytes, over the frame limit of %llu",
                       (unsigned long long)*bytes, (unsigned long long)TQ_MAX_FRAME_BYTES);
    return TQ_OK;
}

/* ------------------------------------------------------------ scalar f16/bf16 */

static uint32_t f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

uint16_t tq_f32_to_f16(float x)
{
    uint32_t u = f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: keep it quiet, keep top mantissa bits */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal half or zero */
        /* Adding 0.5 makes the FPU round the mantissa to nearest even at the
         * half-subnormal position, then the low bits are the result. */
        float f = bits_f32(a) + 0.5f;
        return (uint16_t)(sign | (f32_bits(f) - 0x3f000000u));
    }
    uint32_t odd = (a >> 13) & 1u;
    a += 0xc8000fffu + odd; /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(sign | (a >> 13));
}

float tq_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float f = (float)m * 0x1p-24f; /* exact: subnormal or zero */
        return bits_f32(f32_bits(f) | sign);
    }
    if (e == 31) /* infinity, or NaN made quiet as F16C makes it */
        return bits_f32(sign | 0x7f800000u | (m ? 0x400000u : 0) | (m << 13));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t tq_f32_to_bf16(float x)
{
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tq_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    return bits_f32((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u); /* NaN: quiet */
}

/* ------------------------------------------------------------ bulk f16/bf16 */

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("avx2,f16c"))) static void f32_to_f16_f16c(uint16_t *d,
                                                                 const float *s,
                                                                 size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        d[i] = tq_f32_to_f16(s[i]);
}

__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(float *d,
                                                                 const uint16_t *s,
                                                                 size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++)
        d[i] = tq_f16_to_f32(s[i]);
}

__attribute__((target("avx2"))) static void f32_to_bf16_avx2(uint16_t *d,
                                                             const float *s,
                                                             size_t n)
{
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i absm = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x400000);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int h = 0; h < 2; h++) {
            __m256i u = _mm256_loadu_si256((const __m256i *)(s + i + 8 * h));
            __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
            __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
            __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(bias, odd));
            __m256i q = _mm256_or_si256(u, quiet);
            r[h] = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, q, nan), 16);
        }
        /* packus works within 128-bit lanes: fix the order with a permute */
        __m256i p = _mm256_packus_epi32(r[0], r[1]);
        p = _mm256_permute4x64_epi64(p, 0xd8);
        _mm256_storeu_si256((__m256i *)(d + i), p);
    }
    for (; i < n; i++)
        d[i] = tq_f32_to_bf16(s[i]);
}

static int have_f16c(void)
{
    /* cpuid, not __builtin_cpu_supports("f16c"), which clang does not know;
     * once per array, so not worth caching */
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && __builtin_cpu_supports("avx2");
}
static int have_avx2(void) { return __builtin_cpu_supports("avx2"); }
#endif

static void f32_to_f16(uint16_t *d, const float *s, size_t n)
{
#if defined(__x86_64__)
    if (have_f16c()) {
        f32_to_f16_f16c(d, s, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        d[i] = tq_f32_to_f16(s[i]);
}

static void f16_to_f32(float *d, const uint16_t *s, size_t n)
{
#if defined(__x86_64__)
    if (have_f16c()) {
        f16_to_f32_f16c(d, s, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        d[i] = tq_f16_to_f32(s[i]);
}

static void f32_to_bf16(uint16_t *d, const float *s, size_t n)
{
#if defined(__x86_64__)
    if (have_avx2()) {
        f32_to_bf16_avx2(d, s, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        d[i] = tq_f32_to_bf16(s[i]);
}

static void bf16_to_f32(float *d, const uint16_t *s, size_t n)
{
    /* a shift (and NaN made quiet): compilers vectorize this loop as it stands */
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)s[i] << 16;
        d[i] = bits_f32((u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u : u);
    }
}

/* ------------------------------------------------------------ generic paths */

/* To f16 and bf16 by way of f32, the first rounding must not decide a tie for
 * the second (1 + 2^-11 + 2^-40 would round to f32 1 + 2^-11, then to even
 * f16 1, not up): rounding to odd in f32 keeps the sticky bit, and f32 has more
 * than two bits to spare over f16 and bf16, so the second rounding is right. */
static float odd_f32(float f, int inexact, int up)
{
    uint32_t u = f32_bits(f);
    if (!inexact || (u & 1u) || (u & 0x7fffffffu) >= 0x7f800000u)
        return f;
    return nextafterf(f, up ? INFINITY : -INFINITY);
}

static float f32_odd_from_f64(double v)
{
    float f = (float)v;
    return isnan(v) ? f : odd_f32(f, (double)f != v, v > (double)f);
}

static float f32_odd_from_i64(int64_t v)
{
    float f = (float)v;
    if (f >= 0x1p63f) /* only INT64_MAX and its neighbours get here: inexact */
        return odd_f32(f, 1, 0);
    int64_t back = (int64_t)f;
    return odd_f32(f, back != v, v > back);
}

static double load_f(tq_dtype dt, const void *src, size_t i)
{
    const unsigned char *p = src;
    switch (dt) {
    case TQ_DTYPE_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case TQ_DTYPE_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case TQ_DTYPE_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return tq_f16_to_f32(v); }
    case TQ_DTYPE_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return tq_bf16_to_f32(v); }
    case TQ_DTYPE_I8: return ((const int8_t *)src)[i];
    case TQ_DTYPE_U8: return p[i];
    case TQ_DTYPE_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case TQ_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case TQ_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    default: return 0;
    }
}

static int64_t load_i(tq_dtype dt, const void *src, size_t i)
{
    const unsigned char *p = src;
    switch (dt) {
    case TQ_DTYPE_I8: return ((const int8_t *)src)[i];
    case TQ_DTYPE_U8: return p[i];
    case TQ_DTYPE_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case TQ_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case TQ_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return 0;
    }
}

static void int_range(tq_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case TQ_DTYPE_I8: *lo = INT8_MIN; *hi = INT8_MAX; break;
    case TQ_DTYPE_U8: *lo = 0; *hi = UINT8_MAX; break;
    case TQ_DTYPE_I16: *lo = INT16_MIN; *hi = INT16_MAX; break;
    case TQ_DTYPE_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX;
    }
}

static void store_i(tq_dtype dt, void *dst, size_t i, int64_t v)
{
    unsigned char *p = dst;
    switch (dt) {
    case TQ_DTYPE_I8: ((int8_t *)dst)[i] = (int8_t)v; break;
    case TQ_DTYPE_U8: p[i] = (uint8_t)v; break;
    case TQ_DTYPE_I16: { int16_t w = (int16_t)v; memcpy(p + 2 * i, &w, 2); break; }
    case TQ_DTYPE_I32: { int32_t w = (int32_t)v; memcpy(p + 4 * i, &w, 4); break; }
    case TQ_DTYPE_I64: memcpy(p + 8 * i, &v, 8); break;
    default: break;
    }
}

static void store_f(tq_dtype dt, void *dst, size_t i, double v)
{
    unsigned char *p = dst;
    switch (dt) {
    case TQ_DTYPE_F32: { float w = (float)v; memcpy(p + 4 * i, &w, 4); return; }
    case TQ_DTYPE_F64: memcpy(p + 8 * i, &v, 8); return;
    case TQ_DTYPE_F16: { uint16_t w = tq_f32_to_f16(f32_odd_from_f64(v)); memcpy(p + 2 * i, &w, 2); return; }
    case TQ_DTYPE_BF16: { uint16_t w = tq_f32_to_bf16(f32_odd_from_f64(v)); memcpy(p + 2 * i, &w, 2); return; }
    default: break;
    }
    /* to an integer type: round to nearest even, saturate, NaN -> 0 */
    int64_t lo, hi;
    int_range(dt, &lo, &hi);
    int64_t w;
    if (isnan(v))
        w = 0;
    else if (v <= (double)lo)
        w = lo;
    else if (v >= (double)hi)
        w = hi;
    else
        w = (int64_t)nearbyint(v);
    store_i(dt, dst, i, w);
}

/* ------------------------------------------------------------ block codes */

/* ggml's reference quantizers (quantize_row_q8_0_ref / q4_0_ref), so blocks match
 * what llama.cpp writes for the same floats. */
static void quant_q8_0(unsigned char *dst, const float *x, size_t n)
{
    for (size_t b = 0; b < n / TQ_QK; b++, x += TQ_QK, dst += 34) {
        float amax = 0;
        for (int j = 0; j < TQ_QK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t dh = tq_f32_to_f16(d);
        memcpy(dst, &dh, 2);
        for (int j = 0; j < TQ_QK; j++) {
            /* as ggml for finite input; the clamp only meets inf and NaN (and a
             * d so small that 1/d overflows), where a cast would be undefined */
            float q = roundf(x[j] * id);
            dst[2 + j] = (unsigned char)(int8_t)(q >= 127.0f ? 127 : q <= -127.0f ? -127 : q == q ? (int)q : 0);
        }
    }
}

static void quant_q4_0(unsigned char *dst, const float *x, size_t n)
{
    for (size_t b = 0; b < n / TQ_QK; b++, x += TQ_QK, dst += 18) {
        float amax = 0, max = 0;
        for (int j = 0; j < TQ_QK; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t dh = tq_f32_to_f16(d);
        memcpy(dst, &dh, 2);
        for (int j = 0; j < TQ_QK / 2; j++) {
            float x0 = x[j] * id + 8.5f, x1 = x[TQ_QK / 2 + j] * id + 8.5f;
            /* ggml's MIN(15, (int8_t)x); x < 0 only from inf or a tiny d */
            unsigned q0 = x0 < 15.0f ? (x0 > 0.0f ? (unsigned)x0 : 0u) : 15u;
            unsigned q1 = x1 < 15.0f ? (x1 > 0.0f ? (unsigned)x1 : 0u) : 15u;
            dst[2 + j] = (unsigned char)(q0 | (q1 << 4));
        }
    }
}

static void dequant_q8_0(float *y, const unsigned char *src, size_t n)
{
    for (size_t b = 0; b < n / TQ_QK; b++, src += 34, y += TQ_QK) {
        uint16_t dh;
        memcpy(&dh, src, 2);
        float d = tq_f16_to_f32(dh);
        for (int j = 0; j < TQ_QK; j++)
            y[j] = (float)(int8_t)src[2 + j] * d;
    }
}

static void dequant_q4_0(float *y, const unsigned char *src, size_t n)
{
    for (size_t b = 0; b < n / TQ_QK; b++, src += 18, y += TQ_QK) {
        uint16_t dh;
        memcpy(&dh, src, 2);
        float d = tq_f16_to_f32(dh);
        for (int j = 0; j < TQ_QK / 2; j++) {
            y[j] = (float)((int)(src[2 + j] & 0xf) - 8) * d;
            y[j + TQ_QK / 2] = (float)((int)(src[2 + j] >> 4) - 8) * d;
        }
    }
}

/* q2 (tq-quantize(1)): blocks of 32, m = f16(min), d = f16((max - m) / 3),
 * q = rint((x - m) / d) clipped to 0..3 (0 where d is 0), value j's 2 bits
 * at bit 2 * (j / 8) of byte 4 + j % 8; decoded as (float)q * d + m. Each
 * step one f32 operation in C's order (no contraction under -std=c11). */
static void quant_q2(unsigned char *dst, const float *x, size_t n)
{
    for (size_t b = 0; b < n / TQ_QK; b++, x += TQ_QK, dst += 12) {
        float mn = x[0], mx = x[0];
        for (int j = 1; j < TQ_QK; j++) {
            mn = x[j] < mn ? x[j] : mn;
            mx = x[j] > mx ? x[j] : mx;
        }
        uint16_t mh = tq_f32_to_f16(mn);
        float m = tq_f16_to_f32(mh);
        uint16_t dh = tq_f32_to_f16((mx - m) / 3.0f);
        float d = tq_f16_to_f32(dh);
        memcpy(dst, &dh, 2);
        memcpy(dst + 2, &mh, 2);
        memset(dst + 4, 0, 8);
        for (int j = 0; j < TQ_QK; j++) {
            float q = d > 0.0f ? nearbyintf((x[j] - m) / d) : 0.0f;
            unsigned v = q >= 3.0f ? 3u : q > 0.0f ? (unsigned)q : 0u; /* NaN: 0 */
            dst[4 + (j & 7)] |= (unsigned char)(v << (2 * (j >> 3)));
        }
    }
}

static void dequant_q2(float *y, const unsigned char *src, size_t n)
{
    for (size_t b = 0; b < n / TQ_QK; b++, src += 12, y += TQ_QK) {
        uint16_t dh, mh;
        memcpy(&dh, src, 2);
        memcpy(&mh, src + 2, 2);
        float d = tq_f16_to_f32(dh), m = tq_f16_to_f32(mh);
        for (int j = 0; j < TQ_QK; j++)
            y[j] = (float)((src[4 + (j & 7)] >> (2 * (j >> 3))) & 3) * d + m;
    }
}

/* Sign bits: 1 where x > 0, element 0 of a row in the top bit of its first byte
 * (numpy.packbits order), rows padded with zero bits to whole bytes. */
static void pack_bits(unsigned char *dst, const float *x, size_t n, int64_t row)
{
    size_t rb = ((size_t)row + 7) / 8;
    for (size_t r = 0; r < n / (size_t)row; r++, x += row, dst += rb) {
        memset(dst, 0, rb);
        for (int64_t j = 0; j < row; j++)
            if (x[j] > 0)
                dst[j >> 3] |= (unsigned char)(0x80u >> (j & 7));
    }
}

static void unpack_bits(float *y, const unsigned char *src, size_t n, int64_t row)
{
    size_t rb = ((size_t)row + 7) / 8;
    for (size_t r = 0; r < n / (size_t)row; r++, y += row, src += rb)
        for (int64_t j = 0; j < row; j++)
            y[j] = (src[j >> 3] >> (7 - (j & 7))) & 1 ? 1.0f : -1.0f;
}

static int is_code(tq_dtype dt)
{
    return dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0 || dt == TQ_DTYPE_BIT || dt == TQ_DTYPE_Q2;
}

tq_status tq_convert(tq_dtype to, void *dst, tq_dtype from, const void *src,
                     size_t n, int64_t bit_row)
{
    if (!tq_dtype_name(to) || !tq_dtype_name(from) || to == TQ_DTYPE_STR ||
        from == TQ_DTYPE_STR)
        return tq_fail(TQ_ERR_USAGE, "cannot convert %s to %s",
                       tq_dtype_name(from) ? tq_dtype_name(from) : "?",
                       tq_dtype_name(to) ? tq_dtype_name(to) : "?");
    if ((to == TQ_DTYPE_BIT || from == TQ_DTYPE_BIT) &&
        (bit_row <= 0 || n % (size_t)bit_row))
        return tq_fail(TQ_ERR_USAGE, "bit conversion needs a row length dividing %zu", n);
    if ((to == TQ_DTYPE_Q8_0 || to == TQ_DTYPE_Q4_0 || to == TQ_DTYPE_Q2 ||
         from == TQ_DTYPE_Q8_0 || from == TQ_DTYPE_Q4_0 || from == TQ_DTYPE_Q2) && n % TQ_QK)
        return tq_fail(TQ_ERR_USAGE, "block codes need a multiple of %d elements", TQ_QK);
    if (to == from) {
        uint64_t bytes;
        int64_t dims[2] = {to == TQ_DTYPE_BIT ? (int64_t)n / bit_row : 1,
                           to == TQ_DTYPE_BIT ? bit_row : (int64_t)n};
        tq_status st = tq_dtype_payload_bytes(to, 2, dims, &bytes);
        if (st)
            return st;
        memmove(dst, src, bytes);
        return TQ_OK;
    }
    if (is_code(to) || is_code(from)) {
        /* codes go through f32: decode the source, then encode */
        float *tmp = NULL;
        const float *f = src;
        if (from != TQ_DTYPE_F32) {
            tmp = malloc(n * sizeof *tmp);
            if (!tmp)
                return tq_fail(TQ_ERR_NOMEM, "out of memory converting %zu elements", n);
            if (from == TQ_DTYPE_Q8_0)
                dequant_q8_0(tmp, src, n);
            else if (from == TQ_DTYPE_Q4_0)
                dequant_q4_0(tmp, src, n);
            else if (from == TQ_DTYPE_Q2)
                dequant_q2(tmp, src, n);
            else if (from == TQ_DTYPE_BIT)
                unpack_bits(tmp, src, n, bit_row);
            else
                tq_convert(TQ_DTYPE_F32, tmp, from, src, n, 0);
            f = tmp;
        }
        if (to == TQ_DTYPE_Q8_0)
            quant_q8_0(dst, f, n);
        else if (to == TQ_DTYPE_Q4_0)
            quant_q4_0(dst, f, n);
        else if (to == TQ_DTYPE_Q2)
            quant_q2(dst, f, n);
        else if (to == TQ_DTYPE_BIT)
            pack_bits(dst, f, n, bit_row);
        else if (f != dst)
            tq_convert(to, dst, TQ_DTYPE_F32, f, n, 0);
        free(tmp);
        return TQ_OK;
    }
    if (from == TQ_DTYPE_F32 && to == TQ_DTYPE_F16)
        f32_to_f16(dst, src, n);
    else if (from == TQ_DTYPE_F16 && to == TQ_DTYPE_F32)
        f16_to_f32(dst, src, n);
    else if (from == TQ_DTYPE_F32 && to == TQ_DTYPE_BF16)
        f32_to_bf16(dst, src, n);
    else if (from == TQ_DTYPE_BF16 && to == TQ_DTYPE_F32)
        bf16_to_f32(dst, src, n);
    else if (tq_dtype_is_int(from) && tq_dtype_is_int(to)) {
        int64_t lo, hi;
        int_range(to, &lo, &hi);
        for (size_t i = 0; i < n; i++) {
            int64_t v = load_i(from, src, i);
            store_i(to, dst, i, v < lo ? lo : v > hi ? hi : v);
        }
    } else if (from == TQ_DTYPE_I64) {
        /* not through double: it would round once too often */
        for (size_t i = 0; i < n; i++) {
            int64_t v = load_i(from, src, i);
            unsigned char *p = dst;
            if (to == TQ_DTYPE_F64) {
                double w = (double)v;
                memcpy(p + 8 * i, &w, 8);
            } else if (to == TQ_DTYPE_F32) {
                float w = (float)v;
                memcpy(p + 4 * i, &w, 4);
            } else {
                float f = f32_odd_from_i64(v);
                uint16_t w = to == TQ_DTYPE_F16 ? tq_f32_to_f16(f) : tq_f32_to_bf16(f);
                memcpy(p + 2 * i, &w, 2);
            }
        }
    } else {
        for (size_t i = 0; i < n; i++)
            store_f(to, dst, i, load_f(from, src, i));
    }
    return TQ_OK;
}
