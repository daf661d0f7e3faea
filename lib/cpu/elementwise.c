/* elementwise.c: the ops that touch each element (or row) on its own, on the
 * CPU: add, scale, gather and convert (gelu has gelu.c). */
#include "../internal.h"
#include "cpu.h"

#include <pthread.h>

enum { CHUNK = 16384 }; /* elements per chunk of work */

typedef struct ew {
    const float *x, *b;
    float *y;
    int64_t d; /* row length, for the broadcast add */
    float alpha;
} ew;

static void add_range(void *ctx, int64_t begin, int64_t end)
{
    const ew *p = ctx;
    for (int64_t i = begin; i < end; i++)
        p->y[i] = p->x[i] + p->b[i];
}

static void add_row_range(void *ctx, int64_t begin, int64_t end)
{
    const ew *p = ctx;
    for (int64_t r = begin; r < end; r++)
        for (int64_t j = 0; j < p->d; j++)
            p->y[r * p->d + j] = p->x[r * p->d + j] + p->b[j];
}

tq_status tq_cpu_add(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y)
{
    (void)ctx;
    ew p = {tq_cpu_ptr(a), tq_cpu_ptr(b), tq_cpu_ptr(y), tq_cpu_cols(a), 0};
    int64_t n = tq_tensor_numel(a);
    if (tq_tensor_numel(b) == n) /* same shape (or a single row: the same) */
        tq_parallel_for(n, CHUNK, add_range, &p);
    else
        tq_parallel_for(tq_cpu_rows(a), 1 + CHUNK / (p.d ? p.d : 1), add_row_range, &p);
    return TQ_OK;
}

static void scale_range(void *ctx, int64_t begin, int64_t end)
{
    const ew *p = ctx;
    for (int64_t i = begin; i < end; i++)
        p->y[i] = p->alpha * p->x[i];
}

tq_status tq_cpu_scale(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y)
{
    (void)ctx;
    ew p = {tq_cpu_ptr(x), NULL, tq_cpu_ptr(y), 0, alpha};
    tq_parallel_for(tq_tensor_numel(x), CHUNK, scale_range, &p);
    return TQ_OK;
}

/* ---- gather ---- */

typedef struct ga {
    const unsigned char *x;
    const int64_t *idx;
    unsigned char *y;
    size_t row; /* bytes */
} ga;

static void gather_rows(void *ctx, int64_t begin, int64_t end)
{
    const ga *p = ctx;
    for (int64_t r = begin; r < end; r++)
        memcpy(p->y + (size_t)r * p->row, p->x + (size_t)p->idx[r] * p->row, p->row);
}

tq_status tq_cpu_gather(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y)
{
    (void)ctx;
    const int64_t *ix = tq_cpu_ptr(idx);
    int64_t n = idx->dims[0], rows = x->dims[0];
    /* every index is checked before any row is copied: a bad one leaves y as
     * it was */
    for (int64_t i = 0; i < n; i++)
        if (ix[i] < 0 || ix[i] >= rows)
            return tq_fail(TQ_ERR_USAGE, "gather: idx[%lld] = %lld is outside the %lld rows of x",
                           (long long)i, (long long)ix[i], (long long)rows);
    ga p = {tq_cpu_ptr(x), ix, tq_cpu_ptr(y), 0};
    p.row = rows ? (size_t)(tq_tensor_numel(x) / rows) * tq_dtype_size(x->dtype) : 0;
    if (p.row)
        tq_parallel_for(n, 1 + (int64_t)(CHUNK * 4 / p.row), gather_rows, &p);
    return TQ_OK;
}

/* ---- convert ---- */

typedef struct cv {
    tq_dtype from, to;
    const unsigned char *x;
    unsigned char *y;
    int64_t d;
    uint64_t x_row, y_row; /* bytes of one row in each dtype */
    pthread_mutex_t mu;
    tq_status st;          /* the first failure, and its message */
    char msg[256];
} cv;

static void convert_rows(void *ctx, int64_t begin, int64_t end)
{
    cv *p = ctx;
    tq_status st = tq_convert(p->to, p->y + (uint64_t)begin * p->y_row, p->from,
                              p->x + (uint64_t)begin * p->x_row, (size_t)((end - begin) * p->d),
                              p->d);
    if (st) { /* the message is in this thread's slot: carry it to the caller */
        pthread_mutex_lock(&p->mu);
        if (!p->st) {
            p->st = st;
            snprintf(p->msg, sizeof p->msg, "%s", tq_errmsg());
        }
        pthread_mutex_unlock(&p->mu);
    }
}

tq_status tq_cpu_convert(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    (void)ctx;
    int64_t d = tq_cpu_cols(x), rows = tq_cpu_rows(x);
    if (rows == 0)
        return TQ_OK;
    cv p = {x->dtype, y->dtype, tq_cpu_ptr(x), tq_cpu_ptr(y), d, 0, 0,
            PTHREAD_MUTEX_INITIALIZER, TQ_OK, ""};
    /* the bytes of one row, whatever the dtype (block and bit codes too) */
    if (tq_dtype_payload_bytes(x->dtype, 1, &d, &p.x_row) ||
        tq_dtype_payload_bytes(y->dtype, 1, &d, &p.y_row))
        return tq_fail_context(TQ_ERR_USAGE, "convert %s to %s", tq_dtype_name(x->dtype),
                               tq_dtype_name(y->dtype));
    tq_parallel_for(rows, 1 + CHUNK / d, convert_rows, &p);
    pthread_mutex_destroy(&p.mu);
    if (p.st)
        return tq_fail(p.st, "%s", p.msg);
    return TQ_OK;
}
