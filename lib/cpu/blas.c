/* blas.c: placeholder until the OpenBLAS loader lands. */
#include "cpu.h"
#include <stdio.h>

void tq_cpu_blas_describe(char *out, size_t n) { snprintf(out, n, "built-in sgemm"); }
