/* simscore.c: the exact pair scores of simscore.h, in portable C and with
 * AVX2 or AVX-512 where the CPU has them. Every version does the same
 * operations in the same order on each lane (a product of two floats is
 * exact in double, so a fused multiply-add rounds as the separate add
 * does), so all give the same bits; the tests hold them to that. */
#include "internal.h"
#include "simscore.h"

#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SIMSCORE_X86 1
#endif

static inline double lanes_sum(const double *s)
{
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

double tq_simscore_dot_portable(const float *a, const float *b, int64_t d)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += (double)a[i + j] * (double)b[i + j];
    for (; i < d; i++)
        s[0] += (double)a[i] * (double)b[i];
    return lanes_sum(s);
}

double tq_simscore_l2_portable(const float *a, const float *b, int64_t d)
{
    double s[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= d; i += 8)
        for (int j = 0; j < 8; j++) {
            double t = (double)a[i + j] - (double)b[i + j];
            s[j] += t * t;
        }
    for (; i < d; i++) {
        double t = (double)a[i] - (double)b[i];
        s[0] += t * t;
    }
    return lanes_sum(s);
}

#ifdef SIMSCORE_X86
__attribute__((target("avx512f"))) static double dot_avx512(const float *a, const float *b,
                                                             int64_t d)
{
    __m512d acc = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(a + i));
        __m512d y = _mm512_cvtps_pd(_mm256_loadu_ps(b + i));
        acc = _mm512_add_pd(acc, _mm512_mul_pd(x, y));
    }
    double s[8];
    _mm512_storeu_pd(s, acc);
    for (; i < d; i++)
        s[0] += (double)a[i] * (double)b[i];
    return lanes_sum(s);
}

__attribute__((target("avx512f"))) static double l2_avx512(const float *a, const float *b,
                                                            int64_t d)
{
    __m512d acc = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m512d t = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(a + i)),
                                  _mm512_cvtps_pd(_mm256_loadu_ps(b + i)));
        acc = _mm512_add_pd(acc, _mm512_mul_pd(t, t));
    }
    double s[8];
    _mm512_storeu_pd(s, acc);
    for (; i < d; i++) {
        double t = (double)a[i] - (double)b[i];
        s[0] += t * t;
    }
    return lanes_sum(s);
}

__attribute__((target("avx2"))) static double dot_avx2(const float *a, const float *b, int64_t d)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        lo = _mm256_add_pd(lo, _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + i)),
                                             _mm256_cvtps_pd(_mm_loadu_ps(b + i))));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + i + 4)),
                                             _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4))));
    }
    double s[8];
    _mm256_storeu_pd(s, lo);
    _mm256_storeu_pd(s + 4, hi);
    for (; i < d; i++)
        s[0] += (double)a[i] * (double)b[i];
    return lanes_sum(s);
}

__attribute__((target("avx2"))) static double l2_avx2(const float *a, const float *b, int64_t d)
{
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256d t = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + i)),
                                  _mm256_cvtps_pd(_mm_loadu_ps(b + i)));
        __m256d u = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(a + i + 4)),
                                  _mm256_cvtps_pd(_mm_loadu_ps(b + i + 4)));
        lo = _mm256_add_pd(lo, _mm256_mul_pd(t, t));
        hi = _mm256_add_pd(hi, _mm256_mul_pd(u, u));
    }
    double s[8];
    _mm256_storeu_pd(s, lo);
    _mm256_storeu_pd(s + 4, hi);
    for (; i < d; i++) {
        double t = (double)a[i] - (double)b[i];
        s[0] += t * t;
    }
    return lanes_sum(s);
}
#endif

typedef double (*score_fn)(const float *, const float *, int64_t);
static score_fn dot_fn = tq_simscore_dot_portable, l2_fn = tq_simscore_l2_portable;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void pick(void)
{
#ifdef SIMSCORE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        dot_fn = dot_avx512, l2_fn = l2_avx512;
    else if (__builtin_cpu_supports("avx2"))
        dot_fn = dot_avx2, l2_fn = l2_avx2;
#endif
}

double tq_simscore_dot(const float *a, const float *b, int64_t d)
{
    pthread_once(&once, pick);
    return dot_fn(a, b, d);
}

double tq_simscore_l2(const float *a, const float *b, int64_t d)
{
    pthread_once(&once, pick);
    return l2_fn(a, b, d);
}

/* f32 of dot * a * b, rounded once: a * b is exact in double (24-bit
 * significands); the product with dot is rounded to odd (its exact error from
 * fma), so that the final rounding to f32 is the only one that counts. */
float tq_codescore_i8(int32_t dot, float a, float b)
{
    double p = (double)a * (double)b, r = (double)dot * p;
    double e = fma((double)dot, p, -r);
    if (e != 0 && isfinite(r)) {
        uint64_t u;
        memcpy(&u, &r, 8);
        if (!(u & 1))
            r = nextafter(r, e > 0 ? INFINITY : -INFINITY);
    }
    return (float)r;
}

/* ggml's reference dot product of a row of q8_0 or q4_0 blocks x with a
 * row of q8_0 blocks q (ggml_vec_dot_q8_0_q8_0 / _q4_0_q8_0, generic C):
 * each block's integer sum, then in f32 sumf += sumi * (dx * dq) for q8_0,
 * sumf += sumi * dx * dq for q4_0, one rounding an operation. */
static float blocks_score(tq_dtype xt, const unsigned char *x, const unsigned char *q, int64_t d)
{
    size_t xb = xt == TQ_DTYPE_Q4_0 ? 18 : 34;
    float sumf = 0;
    for (int64_t b = 0; b < d / TQ_QK; b++, x += xb, q += 34) {
        uint16_t hx, hq;
        memcpy(&hx, x, 2), memcpy(&hq, q, 2);
        float dx = tq_f16_to_f32(hx), dq = tq_f16_to_f32(hq);
        int sumi = 0;
        if (xt == TQ_DTYPE_Q4_0) {
            for (int j = 0; j < TQ_QK / 2; j++)
                sumi += ((x[2 + j] & 15) - 8) * (int8_t)q[2 + j] +
                        ((x[2 + j] >> 4) - 8) * (int8_t)q[2 + j + TQ_QK / 2];
            sumf += (float)sumi * dx * dq;
        } else {
            for (int j = 0; j < TQ_QK; j++)
                sumi += (int8_t)x[2 + j] * (int8_t)q[2 + j];
            sumf += (float)sumi * (dx * dq);
        }
    }
    return sumf;
}

float tq_codescore(tq_dtype dt, const unsigned char *a, const unsigned char *b, int64_t d, float sa,
                   float sb)
{
    if (dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0)
        return blocks_score(dt, a, b, d);
    int64_t s = 0;
    if (dt == TQ_DTYPE_I8)
        for (int64_t p = 0; p < d; p++)
            s += (int64_t)(int8_t)a[p] * (int8_t)b[p];
    else
        for (int64_t p = 0; p < (d + 7) / 8; p++)
            s += __builtin_popcount((unsigned)(a[p] ^ b[p]));
    return dt == TQ_DTYPE_I8 ? tq_codescore_i8((int32_t)s, sa, sb) : (float)-s; /* 0, not -0 */
}
