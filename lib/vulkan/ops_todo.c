#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "vk.h"
#define TODO(...) { (void)ctx; return tq_fail(TQ_ERR_RUNTIME, "vulkan: not yet"); }
tq_status tq_vk_topk(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx) TODO()
tq_status tq_vk_attention(void *ctx, const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                          const tq_attention_args *args, tq_tensor *out) TODO()
tq_status tq_vk_simtopk(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                        int64_t idx_base, tq_tensor *vals, tq_tensor *idx) TODO()
