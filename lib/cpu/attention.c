/* attention.c: the fused multi-head attention op on the CPU, FlashAttention
 * style. A unit of work is one (batch item, head, block of BQ queries): it
 * walks the keys in tiles of BK, computes the score tile with the built-in
 * sgemm's micro-kernel (the queries' rows read in place, the keys packed in
 * strips once per head), folds it into a running max and sum
 * per query (online softmax, the accumulator rescaled when the max grows) and
 * accumulates P V the same way. Memory is O(BQ (BK + Dv)) per thread: no
 * [Lq, Lk] matrix. Units are fixed by the shape, so results are the same bits
 * whatever the thread count. The consensus score (received) and the weights
 * need the final max and sum of every query row, so they come from a second
 * pass, run only when asked, whose units are (batch item, tile of keys): each
 * owns its columns of received and weights, summing in a fixed order. */
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"
#include "vmath.h"

#include <math.h>

/* BQ is a multiple of every micro-kernel's MR (12, 6, 4) and BK of every NR
 * (32, 16), so tiles are whole strips; a tile of scores, its packed copy and
 * the output accumulator stay in L2 (48 x 64 floats each). */
enum { BQ = 48, BK = 64, WK = TQ_CPU_ATT_WIDE_KEYS };
_Static_assert(BQ <= TQ_CPU_ATT_WIDE_ROWS, "attention_wide.c takes a block of queries");

#define LOG2E TQ_CPU_LOG2E

typedef struct att {
    const float *q, *k, *v;
    float *out, *received, *weights;
    const int64_t *key_len, *qgroup, *kgroup;
    const float *bias; /* [H, Lq, Lk] added to the scores, or NULL */
    int64_t B, Lq, Lk, H, Dk, Dv, dqk, dv, dvp; /* dqk, dv: row widths; dvp: Dv padded to NR */
    int64_t qblocks, kblocks;
    int causal;
    float alpha;  /* scale * log2(e): scores come out in base-2 units */
    float *stats; /* [B, H, Lq] maxima then [B, H, Lq] sums, for the second pass */
    const tq_gemm_kernel *kern;
    int isa;  /* tq_cpu_isa() */
    int rows; /* items whose keys fit a tile take attention_rows.c's way */
    int bf16; /* the tiles' products in bf16 (attention_bf16.c) */
    int wide; /* with bf16 and no groups: items of BK < keys <= WK take attention_wide.c */
    unsigned char *low; /* out rounded into it as each unit finishes (args->low) */
    tq_dtype low_dt;
} att;

/* ------------------------------------------------------------ vector math */

/* ln2^i / i!, i = 7 down to 0: 2^f's Taylor series for Horner's rule */
static const float exp2_poly[8] = {1.5252733804059841e-05f, 1.5403530393381606e-04f,
                                   1.3333558146428443e-03f, 9.6181291076284772e-03f,
                                   5.5504108664821580e-02f, 2.4022650695910071e-01f,
                                   6.9314718055994531e-01f, 1.0f};

/* 2^x in f32 for x <= 0: 0 below -126 (and for -inf), NaN kept. x = n + f,
 * |f| <= 1/2, 2^f by its Taylor series in f ln 2 to degree 7 (relative error
 * < 1e-8, under an f32 ulp), 2^n built from its bits. Written so that GCC
 * vectorizes it: selects on plain values, no calls. */
static inline float exp2_neg(float x)
{
    int dead = x <= -126.0f;
    float xc = dead ? -126.0f : x;
    const float shifter = 0x1.8p23f; /* adding it rounds to an integer */
    float kf = xc + shifter, n = kf - shifter, f = xc - n;
    float p = exp2_poly[0];
    for (int i = 1; i < 8; i++)
        p = p * f + exp2_poly[i];
    uint32_t kb, sb;
    memcpy(&kb, &kf, 4);
    memcpy(&sb, &shifter, 4);
    uint32_t eb = (kb - sb + 127u) << 23; /* n + 127 in the exponent field */
    float sc;
    memcpy(&sc, &eb, 4);
    float r = p * sc;
    return dead ? 0.0f : r;
}

/* The end of a row of the online softmax (both versions): the 16 lanes'
 * sum in a fixed order into the running sum, the new max kept, and the
 * accumulator row rescaled when the max grew. */
static inline void fold_row(const float lane[16], float mx, float corr, float *m, float *l,
                            float *orow, int64_t dvp)
{
    float sum = 0.0f;
    for (int t = 0; t < 16; t++)
        sum += lane[t];
    *l = *l * corr + sum;
    *m = mx;
    if (corr != 1.0f)
        for (int64_t c = 0; c < dvp; c++)
            orow[c] *= corr;
}

/* One tile of scores s [BQ, BK] (rows < nq real, columns past nk masked)
 * folded into the running max m, sum l and accumulator o [BQ, dvp] of each
 * row; s becomes the tile's unnormalized probabilities (columns < nk). Reductions run in 16 fixed lanes: vectorized,
 * and in an order that depends on nothing but the shape. */
static void online_base(float *s, int nq, int nk, float *m, float *l, float *o, int64_t dvp)
{
    int jend = (nk + 15) & ~15; /* past it every score is masked: adds nothing */
    for (int r = 0; r < nq; r++) {
        float *row = s + (int64_t)r * BK, lane[16];
        for (int t = 0; t < 16; t++)
            lane[t] = -INFINITY;
        for (int j = 0; j < jend; j += 16)
            for (int t = 0; t < 16; t++)
                lane[t] = row[j + t] > lane[t] ? row[j + t] : lane[t];
        float mx = m[r];
        for (int t = 0; t < 16; t++)
            mx = lane[t] > mx ? lane[t] : mx;
        if (mx == -INFINITY) { /* every key so far masked: nothing to add */
            memset(row, 0, BK * sizeof *row);
            continue;
        }
        float corr = exp2_neg(m[r] - mx); /* 0 when m was -inf */
        for (int t = 0; t < 16; t++)
            lane[t] = 0.0f;
        for (int j = 0; j < jend; j += 16)
            for (int t = 0; t < 16; t++) {
                float p = exp2_neg(row[j + t] - mx);
                row[j + t] = p;
                lane[t] += p;
            }
        fold_row(lane, mx, corr, &m[r], &l[r], o + r * dvp, dvp);
    }
}

/* A row of BK scores into the second pass's probabilities: 2^(s - m) * inv,
 * inv = 1 / the row's sum (final_probs, below, runs the rows). */
static void probs_base(float *row, float m, float inv)
{
    for (int j = 0; j < BK; j++)
        row[j] = exp2_neg(row[j] - m) * inv;
}

#ifdef TQ_HAVE_ISA_VARIANTS
#include <immintrin.h>

#include "exp2_vec.h"

/* online_base's loops in AVX2, lane t of the 16 in register t / 8, the
 * same order, exp2_neg8 for the probabilities (the rescale factor, one a
 * row, by exp2_neg). AVX-512 machines run it too. */
TQ_TARGET_AVX2 static void online_avx2(float *s, int nq, int nk, float *m, float *l, float *o,
                                       int64_t dvp)
{
    int jend = (nk + 15) & ~15;
    for (int r = 0; r < nq; r++) {
        float *row = s + (int64_t)r * BK, lane[16];
        __m256 mx0 = _mm256_set1_ps(-INFINITY), mx1 = mx0;
        for (int j = 0; j < jend; j += 16) { /* max(a, b) is a > b ? a : b */
            mx0 = _mm256_max_ps(_mm256_loadu_ps(row + j), mx0);
            mx1 = _mm256_max_ps(_mm256_loadu_ps(row + j + 8), mx1);
        }
        _mm256_storeu_ps(lane, mx0);
        _mm256_storeu_ps(lane + 8, mx1);
        float mx = m[r];
        for (int t = 0; t < 16; t++)
            mx = lane[t] > mx ? lane[t] : mx;
        if (mx == -INFINITY) {
            memset(row, 0, BK * sizeof *row);
            continue;
        }
        float corr = exp2_neg(m[r] - mx);
        __m256 vm = _mm256_set1_ps(mx), s0 = _mm256_setzero_ps(), s1 = s0;
        for (int j = 0; j < jend; j += 16) {
            __m256 p0 = exp2_neg8(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
            __m256 p1 = exp2_neg8(_mm256_sub_ps(_mm256_loadu_ps(row + j + 8), vm));
            _mm256_storeu_ps(row + j, p0);
            _mm256_storeu_ps(row + j + 8, p1);
            s0 = _mm256_add_ps(s0, p0);
            s1 = _mm256_add_ps(s1, p1);
        }
        _mm256_storeu_ps(lane, s0);
        _mm256_storeu_ps(lane + 8, s1);
        fold_row(lane, mx, corr, &m[r], &l[r], o + r * dvp, dvp);
    }
}

/* probs_base with exp2_neg8, the exp the sums of online_avx2 were made with */
TQ_TARGET_AVX2 static void probs_avx2(float *row, float m, float inv)
{
    __m256 vm = _mm256_set1_ps(m), vi = _mm256_set1_ps(inv);
    for (int j = 0; j < BK; j += 8) {
        __m256 x = _mm256_sub_ps(_mm256_loadu_ps(row + j), vm);
        _mm256_storeu_ps(row + j, _mm256_mul_ps(exp2_neg8(x), vi));
    }
}

/* online_avx2 with the 16 lanes in one register: the same lanes, sums and
 * order, so the same bits, in half the instructions (on 256-token passages
 * the online softmax was 8% of tq-embed --precision int8's time). */
TQ_TARGET_AVX512 static void online_avx512(float *s, int nq, int nk, float *m, float *l, float *o,
                                           int64_t dvp)
{
    int jend = (nk + 15) & ~15;
    for (int r = 0; r < nq; r++) {
        float *row = s + (int64_t)r * BK, lane[16];
        __m512 mx16 = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < jend; j += 16)
            mx16 = _mm512_max_ps(_mm512_loadu_ps(row + j), mx16);
        _mm512_storeu_ps(lane, mx16);
        float mx = m[r];
        for (int t = 0; t < 16; t++)
            mx = lane[t] > mx ? lane[t] : mx;
        if (mx == -INFINITY) {
            memset(row, 0, BK * sizeof *row);
            continue;
        }
        float corr = exp2_neg(m[r] - mx);
        __m512 vm = _mm512_set1_ps(mx), sum = _mm512_setzero_ps();
        for (int j = 0; j < jend; j += 16) {
            __m512 p = exp2_neg16(_mm512_sub_ps(_mm512_loadu_ps(row + j), vm));
            _mm512_storeu_ps(row + j, p);
            sum = _mm512_add_ps(sum, p);
        }
        _mm512_storeu_ps(lane, sum);
        fold_row(lane, mx, corr, &m[r], &l[r], o + r * dvp, dvp);
    }
}

/* probs_avx2 on 16 lanes */
TQ_TARGET_AVX512 static void probs_avx512(float *row, float m, float inv)
{
    __m512 vm = _mm512_set1_ps(m), vi = _mm512_set1_ps(inv);
    for (int j = 0; j < BK; j += 16) {
        __m512 x = _mm512_sub_ps(_mm512_loadu_ps(row + j), vm);
        _mm512_storeu_ps(row + j, _mm512_mul_ps(exp2_neg16(x), vi));
    }
}

/* Keys j0.. j0+nk of one head (rows at `stride`, from k0 = the head's slice of
 * key j0) into strips of nr columns of K^T, for whole groups of 8 keys and 8
 * of the dk columns: 8 x 8 blocks transposed in registers. The rest is left
 * to pack_k's scalar loop. Data movement only: the same bits. */
TQ_TARGET_AVX2 static void pack_k8_avx2(const float *k0, int64_t stride, int nk, int nr,
                                         int64_t dk, float *dst)
{
    for (int c = 0; c + 8 <= nk; c += 8) {
        float *d = dst + (int64_t)(c / nr * nr) * dk + c % nr;
        for (int64_t p = 0; p + 8 <= dk; p += 8) {
            const float *src = k0 + c * stride + p;
            __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + stride);
            __m256 r2 = _mm256_loadu_ps(src + 2 * stride), r3 = _mm256_loadu_ps(src + 3 * stride);
            __m256 r4 = _mm256_loadu_ps(src + 4 * stride), r5 = _mm256_loadu_ps(src + 5 * stride);
            __m256 r6 = _mm256_loadu_ps(src + 6 * stride), r7 = _mm256_loadu_ps(src + 7 * stride);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
            __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
            __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
            __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
            __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
            __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
            __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
            __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
            /* u0..u3: columns p..p+3 of keys c..c+3 (low halves) and, in the
             * high halves, columns p+4..p+7; u4..u7 the same of keys c+4.. */
            float *o = d + p * nr;
            _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(o + nr, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(o + 2 * nr, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(o + 3 * nr, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(o + 4 * nr, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(o + 5 * nr, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(o + 6 * nr, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(o + 7 * nr, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    }
}
#endif

typedef void (*online_fn)(float *s, int nq, int nk, float *m, float *l, float *o, int64_t dvp);
typedef void (*probs_fn)(float *row, float m, float inv);
static int forced_isa = -1; /* tq_cpu_attention_force_isa: the tests' switch */

int tq_cpu_attention_force_isa(int isa)
{
    if (isa > tq_cpu_isa())
        return 0;
    __atomic_store_n(&forced_isa, isa, __ATOMIC_RELAXED);
    return 1;
}

/* tq_cpu_isa(), or the level the tests forced (at most the CPU's) */
static int att_isa(void)
{
    int f = __atomic_load_n(&forced_isa, __ATOMIC_RELAXED), isa = tq_cpu_isa();
    return f >= 0 ? f : isa;
}

static void pick_isa(online_fn *on, probs_fn *probs)
{
    switch (att_isa()) {
#ifdef TQ_HAVE_ISA_VARIANTS
    case 2: *on = online_avx512; *probs = probs_avx512; return;
    case 1: *on = online_avx2; *probs = probs_avx2; return;
#endif
    default: *on = online_base; *probs = probs_base;
    }
}

/* ------------------------------------------------------------ packing */

/* Asks for n rows of `len` floats at `stride` before they are read: a head's
 * slice of each row is a short piece at a long stride (1.5 KiB in BERT), which
 * the hardware prefetcher does not follow, so reading them one after another
 * waited on memory row by row (88% of the time of packing q was that load,
 * when q was packed). */
static void prefetch_rows(const float *first, int64_t stride, int n, int64_t len)
{
    for (int r = 0; r < n; r++)
        for (int64_t c = 0; c < len; c += 16)
            __builtin_prefetch(first + r * stride + c);
}

/* Keys j0.. j0+nk of head h as strips of NR columns of K^T, the last
 * zero-padded: the B operand of the scores (strips past nk: none). */
static void pack_k(const att *a, const float *k, int64_t j0, int nk, int64_t h, float *dst)
{
    const int nr = a->kern->nr;
    const int64_t dk = a->Dk;
    prefetch_rows(k + j0 * a->dqk + h * dk, a->dqk, nk, dk);
    /* with AVX2, whole 8 x 8 blocks first (nr is a multiple of 8), then the
     * keys and columns they leave */
    int keys8 = 0;
    int64_t cols8 = 0;
#ifdef TQ_HAVE_ISA_VARIANTS
    if (a->isa >= 1 && nr % 8 == 0) {
        pack_k8_avx2(k + j0 * a->dqk + h * dk, a->dqk, nk, nr, dk, dst);
        keys8 = nk & ~7;
        cols8 = dk & ~(int64_t)7;
    }
#endif
    for (int s = 0; s < nk; s += nr)
        for (int c = 0; c < nr; c++) {
            float *d = dst + (int64_t)s * dk + c;
            if (s + c >= nk) {
                for (int64_t p = 0; p < dk; p++)
                    d[p * nr] = 0.0f;
                continue;
            }
            const float *row = k + (j0 + s + c) * a->dqk + h * dk;
            for (int64_t p = s + c < keys8 ? cols8 : 0; p < dk; p++)
                d[p * nr] = row[p];
        }
}

/* Rows j0.. j0+nk of head h of v as strips of NR columns (strip stride BK
 * rows; rows past nk are never read), zero-padded to dvp columns: the B
 * operand of P V. */
static void pack_v(const att *a, const float *v, int64_t j0, int nk, int64_t h, float *dst)
{
    const int nr = a->kern->nr;
    prefetch_rows(v + j0 * a->dv + h * a->Dv, a->dv, nk, a->Dv);
    for (int64_t s = 0; s < a->dvp; s += nr) {
        float *d = dst + s * BK;
        int64_t cols = a->Dv - s < nr ? a->Dv - s : nr;
        for (int p = 0; p < nk; p++, d += nr) {
            const float *row = v + (j0 + p) * a->dv + h * a->Dv + s;
            int64_t c = 0;
            for (; c < cols; c++)
                d[c] = row[c];
            for (; c < nr; c++)
                d[c] = 0.0f;
        }
    }
}

/* s [BQ, BK] = alpha * q k^T where it matters: rows < nq, read in place
 * from q (row i0 of the batch item's q; the kernel takes A's rows at their
 * stride, so q needs no packing) against the packed keys, columns < nk in
 * whole strips (the rest of a strip is masked after). */
static void scores(const att *a, const float *q, int64_t i0, int64_t h, const float *kp, int nq,
                   int nk, float *s)
{
    const tq_gemm_kernel *kn = a->kern;
    const float *q0 = q + i0 * a->dqk + h * a->Dk;
    for (int jr = 0; jr < nk; jr += kn->nr)
        for (int ir = 0; ir < nq; ir += kn->mr)
            kn->fn_rows((int)a->Dk, q0 + ir * a->dqk, (int)a->dqk, kp + (int64_t)jr * a->Dk,
                        s + (int64_t)ir * BK + jr, BK, nq - ir < kn->mr ? nq - ir : kn->mr,
                        kn->nr, a->alpha, 0.0f);
}

/* A tile's scores as scores() gives them, or for an item whose keys fit one
 * tile (`rows`), by attention_rows.c: in both passes the same way, so the
 * second pass's probabilities are made of the first pass's bits. */
static void tile_scores(const att *a, int rows, const float *q, int64_t i0, int64_t h,
                        const float *kp, int kpw, int nq, int nk, float *s)
{
    if (rows)
        tq_cpu_att_scores_rows(q + i0 * a->dqk + h * a->Dk, a->dqk, nq, kp, kpw, a->Dk, nk,
                               a->alpha, s, BK);
    else
        scores(a, q, i0, h, kp, nq, nk, s);
}

/* ------------------------------------------------------------ masks */

/* Keys of batch item b that exist: k's rows, cut by key_len. */
static int64_t key_end(const att *a, int64_t b)
{
    int64_t e = a->Lk;
    if (a->key_len) {
        int64_t kl = a->key_len[b];
        e = kl < 0 ? 0 : kl < e ? kl : e;
    }
    return e;
}

/* Whether item b (kend keys) takes the wide way: chosen by its own key
 * count, so its bits never depend on the batch around it. */
static int item_wide(const att *a, int64_t kend) { return a->wide && kend > BK && kend <= WK; }

/* Whether item b's way packs its keys itself (the rows way: they fit a
 * tile; the wide way), so that the head's tiles leave it out. */
static int own_keys(const att *a, int64_t b)
{
    int64_t kend = key_end(a, b);
    return (a->rows && kend <= BK) || item_wide(a, kend);
}

static void group_range(const int64_t *g, int64_t n, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (int64_t i = 0; i < n; i++) {
        *lo = g[i] < *lo ? g[i] : *lo;
        *hi = g[i] > *hi ? g[i] : *hi;
    }
}

/* Whether the tile of queries i0.. i0+nq and keys j0.. j0+nk has any pair not
 * masked (cheap tests only: it may say yes for a tile that is all masked). */
static int tile_live(const att *a, int64_t b, int64_t i0, int nq, int64_t j0, int nk)
{
    if (j0 >= key_end(a, b) || (a->causal && j0 > i0 + nq - 1))
        return 0;
    if (a->qgroup) {
        int64_t qlo, qhi, klo, khi;
        group_range(a->qgroup + b * a->Lq + i0, nq, &qlo, &qhi);
        group_range(a->kgroup + b * a->Lk + j0, nk, &klo, &khi);
        if (khi < qlo || klo > qhi)
            return 0;
    }
    return 1;
}

/* Adds head h's bias to a tile's scores (rows < nq, columns < nk; the rest
 * is masked after), in the scores' base-2 units. */
static void bias_tile(const att *a, int64_t h, int64_t i0, int nq, int64_t j0, int nk, float *s)
{
    if (!a->bias)
        return;
    for (int r = 0; r < nq; r++) {
        const float *restrict bs = a->bias + (h * a->Lq + i0 + r) * a->Lk + j0;
        float *restrict row = s + (int64_t)r * BK;
        for (int j = 0; j < nk; j++)
            row[j] += (float)LOG2E * bs[j];
    }
}

/* Sets masked scores of a tile to -inf: columns past nk (past the keys or
 * key_len), j > i under causal, other groups. */
static void mask_tile(const att *a, int64_t b, int64_t i0, int nq, int64_t j0, int nk, float *s)
{
    for (int r = 0; r < nq; r++) {
        float *row = s + (int64_t)r * BK;
        int end = nk;
        if (a->causal) {
            int64_t first = i0 + r - j0 + 1; /* first masked column */
            end = first < end ? (first < 0 ? 0 : (int)first) : end;
        }
        for (int j = end; j < BK; j++)
            row[j] = -INFINITY;
        if (a->qgroup) {
            int64_t g = a->qgroup[b * a->Lq + i0 + r];
            const int64_t *kg = a->kgroup + b * a->Lk + j0;
            for (int j = 0; j < end; j++)
                if (kg[j] != g)
                    row[j] = -INFINITY;
        }
    }
}

/* ------------------------------------------------------------ pass 1 */

typedef struct scratch {
    float *kp, *s, *o, *m, *l;
    uint16_t *q16, *p16; /* with bf16: the block's queries, the tile's probabilities */
    /* the wide way: item kp_of's K^T and V packed, tmp for the packing */
    uint16_t *kw, *vw;
    uint32_t *tmp;
    /* the rows way: kp holds item kp_of's keys (b H + h; -1 none), kpw wide;
     * the wide way: kw and vw hold item kp_of's */
    int64_t kp_of;
    int kpw;
    void *mem;
} scratch;

/* bf16 rows of the block's queries: Dk rounded up to a pair */
static int64_t q16_width(const att *a) { return (a->Dk + 1) & ~(int64_t)1; }

static int scratch_new(const att *a, scratch *w)
{
    size_t f_kp = (size_t)BK * (size_t)a->Dk, f_s = (size_t)BQ * (a->wide ? WK : BK),
           f_o = (size_t)BQ * (size_t)a->dvp;
    size_t f_q16 = a->bf16 ? (size_t)(BQ * q16_width(a)) / 2 : 0, f_p16 = a->bf16 ? f_s / 2 : 0;
    /* the wide way's item: K^T and V packed (bf16: half a float each) and
     * the rounded keys before their transpose (32-bit words) */
    size_t f_kw = a->wide ? (size_t)WK * (size_t)q16_width(a) / 2 : 0,
           f_vw = a->wide ? (size_t)WK * (size_t)a->dvp / 2 : 0,
           f_tmp = a->wide ? (size_t)WK * (size_t)((q16_width(a) / 2 + 15) & ~15) : 0;
    /* each piece rounded up to a cache line */
    size_t sz[10] = {f_kp, f_s, f_o, BQ, BQ, f_q16, f_p16, f_kw, f_vw, f_tmp}, total = 0;
    for (int i = 0; i < 10; i++)
        total += (sz[i] + 15) & ~(size_t)15;
    w->mem = aligned_alloc(64, (total ? total : 16) * sizeof(float));
    if (!w->mem)
        return 0;
    float *p = w->mem, *q16, *p16, *kw, *vw, *tmp;
    float **dst[10] = {&w->kp, &w->s, &w->o, &w->m, &w->l, &q16, &p16, &kw, &vw, &tmp};
    for (int i = 0; i < 10; i++) {
        *dst[i] = p;
        p += (sz[i] + 15) & ~(size_t)15;
    }
    w->q16 = (uint16_t *)q16;
    w->p16 = (uint16_t *)p16;
    w->kw = (uint16_t *)kw;
    w->vw = (uint16_t *)vw;
    w->tmp = (uint32_t *)tmp;
    w->kp_of = -1;
    return 1;
}

typedef struct run {
    const att *a;
    online_fn online;
    probs_fn probs;
    int64_t h;          /* the head pass 1 works on */
    float *kpk, *vpk;   /* its K and V, packed once: [B, kblocks] tiles */
    int failed;         /* atomic: a chunk found no memory for its scratch */
} run;

/* Packs head rn->h's K and V tiles, unit = (batch item, key tile). */
static void pack_chunk(void *ctx, int64_t begin, int64_t end)
{
    run *rn = ctx;
    const att *a = rn->a;
    uint32_t *tmp = NULL; /* bf16: a tile's keys rounded, before their transpose */
    if (a->bf16 && !(tmp = malloc((size_t)BK * (size_t)((q16_width(a) / 2 + 15) & ~15) * 4))) {
        __atomic_store_n(&rn->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t u = begin; u < end; u++) {
        int64_t b = u / a->kblocks, j0 = u % a->kblocks * BK;
        int nk = (int)(a->Lk - j0 < BK ? a->Lk - j0 : BK);
        if (own_keys(a, b))
            continue;
        float *kt = rn->kpk + u * BK * a->Dk, *vt = rn->vpk + u * BK * a->dvp;
        if (a->bf16) { /* (the f32 tiles' room holds the bf16 ones) */
            /* the item's keys only, as its products take them: V's strips
             * are as long as the tile's live keys (no causal here) */
            int64_t kend = key_end(a, b);
            nk = (int)(kend - j0 < nk ? kend - j0 : nk);
            if (nk <= 0)
                continue;
            tq_cpu_att_bf16_pack_k(a->k + (b * a->Lk + j0) * a->dqk + rn->h * a->Dk, a->dqk, nk,
                                   a->Dk, (uint16_t *)kt, tmp);
            tq_cpu_att_bf16_pack_v(a->v + (b * a->Lk + j0) * a->dv + rn->h * a->Dv, a->dv, nk,
                                   a->Dv, (uint16_t *)vt);
            continue;
        }
        pack_k(a, a->k + b * a->Lk * a->dqk, j0, nk, rn->h, kt);
        pack_v(a, a->v + b * a->Lk * a->dv, j0, nk, rn->h, vt);
    }
    free(tmp);
}

/* The rows i0.. i0+nq of head h of item b that a unit wrote to out, rounded
 * into low while they are in L1 (tq_op_convert's rounding: the same bytes). */
static void unit_low(const att *a, int64_t b, int64_t i0, int nq, int64_t h)
{
    if (!a->low)
        return;
    size_t es = tq_dtype_size(a->low_dt);
    for (int r = 0; r < nq; r++) {
        int64_t at = (b * a->Lq + i0 + r) * a->dv + h * a->Dv;
        /* f32 to bf16 or f16: cannot fail */
        (void)tq_convert(a->low_dt, a->low + (size_t)at * es, TQ_DTYPE_F32, a->out + at,
                         (size_t)a->Dv, 0);
    }
}

/* Query block qb of head h of batch item b: from the head's tiles in
 * rn->kpk, or, for an item the rows way takes, from its keys packed into
 * w->kp (once for all its blocks). */
static void unit_forward(const run *rn, scratch *w, int64_t b, int64_t qb, int64_t h)
{
    const att *a = rn->a;
    const tq_gemm_kernel *kn = a->kern;
    int64_t i0 = qb * BQ;
    int nq = (int)(a->Lq - i0 < BQ ? a->Lq - i0 : BQ);
    const float *q = a->q + b * a->Lq * a->dqk;
    int64_t kend = key_end(a, b);
    /* by the item's own keys, never the batch's shape: its bits are its own */
    int rows = a->rows && kend <= BK;
    if (a->causal && kend > i0 + nq)
        kend = i0 + nq; /* no query of the block sees a key past its last row */
    for (int r = 0; r < BQ; r++) {
        w->m[r] = -INFINITY;
        w->l[r] = 0.0f;
    }
    int wrote = 0; /* the rows way's P V went straight to out */
    prefetch_rows(q + i0 * a->dqk + h * a->Dk, a->dqk, nq, a->Dk);
    int bf16 = a->bf16 && !rows;
    if (rows && w->kp_of != b * a->H + h) {
        w->kpw = tq_cpu_att_pack_rows(a->k + b * a->Lk * a->dqk + h * a->Dk, a->dqk,
                                      (int)key_end(a, b), a->Dk, w->kp);
        w->kp_of = b * a->H + h;
    }
    if (bf16)
        tq_cpu_att_bf16_rows(q + i0 * a->dqk + h * a->Dk, a->dqk, nq, (int)a->Dk, w->q16,
                             (int)q16_width(a));
    if (item_wide(a, kend)) { /* (no stats: bf16 excludes the second pass) */
        /* the item's K and V packed by the first of its blocks this thread
         * runs, in its scratch (L2): packed for every item of a head first,
         * a sub-batch of 34 passages' ran from L3, 5% slower */
        if (w->kp_of != b * a->H + h) {
            tq_cpu_att_bf16_pack_k(a->k + b * a->Lk * a->dqk + h * a->Dk, a->dqk, (int)kend,
                                   a->Dk, w->kw, w->tmp);
            tq_cpu_att_bf16_pack_v(a->v + b * a->Lk * a->dv + h * a->Dv, a->dv, (int)kend, a->Dv,
                                   w->vw);
            w->kp_of = b * a->H + h;
        }
        tq_cpu_att_wide(nq, (int)kend, (int)a->Dk, (int)a->Dv, a->alpha, w->q16,
                        (int)q16_width(a), w->kw, w->vw,
                        a->bias ? a->bias + (h * a->Lq + i0) * a->Lk : NULL, a->Lk, w->s, w->p16, w->o, (int)a->dvp,
                        a->out + (b * a->Lq + i0) * a->dv + h * a->Dv, a->dv);
        unit_low(a, b, i0, nq, h);
        return;
    }
    if (!rows)
        memset(w->o, 0, (size_t)BQ * (size_t)a->dvp * sizeof *w->o);
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        int nk = (int)(kend - j0 < BK ? kend - j0 : BK);
        if (!tile_live(a, b, i0, nq, j0, nk))
            continue;
        int64_t tile = b * a->kblocks + j0 / BK;
        if (bf16)
            tq_cpu_att_bf16_product(nq, (int)a->Dk, nk, a->alpha, w->q16, (int)q16_width(a),
                                    (const uint16_t *)(rn->kpk + tile * BK * a->Dk), 0.0f, w->s,
                                    BK);
        else if (rows)
            tile_scores(a, rows, q, i0, h, w->kp, w->kpw, nq, nk, w->s);
        else
            tile_scores(a, rows, q, i0, h, rn->kpk + tile * BK * a->Dk, kn->nr, nq, nk, w->s);
        /* columns past kend (key_len, causal) are masked here: the packed
         * keys run to key_len or to the tile's end */
        bias_tile(a, h, i0, nq, j0, nk, w->s);
        mask_tile(a, b, i0, nq, j0, nk, w->s);
        /* (the rows way keeps no accumulator for it to rescale) */
        rn->online(w->s, nq, nk, w->m, w->l, w->o, rows ? 0 : a->dvp);
        if (!a->dvp)
            continue;
        if (rows) { /* the one tile: out = P V / l, v's rows read in place */
            float inv[BQ];
            for (int r = 0; r < nq; r++)
                inv[r] = w->l[r] > 0.0f ? 1.0f / w->l[r] : 0.0f;
            tq_cpu_att_pv_rows(w->s, BK, nq, a->v + (b * a->Lk + j0) * a->dv + h * a->Dv, a->dv,
                               nk, a->Dv, inv, a->out + (b * a->Lq + i0) * a->dv + h * a->Dv,
                               a->dv);
            wrote = 1;
            break;
        }
        /* P V over the tile's live keys only (the rest have probability 0),
         * the tile's rows read in place */
        const float *vp = rn->vpk + tile * BK * a->dvp;
        if (bf16) { /* P rounded too; its sums l stay those of the f32 P */
            tq_cpu_att_bf16_rows(w->s, BK, nq, nk, w->p16, BK);
            tq_cpu_att_bf16_product(nq, nk, (int)a->Dv, 1.0f, w->p16, BK, (const uint16_t *)vp,
                                    1.0f, w->o, (int)a->dvp);
            continue;
        }
        for (int64_t jr = 0; jr < a->dvp; jr += kn->nr)
            for (int ir = 0; ir < nq; ir += kn->mr)
                kn->fn_rows(nk, w->s + (int64_t)ir * BK, BK, vp + jr * BK,
                            w->o + ir * a->dvp + jr, (int)a->dvp,
                            nq - ir < kn->mr ? nq - ir : kn->mr, kn->nr, 1.0f, 1.0f);
    }
    for (int r = 0; r < nq; r++) {
        float *restrict out = a->out + (b * a->Lq + i0 + r) * a->dv + h * a->Dv;
        const float *restrict o = w->o + r * a->dvp;
        /* a query whose keys are all masked gets 0, as the op promises (the
         * test outside the loop: inside it, it kept the loop scalar) */
        if (!(w->l[r] > 0.0f)) {
            memset(out, 0, (size_t)a->Dv * sizeof *out);
            continue;
        }
        if (wrote) /* the rows way's P V did the rest */
            continue;
        float inv = 1.0f / w->l[r];
        for (int64_t c = 0; c < a->Dv; c++)
            out[c] = o[c] * inv;
    }
    if (a->stats) {
        int64_t at = (b * a->H + h) * a->Lq + i0, plane = a->B * a->H * a->Lq;
        memcpy(a->stats + at, w->m, (size_t)nq * sizeof *w->m);
        memcpy(a->stats + plane + at, w->l, (size_t)nq * sizeof *w->l);
    }
    unit_low(a, b, i0, nq, h);
}

static void forward_chunk(void *ctx, int64_t begin, int64_t end)
{
    run *rn = ctx;
    const att *a = rn->a;
    scratch w;
    if (!scratch_new(a, &w)) {
        __atomic_store_n(&rn->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t u = begin; u < end; u++)
        unit_forward(rn, &w, u / a->qblocks, u % a->qblocks, rn->h);
    free(w.mem);
}

/* Every item takes a way that packs its own keys (the rows way: keys in one
 * tile, V read in place; the wide way: K and V in its scratch): a unit is
 * (batch item, head), its keys packed by its first block, so the whole op is
 * one hand-off to the threads rather than two a head, nothing is packed for
 * keys past key_len, and an item's blocks share one packing. */
static void rows_chunk(void *ctx, int64_t begin, int64_t end)
{
    run *rn = ctx;
    const att *a = rn->a;
    scratch w;
    if (!scratch_new(a, &w)) {
        __atomic_store_n(&rn->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t u = begin; u < end; u++) {
        int64_t b = u / a->H, h = u % a->H, kend = key_end(a, b);
        if (h == 0 || u == begin) /* the item's rows, every head's: they come from L3 */
            for (const float *r = a->k + b * a->Lk * a->dqk, *e = r + kend * a->dqk; r < e; r += 16)
                __builtin_prefetch(r, 0, 2);
        for (int64_t qb = 0; qb < a->qblocks; qb++)
            unit_forward(rn, &w, b, qb, h);
    }
    free(w.mem);
}

/* ------------------------------------------------------------ pass 2 */

/* The second pass's probabilities: s = 2^(s - m) / l per row, rows whose keys
 * were all masked (l == 0) all zero. */
static void final_probs(const run *rn, float *s, int nq, const float *m, const float *l)
{
    for (int r = 0; r < nq; r++) {
        float *row = s + (int64_t)r * BK;
        if (l[r] > 0.0f)
            rn->probs(row, m[r], 1.0f / l[r]);
        else
            memset(row, 0, BK * sizeof *row);
    }
}

/* Keys j0.. j0+BK of batch item b: for every head and block of queries, the
 * final probabilities, into weights and summed (i != j) into received. */
static void unit_keys(const run *rn, scratch *w, int64_t u)
{
    const att *a = rn->a;
    int64_t b = u / a->kblocks, j0 = u % a->kblocks * BK;
    int nk = (int)(a->Lk - j0 < BK ? a->Lk - j0 : BK);
    const float *q = a->q + b * a->Lq * a->dqk, *k = a->k + b * a->Lk * a->dqk;
    int64_t kend = key_end(a, b);
    int nlive = (int)(kend - j0 < nk ? (kend - j0 < 0 ? 0 : kend - j0) : nk);
    double acc[BK] = {0};
    int64_t plane = a->B * a->H * a->Lq;
    int rows = a->rows && kend <= BK; /* as pass 1 chose */
    for (int64_t h = 0; h < a->H; h++) {
        if (nlive)
            pack_k(a, k, j0, nlive, h, w->kp);
        for (int64_t i0 = 0; i0 < a->Lq; i0 += BQ) {
            int nq = (int)(a->Lq - i0 < BQ ? a->Lq - i0 : BQ);
            int live = nlive && tile_live(a, b, i0, nq, j0, nlive);
            if (live) {
                const float *m = a->stats + (b * a->H + h) * a->Lq + i0;
                tile_scores(a, rows, q, i0, h, w->kp, a->kern->nr, nq, nlive, w->s);
                bias_tile(a, h, i0, nq, j0, nlive, w->s);
                mask_tile(a, b, i0, nq, j0, nlive, w->s);
                final_probs(rn, w->s, nq, m, m + plane);
            }
            if (a->weights)
                for (int r = 0; r < nq; r++) {
                    float *dst = a->weights + ((b * a->H + h) * a->Lq + i0 + r) * a->Lk + j0;
                    if (live)
                        memcpy(dst, w->s + (int64_t)r * BK, (size_t)nk * sizeof *dst);
                    else
                        memset(dst, 0, (size_t)nk * sizeof *dst);
                }
            if (live && a->received)
                for (int r = 0; r < nq; r++)
                    for (int j = 0; j < nlive; j++)
                        if (i0 + r != j0 + j)
                            acc[j] += w->s[(int64_t)r * BK + j];
        }
    }
    if (a->received)
        for (int j = 0; j < nk; j++)
            a->received[b * a->Lk + j0 + j] = (float)(acc[j] / (double)a->H);
}

static void keys_chunk(void *ctx, int64_t begin, int64_t end)
{
    run *rn = ctx;
    scratch w;
    if (!scratch_new(rn->a, &w)) {
        __atomic_store_n(&rn->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t u = begin; u < end; u++)
        unit_keys(rn, &w, u);
    free(w.mem);
}

/* ------------------------------------------------------------ the op */

tq_status tq_cpu_attention(void *ctx, const tq_tensor *q, const tq_tensor *k,
                           const tq_tensor *v, const tq_attention_args *args, tq_tensor *out)
{
    (void)ctx;
    att a;
    memset(&a, 0, sizeof a);
    int r3 = q->rank == 3;
    a.B = r3 ? q->dims[0] : 1;
    a.Lq = q->dims[r3];
    a.Lk = k->dims[r3];
    a.H = args->heads;
    a.dqk = q->dims[r3 + 1];
    a.dv = v->dims[r3 + 1];
    a.Dk = a.dqk / a.H;
    a.Dv = a.dv / a.H;
    a.kern = tq_cpu_gemm_kernel();
    a.isa = att_isa();
    a.dvp = (a.Dv + a.kern->nr - 1) / a.kern->nr * a.kern->nr;
    a.rows = a.isa >= 2 && tq_cpu_att_rows_use(a.kern->nr);
    /* bf16 products when allowed, for out alone (the second pass's scores
     * are f32: its probabilities must be made of pass 1's bits), and not
     * causal: a block's keys are then fewer than its tile's, and V's packed
     * pairs must end where the product's keys do */
    a.causal = args->causal != 0; /* (was set only below: causal took bf16) */
    a.bf16 = args->bf16 && !args->received && !args->weights && !a.causal &&
             tq_cpu_att_bf16_use();
    a.wide = a.bf16 && !args->qgroup && a.Lk > BK;
    a.q = tq_cpu_ptr(q);
    a.k = tq_cpu_ptr(k);
    a.v = tq_cpu_ptr(v);
    a.out = tq_cpu_ptr(out);
    a.key_len = args->key_len ? tq_cpu_ptr(args->key_len) : NULL;
    a.qgroup = args->qgroup ? tq_cpu_ptr(args->qgroup) : NULL;
    a.kgroup = args->kgroup ? tq_cpu_ptr(args->kgroup) : NULL;
    a.bias = args->bias ? tq_cpu_ptr(args->bias) : NULL;
    a.received = args->received ? tq_cpu_ptr(args->received) : NULL;
    a.weights = args->weights ? tq_cpu_ptr(args->weights) : NULL;
    if (args->low) {
        a.low = tq_cpu_ptr(args->low);
        a.low_dt = args->low->dtype;
    }
    double scale = args->scale != 0.0f ? args->scale : (a.Dk ? 1.0 / sqrt((double)a.Dk) : 1.0);
    a.alpha = (float)(scale * LOG2E);
    a.qblocks = (a.Lq + BQ - 1) / BQ;
    a.kblocks = (a.Lk + BK - 1) / BK;
    run rn;
    memset(&rn, 0, sizeof rn);
    rn.a = &a;
    pick_isa(&rn.online, &rn.probs);
    int second = a.received || a.weights;
    /* no tiles to pack, and no second pass: a unit per (item, head) */
    int64_t own = 0;
    for (int64_t b = 0; b < a.B; b++)
        own += own_keys(&a, b);
    if (own == a.B && !second) {
        tq_parallel_for(a.B * a.H, 1, rows_chunk, &rn);
        if (rn.failed)
            return tq_fail(TQ_ERR_NOMEM, "attention: out of memory for tile buffers");
        return TQ_OK;
    }
    /* one head's K and V packed (2 / H of k and v), and the row statistics */
    size_t tiles = (size_t)(a.B * a.kblocks), nstats = second ? (size_t)(2 * a.B * a.H * a.Lq) : 0;
    rn.kpk = aligned_alloc(64, (tiles * BK * (size_t)a.Dk + 16) * sizeof(float));
    rn.vpk = aligned_alloc(64, (tiles * BK * (size_t)a.dvp + 16) * sizeof(float));
    a.stats = second ? malloc((nstats + 1) * sizeof *a.stats) : NULL;
    if (!rn.kpk || !rn.vpk || (second && !a.stats)) {
        free(rn.kpk);
        free(rn.vpk);
        free(a.stats);
        return tq_fail(TQ_ERR_NOMEM, "attention: out of memory for packed keys and values");
    }
    /* head by head: all of a head's query blocks share its packed tiles */
    for (rn.h = 0; rn.h < a.H && !rn.failed; rn.h++) {
        tq_parallel_for((int64_t)tiles, 1, pack_chunk, &rn);
        tq_parallel_for(a.B * a.qblocks, 1, forward_chunk, &rn);
    }
    free(rn.kpk);
    free(rn.vpk);
    if (second && !rn.failed)
        tq_parallel_for(a.B * a.kblocks, 1, keys_chunk, &rn);
    free(a.stats);
    if (rn.failed)
        return tq_fail(TQ_ERR_NOMEM, "attention: out of memory for tile buffers");
    return TQ_OK;
}
