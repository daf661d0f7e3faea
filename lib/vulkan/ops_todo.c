#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "vk.h"
#define TODO(...) { (void)ctx; return tq_fail(TQ_ERR_RUNTIME, "vulkan: not yet"); }
tq_status tq_vk_attention(void *ctx, const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                          const tq_attention_args *args, tq_tensor *out) TODO()
