/* timer.c: timing a device's work on the device's own clock (CUDA and HIP
 * events, Vulkan timestamp queries), for tq-bench: what lies between the two
 * marks in the device's queue, without the host's cost of submitting and
 * waiting. A device without a timer is timed by its callers with the host's
 * clock. */
#include "backend.h"
#include "internal.h"

const char *tq_device_timer_name(const tq_device *dev)
{
    const tq_backend *b = dev->backend;
    return b->timer_begin && b->timer_end && !dev->timer_why[0] ? b->timer_name : NULL;
}

const char *tq_device_timer_why(const tq_device *dev) { return dev->timer_why; }

tq_status tq_device_timer_begin(tq_device *dev)
{
    const tq_backend *b = dev->backend;
    if (!tq_device_timer_name(dev))
        return tq_fail(TQ_ERR_RUNTIME, "%s: no device timer%s%s", dev->name,
                       dev->timer_why[0] ? ": " : "", dev->timer_why);
    /* a mark recorded into a graph would time its replays, not this run */
    if (dev->recording)
        return tq_fail(TQ_ERR_USAGE, "%s: no timer while a graph is recorded", dev->name);
    tq_status st = b->timer_begin(dev->ctx);
    if (st) /* a timer that fails once would fail again: the host's clock from now on */
        snprintf(dev->timer_why, sizeof dev->timer_why, "%s unavailable: %s", b->timer_name,
                 tq_errmsg());
    return st;
}

tq_status tq_device_timer_end(tq_device *dev, double *seconds)
{
    *seconds = 0;
    if (!tq_device_timer_name(dev))
        return tq_fail(TQ_ERR_USAGE, "%s: no device timer was started", dev->name);
    return dev->backend->timer_end(dev->ctx, seconds);
}
