/* attention.c: the fused attention op on CUDA/HIP (kernels/cuda/attention*.cu):
 * one launch for the outputs, which also leaves each query row's softmax max
 * and sum in a scratch block; then, when asked, one for the weights and one
 * for the received scores. The outputs come from tq_k_attention_flash (tiles
 * of 64 queries, FlashAttention-2 style) for heads of up to FLASH_D values,
 * else from tq_k_attention (a block a query row). The kernels take one
 * argument list, the score bias (MPNet's relative positions) included. */
#include "gpu.h"
#include "../op/hostpath.h"

#include <math.h>

#define ATT_BLOCK 256u
#define FLASH_BLOCK 128u /* FL_THREADS, FL_BQ and FL_D of attention_flash.cu */
#define FLASH_BQ 64u
#define FLASH_D 64u

static unsigned grid_for(uint64_t n) { return (unsigned)(n < (1u << 20) ? (n ? n : 1) : (1u << 20)); }

tq_status TQ_GPU(attention)(void *ctx, const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                            const tq_attention_args *a, tq_tensor *out)
{
    tq_gpu_ctx *c = ctx;
    int r3 = q->rank == 3;
    uint64_t B = (uint64_t)(r3 ? q->dims[0] : 1), Lq = (uint64_t)q->dims[r3],
             Lk = (uint64_t)k->dims[r3], H = (uint64_t)a->heads;
    uint64_t Dk = (uint64_t)q->dims[r3 + 1] / H, Dv = (uint64_t)v->dims[r3 + 1] / H;
    /* each thread folds up to 4 output columns; B, H, Lq, Lk travel as 32 bits */
    if (!c->fn[K_ATTENTION] || (a->weights && !c->fn[K_ATTENTION_WEIGHTS]) ||
        (a->received && !c->fn[K_ATTENTION_RECEIVED]) || Dv > 4 * ATT_BLOCK ||
        B > UINT32_MAX || Lq > UINT32_MAX || Lk > UINT32_MAX || H * Dk > UINT32_MAX)
        return tq_host_attention(q, k, v, a, out);
    uint64_t rows = B * H * Lq;
    if (!B || (!rows && !a->received))
        return TQ_OK;
    gpu_block *stats = NULL;
    tq_status st = TQ_GPU(pool_alloc)(c, (size_t)(2 * rows + 1) * 4, &stats);
    if (st)
        return st;
    const tq_tensor *len = a->key_len, *qg = a->qgroup, *kg = a->kgroup, *bs = a->bias;
    gpu_ptr pq = gpu_tensor_ptr(q), pk = gpu_tensor_ptr(k), pv = gpu_tensor_ptr(v);
    gpu_ptr pst = stats->ptr, none = pq; /* absent inputs: never read */
    gpu_ptr pl = len ? gpu_tensor_ptr(len) : none, pqg = qg ? gpu_tensor_ptr(qg) : none,
            pkg = kg ? gpu_tensor_ptr(kg) : none, pbs = bs ? gpu_tensor_ptr(bs) : none;
    unsigned uB = (unsigned)B, uLq = (unsigned)Lq, uLk = (unsigned)Lk, uH = (unsigned)H,
             uDk = (unsigned)Dk, uDv = (unsigned)Dv;
    float scale = a->scale != 0 ? a->scale : (float)(1.0 / sqrt((double)Dk));
    unsigned causal = a->causal != 0, has_len = len != NULL, has_groups = qg != NULL,
             has_bias = bs != NULL;
    /* the same list for the three kernels, but for the output pointer */
    gpu_ptr outs[3] = {gpu_tensor_ptr(out), a->weights ? gpu_tensor_ptr(a->weights) : 0,
                       a->received ? gpu_tensor_ptr(a->received) : 0};
    /* (its tile loops count in 32 bits: lengths well below 2^32) */
    int flash = c->fn[K_ATTENTION_FLASH] && Dk >= 1 && Dk <= FLASH_D && Dv <= FLASH_D &&
                Lq <= INT32_MAX && Lk <= INT32_MAX;
    const int kern[3] = {flash ? K_ATTENTION_FLASH : K_ATTENTION, K_ATTENTION_WEIGHTS,
                         K_ATTENTION_RECEIVED};
    /* the flash kernel's units: (b, h, tile of FLASH_BQ queries) */
    uint64_t units[3] = {flash ? B * H * ((Lq + FLASH_BQ - 1) / FLASH_BQ) : rows, rows, B * Lk};
    unsigned block[3] = {flash ? FLASH_BLOCK : ATT_BLOCK, ATT_BLOCK, ATT_BLOCK};
    int want[3] = {rows > 0, a->weights && rows, a->received && Lk};
    c->api->set_current(c->dev, c->ctx);
    for (int i = 0; i < 3 && !st; i++) {
        if (!want[i])
            continue;
        gpu_args g = {.size = 0};
        ARG(&g, pq);
        ARG(&g, pk);
        ARG(&g, pv);
        ARG(&g, outs[i]);
        ARG(&g, pst);
        ARG(&g, pl);
        ARG(&g, pqg);
        ARG(&g, pkg);
        ARG(&g, pbs);
        ARG(&g, uB);
        ARG(&g, uLq);
        ARG(&g, uLk);
        ARG(&g, uH);
        ARG(&g, uDk);
        ARG(&g, uDv);
        ARG(&g, scale);
        ARG(&g, causal);
        ARG(&g, has_len);
        ARG(&g, has_groups);
        ARG(&g, has_bias);
        st = TQ_GPU(launch)(c, kern[i], grid_for(units[i]), 1, 1, block[i], 0, &g);
    }
    TQ_GPU(pool_free)(c, stats); /* back to the pool: reuse is ordered after these */
    return st;
}
