/* launch.c: kernel launches. Arguments travel packed in one buffer (the
 * `extra` form of cuLaunchKernel / hipModuleLaunchKernel), each at its natural
 * alignment, so that the driver checks the buffer's size against the kernel's
 * parameters: a wrong argument list fails at launch, not in the kernel. */
#include "gpu.h"

static const char *const kernel_names[K_COUNT] = {
    [K_ADD] = "tq_k_add", [K_ADD_ROW] = "tq_k_add_row", [K_SCALE] = "tq_k_scale",
    [K_GELU] = "tq_k_gelu", [K_RELU] = "tq_k_relu", [K_TANH] = "tq_k_tanh",
    [K_SIGMOID] = "tq_k_sigmoid", [K_ROWNORM] = "tq_k_rownorm", [K_NORMALIZE] = "tq_k_normalize",
    [K_SOFTMAX] = "tq_k_softmax", [K_LAYERNORM] = "tq_k_layernorm", [K_GATHER] = "tq_k_gather",
    [K_CONVERT] = "tq_k_convert", [K_MATMUL] = "tq_k_matmul", [K_TOPK] = "tq_k_topk",
    [K_ATTENTION] = "tq_k_attention", [K_ATTENTION_WEIGHTS] = "tq_k_attention_weights",
    [K_ATTENTION_RECEIVED] = "tq_k_attention_received",
    [K_ATTENTION_FLASH] = "tq_k_attention_flash",
    [K_SELECT] = "tq_k_select", [K_ABOVE] = "tq_k_above", [K_RESCORE] = "tq_k_rescore",
    [K_FMA_PEAK] = "tq_k_fma_peak",
};

const char *TQ_GPU(kernel_name)(int k) { return kernel_names[k]; }

void TQ_GPU(arg)(gpu_args *a, const void *v, size_t n)
{
    size_t at = (a->size + n - 1) / n * n; /* n is 1, 2, 4 or 8: its own alignment */
    if (at + n > sizeof a->buf) {
        a->size = sizeof a->buf + 1; /* caught by launch */
        return;
    }
    memcpy(a->buf + at, v, n);
    a->size = at + n;
}

tq_status TQ_GPU(launch)(tq_gpu_ctx *c, int kernel, unsigned gx, unsigned gy, unsigned gz,
                         unsigned block, unsigned shared, gpu_args *a)
{
    if (!c->fn[kernel])
        return tq_fail(TQ_ERR_RUNTIME, "%s: kernel %s is not in this build's image", TQ_GPU_NAME,
                       kernel_names[kernel]);
    if (a->size > sizeof a->buf)
        return tq_fail(TQ_ERR_RUNTIME, "%s: arguments of %s overflow", TQ_GPU_NAME,
                       kernel_names[kernel]);
    /* Exactly where the last parameter ends, not rounded up to the largest
     * alignment: the driver compares it with the kernel's own size, and an
     * H200 refused (ptr, ptr, u64, float) passed as 32 bytes instead of 28
     * (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). */
    size_t size = a->size;
    void *extra[] = {(void *)1, a->buf, (void *)2, &size, c->api->launch_end};
    gpu_res r = c->api->launch(c->fn[kernel], gx, gy, gz, block, 1, 1, shared, c->stream, NULL, extra);
    if (r) {
        char what[96];
        snprintf(what, sizeof what, "launching %s", kernel_names[kernel]);
        return TQ_GPU(fail)(c, r, GPU_CALL("cuLaunchKernel", "hipModuleLaunchKernel"), what);
    }
    return TQ_OK;
}
