/* sgemm-rate.c: measures tq_op_matmul (OpenBLAS and the built-in sgemm) and
 * tq_op_topk on the CPU device. Build: make, then
 *   cc -O2 -Ilib -D_GNU_SOURCE scripts/sgemm-rate.c lib/libtq.a -lz -ldl -lm -pthread
 * Usage: sgemm-rate [N [THREADS]] (default 2048, all cores). */
#include "cpu/cpu.h"
#include "tq.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fill(tq_tensor *t, unsigned seed)
{
    float *p = tq_tensor_host(t);
    for (int64_t i = 0; i < tq_tensor_numel(t); i++)
        p[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
}

int main(int argc, char **argv)
{
    int64_t n = argc > 1 ? atoll(argv[1]) : 2048;
    if (argc > 2)
        tq_threads_set(atoi(argv[2]));
    tq_device *dev;
    if (tq_device_open("cpu", &dev)) {
        fprintf(stderr, "sgemm-rate: %s\n", tq_errmsg());
        return 1;
    }
    printf("%s\n", tq_device_describe(dev));
    int64_t d2[2] = {n, n};
    tq_tensor *a, *b, *c;
    if (tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &a) || tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &b) ||
        tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &c))
        return 1;
    fill(a, 1);
    fill(b, 2);
    for (int builtin = 0; builtin < 2; builtin++) {
        tq_cpu_blas_force_builtin(builtin);
        const char *name;
        tq_cpu_sgemm_current(&name);
        tq_op_matmul(a, 0, b, 0, 1, 0, c); /* warm up */
        double best = 1e30;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            tq_op_matmul(a, 0, b, 0, 1, 0, c);
            double dt = now() - t0;
            best = dt < best ? dt : best;
        }
        printf("sgemm %lld^3, threads %d, %s: %.1f GFLOP/s\n", (long long)n, tq_threads_get(),
               name, 2.0 * (double)n * (double)n * (double)n / best / 1e9);
    }
    tq_cpu_blas_force_builtin(0);
    tq_tensor_free(a);
    tq_tensor_free(b);
    tq_tensor_free(c);

    int64_t xd[2] = {1000, 100000}, kd[2] = {1000, 10};
    tq_tensor *x, *v, *ix;
    if (tq_tensor_new(dev, TQ_DTYPE_F32, 2, xd, &x) || tq_tensor_new(dev, TQ_DTYPE_F32, 2, kd, &v) ||
        tq_tensor_new(dev, TQ_DTYPE_I64, 2, kd, &ix))
        return 1;
    fill(x, 3);
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        tq_op_topk(x, 10, v, ix);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    printf("topk 1000 x 100000, k=10, threads %d: %.1f ms\n", tq_threads_get(), best * 1e3);
    tq_tensor_free(x);
    tq_tensor_free(v);
    tq_tensor_free(ix);
    tq_device_close(dev);
    return 0;
}
