/* gpu-topk.c: the rate of exact top-10 search through the op API on one
 * device (scripts/bench-gpu.sh): Q queries against DB rows of D values, by
 * dot product, tq_op_simtopk over the whole database already on the device,
 * as tq-simmat --topk runs it; the best of three timed calls after a warm-up,
 * each ended by tq_device_sync. Build: make, then
 *   cc -O2 -Ilib scripts/gpu-topk.c lib/libtq.a -lz -ldl -lm -pthread
 * Usage: gpu-topk DEVICE Q DB D. Prints one line:
 *   simtopk DEVICE QxDBxD k=10: SECONDS s, GFLOP/s (2 Q DB D flops) */
#include "tq.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { K = 10 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "gpu-topk: %s: %s\n", what, tq_errmsg());
    return 1;
}

/* n rows of d uniform values, uploaded one slice at a time (the host never
 * holds the whole database). */
static tq_status fill(tq_tensor *t, int64_t n, int64_t d, unsigned seed)
{
    int64_t rows = 4096;
    float *h = malloc((size_t)(rows * d) * sizeof *h);
    tq_tensor *slice = NULL;
    tq_status st = h ? TQ_OK : TQ_ERR_NOMEM;
    for (int64_t r0 = 0; !st && r0 < n; r0 += rows) {
        int64_t m = n - r0 < rows ? n - r0 : rows;
        for (int64_t i = 0; i < m * d; i++)
            h[i] = (float)((seed = seed * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        int64_t dims[2] = {m, d}; /* offsets: 4096 d floats, a multiple of 16 bytes */
        if (!(st = tq_tensor_view(t, (size_t)(r0 * d) * sizeof *h, TQ_DTYPE_F32, 2, dims, &slice)))
            st = tq_tensor_upload(slice, h, (size_t)(m * d) * sizeof *h);
        tq_tensor_free(slice);
        slice = NULL;
    }
    free(h);
    return st;
}

static tq_status reset(tq_tensor *v, tq_tensor *ix, int64_t q)
{
    float *hv = malloc((size_t)(q * K) * sizeof *hv);
    int64_t *hi = malloc((size_t)(q * K) * sizeof *hi);
    tq_status st = hv && hi ? TQ_OK : TQ_ERR_NOMEM;
    for (int64_t i = 0; !st && i < q * K; i++)
        hv[i] = -INFINITY, hi[i] = -1;
    if (!st && !(st = tq_tensor_upload(v, hv, (size_t)(q * K) * sizeof *hv)))
        st = tq_tensor_upload(ix, hi, (size_t)(q * K) * sizeof *hi);
    free(hv);
    free(hi);
    return st;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: gpu-topk DEVICE Q DB D\n");
        return 2;
    }
    int64_t q = atoll(argv[2]), n = atoll(argv[3]), d = atoll(argv[4]);
    tq_device *dev;
    if (tq_device_open(argv[1], &dev))
        return fail(argv[1]);
    int64_t qd[2] = {q, d}, xd[2] = {n, d}, kd[2] = {q, K};
    tq_tensor *tq_, *tx, *tv, *ti;
    if (tq_tensor_new(dev, TQ_DTYPE_F32, 2, qd, &tq_) || tq_tensor_new(dev, TQ_DTYPE_F32, 2, xd, &tx) ||
        tq_tensor_new(dev, TQ_DTYPE_F32, 2, kd, &tv) || tq_tensor_new(dev, TQ_DTYPE_I64, 2, kd, &ti))
        return fail("tensors");
    if (fill(tq_, q, d, 1) || fill(tx, n, d, 2))
        return fail("upload");
    double best = INFINITY;
    for (int r = 0; r < 4; r++) { /* the first call warms up */
        if (reset(tv, ti, q) || tq_device_sync(dev))
            return fail("reset");
        double t0 = now();
        if (tq_op_simtopk(tq_, tx, TQ_METRIC_DOT, 0, tv, ti) || tq_device_sync(dev))
            return fail("simtopk");
        double dt = now() - t0;
        if (r > 0 && dt < best)
            best = dt;
    }
    printf("simtopk %s %lldx%lldx%lld k=%d: %.6f s, %.1f GFLOP/s\n", tq_device_name(dev),
           (long long)q, (long long)n, (long long)d, K, best,
           2.0 * (double)q * (double)n * (double)d / best / 1e9);
    tq_tensor_free(tq_);
    tq_tensor_free(tx);
    tq_tensor_free(tv);
    tq_tensor_free(ti);
    tq_device_close(dev);
    return 0;
}
