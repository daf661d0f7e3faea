/* activate.c: relu, tanh and sigmoid on the CPU, for small networks (the
 * scorer's MLP models). Each element is computed in double and rounded once,
 * so results are within half an ulp of f32 and independent of the split. */
#include "../internal.h"
#include "cpu.h"

#include <math.h>

typedef struct act_job {
    const float *x;
    float *y;
    tq_activation act;
} act_job;

static void act_range(void *ctx, int64_t begin, int64_t end)
{
    const act_job *p = ctx;
    switch (p->act) {
    case TQ_ACT_RELU:
        for (int64_t i = begin; i < end; i++) /* NaN > 0 is false: keep NaN */
            p->y[i] = p->x[i] > 0 || isnan(p->x[i]) ? p->x[i] : 0.0f;
        break;
    case TQ_ACT_TANH:
        for (int64_t i = begin; i < end; i++)
            p->y[i] = (float)tanh((double)p->x[i]);
        break;
    default: /* sigmoid: exp(-x) overflows to inf for x < -709: 1/inf = 0 */
        for (int64_t i = begin; i < end; i++)
            p->y[i] = (float)(1.0 / (1.0 + exp(-(double)p->x[i])));
        break;
    }
}

tq_status tq_cpu_activate(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y)
{
    (void)ctx;
    act_job p = {tq_cpu_ptr(x), tq_cpu_ptr(y), act};
    tq_parallel_for(tq_tensor_numel(x), 8192, act_range, &p);
    return TQ_OK;
}
