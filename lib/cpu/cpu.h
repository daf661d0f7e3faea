/* cpu.h: what the files of the CPU backend share. */
#ifndef TQ_CPU_H
#define TQ_CPU_H

#include "../backend.h"

/* Host address of a tensor's first element (tensors may be views). */
static inline void *tq_cpu_ptr(const tq_tensor *t) { return (char *)t->buf + t->offset; }

/* One line on the matrix-product engine: "OpenBLAS 0.3.21 (SkylakeX kernel, checked)". */
void tq_cpu_blas_describe(char *out, size_t n);

#endif
