/* gemm.h: the micro-kernels of the built-in sgemm (gemm_kernels.c) as gemm.c
 * drives them. */
#ifndef TQ_CPU_GEMM_H
#define TQ_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* C[0..mr_eff, 0..nr_eff] = alpha * acc + beta * C (beta == 0: alpha * acc,
 * C not read), acc[i][j] = sum over p < kc of a[p * MR + i] * b[p * NR + j]:
 * a and b are packed strips, zero-padded to MR rows and NR columns. */
typedef void (*tq_gemm_kernel_fn)(int kc, const float *a, const float *b, float *c, int ldc,
                                  int mr_eff, int nr_eff, float alpha, float beta);

/* The same with A's rows read in place, a[i * lda + p] (no packed strip): the
 * same operations, so the same bits. */
typedef void (*tq_gemm_kernel_rows_fn)(int kc, const float *a, int lda, const float *b, float *c,
                                       int ldc, int mr_eff, int nr_eff, float alpha, float beta);

/* The most rows and columns any kernel's strips have (the AVX-512 kernel's
 * 12 and 32), and the largest slice of k any kernel takes. */
#define TQ_GEMM_MR_MAX 12
#define TQ_GEMM_NR_MAX 32
#define TQ_GEMM_KC_MAX 384

typedef struct tq_gemm_kernel {
    const char *name; /* "avx512", "avx2", "portable" */
    int mr, nr;
    /* rows of op(B) in a slice of k: the kernel's NR x KC strip of B stays in
     * L1 while MR rows of A stream past it (KC 384 against 256 measured 3%
     * faster for the AVX2 kernel's k = 384 products on Zen 3) */
    int kc;
    tq_gemm_kernel_fn fn;
    tq_gemm_kernel_rows_fn fn_rows; /* NULL: A is always packed */
} tq_gemm_kernel;

/* The packed operands the kernels take: rows i0.. i0+mc of op(A) and columns
 * p0.. p0+kc as strips of mr rows, k-major (strip t at t * mr * kc, zero-padded
 * to mr rows); rows p0.. p0+kc of op(B) and columns j0.. j0+nc as strips of nr
 * columns (strip t at t * nr * kc, zero-padded). op(X) is X, or X^T when t is set;
 * storage is row-major with leading dimension ld. */
void tq_cpu_gemm_pack_a(float *dst, int mr, int ta, const float *a, int lda, int i0, int mc,
                        int p0, int kc);
void tq_cpu_gemm_pack_b(float *dst, int nr, int tb, const float *b, int ldb, int p0, int kc,
                        int j0, int nc);

/* A constant matmul operand B (tq_tensor_set_constant) packed once, whole:
 * op(B), k x n, in kern's strips, kern->kc rows at a time as the built-in sgemm
 * takes them. Products with it give the bits the built-in sgemm gives. */
typedef struct tq_cpu_packed_b {
    const tq_gemm_kernel *kern; /* NULL: bf16 pairs or i8 quads (whichever is set) */
    int tb, k, n, nr, npad;     /* npad: n rounded up to the strips' width nr */
    int kpad;                   /* bf16: k rounded up to a whole pair; i8: quad */
    float *data;                /* f32: kern's strips */
    uint16_t *pairs;            /* bf16: strips of nr columns, pair-major */
    uint8_t *quads;             /* i8: strips of nr columns, quad-major, b + 128 */
} tq_cpu_packed_b;

/* An empty one for op(B) k x n in strips of nr columns (kern and the data
 * for the packer to fill); NULL when out of memory. */
tq_cpu_packed_b *tq_cpu_gemm_packed_new(int tb, int k, int n, int nr);
/* NULL when out of memory (the caller then multiplies unpacked). */
tq_cpu_packed_b *tq_cpu_gemm_pack_b_whole(int tb, const float *b, int ldb, int k, int n);
void tq_cpu_gemm_packed_free(tq_cpu_packed_b *pb);
/* C[0..m, 0..nc) = alpha op(A) op(B)[:, j0..j0+nc) + beta C: columns j0.. of
 * the packed B (j0 a multiple of kern->nr), C pointing at its first element. */
void tq_cpu_sgemm_packed(int ta, int m, int j0, int nc, float alpha, const float *a, int lda,
                         const tq_cpu_packed_b *pb, float beta, float *c, int ldc);

/* The best kernel the running CPU supports (chosen once). */
const tq_gemm_kernel *tq_cpu_gemm_kernel(void);
/* For the tests: makes the built-in sgemm use the kernel NAME (NULL: the best
 * again); 0 if this CPU cannot run it. */
int tq_cpu_gemm_kernel_force(const char *name);

/* ---- bf16 x bf16 -> f32 on AVX512-BF16 (gemm_bf16.c) ---- */
#define TQ_GEMM_BF16_NR 32
/* Whether this CPU has the instructions (and the OS their registers). */
int tq_cpu_gemm_bf16_supported(void);
/* Whether the CPU's bf16 products run here: supported and not disabled (the
 * tests disable it to run the widening path on such CPUs too). */
int tq_cpu_gemm_bf16_use(void);
void tq_cpu_gemm_bf16_disable(int off);
/* op(B), k x n bf16, packed whole for tq_cpu_gemm_bf16; NULL: out of memory. */
tq_cpu_packed_b *tq_cpu_gemm_bf16_pack_b(int tb, const uint16_t *b, int ldb, int k, int n);
/* C[0..m, 0..nc) = alpha A op(B)[:, j0..j0+nc) + beta C + bias[j0..j0+nc)
 * (bias NULL: none; the whole row of n, a rounding of its own as tq_op_add's),
 * A bf16 rows in place (m x k at lda), j0 a multiple of TQ_GEMM_BF16_NR; only
 * where supported.
 * Sums in f32 by VDPBF16PS, or TDPBF16PS on AMX tiles (tq_cpu_amx_use:
 * another order of roundings), both of which read bf16 subnormals as zero
 * and flush subnormal results (the instructions' rule, whatever MXCSR says). */
void tq_cpu_gemm_bf16(int m, int j0, int nc, float alpha, const uint16_t *a, int lda,
                      const tq_cpu_packed_b *pb, float beta, const float *bias, float *c,
                      int ldc);
/* The same product with beta 0 rounded into bf16 low (rows at ldl) and
 * nothing written to C (tq_matmul_then.low_only): after GELU when gelu is
 * set (tq_cpu_gelu_bf16_rows: only where tq_cpu_gelu_bf16_use()), else as
 * tq_convert rounds. */
void tq_cpu_gemm_bf16_low(int m, int j0, int nc, float alpha, const uint16_t *a, int lda,
                          const tq_cpu_packed_b *pb, const float *bias, int gelu, uint16_t *low,
                          int ldl);

/* ---- i8 x i8 -> f32 on AVX512-VNNI (gemm_i8.c) ---- */
#define TQ_GEMM_I8_NR 32
/* avx512f, avx512bw and avx512vnni (avx512f also says the OS saves zmm). */
int tq_cpu_gemm_i8_supported(void);
/* Supported and not disabled (tq_cpu_gemm_i8_disable: the tests' switch, as
 * tq_cpu_gemm_bf16_disable). */
int tq_cpu_gemm_i8_use(void);
void tq_cpu_gemm_i8_disable(int off);
/* B given as n rows of k int8 at ldb (a weight as PyTorch's Linear stores
 * it: row j is column j of C), packed whole (tb 1) as b + 128 in strips of
 * TQ_GEMM_I8_NR columns, 4 consecutive k of a column per 32-bit lane; NULL
 * when out of memory. Values in [-127, 127]. Portable: packs on any CPU. */
tq_cpu_packed_b *tq_cpu_gemm_i8_pack_b(const int8_t *b, int ldb, int k, int n);
/* tq_op_matmul_i8_rest's f32 part for the products below: x at A's first
 * row (rows ldx apart), the r columns cols, and wt its weights transposed, r
 * rows of ldw (B's row j's weights at wt[p * ldw + j]). */
typedef struct tq_cpu_i8_rest {
    const float *x;
    const int64_t *cols;
    const float *wt;
    int ldx, r, ldw;
} tq_cpu_i8_rest;
/* For i < m, j < nc:
 *   dot = sum over p < k of a[i*lda + p] * B[j0 + j][p]      (exact, int32)
 *   v   = ((float)dot * bscale[j0 + j]) * ascale[i]         (two roundings)
 *   v   = fmaf(x[i*ldx + cols[p]], wt[p*ldw + j0 + j], v) for p < r, with rest
 *   c[i*ldc + j] = beta == 0 ? v : fmaf(beta, c[i*ldc + j], v)  (C unread at 0)
 *   then, when bias != NULL, + bias[j0 + j]     (a rounding of its own)
 * j0 a multiple of TQ_GEMM_I8_NR, A's rows in place (m x k at lda, values in
 * [-127, 127]). asum[i] = sum over p < k of a[i*lda + p], from the caller:
 * the packed B is b + 128, so the kernel's sums are dot + 128 * asum[i].
 * k up to 133144 (|dot| <= 127 * 127 * k fits an int32; the kernel's sums
 * may wrap, their difference with 128 * asum does not). Only where supported. */
void tq_cpu_gemm_i8(int m, int j0, int nc, const int8_t *a, int lda, const int32_t *asum,
                    const float *ascale, const tq_cpu_packed_b *pb, const float *bscale,
                    const tq_cpu_i8_rest *rest, float beta, const float *bias, float *c, int ldc);
/* asum[i] = the sum of row i's k codes (m rows at lda), for tq_cpu_gemm_i8. */
void tq_cpu_gemm_i8_rowsums(int m, int k, const int8_t *a, int lda, int32_t *asum);
/* The same values, bit for bit, on any CPU from B unpacked (n rows of k at
 * ldb; columns 0..n, bscale, bias and rest's wt indexed from 0, asum not
 * needed): AVX2 where the CPU has it, else plain loops. */
void tq_cpu_gemm_i8_ref(int m, int n, const int8_t *a, int lda, const float *ascale,
                        const int8_t *b, int ldb, int k, const float *bscale,
                        const tq_cpu_i8_rest *rest, float beta, const float *bias, float *c,
                        int ldc);

/* n bytes (at least 64) on a cache line's start, freed by free(): the AMX
 * tiles' rows are 64 bytes, and one that straddles two lines loads both. */
static inline void *tq_cpu_alloc64(size_t n)
{
    size_t r = (n + 63) & ~(size_t)63;
    return aligned_alloc(64, r ? r : 64);
}

/* ---- AMX tiles (amx.c): the bf16 and int8 products' engine where the CPU
 * has it and Linux permits it ---- */
#define TQ_AMX_BF16 1
#define TQ_AMX_INT8 2
/* Whether every kind asked for (TQ_AMX_*) is there and permitted (the
 * permission asked once, here); _use: and not disabled (tq_cpu_amx_disable:
 * the tests' and tq-bench's switch, to run the AVX-512 kernels on such a
 * CPU too). */
int tq_cpu_amx_supported(int kinds);
int tq_cpu_amx_use(int kinds);
void tq_cpu_amx_disable(int off);
/* "AMX bf16 and int8 tiles", or why none: "no AMX", "AMX tiles refused by
 * the kernel (...): AVX-512". */
void tq_cpu_amx_describe(char *out, size_t n);
/* The thread's tiles configured for tq_cpu_amx_gemm, and released after. */
void tq_cpu_amx_begin(void);
void tq_cpu_amx_end(void);
/* One 32 x 32 block of sums (f32 for TQ_AMX_BF16, int32 for TQ_AMX_INT8;
 * rows 128 bytes apart) of A's rows r.. r + mr (mr <= 32) and strip q's 32
 * columns, handed to the caller to store. */
typedef void tq_cpu_amx_store(void *ctx, int r, int mr, int q, const void *tile);
/* The sums of m rows of A (kbytes each, lda bytes apart; int8 signed) times
 * nstrips packed strips of B at b (tq_cpu_gemm_bf16_pack_b's or
 * tq_cpu_gemm_i8_pack_b's, one after another: kpad a multiple of 32 pairs
 * or 64 quads, steps of 64 bytes of k; int8: b + 128 unsigned, as VPDPBUSD
 * takes them), over the whole k in order whatever the blocks (the same bits
 * as one pass). Each block goes to store, or, where direct is not NULL and
 * the block's 32 rows and 32 columns are all inside C (cols wide from the
 * first strip), straight into direct (f32 rows ldd floats apart). Runs
 * tq_cpu_amx_begin and _end itself; only where tq_cpu_amx_supported(kind).
 * 0 when memory for a copy of A's last rows or the sums between passes of
 * k is short (nothing was stored). */
int tq_cpu_amx_gemm(int kind, int m, const unsigned char *a, long lda, size_t kbytes, int steps,
                    const unsigned char *b, int nstrips, float *direct, long ldd, int cols,
                    tq_cpu_amx_store *store, void *ctx);
/* tq-bench's ceiling: rounds of 4 tile products of kind from registers
 * alone, on this thread; returns the multiply-adds done (0 without AMX).
 * Only where tq_cpu_amx_supported(kind). */
double tq_cpu_amx_peak(int kind, int64_t rounds);

#endif
