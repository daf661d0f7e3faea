/* selftest_blas.c: cuBLAS and rocBLAS products, in every transpose and with
 * leading dimensions larger than the matrices, against a double loop written
 * here from the BLAS definition (column-major). Operands are exact in f16 and
 * bf16 and products of floats are exact in double, so the stand-in (double
 * sums, one rounding) must agree to within a few f32 ulps; a transpose or
 * leading-dimension mistake is off by whole units. */
#include "selftest.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { M = 7, N = 5, K = 6, LD = 9, BATCH = 2, STRIDE = LD * LD };

/* f32 -> f16 / bf16 bits, for values exact in both (small multiples of 1/4) */
static uint16_t to_half(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (!(u & 0x7fffffff))
        return (uint16_t)(u >> 16);
    int e = (int)((u >> 23) & 255) - 127 + 15;
    return (uint16_t)(((u >> 16) & 0x8000) | (unsigned)e << 10 | ((u >> 13) & 0x3ff));
}
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* op(X)[i][j] of a column-major X with leading dimension ld */
static double at(const float *x, int trans, int i, int j, int ld)
{
    return trans ? x[j + i * ld] : x[i + j * ld];
}

static int close_to(const float *c, const float *a, const float *b, const float *c0, int ta,
                    int tb, float alpha, float beta)
{
    for (int j = 0; j < N; j++)
        for (int i = 0; i < M; i++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += at(a, ta, i, p, LD) * at(b, tb, p, j, LD);
            double want = alpha * s + beta * c0[i + j * LD];
            if (fabs(c[i + j * LD] - want) > 1e-5 * (1 + fabs(want)))
                return 0;
        }
    return 1;
}

static float A[BATCH * STRIDE], B[BATCH * STRIDE], C0[BATCH * STRIDE], C[BATCH * STRIDE];
static uint16_t Ah[BATCH * STRIDE], Bh[BATCH * STRIDE];

static void fill(int bf16)
{
    for (int i = 0; i < BATCH * STRIDE; i++) {
        A[i] = (float)((i * 7) % 11 - 5) / 4;
        B[i] = (float)((i * 3) % 13 - 6) / 4;
        C0[i] = (float)(i % 5);
        Ah[i] = bf16 ? to_bf16(A[i]) : to_half(A[i]);
        Bh[i] = bf16 ? to_bf16(B[i]) : to_half(B[i]);
    }
}

/* One product through one entry point; 1 when both batches are right. */
static int run(int lib, int entry, int ta, int tb)
{
    const float alpha = 1.5f, beta = entry == 0 ? 0.0f : 0.5f;
    int half = entry == 2 || entry == 3, bf = entry == 3;
    fill(bf);
    void *dA = st_alloc(sizeof A), *dB = st_alloc(sizeof B), *dC = st_alloc(sizeof C);
    void *dD = st_alloc(sizeof C);
    st_upload(dA, half ? (void *)Ah : (void *)A, half ? sizeof Ah : sizeof A);
    st_upload(dB, half ? (void *)Bh : (void *)B, half ? sizeof Bh : sizeof B);
    st_upload(dC, C0, sizeof C0);
    int r, dtype = bf ? CUDA_R_16BF : half ? CUDA_R_16F : CUDA_R_32F;
    int rtype = bf ? rocblas_datatype_bf16_r : half ? rocblas_datatype_f16_r
                                                    : rocblas_datatype_f32_r;
    int f = rocblas_datatype_f32_r;
    if (lib == ST_CUDA) {
        cublasHandle_t h;
        cublasCreate_v2(&h);
        int ca = ta ? CUBLAS_OP_T : CUBLAS_OP_N, cb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        if (entry == 0)
            r = cublasSgemm_v2(h, ca, cb, M, N, K, &alpha, dA, LD, dB, LD, &beta, dC, LD);
        else if (entry == 1)
            r = cublasSgemmStridedBatched(h, ca, cb, M, N, K, &alpha, dA, LD, STRIDE, dB, LD,
                                          STRIDE, &beta, dC, LD, STRIDE, BATCH);
        else
            r = cublasGemmStridedBatchedEx(h, ca, cb, M, N, K, &alpha, dA, dtype, LD, STRIDE, dB,
                                           dtype, LD, STRIDE, &beta, dC, CUDA_R_32F, LD, STRIDE,
                                           BATCH, CUBLAS_COMPUTE_32F_FAST_16F, -1);
        cublasDestroy_v2(h);
        st_download(C, dC, sizeof C);
    } else {
        rocblas_handle h;
        rocblas_create_handle(&h);
        int ra = ta ? rocblas_operation_transpose : rocblas_operation_none;
        int rb = tb ? rocblas_operation_transpose : rocblas_operation_none;
        if (entry == 0)
            r = rocblas_sgemm(h, ra, rb, M, N, K, &alpha, dA, LD, dB, LD, &beta, dC, LD);
        else if (entry == 1)
            r = rocblas_sgemm_strided_batched(h, ra, rb, M, N, K, &alpha, dA, LD, STRIDE, dB, LD,
                                              STRIDE, &beta, dC, LD, STRIDE, BATCH);
        else /* C and D apart: D = alpha op(A) op(B) + beta C */
            r = rocblas_gemm_strided_batched_ex(h, ra, rb, M, N, K, &alpha, dA, rtype, LD,
                                                STRIDE, dB, rtype, LD, STRIDE, &beta, dC, f, LD,
                                                STRIDE, dD, f, LD, STRIDE, BATCH, f, 0, 0, 0);
        rocblas_destroy_handle(h);
        st_download(C, half ? dD : dC, sizeof C);
    }
    int ok = !r;
    for (int b = 0; b < (entry ? BATCH : 1) && ok; b++)
        ok = close_to(C + b * STRIDE, A + b * STRIDE, B + b * STRIDE, C0 + b * STRIDE, ta, tb,
                      alpha, beta);
    st_free(dA), st_free(dB), st_free(dC), st_free(dD);
    return ok;
}

static void lazy_blas(void)
{
    /* the product runs at the synchronization, not at the call */
    const float one = 1, zero = 0;
    float a = 2, b = 3, c = -1;
    void *dA = st_alloc(4), *dB = st_alloc(4), *dC = st_alloc(4);
    st_upload(dA, &a, 4);
    st_upload(dB, &b, 4);
    st_upload(dC, &c, 4);
    cublasHandle_t h;
    CUstream s;
    float *pinned;
    cuStreamCreate(&s, 0);
    cuMemAllocHost_v2((void **)&pinned, 4);
    *pinned = -1;
    cublasCreate_v2(&h);
    cublasSetStream_v2(h, s);
    cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, dA, 1, dB, 1, &zero, dC, 1);
    cuMemcpyDtoHAsync_v2(pinned, (CUdeviceptr)(uintptr_t)dC, 4, s);
    float before = *pinned;
    cuStreamSynchronize(s);
    st_check(before == -1 && *pinned == 6, "cuBLAS work is queued on the handle's stream",
             "before %g after %g", before, *pinned);
    int bad = cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 1, 1, &one, dA, 3, dB, 1, &zero, dC,
                             4);
    st_check(bad == CUBLAS_STATUS_INVALID_VALUE, "cuBLAS refuses lda < m", "status %d", bad);
    cublasDestroy_v2(h);
    cuMemFreeHost(pinned);
    cuStreamDestroy_v2(s);
    st_free(dA), st_free(dB), st_free(dC);
}

void st_blas(void)
{
    static const char *const entries[] = {"sgemm", "sgemm strided batched",
                                          "gemm ex f16 batched", "gemm ex bf16 batched"};
    char name[96];
    for (int lib = ST_CUDA; lib <= ST_HIP; lib++)
        for (int e = 0; e < 4; e++) {
            int ok = 1;
            for (int t = 0; t < 4; t++)
                ok &= run(lib, e, t & 1, t >> 1);
            snprintf(name, sizeof name, "%s %s, all four transposes",
                     lib == ST_CUDA ? "cuBLAS" : "rocBLAS", entries[e]);
            st_check(ok, name, "differs from the double loop");
        }
    lazy_blas();
}
