/* ops.c: the op entries of the CUDA/HIP backend, each a launch of a kernel of
 * kernels/cuda/ on the device's stream (no waiting), or the host path where
 * the kernel does not cover the arguments or is missing from the image. */
#include "gpu.h"
#include "../op/hostpath.h"

static int64_t cols(const tq_tensor *t) { return t->rank ? t->dims[t->rank - 1] : 1; }
static int64_t rows(const tq_tensor *t)
{
    int64_t d = cols(t);
    return d ? tq_tensor_numel(t) / d : 0;
}

static void current(tq_gpu_ctx *c) { c->api->set_current(c->dev, c->ctx); }

/* ---- elementwise ---- */

static tq_status ew(tq_gpu_ctx *c, int k, const tq_tensor *x, const tq_tensor *b, float alpha,
                    int has_alpha, tq_tensor *y)
{
    unsigned long long n = (unsigned long long)tq_tensor_numel(x);
    if (!n)
        return TQ_OK;
    gpu_ptr px = gpu_tensor_ptr(x), py = gpu_tensor_ptr(y), pb = b ? gpu_tensor_ptr(b) : 0;
    gpu_args a = {.size = 0};
    ARG(&a, px);
    if (b)
        ARG(&a, pb);
    ARG(&a, py);
    ARG(&a, n);
    if (k == K_ADD_ROW) {
        unsigned d = (unsigned)cols(x);
        ARG(&a, d);
    }
    if (has_alpha)
        ARG(&a, alpha);
    current(c);
    return TQ_GPU(launch)(c, k, gpu_stride_grid(n), 1, 1, GPU_BLOCK, 0, &a);
}

tq_status TQ_GPU(add)(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    int k = tq_tensor_numel(b) == tq_tensor_numel(a) ? K_ADD : K_ADD_ROW;
    if (!c->fn[k] || cols(a) > UINT32_MAX)
        return tq_host_add(a, b, y);
    return ew(c, k, a, b, 0, 0, y);
}

tq_status TQ_GPU(scale)(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    return c->fn[K_SCALE] ? ew(c, K_SCALE, x, NULL, alpha, 1, y) : tq_host_scale(x, alpha, y);
}

tq_status TQ_GPU(gelu)(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    return c->fn[K_GELU] ? ew(c, K_GELU, x, NULL, 0, 0, y) : tq_host_gelu(x, y);
}

tq_status TQ_GPU(activate)(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y)
{
    static const int k[TQ_ACT_COUNT] = {K_RELU, K_TANH, K_SIGMOID};
    tq_gpu_ctx *c = ctx;
    if ((unsigned)act >= TQ_ACT_COUNT || !c->fn[k[act]])
        return tq_host_activate(x, act, y);
    return ew(c, k[act], x, NULL, 0, 0, y);
}

/* ---- one block per row ---- */

/* A block per row takes whole warps enough for the row's d values, up to
 * GPU_BLOCK: threads past d would only idle through the block's reductions
 * (a row of 24 values in 256 threads leaves 7 of 8 warps idle). The kernels
 * stride by blockDim, so any multiple of the warp serves; the sums' order,
 * and so the bits, depend on it, but only through d. On the stand-in, where
 * each thread is a fiber, the norms of simtopk's 8-40 wide rows were 15% of
 * the op suite's time, and barriers' fiber switches a further 22%. */
static unsigned row_block(const tq_gpu_ctx *c, uint64_t d)
{
    uint64_t w = c->warp > 0 ? (uint64_t)c->warp : 32, b = (d + w - 1) / w * w;
    return (unsigned)(b < w ? w : b > GPU_BLOCK ? GPU_BLOCK : b);
}

static tq_status rowop(tq_gpu_ctx *c, int k, const tq_tensor *x, const tq_tensor *g,
                       const tq_tensor *b, float eps, int has_eps, tq_tensor *y)
{
    uint64_t r = (uint64_t)rows(x), d = (uint64_t)cols(x);
    if (!r)
        return TQ_OK;
    unsigned rr = (unsigned)r, dd = (unsigned)d;
    gpu_ptr px = gpu_tensor_ptr(x), py = gpu_tensor_ptr(y);
    gpu_ptr pg = g ? gpu_tensor_ptr(g) : 0, pb = b ? gpu_tensor_ptr(b) : 0;
    gpu_args a = {.size = 0};
    ARG(&a, px);
    if (k == K_LAYERNORM) {
        ARG(&a, pg);
        ARG(&a, pb);
    }
    ARG(&a, py);
    ARG(&a, rr);
    ARG(&a, dd);
    if (has_eps)
        ARG(&a, eps);
    unsigned gx = r < 65535 ? (unsigned)r : 65535, gy = (unsigned)((r + gx - 1) / gx);
    current(c);
    return TQ_GPU(launch)(c, k, gx, gy, 1, row_block(c, d), 0, &a);
}

/* Rows as 32-bit counts, and grid.y within its 65535: 2^32 rows at most. */
static int rows_fit(const tq_tensor *x) { return rows(x) < (1ll << 32) - 65536 && cols(x) <= UINT32_MAX; }

tq_status TQ_GPU(rownorm)(void *ctx, const tq_tensor *x, tq_tensor *norms)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_ROWNORM] || !rows_fit(x))
        return tq_host_rownorm(x, norms);
    return rowop(c, K_ROWNORM, x, NULL, NULL, 0, 0, norms);
}

tq_status TQ_GPU(normalize)(void *ctx, const tq_tensor *x, float eps, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_NORMALIZE] || !rows_fit(x))
        return tq_host_normalize(x, eps, y);
    return rowop(c, K_NORMALIZE, x, NULL, NULL, eps, 1, y);
}

tq_status TQ_GPU(softmax)(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_SOFTMAX] || !rows_fit(x))
        return tq_host_softmax(x, y);
    return rowop(c, K_SOFTMAX, x, NULL, NULL, 0, 0, y);
}

tq_status TQ_GPU(layernorm)(void *ctx, const tq_tensor *x, const tq_tensor *g, const tq_tensor *b,
                            float eps, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_LAYERNORM] || !rows_fit(x))
        return tq_host_layernorm(x, g, b, eps, y);
    return rowop(c, K_LAYERNORM, x, g, b, eps, 1, y);
}

/* ---- data movement ---- */

/* A bad index is found on the device; reading the flag back waits for the
 * stream, the price of failing as the CPU does rather than copying garbage. */
tq_status TQ_GPU(gather)(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_GATHER])
        return tq_host_gather(x, idx, y);
    if (c->recording) /* its index check reads a flag back, which waits */
        return tq_fail(TQ_ERR_RUNTIME, "%s: gather cannot be recorded in a graph", TQ_GPU_NAME);
    unsigned long long ry = (unsigned long long)y->dims[0], rx = (unsigned long long)x->dims[0];
    unsigned long long rb = ry ? (unsigned long long)(y->nbytes / ry) : 0;
    if (!ry)
        return TQ_OK;
    gpu_ptr px = gpu_tensor_ptr(x), pi = gpu_tensor_ptr(idx), py = gpu_tensor_ptr(y), pf = c->flag->ptr;
    gpu_args a = {.size = 0};
    ARG(&a, px);
    ARG(&a, pi);
    ARG(&a, py);
    ARG(&a, ry);
    ARG(&a, rx);
    ARG(&a, rb);
    ARG(&a, pf);
    current(c);
    gpu_res r = c->api->memset8(pf, 0, 4, c->stream);
    if (r)
        return TQ_GPU(fail)(c, r, GPU_CALL("cuMemsetD8Async", "hipMemsetAsync"), "clearing a flag");
    tq_status st = TQ_GPU(launch)(c, K_GATHER, gpu_stride_grid(ry * 32), 1, 1, GPU_BLOCK, 0, &a);
    int bad = 0;
    if (!st && (r = c->api->dtoh(&bad, pf, sizeof bad, c->stream)))
        st = TQ_GPU(fail)(c, r, GPU_CALL("cuMemcpyDtoHAsync", "hipMemcpyDtoHAsync"),
                          "reading gather's flag");
    if (!st && (r = c->api->stream_sync(c->stream)))
        st = TQ_GPU(fail)(c, r, GPU_CALL("cuStreamSynchronize", "hipStreamSynchronize"),
                          "reading gather's flag");
    if (!st && bad)
        st = tq_fail(TQ_ERR_USAGE, "gather: idx holds an index outside the %lld rows of x",
                     (long long)rx);
    return st;
}

static int plain(tq_dtype t)
{
    return t == TQ_DTYPE_F32 || t == TQ_DTYPE_F16 || t == TQ_DTYPE_BF16 || t == TQ_DTYPE_I8 ||
           t == TQ_DTYPE_U8 || t == TQ_DTYPE_I16 || t == TQ_DTYPE_I32;
}

tq_status TQ_GPU(convert)(void *ctx, const tq_tensor *x, tq_tensor *y)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_CONVERT] || !plain(x->dtype) || !plain(y->dtype))
        return tq_host_convert(x, y);
    unsigned long long n = (unsigned long long)tq_tensor_numel(x);
    if (!n)
        return TQ_OK;
    int from = x->dtype, to = y->dtype;
    gpu_ptr px = gpu_tensor_ptr(x), py = gpu_tensor_ptr(y);
    gpu_args a = {.size = 0};
    ARG(&a, px);
    ARG(&a, py);
    ARG(&a, n);
    ARG(&a, from);
    ARG(&a, to);
    current(c);
    return TQ_GPU(launch)(c, K_CONVERT, gpu_stride_grid(n), 1, 1, GPU_BLOCK, 0, &a);
}

/* The device keeps up to 256 per row; more go to the host. */
#define TOPK_MAX 256
tq_status TQ_GPU(topk)(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_TOPK] || k > TOPK_MAX || !rows_fit(x))
        return tq_host_topk(x, k, vals, idx);
    unsigned r = (unsigned)x->dims[0], m = (unsigned)x->dims[1], kk = (unsigned)k;
    if (!r || !k)
        return TQ_OK;
    gpu_ptr px = gpu_tensor_ptr(x), pv = gpu_tensor_ptr(vals), pi = gpu_tensor_ptr(idx);
    gpu_args a = {.size = 0};
    ARG(&a, px);
    ARG(&a, pv);
    ARG(&a, pi);
    ARG(&a, r);
    ARG(&a, m);
    ARG(&a, kk);
    unsigned gx = r < 65535 ? r : 65535, gy = (r + gx - 1) / gx;
    current(c);
    return TQ_GPU(launch)(c, K_TOPK, gx, gy, 1, GPU_BLOCK, 0, &a);
}

/* ---- products with one database ---- */

/* Our own kernel, never the BLAS library: its every element is one chain of
 * fused multiply-adds in order of k, so any cut of q into slices gives the
 * same bytes (tq_op_rowprod's promise); a BLAS picks its kernel by shape. */
tq_status TQ_GPU(rowprod)(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                          float alpha, tq_tensor *out)
{
    (void)state;
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_MATMUL])
        return tq_fail(TQ_ERR_RUNTIME, "%s: no matmul kernel in this build", TQ_GPU_NAME);
    return TQ_GPU(matmul_kernel)(c, q, 0, db, 1, alpha, 0, out);
}
