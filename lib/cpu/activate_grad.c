/* activate_grad.c: the backward of the activations on the CPU, for training
 * (lib/train): dx = dy * f'(x) with x the forward op's input. Each element is
 * computed in double and rounded once, so the result does not depend on the
 * split over threads. */
#include "../internal.h"
#include "cpu.h"

#include <math.h>

typedef struct grad_job {
    const float *x, *dy;
    float *dx;
    int act; /* a tq_activation, or -1 for gelu */
} grad_job;

static void grad_range(void *ctx, int64_t begin, int64_t end)
{
    const grad_job *p = ctx;
    switch (p->act) {
    case TQ_ACT_RELU:
        /* branch-free (selects, which vectorize): the signs of x are a coin
         * toss, and a branch on them mispredicts half the time */
        for (int64_t i = begin; i < end; i++) {
            float x = p->x[i], d = p->dy[i];
            float keep = x > 0 ? d : 0.0f;
            p->dx[i] = x != x ? x : keep;
        }
        break;
    case TQ_ACT_TANH:
        for (int64_t i = begin; i < end; i++) {
            double t = tanh((double)p->x[i]);
            p->dx[i] = (float)((double)p->dy[i] * (1.0 - t * t));
        }
        break;
    case TQ_ACT_SIGMOID:
        for (int64_t i = begin; i < end; i++) {
            double s = 1.0 / (1.0 + exp(-(double)p->x[i]));
            p->dx[i] = (float)((double)p->dy[i] * s * (1.0 - s));
        }
        break;
    default: /* gelu = x Phi(x): Phi(x) + x phi(x); erfc keeps Phi exact far left */
        for (int64_t i = begin; i < end; i++) {
            double x = p->x[i];
            double d = isinf(x) ? (x > 0 ? 1.0 : 0.0)
                                : 0.5 * erfc(-x * M_SQRT1_2) +
                                      x * exp(-0.5 * x * x) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
            p->dx[i] = (float)((double)p->dy[i] * d);
        }
        break;
    }
}

static tq_status run(const tq_tensor *x, int act, const tq_tensor *dy, tq_tensor *dx)
{
    grad_job p = {tq_cpu_ptr(x), tq_cpu_ptr(dy), tq_cpu_ptr(dx), act};
    tq_parallel_for(tq_tensor_numel(x), 8192, grad_range, &p);
    return TQ_OK;
}

tq_status tq_cpu_activate_grad(void *ctx, const tq_tensor *x, tq_activation act,
                               const tq_tensor *dy, tq_tensor *dx)
{
    (void)ctx;
    return run(x, (int)act, dy, dx);
}

tq_status tq_cpu_gelu_grad(void *ctx, const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx)
{
    (void)ctx;
    return run(x, -1, dy, dx);
}
