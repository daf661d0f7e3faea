/* quantize_rows.c: tq_op_quantize_rows on the CPU: each row (times the
 * column scales) to int8 codes and one scale, as tq-quantize's int8 does
 * (scale = max |y| / 127, code = y / scale rounded to nearest even), for the
 * int8 products that follow. Rows are independent: the bits do not depend on
 * the threads. */
#include "../internal.h"
#include "cpu.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define TQ_QR_X86 1
#endif

typedef struct qr {
    const float *x, *cs; /* cs NULL: no column scales */
    int8_t *q;
    float *scale;
    int64_t k;
    int simd;
} qr;

static float col(const qr *p, const float *x, int64_t j) { return p->cs ? x[j] * p->cs[j] : x[j]; }

/* The codes of y / s, s > 0 finite: |y / s| <= 127 up to rounding. */
static void codes_c(const qr *p, const float *x, int8_t *q, float s)
{
    for (int64_t j = 0; j < p->k; j++) {
        float v = nearbyintf(col(p, x, j) / s);
        q[j] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
    }
}

#ifdef TQ_QR_X86
#define TQ_TARGET_512 __attribute__((target("avx512f")))
/* 16 columns of y, the last few masked in (as zeros). */
TQ_TARGET_512 static inline __m512 col16(const qr *p, const float *x, int64_t j, __mmask16 m)
{
    __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    return p->cs ? _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, p->cs + j)) : v;
}

TQ_TARGET_512 static float amax_512(const qr *p, const float *x, int *finite)
{
    __m512 mx = _mm512_setzero_ps();
    __mmask16 bad = 0;
    for (int64_t j = 0; j < p->k; j += 16) {
        __mmask16 m = p->k - j >= 16 ? 0xffff : (__mmask16)((1u << (p->k - j)) - 1);
        __m512 a = _mm512_abs_ps(col16(p, x, j, m));
        /* NaN and infinity fail a <= FLT_MAX */
        bad |= _mm512_mask_cmp_ps_mask(m, a, _mm512_set1_ps(3.40282347e38f), _CMP_NLE_UQ);
        mx = _mm512_max_ps(mx, a);
    }
    *finite = bad == 0;
    return _mm512_reduce_max_ps(mx);
}

TQ_TARGET_512 static void codes_512(const qr *p, const float *x, int8_t *q, float s)
{
    __m512 vs = _mm512_set1_ps(s), hi = _mm512_set1_ps(127.0f), lo = _mm512_set1_ps(-127.0f);
    for (int64_t j = 0; j < p->k; j += 16) {
        __mmask16 m = p->k - j >= 16 ? 0xffff : (__mmask16)((1u << (p->k - j)) - 1);
        __m512 r = _mm512_roundscale_ps(_mm512_div_ps(col16(p, x, j, m), vs),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
        _mm512_mask_cvtsepi32_storeu_epi8(q + j, m, _mm512_cvtps_epi32(r));
    }
}
#endif

static float amax_c(const qr *p, const float *x, int *finite)
{
    float mx = 0.0f;
    *finite = 1;
    for (int64_t j = 0; j < p->k; j++) {
        float a = fabsf(col(p, x, j));
        if (!(a <= 3.40282347e38f))
            *finite = 0;
        else if (a > mx)
            mx = a;
    }
    return mx;
}

static void qr_rows(void *ctx, int64_t begin, int64_t end)
{
    const qr *p = ctx;
    for (int64_t i = begin; i < end; i++) {
        const float *x = p->x + i * p->k;
        int8_t *q = p->q + i * p->k;
        int finite;
        float mx;
#ifdef TQ_QR_X86
        if (p->simd)
            mx = amax_512(p, x, &finite);
        else
#endif
            mx = amax_c(p, x, &finite);
        float s = mx / 127.0f;
        if (!finite || s == 0.0f) { /* NaN carries on into the products */
            memset(q, 0, (size_t)p->k);
            p->scale[i] = finite ? 0.0f : NAN;
            continue;
        }
        p->scale[i] = s;
#ifdef TQ_QR_X86
        if (p->simd)
            codes_512(p, x, q, s);
        else
#endif
            codes_c(p, x, q, s);
    }
}

static int force_portable;
void tq_cpu_quantize_rows_force_portable(int on)
{
    __atomic_store_n(&force_portable, on, __ATOMIC_RELAXED);
}

tq_status tq_cpu_quantize_rows(void *ctx, const tq_tensor *x, const tq_tensor *colscale,
                               tq_tensor *q, tq_tensor *scale)
{
    (void)ctx;
    qr p = {tq_cpu_ptr(x), colscale ? tq_cpu_ptr(colscale) : NULL, tq_cpu_ptr(q),
            tq_cpu_ptr(scale), x->dims[x->rank - 1], 0};
    if (p.k == 0) {
        int64_t n = tq_tensor_numel(scale);
        for (int64_t i = 0; i < n; i++)
            p.scale[i] = 0.0f;
        return TQ_OK;
    }
#ifdef TQ_QR_X86
    __builtin_cpu_init();
    p.simd = __builtin_cpu_supports("avx512f") &&
             !__atomic_load_n(&force_portable, __ATOMIC_RELAXED);
#endif
    tq_parallel_for(tq_tensor_numel(x) / p.k, 1 + 32768 / p.k, qr_rows, &p);
    return TQ_OK;
}
