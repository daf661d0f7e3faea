/* ops_matmul.c: the matrix product on Vulkan (kernels/vulkan/matmul.comp):
 * transposes and batches become strides, one dispatch a product. f16
 * operands are read as such where the device has 16-bit storage, and widened
 * to f32 by the convert shader first where it has not; bf16 ones are always
 * widened first (no shader variant reads them: Vulkan has no bf16 type
 * without an extension few drivers have). */
#include "vk.h"

typedef struct mm_pc {
    uint32_t a_off, b_off, c_off, m, n, k, a_rs, a_cs, b_rs, b_cs, a_bs, b_bs, c_bs;
    float alpha, beta;
} mm_pc;

/* A device tensor of t's shape in f32 with t's values (t f16 or bf16). */
static tq_status widen(tq_vk_ctx *vc, const tq_tensor *t, tq_tensor **w)
{
    tq_status st = tq_tensor_new(t->dev, TQ_DTYPE_F32, t->rank, t->dims, w);
    if (!st && (st = tq_vk_convert(vc, t, *w))) {
        tq_tensor_free(*w);
        *w = NULL;
    }
    return st;
}

/* The offset of a tensor in elements of its dtype (f32 or f16). */
static uint32_t elem(const tq_tensor *t) { return (uint32_t)(t->offset / tq_dtype_size(t->dtype)); }

static tq_status product(tq_vk_ctx *vc, const tq_tensor *a, int ta, const tq_tensor *b, int tb,
                         float alpha, float beta, tq_tensor *c);

tq_status tq_vk_matmul(void *ctx, const tq_tensor *a, int ta, const tq_tensor *b, int tb,
                       float alpha, float beta, tq_tensor *c)
{
    tq_vk_ctx *vc = ctx;
    /* which operands to widen first */
    int keep16 = vc->caps.fp16_storage;
    int fa = a->dtype == TQ_DTYPE_BF16 || (a->dtype == TQ_DTYPE_F16 && !keep16),
        fb = b->dtype == TQ_DTYPE_BF16 || (b->dtype == TQ_DTYPE_F16 && !keep16);
    if (!fa && !fb)
        return product(vc, a, ta, b, tb, alpha, beta, c);
    /* freed once recorded: the pool reuses them only after this product */
    tq_tensor *wa = NULL, *wb = NULL;
    tq_status st = fa ? widen(vc, a, &wa) : TQ_OK;
    if (!st && fb)
        st = widen(vc, b, &wb);
    if (!st)
        st = product(vc, wa ? wa : a, ta, wb ? wb : b, tb, alpha, beta, c);
    tq_tensor_free(wa);
    tq_tensor_free(wb);
    return st;
}

static tq_status product(tq_vk_ctx *vc, const tq_tensor *a, int ta, const tq_tensor *b, int tb,
                         float alpha, float beta, tq_tensor *c)
{
    int64_t batch = c->rank == 3 ? c->dims[0] : 1;
    const int64_t *ad = a->dims + a->rank - 2, *bd = b->dims + b->rank - 2;
    int64_t m = ta ? ad[1] : ad[0], k = ta ? ad[0] : ad[1], n = tb ? bd[0] : bd[1];
    if (tq_tensor_numel(a) > UINT32_MAX || tq_tensor_numel(b) > UINT32_MAX ||
        tq_tensor_numel(c) > UINT32_MAX || batch > vc->caps.max_groups[2])
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: matmul operands over 2^32 elements or %u batches",
                       vc->caps.max_groups[2]);
    mm_pc pc = {
        elem(a), elem(b), tq_vk_word(c), (uint32_t)m, (uint32_t)n, (uint32_t)k,
        /* A stored [m, k] (or [k, m] when transposed), B [k, n] (or [n, k]) */
        ta ? 1 : (uint32_t)k, ta ? (uint32_t)m : 1, tb ? 1 : (uint32_t)n, tb ? (uint32_t)k : 1,
        a->rank == 3 ? (uint32_t)(m * k) : 0, b->rank == 3 ? (uint32_t)(k * n) : 0,
        (uint32_t)(m * n), alpha, beta,
    };
    int small = vc->caps.max_invocations < 256;
    uint32_t tile = small ? 32 : 64;
    int fa = a->dtype == TQ_DTYPE_F16, fb = b->dtype == TQ_DTYPE_F16;
    char name[32];
    snprintf(name, sizeof name, "matmul%s%s", small ? "_8" : "",
             fa && fb ? "_ab16" : fa ? "_a16" : fb ? "_b16" : "");
    tq_vk_arg args[3] = {{a->buf, 0}, {b->buf, 0}, {c->buf, 1}};
    return tq_vk_dispatch(vc, name, args, 3, &pc, sizeof pc,
                          (uint32_t)((n + tile - 1) / tile), (uint32_t)((m + tile - 1) / tile),
                          (uint32_t)batch);
}

/* rowprod: matmul.comp already makes each element one f32 sum in order of k,
 * with the same code wherever it lies in C, so q . db^T needs no prepared
 * database and any row batches give the same bits. */
tq_status tq_vk_rowprod(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                        float alpha, tq_tensor *out)
{
    (void)state;
    return tq_vk_matmul(ctx, q, 0, db, 1, alpha, 0.0f, out);
}
