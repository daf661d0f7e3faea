/* triad.c: the CPU's memory bandwidth as STREAM measures it, the triad
 * a[i] = b[i] + s * c[i] over arrays far larger than the caches (64 MiB
 * each), on every worker thread; 12 bytes of traffic per element counted
 * (STREAM's convention: no write-allocate). */
#include "bench.h"

#include <stdlib.h>

#define TRIAD_N ((int64_t)1 << 24)
#define TRIAD_CHUNK ((int64_t)1 << 16)

typedef struct triad {
    float *a, *b, *c;
    float s;
} triad;

static void triad_range(void *ctx, int64_t begin, int64_t end)
{
    triad *t = ctx;
    float *restrict a = t->a;
    const float *restrict b = t->b, *restrict c = t->c;
    for (int64_t i = begin; i < end; i++)
        a[i] = b[i] + t->s * c[i];
}

static void init_range(void *ctx, int64_t begin, int64_t end)
{
    triad *t = ctx; /* first touch on the threads that will use the pages */
    for (int64_t i = begin; i < end; i++)
        t->a[i] = 0, t->b[i] = 1, t->c[i] = 2;
}

static tq_status triad_call(void *ctx)
{
    tq_parallel_for(TRIAD_N, TRIAD_CHUNK, triad_range, ctx);
    return TQ_OK;
}

tq_status tqb_triad(double min_time, double *gbs)
{
    triad t = {malloc(TRIAD_N * 4), malloc(TRIAD_N * 4), malloc(TRIAD_N * 4), 3.0f};
    tq_status st = TQ_OK;
    if (!t.a || !t.b || !t.c) {
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    } else {
        tq_parallel_for(TRIAD_N, TRIAD_CHUNK, init_range, &t);
        tqb_timing tm;
        if (!(st = tqb_time(triad_call, &t, NULL, 5, min_time, &tm))) {
            *gbs = 12.0 * (double)TRIAD_N / tm.min / 1e9;
            tqb_timing_free(&tm);
        }
    }
    free(t.a);
    free(t.b);
    free(t.c);
    return st;
}
