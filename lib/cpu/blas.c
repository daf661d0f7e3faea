/* blas.c: OpenBLAS, loaded with dlopen on first use (never linked), told which
 * kernel to use when it cannot tell itself, and checked once before it is
 * trusted; the built-in sgemm stands in when any of that fails. */
#include "../internal.h"
#include "cpu.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <strings.h>
#include <sys/resource.h>

/* The library to load; a build may point elsewhere (a test of the fallback). */
#ifndef TQ_OPENBLAS_SONAME
#define TQ_OPENBLAS_SONAME "libopenblas.so.0"
#endif

/* CBLAS enum values (cblas.h), so that the header is not needed to build. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*cblas_sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                               const float *a, int lda, const float *b, int ldb, float beta,
                               float *c, int ldc);

static struct {
    pthread_once_t once;
    void *lib;
    cblas_sgemm_fn sgemm; /* NULL unless loaded and checked */
    char describe[256];
    int force_builtin;    /* atomic: the tests' switch */
} blas = {PTHREAD_ONCE_INIT, NULL, NULL, "", 0};

static void openblas_sgemm(int ta, int tb, int m, int n, int k, float alpha, const float *a,
                           int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    blas.sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
               tb ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* The fastest OpenBLAS kernel family this processor and OS really support.
 * Debian's OpenBLAS 0.3.21 does not know some newer processors and falls back
 * to its generic 'Prescott' kernels, about 5x slower on sgemm. */
static const char *pick_coretype(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd"))
        return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (__builtin_cpu_supports("avx"))
        return "Sandybridge";
#endif
    return NULL;
}

/* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "0.3.21" */
static void config_version(const char *config, char *out, size_t n)
{
    snprintf(out, n, "?");
    if (!config || strncmp(config, "OpenBLAS ", 9))
        return;
    const char *v = config + 9;
    snprintf(out, n, "%.*s", (int)strcspn(v, " "), v);
}

/* Checks the loaded sgemm on small odd products, every transpose, against a
 * double-precision loop. The tolerance is 16 ulp of sum |a||b| per element:
 * a correct f32 product of k = 33 terms stays within about 2 ulp of it; a
 * kernel that is wrong for this processor is off by far more. */
static int check_sgemm(char *why, size_t why_n)
{
    enum { M = 67, N = 45, K = 33 };
    static float a[M * K], b[K * N], c[M * N];
    uint32_t s = 12345;
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const float alpha = 1.5f, beta = -0.75f;
            for (int i = 0; i < M * N; i++)
                c[i] = (float)(i % 7) - 3.0f;
            openblas_sgemm(ta, tb, M, N, K, alpha, a, ta ? M : K, b, tb ? K : N, beta, c, N);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double ref = 0, mag = 0;
                    for (int l = 0; l < K; l++) {
                        double x = ta ? a[l * M + i] : a[i * K + l];
                        double y = tb ? b[j * K + l] : b[l * N + j];
                        ref += x * y;
                        mag += fabs(x * y);
                    }
                    double c0 = (double)((i * N + j) % 7) - 3.0;
                    ref = alpha * ref + beta * c0;
                    mag = fabs(alpha) * mag + fabs(beta * c0);
                    double err = fabs((double)c[i * N + j] - ref);
                    if (!(err <= 16 * 0x1p-24 * mag)) {
                        snprintf(why, why_n,
                                 "failed its check (%s%s product, C[%d,%d] = %g, expected %g)",
                                 ta ? "T" : "N", tb ? "T" : "N", i, j, c[i * N + j], ref);
                        return 0;
                    }
                }
        }
    return 1;
}

/* OpenBLAS 0.3.21 takes a 128 MiB buffer on a calling thread's first large
 * product and, when that mmap fails, retries it forever at full CPU (its
 * blas_memory_alloc never gives up): under an address-space limit (ulimit -v,
 * as batch systems set) a tool would hang instead of failing. Each thread that
 * calls it concurrently takes a buffer of its own, at any later time, so no
 * check of the room left at load time can promise it; with such a limit the
 * built-in sgemm does all, and out of memory stays an error. */
static int address_space_limited(void)
{
    struct rlimit rl;
    return !getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY;
}

static void blas_load(void)
{
    if (address_space_limited()) {
        snprintf(blas.describe, sizeof blas.describe,
                 "built-in %s sgemm (OpenBLAS not used under an address-space limit, "
                 "ulimit -v: it retries a failed allocation forever)",
                 tq_cpu_sgemm_builtin_isa());
        return;
    }
    /* OpenBLAS reads its environment in its constructor: set what we need
     * before dlopen, only where the user has not, and put it back after so
     * that child processes see the user's environment. */
    const char *user_core = getenv("OPENBLAS_CORETYPE");
    const char *picked = NULL;
    if (!user_core || !*user_core) {
        picked = pick_coretype();
        if (picked)
            setenv("OPENBLAS_CORETYPE", picked, 1);
    }
    /* The matmul op runs OpenBLAS on one thread per block of C, from our own
     * pool: OpenBLAS's threads would only idle, and its split of a product
     * depends on the thread count, which would break bit-identical results. */
    int set_threads = !getenv("OPENBLAS_NUM_THREADS");
    if (set_threads)
        setenv("OPENBLAS_NUM_THREADS", "1", 1);
    blas.lib = dlopen(TQ_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (picked)
        unsetenv("OPENBLAS_CORETYPE");
    if (set_threads)
        unsetenv("OPENBLAS_NUM_THREADS");
    if (!blas.lib) {
        snprintf(blas.describe, sizeof blas.describe,
                 "built-in %s sgemm (" TQ_OPENBLAS_SONAME " not found)", tq_cpu_sgemm_builtin_isa());
        return;
    }
    cblas_sgemm_fn sgemm = (cblas_sgemm_fn)dlsym(blas.lib, "cblas_sgemm");
    void (*set_num_threads)(int) = (void (*)(int))dlsym(blas.lib, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))dlsym(blas.lib, "openblas_get_corename");
    char *(*config)(void) = (char *(*)(void))dlsym(blas.lib, "openblas_get_config");
    if (!sgemm || !set_num_threads) {
        snprintf(blas.describe, sizeof blas.describe,
                 "built-in %s sgemm (" TQ_OPENBLAS_SONAME " lacks cblas_sgemm)",
                 tq_cpu_sgemm_builtin_isa());
        return;
    }
    set_num_threads(1);
    char version[32];
    config_version(config ? config() : NULL, version, sizeof version);
    const char *core = corename ? corename() : NULL;
    char kernel[96];
    if (!core)
        snprintf(kernel, sizeof kernel, "unknown kernel");
    else if (user_core && *user_core)
        snprintf(kernel, sizeof kernel, "%s kernel (OPENBLAS_CORETYPE)", core);
    else if (picked && !strcasecmp(core, picked))
        snprintf(kernel, sizeof kernel, "%s kernel (chosen by tq)", core);
    else if (picked) /* loaded earlier by someone else, or OpenBLAS refused */
        snprintf(kernel, sizeof kernel, "%s kernel (tq asked for %s)", core, picked);
    else
        snprintf(kernel, sizeof kernel, "%s kernel (its own choice)", core);
    blas.sgemm = sgemm;
    char why[96];
    if (!check_sgemm(why, sizeof why)) {
        blas.sgemm = NULL;
        snprintf(blas.describe, sizeof blas.describe, "built-in %s sgemm (OpenBLAS %s, %s, %s)",
                 tq_cpu_sgemm_builtin_isa(), version, kernel, why);
        return;
    }
    snprintf(blas.describe, sizeof blas.describe, "OpenBLAS %s, %s, checked", version, kernel);
}

tq_cpu_sgemm_fn tq_cpu_blas_sgemm(void)
{
    pthread_once(&blas.once, blas_load);
    return blas.sgemm ? openblas_sgemm : NULL;
}

void tq_cpu_blas_describe(char *out, size_t n)
{
    pthread_once(&blas.once, blas_load);
    snprintf(out, n, "%s", blas.describe);
}

void tq_cpu_blas_force_builtin(int on) { __atomic_store_n(&blas.force_builtin, on, __ATOMIC_RELAXED); }

tq_cpu_sgemm_fn tq_cpu_sgemm_current(const char **name)
{
    tq_cpu_sgemm_fn f = __atomic_load_n(&blas.force_builtin, __ATOMIC_RELAXED)
                            ? NULL
                            : tq_cpu_blas_sgemm();
    if (name)
        *name = f ? "OpenBLAS" : "built-in";
    return f ? f : tq_cpu_sgemm_builtin;
}
