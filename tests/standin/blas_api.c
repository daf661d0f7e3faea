/* blas_api.c: the cuBLAS and rocBLAS entry points the product uses. Both
 * check their arguments as the libraries do and queue the product (gemm.c) on
 * the handle's stream like a kernel: the result shows after a synchronization,
 * not before. Host pointer mode: alpha and beta are read at the call. */

#include "standin.h"

#include <stdlib.h>
#include <string.h>

static const char *type_name(int t)
{
    return t == CUDA_R_32F ? "f32" : t == CUDA_R_16F ? "f16" : t == CUDA_R_16BF ? "bf16" : "?";
}

/* 0 ok, 1 a bad dimension or leading dimension, 2 an unsupported type */
static int gemm_check(const struct tq_sd_gemm *g)
{
    if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0)
        return 1;
    int ra = g->ta ? g->k : g->m, rb = g->tb ? g->n : g->k;
    if (g->lda < (ra > 1 ? ra : 1) || g->ldb < (rb > 1 ? rb : 1) ||
        g->ldc < (g->m > 1 ? g->m : 1) || g->ldd < (g->m > 1 ? g->m : 1))
        return 1;
    if (g->Atype != g->Btype ||
        (g->Atype != CUDA_R_32F && g->Atype != CUDA_R_16F && g->Atype != CUDA_R_16BF) ||
        g->Ctype != CUDA_R_32F)
        return 2;
    return 0;
}

/* Queues a checked product. `status` maps 0/1/2 and out-of-memory to the
 * library's codes: {ok, invalid value, not supported, alloc failed}. */
static int gemm_queue(struct tq_sd_blas *h, const struct tq_sd_gemm *g, const int status[4])
{
    int bad = gemm_check(g);
    if (bad) {
        tq_sd_log("gemm m=%d n=%d k=%d lda=%d ldb=%d ldc=%d trans=%d,%d: %s", g->m, g->n, g->k,
                  g->lda, g->ldb, g->ldc, g->ta, g->tb,
                  bad == 1 ? "a dimension or leading dimension is out of range"
                           : "unsupported data types");
        return status[bad];
    }
    if (!g->m || !g->n || !g->batch)
        return status[0];
    /* TQ_STANDIN_TRACE_GEMM=1: a line per product with its operand types, so
     * that a test can see which products reach the library, and as what */
    const char *trace = getenv("TQ_STANDIN_TRACE_GEMM");
    if (trace && *trace == '1')
        tq_sd_log("gemm %s x %s -> %s, m=%d n=%d k=%d batch=%d", type_name(g->Atype),
                  type_name(g->Btype), type_name(g->Ctype), g->m, g->n, g->k, g->batch);
    struct tq_sd_stream *s = tq_sd_stream_resolve(h->api, h->stream);
    if (!s)
        return status[1];
    struct tq_sd_gemm *c = malloc(sizeof *c);
    if (!c)
        return status[3];
    *c = *g;
    struct tq_sd_op op = {.kind = TQ_SD_OP_GEMM, .u.gemm = c};
    return tq_sd_enqueue(s, &op) ? status[3] : status[0];
}

static const int cublas_codes[4] = {CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_INVALID_VALUE,
                                    CUBLAS_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_ALLOC_FAILED};
static const int rocblas_codes[4] = {rocblas_status_success, rocblas_status_invalid_size,
                                     rocblas_status_not_implemented, rocblas_status_memory_error};

/* An injected fault of a BLAS call: `code`, or `broken` once the context has
 * a sticky error (the library's kernels can no longer run). 0: go on. */
static int blas_fault(int code, int broken)
{
    CUresult f = tq_sd_fault(TQ_SD_FAULT_BLAS, code);
    return !f ? 0 : tq_sd_sticky(f) ? broken : (int)f;
}

static int handle_new(int api, struct tq_sd_blas **h)
{
    if (!h)
        return -1;
    *h = calloc(1, sizeof **h);
    if (!*h)
        return -1;
    (*h)->api = api;
    return 0;
}

/* ---- cuBLAS ---- */
static int cu_op(int t) { return t == CUBLAS_OP_N ? 0 : t == CUBLAS_OP_T || t == CUBLAS_OP_C ? 1 : -1; }

TQ_SD_API cublasStatus_t cublasCreate_v2(cublasHandle_t *h)
{
    int f = blas_fault(CUBLAS_STATUS_ALLOC_FAILED, CUBLAS_STATUS_NOT_INITIALIZED);
    if (f)
        return f;
    tq_sd_lock();
    int r = handle_new(TQ_SD_CUDA, h) ? CUBLAS_STATUS_ALLOC_FAILED : CUBLAS_STATUS_SUCCESS;
    return tq_sd_unlock(r);
}

TQ_SD_API cublasStatus_t cublasDestroy_v2(cublasHandle_t h)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

TQ_SD_API cublasStatus_t cublasSetStream_v2(cublasHandle_t h, CUstream s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

TQ_SD_API cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *version)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!version)
        return CUBLAS_STATUS_INVALID_VALUE;
    *version = TQ_CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

TQ_SD_API cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode)
{
    (void)mode;
    return h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

static cublasStatus_t cublas_gemm(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                  const float *alpha, const void *A, int Atype, int lda,
                                  long long sA, const void *B, int Btype, int ldb, long long sB,
                                  const float *beta, void *C, int Ctype, int ldc, long long sC,
                                  int batch, int compute)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (cu_op(ta) < 0 || cu_op(tb) < 0 || !alpha || !beta)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
        compute != CUBLAS_COMPUTE_32F_FAST_16F && compute != CUBLAS_COMPUTE_32F_FAST_16BF &&
        compute != CUBLAS_COMPUTE_32F_FAST_TF32) {
        tq_sd_log("cublasGemmEx: compute type %d is not an f32 one", compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    int f = blas_fault(CUBLAS_STATUS_EXECUTION_FAILED, CUBLAS_STATUS_EXECUTION_FAILED);
    if (f)
        return f;
    struct tq_sd_gemm g = {cu_op(ta), cu_op(tb), m, n, k, batch, *alpha, *beta, A, B, C, C,
                           Atype, Btype, Ctype, lda, ldb, ldc, ldc, sA, sB, sC, sC};
    tq_sd_lock();
    return tq_sd_unlock(gemm_queue(h, &g, cublas_codes));
}

TQ_SD_API cublasStatus_t cublasSgemm_v2(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                        const float *alpha, const float *A, int lda,
                                        const float *B, int ldb, const float *beta, float *C,
                                        int ldc)
{
    return cublas_gemm(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0,
                       beta, C, CUDA_R_32F, ldc, 0, 1, CUBLAS_COMPUTE_32F);
}

TQ_SD_API cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, int ta, int tb, int m,
                                                   int n, int k, const float *alpha,
                                                   const float *A, int lda, long long sA,
                                                   const float *B, int ldb, long long sB,
                                                   const float *beta, float *C, int ldc,
                                                   long long sC, int batch)
{
    return cublas_gemm(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, sA, B, CUDA_R_32F, ldb, sB,
                       beta, C, CUDA_R_32F, ldc, sC, batch, CUBLAS_COMPUTE_32F);
}

TQ_SD_API cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                      const void *alpha, const void *A, int Atype, int lda,
                                      const void *B, int Btype, int ldb, const void *beta,
                                      void *C, int Ctype, int ldc, int computeType, int algo)
{
    (void)algo;
    return cublas_gemm(h, ta, tb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
                       Ctype, ldc, 0, 1, computeType);
}

TQ_SD_API cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m,
                                                    int n, int k, const void *alpha,
                                                    const void *A, int Atype, int lda,
                                                    long long sA, const void *B, int Btype,
                                                    int ldb, long long sB, const void *beta,
                                                    void *C, int Ctype, int ldc, long long sC,
                                                    int batch, int computeType, int algo)
{
    (void)algo;
    return cublas_gemm(h, ta, tb, m, n, k, alpha, A, Atype, lda, sA, B, Btype, ldb, sB, beta, C,
                       Ctype, ldc, sC, batch, computeType);
}

/* ---- rocBLAS ---- */
static int roc_op(int t)
{
    return t == rocblas_operation_none ? 0
         : t == rocblas_operation_transpose || t == rocblas_operation_conjugate_transpose ? 1
                                                                                        : -1;
}

static int roc_type(int t)
{
    return t == rocblas_datatype_f32_r ? CUDA_R_32F
         : t == rocblas_datatype_f16_r ? CUDA_R_16F
         : t == rocblas_datatype_bf16_r ? CUDA_R_16BF : -1;
}

TQ_SD_API rocblas_status rocblas_create_handle(rocblas_handle *h)
{
    if (!h)
        return rocblas_status_invalid_pointer;
    int f = blas_fault(rocblas_status_memory_error, rocblas_status_internal_error);
    if (f)
        return f;
    tq_sd_lock();
    int r = handle_new(TQ_SD_HIP, h) ? rocblas_status_memory_error : rocblas_status_success;
    return tq_sd_unlock(r);
}

TQ_SD_API rocblas_status rocblas_destroy_handle(rocblas_handle h)
{
    if (!h)
        return rocblas_status_invalid_handle;
    free(h);
    return rocblas_status_success;
}

TQ_SD_API rocblas_status rocblas_set_stream(rocblas_handle h, hipStream_t s)
{
    if (!h)
        return rocblas_status_invalid_handle;
    h->stream = s;
    return rocblas_status_success;
}

TQ_SD_API rocblas_status rocblas_get_version_string(char *buf, size_t len)
{
    if (!buf)
        return rocblas_status_invalid_pointer;
    if (len < sizeof TQ_ROCBLAS_VERSION)
        return rocblas_status_invalid_size;
    memcpy(buf, TQ_ROCBLAS_VERSION, sizeof TQ_ROCBLAS_VERSION);
    return rocblas_status_success;
}

static rocblas_status roc_gemm(rocblas_handle h, int ta, int tb, int m, int n, int k,
                               const float *alpha, const void *A, int Atype, int lda, long long sA,
                               const void *B, int Btype, int ldb, long long sB, const float *beta,
                               const void *C, int Ctype, int ldc, long long sC, void *D,
                               int Dtype, int ldd, long long sD, int batch, int compute)
{
    if (!h)
        return rocblas_status_invalid_handle;
    if (!alpha || !beta)
        return rocblas_status_invalid_pointer;
    if (roc_op(ta) < 0 || roc_op(tb) < 0)
        return rocblas_status_invalid_value;
    if (compute != rocblas_datatype_f32_r || Ctype != Dtype) {
        tq_sd_log("rocblas gemm: compute type %d / C type %d / D type %d not f32", compute, Ctype,
                  Dtype);
        return rocblas_status_not_implemented;
    }
    int f = blas_fault(rocblas_status_internal_error, rocblas_status_internal_error);
    if (f)
        return f;
    struct tq_sd_gemm g = {roc_op(ta), roc_op(tb), m, n, k, batch, *alpha, *beta, A, B, C, D,
                           roc_type(Atype), roc_type(Btype), roc_type(Ctype), lda, ldb, ldc, ldd,
                           sA, sB, sC, sD};
    tq_sd_lock();
    return tq_sd_unlock(gemm_queue(h, &g, rocblas_codes));
}

TQ_SD_API rocblas_status rocblas_sgemm(rocblas_handle h, int ta, int tb, int m, int n, int k,
                                       const float *alpha, const float *A, int lda,
                                       const float *B, int ldb, const float *beta, float *C,
                                       int ldc)
{
    int f = rocblas_datatype_f32_r;
    return roc_gemm(h, ta, tb, m, n, k, alpha, A, f, lda, 0, B, f, ldb, 0, beta, C, f, ldc, 0, C,
                    f, ldc, 0, 1, f);
}

TQ_SD_API rocblas_status rocblas_sgemm_strided_batched(rocblas_handle h, int ta, int tb, int m,
                                                       int n, int k, const float *alpha,
                                                       const float *A, int lda, int64_t sA,
                                                       const float *B, int ldb, int64_t sB,
                                                       const float *beta, float *C, int ldc,
                                                       int64_t sC, int batch)
{
    int f = rocblas_datatype_f32_r;
    return roc_gemm(h, ta, tb, m, n, k, alpha, A, f, lda, sA, B, f, ldb, sB, beta, C, f, ldc, sC,
                    C, f, ldc, sC, batch, f);
}

TQ_SD_API rocblas_status rocblas_gemm_ex(rocblas_handle h, int ta, int tb, int m, int n, int k,
                                         const void *alpha, const void *A, int Atype, int lda,
                                         const void *B, int Btype, int ldb, const void *beta,
                                         const void *C, int Ctype, int ldc, void *D, int Dtype,
                                         int ldd, int computeType, int algo, int32_t solution,
                                         uint32_t flags)
{
    (void)algo, (void)solution, (void)flags;
    return roc_gemm(h, ta, tb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
                    Ctype, ldc, 0, D, Dtype, ldd, 0, 1, computeType);
}

TQ_SD_API rocblas_status rocblas_gemm_strided_batched_ex(
    rocblas_handle h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
    int Atype, int lda, int64_t sA, const void *B, int Btype, int ldb, int64_t sB,
    const void *beta, const void *C, int Ctype, int ldc, int64_t sC, void *D, int Dtype, int ldd,
    int64_t sD, int batch, int computeType, int algo, int32_t solution, uint32_t flags)
{
    (void)algo, (void)solution, (void)flags;
    return roc_gemm(h, ta, tb, m, n, k, alpha, A, Atype, lda, sA, B, Btype, ldb, sB, beta, C,
                    Ctype, ldc, sC, D, Dtype, ldd, sD, batch, computeType);
}
