/* codescreen.c: the int8 screen of a threshold search on the CPU
 * (tq_op_codescreen). A pair's value, qs xs (q . x) + qa . xb, is evaluated
 * in double from the exact integer dot product, and its bit is set when it is
 * at least -slack, a slack far above double's rounding error: so every pair
 * whose exact value is >= 0 is set, whatever the kernel. The dot products
 * come from the kernels and the walk that codematrix uses (code_walk.c). */
#include "cpu.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct job {
    tq_code_job c;    /* first: the walk's part (code_walk.c) */
    const float *qa;  /* [nq, m] the queries' terms */
    double *xbt;      /* [m][ndb + 24] the rows' terms, transposed and padded */
    float *xbf, *xsf; /* the same terms, and the scales, in f32 (padded) */
    double *slack;    /* [nq] */
    float *slackf;    /* [nq] the f32 pass's slack; 0: no f32 pass for the query */
    int m;
    int32_t *out;     /* [nq, words] */
    int64_t words;
} job;

static void set_bits(int32_t *row, int64_t c0, uint32_t bits)
{
    while (bits) {
        int64_t c = c0 + __builtin_ctz(bits);
        row[c >> 5] = (int32_t)((uint32_t)row[c >> 5] | 1u << (c & 31));
        bits &= bits - 1;
    }
}

/* The value of query i and row r from their dot product, in double. */
static double value(const job *j, int64_t i, int64_t r, int32_t dot)
{
    double v = (double)dot * ((double)j->c.qs[i] * (double)j->c.xs[r]);
    for (int k = 0; k < j->m; k++)
        v += (double)j->qa[i * j->m + k] * j->xbt[(size_t)k * (size_t)(j->c.ndb + 24) + r];
    return v;
}

static void mark(const job *j, int64_t i, int64_t r, int32_t dot)
{
    if (value(j, i, r, dot) >= -j->slack[i])
        set_bits(j->out + i * j->words, r, 1);
}

/* Rows [b0, b1) for queries [begin, end): 4 x 4 tiles where a kernel has
 * them, then pair by pair (rows holding -128, or no AVX2). */
static void block_pairs(void *ctx, int64_t begin, int64_t end, int64_t b0, int64_t b1)
{
    const job *j = ctx;
    const int8_t *x = (const int8_t *)j->c.x, *q = (const int8_t *)j->c.q;
    int64_t d = j->c.d, i = begin;
    for (; j->c.kern.dot4 && i + 4 <= end; i += 4) {
        const int8_t *q4[4] = {q + i * d, q + (i + 1) * d, q + (i + 2) * d, q + (i + 3) * d};
        int64_t r = b0;
        for (; r + 4 <= b1; r += 4) {
            const int8_t *x4[4] = {x + r * d, x + (r + 1) * d, x + (r + 2) * d, x + (r + 3) * d};
            int32_t dots[16];
            j->c.kern.dot4(q4, x4, d, dots);
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++)
                    mark(j, i + a, r + b, dots[4 * a + b]);
        }
        for (; r < b1; r++)
            for (int a = 0; a < 4; a++)
                mark(j, i + a, r, j->c.kern.dot(q4[a], x + r * d, d));
    }
    for (; i < end; i++)
        for (int64_t r = b0; r < b1; r++)
            mark(j, i, r, j->c.kern.dot(q + i * d, x + r * d, d));
}

#if defined(__x86_64__)
/* The rows r0 + [0, n) of the block at column col (n <= 24) that pass, as
 * bits. An f32 pass first, 8 rows a step: its error is below 2^-19 M, under
 * its slack of 2^-18 M, so it drops no row that value() would keep; the few
 * it keeps are decided by value(), so the bits are value()'s. */
__attribute__((target("avx2"))) static uint32_t pass_mask(const job *j, const int32_t *dots,
                                                           int64_t i, int64_t col, int n)
{
    size_t stride = (size_t)(j->c.ndb + 24);
    uint32_t m = 0;
    if (j->slackf[i] > 0) {
        const __m256 qs = _mm256_set1_ps(j->c.qs[i]), lo = _mm256_set1_ps(-j->slackf[i]);
        __m256 a[8];
        for (int k = 0; k < j->m; k++)
            a[k] = _mm256_set1_ps(j->qa[i * j->m + k]);
        for (int r = 0; r < n; r += 8) {
            __m256 v = _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(dots + r)));
            v = _mm256_mul_ps(v, _mm256_mul_ps(qs, _mm256_loadu_ps(j->xsf + col + r)));
            for (int k = 0; k < j->m; k++)
                v = _mm256_add_ps(v, _mm256_mul_ps(a[k], _mm256_loadu_ps(j->xbf + k * stride + col + r)));
            m |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(v, lo, _CMP_GE_OQ)) << r;
        }
    } else {
        m = ~0u;
    }
    m = n < 32 ? m & ((1u << n) - 1) : m;
    for (uint32_t b = m; b; b &= b - 1) {
        int r = __builtin_ctz(b);
        if (!(value(j, i, col + r, dots[r]) >= -j->slack[i]))
            m &= ~(1u << r);
    }
    return m;
}

/* A tile's passing pairs into the bits. */
static void tile(void *ctx, const tq_i8_strips *S, const int32_t *dots, int64_t i, int qn,
                 int64_t b0, int64_t r0, int n)
{
    (void)S;
    const job *j = ctx;
    for (int a = 0; a < qn; a++) {
        uint32_t m = pass_mask(j, dots + 24 * a, i + a, b0 + r0, n);
        if (m)
            set_bits(j->out + (i + a) * j->words, b0 + r0, m);
    }
}

/* Rows [b0, b1), packed in S, for queries [begin, end), 4 by 24 at a time. */
static void block_strips(void *ctx, const tq_i8_strips *S, int64_t begin, int64_t end,
                         int64_t b0, int64_t b1)
{
    tq_i8_strips_tiles(S, begin, end, b0, b1, tile, ctx);
}
#endif

tq_status tq_cpu_codescreen(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *qterms, const tq_tensor *db, const tq_tensor *dbscale,
                            const tq_tensor *dbterms, tq_tensor *out)
{
    (void)ctx;
    int64_t nq = q->dims[0], ndb = db->dims[0], d = q->dims[1];
    job j = {.qa = tq_tensor_host(qterms), .m = (int)qterms->dims[1],
             .out = tq_tensor_host(out), .words = out->dims[1]};
    memset(j.out, 0, (size_t)(nq * j.words) * sizeof *j.out);
    if (nq == 0 || ndb == 0)
        return TQ_OK;
    size_t stride = (size_t)(ndb + 24);
    j.xbt = calloc((size_t)j.m * stride + 1, sizeof *j.xbt);
    j.xbf = calloc((size_t)(j.m + 1) * stride + 1, sizeof *j.xbf);
    j.slack = malloc((size_t)nq * sizeof *j.slack);
    j.slackf = malloc((size_t)nq * sizeof *j.slackf);
    if (!j.xbt || !j.xbf || !j.slack || !j.slackf) {
        free(j.xbt), free(j.xbf), free(j.slack), free(j.slackf);
        return tq_fail(TQ_ERR_NOMEM, "codescreen: out of memory");
    }
    /* the slack: 2^-40 of the largest magnitude a query's value could add
     * up, where double's error is below 2^-50 of it (9 roundings at most) */
    const float *xb = tq_tensor_host(dbterms), *xs = tq_tensor_host(dbscale),
                *qs = tq_tensor_host(qscale);
    double xbmax[8] = {0}, xsmax = 0;
    j.xsf = j.xbf + (size_t)j.m * stride;
    for (int64_t r = 0; r < ndb; r++) {
        xsmax = fmax(xsmax, fabs((double)xs[r]));
        j.xsf[r] = xs[r];
        for (int k = 0; k < j.m; k++) {
            double v = (double)xb[r * j.m + k];
            j.xbt[(size_t)k * stride + (size_t)r] = v;
            j.xbf[(size_t)k * stride + (size_t)r] = xb[r * j.m + k];
            xbmax[k] = fmax(xbmax[k], fabs(v));
        }
    }
    for (int64_t i = 0; i < nq; i++) {
        double mag = fabs((double)qs[i]) * xsmax * 16384.0 * (double)d;
        for (int k = 0; k < j.m; k++)
            mag += fabs((double)j.qa[i * j.m + k]) * xbmax[k];
        j.slack[i] = mag * 0x1p-40;
        /* f32 holds the pass's numbers, and its underflows weigh nothing */
        j.slackf[i] = mag > 0x1p-60 && mag < 0x1p60 ? (float)(mag * 0x1p-18) : 0;
    }
#if defined(__x86_64__)
    tq_code_job_init(&j.c, q, qscale, db, dbscale, block_pairs, block_strips, NULL);
#else
    tq_code_job_init(&j.c, q, qscale, db, dbscale, block_pairs, NULL, NULL);
#endif
    tq_code_job_run(&j.c);
    free(j.xbt), free(j.xbf), free(j.slack), free(j.slackf);
    return TQ_OK;
}
