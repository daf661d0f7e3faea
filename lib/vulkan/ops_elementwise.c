/* ops_elementwise.c: the ops that touch each element on its own, on Vulkan:
 * add (same shape or a broadcast row), scale, GELU and the activations. */
#include "vk.h"

typedef struct ew_pc {
    uint32_t x_off, b_off, y_off, n, d;
    float alpha;
} ew_pc;

/* Element counts travel as 32-bit numbers. */
static tq_status too_big(const char *op, int64_t n)
{
    return tq_fail(TQ_ERR_RUNTIME, "vulkan: %s of %lld elements is over 2^32 on this backend", op,
                   (long long)n);
}

static tq_status ew_run(tq_vk_ctx *c, const char *shader, const char *op, const tq_tensor *x,
                        const tq_tensor *b, float alpha, tq_tensor *y)
{
    int64_t n = tq_tensor_numel(x);
    if (n > (int64_t)UINT32_MAX - 4096)
        return too_big(op, n);
    ew_pc pc = {tq_vk_word(x), b ? tq_vk_word(b) : 0, tq_vk_word(y), (uint32_t)n,
                (uint32_t)tq_vk_cols(x), alpha};
    tq_vk_arg args[3] = {{x->buf, 0}, {b ? b->buf : y->buf, 0}, {y->buf, 1}};
    if (!b)
        args[1] = args[2];
    uint32_t gx, gy;
    tq_vk_groups(c, (uint64_t)n, (uint32_t)c->wg, &gx, &gy);
    return tq_vk_dispatch(c, shader, args, b ? 3 : 2, &pc, sizeof pc, gx, gy, 1);
}

tq_status tq_vk_add(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y)
{
    int same = tq_tensor_numel(b) == tq_tensor_numel(a);
    return ew_run(ctx, same ? "add" : "add_row", "add", a, b, 0, y);
}

tq_status tq_vk_scale(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y)
{
    return ew_run(ctx, "scale", "scale", x, NULL, alpha, y);
}

tq_status tq_vk_gelu(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    return ew_run(ctx, "gelu", "gelu", x, NULL, 0, y);
}

tq_status tq_vk_activate(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y)
{
    static const char *const names[TQ_ACT_COUNT] = {"relu", "tanh", "sigmoid"};
    if ((unsigned)act >= TQ_ACT_COUNT)
        return tq_fail(TQ_ERR_USAGE, "vulkan: unknown activation %d", (int)act);
    return ew_run(ctx, names[act], names[act], x, NULL, 0, y);
}
