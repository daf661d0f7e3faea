/* ops_peak.c: tq-bench's FMA peak probe on Vulkan (backend.h's fma_peak):
 * one dispatch of kernels/vulkan/peak.comp, an invocation per element of out,
 * each running PEAK_CHAINS chains of iters fused multiply-adds. */
#include "vk.h"

#define PEAK_CHAINS 8 /* as peak.comp */

typedef struct peak_pc {
    uint32_t out_off, n, iters;
    float m, c;
} peak_pc;

tq_status tq_vk_fma_peak(void *ctx, tq_tensor *out, int64_t iters, double *flops)
{
    tq_vk_ctx *c = ctx;
    *flops = 0;
    if (!out) /* only asked: the shader is embedded whenever the backend is */
        return TQ_OK;
    int64_t n = tq_tensor_numel(out);
    if (n > (int64_t)UINT32_MAX - 4096 || iters < 1 || iters > UINT32_MAX)
        return tq_fail(TQ_ERR_USAGE, "vulkan: fma_peak takes under 2^32 elements and rounds");
    peak_pc pc = {tq_vk_word(out), (uint32_t)n, (uint32_t)iters, 0.9999f, 1e-4f};
    tq_vk_arg arg = {out->buf, 1};
    uint32_t gx, gy;
    tq_vk_groups(c, (uint64_t)n, (uint32_t)c->wg, &gx, &gy);
    tq_status st = tq_vk_dispatch(c, "fma_peak", &arg, 1, &pc, sizeof pc, gx, gy, 1);
    if (!st)
        *flops = 2.0 * PEAK_CHAINS * (double)iters * (double)n;
    return st;
}
