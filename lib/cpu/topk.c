/* topk.c: the k largest of each row on the CPU, by a bounded heap over one
 * pass of the row (O(m log k)), with a vector-friendly pre-filter that skips
 * whole blocks below the current k-th best. Order: larger first, ties to the
 * lower index, NaN below every number (NaNs among themselves by index). */
#include "../internal.h"
#include "cpu.h"

/* The heap lives in the output row itself (values and indices side by side),
 * so no memory is needed beyond it. */
typedef struct heap {
    float *v;
    int64_t *i;
} heap;

/* 1 if (av, ai) ranks before (bv, bi). */
static inline int better(float av, int64_t ai, float bv, int64_t bi)
{
    int an = av != av, bn = bv != bv;
    if (an != bn)
        return bn;
    if (!an && av != bv)
        return av > bv;
    return ai < bi;
}

#define BETTER(h, a, b) better((h).v[a], (h).i[a], (h).v[b], (h).i[b])

/* A heap whose root is the worst of the items kept. */
static void sift_down(heap h, int64_t n, int64_t at)
{
    for (;;) {
        int64_t w = at, l = 2 * at + 1, r = l + 1;
        if (l < n && BETTER(h, w, l))
            w = l;
        if (r < n && BETTER(h, w, r))
            w = r;
        if (w == at)
            return;
        float tv = h.v[at];
        int64_t ti = h.i[at];
        h.v[at] = h.v[w];
        h.i[at] = h.i[w];
        h.v[w] = tv;
        h.i[w] = ti;
        at = w;
    }
}

typedef struct tk {
    const float *x;
    float *vals;
    int64_t *idx;
    int64_t m, k;
} tk;

enum { BLOCK = 32 };

static void topk_row(const float *x, int64_t m, int64_t k, heap h)
{
    for (int64_t i = 0; i < k; i++) {
        h.v[i] = x[i];
        h.i[i] = i;
    }
    for (int64_t i = k / 2; i-- > 0;)
        sift_down(h, k, i);
    /* Every later index is higher than all kept ones, so a new item enters only
     * if strictly greater than the root, or a number while the root is NaN. */
    int64_t j = k;
    while (j < m) {
        float thr = h.v[0];
        if (thr == thr && j + BLOCK <= m) {
            int any = 0;
            for (int t = 0; t < BLOCK; t++) /* branch-free: vectorizes */
                any |= x[j + t] > thr;
            if (!any) {
                j += BLOCK;
                continue;
            }
        }
        int64_t end = j + BLOCK < m ? j + BLOCK : m;
        for (; j < end; j++)
            if (better(x[j], j, h.v[0], h.i[0])) {
                h.v[0] = x[j];
                h.i[0] = j;
                sift_down(h, k, 0);
            }
    }
    /* heap sort: the worst goes to the back, leaving the best first */
    for (int64_t n = k; n > 1; n--) {
        float tv = h.v[0];
        int64_t ti = h.i[0];
        h.v[0] = h.v[n - 1];
        h.i[0] = h.i[n - 1];
        h.v[n - 1] = tv;
        h.i[n - 1] = ti;
        sift_down(h, n - 1, 0);
    }
}

static void topk_rows(void *ctx, int64_t begin, int64_t end)
{
    const tk *p = ctx;
    for (int64_t r = begin; r < end; r++)
        topk_row(p->x + r * p->m, p->m, p->k, (heap){p->vals + r * p->k, p->idx + r * p->k});
}

tq_status tq_cpu_topk(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals,
                      tq_tensor *idx)
{
    (void)ctx;
    tk p = {tq_cpu_ptr(x), tq_cpu_ptr(vals), tq_cpu_ptr(idx), x->dims[1], k};
    if (k == 0)
        return TQ_OK;
    tq_parallel_for(x->dims[0], 1 + 65536 / (p.m ? p.m : 1), topk_rows, &p);
    return TQ_OK;
}
