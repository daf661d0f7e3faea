/* thread.c: the worker pool of the CPU paths. Work is split by the size of the
 * problem alone, never by timing, so every result is the same whatever the
 * thread count or the scheduling. */
#include "internal.h"

#include <pthread.h>
#include <unistd.h>

static int n_threads; /* 0: not set, use all cores */

void tq_threads_set(int n) { n_threads = n > 0 ? n : 0; }

int tq_threads_get(void)
{
    if (n_threads > 0)
        return n_threads;
    const char *env = getenv("TQ_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

typedef struct job {
    tq_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    int64_t next; /* next chunk start, taken atomically */
} job;

static void run_chunks(job *j)
{
    for (;;) {
        int64_t b = __atomic_fetch_add(&j->next, j->chunk, __ATOMIC_RELAXED);
        if (b >= j->n)
            return;
        int64_t e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->ctx, b, e);
    }
}

static void *worker(void *arg)
{
    run_chunks(arg);
    return NULL;
}

void tq_parallel_for(int64_t n, int64_t min_chunk, tq_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (min_chunk < 1)
        min_chunk = 1;
    int t = tq_threads_get();
    /* Chunks are a fixed function of n and t; each item is computed by exactly
     * one call whatever thread takes it, so output does not depend on timing. */
    int64_t chunks = n / min_chunk;
    if (chunks > 4 * (int64_t)t)
        chunks = 4 * (int64_t)t;
    if (chunks <= 1 || t <= 1) {
        fn(ctx, 0, n);
        return;
    }
    job j = {fn, ctx, n, (n + chunks - 1) / chunks, 0};
    int workers = t - 1 < chunks - 1 ? t - 1 : (int)(chunks - 1);
    pthread_t tid[256];
    if (workers > 256)
        workers = 256;
    int started = 0;
    for (; started < workers; started++)
        if (pthread_create(&tid[started], NULL, worker, &j))
            break;
    run_chunks(&j);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
}
