/* ops_simtopk.c: the fused similarity top-k on Vulkan: lib/op/simtopk_dev.c
 * drives it (f32 score tiles, candidates, exact rescoring and proofs on the
 * host, the same for every device); here are the two shaders it needs,
 * kernels/vulkan/select.comp (the candidates of each query, carried on from
 * tile to tile) and above.comp (the rows above a query's threshold), and the
 * download of scattered rows. */
#include "../op/hostpath.h"
#include "../op/simtopk_dev.h"
#include "../op/simtopk_exact.h"
#include "vk.h"

typedef struct sel_pc {
    uint32_t x_off, v_off, i_off, rows, m, k, kept, base_lo, base_hi;
} sel_pc;

/* select.comp over the score tile x: the kp best of each row (with the kp
 * already in vals and idx when kept) into vals and idx, column j as index
 * base + j. The shader keeps nothing else from tile to tile: thr unused. */
static tq_status vk_select(void *ctx, const tq_tensor *x, int64_t kp, int64_t base, int kept,
                           tq_tensor *vals, tq_tensor *idx, tq_tensor *thr)
{
    (void)thr;
    tq_vk_ctx *c = ctx;
    sel_pc pc = {tq_vk_word(x), tq_vk_word(vals), tq_vk_word(idx), (uint32_t)x->dims[0],
                 (uint32_t)x->dims[1], (uint32_t)kp, (uint32_t)kept, (uint32_t)(uint64_t)base,
                 (uint32_t)((uint64_t)base >> 32)};
    tq_vk_arg args[3] = {{x->buf, 0}, {vals->buf, 1}, {idx->buf, 1}};
    uint32_t gx, gy;
    tq_vk_groups(c, (uint64_t)x->dims[0], 1, &gx, &gy);
    return tq_vk_dispatch(c, "select", args, 3, &pc, sizeof pc, gx, gy, 1);
}

typedef struct above_pc {
    uint32_t x_off, t_off, c_off, l_off, rows, m, cap, base;
} above_pc;

/* above.comp over the score tile x: counts in cnt, the rows' numbers in the
 * block (base + column) in lst [rows, TQ_SIMDEV_ABOVE_CAP]. */
static tq_status vk_above(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                          tq_tensor *lst, int64_t base)
{
    tq_vk_ctx *c = ctx;
    above_pc pc = {tq_vk_word(x), tq_vk_word(thr), tq_vk_word(cnt), tq_vk_word(lst),
                   (uint32_t)x->dims[0], (uint32_t)x->dims[1], TQ_SIMDEV_ABOVE_CAP, (uint32_t)base};
    tq_vk_arg args[4] = {{x->buf, 0}, {thr->buf, 0}, {cnt->buf, 1}, {lst->buf, 1}};
    uint32_t gx, gy;
    tq_vk_groups(c, (uint64_t)x->dims[0], 1, &gx, &gy);
    return tq_vk_dispatch(c, "above", args, 4, &pc, sizeof pc, gx, gy, 1);
}

static tq_status vk_rows(void *ctx, const tq_tensor *db, const int64_t *rows, size_t n, float *dst)
{
    return tq_vk_download_rows(ctx, db->buf, db->offset, (size_t)db->dims[1] * 4, rows, n, dst);
}

static int fits32(const tq_tensor *t) { return (t->offset + t->nbytes) / 4 <= UINT32_MAX; }

tq_status tq_vk_simtopk(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                        int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    static const tq_simdev_backend be = {.matmul = tq_vk_matmul, .add = tq_vk_add,
                                         .rownorm = tq_vk_rownorm, .select = vk_select,
                                         .above = vk_above, .download_rows = vk_rows};
    /* operands past the shaders' 32-bit word offsets: the host (kp: the
     * candidates simtopk_dev.c keeps per query) */
    int64_t k = vals->dims[1], kp = k + (k > 32 ? k : 32);
    kp = kp < TQ_SIMDEV_KP_MAX ? kp : TQ_SIMDEV_KP_MAX;
    kp = kp < db->dims[0] ? kp : db->dims[0];
    if (!fits32(q) || !fits32(db) || (uint64_t)q->dims[0] * (uint64_t)kp > UINT32_MAX / 4)
        return tq_host_simtopk(q, db, metric, idx_base, vals, idx);
    return tq_simdev_simtopk(&be, ctx, q, db, metric, idx_base, vals, idx);
}
