/* optim.c: the optimizers (SGD with momentum, Adam, AdamW, as PyTorch defines
 * them), the learning-rate schedules with warm-up, and the seeded generator
 * behind the initial weights and the shuffling. */
#include "../internal.h"
#include "optim.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

void tq_rng_seed(tq_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tq_rng_next(tq_rng *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t tq_rng_below(tq_rng *r, uint64_t n)
{
    uint64_t limit = -n % n; /* 2^64 mod n: values below it would bias */
    for (;;) {
        uint64_t x = tq_rng_next(r);
        if (x >= limit)
            return x % n;
    }
}

double tq_rng_unit(tq_rng *r) { return (double)(tq_rng_next(r) >> 11) * 0x1p-53; }

void tq_rng_shuffle(tq_rng *r, int64_t *v, int64_t n)
{
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)tq_rng_below(r, (uint64_t)i + 1);
        int64_t t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

tq_status tq_optim_init(tq_optim *o, const tq_train_cfg *c, size_t n)
{
    memset(o, 0, sizeof *o);
    o->kind = c->optim;
    o->momentum = c->momentum;
    o->beta1 = c->beta1;
    o->beta2 = c->beta2;
    o->eps = c->eps;
    o->l2 = c->l2;
    o->wd = c->wd;
    o->n = n;
    o->m = calloc(n ? n : 1, 8);
    if (o->kind != TQ_OPTIM_SGD)
        o->v = calloc(n ? n : 1, 8);
    if (!o->m || (o->kind != TQ_OPTIM_SGD && !o->v)) {
        tq_optim_free(o);
        return tq_fail(TQ_ERR_NOMEM, "out of memory for the optimizer's state");
    }
    return TQ_OK;
}

void tq_optim_free(tq_optim *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

/* The update of one span, one loop per optimizer so that each vectorizes;
 * every value is computed in double and rounded to f32 once. */
static void sgd_span(tq_optim *o, float *restrict theta, const float *restrict g, size_t a,
                     size_t b, double l2, double lr)
{
    double mu = o->momentum, *restrict m = o->m;
    for (size_t i = a; i < b; i++) {
        /* PyTorch: buf = momentum buf + g (the first step: buf = g, as buf starts at 0) */
        double p = theta[i], bf = mu * m[i] + ((double)g[i] + l2 * p);
        m[i] = bf;
        theta[i] = (float)(p - lr * bf);
    }
}

static void adam_span(tq_optim *o, float *restrict theta, const float *restrict g, size_t a,
                      size_t b, double l2, double decay, double lr)
{
    double b1 = o->beta1, b2 = o->beta2, eps = o->eps, *restrict m = o->m, *restrict v = o->v;
    double step = lr / (1 - pow(b1, (double)o->t)), inv_bc2 = 1 / (1 - pow(b2, (double)o->t));
    for (size_t i = a; i < b; i++) {
        double p = theta[i], gi = (double)g[i] + l2 * p;
        double mi = b1 * m[i] + (1 - b1) * gi, vi = b2 * v[i] + (1 - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        theta[i] = (float)(p * decay - step * mi / (sqrt(vi * inv_bc2) + eps));
    }
}

void tq_optim_step(tq_optim *o, float *theta, const float *g, const tq_param_span *spans,
                   int nspans, double lr)
{
    o->t++;
    for (int s = 0; s < nspans; s++) {
        size_t a = spans[s].offset, b = a + spans[s].count;
        double l2 = spans[s].decay ? o->l2 : 0;
        if (o->kind == TQ_OPTIM_SGD)
            sgd_span(o, theta, g, a, b, l2, lr);
        else /* AdamW decays the weights first: p (1 - lr wd) */
            adam_span(o, theta, g, a, b, l2,
                      o->kind == TQ_OPTIM_ADAMW && spans[s].decay ? 1 - lr * o->wd : 1, lr);
    }
}

double tq_sched_lr(const tq_train_cfg *c, int64_t t, int64_t total)
{
    if (t < c->warmup)
        return c->lr * (double)(t + 1) / (double)c->warmup;
    if (c->sched == TQ_SCHED_CONSTANT || total <= c->warmup)
        return c->lr;
    double f = (double)(t - c->warmup) / (double)(total - c->warmup);
    if (f > 1)
        f = 1;
    if (c->sched == TQ_SCHED_LINEAR)
        return c->lr * (1 - f);
    return c->lr * 0.5 * (1 + cos(M_PI * f));
}
