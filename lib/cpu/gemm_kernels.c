/* gemm_kernels.c: the register-blocked micro-kernels of the built-in sgemm,
 * one per instruction set, chosen at run time from what the CPU supports.
 * Each keeps its MR x NR block of C in registers over the whole kc loop; every
 * element of C gets the same sequence of operations wherever it lies in the
 * matrix (edges are masked, not computed differently): one accumulator, kc
 * fused multiply-adds in order, then alpha (and beta C), so the AVX2 and
 * AVX-512 kernels give the same bits. Each first asks for its block of C,
 * which the loop then hides: the stores at the end otherwise wait on memory
 * (8% of the rate with a large output). */
#include "gemm.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "gemm_avx512.h"
#define TQ_GEMM_X86 1
#endif

/* ---- portable C: what any compiler can vectorize for the baseline ISA ---- */
enum { P_MR = 4, P_NR = 16, P_KC = 256 };

static void kern_portable(int kc, const float *a, const float *b, float *c, int ldc,
                          int mr_eff, int nr_eff, float alpha, float beta)
{
    float acc[P_MR][P_NR] = {{0}};
    for (int p = 0; p < kc; p++, a += P_MR, b += P_NR)
        for (int i = 0; i < P_MR; i++)
            for (int j = 0; j < P_NR; j++)
                acc[i][j] += a[i] * b[j];
    for (int i = 0; i < mr_eff; i++)
        for (int j = 0; j < nr_eff; j++) {
            float t = alpha * acc[i][j];
            c[(long)i * ldc + j] = beta == 0.0f ? t : t + beta * c[(long)i * ldc + j];
        }
}

static void kern_portable_rows(int kc, const float *a, int lda, const float *b, float *c,
                               int ldc, int mr_eff, int nr_eff, float alpha, float beta)
{
    float acc[P_MR][P_NR] = {{0}};
    for (int p = 0; p < kc; p++, b += P_NR)
        for (int i = 0; i < mr_eff; i++)
            for (int j = 0; j < P_NR; j++)
                acc[i][j] += a[(long)i * lda + p] * b[j];
    for (int i = 0; i < mr_eff; i++)
        for (int j = 0; j < nr_eff; j++) {
            float t = alpha * acc[i][j];
            c[(long)i * ldc + j] = beta == 0.0f ? t : t + beta * c[(long)i * ldc + j];
        }
}

#ifdef TQ_GEMM_X86
/* ---- AVX2 + FMA: 6 x 16, 12 accumulators of the 16 ymm registers ---- */
enum { A2_MR = 6, A2_NR = 16, A2_KC = 384 };

/* A's element (i, p) at a[i * rs + p * cs]: packed strips (rs 1, cs MR), or
 * rows of A in place (rs lda, cs 1; rows past mr_eff read row 0 again, their
 * sums discarded). The same operations either way, so the same bits. */
__attribute__((target("avx2,fma"), always_inline)) static inline void
avx2_core(int kc, const float *a, long rs, long cs, const float *b, float *c, int ldc,
          int mr_eff, int nr_eff, float alpha, float beta)
{
    const float *a0 = a, *a1 = a + (mr_eff > 1 ? rs : 0), *a2 = a + (mr_eff > 2 ? 2 * rs : 0),
                *a3 = a + (mr_eff > 3 ? 3 * rs : 0), *a4 = a + (mr_eff > 4 ? 4 * rs : 0),
                *a5 = a + (mr_eff > 5 ? 5 * rs : 0);
    if (rs == 1) /* packed: the strip is zero-padded, every row is there */
        a1 = a + 1, a2 = a + 2, a3 = a + 3, a4 = a + 4, a5 = a + 5;
    for (int i = 0; i < mr_eff; i++) {
        _mm_prefetch((const char *)(c + (long)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (long)i * ldc + nr_eff - 1), _MM_HINT_T0);
    }
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 4
    for (long p = 0; p < kc * cs; p += cs, b += A2_NR) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), x;
#define ROW2(i)                                                                    \
    x = _mm256_broadcast_ss(a##i + p);                                             \
    c##i##0 = _mm256_fmadd_ps(x, b0, c##i##0);                                     \
    c##i##1 = _mm256_fmadd_ps(x, b1, c##i##1);
        ROW2(0) ROW2(1) ROW2(2) ROW2(3) ROW2(4) ROW2(5)
#undef ROW2
    }
    __m256 acc[A2_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                            {c30, c31}, {c40, c41}, {c50, c51}};
    static const int32_t lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    int n0 = nr_eff < 8 ? nr_eff : 8, n1 = nr_eff > 8 ? nr_eff - 8 : 0;
    __m256i m0 = _mm256_loadu_si256((const __m256i *)(lanes + 8 - n0));
    __m256i m1 = _mm256_loadu_si256((const __m256i *)(lanes + 8 - n1));
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int i = 0; i < mr_eff; i++) {
        float *ci = c + (long)i * ldc;
        __m256 t0 = _mm256_mul_ps(va, acc[i][0]), t1 = _mm256_mul_ps(va, acc[i][1]);
        if (nr_eff == A2_NR) { /* whole rows: plain loads and stores (AMD's masked
                                * ones are microcoded, ~10x slower) */
            if (beta != 0.0f) {
                t0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), t0);
                t1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), t1);
            }
            _mm256_storeu_ps(ci, t0);
            _mm256_storeu_ps(ci + 8, t1);
            continue;
        }
        if (beta != 0.0f) {
            t0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci, m0), t0);
            if (n1)
                t1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8, m1), t1);
        }
        _mm256_maskstore_ps(ci, m0, t0);
        if (n1)
            _mm256_maskstore_ps(ci + 8, m1, t1);
    }
}

__attribute__((target("avx2,fma"))) static void
kern_avx2(int kc, const float *a, const float *b, float *c, int ldc, int mr_eff, int nr_eff,
          float alpha, float beta)
{
    avx2_core(kc, a, 1, A2_MR, b, c, ldc, mr_eff, nr_eff, alpha, beta);
}

__attribute__((target("avx2,fma"))) static void
kern_avx2_rows(int kc, const float *a, int lda, const float *b, float *c, int ldc, int mr_eff,
               int nr_eff, float alpha, float beta)
{
    avx2_core(kc, a, lda, 1, b, c, ldc, mr_eff, nr_eff, alpha, beta);
}

/* ---- AVX-512: 12 x 32, 24 accumulators of the 32 zmm registers ---- */
enum { A5_MR = 12, A5_NR = 32, A5_KC = 256 };
_Static_assert(A5_MR <= TQ_GEMM_MR_MAX && A2_MR <= TQ_GEMM_MR_MAX && P_MR <= TQ_GEMM_MR_MAX &&
                   A5_KC <= TQ_GEMM_KC_MAX && A2_KC <= TQ_GEMM_KC_MAX && P_KC <= TQ_GEMM_KC_MAX,
               "gemm.h's TQ_GEMM_MR_MAX and TQ_GEMM_KC_MAX size the strips packed on the stack");

/* A's element (i, p) at a[i * rs + p * cs], as in avx2_core: reading A's
 * rows in place spares the packing pass, which held this kernel at 94 GFLOP/s
 * a core against the AVX2 kernel's 110 on Zen 4 (whose 512-bit FMAs take two
 * 256-bit halves: the same peak); in place, both run at ~113. */
__attribute__((target("avx512f"), always_inline)) static inline void
avx512_core(int kc, const float *a, long rs, long cs, const float *b, float *c, int ldc,
            int mr_eff, int nr_eff, float alpha, float beta)
{
    const float *r[A5_MR];
    for (int i = 0; i < A5_MR; i++)
        r[i] = a + (rs == 1 || i < mr_eff ? i * rs : 0);
    tq_gemm512_prefetch_c(c, ldc, mr_eff, nr_eff);
    __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z,
           c90 = z, c91 = z, cA0 = z, cA1 = z, cB0 = z, cB1 = z;
    for (long p = 0; p < kc * cs; p += cs, b += A5_NR) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), x;
#define ROW5(i, n)                                                                 \
    x = _mm512_set1_ps(r[n][p]);                                                   \
    c##i##0 = _mm512_fmadd_ps(x, b0, c##i##0);                                     \
    c##i##1 = _mm512_fmadd_ps(x, b1, c##i##1);
        ROW5(0, 0) ROW5(1, 1) ROW5(2, 2) ROW5(3, 3) ROW5(4, 4) ROW5(5, 5)
        ROW5(6, 6) ROW5(7, 7) ROW5(8, 8) ROW5(9, 9) ROW5(A, 10) ROW5(B, 11)
#undef ROW5
    }
    __m512 acc[A5_MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                            {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71},
                            {c80, c81}, {c90, c91}, {cA0, cA1}, {cB0, cB1}};
    tq_gemm512_store(acc, c, ldc, mr_eff, nr_eff, alpha, beta, NULL);
}

__attribute__((target("avx512f"))) static void
kern_avx512(int kc, const float *a, const float *b, float *c, int ldc, int mr_eff, int nr_eff,
            float alpha, float beta)
{
    avx512_core(kc, a, 1, A5_MR, b, c, ldc, mr_eff, nr_eff, alpha, beta);
}

__attribute__((target("avx512f"))) static void
kern_avx512_rows(int kc, const float *a, int lda, const float *b, float *c, int ldc, int mr_eff,
                 int nr_eff, float alpha, float beta)
{
    avx512_core(kc, a, lda, 1, b, c, ldc, mr_eff, nr_eff, alpha, beta);
}
#endif

static const tq_gemm_kernel kernels[] = {
#ifdef TQ_GEMM_X86
    {"avx512", A5_MR, A5_NR, A5_KC, kern_avx512, kern_avx512_rows},
    {"avx2", A2_MR, A2_NR, A2_KC, kern_avx2, kern_avx2_rows},
#endif
    {"portable", P_MR, P_NR, P_KC, kern_portable, kern_portable_rows},
};

static const tq_gemm_kernel *chosen;

static int supported(const tq_gemm_kernel *k)
{
#ifdef TQ_GEMM_X86
    /* __builtin_cpu_supports also checks that the OS saves the registers */
    __builtin_cpu_init();
    if (k->fn == kern_avx512)
        return __builtin_cpu_supports("avx512f");
    if (k->fn == kern_avx2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return k->fn == kern_portable;
}

const tq_gemm_kernel *tq_cpu_gemm_kernel(void)
{
    const tq_gemm_kernel *k = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (k)
        return k;
    for (k = kernels; !supported(k); k++)
        ; /* the portable one, last, always is */
    __atomic_store_n(&chosen, k, __ATOMIC_RELEASE);
    return k;
}

int tq_cpu_gemm_kernel_force(const char *name)
{
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (name && !strcmp(name, kernels[i].name)) {
            if (!supported(&kernels[i]))
                return 0;
            __atomic_store_n(&chosen, &kernels[i], __ATOMIC_RELEASE);
            return 1;
        }
    __atomic_store_n(&chosen, NULL, __ATOMIC_RELEASE);
    return name == NULL;
}
