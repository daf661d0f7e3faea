/* timing.c: how tq-bench times a call: one warm-up call (first-use costs:
 * pipelines, packing, page faults), then repetitions of enough calls to last
 * at least min_time each (the count chosen from the warm-up and a second
 * timed call, raised if a repetition still comes in short), the device synced
 * at the end of each. Median, min, max and the median absolute deviation. */
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double tqb_median(const double *v, int n)
{
    if (n <= 0)
        return 0;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return v[0];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

/* iters calls, then a sync: seconds in all. */
static tq_status batch(tqb_call_fn fn, void *ctx, tq_device *dev, int64_t iters, double *secs)
{
    double t0 = now();
    for (int64_t i = 0; i < iters; i++) {
        tq_status st = fn(ctx);
        if (st)
            return st;
    }
    tq_status st = dev ? tq_device_sync(dev) : TQ_OK;
    *secs = now() - t0;
    return st;
}

tq_status tqb_time(tqb_call_fn fn, void *ctx, tq_device *dev, int reps, double min_time,
                   tqb_timing *out)
{
    memset(out, 0, sizeof *out);
    if (reps < 1)
        reps = 1;
    double one;
    tq_status st = batch(fn, ctx, dev, 1, &one); /* warm-up */
    /* a warm-up shorter than min_time says little of the steady call: time
     * one more; a longer one is call enough (one call a repetition) */
    if (!st && one < min_time)
        st = batch(fn, ctx, dev, 1, &one);
    if (st)
        return st;
    int64_t iters = 1;
    if (one < min_time)
        iters = (int64_t)ceil(min_time * 1.1 / (one > 1e-9 ? one : 1e-9));
    out->times = malloc((size_t)reps * sizeof *out->times);
    if (!out->times)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int r = 0; r < reps; r++) {
        double secs;
        for (int tries = 0;; tries++) {
            if ((st = batch(fn, ctx, dev, iters, &secs))) {
                tqb_timing_free(out);
                return st;
            }
            /* short: the calls got faster than the estimate (caches, clocks);
             * more calls, and the earlier repetitions stand as measured */
            if (secs >= min_time || tries == 4)
                break;
            iters = (int64_t)ceil((double)iters * min_time * 1.2 / (secs > 1e-9 ? secs : 1e-9));
        }
        out->times[r] = secs / (double)iters;
    }
    out->reps = reps;
    out->iters = iters;
    out->median = tqb_median(out->times, reps);
    out->min = out->max = out->times[0];
    double *dev_abs = malloc((size_t)reps * sizeof *dev_abs);
    if (!dev_abs) {
        tqb_timing_free(out);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    for (int r = 0; r < reps; r++) {
        out->min = fmin(out->min, out->times[r]);
        out->max = fmax(out->max, out->times[r]);
        dev_abs[r] = fabs(out->times[r] - out->median);
    }
    out->mad_pct = out->median > 0 ? 100.0 * tqb_median(dev_abs, reps) / out->median : 0;
    free(dev_abs);
    return TQ_OK;
}

void tqb_timing_free(tqb_timing *t)
{
    free(t->times);
    t->times = NULL;
}
