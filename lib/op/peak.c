/* peak.c: tq-bench's probe of a GPU's peak FMA rate (the backend's fma_peak
 * kernel), kept out of the op API: a benchmark's measuring stick, not an op. */
#include "backend.h"
#include "internal.h"

/* The backend has the hook and the device's kernels have the probe (an
 * image built before it lacks it: tq-bench then keeps the sgemm ceiling). */
int tq_device_has_fma_peak(tq_device *dev)
{
    double flops;
    return dev->backend->fma_peak && dev->backend->fma_peak(dev->ctx, NULL, 0, &flops) == TQ_OK;
}

tq_status tq_device_fma_peak(tq_device *dev, tq_tensor *out, int64_t iters, double *flops)
{
    *flops = 0;
    if (!dev->backend->fma_peak)
        return tq_fail(TQ_ERR_RUNTIME, "%s: no FMA peak kernel on this backend", dev->name);
    if (!out || out->dev != dev || out->dtype != TQ_DTYPE_F32 || iters < 1)
        return tq_fail(TQ_ERR_USAGE, "%s: the FMA peak probe takes an f32 tensor of this device "
                       "and at least one round", dev->name);
    return dev->backend->fma_peak(dev->ctx, out, iters, flops);
}
