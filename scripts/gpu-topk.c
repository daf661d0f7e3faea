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

/* The best of three passes of the score tiles' products alone (0 on an
 * error): q rows against db rows, tile by tile into one tile buffer. */
static double gemm_tiles(tq_device *dev, const tq_tensor *tq_, const tq_tensor *tx, int64_t q,
                         int64_t n, int64_t d)
{
    enum { TQ_ROWS = 1024, TX_ROWS = 8192 };
    int64_t cd[2] = {TQ_ROWS, TX_ROWS};
    tq_tensor *c = NULL;
    if (tq_tensor_new(dev, TQ_DTYPE_F32, 2, cd, &c))
        return 0;
    double best = INFINITY;
    for (int r = 0; r < 4 && best > 0; r++) {
        double t0 = now();
        for (int64_t q0 = 0; q0 < q && best > 0; q0 += TQ_ROWS)
            for (int64_t j0 = 0; j0 < n && best > 0; j0 += TX_ROWS) {
                int64_t mq = q - q0 < TQ_ROWS ? q - q0 : TQ_ROWS, nb = n - j0 < TX_ROWS ? n - j0 : TX_ROWS;
                int64_t ad[2] = {mq, d}, xd[2] = {nb, d}, sd[2] = {mq, nb};
                tq_tensor *a = NULL, *x = NULL, *s = NULL;
                if (tq_tensor_view(tq_, (size_t)(q0 * d) * 4, TQ_DTYPE_F32, 2, ad, &a) ||
                    tq_tensor_view(tx, (size_t)(j0 * d) * 4, TQ_DTYPE_F32, 2, xd, &x) ||
                    tq_tensor_view(c, 0, TQ_DTYPE_F32, 2, sd, &s) || tq_op_matmul(a, 0, x, 1, 1.0f, 0.0f, s))
                    best = 0;
                tq_tensor_free(a), tq_tensor_free(x), tq_tensor_free(s);
            }
        if (best > 0 && tq_device_sync(dev))
            best = 0;
        double dt = now() - t0;
        if (best > 0 && r > 0 && dt < best)
            best = dt;
    }
    tq_tensor_free(c);
    return best;
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
    /* where the time goes: the score GEMMs alone, in tiles of CUDA's simtopk
     * (lib/cuda/simtopk.c: 1024 x 8192), the rest being the selection, the
     * exact rescoring and the transfers */
    double gemm = gemm_tiles(dev, tq_, tx, q, n, d);
    if (gemm > 0)
        printf("simtopk %s: its score GEMMs alone in 1024 x 8192 tiles: %.6f s (%.0f%% of the op)\n",
               tq_device_name(dev), gemm, 100.0 * gemm / best);
    tq_tensor_free(tq_);
    tq_tensor_free(tx);
    tq_tensor_free(tv);
    tq_tensor_free(ti);
    tq_device_close(dev);
    return 0;
}
