/* simtopk.c: the fused similarity top-k op on the CPU. Blocks of queries meet
 * tiles of the database in a single-threaded sgemm (OpenBLAS or the built-in
 * one); each tile's scores are folded at once into per-query heaps, so the
 * [nq, ndb] matrix never exists. The sgemm only ranks: a candidate whose
 * product value, widened by the sgemm's error bound, cannot beat the current
 * k-th best is skipped (nearly all of them, by a vectorized check of a whole
 * stretch of the tile row); the others are scored exactly (simscore.h) and
 * those scores decide. So the result is the same, bit for bit, whatever the
 * sgemm engine, the threads, the tiling, the blocks a caller feeds
 * (idx_base) or the order of shards.
 * With the device's rank precision bf16 (tq_device_set_rank_precision, on a
 * CPU with AVX512-BF16) the products take bf16 operands (VDPBF16PS, f32
 * sums) and the bound widens to cover their rounding (margin below), by the
 * rounding residuals measured row by row (about half their worst case): more
 * rows are scored exactly, and the result is again the same, bit for bit.
 *
 * Ranking: larger score first, ties to the lower index, NaN below every
 * number; an empty slot (idx -1, as the caller starts the lists) below all. */
#include "../internal.h"
#include "../op/simscore.h"
#include "cpu.h"
#include "gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* QB queries x TB database rows per sgemm: a 512 KiB score tile that stays in
 * L2 between the sgemm writing it and the fold reading it. */
enum { QB = 512, TB = 1024, STRETCH = 32 }; /* STRETCH: two zmm */
/* Work items: query blocks x database slices, at least this many when the
 * shape allows, so that any pool up to 16 threads has work to share; slices
 * are never shorter than MIN_SLICE rows (each slice fills its own heaps). */
enum { WANT_JOBS = 16, MIN_SLICE = 8192 };
#define PART_BYTES_MAX ((int64_t)64 << 20)

/* A heap of up to k entries whose root is the worst kept. */
typedef struct heap {
    float *v;
    int64_t *i;
    int64_t n, k;
} heap;

static void sift_down(heap *h, int64_t n, int64_t at)
{
    for (;;) {
        int64_t w = at, l = 2 * at + 1, r = l + 1;
        if (l < n && tq_simscore_better(h->v[w], h->i[w], h->v[l], h->i[l]))
            w = l;
        if (r < n && tq_simscore_better(h->v[w], h->i[w], h->v[r], h->i[r]))
            w = r;
        if (w == at)
            return;
        float tv = h->v[at];
        int64_t ti = h->i[at];
        h->v[at] = h->v[w], h->i[at] = h->i[w];
        h->v[w] = tv, h->i[w] = ti;
        at = w;
    }
}

static void sift_up(heap *h, int64_t at)
{
    while (at > 0) {
        int64_t p = (at - 1) / 2;
        if (!tq_simscore_better(h->v[p], h->i[p], h->v[at], h->i[at]))
            return;
        float tv = h->v[at];
        int64_t ti = h->i[at];
        h->v[at] = h->v[p], h->i[at] = h->i[p];
        h->v[p] = tv, h->i[p] = ti;
        at = p;
    }
}

static void heap_offer(heap *h, float v, int64_t i)
{
    if (h->n < h->k) {
        h->v[h->n] = v, h->i[h->n] = i;
        sift_up(h, h->n++);
    } else if (tq_simscore_better(v, i, h->v[0], h->i[0])) {
        h->v[0] = v, h->i[0] = i;
        sift_down(h, h->n, 0);
    }
}

/* Heap sort in place: best first. */
static void heap_sort(heap *h)
{
    for (int64_t n = h->n; n > 1; n--) {
        float tv = h->v[0];
        int64_t ti = h->i[0];
        h->v[0] = h->v[n - 1], h->i[0] = h->i[n - 1];
        h->v[n - 1] = tv, h->i[n - 1] = ti;
        sift_down(h, n - 1, 0);
    }
}

typedef int (*passes_fn)(const float *s, const float *xsq, int metric, float t);

typedef struct st {
    tq_cpu_sgemm_fn sgemm;
    passes_fn passes;
    const float *q, *x;
    float *vals;
    int64_t *idx;
    int64_t nq, ndb, d, k, base;
    int metric;
    int64_t qblocks, slices, slice_rows;
    int bf16;            /* products of bf16 operands (q16, each tile packed) */
    uint16_t *q16;       /* [nq, ldq] the queries rounded to bf16 */
    int ldq;
    long long rescored;  /* rows scored exactly (atomic) */
    float *qnorm;        /* [nq] ||q|| (for the margins) */
    float *qres;         /* bf16: [nq] >= ||q - q'||, q' the query as rounded */
    float *tile_res;     /* bf16: [tiles] >= ||x - x'|| for every row of the tile */
    float *xsq;          /* [ndb] ||x||^2 as f32 (L2's expansion) */
    float *tile_max;     /* [tiles] max ||x|| over each tile */
    float *part_v;       /* [jobs][QB][k]: each job's sorted finds */
    int64_t *part_i;
    int64_t *part_n;     /* [jobs][QB] how many */
    int merge_failed;    /* atomic: a merge chunk had no memory */
} st;

/* ---- norms, once per call ---- */

static float sumsq_f(const float *x, int64_t d)
{
    float s[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= d; i += 16)
        for (int j = 0; j < 16; j++)
            s[j] += x[i + j] * x[i + j];
    for (; i < d; i++)
        s[0] += x[i] * x[i];
    float t = 0;
    for (int j = 0; j < 16; j++)
        t += s[j];
    return t;
}

/* An upper bound of ||x - x'||, x' the row rounded to bf16 as the products
 * take it (to nearest even; a subnormal read as zero): the f32 sum of the
 * squared differences (each exact) widened by its rounding, gamma_(d+16),
 * and by what underflow may lose, then rounded up. NaN for a NaN or
 * infinite element (its margin is then infinite). */
static float res_bound(double ss, int64_t d)
{
    double b = ss * (1 + (double)(d + 20) * 0x1p-23) + (double)(d + 16) * 0x1p-140;
    b = sqrt(b) * (1 + 0x1p-40);
    float f = (float)b;
    return (double)f < b ? nextafterf(f, INFINITY) : f;
}

static float res_bf16_c(const float *x, int64_t d)
{
    float s = 0;
    for (int64_t i = 0; i < d; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        float r;
        memcpy(&r, &u, 4);
        float e = fabsf(x[i]) < 0x1p-126f ? x[i] : x[i] - r;
        s += e * e;
    }
    return res_bound(s != s || isinf(s) ? (double)NAN : (double)s, d);
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float res_bf16_avx512(const float *x, int64_t d)
{
    __m512 acc = _mm512_setzero_ps();
    const __m512i lsb = _mm512_set1_epi32(1), half = _mm512_set1_epi32(0x7fff),
                  hi = _mm512_set1_epi32((int)0xffff0000u);
    const __m512 tiny = _mm512_set1_ps(0x1p-126f);
    for (int64_t i = 0; i < d; i += 16) {
        __mmask16 m = (__mmask16)(d - i >= 16 ? 0xffff : (1u << (d - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512i u = _mm512_castps_si512(v);
        __m512i r = _mm512_and_si512(
            _mm512_add_epi32(_mm512_add_epi32(u, half),
                             _mm512_and_si512(_mm512_srli_epi32(u, 16), lsb)),
            hi);
        __m512 e = _mm512_sub_ps(v, _mm512_castsi512_ps(r));
        /* a subnormal is read as zero: off by itself */
        e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(_mm512_abs_ps(v), tiny, _CMP_LT_OQ), v);
        acc = _mm512_fmadd_ps(e, e, acc);
    }
    float s = _mm512_reduce_add_ps(acc);
    return res_bound(s != s || isinf(s) ? (double)NAN : (double)s, d);
}
#endif

static int force_portable; /* tq_cpu_simtopk_force_portable */

static float res_bf16(const float *x, int64_t d)
{
#if defined(__x86_64__)
    /* the bf16 products run only where AVX512-BF16 (and so F) is */
    if (!__atomic_load_n(&force_portable, __ATOMIC_RELAXED))
        return res_bf16_avx512(x, d);
#endif
    return res_bf16_c(x, d);
}

static void xnorms(void *ctx, int64_t begin, int64_t end)
{
    st *p = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t j0 = t * TB, j1 = j0 + TB < p->ndb ? j0 + TB : p->ndb;
        float mx = 0, rx = 0;
        for (int64_t j = j0; j < j1; j++) {
            float s = sumsq_f(p->x + j * p->d, p->d);
            p->xsq[j] = s;
            mx = s > mx || s != s ? s : mx;
            if (p->bf16) {
                float r = res_bf16(p->x + j * p->d, p->d);
                rx = r > rx || r != r ? r : rx;
            }
        }
        p->tile_max[t] = sqrtf(mx);
        if (p->bf16)
            p->tile_res[t] = rx;
    }
}

/* Queries begin..end rounded to bf16 rows of ldq (an even width). */
static void qrows_bf16(void *ctx, int64_t begin, int64_t end)
{
    st *p = ctx;
    tq_cpu_att_bf16_rows(p->q + begin * p->d, p->d, (int)(end - begin), (int)p->d,
                         p->q16 + begin * p->ldq, p->ldq);
}

static void qnorms(void *ctx, int64_t begin, int64_t end)
{
    st *p = ctx;
    for (int64_t i = begin; i < end; i++) {
        p->qnorm[i] = sqrtf(sumsq_f(p->q + i * p->d, p->d));
        if (p->bf16)
            p->qres[i] = res_bf16(p->q + i * p->d, p->d);
    }
}

/* ---- the fold ---- */

/* Whether any of the STRETCH values of a tile row (2 s - xsq for L2, the
 * same two roundings as the row loop) is not below t: most stretches of a
 * tile are skipped whole by this check, which reads every score. */
static int passes_c(const float *s, const float *xsq, int metric, float t)
{
    int any = 0;
    if (metric)
        for (int u = 0; u < STRETCH; u++) /* branch-free: vectorizes */
            any |= !(2.0f * s[u] - xsq[u] < t);
    else
        for (int u = 0; u < STRETCH; u++)
            any |= !(s[u] < t);
    return any;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static int passes_avx512(const float *s, const float *xsq,
                                                             int metric, float t)
{
    __m512 a0 = _mm512_loadu_ps(s), a1 = _mm512_loadu_ps(s + 16), vt = _mm512_set1_ps(t);
    if (metric) {
        __m512 two = _mm512_set1_ps(2.0f);
        a0 = _mm512_sub_ps(_mm512_mul_ps(two, a0), _mm512_loadu_ps(xsq));
        a1 = _mm512_sub_ps(_mm512_mul_ps(two, a1), _mm512_loadu_ps(xsq + 16));
    }
    /* not less than, NaN included */
    return (_mm512_cmp_ps_mask(a0, vt, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(a1, vt, _CMP_NLT_UQ)) != 0;
}
#endif

void tq_cpu_simtopk_force_portable(int on) { __atomic_store_n(&force_portable, on, __ATOMIC_RELAXED); }

static passes_fn passes_best(void)
{
#if defined(__x86_64__)
    if (!__atomic_load_n(&force_portable, __ATOMIC_RELAXED) && __builtin_cpu_supports("avx512f"))
        return passes_avx512;
#endif
    return passes_c;
}

/* The bound of |product value - q . x| for norms nq, nx (and with bf16
 * products, rounding residuals eq, ex): the sgemm's, or the bf16 products'
 * (simscore.h); INFINITY when none holds. */
static double margin(const st *p, double nq, double nx, double eq, double ex)
{
    double m = tq_simscore_margin(p->metric, p->d, nq, nx);
    return p->bf16 ? tq_simscore_margin_bf16_res(p->metric, p->d, m, nq, nx, eq, ex) : m;
}

/* A row's norm and residual bounds, widened for their own roundings */
typedef struct sizes {
    float n, r;
} sizes;

/* The lowest sgemm-derived value that might still beat (wv, wi), as a float
 * that is <= the exact bound; -inf (everything passes) when no bound holds. */
static float pass_threshold(const st *p, float wv, int64_t wi, sizes q, sizes x, float shift)
{
    if (wi < 0 || wv != wv)
        return -INFINITY;
    double m = margin(p, (double)q.n * (1 + 1e-6), (double)x.n * (1 + 1e-6), q.r, x.r);
    double t = (double)wv + (double)shift - m;
    t -= 0x1p-22 * (fabs((double)wv) + fabs((double)shift));
    if (!(t > -(double)FLT_MAX))
        return -INFINITY;
    float f = (float)t;
    return (double)f > t ? nextafterf(f, -INFINITY) : f;
}

/* Rescoring is deferred. A candidate (a product value that passes) is kept
 * with its value; the exact score is computed only once the slice is done,
 * and only if the value still passes then. What raises the bar meanwhile is
 * the k-th best product value T seen: k rows have exact scores >= T - m (m
 * the error bound), so a row whose product value shows its exact score below
 * that cannot be among the k best. Rescoring at every entry into the heap
 * scored some 80 rows per query and slice of 12500 for top-10, where about
 * k matter: a tenth of a search's time. The result is the same: every row that
 * could be among the k best is still scored exactly, and only exact scores
 * rank. */
typedef struct defer {
    heap apx;         /* the k best finite product values (and their rows) */
    float low;        /* k rows have exact scores >= low; -inf until known */
    float *cand_a;    /* candidates: product value and index */
    int64_t *cand_i;
    int64_t cand_n;
    long long scored; /* rows scored exactly */
} defer;

/* The worst entry the heap, or while it is not full the caller's floor
 * (fv, fi), still accepts. */
static void worst(const heap *h, float fv, int64_t fi, float *wv, int64_t *wi)
{
    *wv = h->n == h->k ? h->v[0] : fv;
    *wi = h->n == h->k ? h->i[0] : fi;
}

/* The threshold in product values for rows of a tile of norm nx: the worse
 * of what the heap (or the caller's floor) and `low` allow. */
static float row_threshold(const st *p, const heap *h, const defer *df, float fv, int64_t fi,
                           sizes q, sizes x, float shift)
{
    float wv;
    int64_t wi;
    worst(h, fv, fi, &wv, &wi);
    float t = pass_threshold(p, wv, wi, q, x, shift);
    float u = df->low == -INFINITY ? -INFINITY : pass_threshold(p, df->low, 0, q, x, shift);
    return u > t ? u : t;
}

/* A finite product value into the k best; low follows their k-th: an exact
 * lower bound, the value less the shift, the error bound for the largest
 * norm (and residual) seen (xmax) and twice the rounding slack of
 * pass_threshold. */
static void apx_offer(const st *p, defer *df, float a, int64_t gi, sizes q, sizes xmax,
                      float shift)
{
    heap *h = &df->apx;
    if (h->n == h->k && !tq_simscore_better(a, gi, h->v[0], h->i[0]))
        return; /* the k-th, and so low, stay */
    heap_offer(h, a, gi);
    if (h->n < h->k)
        return;
    const float *v = h->v;
    double m = margin(p, (double)q.n * (1 + 1e-6), (double)xmax.n * (1 + 1e-6), q.r, xmax.r);
    double low = (double)v[0] - (double)shift - m;
    low -= 0x1p-21 * (fabs((double)v[0]) + fabs((double)shift));
    float f = !(low > -(double)FLT_MAX) ? -INFINITY : (float)low;
    if ((double)f > low)
        f = nextafterf(f, -INFINITY);
    df->low = f > df->low ? f : df->low;
}

static sizes qsizes(const st *p, int64_t qi)
{
    return (sizes){p->qnorm[qi], p->bf16 ? p->qres[qi] : 0.0f};
}

static sizes tsizes(const st *p, int64_t tile)
{
    return (sizes){p->tile_max[tile], p->bf16 ? p->tile_res[tile] : 0.0f};
}

/* Scores exactly the candidates that still pass, into the heap. */
static void rescore(const st *p, int64_t qi, heap *h, defer *df, float fv, int64_t fi)
{
    const float *q = p->q + qi * p->d;
    sizes sq = qsizes(p, qi);
    float shift = p->metric ? sq.n * sq.n : 0.0f;
    for (int64_t c = 0; c < df->cand_n; c++) {
        int64_t gi = df->cand_i[c], j = gi - p->base;
        if (df->cand_a[c] < row_threshold(p, h, df, fv, fi, sq, tsizes(p, j / TB), shift))
            continue;
        float v = tq_simscore(p->metric, q, p->x + j * p->d, p->d), wv;
        df->scored++;
        int64_t wi;
        worst(h, fv, fi, &wv, &wi);
        if (tq_simscore_better(v, gi, wv, wi))
            heap_offer(h, v, gi);
    }
    df->cand_n = 0;
}

/* Folds the tile's product values for one query: the rows that pass become
 * candidates. s[j] is q . x_j; nxmax the largest norm of the slice so far. */
static void fold_row(const st *p, int64_t qi, const float *s, int64_t j0, int64_t nb,
                     int64_t tile, heap *h, defer *df, int64_t cap, sizes xmax, float fv,
                     int64_t fi)
{
    const float *xsq = p->xsq + j0;
    sizes sq = qsizes(p, qi), sx = tsizes(p, tile);
    /* L2 ranks by 2 q.x - ||x||^2 here: -||q||^2 is the same for the row */
    float shift = p->metric ? p->qnorm[qi] * p->qnorm[qi] : 0.0f;
    float t = row_threshold(p, h, df, fv, fi, sq, sx, shift);
    int64_t j = 0;
    while (j < nb) {
        int64_t end = j + STRETCH < nb ? j + STRETCH : nb;
        if (end - j == STRETCH && t != -INFINITY && !p->passes(s + j, xsq + j, p->metric, t)) {
            j = end;
            continue;
        }
        for (; j < end; j++) {
            float a = p->metric ? 2.0f * s[j] - xsq[j] : s[j];
            if (a < t)
                continue;
            if (df->cand_n == cap) /* full: score them now, as they came */
                rescore(p, qi, h, df, fv, fi);
            df->cand_a[df->cand_n] = a;
            df->cand_i[df->cand_n++] = p->base + j0 + j;
            if (isfinite(a))
                apx_offer(p, df, a, p->base + j0 + j, sq, xmax, shift);
            t = row_threshold(p, h, df, fv, fi, sq, sx, shift);
        }
    }
}

/* What a job needs besides the lists: the score tile and each query's
 * deferred candidates, allocated once per chunk of jobs. */
typedef struct scratch {
    float *tile;
    uint16_t *pairs; /* bf16: the tile's rows packed as K^T (tq_cpu_att_bf16_pack_k) */
    uint32_t *ktmp;  /* and that packing's scratch */
    float *apx_v, *cand_a;
    int64_t *apx_i, *cand_i;
    defer *df;
    int64_t cap; /* candidates held per query before they are scored */
} scratch;

/* One job: query block qb against database slice sl, into its own heaps. */
static void run_job(st *p, int64_t job, scratch *w)
{
    int64_t qb = job / p->slices, sl = job % p->slices;
    int64_t q0 = qb * QB, mq = p->nq - q0 < QB ? p->nq - q0 : QB;
    int64_t s0 = sl * p->slice_rows, s1 = s0 + p->slice_rows < p->ndb ? s0 + p->slice_rows : p->ndb;
    int64_t k = p->k;
    float *pv = p->part_v + job * QB * k, *tile = w->tile;
    int64_t *pi = p->part_i + job * QB * k, *pn = p->part_n + job * QB;
    for (int64_t r = 0; r < mq; r++) {
        pn[r] = 0;
        w->df[r] = (defer){{w->apx_v + r * k, w->apx_i + r * k, 0, k}, -INFINITY,
                           w->cand_a + r * w->cap, w->cand_i + r * w->cap, 0, 0};
    }
    sizes xmax = {0, 0};
    for (int64_t j0 = s0; j0 < s1; j0 += TB) {
        int64_t nb = s1 - j0 < TB ? s1 - j0 : TB;
        sizes sx = tsizes(p, j0 / TB);
        xmax.n = sx.n > xmax.n || sx.n != sx.n ? sx.n : xmax.n;
        xmax.r = sx.r > xmax.r || sx.r != sx.r ? sx.r : xmax.r;
        if (p->bf16) {
            tq_cpu_att_bf16_pack_k(p->x + j0 * p->d, p->d, (int)nb, p->d, w->pairs, w->ktmp);
            tq_cpu_att_bf16_product((int)mq, (int)p->d, (int)nb, 1.0f, p->q16 + q0 * p->ldq,
                                    p->ldq, w->pairs, 0.0f, tile, TB);
        } else if (p->d > 0)
            p->sgemm(0, 1, (int)mq, (int)nb, (int)p->d, 1.0f, p->q + q0 * p->d, (int)p->d,
                     p->x + j0 * p->d, (int)p->d, 0.0f, tile, TB);
        else
            memset(tile, 0, (size_t)(mq * TB) * sizeof *tile);
        for (int64_t r = 0; r < mq; r++) {
            int64_t qi = q0 + r;
            heap h = {pv + r * k, pi + r * k, pn[r], k};
            /* the caller's list bounds what can matter: its k-th entry */
            float fv = p->vals[qi * k + k - 1];
            int64_t fi = p->idx[qi * k + k - 1];
            fold_row(p, qi, tile + r * TB, j0, nb, j0 / TB, &h, &w->df[r], w->cap, xmax, fv, fi);
            pn[r] = h.n;
        }
    }
    for (int64_t r = 0; r < mq; r++) {
        int64_t qi = q0 + r;
        heap h = {pv + r * k, pi + r * k, pn[r], k};
        rescore(p, qi, &h, &w->df[r], p->vals[qi * k + k - 1], p->idx[qi * k + k - 1]);
        pn[r] = h.n;
        heap_sort(&h);
        __atomic_add_fetch(&p->rescored, w->df[r].scored, __ATOMIC_RELAXED);
    }
}

static void jobs_fn(void *ctx, int64_t begin, int64_t end)
{
    st *p = ctx;
    scratch w;
    w.cap = 4 * p->k + 128;
    w.tile = aligned_alloc(64, (size_t)QB * TB * sizeof *w.tile);
    w.apx_v = malloc((size_t)(QB * p->k) * sizeof *w.apx_v);
    w.apx_i = malloc((size_t)(QB * p->k) * sizeof *w.apx_i);
    w.cand_a = malloc((size_t)(QB * w.cap) * sizeof *w.cand_a);
    w.cand_i = malloc((size_t)(QB * w.cap) * sizeof *w.cand_i);
    w.df = malloc(QB * sizeof *w.df);
    /* bf16: TB keys of (d + 1) / 2 pairs, in strips of 32; the packing's
     * scratch a key's pairs rounded to 16 words */
    int64_t pairs = (p->d + 1) / 2;
    w.pairs = p->bf16 ? tq_cpu_alloc64((size_t)(TB * 2 * pairs) * sizeof *w.pairs) : NULL;
    w.ktmp = p->bf16 ? tq_cpu_alloc64((size_t)(TB * ((pairs + 15) & ~15)) * sizeof *w.ktmp) : NULL;
    if (w.tile && w.apx_v && w.apx_i && w.cand_a && w.cand_i && w.df &&
        (!p->bf16 || (w.pairs && w.ktmp)))
        for (int64_t j = begin; j < end; j++)
            run_job(p, j, &w);
    /* else caught by the caller: part_n stays -1 */
    free(w.tile);
    free(w.pairs);
    free(w.ktmp);
    free(w.apx_v);
    free(w.apx_i);
    free(w.cand_a);
    free(w.cand_i);
    free(w.df);
}

/* Merges the caller's list and every slice's finds of each query, best first. */
static void merge_fn(void *ctx, int64_t begin, int64_t end)
{
    st *p = ctx;
    int64_t k = p->k, S = p->slices;
    int64_t at[S + 1];
    float *mv = malloc((size_t)k * sizeof *mv);
    int64_t *mi = malloc((size_t)k * sizeof *mi);
    if (!mv || !mi) {
        free(mv), free(mi);
        __atomic_store_n(&p->merge_failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t qi = begin; qi < end; qi++) {
        int64_t qb = qi / QB, r = qi % QB;
        const float *cv = p->vals + qi * k;
        const int64_t *ci = p->idx + qi * k;
        for (int64_t s = 0; s <= S; s++)
            at[s] = 0;
        for (int64_t o = 0; o < k; o++) {
            /* list S is the caller's (k entries, maybe empty slots) */
            int64_t best = S;
            float bv = at[S] < k ? cv[at[S]] : NAN;
            int64_t bi = at[S] < k ? ci[at[S]] : -1;
            for (int64_t s = 0; s < S; s++) {
                int64_t job = qb * S + s;
                if (at[s] >= p->part_n[job * QB + r])
                    continue;
                float v = p->part_v[(job * QB + r) * k + at[s]];
                int64_t i = p->part_i[(job * QB + r) * k + at[s]];
                if (tq_simscore_better(v, i, bv, bi))
                    best = s, bv = v, bi = i;
            }
            at[best]++;
            mv[o] = bi < 0 ? -INFINITY : bv;
            mi[o] = bi;
        }
        memcpy(p->vals + qi * k, mv, (size_t)k * sizeof *mv);
        memcpy(p->idx + qi * k, mi, (size_t)k * sizeof *mi);
    }
    free(mv);
    free(mi);
}

tq_status tq_cpu_simtopk(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                         int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    (void)ctx;
    st p;
    memset(&p, 0, sizeof p);
    p.q = tq_cpu_ptr(q);
    p.x = tq_cpu_ptr(db);
    p.vals = tq_cpu_ptr(vals);
    p.idx = tq_cpu_ptr(idx);
    p.nq = q->dims[0];
    p.ndb = db->dims[0];
    p.d = q->dims[1];
    p.k = vals->dims[1];
    p.base = idx_base;
    p.metric = metric == TQ_METRIC_L2;
    if (p.nq == 0 || p.ndb == 0 || p.k == 0)
        return TQ_OK;
    const char *engine;
    p.sgemm = tq_cpu_sgemm_current(&engine);
    /* (d up to 2^20: the bf16 products count their k in an int, pairs a key) */
    p.bf16 = p.d > 0 && p.d <= (1 << 20) && tq_device_rank_precision(q->dev) == TQ_DTYPE_BF16 &&
             tq_cpu_att_bf16_use();
    p.ldq = (int)((p.d + 1) & ~1);
    p.passes = passes_best();
    p.qblocks = (p.nq + QB - 1) / QB;
    /* slices: by the shape alone (never the thread count) */
    int64_t slices = (WANT_JOBS + p.qblocks - 1) / p.qblocks;
    int64_t most = p.ndb / MIN_SLICE > 1 ? p.ndb / MIN_SLICE : 1;
    int64_t mem = PART_BYTES_MAX / (p.qblocks * QB * p.k * 12);
    slices = slices < most ? slices : most;
    slices = slices < mem ? slices : mem;
    if (slices < 1)
        slices = 1;
    /* slices hold whole tiles */
    int64_t tiles = (p.ndb + TB - 1) / TB;
    p.slice_rows = (tiles + slices - 1) / slices * TB;
    p.slices = (p.ndb + p.slice_rows - 1) / p.slice_rows;
    int64_t jobs = p.qblocks * p.slices;

    tq_status stt = TQ_OK;
    p.qnorm = malloc((size_t)p.nq * sizeof *p.qnorm);
    p.xsq = malloc((size_t)p.ndb * sizeof *p.xsq);
    p.tile_max = malloc((size_t)tiles * sizeof *p.tile_max);
    p.part_v = malloc((size_t)(jobs * QB * p.k) * sizeof *p.part_v);
    p.part_i = malloc((size_t)(jobs * QB * p.k) * sizeof *p.part_i);
    p.part_n = malloc((size_t)(jobs * QB) * sizeof *p.part_n);
    p.q16 = p.bf16 ? tq_cpu_alloc64((size_t)(p.nq * p.ldq) * sizeof *p.q16) : NULL;
    p.qres = p.bf16 ? malloc((size_t)p.nq * sizeof *p.qres) : NULL;
    p.tile_res = p.bf16 ? malloc((size_t)tiles * sizeof *p.tile_res) : NULL;
    if (!p.qnorm || !p.xsq || !p.tile_max || !p.part_v || !p.part_i || !p.part_n ||
        (p.bf16 && (!p.q16 || !p.qres || !p.tile_res))) {
        stt = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory");
        goto done;
    }
    for (int64_t i = 0; i < jobs * QB; i++)
        p.part_n[i] = -1;
    tq_parallel_for(p.nq, 1 + 16384 / (p.d ? p.d : 1), qnorms, &p);
    if (p.bf16)
        tq_parallel_for(p.nq, 1 + 16384 / p.d, qrows_bf16, &p);
    tq_parallel_for(tiles, 1 + 16 / (1 + p.d / 64), xnorms, &p);
    /* OpenBLAS serves at most 64 concurrent callers (see matmul.c) */
    tq_parallel_for(jobs, engine[0] == 'O' ? (jobs + 63) / 64 : 1, jobs_fn, &p);
    for (int64_t j = 0; j < jobs; j++) {
        int64_t mq = p.nq - j / p.slices * QB < QB ? p.nq - j / p.slices * QB : QB;
        for (int64_t r = 0; r < mq; r++)
            if (p.part_n[j * QB + r] < 0) {
                stt = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory for a score tile");
                goto done;
            }
    }
    tq_parallel_for(p.nq, 1 + 4096 / (p.k * (p.slices + 1)), merge_fn, &p);
    if (p.merge_failed)
        stt = tq_fail(TQ_ERR_NOMEM, "simtopk: out of memory to merge the lists");
    __atomic_add_fetch(&q->dev->rescored, p.rescored, __ATOMIC_RELAXED);
done:
    free(p.q16);
    free(p.qres);
    free(p.tile_res);
    free(p.qnorm);
    free(p.xsq);
    free(p.tile_max);
    free(p.part_v);
    free(p.part_i);
    free(p.part_n);
    return stt;
}
