/* test_thread.c: the worker pool behind tq_parallel_for: every item done
 * exactly once, chunks that do not depend on the thread count, nested and
 * concurrent calls, workers that sleep and wake, a pool used after fork. */
#include "check.h"
#include "tq.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct rec {
    int64_t n;
    int *count;        /* times each item was visited */
    unsigned char *starts; /* 1 where a chunk began */
    int nested;        /* >0: each call also runs a nested tq_parallel_for */
    int nested_ok;
} rec;

static void nested_fn(void *ctx, int64_t b, int64_t e)
{
    int *sum = ctx;
    __atomic_add_fetch(sum, (int)(e - b), __ATOMIC_RELAXED);
}

static void visit(void *ctx, int64_t b, int64_t e)
{
    rec *r = ctx;
    r->starts[b] = 1;
    for (int64_t i = b; i < e; i++)
        __atomic_add_fetch(&r->count[i], 1, __ATOMIC_RELAXED);
    if (r->nested) {
        int sum = 0;
        tq_parallel_for(r->nested, 1, nested_fn, &sum);
        if (sum != r->nested)
            __atomic_store_n(&r->nested_ok, 0, __ATOMIC_RELAXED);
    }
}

/* Runs one call; returns the chunk starts (caller frees); checks coverage. */
static unsigned char *run(int64_t n, int64_t min_chunk, int threads, int nested)
{
    tq_threads_set(threads);
    rec r = {n, calloc((size_t)n + 1, sizeof(int)), calloc((size_t)n + 1, 1), nested, 1};
    tq_parallel_for(n, min_chunk, visit, &r);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; i++)
        wrong += r.count[i] != 1;
    CHECK(wrong == 0, "n=%lld min_chunk=%lld threads=%d: %lld items not visited exactly once",
          (long long)n, (long long)min_chunk, threads, (long long)wrong);
    CHECK(r.nested_ok, "n=%lld: a nested call did not cover its range", (long long)n);
    free(r.count);
    return r.starts;
}

static void test_cover_and_split(void)
{
    static const int64_t ns[] = {1, 7, 1000, 100003};
    static const int64_t chunks[] = {1, 3, 1000, 1 << 20};
    static const int threads[] = {1, 2, 3, 8};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            unsigned char *first = run(ns[a], chunks[b], threads[0], 0);
            for (size_t t = 1; t < 4; t++) {
                unsigned char *s = run(ns[a], chunks[b], threads[t], 0);
                CHECK(memcmp(first, s, (size_t)ns[a]) == 0,
                      "n=%lld min_chunk=%lld: chunks differ between 1 and %d threads",
                      (long long)ns[a], (long long)chunks[b], threads[t]);
                free(s);
            }
            free(first);
        }
    free(run(5000, 10, 2, 100)); /* nested calls run inline */
    free(run(0, 1, 2, 0));
}

static void *caller(void *arg)
{
    int *bad = arg;
    for (int i = 0; i < 300; i++) {
        rec r = {257 + i, calloc(257 + (size_t)i, sizeof(int)), calloc(257 + (size_t)i, 1), 0, 1};
        tq_parallel_for(r.n, 1, visit, &r);
        for (int64_t j = 0; j < r.n; j++)
            *bad += r.count[j] != 1;
        free(r.count);
        free(r.starts);
    }
    return NULL;
}

static void test_concurrent(void)
{
    tq_threads_set(2);
    pthread_t t[3];
    int bad[3] = {0};
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, caller, &bad[i]);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECK(bad[0] + bad[1] + bad[2] == 0, "concurrent callers: %d items wrong",
          bad[0] + bad[1] + bad[2]);
}

/* Calls spaced wider than the workers' spin, so they go to sleep and must be
 * woken; and back to back, so they are caught spinning. */
static void test_sleep_wake(void)
{
    tq_threads_set(2);
    int64_t wrong = 0;
    for (int i = 0; i < 400; i++) {
        if (i % 4 == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        rec r = {64, calloc(64, sizeof(int)), calloc(64, 1), 0, 1};
        tq_parallel_for(64, 1, visit, &r);
        for (int j = 0; j < 64; j++)
            wrong += r.count[j] != 1;
        free(r.count);
        free(r.starts);
    }
    CHECK(wrong == 0, "sleep/wake: %lld items wrong", (long long)wrong);
}

static void test_fork(void)
{
    tq_threads_set(2);
    free(run(1000, 1, 2, 0)); /* the parent's pool is started */
    pid_t pid = fork();
    if (pid == 0) {
        rec r = {1000, calloc(1000, sizeof(int)), calloc(1000, 1), 0, 1};
        tq_parallel_for(1000, 1, visit, &r);
        int bad = 0;
        for (int i = 0; i < 1000; i++)
            bad += r.count[i] != 1;
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a forked child could not use the pool (status %d)", status);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_thread: timed out: the pool deadlocked\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    alarm(60);
    CHECK(tq_threads_get() >= 1, "tq_threads_get() = %d", tq_threads_get());
    tq_threads_set(3);
    CHECK(tq_threads_get() == 3, "tq_threads_set(3) then get: %d", tq_threads_get());
    test_cover_and_split();
    test_concurrent();
    test_sleep_wake();
    test_fork();
    tq_threads_set(0);
    return CHECK_DONE();
}
