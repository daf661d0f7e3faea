/* ops_attention.c: the fused attention op on Vulkan
 * (kernels/vulkan/attention.comp): one dispatch for the outputs, which also
 * leaves each query row's softmax max and sum in a scratch buffer; then, when
 * asked, one for the weights and one for the received scores; the _bias
 * variants when the op has a score bias (MPNet's relative positions). */
#include "vk.h"
#include "../op/hostpath.h"

#include <math.h>

typedef struct att_pc {
    uint32_t q_off, k_off, v_off, o_off, st_off, len_off, qg_off, kg_off;
    uint32_t B, Lq, Lk, H, Dk, Dv;
    float scale;
    uint32_t causal, has_len, has_groups;
    uint32_t bias_off;
} att_pc;

tq_status tq_vk_attention(void *ctx, const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                          const tq_attention_args *a, tq_tensor *out)
{
    tq_vk_ctx *c = ctx;
    int r3 = q->rank == 3;
    int64_t B = r3 ? q->dims[0] : 1, Lq = q->dims[r3], Lk = k->dims[r3];
    int64_t H = a->heads, Dk = q->dims[r3 + 1] / H, Dv = v->dims[r3 + 1] / H;
    /* the bias variants bind a ninth buffer, which a device may not allow */
    if (a->bias && c->caps.max_buffers < 9)
        return tq_host_attention(q, k, v, a, out);
    if (Dv > 4 * c->wg)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: attention takes heads of up to %d values", 4 * c->wg);
    if (tq_tensor_numel(q) > UINT32_MAX || tq_tensor_numel(k) > UINT32_MAX ||
        tq_tensor_numel(v) > UINT32_MAX || B * H * Lq * Lk > UINT32_MAX)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: attention operands over 2^32 elements");
    int64_t rows = B * H * Lq;
    if (!B || (!rows && !a->received))
        return TQ_OK;
    /* m and l of every query row, for the second pass */
    void *stats;
    tq_status st = tq_vk_alloc(c, (size_t)(2 * rows + 1) * 4, &stats);
    if (st)
        return st;
    const tq_tensor *len = a->key_len, *qg = a->qgroup, *kg = a->kgroup;
    att_pc pc = {tq_vk_word(q), tq_vk_word(k), tq_vk_word(v), tq_vk_word(out), 0,
                 len ? tq_vk_word(len) : 0, qg ? tq_vk_word(qg) : 0, kg ? tq_vk_word(kg) : 0,
                 (uint32_t)B, (uint32_t)Lq, (uint32_t)Lk, (uint32_t)H, (uint32_t)Dk, (uint32_t)Dv,
                 a->scale != 0 ? a->scale : (float)(1.0 / sqrt((double)Dk)), a->causal != 0,
                 len != NULL, qg != NULL, a->bias ? tq_vk_word(a->bias) : 0};
    /* absent optional inputs are stood in for by q (never read) */
    tq_vk_arg args[9] = {{q->buf, 0}, {k->buf, 0}, {v->buf, 0}, {out->buf, 1}, {stats, 1},
                         {len ? len->buf : q->buf, 0}, {qg ? qg->buf : q->buf, 0},
                         {kg ? kg->buf : q->buf, 0}, {a->bias ? a->bias->buf : q->buf, 0}};
    const int nargs = a->bias ? 9 : 8;
    const char *sg = c->caps.subgroup_arith ? "_sg" : "", *bs = a->bias ? "_bias" : "";
    char name[40];
    uint32_t gx, gy;
    snprintf(name, sizeof name, "attention%s%s", bs, sg);
    tq_vk_groups(c, (uint64_t)rows, 1, &gx, &gy);
    st = rows ? tq_vk_dispatch(c, name, args, nargs, &pc, sizeof pc, gx, gy, 1) : TQ_OK;
    if (!st && a->weights && rows) {
        args[3] = (tq_vk_arg){a->weights->buf, 1};
        pc.o_off = tq_vk_word(a->weights);
        snprintf(name, sizeof name, "attention_weights%s", bs);
        st = tq_vk_dispatch(c, name, args, nargs, &pc, sizeof pc, gx, gy, 1);
    }
    if (!st && a->received && Lk) {
        args[3] = (tq_vk_arg){a->received->buf, 1};
        pc.o_off = tq_vk_word(a->received);
        snprintf(name, sizeof name, "attention_received%s%s", bs, sg);
        tq_vk_groups(c, (uint64_t)(B * Lk), 1, &gx, &gy);
        st = tq_vk_dispatch(c, name, args, nargs, &pc, sizeof pc, gx, gy, 1);
    }
    tq_vk_free(c, stats); /* back to the pool: reuse is ordered after these */
    return st;
}
