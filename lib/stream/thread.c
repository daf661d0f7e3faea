/* thread.c: the persistent worker pool of the CPU paths. Work is split by the
 * size of the problem alone, never by the thread count or timing, so every
 * result is the same whatever the thread count or the scheduling. */
#include "internal.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 255
/* At most this many chunks per call: enough to balance any pool we start, few
 * enough that the cost of taking a chunk stays negligible. */
#define MAX_CHUNKS 256
/* A thread that finished its part spins this long for the next job before it
 * sleeps: tq-embed runs many small ops in a row, and waking a sleeping thread
 * costs tens of microseconds, more than many of those ops take. */
#define SPIN_NS 50000

static int n_threads; /* 0: not set, use TQ_THREADS or all cores */

void tq_threads_set(int n) { __atomic_store_n(&n_threads, n > 0 ? n : 0, __ATOMIC_RELAXED); }

int tq_threads_get(void)
{
    int n = __atomic_load_n(&n_threads, __ATOMIC_RELAXED);
    if (n > 0)
        return n;
    const char *env = getenv("TQ_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    /* the cores this process may run on (taskset, cpusets), counted once */
    static int cores;
    int c = __atomic_load_n(&cores, __ATOMIC_RELAXED);
    if (c <= 0) {
        cpu_set_t set;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        c = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
        if (c <= 0)
            c = online > 0 ? (int)online : 1;
        __atomic_store_n(&cores, c, __ATOMIC_RELAXED);
    }
    return c;
}

typedef struct job {
    tq_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    int64_t next; /* start of the next chunk not yet taken, taken atomically */
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

/* One pool per process. `word` holds a job count (high bits) and how many
 * workers take part in that job (low 16 bits), in one atomic so that a worker
 * never pairs one job's count with another's helpers: it runs a job when word
 * moves and its id is below the helpers. The caller runs chunks too, then
 * waits until `pending` (helpers not yet done) drops to 0. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    int workers;       /* threads started */
    int busy;          /* a call is using the pool; others run inline */
    int sleepers;      /* workers blocked on wake */
    job *cur;          /* valid while pending > 0 */
    uint64_t word;     /* atomic: job count << 16 | helpers */
    int pending;       /* atomic */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          0, 0, 0, NULL, 0, 0};

/* Set in pool threads and in a caller while it runs chunks: a nested call runs
 * inline instead of waiting on the pool it is part of. */
static _Thread_local int in_pool;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until *p differs from v or SPIN_NS pass; returns 1 if it changed. */
static int spin_while_u64(const uint64_t *p, uint64_t v)
{
    uint64_t t0 = now_ns();
    for (int i = 1;; i++) {
        if (__atomic_load_n(p, __ATOMIC_ACQUIRE) != v)
            return 1;
        cpu_relax();
        if (!(i & 63) && now_ns() - t0 > SPIN_NS)
            return 0;
    }
}

static int spin_while_nonzero(const int *p)
{
    uint64_t t0 = now_ns();
    for (int i = 1;; i++) {
        if (!__atomic_load_n(p, __ATOMIC_ACQUIRE))
            return 1;
        cpu_relax();
        if (!(i & 63) && now_ns() - t0 > SPIN_NS)
            return 0;
    }
}

/* The word each worker was started under: a new thread may first run after
 * the job it was started for is published, and must not take that job's word
 * for an old one. Written under pool.mu before pthread_create. */
static uint64_t start_word[MAX_WORKERS];

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    in_pool = 1;
    uint64_t seen = start_word[id];
    for (;;) {
        if (!spin_while_u64(&pool.word, seen)) {
            pthread_mutex_lock(&pool.mu);
            pool.sleepers++;
            while (__atomic_load_n(&pool.word, __ATOMIC_ACQUIRE) == seen)
                pthread_cond_wait(&pool.wake, &pool.mu);
            pool.sleepers--;
            pthread_mutex_unlock(&pool.mu);
        }
        seen = __atomic_load_n(&pool.word, __ATOMIC_ACQUIRE);
        if (id >= (int)(seen & 0xffff))
            continue;
        /* cur was written before word, and the job cannot end (nor cur
         * change) before this worker counts itself out of pending */
        run_chunks(pool.cur);
        if (__atomic_sub_fetch(&pool.pending, 1, __ATOMIC_ACQ_REL) == 0) {
            pthread_mutex_lock(&pool.mu);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.mu);
        }
    }
    return NULL;
}

/* A child of fork() has none of the parent's workers: start from scratch. */
static void pool_after_fork(void)
{
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.workers = pool.busy = pool.sleepers = 0;
    pool.cur = NULL;
    pool.pending = 0;
}

/* Under pool.mu: starts workers up to want; returns how many there are. */
static int pool_grow(int want)
{
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    if (pool.workers == 0 && want > 0)
        pthread_atfork(NULL, NULL, pool_after_fork);
    while (pool.workers < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        start_word[pool.workers] = __atomic_load_n(&pool.word, __ATOMIC_RELAXED);
        int err = pthread_create(&tid, &attr, worker, (void *)(intptr_t)pool.workers);
        pthread_attr_destroy(&attr);
        if (err)
            break; /* run with the threads we have */
        pool.workers++;
    }
    return pool.workers;
}

void tq_parallel_for(int64_t n, int64_t min_chunk, tq_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (min_chunk < 1)
        min_chunk = 1;
    /* The chunks are a function of n and min_chunk only; each item is computed
     * by exactly one call whichever thread makes it. */
    int64_t chunks = n / min_chunk;
    if (chunks > MAX_CHUNKS)
        chunks = MAX_CHUNKS;
    if (chunks < 1)
        chunks = 1;
    job j = {fn, ctx, n, (n + chunks - 1) / chunks, 0};
    chunks = (n + j.chunk - 1) / j.chunk;
    int t = tq_threads_get();
    int helpers = t - 1 < chunks - 1 ? t - 1 : (int)(chunks - 1);
    if (helpers <= 0 || in_pool) {
        run_chunks(&j);
        return;
    }
    pthread_mutex_lock(&pool.mu);
    if (pool.busy) { /* another thread's call holds the pool: do ours alone */
        pthread_mutex_unlock(&pool.mu);
        run_chunks(&j);
        return;
    }
    int have = pool_grow(helpers);
    if (helpers > have)
        helpers = have;
    if (helpers <= 0) {
        pthread_mutex_unlock(&pool.mu);
        run_chunks(&j);
        return;
    }
    pool.busy = 1;
    pool.cur = &j;
    __atomic_store_n(&pool.pending, helpers, __ATOMIC_RELEASE);
    uint64_t count = (__atomic_load_n(&pool.word, __ATOMIC_RELAXED) >> 16) + 1;
    __atomic_store_n(&pool.word, count << 16 | (uint64_t)helpers, __ATOMIC_RELEASE);
    if (pool.sleepers)
        pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    in_pool = 1;
    run_chunks(&j);
    in_pool = 0;

    if (!spin_while_nonzero(&pool.pending)) {
        pthread_mutex_lock(&pool.mu);
        while (__atomic_load_n(&pool.pending, __ATOMIC_ACQUIRE))
            pthread_cond_wait(&pool.done, &pool.mu);
        pthread_mutex_unlock(&pool.mu);
    }
    pthread_mutex_lock(&pool.mu);
    pool.cur = NULL;
    pool.busy = 0;
    pthread_mutex_unlock(&pool.mu);
}
