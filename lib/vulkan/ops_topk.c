/* ops_topk.c: top-k on Vulkan (kernels/vulkan/topk.comp): rounds of a
 * shared-memory sort over each row, one dispatch a round, the running best k
 * kept in the outputs between rounds. k up to half the sort (512) on the
 * device; larger k through the host. */
#include "../op/hostpath.h"
#include "vk.h"

/* S in topk.comp: 12 KiB of shared memory, under the 16 KiB every device has */
enum { SORT_SLOTS = 1024 };

typedef struct tk_pc {
    uint32_t x_off, v_off, i_off, rows, m, k, pos, take, kept;
} tk_pc;

/* Rounds over n items per row: the first takes S of them, each later one
 * S - k beside the k kept. */
static tq_status rounds(tq_vk_ctx *c, const char *shader, tq_vk_arg *args, int nargs, tk_pc *pc,
                        int64_t rows, int64_t n, uint32_t kept)
{
    uint32_t gx, gy;
    tq_vk_groups(c, (uint64_t)rows, 1, &gx, &gy);
    for (int64_t pos = 0; pos < n;) {
        int64_t take = SORT_SLOTS - kept;
        if (take > n - pos)
            take = n - pos;
        pc->pos = (uint32_t)pos;
        pc->take = (uint32_t)take;
        pc->kept = kept;
        tq_status st = tq_vk_dispatch(c, shader, args, nargs, pc, sizeof *pc, gx, gy, 1);
        if (st)
            return st;
        pos += take;
        kept = kept + take < pc->k ? (uint32_t)(kept + take) : pc->k;
    }
    return TQ_OK;
}

tq_status tq_vk_topk(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx)
{
    tq_vk_ctx *c = ctx;
    int64_t rows = x->dims[0], m = x->dims[1];
    if (k > SORT_SLOTS / 2 || tq_tensor_numel(x) > UINT32_MAX || idx->nbytes / 4 > UINT32_MAX)
        return tq_host_topk(x, k, vals, idx);
    if (!k || !rows)
        return TQ_OK;
    tk_pc pc = {tq_vk_word(x), tq_vk_word(vals), tq_vk_word(idx), (uint32_t)rows, (uint32_t)m,
                (uint32_t)k, 0, 0, 0};
    tq_vk_arg args[3] = {{x->buf, 0}, {vals->buf, 1}, {idx->buf, 1}};
    return rounds(c, "topk", args, 3, &pc, rows, m, 0);
}
