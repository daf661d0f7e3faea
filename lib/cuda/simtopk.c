/* simtopk.c: the fused similarity top-k on CUDA/HIP. lib/op/simtopk_dev.c drives
 * it as it drives Vulkan's (f32 score tiles by our matmul entry, candidates
 * kept on the device, the proofs on the host, so the lists are the CPU's
 * bit for bit); here are the kernels it needs, kernels/cuda/select.cu (each
 * query's candidates, carried on from tile to tile, filtered by the k-th so
 * far), rescore.cu (the candidates' exact scores, so that rows stay on the
 * device) and above.cu (the rows above a query's threshold), and the
 * download of scattered rows (the gather kernel, then one copy). Tiles of
 * 1024 x 8192 (32 MiB: in an H100's 50 MB of L2, and a GEMM of 6.4 GFLOP at
 * d = 384, long enough that launches do not count). */
#include "gpu.h"
#include "../op/hostpath.h"
#include "../op/simtopk_dev.h"
#include "../op/simtopk_exact.h"

#define SEL_BLOCK 256u

/* One block a row of the tile: rows split over grid.x and grid.y. */
static void row_grid(unsigned rows, unsigned *gx, unsigned *gy)
{
    *gx = rows < 65535 ? (rows ? rows : 1) : 65535;
    *gy = (rows + *gx - 1) / *gx;
    *gy = *gy ? *gy : 1;
}

static tq_status gpu_select(void *ctx, const tq_tensor *x, int64_t kp, int64_t base, int kept,
                            tq_tensor *vals, tq_tensor *idx, tq_tensor *thr)
{
    tq_gpu_ctx *c = ctx;
    gpu_ptr px = gpu_tensor_ptr(x), pv = gpu_tensor_ptr(vals), pi = gpu_tensor_ptr(idx),
            pt = gpu_tensor_ptr(thr);
    unsigned rows = (unsigned)x->dims[0], m = (unsigned)x->dims[1], k = (unsigned)kp, gx, gy;
    long long b = base;
    gpu_args a = {.size = 0};
    ARG(&a, px);
    ARG(&a, pv);
    ARG(&a, pi);
    ARG(&a, pt);
    ARG(&a, rows);
    ARG(&a, m);
    ARG(&a, k);
    ARG(&a, kept);
    ARG(&a, b);
    row_grid(rows, &gx, &gy);
    c->api->set_current(c->dev, c->ctx);
    return TQ_GPU(launch)(c, K_SELECT, gx, gy, 1, SEL_BLOCK, 0, &a);
}

/* The above kernel over the rows of x: lists of cap, columns as base + j. */
static tq_status launch_above(tq_gpu_ctx *c, const tq_tensor *x, const tq_tensor *thr,
                              tq_tensor *cnt, tq_tensor *lst, unsigned cap, unsigned b)
{
    gpu_ptr px = gpu_tensor_ptr(x), pt = gpu_tensor_ptr(thr), pc = gpu_tensor_ptr(cnt),
            pl = gpu_tensor_ptr(lst);
    unsigned rows = (unsigned)x->dims[0], m = (unsigned)x->dims[1], gx, gy;
    gpu_args a = {.size = 0};
    ARG(&a, px);
    ARG(&a, pt);
    ARG(&a, pc);
    ARG(&a, pl);
    ARG(&a, rows);
    ARG(&a, m);
    ARG(&a, cap);
    ARG(&a, b);
    row_grid(rows, &gx, &gy);
    c->api->set_current(c->dev, c->ctx);
    return TQ_GPU(launch)(c, K_ABOVE, gx, gy, 1, SEL_BLOCK, 0, &a);
}

static tq_status gpu_above(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                           tq_tensor *lst, int64_t base)
{
    return launch_above(ctx, x, thr, cnt, lst, TQ_SIMDEV_ABOVE_CAP, (unsigned)base);
}

/* tq_op_above: the count zeroed on the stream, then the above kernel over
 * the whole matrix (base 0). */
tq_status TQ_GPU(above)(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                        tq_tensor *lst)
{
    tq_gpu_ctx *c = ctx;
    if (!c->fn[K_ABOVE])
        return tq_host_above(x, thr, cnt, lst);
    if (!x->dims[0])
        return TQ_OK;
    c->api->set_current(c->dev, c->ctx);
    gpu_res r = c->api->memset8(gpu_tensor_ptr(cnt), 0, cnt->nbytes, c->stream);
    if (r)
        return TQ_GPU(fail)(c, r, GPU_CALL("cuMemsetD8Async", "hipMemsetAsync"), "above");
    return launch_above(c, x, thr, cnt, lst, (unsigned)lst->dims[1], 0);
}

/* The candidates' exact scores (kernels/cuda/rescore.cu): 8 threads each. */
static tq_status gpu_rescore(void *ctx, const tq_tensor *q, const tq_tensor *db, const tq_tensor *ci,
                             int64_t base, int metric, tq_tensor *out)
{
    tq_gpu_ctx *c = ctx;
    gpu_ptr pq = gpu_tensor_ptr(q), px = gpu_tensor_ptr(db), pc = gpu_tensor_ptr(ci),
            po = gpu_tensor_ptr(out);
    unsigned long long n = (unsigned long long)(ci->dims[0] * ci->dims[1]),
                       ndb = (unsigned long long)db->dims[0];
    unsigned kp = (unsigned)ci->dims[1], d = (unsigned)q->dims[1], m = metric != 0;
    long long b = base;
    unsigned long long blocks = (n + SEL_BLOCK / 8 - 1) / (SEL_BLOCK / 8);
    unsigned gx = (unsigned)(blocks < (1u << 20) ? (blocks ? blocks : 1) : (1u << 20));
    gpu_args a = {.size = 0};
    ARG(&a, pq);
    ARG(&a, px);
    ARG(&a, pc);
    ARG(&a, po);
    ARG(&a, n);
    ARG(&a, kp);
    ARG(&a, d);
    ARG(&a, ndb);
    ARG(&a, b);
    ARG(&a, m);
    c->api->set_current(c->dev, c->ctx);
    return TQ_GPU(launch)(c, K_RESCORE, gx, 1, 1, SEL_BLOCK, 0, &a);
}

/* The rows gathered into one block on the device, then one download. */
static tq_status gpu_rows(void *ctx, const tq_tensor *db, const int64_t *rows, size_t n, float *dst)
{
    if (!n)
        return TQ_OK;
    int64_t nn = (int64_t)n, yd[2] = {nn, db->dims[1]};
    tq_tensor *it = NULL, *yt = NULL;
    tq_status st;
    if (!(st = tq_tensor_new(db->dev, TQ_DTYPE_I64, 1, &nn, &it)) &&
        !(st = tq_tensor_new(db->dev, TQ_DTYPE_F32, 2, yd, &yt)) &&
        !(st = tq_tensor_upload(it, rows, n * 8)) && !(st = TQ_GPU(gather)(ctx, db, it, yt)))
        st = tq_tensor_download(yt, dst, yt->nbytes);
    tq_tensor_free(it);
    tq_tensor_free(yt);
    return st;
}

tq_status TQ_GPU(simtopk)(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx)
{
    static const tq_simdev_backend be = {.matmul = TQ_GPU(matmul), .add = TQ_GPU(add),
                                         .rownorm = TQ_GPU(rownorm), .select = gpu_select,
                                         .above = gpu_above, .download_rows = gpu_rows,
                                         .rescore = gpu_rescore, .convert = TQ_GPU(convert),
                                         .tile_q = 1024, .tile_d = 8192};
    tq_gpu_ctx *c = ctx;
    /* a kernel missing from the image: the whole op on the host, rather than
     * parts of it through other host paths */
    if (!c->fn[K_SELECT] || !c->fn[K_ABOVE] || !c->fn[K_RESCORE] || !c->fn[K_ROWNORM] || !c->fn[K_ADD_ROW] ||
        !c->fn[K_ADD] || !c->fn[K_GATHER] || (!c->blas && !c->fn[K_MATMUL]))
        return tq_host_simtopk(q, db, metric, idx_base, vals, idx);
    return tq_simdev_simtopk(&be, ctx, q, db, metric, idx_base, vals, idx);
}
