/* ops_data.c: the ops that move bytes on Vulkan: gather (rows of any plain
 * dtype) and convert (the pairs of kernels/vulkan/convert.comp on the device,
 * every other pair through the host). */
#include "../op/hostpath.h"
#include "vk.h"

typedef struct ga_pc {
    uint32_t x_off, i_off, y_off, row_bytes, y_bytes;
} ga_pc;

/* The indices, checked before anything is recorded: from the host copy of
 * what was uploaded when there is one (no wait), else from the device. */
static tq_status gather_check(tq_vk_ctx *c, const tq_tensor *idx, int64_t rows)
{
    int64_t n = idx->dims[0];
    const tq_vk_buf *b = idx->buf;
    int64_t *tmp = NULL;
    const int64_t *ix;
    if (b->shadow_valid) {
        ix = (const int64_t *)(b->shadow + idx->offset);
    } else {
        if (!(tmp = malloc((size_t)n * 8 + 8)))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        tq_status st = tq_vk_download(c, idx->buf, idx->offset, tmp, (size_t)n * 8);
        if (st) {
            free(tmp);
            return st;
        }
        ix = tmp;
    }
    tq_status st = TQ_OK;
    for (int64_t i = 0; i < n && !st; i++)
        if (ix[i] < 0 || ix[i] >= rows)
            st = tq_fail(TQ_ERR_USAGE, "gather: idx[%lld] = %lld is outside the %lld rows of x",
                         (long long)i, (long long)ix[i], (long long)rows);
    free(tmp);
    return st;
}

tq_status tq_vk_gather(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y)
{
    tq_vk_ctx *c = ctx;
    int64_t rows = x->dims[0];
    tq_status st = gather_check(c, idx, rows);
    if (st)
        return st;
    if (x->nbytes >= UINT32_MAX || y->nbytes >= UINT32_MAX - 4)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: gather of over 4 GiB");
    size_t row = rows ? x->nbytes / (size_t)rows : 0;
    if (!row || !y->nbytes)
        return TQ_OK;
    ga_pc pc = {tq_vk_word(x), tq_vk_word(idx), tq_vk_word(y), (uint32_t)row, (uint32_t)y->nbytes};
    tq_vk_arg args[3] = {{x->buf, 0}, {idx->buf, 0}, {y->buf, 1}};
    uint32_t gx, gy;
    tq_vk_groups(c, (y->nbytes + 3) / 4, (uint32_t)c->wg, &gx, &gy);
    return tq_vk_dispatch(c, "gather", args, 3, &pc, sizeof pc, gx, gy, 1);
}

typedef struct cv_pc {
    uint32_t x_off, y_off, n, from, to, from_size, to_size;
} cv_pc;

/* The pairs the shader does: every value of the source is exact in f32 (or
 * the pair is i32 to f32, or a plain copy), so one rounding gives the same
 * bits as tq_convert. */
static int on_device(tq_dtype from, tq_dtype to)
{
    static const tq_dtype small[] = {TQ_DTYPE_F32, TQ_DTYPE_F16, TQ_DTYPE_BF16, TQ_DTYPE_I8,
                                     TQ_DTYPE_U8, TQ_DTYPE_I16, TQ_DTYPE_I32};
    int f = 0, t = 0;
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        f |= small[i] == from;
        t |= small[i] == to;
    }
    if (!f || !t)
        return 0;
    return from != TQ_DTYPE_I32 || to == TQ_DTYPE_F32 || to == TQ_DTYPE_I32;
}

tq_status tq_vk_convert(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    tq_vk_ctx *c = ctx;
    int64_t n = tq_tensor_numel(x);
    if (!on_device(x->dtype, y->dtype) || x->nbytes >= UINT32_MAX || y->nbytes >= UINT32_MAX - 4)
        return tq_host_convert(x, y);
    if (!n)
        return TQ_OK;
    cv_pc pc = {tq_vk_word(x), tq_vk_word(y), (uint32_t)n, x->dtype, y->dtype,
                (uint32_t)tq_dtype_size(x->dtype), (uint32_t)tq_dtype_size(y->dtype)};
    tq_vk_arg args[2] = {{x->buf, 0}, {y->buf, 1}};
    uint32_t gx, gy;
    tq_vk_groups(c, (y->nbytes + 3) / 4, (uint32_t)c->wg, &gx, &gy);
    return tq_vk_dispatch(c, "convert", args, 2, &pc, sizeof pc, gx, gy, 1);
}
