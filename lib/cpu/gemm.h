/* gemm.h: the micro-kernels of the built-in sgemm (gemm_kernels.c) as gemm.c
 * drives them. */
#ifndef TQ_CPU_GEMM_H
#define TQ_CPU_GEMM_H

/* C[0..mr_eff, 0..nr_eff] = alpha * acc + beta * C (beta == 0: alpha * acc,
 * C not read), acc[i][j] = sum over p < kc of a[p * MR + i] * b[p * NR + j]:
 * a and b are packed strips, zero-padded to MR rows and NR columns. */
typedef void (*tq_gemm_kernel_fn)(int kc, const float *a, const float *b, float *c, int ldc,
                                  int mr_eff, int nr_eff, float alpha, float beta);

typedef struct tq_gemm_kernel {
    const char *name; /* "avx512", "avx2", "portable" */
    int mr, nr;
    tq_gemm_kernel_fn fn;
} tq_gemm_kernel;

/* The best kernel the running CPU supports (chosen once). */
const tq_gemm_kernel *tq_cpu_gemm_kernel(void);
/* For the tests: makes the built-in sgemm use the kernel NAME (NULL: the best
 * again); 0 if this CPU cannot run it. */
int tq_cpu_gemm_kernel_force(const char *name);

#endif
