/* gemm_bf16.c: products of bf16 matrices into f32 on CPUs with AVX512-BF16
 * (AMD Zen 4 and later, Intel Cooper Lake, Sapphire Rapids and later), where
 * one VDPBF16PS multiplies 16 pairs of bf16 and adds both products into 16
 * f32 sums: twice the multiply-adds of an f32 FMA per instruction. tq-embed's
 * --precision bf16 runs its layers' products here.
 *
 * B is packed once (a constant B: model weights) into strips of NR columns,
 * each pair of k's two values of a column side by side, so that one 64-byte
 * load holds 16 columns' pairs; A is read in place, a row's pair of bf16 is
 * one 32-bit broadcast. Sums run over the whole k in registers (no slices of
 * k): the same operations for every element of C, whatever the block. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "gemm_avx512.h"
#define TQ_BF16_X86 1
#endif

/* MC rows of A (at k = 1536, 288 KiB) stay in L2 while B's strips pass. */
enum { MR = 12, NR = TQ_GEMM_BF16_NR, MC = 96 };
_Static_assert(NR == 32, "tq_gemm512_store writes rows of 32 columns");

/* The pair of op(B) rows 2q, 2q+1 at column j, as packed (0 past k or n). */
static void pack_strip(uint16_t *dst, int tb, const uint16_t *b, int ldb, int k, int n, int j0,
                       int kpad)
{
    if (tb && j0 + NR <= n) {
        /* a weight matrix as Linear keeps it: op(B)'s columns are b's rows,
         * a pair two neighbours of a row, copied as one 32-bit word (the
         * element loop below made B's packing a sixth of a one-line run) */
        for (int q = 0; q < k / 2; q++)
            for (int c = 0; c < NR; c++)
                memcpy(dst + 2 * (q * NR + c), b + (long)(j0 + c) * ldb + 2 * q, 4);
        if (k & 1) /* the last pair: the value and a 0 */
            for (int c = 0; c < NR; c++) {
                dst[2 * ((k / 2) * NR + c)] = b[(long)(j0 + c) * ldb + k - 1];
                dst[2 * ((k / 2) * NR + c) + 1] = 0;
            }
        return;
    }
    for (int q = 0; q < kpad / 2; q++, dst += 2 * NR)
        for (int c = 0; c < NR; c++)
            for (int e = 0; e < 2; e++) {
                int p = 2 * q + e, j = j0 + c;
                uint16_t v = 0;
                if (p < k && j < n)
                    v = tb ? b[(long)j * ldb + p] : b[(long)p * ldb + j];
                dst[2 * c + e] = v;
            }
}

typedef struct pack_job {
    tq_cpu_packed_b *pb;
    int tb, ldb;
    const uint16_t *b;
} pack_job;

static void pack_strips(void *ctx, int64_t begin, int64_t end)
{
    const pack_job *j = ctx;
    size_t strip = (size_t)NR * (size_t)j->pb->kpad;
    for (int64_t s = begin; s < end; s++)
        pack_strip(j->pb->pairs + (size_t)s * strip, j->tb, j->b, j->ldb, j->pb->k, j->pb->n,
                   (int)s * NR, j->pb->kpad);
}

tq_cpu_packed_b *tq_cpu_gemm_bf16_pack_b(int tb, const uint16_t *b, int ldb, int k, int n)
{
    tq_cpu_packed_b *pb = tq_cpu_gemm_packed_new(tb, k, n, NR);
    if (!pb)
        return NULL;
    /* k padded to whole AMX steps of 32 (zero pairs add nothing): the
     * tiles read 16 pairs of a strip at a time */
    pb->kpad = (k + 31) & ~31;
    size_t strip = (size_t)NR * (size_t)pb->kpad;
    size_t bytes = (size_t)(pb->npad / NR) * strip * sizeof *pb->pairs;
    if ((pb->pairs = tq_cpu_alloc64(bytes)))
        memset(pb->pairs, 0, bytes);
    else {
        free(pb);
        return NULL;
    }
    /* strips on the pool's threads: a weight's first product packs it, and
     * the other threads would wait (each strip on its own: the same bytes) */
    pack_job j = {pb, tb, ldb, b};
    tq_parallel_for(pb->npad / NR, 4, pack_strips, &j);
    return pb;
}

/* A tile's f32 rows (at NR) into low's rows, GELU'd or rounded. */
static void low_rows(const float *tile, int mr, int ne, uint16_t *low, int ldl, int gelu)
{
    if (gelu)
        tq_cpu_gelu_bf16_rows(tile, NR, mr, ne, low, ldl);
    else
        for (int i = 0; i < mr; i++) /* f32 to bf16: cannot fail */
            (void)tq_convert(TQ_DTYPE_BF16, low + (long)i * ldl, TQ_DTYPE_F32, tile + i * NR,
                             (size_t)ne, 0);
}

#ifdef TQ_BF16_X86
#define TQ_TARGET_BF16 __attribute__((target("avx512f,avx512bf16")))

/* A row's pair p as a 32-bit broadcast; `half` keeps only its first value
 * (the last pair of an odd k: the second would be the next row's). */
TQ_TARGET_BF16 static inline __m512bh pair_bcast(const uint16_t *row, int p, int half)
{
    uint32_t w = row[2 * p];
    if (!half)
        memcpy(&w, row + 2 * p, 4);
    return (__m512bh)_mm512_set1_epi32((int)w);
}

/* C[0..mr_eff, 0..nr_eff) = alpha * acc + beta * C (beta 0: C unread) +
 * bias (NULL: none), acc = A's rows (in place, at lda) times the packed
 * strip b, over k. Rows past mr_eff read row 0 again and are dropped. */
TQ_TARGET_BF16 static void kern_bf16(int k, const uint16_t *a, int lda, const uint16_t *b,
                                     float *c, int ldc, int mr_eff, int nr_eff, float alpha,
                                     float beta, const float *bias)
{
    const uint16_t *r[MR];
    for (int i = 0; i < MR; i++)
        r[i] = a + (i < mr_eff ? (long)i * lda : 0);
    /* C asked for early, hidden by the loop; not for a short k (the
     * attention's scores, k = a head's width, into a scratch that is in
     * cache), where the asking cost more than it hid */
    if (k >= 128)
        tq_gemm512_prefetch_c(c, ldc, mr_eff, nr_eff);
    __m512 z = _mm512_setzero_ps();
    __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,
           c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z,
           c90 = z, c91 = z, cA0 = z, cA1 = z, cB0 = z, cB1 = z;
    /* the full pairs, then the last half pair of an odd k */
#define ROWB(i, n, half)                                                           \
    x = pair_bcast(r[n], p, half);                                                 \
    c##i##0 = _mm512_dpbf16_ps(c##i##0, x, b0);                                    \
    c##i##1 = _mm512_dpbf16_ps(c##i##1, x, b1);
#define STEPB(half)                                                                \
    {                                                                              \
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);                             \
        __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + NR), x;                     \
        ROWB(0, 0, half) ROWB(1, 1, half) ROWB(2, 2, half) ROWB(3, 3, half)        \
        ROWB(4, 4, half) ROWB(5, 5, half) ROWB(6, 6, half) ROWB(7, 7, half)        \
        ROWB(8, 8, half) ROWB(9, 9, half) ROWB(A, 10, half) ROWB(B, 11, half)      \
        b += 2 * NR;                                                               \
    }
    int p = 0;
    for (; p < k / 2; p++)
        STEPB(0)
    if (k & 1)
        STEPB(1)
#undef STEPB
#undef ROWB
    __m512 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                         {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71},
                         {c80, c81}, {c90, c91}, {cA0, cA1}, {cB0, cB1}};
    tq_gemm512_store(acc, c, ldc, mr_eff, nr_eff, alpha, beta, bias);
}

/* A tile of C (mr rows, ne columns, the sums in acc) stored as tiles()
 * says: into C, or through a buffer (L1) into low's rows, GELU'd or rounded. */
TQ_TARGET_BF16 static void tile_out(__m512 acc[][2], int mr, int ne, float alpha, float beta,
                                    const float *bias, float *c, int ldc, uint16_t *low,
                                    int ldl, int gelu)
{
    if (!low) {
        tq_gemm512_store(acc, c, ldc, mr, ne, alpha, beta, bias);
        return;
    }
    float tile[32 * NR];
    tq_gemm512_store(acc, tile, NR, mr, ne, alpha, 0.0f, bias);
    low_rows(tile, mr, ne, low, ldl, gelu);
}

/* Where tiles_amx's blocks go: alpha, beta C and the bias, into C or low. */
typedef struct amx_out {
    int nc, ldc, ldl, gelu;
    float alpha, beta;
    const float *bias;
    float *c;
    uint16_t *low;
} amx_out;

TQ_TARGET_BF16 static void amx_store(void *ctx, int r, int mr, int q, const void *tile)
{
    const amx_out *o = ctx;
    const float *sums = tile;
    __m512 acc[32][2];
    for (int i = 0; i < mr; i++) {
        acc[i][0] = _mm512_loadu_ps(sums + i * NR);
        acc[i][1] = _mm512_loadu_ps(sums + i * NR + 16);
    }
    int j = q * NR, ne = o->nc - j < NR ? o->nc - j : NR;
    tile_out(acc, mr, ne, o->alpha, o->beta, o->bias ? o->bias + j : NULL,
             o->low ? NULL : o->c + (long)r * o->ldc + j, o->ldc,
             o->low ? o->low + (long)r * o->ldl + j : NULL, o->ldl, o->gelu);
}

/* tiles() on AMX (amx_gemm.c: A's rows in place, 32 at a time against each
 * strip of B); a plain product's blocks go straight into C. 0 when memory
 * for its buffers is short (the caller then runs kern_bf16, whose sums
 * round otherwise). */
static int tiles_amx(int m, int j0, int nc, float alpha, const uint16_t *a, int lda,
                     const tq_cpu_packed_b *pb, float beta, const float *bias, float *c, int ldc,
                     uint16_t *low, int ldl, int gelu)
{
    size_t strip = (size_t)NR * (size_t)pb->kpad;
    amx_out o = {nc, ldc, ldl, gelu, alpha, beta, bias ? bias + j0 : NULL, c, low};
    int plain = !low && alpha == 1.0f && beta == 0.0f && !bias;
    return tq_cpu_amx_gemm(TQ_AMX_BF16, m, (const unsigned char *)a, 2L * lda,
                           2 * (size_t)pb->k, pb->kpad / 32,
                           (const unsigned char *)(pb->pairs + (size_t)(j0 / NR) * strip),
                           (nc + NR - 1) / NR, plain ? c : NULL, ldc, nc, amx_store, &o);
}
#endif

static int disabled; /* tq_cpu_gemm_bf16_disable: the tests' switch */

void tq_cpu_gemm_bf16_disable(int off) { __atomic_store_n(&disabled, off, __ATOMIC_RELAXED); }

int tq_cpu_gemm_bf16_use(void)
{
    return tq_cpu_gemm_bf16_supported() && !__atomic_load_n(&disabled, __ATOMIC_RELAXED);
}

/* The blocks of A and strips of B in order, each 12 x 32 tile of C by
 * kern_bf16 (or 32 x 32 by AMX, where the CPU has it and k comes in whole
 * steps of 32); with low, each tile goes through a buffer (L1) into low's
 * rows, GELU'd or rounded (low_only: C is never written). */
static void tiles(int m, int j0, int nc, float alpha, const uint16_t *a, int lda,
                  const tq_cpu_packed_b *pb, float beta, const float *bias, float *c, int ldc,
                  uint16_t *low, int ldl, int gelu)
{
#ifdef TQ_BF16_X86
    if (pb->kpad % 32 == 0 && tq_cpu_amx_use(TQ_AMX_BF16) &&
        tiles_amx(m, j0, nc, alpha, a, lda, pb, beta, bias, c, ldc, low, ldl, gelu))
        return;
    size_t strip = (size_t)NR * (size_t)pb->kpad;
    float tile[MR * NR];
    for (int ic = 0; ic < m; ic += MC) {
        int mc = m - ic < MC ? m - ic : MC;
        for (int jr = 0; jr < nc; jr += NR) {
            const uint16_t *bs = pb->pairs + (size_t)((j0 + jr) / NR) * strip;
            int ne = nc - jr < NR ? nc - jr : NR;
            for (int ir = 0; ir < mc; ir += MR) {
                int mr = mc - ir < MR ? mc - ir : MR;
                const uint16_t *ai = a + (long)(ic + ir) * lda;
                const float *bj = bias ? bias + j0 + jr : NULL;
                if (!low) {
                    kern_bf16(pb->k, ai, lda, bs, c + (long)(ic + ir) * ldc + jr, ldc, mr, ne,
                              alpha, beta, bj);
                    continue;
                }
                kern_bf16(pb->k, ai, lda, bs, tile, NR, mr, ne, alpha, 0.0f, bj);
                low_rows(tile, mr, ne, low + (long)(ic + ir) * ldl + jr, ldl, gelu);
            }
        }
    }
#else
    (void)m, (void)j0, (void)nc, (void)alpha, (void)a, (void)lda, (void)pb, (void)beta,
        (void)bias, (void)c, (void)ldc, (void)low, (void)ldl, (void)gelu;
#endif
}

void tq_cpu_gemm_bf16(int m, int j0, int nc, float alpha, const uint16_t *a, int lda,
                      const tq_cpu_packed_b *pb, float beta, const float *bias, float *c, int ldc)
{
    tiles(m, j0, nc, alpha, a, lda, pb, beta, bias, c, ldc, NULL, 0, 0);
}

void tq_cpu_gemm_bf16_low(int m, int j0, int nc, float alpha, const uint16_t *a, int lda,
                          const tq_cpu_packed_b *pb, const float *bias, int gelu, uint16_t *low,
                          int ldl)
{
    tiles(m, j0, nc, alpha, a, lda, pb, 0.0f, bias, NULL, 0, low, ldl, gelu);
}
