/* attention_rows.c: the attention's two products for a batch item whose keys
 * fit one tile (at most 64: a sentence), row by row in AVX-512, for
 * attention.c. Through the sgemm micro-kernel a tile of 14 keys and 32 head
 * dimensions cost two 12 x 32 kernel calls for the scores and two for P V,
 * most of their lanes on padding, and V was packed first: in tq-embed on
 * 2,000 short sentences the attention took ~10% of the time for ~0.6% of
 * the arithmetic. Here the scores of a row are 16 keys a register and P V
 * reads V's rows in place, each output column chunk a register.
 *
 * Every row is computed on its own, in an order fixed by its keys' count
 * (never by the tile, block or batch it comes in), so a document's bits do
 * not depend on its neighbours' lengths: attention.c takes this way for
 * every item whose live keys fit a tile, whatever the batch's shape. */
#include "../internal.h"
#include "cpu.h"
#include "vmath.h"

static int disabled; /* tq_cpu_att_rows_disable: the tests' switch */

void tq_cpu_att_rows_disable(int off) { __atomic_store_n(&disabled, off, __ATOMIC_RELAXED); }

int tq_cpu_att_rows_use(int nr)
{
#ifdef TQ_HAVE_ISA_VARIANTS
    return tq_cpu_isa() >= 2 && nr % 16 == 0 && !__atomic_load_n(&disabled, __ATOMIC_RELAXED);
#else
    (void)nr;
    return 0;
#endif
}

#ifdef TQ_HAVE_ISA_VARIANTS
#include <immintrin.h>

enum { ROWS = 4, CHUNKS = 4 }; /* 4 rows x 64 columns: 16 sums in registers */

/* Rows r0.. r0+nq of s [.., lds] = alpha q k^T over the first nc chunks of
 * 16 keys: q's rows at ldq, k packed as attention.c packs it (strips of nr
 * columns, each dk rows of nr). Rows past nq read q's first row again and
 * are dropped; columns past the keys are whatever the zero padding gives
 * (attention.c masks them). */
TQ_TARGET_AVX512 static inline __attribute__((always_inline)) void scores4(const float *q, int64_t ldq, int nq,
                                                          const float *kp, int nr, int64_t dk,
                                                          int nc, float alpha, float *s, int lds)
{
    const float *qr[ROWS];
    for (int r = 0; r < ROWS; r++)
        qr[r] = q + (r < nq ? r : 0) * ldq;
    const float *kc[CHUNKS];
    for (int c = 0; c < nc; c++)
        kc[c] = kp + (int64_t)(c * 16 / nr) * dk * nr + (c * 16) % nr;
    __m512 acc[ROWS][CHUNKS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = _mm512_setzero_ps();
    for (int64_t p = 0; p < dk; p++) {
        __m512 kv[CHUNKS];
        for (int c = 0; c < nc; c++)
            kv[c] = _mm512_loadu_ps(kc[c] + p * nr);
        for (int r = 0; r < ROWS; r++) {
            __m512 x = _mm512_set1_ps(qr[r][p]);
            for (int c = 0; c < nc; c++)
                acc[r][c] = _mm512_fmadd_ps(x, kv[c], acc[r][c]);
        }
    }
    __m512 va = _mm512_set1_ps(alpha);
    for (int r = 0; r < ROWS; r++) { /* (as pv4's end, below) */
        if (r >= nq)
            break;
        for (int c = 0; c < nc; c++)
            _mm512_storeu_ps(s + (int64_t)r * lds + c * 16, _mm512_mul_ps(acc[r][c], va));
    }
}

#define SCORES_NC(NC)                                                                  \
    TQ_TARGET_AVX512 static void scores_nc##NC(const float *q, int64_t ldq, int nq,    \
                                               const float *kp, int nr, int64_t dk,     \
                                               float alpha, float *s, int lds)          \
    {                                                                                  \
        for (int r = 0; r < nq; r += ROWS)                                             \
            scores4(q + r * ldq, ldq, nq - r, kp, nr, dk, NC, alpha, s + (int64_t)r * lds, \
                    lds);                                                              \
    }
SCORES_NC(1)
SCORES_NC(2)
SCORES_NC(3)
SCORES_NC(4)

/* Rows of o [.., ldo] = (p v) times the row's scale, over keys 0.. nk, for
 * columns c0.. c0+16 nc of v (rows at ldv, read in place), the last chunk
 * cut to `last` lanes. */
TQ_TARGET_AVX512 static inline __attribute__((always_inline)) void pv4(const float *p, int ldp, int nq,
                                                      const float *v, int64_t ldv, int nk, int nc,
                                                      __mmask16 last, const float *scale, float *o,
                                                      int64_t ldo)
{
    const float *pr[ROWS];
    for (int r = 0; r < ROWS; r++)
        pr[r] = p + (r < nq ? r : 0) * ldp;
    __m512 acc[ROWS][CHUNKS];
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < nc; c++)
            acc[r][c] = _mm512_setzero_ps();
    for (int j = 0; j < nk; j++) {
        __m512 vv[CHUNKS];
        for (int c = 0; c < nc; c++)
            vv[c] = _mm512_maskz_loadu_ps(c == nc - 1 ? last : 0xffff, v + j * ldv + c * 16);
        for (int r = 0; r < ROWS; r++) {
            __m512 x = _mm512_set1_ps(pr[r][j]);
            for (int c = 0; c < nc; c++)
                acc[r][c] = _mm512_fmadd_ps(x, vv[c], acc[r][c]);
        }
    }
    /* r to the constant ROWS, the test inside: with r < nq in the loop's
     * condition GCC kept acc in memory, storing every sum at every key */
    for (int r = 0; r < ROWS; r++) {
        if (r >= nq)
            break;
        __m512 sc = _mm512_set1_ps(scale[r]);
        for (int c = 0; c < nc; c++)
            _mm512_mask_storeu_ps(o + r * ldo + c * 16, c == nc - 1 ? last : 0xffff,
                                  _mm512_mul_ps(acc[r][c], sc));
    }
}

#define PV_NC(NC)                                                                      \
    TQ_TARGET_AVX512 static void pv_nc##NC(const float *p, int ldp, int nq, const float *v, \
                                           int64_t ldv, int nk, __mmask16 last,         \
                                           const float *scale, float *o, int64_t ldo)   \
    {                                                                                  \
        for (int r = 0; r < nq; r += ROWS)                                             \
            pv4(p + (int64_t)r * ldp, ldp, nq - r, v, ldv, nk, NC, last, scale + r,    \
                o + r * ldo, ldo);                                                     \
    }
PV_NC(1)
PV_NC(2)
PV_NC(3)
PV_NC(4)
#endif

void tq_cpu_att_scores_rows(const float *q, int64_t ldq, int nq, const float *kp, int nr,
                            int64_t dk, int nk, float alpha, float *s, int lds)
{
#ifdef TQ_HAVE_ISA_VARIANTS
    typedef void (*fn)(const float *, int64_t, int, const float *, int, int64_t, float, float *,
                       int);
    static const fn by_nc[CHUNKS] = {scores_nc1, scores_nc2, scores_nc3, scores_nc4};
    if (nk > 0 && nq > 0)
        by_nc[(nk + 15) / 16 - 1](q, ldq, nq, kp, nr, dk, alpha, s, lds);
#else
    (void)q, (void)ldq, (void)nq, (void)kp, (void)nr, (void)dk, (void)nk, (void)alpha, (void)s,
        (void)lds;
#endif
}

void tq_cpu_att_pv_rows(const float *p, int ldp, int nq, const float *v, int64_t ldv, int nk,
                        int64_t dv, const float *scale, float *o, int64_t ldo)
{
#ifdef TQ_HAVE_ISA_VARIANTS
    typedef void (*fn)(const float *, int, int, const float *, int64_t, int, __mmask16,
                       const float *, float *, int64_t);
    static const fn by_nc[CHUNKS] = {pv_nc1, pv_nc2, pv_nc3, pv_nc4};
    for (int64_t c0 = 0; c0 < dv && nq > 0; c0 += 16 * CHUNKS) {
        int64_t w = dv - c0 < 16 * CHUNKS ? dv - c0 : 16 * CHUNKS;
        int nc = (int)((w + 15) / 16), tail = (int)(w - 16 * (nc - 1));
        __mmask16 last = (__mmask16)(tail == 16 ? 0xffff : (1u << tail) - 1);
        by_nc[nc - 1](p, ldp, nq, v + c0, ldv, nk, last, scale, o + c0, ldo);
    }
#else
    (void)p, (void)ldp, (void)nq, (void)v, (void)ldv, (void)nk, (void)dv, (void)scale, (void)o,
        (void)ldo;
#endif
}

/* Keys 0.. nk (<= 64) of one head, rows at ldk from k0, transposed into
 * dst [dk, w]: w = nk rounded up to 16, zeros past nk; returns w. One
 * gather of 16 keys a column: the 8 x 8 register transposes and scalar
 * rest of attention.c's packing cost ~1,600 cycles for a sentence's 14
 * keys of 32. Data movement only: the same floats. */
#ifdef TQ_HAVE_ISA_VARIANTS
TQ_TARGET_AVX512 static int pack_keys512(const float *k0, int64_t ldk, int nk, int64_t dk,
                                         float *dst)
{
    int w = (nk + 15) & ~15;
    for (int c = 0; c < w; c += 16) {
        int live = nk - c < 16 ? nk - c : 16;
        __mmask16 m = (__mmask16)(live == 16 ? 0xffff : (1u << live) - 1);
        __m512i idx = _mm512_mullo_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
            _mm512_set1_epi32((int)ldk));
        const float *base = k0 + (int64_t)c * ldk;
        for (int64_t p = 0; p < dk; p++)
            _mm512_storeu_ps(dst + p * w + c, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx,
                                                                       base + p, 4));
    }
    return w;
}
#endif

int tq_cpu_att_pack_rows(const float *k0, int64_t ldk, int nk, int64_t dk, float *dst)
{
#ifdef TQ_HAVE_ISA_VARIANTS
    return pack_keys512(k0, ldk, nk, dk, dst);
#else
    (void)k0, (void)ldk, (void)nk, (void)dk, (void)dst;
    return 0;
#endif
}
