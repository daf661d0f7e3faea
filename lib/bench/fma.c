/* fma.c: the CPU's peak f32 rate, measured: independent chains of fused
 * multiply-adds (more chains than the FMA units' latency times their count,
 * so that none waits) in the widest vectors this CPU has, chosen by CPUID at
 * run time, on every worker thread at once. No memory traffic: registers only. */
#include "bench.h"
#include "../cpu/gemm.h"

#include <stdlib.h>
#include <string.h>

/* ITERS rounds of the chains per chunk; the chunks are spread over the
 * threads, many more chunks than threads so that no thread idles at the end. */
#define ITERS 100000
#define CHUNKS_PER_THREAD 8

typedef float (*fma_fn)(int64_t iters);

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* acc = acc * m + c converges to c / (1 - m): no overflow, no subnormals. */
#define FMA_KERNEL(NAME, TARGET, VEC, SET1, FMADD, ADD, CHAINS, REDUCE)            \
    __attribute__((target(TARGET))) static float NAME(int64_t iters)               \
    {                                                                              \
        VEC acc[CHAINS];                                                           \
        const VEC m = SET1(0.9999f), c = SET1(1e-4f);                              \
        for (int j = 0; j < CHAINS; j++)                                           \
            acc[j] = SET1((float)j);                                               \
        for (int64_t i = 0; i < iters; i++) {                                      \
            _Pragma("GCC unroll 16") /* the chains in registers, not memory */     \
            for (int j = 0; j < CHAINS; j++)                                       \
                acc[j] = FMADD(acc[j], m, c);                                      \
        }                                                                          \
        for (int j = 1; j < CHAINS; j++)                                           \
            acc[0] = ADD(acc[0], acc[j]);                                          \
        return REDUCE(acc[0]);                                                     \
    }

__attribute__((target("avx512f"))) static float sum512(__m512 v) { return _mm512_reduce_add_ps(v); }
__attribute__((target("avx"))) static float sum256(__m256 v)
{
    float f[8];
    _mm256_storeu_ps(f, v);
    return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
/* 16 chains of 16 lanes (32 registers), 12 of 8 (16 registers) */
FMA_KERNEL(fma_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16,
           sum512)
FMA_KERNEL(fma_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 12,
           sum256)
#endif

/* Scalar chains the compiler may contract or vectorize as it can. */
static float fma_portable(int64_t iters)
{
    float acc[8];
    for (int j = 0; j < 8; j++)
        acc[j] = (float)j;
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++)
            acc[j] = acc[j] * 0.9999f + 1e-4f;
    }
    float s = 0;
    for (int j = 0; j < 8; j++)
        s += acc[j];
    return s;
}

typedef struct fma_run {
    fma_fn fn;
    int64_t chunks;
    volatile float sink;
} fma_run;

static void fma_chunks(void *ctx, int64_t begin, int64_t end)
{
    fma_run *r = ctx;
    float s = 0;
    for (int64_t i = begin; i < end; i++)
        s += r->fn(ITERS);
    r->sink = s; /* keeps the work alive */
}

static tq_status fma_call(void *ctx)
{
    fma_run *r = ctx;
    tq_parallel_for(r->chunks, 1, fma_chunks, r);
    return TQ_OK;
}

/* The kernel for this CPU and its flops per call of ITERS rounds. */
static fma_fn pick(const char **isa, double *flops)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *isa = "avx512";
        *flops = 2.0 * 16 * 16 * ITERS;
        return fma_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *isa = "avx2+fma";
        *flops = 2.0 * 12 * 8 * ITERS;
        return fma_avx2;
    }
#endif
    *isa = "portable";
    *flops = 2.0 * 8 * ITERS;
    return fma_portable;
}

tq_status tqb_fma_peak(double min_time, double *gflops, const char **isa)
{
    double per_chunk;
    fma_run r = {pick(isa, &per_chunk), (int64_t)tq_threads_get() * CHUNKS_PER_THREAD, 0};
    tqb_timing t;
    tq_status st = tqb_time(fma_call, &r, NULL, 5, min_time, &t);
    if (st)
        return st;
    *gflops = per_chunk * (double)r.chunks / t.min / 1e9; /* the peak: the best of them */
    tqb_timing_free(&t);
    return TQ_OK;
}

/* The AMX tiles' peak (amx.c's rounds of tile products from registers), on
 * every worker thread at once, as the FMA peak: 0 where there are none. */
typedef struct amx_run {
    int kind;
    int64_t chunks;
    volatile double done;
} amx_run;

#define AMX_ROUNDS 20000

static void amx_chunks(void *ctx, int64_t begin, int64_t end)
{
    amx_run *r = ctx;
    double d = 0;
    for (int64_t i = begin; i < end; i++)
        d += tq_cpu_amx_peak(r->kind, AMX_ROUNDS);
    r->done = d;
}

static tq_status amx_call(void *ctx)
{
    amx_run *r = ctx;
    tq_parallel_for(r->chunks, 1, amx_chunks, r);
    return TQ_OK;
}

tq_status tqb_amx_peak(int kind, double min_time, double *gflops)
{
    *gflops = 0;
    if (!tq_cpu_amx_use(kind))
        return TQ_OK;
    amx_run r = {kind, (int64_t)tq_threads_get() * CHUNKS_PER_THREAD, 0};
    tqb_timing t;
    tq_status st = tqb_time(amx_call, &r, NULL, 5, min_time, &t);
    if (st)
        return st;
    /* two flops a multiply-add, as the FMA peak counts them; a round's
     * multiply-adds as the kernel counts them (one round more, ~50 ns) */
    double per_chunk = tq_cpu_amx_peak(kind, 1) * AMX_ROUNDS;
    *gflops = 2.0 * per_chunk * (double)r.chunks / t.min / 1e9;
    tqb_timing_free(&t);
    return TQ_OK;
}
