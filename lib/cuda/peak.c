/* peak.c: tq-bench's FMA peak probe on CUDA and HIP: one launch of
 * kernels/cuda/peak.cu, a thread per element of out (grid-stride past the
 * grid's cap), each running TQ_PEAK_CHAINS chains of iters fused
 * multiply-adds. */
#include "gpu.h"

tq_status TQ_GPU(fma_peak)(void *ctx, tq_tensor *out, int64_t iters, double *flops)
{
    tq_gpu_ctx *c = ctx;
    *flops = 0;
    if (!c->fn[K_FMA_PEAK]) /* an image built before the probe: no ceiling, not an error */
        return tq_fail(TQ_ERR_RUNTIME, "%s: kernel tq_k_fma_peak is not in this build's image",
                       TQ_GPU_NAME);
    if (!out)
        return TQ_OK; /* only asked whether the kernel is there */
    unsigned long long n = (unsigned long long)tq_tensor_numel(out);
    if (iters < 1 || iters > UINT32_MAX || out->dtype != TQ_DTYPE_F32)
        return tq_fail(TQ_ERR_USAGE, "%s: fma_peak takes 1 to 2^32-1 rounds into f32", TQ_GPU_NAME);
    if (!n)
        return TQ_OK;
    unsigned it = (unsigned)iters;
    float m = 0.9999f, add = 1e-4f;
    gpu_ptr po = gpu_tensor_ptr(out);
    gpu_args a = {.size = 0};
    ARG(&a, po);
    ARG(&a, n);
    ARG(&a, it);
    ARG(&a, m);
    ARG(&a, add);
    c->api->set_current(c->dev, c->ctx);
    tq_status st = TQ_GPU(launch)(c, K_FMA_PEAK, gpu_stride_grid(n), 1, 1, GPU_BLOCK, 0, &a);
    if (!st)
        *flops = 2.0 * TQ_PEAK_CHAINS * (double)iters * (double)n;
    return st;
}
