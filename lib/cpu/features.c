/* features.c: the CPUID answers that more than one kernel file asks, in one
 * place, so that the kernels do not call each other to learn them (gelu_bf16.c
 * and gemm_bf16.c both want the bf16 dot products). */
#include "../internal.h"
#include "gemm.h"

int tq_cpu_gemm_bf16_supported(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init(); /* avx512f also says the OS saves the zmm registers */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}
