/* gemm_i8.c: products of int8 matrices into f32 on CPUs with AVX512-VNNI
 * (AMD Zen 4 and later, Intel Ice Lake and later), where one VPDPBUSD
 * multiplies 64 pairs of bytes and adds each lane's 4 products into 16 int32
 * sums: four times the multiply-adds of an f32 FMA per instruction, exact.
 *
 * VPDPBUSD takes one operand unsigned, so B is packed once as b + 128 (in
 * [1, 255]; the weights, constant) and A stays signed: the sums are then
 * dot + 128 * asum, which the caller's row sums of A take back exactly.
 * B's strips hold NR columns, each column's 4 consecutive k in one 32-bit
 * lane, so one 64-byte load holds 16 columns' quads; A is read in place, a
 * row's quad is one 32-bit broadcast. Sums run over the whole k in
 * registers, and the scales are applied in the order of the plain loop
 * (tq_cpu_gemm_i8_ref), so both give the same bits. */
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#include "gemm_avx512.h"
#define TQ_I8_X86 1
#endif

/* MC rows of A (at k = 1536, 144 KiB) stay in L2 while B's strips pass. */
enum { MR = 12, NR = TQ_GEMM_I8_NR, MC = 96 };
_Static_assert(NR == 32, "tq_gemm512_store writes rows of 32 columns");

/* Quad q of column c at q * 4 * NR + 4 * c: b + 128, and 128 (b = 0) past k
 * or n, so padding adds nothing to dot. */
static void pack_strip(uint8_t *dst, const int8_t *b, int ldb, int k, int n, int j0, int kpad)
{
    for (int c = 0; c < NR; c++) {
        int j = j0 + c;
        const int8_t *row = b + (long)j * ldb;
        for (int p = 0; p < kpad; p++) {
            int v = p < k && j < n ? row[p] : 0;
            dst[(size_t)(p / 4) * 4 * NR + 4 * c + p % 4] = (uint8_t)(v + 128);
        }
    }
}

tq_cpu_packed_b *tq_cpu_gemm_i8_pack_b(const int8_t *b, int ldb, int k, int n)
{
    tq_cpu_packed_b *pb = tq_cpu_gemm_packed_new(1, k, n, NR);
    if (!pb)
        return NULL;
    pb->kpad = (k + 63) & ~63; /* whole AMX steps of 16 quads (b = 0 adds nothing) */
    size_t strip = (size_t)NR * (size_t)pb->kpad, bytes = (size_t)(pb->npad / NR) * strip;
    if (!(pb->quads = tq_cpu_alloc64(bytes))) { /* (k or n 0: 64 bytes, not out of memory) */
        free(pb);
        return NULL;
    }
    for (int s = 0; s < pb->npad / NR; s++)
        pack_strip(pb->quads + (size_t)s * strip, b, ldb, k, n, s * NR, pb->kpad);
    return pb;
}

#ifdef TQ_I8_X86
#define TQ_TARGET_I8 __attribute__((target("avx512f,avx512bw,avx512vnni")))

/* A row's quad q as a 32-bit broadcast. */
TQ_TARGET_I8 static inline __m512i quad_bcast(const int8_t *row, int q)
{
    int32_t w;
    memcpy(&w, row + 4 * q, 4);
    return _mm512_set1_epi32(w);
}

/* v[i] += xr[i r + p] wt[p, j..] for p < r in order: the rest columns of
 * the tile's rows, gathered once a block of rows (xr), a row's two sums in
 * registers. Inlined with r a constant (tq-embed's 8), the loops unroll and
 * w stays in 16 registers: tq-bench's matmul_i8_rest then takes 19% longer
 * than matmul_i8 at n = 256 (43% with the columns read through cols in
 * here), 7% at 384. n0, n1: the strip's columns in each half, as far as wt
 * is read. */
TQ_TARGET_I8 static inline __attribute__((always_inline)) void
rest_rows(const float *xr, int r, const float *wt, int ldw, int n0, int n1, int mr_eff,
          __m512 v[][2])
{
    __mmask16 m0 = (__mmask16)((1u << n0) - 1), m1 = (__mmask16)((1u << n1) - 1);
    __m512 w[16][2];
    for (int p = 0; p < r; p++) {
        w[p][0] = _mm512_maskz_loadu_ps(m0, wt + (long)p * ldw);
        w[p][1] = _mm512_maskz_loadu_ps(m1, wt + (long)p * ldw + 16);
    }
    for (int i = 0; i < mr_eff; i++) {
        __m512 v0 = v[i][0], v1 = v[i][1];
        for (int p = 0; p < r; p++) {
            __m512 xv = _mm512_set1_ps(xr[i * r + p]);
            v0 = _mm512_fmadd_ps(xv, w[p][0], v0);
            v1 = _mm512_fmadd_ps(xv, w[p][1], v1);
        }
        v[i][0] = v0;
        v[i][1] = v1;
    }
}

TQ_TARGET_I8 static void rest_fma(const float *xr, int r, const float *wt, int ldw, int n0, int n1,
                                  int mr_eff, __m512 v[][2])
{
    if (r == 8)
        rest_rows(xr, 8, wt, ldw, n0, n1, mr_eff, v);
    else
        rest_rows(xr, r, wt, ldw, n0, n1, mr_eff, v);
}

/* A tile's int32 sums (dot + 128 asum) as the contract orders the rest: the
 * scales, the f32 rest, beta C and the bias (kern_i8's and AMX's alike, so
 * the same bits). mr_eff <= 32. */
TQ_TARGET_I8 static inline __attribute__((always_inline)) void
store_sums(__m512i acc[][2], const int32_t *asum, const float *ascale, const float *bscale,
           const float *xr, const tq_cpu_i8_rest *rest, int j, float *c, int ldc, int mr_eff,
           int nr_eff, float beta, const float *bias)
{
    int n0 = nr_eff < 16 ? nr_eff : 16, n1 = nr_eff > 16 ? nr_eff - 16 : 0;
    __m512 s0 = _mm512_maskz_loadu_ps((__mmask16)((1u << n0) - 1), bscale);
    __m512 s1 = _mm512_maskz_loadu_ps((__mmask16)((1u << n1) - 1), bscale + 16);
    __m512 v[32][2];
    for (int i = 0; i < mr_eff; i++) {
        /* dot = acc - 128 asum, exact (wrapping: acc may pass 2^31, dot not) */
        __m512i off = _mm512_set1_epi32((int32_t)((uint32_t)asum[i] << 7));
        __m512 as = _mm512_set1_ps(ascale[i]);
        v[i][0] = _mm512_mul_ps(
            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][0], off)), s0), as);
        v[i][1] = _mm512_mul_ps(
            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][1], off)), s1), as);
    }
    if (rest) /* the columns kept out of the codes, in f32, in order */
        rest_fma(xr, rest->r, rest->wt + j, rest->ldw, n0, n1, mr_eff, v);
    /* alpha 1: 1 * v is v, then fmadd(beta, C, v) and + bias as the loop */
    tq_gemm512_store(v, c, ldc, mr_eff, nr_eff, 1.0f, beta, bias);
}

/* C[0..mr_eff, 0..nr_eff) from A's rows (in place, at lda) times the packed
 * strip b over k, as tq_cpu_gemm_i8 says. Rows past mr_eff read row 0 again
 * and are dropped. */
TQ_TARGET_I8 static void kern_i8(int k, const int8_t *a, int lda, const int32_t *asum,
                                 const float *ascale, const uint8_t *b, const float *bscale,
                                 const float *xr, const tq_cpu_i8_rest *rest, int j, float *c,
                                 int ldc, int mr_eff,
                                 int nr_eff, float beta, const float *bias)
{
    const int8_t *r[MR];
    for (int i = 0; i < MR; i++)
        r[i] = a + (i < mr_eff ? (long)i * lda : 0);
    tq_gemm512_prefetch_c(c, ldc, mr_eff, nr_eff);
    __m512i z = _mm512_setzero_si512();
    __m512i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
            c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z,
            c90 = z, c91 = z, cA0 = z, cA1 = z, cB0 = z, cB1 = z;
    /* The last part quad of a k not a multiple of 4 (the rows' last bytes,
     * zeros after: never a byte past k) is gathered before the loop and
     * summed first: done after the loop, byte by byte or by a memcpy of k % 4
     * bytes (a call), it left GCC short of registers, and it then kept every
     * sum in memory in the loop over k too (205 against 420 GOP/s, Zen 4). */
    int32_t tail[MR] = {0};
    for (int i = 0; i < MR && (k & 3); i++) {
        uint32_t w = 0;
        for (int e = 0; e < (k & 3); e++)
            w |= (uint32_t)(uint8_t)r[i][(k & ~3) + e] << 8 * e;
        tail[i] = (int32_t)w;
    }
#define ROWQ(i, n, X)                                                              \
    x = X;                                                                         \
    c##i##0 = _mm512_dpbusd_epi32(c##i##0, b0, x);                                 \
    c##i##1 = _mm512_dpbusd_epi32(c##i##1, b1, x);
#define STEPQ(X)                                                                   \
    {                                                                              \
        __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64), x;     \
        ROWQ(0, 0, X(0)) ROWQ(1, 1, X(1)) ROWQ(2, 2, X(2)) ROWQ(3, 3, X(3))        \
        ROWQ(4, 4, X(4)) ROWQ(5, 5, X(5)) ROWQ(6, 6, X(6)) ROWQ(7, 7, X(7))        \
        ROWQ(8, 8, X(8)) ROWQ(9, 9, X(9)) ROWQ(A, 10, X(10)) ROWQ(B, 11, X(11))    \
        b += 4 * NR;                                                               \
    }
#define WHOLE(n) quad_bcast(r[n], q)
#define PART(n) _mm512_set1_epi32(tail[n])
    if (k & 3) {
        const uint8_t *b1st = b;
        b += (size_t)(k / 4) * 4 * NR;
        STEPQ(PART)
        b = b1st;
    }
    for (int q = 0; q < k / 4; q++)
        STEPQ(WHOLE)
#undef PART
#undef WHOLE
#undef STEPQ
#undef ROWQ
    __m512i acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                          {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71},
                          {c80, c81}, {c90, c91}, {cA0, cA1}, {cB0, cB1}};
    store_sums(acc, asum, ascale, bscale, xr, rest, j, c, ldc, mr_eff, nr_eff, beta, bias);
}

/* Row sums of A by VPDPBUSD with 1 as the unsigned operand: 64 codes an
 * instruction (the plain loop stayed scalar, 2% of tq-embed --precision int8). */
TQ_TARGET_I8 static void rowsums_vnni(int m, int k, const int8_t *a, int lda, int32_t *asum)
{
    const __m512i ones = _mm512_set1_epi8(1);
    for (int i = 0; i < m; i++) {
        const int8_t *r = a + (long)i * lda;
        __m512i acc = _mm512_setzero_si512();
        int p = 0;
        for (; p + 64 <= k; p += 64)
            acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512(r + p));
        if (p < k)
            acc = _mm512_dpbusd_epi32(
                acc, ones, _mm512_maskz_loadu_epi8(((__mmask64)1 << (k - p)) - 1, r + p));
        asum[i] = _mm512_reduce_add_epi32(acc);
    }
}
#endif

void tq_cpu_gemm_i8_rowsums(int m, int k, const int8_t *a, int lda, int32_t *asum)
{
#ifdef TQ_I8_X86
    if (tq_cpu_gemm_i8_supported()) {
        rowsums_vnni(m, k, a, lda, asum);
        return;
    }
#endif
    for (int i = 0; i < m; i++) {
        int32_t s = 0;
        for (int p = 0; p < k; p++)
            s += a[(long)i * lda + p];
        asum[i] = s;
    }
}

static int disabled; /* tq_cpu_gemm_i8_disable: the tests' switch */

void tq_cpu_gemm_i8_disable(int off) { __atomic_store_n(&disabled, off, __ATOMIC_RELAXED); }

int tq_cpu_gemm_i8_use(void)
{
    return tq_cpu_gemm_i8_supported() && !__atomic_load_n(&disabled, __ATOMIC_RELAXED);
}

int tq_cpu_gemm_i8_supported(void)
{
#ifdef TQ_I8_X86
    __builtin_cpu_init(); /* avx512f also says the OS saves the zmm registers */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vnni");
#else
    return 0;
#endif
}

#ifdef TQ_I8_X86
/* Where an AMX block's sums go: store_sums, as kern_i8's do (the same exact
 * sums, so the same bits), for a block of rows of tq_cpu_gemm_i8. */
typedef struct amx_out {
    const int32_t *asum;
    const float *ascale, *bscale, *xr, *bias;
    const tq_cpu_i8_rest *rest;
    int j0, nc, ldc;
    float beta;
    float *c;
} amx_out;

TQ_TARGET_I8 static void amx_store(void *ctx, int r, int mr, int q, const void *tile)
{
    const amx_out *o = ctx;
    const int32_t *sums = tile;
    __m512i acc[32][2];
    for (int i = 0; i < mr; i++) {
        acc[i][0] = _mm512_loadu_si512(sums + i * NR);
        acc[i][1] = _mm512_loadu_si512(sums + i * NR + 16);
    }
    int j = q * NR, ne = o->nc - j < NR ? o->nc - j : NR;
    store_sums(acc, o->asum + r, o->ascale + r, o->bscale + j,
               o->xr + r * (o->rest ? o->rest->r : 0), o->rest, o->j0 + j,
               o->c + (long)r * o->ldc + j, o->ldc, mr, ne, o->beta, o->bias ? o->bias + j : NULL);
}
#endif

void tq_cpu_gemm_i8(int m, int j0, int nc, const int8_t *a, int lda, const int32_t *asum,
                    const float *ascale, const tq_cpu_packed_b *pb, const float *bscale,
                    const tq_cpu_i8_rest *rest, float beta, const float *bias, float *c, int ldc)
{
#ifdef TQ_I8_X86
    size_t strip = (size_t)NR * (size_t)pb->kpad;
    float xr[MC * 16]; /* the rest columns of a block's rows, r a row */
    int r = rest ? rest->r : 0;
    /* AMX where the CPU has it and B's k comes in its steps (a B packed
     * here always does); its buffers short of memory: VNNI, which gives the
     * same bits */
    int amx = pb->kpad % 64 == 0 && tq_cpu_amx_use(TQ_AMX_INT8);
    for (int ic = 0; ic < m; ic += MC) {
        int mc = m - ic < MC ? m - ic : MC;
        for (int i = 0; i < mc; i++)
            for (int p = 0; p < r; p++)
                xr[i * r + p] = rest->x[(long)(ic + i) * rest->ldx + rest->cols[p]];
        amx_out o = {asum + ic, ascale + ic, bscale + j0, xr, bias ? bias + j0 : NULL,
                     r ? rest : NULL, j0, nc, ldc, beta, c + (long)ic * ldc};
        if (amx && tq_cpu_amx_gemm(TQ_AMX_INT8, mc, (const unsigned char *)(a + (long)ic * lda),
                                   lda, (size_t)pb->k, pb->kpad / 64,
                                   pb->quads + (size_t)(j0 / NR) * strip, (nc + NR - 1) / NR,
                                   NULL, 0, nc, amx_store, &o))
            continue;
        for (int jr = 0; jr < nc; jr += NR) {
            const uint8_t *bs = pb->quads + (size_t)((j0 + jr) / NR) * strip;
            int ne = nc - jr < NR ? nc - jr : NR;
            for (int ir = 0; ir < mc; ir += MR)
                kern_i8(pb->k, a + (long)(ic + ir) * lda, lda, asum + ic + ir, ascale + ic + ir,
                        bs, bscale + j0 + jr, xr + ir * r, r ? rest : NULL, j0 + jr,
                        c + (long)(ic + ir) * ldc + jr, ldc, mc - ir < MR ? mc - ir : MR, ne, beta,
                        bias ? bias + j0 + jr : NULL);
        }
    }
#else
    (void)m, (void)j0, (void)nc, (void)a, (void)lda, (void)asum, (void)ascale, (void)pb,
        (void)bscale, (void)rest, (void)beta, (void)bias, (void)c, (void)ldc;
#endif
}

/* ---- the portable form: B unpacked, the same float order ---- */

/* c[j] from an exact dot, as the contract orders it: separate statements, so
 * that no compiler fuses the products with the adds. */
static inline float epilogue(int32_t dot, float bs, float as, const tq_cpu_i8_rest *rest,
                             long i, int j, float beta, float cold, const float *bias)
{
    float v = (float)dot * bs;
    v = v * as;
    for (int p = 0; rest && p < rest->r; p++)
        v = fmaf(rest->x[i * rest->ldx + rest->cols[p]], rest->wt[(long)p * rest->ldw + j], v);
    if (beta != 0.0f)
        v = fmaf(beta, cold, v);
    if (bias)
        v = v + *bias;
    return v;
}

/* Columns in blocks of about 64 KiB of B, which then stay in L2 while every
 * row of A passes. */
static int col_block(int k) { return k > 16384 ? 4 : (65536 / (k ? k : 1)) & ~3; }

static void ref_plain(int m, int n, const int8_t *a, int lda, const float *ascale,
                      const int8_t *b, int ldb, int k, const float *bscale,
                      const tq_cpu_i8_rest *rest, float beta, const float *bias, float *c,
                      int ldc)
{
    int jb = col_block(k);
    for (int j1 = 0; j1 < n; j1 += jb)
        for (int i = 0; i < m; i++) {
            const int8_t *ai = a + (long)i * lda;
            float *ci = c + (long)i * ldc;
            for (int j = j1; j < n && j < j1 + jb; j++) {
                const int8_t *bj = b + (long)j * ldb;
                int32_t dot = 0;
                for (int p = 0; p < k; p++)
                    dot += ai[p] * bj[p];
                ci[j] = epilogue(dot, bscale[j], ascale[i], rest, i, j, beta,
                                 beta != 0.0f ? ci[j] : 0.0f, bias ? bias + j : NULL);
            }
        }
}

#ifdef TQ_I8_X86
#define TQ_TARGET_AVX2 __attribute__((target("avx2,fma")))

/* 16 bytes of int8 as 16 int16. */
TQ_TARGET_AVX2 static inline __m256i wide16(const int8_t *p)
{
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
}

/* One row of A against 4 rows of B: the 4 dots. VPMADDWD's pair sums
 * (at most 2 * 127 * 127) and the int32 sums are exact. */
TQ_TARGET_AVX2 static void dot4(const int8_t *x, const int8_t *const bj[4], int k, int32_t d[4])
{
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    int p = 0;
    for (; p + 16 <= k; p += 16) {
        __m256i xa = wide16(x + p);
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(xa, wide16(bj[0] + p)));
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(xa, wide16(bj[1] + p)));
        s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(xa, wide16(bj[2] + p)));
        s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(xa, wide16(bj[3] + p)));
    }
    /* per 128-bit half: (s0, s1, s2, s3) summed in pairs, twice; then halves */
    __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    _mm_storeu_si128((__m128i *)d, u);
    for (; p < k; p++)
        for (int e = 0; e < 4; e++)
            d[e] += x[p] * bj[e][p];
}

TQ_TARGET_AVX2 static void ref_avx2(int m, int n, const int8_t *a, int lda, const float *ascale,
                                    const int8_t *b, int ldb, int k, const float *bscale,
                                    const tq_cpu_i8_rest *rest, float beta, const float *bias,
                                    float *c, int ldc)
{
    int jb = col_block(k);
    for (int j1 = 0; j1 < n; j1 += jb)
        for (int i = 0; i < m; i++) {
            const int8_t *ai = a + (long)i * lda;
            float *ci = c + (long)i * ldc;
            for (int j = j1; j < n && j < j1 + jb; j += 4) {
                /* columns past n read column j again; their dots are dropped */
                const int8_t *bj[4];
                for (int e = 0; e < 4; e++)
                    bj[e] = b + (long)(j + e < n ? j + e : j) * ldb;
                int32_t d[4];
                dot4(ai, bj, k, d);
                for (int e = 0; e < 4 && j + e < n; e++)
                    ci[j + e] = epilogue(d[e], bscale[j + e], ascale[i], rest, i, j + e, beta,
                                         beta != 0.0f ? ci[j + e] : 0.0f,
                                         bias ? bias + j + e : NULL);
            }
        }
}
#endif

void tq_cpu_gemm_i8_ref(int m, int n, const int8_t *a, int lda, const float *ascale,
                        const int8_t *b, int ldb, int k, const float *bscale,
                        const tq_cpu_i8_rest *rest, float beta, const float *bias, float *c,
                        int ldc)
{
#ifdef TQ_I8_X86
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        ref_avx2(m, n, a, lda, ascale, b, ldb, k, bscale, rest, beta, bias, c, ldc);
        return;
    }
#endif
    ref_plain(m, n, a, lda, ascale, b, ldb, k, bscale, rest, beta, bias, c, ldc);
}
