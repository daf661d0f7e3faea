/* above.c: tq_op_above on the CPU, the reference the device kernels
 * (kernels/cuda/above.cu) are held to: each row's columns not below its
 * threshold (NaN listed), in column order (the op promises no order; the
 * CPU's is the simplest), counted past the list's cap. */
#include "../internal.h"
#include "cpu.h"

typedef struct above_job {
    const float *x, *thr;
    int32_t *cnt, *lst;
    int64_t m, cap;
} above_job;

static void above_rows(void *ctx, int64_t begin, int64_t end)
{
    const above_job *a = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = a->x + r * a->m;
        float th = a->thr[r];
        int64_t n = 0;
        for (int64_t j = 0; j < a->m; j++)
            if (!(xr[j] < th)) {
                if (n < a->cap)
                    a->lst[r * a->cap + n] = (int32_t)j;
                n++;
            }
        a->cnt[r] = (int32_t)(n < INT32_MAX ? n : INT32_MAX);
    }
}

tq_status tq_cpu_above(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                       tq_tensor *lst)
{
    (void)ctx;
    above_job a = {tq_cpu_ptr(x), tq_cpu_ptr(thr), tq_cpu_ptr(cnt), tq_cpu_ptr(lst), x->dims[1],
                   lst->dims[1]};
    tq_parallel_for(x->dims[0], 1 + 65536 / (x->dims[1] + 1), above_rows, &a);
    return TQ_OK;
}
