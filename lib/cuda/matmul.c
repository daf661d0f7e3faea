/* matmul.c: products on the CUDA/HIP device: through cuBLAS or rocBLAS when
 * the library is there and both operands have one type (f32 compute, no TF32;
 * f16 and bf16 pairs on the tensor cores), else through our own kernel
 * (kernels/cuda/matmul.cu), which also serves mixed f32/f16 operands and
 * rowprod; bf16 operands it does not read are widened to f32 first. */
#include "gpu.h"
#include "../op/hostpath.h"

/* Output tile of matmul.cu's blocks of 256 threads (64 x 64); the kernel
 * visits tiles grid-stride, so this only sizes the grid. */
#define MM_TILE 64u
#define MM_BLOCK 256u

static int64_t mat_elems(const tq_tensor *t) { return t->dims[t->rank - 2] * t->dims[t->rank - 1]; }

tq_status TQ_GPU(matmul_kernel)(tq_gpu_ctx *c, const tq_tensor *a, int trans_a, const tq_tensor *b,
                                int trans_b, float alpha, float beta, tq_tensor *out)
{
    int batch = out->rank == 3 ? (int)out->dims[0] : 1;
    int m = (int)out->dims[out->rank - 2], n = (int)out->dims[out->rank - 1];
    int k = (int)(trans_a ? a->dims[a->rank - 2] : a->dims[a->rank - 1]);
    if (!m || !n || !batch)
        return TQ_OK;
    if (batch > 65535)
        return tq_host_matmul(a, trans_a, b, trans_b, alpha, beta, out);
    long long sa = a->rank == 3 ? mat_elems(a) : 0, sb = b->rank == 3 ? mat_elems(b) : 0,
              sc = mat_elems(out);
    int a16 = a->dtype == TQ_DTYPE_F16, b16 = b->dtype == TQ_DTYPE_F16;
    gpu_ptr pa = gpu_tensor_ptr(a), pb = gpu_tensor_ptr(b), pc = gpu_tensor_ptr(out);
    gpu_args g = {.size = 0};
    ARG(&g, pa);
    ARG(&g, pb);
    ARG(&g, pc);
    ARG(&g, m);
    ARG(&g, n);
    ARG(&g, k);
    ARG(&g, trans_a);
    ARG(&g, trans_b);
    ARG(&g, a16);
    ARG(&g, b16);
    ARG(&g, alpha);
    ARG(&g, beta);
    ARG(&g, sa);
    ARG(&g, sb);
    ARG(&g, sc);
    unsigned gx = ((unsigned)n + MM_TILE - 1) / MM_TILE, gy = ((unsigned)m + MM_TILE - 1) / MM_TILE;
    if (gy > 65535) /* grid.y's limit: the blocks stride over the rest */
        gy = 65535;
    c->api->set_current(c->dev, c->ctx);
    return TQ_GPU(launch)(c, K_MATMUL, gx, gy, (unsigned)batch, MM_BLOCK, 0, &g);
}

/* A device tensor of t's shape in f32 with t's values (exact for bf16). */
static tq_status widen(tq_gpu_ctx *c, const tq_tensor *t, tq_tensor **w)
{
    tq_status st = tq_tensor_new(t->dev, TQ_DTYPE_F32, t->rank, t->dims, w);
    if (!st && (st = TQ_GPU(convert)(c, t, *w))) {
        tq_tensor_free(*w);
        *w = NULL;
    }
    return st;
}

tq_status TQ_GPU(matmul)(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                         int trans_b, float alpha, float beta, tq_tensor *out)
{
    tq_gpu_ctx *c = ctx;
    int blas = c->blas && a->dtype == b->dtype;
    if (!blas && (a->dtype == TQ_DTYPE_BF16 || b->dtype == TQ_DTYPE_BF16)) {
        /* freed at once: the pool hands the blocks out again only to work
         * queued after this product on the same stream */
        tq_tensor *wa = NULL, *wb = NULL;
        tq_status st = a->dtype == TQ_DTYPE_BF16 ? widen(c, a, &wa) : TQ_OK;
        if (!st && b->dtype == TQ_DTYPE_BF16)
            st = widen(c, b, &wb);
        if (!st)
            st = TQ_GPU(matmul)(c, wa ? wa : a, trans_a, wb ? wb : b, trans_b, alpha, beta, out);
        tq_tensor_free(wa);
        tq_tensor_free(wb);
        return st;
    }
    if (!blas) {
        if (!c->fn[K_MATMUL])
            return tq_host_matmul(a, trans_a, b, trans_b, alpha, beta, out);
        return TQ_GPU(matmul_kernel)(c, a, trans_a, b, trans_b, alpha, beta, out);
    }
    int batch = out->rank == 3 ? (int)out->dims[0] : 1;
    int m = (int)out->dims[out->rank - 2], n = (int)out->dims[out->rank - 1];
    int k = (int)(trans_a ? a->dims[a->rank - 2] : a->dims[a->rank - 1]);
    if (!m || !n || !batch)
        return TQ_OK;
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
     * library gets B first, each with its own transposition and the row
     * length of its row-major storage as leading dimension. */
    int lda = (int)a->dims[a->rank - 1], ldb = (int)b->dims[b->rank - 1];
    long long sa = a->rank == 3 ? mat_elems(a) : 0, sb = b->rank == 3 ? mat_elems(b) : 0,
              sc = mat_elems(out);
    int type = a->dtype == TQ_DTYPE_F16    ? GPU_BLAS_F16
               : a->dtype == TQ_DTYPE_BF16 ? GPU_BLAS_BF16
                                           : GPU_BLAS_F32;
    if (k == 0) { /* C = beta C; the libraries refuse a leading dimension of 0 */
        if (beta != 0)
            return TQ_GPU(scale)(c, out, beta, out);
        gpu_res r = c->api->memset8(gpu_tensor_ptr(out), 0, out->nbytes, c->stream);
        return r ? TQ_GPU(fail)(c, r, GPU_CALL("cuMemsetD8Async", "hipMemsetAsync"), "clearing C")
                 : TQ_OK;
    }
    c->api->set_current(c->dev, c->ctx);
    int r = c->api->blas_gemm(c->blas, trans_b, trans_a, n, m, k, alpha, gpu_tensor_ptr(b), type,
                              ldb, sb, gpu_tensor_ptr(a), type, lda, sa, beta, gpu_tensor_ptr(out),
                              n, sc, batch);
    return r ? tq_fail(TQ_ERR_RUNTIME, "%s:%d: %s: %s (a product in %s)", TQ_GPU_NAME, c->dev,
                       GPU_CALL("cublasGemmStridedBatchedEx", "rocblas_gemm_strided_batched_ex"),
                       c->api->blas_error_name(r), c->api->blas_name)
             : TQ_OK;
}
