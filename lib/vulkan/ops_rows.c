/* ops_rows.c: the row reductions on Vulkan (kernels/vulkan/rows.comp), one
 * workgroup a row; the subgroup variant where the device has subgroup
 * arithmetic, the shared-memory one elsewhere. */
#include "vk.h"

typedef struct rows_pc {
    uint32_t x_off, y_off, g_off, b_off, rows, d;
    float eps;
    uint32_t has_g, has_b;
} rows_pc;

static tq_status rows_run(tq_vk_ctx *c, const char *op, const tq_tensor *x, const tq_tensor *g,
                          const tq_tensor *b, float eps, tq_tensor *y)
{
    int64_t rows = tq_vk_rows(x), d = tq_vk_cols(x);
    if (rows > UINT32_MAX || tq_tensor_numel(x) > UINT32_MAX)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: %s of over 2^32 elements", op);
    rows_pc pc = {tq_vk_word(x), tq_vk_word(y), g ? tq_vk_word(g) : 0, b ? tq_vk_word(b) : 0,
                  (uint32_t)rows, (uint32_t)d, eps, g != NULL, b != NULL};
    char name[32];
    snprintf(name, sizeof name, "%s%s", op, c->caps.subgroup_arith ? "_sg" : "");
    /* layer norm binds gamma and beta; absent ones are stood in for by x */
    tq_vk_arg args[4] = {{x->buf, 0}, {y->buf, 1}, {g ? g->buf : x->buf, 0}, {b ? b->buf : x->buf, 0}};
    uint32_t gx, gy;
    tq_vk_groups(c, (uint64_t)rows, 1, &gx, &gy);
    if (!d)
        return TQ_OK;
    return tq_vk_dispatch(c, name, args, strcmp(op, "layernorm") ? 2 : 4, &pc, sizeof pc, gx, gy, 1);
}

tq_status tq_vk_rownorm(void *ctx, const tq_tensor *x, tq_tensor *norms)
{
    if (!tq_vk_cols(x) && tq_tensor_numel(norms)) /* rows of nothing: norm 0 */
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: rownorm of empty rows");
    return rows_run(ctx, "rownorm", x, NULL, NULL, 0, norms);
}

tq_status tq_vk_normalize(void *ctx, const tq_tensor *x, float eps, tq_tensor *y)
{
    return rows_run(ctx, "normalize", x, NULL, NULL, eps, y);
}

tq_status tq_vk_softmax(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    return rows_run(ctx, "softmax", x, NULL, NULL, 0, y);
}

tq_status tq_vk_layernorm(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                          const tq_tensor *beta, float eps, tq_tensor *y)
{
    return rows_run(ctx, "layernorm", x, gamma, beta, eps, y);
}
