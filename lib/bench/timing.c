/* timing.c: how tq-bench times a call: one warm-up call (first-use costs:
 * pipelines, packing, page faults), then repetitions of enough calls to last
 * at least min_time each (the count chosen from the warm-up and a second
 * timed call, raised if a repetition still comes in short), the device synced
 * at the end of each. A repetition on a device with a timer of its own
 * (events, timestamp queries) is timed on the device's clock, else on the
 * host's around the calls and the sync. Median, min, max and the median
 * absolute deviation. */
#include "bench.h"
#include "../internal.h"

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

/* TQ_BENCH_TIMER=host: every device on the host's clock, to compare. */
static int host_forced(void)
{
    const char *e = getenv("TQ_BENCH_TIMER");
    return e && !strcmp(e, "host");
}

void tqb_timer_name(const tq_device *dev, char *out, size_t n)
{
    const char *timer = dev ? tq_device_timer_name(dev) : NULL;
    if (timer && !host_forced())
        snprintf(out, n, "%s", timer);
    else if (timer)
        snprintf(out, n, "host clock (TQ_BENCH_TIMER=host)");
    else if (dev && tq_device_timer_why(dev)[0])
        snprintf(out, n, "host clock (%s)", tq_device_timer_why(dev));
    else
        snprintf(out, n, "host clock");
}

/* iters calls, then a sync: *secs the seconds in all on the device's clock
 * while *on_device (cleared when its timer fails to start), else on the
 * host's; *wall on the host's. How many calls a repetition takes is judged
 * by *wall, so that a run lasts as long whichever clock times it: a device
 * time far below the host's (a tiny kernel, a coarse timer giving 0) would
 * otherwise ask for millions of calls. */
static tq_status batch(tqb_call_fn fn, void *ctx, tq_device *dev, int64_t iters, int *on_device,
                       double *secs, double *wall)
{
    double t0 = now();
    if (*on_device && tq_device_timer_begin(dev))
        *on_device = 0;
    tq_status st = TQ_OK;
    for (int64_t i = 0; i < iters && !st; i++)
        st = fn(ctx);
    if (!st && *on_device)
        st = tq_device_timer_end(dev, secs);
    else if (!st && dev)
        st = tq_device_sync(dev);
    *wall = now() - t0;
    if (!*on_device)
        *secs = *wall;
    return st;
}

tq_status tqb_time(tqb_call_fn fn, void *ctx, tq_device *dev, int reps, double min_time,
                   tqb_timing *out)
{
    memset(out, 0, sizeof *out);
    if (reps < 1)
        reps = 1;
    double one, secs;
    int on_device = dev && tq_device_timer_name(dev) && !host_forced();
    tq_status st = batch(fn, ctx, dev, 1, &on_device, &secs, &one); /* warm-up */
    /* a warm-up shorter than min_time says little of the steady call: time
     * one more; a longer one is call enough (one call a repetition) */
    if (!st && one < min_time)
        st = batch(fn, ctx, dev, 1, &on_device, &secs, &one);
    if (st)
        return st;
    int64_t iters = 1;
    if (one < min_time)
        iters = (int64_t)ceil(min_time * 1.1 / (one > 1e-9 ? one : 1e-9));
    out->times = malloc((size_t)reps * sizeof *out->times);
    if (!out->times)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int r = 0; r < reps; r++) {
        double wall;
        int clock = on_device;
        for (int tries = 0;; tries++) {
            if ((st = batch(fn, ctx, dev, iters, &on_device, &secs, &wall))) {
                tqb_timing_free(out);
                return st;
            }
            if (on_device != clock) { /* the timer failed: all on the host's clock */
                r = -1;
                break;
            }
            /* short: the calls got faster than the estimate (caches, clocks);
             * more calls, and the earlier repetitions stand as measured */
            if (wall >= min_time || tries == 4)
                break;
            iters = (int64_t)ceil((double)iters * min_time * 1.2 / (wall > 1e-9 ? wall : 1e-9));
        }
        if (r >= 0)
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
