/* convert.cu: dtype conversions among f32, f16, bf16, i8, u8, i16 and i32,
 * every pair, one element a thread (grid-stride), by the rules of lib/stream/dtype.c
 * that kernels/vulkan/convert.comp also follows: float to float rounds to
 * nearest even with NaN kept quiet (compat.h's bit encoders); float to integer
 * rounds to nearest even, saturates, and takes NaN to 0; integer to integer
 * saturates; integer to float is exact or rounded once to nearest even; the
 * same dtype is copied bit for bit (NaN payloads included). Unlike the shader,
 * which writes whole 32-bit words, each thread stores its own element: byte
 * and 16-bit stores leave their neighbours alone on every GPU. */
#include "compat.h"
#include "common.cuh"

/* tq_dtype codes (lib/tq.h) */
#define TQ_F32 1
#define TQ_F16 3
#define TQ_BF16 4
#define TQ_I8 5
#define TQ_U8 6
#define TQ_I16 7
#define TQ_I32 8

static __device__ __forceinline__ int tq_is_int(int dt) { return dt >= TQ_I8 && dt <= TQ_I32; }

/* Element i of an integer array, widened. */
static __device__ __forceinline__ int tq_load_int(const void *x, unsigned long long i, int dt)
{
    switch (dt) {
    case TQ_I8: return ((const signed char *)x)[i];
    case TQ_U8: return ((const unsigned char *)x)[i];
    case TQ_I16: return ((const short *)x)[i];
    default: return ((const int *)x)[i];
    }
}

/* Element i of a float array (f32, f16, bf16) as f32: exact. */
static __device__ __forceinline__ float tq_load_float(const void *x, unsigned long long i, int dt)
{
    switch (dt) {
    case TQ_F16: return tq_f16_f32(((const unsigned short *)x)[i]);
    case TQ_BF16: return tq_bf16_f32(((const unsigned short *)x)[i]);
    default: return ((const float *)x)[i];
    }
}

/* An i32 as f32 rounded to odd: an inexact result gets its last bit set, so
 * that the second rounding, to f16 or bf16 (at least two bits shorter), is
 * that of the exact value and not a tie decided by the first one (lib/stream/dtype.c,
 * f32_odd_from_f64). |v| <= 2^31: the conversion back is exact. */
static __device__ __forceinline__ float tq_odd_from_int(int v)
{
    float f = (float)v; /* round to nearest even */
    long long back = (long long)f;
    unsigned u = __float_as_uint(f);
    if (back == (long long)v || (u & 1u))
        return f;
    /* one step towards v: up in magnitude when v is further from 0 than f */
    int away = (v > back) == (f > 0.0f);
    return __uint_as_float(away ? u + 1u : u - 1u);
}

static __device__ __forceinline__ void tq_store_int(void *y, unsigned long long i, int dt, int v)
{
    switch (dt) {
    case TQ_I8: ((signed char *)y)[i] = (signed char)v; break;
    case TQ_U8: ((unsigned char *)y)[i] = (unsigned char)v; break;
    case TQ_I16: ((short *)y)[i] = (short)v; break;
    default: ((int *)y)[i] = v;
    }
}

/* The range of an integer dtype: [lo, hi], and hi + 1 as a float (exact). */
static __device__ __forceinline__ void tq_int_range(int dt, int *lo, int *hi, float *lo_f, float *hi_excl)
{
    switch (dt) {
    case TQ_I8: *lo = -128; *hi = 127; *lo_f = -128.0f; *hi_excl = 128.0f; break;
    case TQ_U8: *lo = 0; *hi = 255; *lo_f = 0.0f; *hi_excl = 256.0f; break;
    case TQ_I16: *lo = -32768; *hi = 32767; *lo_f = -32768.0f; *hi_excl = 32768.0f; break;
    default: *lo = (int)0x80000000u; *hi = 0x7fffffff; *lo_f = -2147483648.0f; *hi_excl = 2147483648.0f;
    }
}

/* f to an integer dtype: NaN -> 0, round to nearest even, then saturate (the
 * bounds are exact floats, so the comparisons are exact) */
static __device__ __forceinline__ int tq_float_to_int(float f, int dt)
{
    int lo, hi;
    float lo_f, hi_excl;
    tq_int_range(dt, &lo, &hi, &lo_f, &hi_excl);
    if (f != f)
        return 0;
    float r = rintf(f);
    return r < lo_f ? lo : r >= hi_excl ? hi : (int)r;
}

static __device__ __forceinline__ void tq_store_float(void *y, unsigned long long i, int dt, float f)
{
    switch (dt) {
    case TQ_F16: ((unsigned short *)y)[i] = tq_f32_f16(f); break;
    case TQ_BF16: ((unsigned short *)y)[i] = tq_f32_bf16(f); break;
    default: ((float *)y)[i] = f;
    }
}

static __device__ __forceinline__ unsigned tq_dtype_bytes(int dt)
{
    return dt == TQ_F32 || dt == TQ_I32 ? 4u : dt == TQ_F16 || dt == TQ_BF16 || dt == TQ_I16 ? 2u : 1u;
}

extern "C" __global__ void tq_k_convert(const void *x, void *y, unsigned long long n, int from, int to)
{
    if (from == to) { /* bits as they are */
        unsigned sz = tq_dtype_bytes(from);
        TQ_GRID_STRIDE(i, n) {
            if (sz == 4)
                ((unsigned *)y)[i] = ((const unsigned *)x)[i];
            else if (sz == 2)
                ((unsigned short *)y)[i] = ((const unsigned short *)x)[i];
            else
                ((unsigned char *)y)[i] = ((const unsigned char *)x)[i];
        }
        return;
    }
    TQ_GRID_STRIDE(i, n) {
        if (tq_is_int(from)) {
            int v = tq_load_int(x, i, from);
            if (tq_is_int(to)) {
                int lo, hi;
                float lo_f, hi_excl;
                tq_int_range(to, &lo, &hi, &lo_f, &hi_excl);
                tq_store_int(y, i, to, v < lo ? lo : v > hi ? hi : v);
            } else if (to == TQ_F32) {
                tq_store_float(y, i, to, (float)v); /* exact, or i32 rounded once */
            } else {
                /* f16/bf16: exact in f32 below 2^24 (i8, u8, i16 always);
                 * beyond, rounded to odd so that the encoder rounds once */
                tq_store_float(y, i, to, tq_odd_from_int(v));
            }
        } else {
            float f = tq_load_float(x, i, from);
            if (tq_is_int(to))
                tq_store_int(y, i, to, tq_float_to_int(f, to));
            else
                tq_store_float(y, i, to, f);
        }
    }
}
