/* train.c: the training loop of tq-train: checks the examples against the
 * options, initializes the network from the seed, and runs steps (a shuffled
 * mini-batch each: forward, loss, backward, optimizer), with a validation
 * pass and early stopping at the end of each epoch. Every quantity is either
 * computed in a fixed order on the host or by ops whose results do not depend
 * on the thread count, so a run is reproducible to the bit. */
#include "../internal.h"
#include "../tool/pick.h"
#include "loss.h"
#include "save.h"
#include "trainer.h"

#include <math.h>

/* ---- checks of the data against the loss ---- */

static tq_status check_targets(const tq_trainer *t, const tq_train_data *d, const char *label)
{
    const char *yn = "the target";
    for (int64_t i = 0; i < d->n; i++) {
        double y = d->y[i];
        if (t->loss == TQ_LOSS_SOFTMAX && (y != floor(y) || y < 0 || y >= (double)t->classes))
            return tq_fail(TQ_ERR_DATA, "%s: row %lld: label %g is not a class 0..%lld", label,
                           (long long)i, y, (long long)(t->classes - 1));
        if (t->loss == TQ_LOSS_LOGISTIC && (y < 0 || y > 1))
            return tq_fail(TQ_ERR_DATA, "%s: row %lld: %s %g is not within 0..1 (logistic loss)",
                           label, (long long)i, yn, y);
        if (t->loss == TQ_LOSS_LISTWISE && y < 0)
            return tq_fail(TQ_ERR_DATA, "%s: row %lld: %s %g is negative (listwise loss)", label,
                           (long long)i, yn, y);
    }
    if (t->loss == TQ_LOSS_LISTWISE) {
        if (!d->gid)
            return tq_fail(TQ_ERR_USAGE, "%s: the listwise loss needs groups (a \"group\" frame "
                                         "or --group NAME)", label);
        for (int64_t g = 0; g < d->ngroups; g++) {
            double s = 0;
            for (int64_t i = d->gstart[g]; i < d->gstart[g + 1]; i++)
                s += d->y[i];
            if (!(s > 0))
                return tq_fail(TQ_ERR_DATA, "%s: group %lld (rows %lld..%lld) has no row marked 1",
                               label, (long long)d->gid[g], (long long)d->gstart[g],
                               (long long)(d->gstart[g + 1] - 1));
        }
    }
    return TQ_OK;
}

static tq_status resolve(tq_trainer *t)
{
    tq_train_cfg *c = &t->c;
    const tq_train_data *tr = t->tr;
    static const int def_loss[] = {TQ_LOSS_MSE, TQ_LOSS_LOGISTIC, TQ_LOSS_SOFTMAX, -1};
    t->loss = c->loss >= 0 ? c->loss : def_loss[c->kind];
    if (t->loss < 0)
        t->loss = tr->y_int ? TQ_LOSS_SOFTMAX : TQ_LOSS_MSE;
    const char *k = tq_train_kind_names[c->kind], *l = tq_train_loss_names[t->loss];
    if ((c->kind == TQ_TRAIN_LINEAR && t->loss != TQ_LOSS_MSE && t->loss != TQ_LOSS_LISTWISE) ||
        (c->kind == TQ_TRAIN_LOGISTIC && t->loss != TQ_LOSS_LOGISTIC) ||
        (c->kind == TQ_TRAIN_SOFTMAX && t->loss != TQ_LOSS_SOFTMAX))
        return tq_fail(TQ_ERR_USAGE, "a %s model does not train with the %s loss", k, l);
    if (c->kind != TQ_TRAIN_MLP && c->nhidden)
        return tq_fail(TQ_ERR_USAGE, "--hidden is for --model mlp");
    if (t->loss == TQ_LOSS_LISTWISE && tr->w)
        return tq_fail(TQ_ERR_USAGE, "the listwise loss weighs groups equally: no --weight");
    if (c->patience && !t->va)
        return tq_fail(TQ_ERR_USAGE, "--patience needs a validation set (--valid FILE)");
    if (t->va && t->va->d != tr->d) { /* each set from its own input: name both */
        tq_took a = {.what = "validation features", .name = t->va->xname, .from = t->va->from,
                     .rank = 2, .dims = {t->va->n, t->va->d}};
        tq_took b = {.what = "training features", .name = tr->xname, .from = tr->from,
                     .rank = 2, .dims = {tr->n, tr->d}};
        return tq_took_same_width(&a, &b);
    }
    t->output = t->loss == TQ_LOSS_SOFTMAX ? TQ_OUT_SOFTMAX
                : t->loss == TQ_LOSS_LOGISTIC ? TQ_OUT_SIGMOID
                                              : TQ_OUT_LINEAR;
    if (t->loss == TQ_LOSS_SOFTMAX) {
        t->classes = c->classes;
        if (!t->classes) {
            double mx = 1;
            for (int64_t i = 0; i < tr->n; i++)
                mx = tr->y[i] > mx && tr->y[i] < 1e9 ? tr->y[i] : mx;
            t->classes = (int64_t)floor(mx) + 1;
        }
    }
    int lbfgs = c->optim == TQ_OPTIM_LBFGS;
    if (lbfgs && c->kind == TQ_TRAIN_MLP)
        return tq_fail(TQ_ERR_USAGE, "--optimizer lbfgs solves the convex models (linear, logistic, "
                                     "softmax); an mlp trains with sgd, adam or adamw");
    if (lbfgs && c->patience)
        return tq_fail(TQ_ERR_USAGE, "--patience is for sgd, adam and adamw; lbfgs stops at "
                                     "convergence (--tol, --max-iter)");
    if (lbfgs && c->precision && c->precision != TQ_DTYPE_F32)
        return tq_fail(TQ_ERR_USAGE, "--precision %s is for sgd, adam and adamw; lbfgs computes in "
                                     "float64", tq_dtype_name(c->precision));
    tq_status st = check_targets(t, tr, "training data");
    if (!st && t->va)
        st = check_targets(t, t->va, "validation data");
    if (st)
        return st;
    /* the penalty: l2/2 |W|^2 beside the mean loss; scikit-learn's C
     * weighs the summed loss against |W|^2 / 2, so l2 = 1 / (C W) */
    double wsum = 0;
    if (t->loss == TQ_LOSS_LISTWISE)
        wsum = (double)tr->ngroups;
    else
        for (int64_t i = 0; i < tr->n; i++)
            wsum += tr->w ? tr->w[i] : 1.0;
    if (c->C > 0)
        c->l2 = wsum > 0 ? 1 / (c->C * wsum) : 0;
    else if (c->l2 < 0 && lbfgs)
        c->l2 = t->loss != TQ_LOSS_MSE && wsum > 0 ? 1 / wsum : 0;
    else if (c->l2 < 0) /* an MLP: MLPClassifier's alpha = 1e-4, which it
                         * divides by the batch's rows, as a step's penalty */
        c->l2 = c->kind == TQ_TRAIN_MLP && c->batch > 0
                    ? TQ_TRAIN_MLP_ALPHA / (double)(c->batch < tr->n ? c->batch : tr->n)
                    : 0;
    t->dims[0] = tr->d;
    t->nl = 0;
    int64_t hidden_default = TQ_TRAIN_MLP_HIDDEN;
    int nh = c->kind == TQ_TRAIN_MLP ? (c->nhidden ? c->nhidden : 1) : 0;
    for (int i = 0; i < nh; i++)
        t->dims[++t->nl] = c->nhidden ? c->hidden[i] : hidden_default;
    t->dims[++t->nl] = t->loss == TQ_LOSS_SOFTMAX ? t->classes : 1;
    return TQ_OK;
}

/* ---- set-up ---- */

static tq_status standardize(tq_trainer *t)
{
    const tq_train_data *tr = t->tr;
    int64_t n = tr->n, d = tr->d;
    if (!(t->mu = calloc((size_t)d, 8)) || !(t->sd = calloc((size_t)d, 8)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++)
            t->mu[j] += tr->x[i * d + j];
    for (int64_t j = 0; j < d; j++)
        t->mu[j] /= (double)n;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < d; j++) {
            double e = tr->x[i * d + j] - t->mu[j];
            t->sd[j] += e * e;
        }
    for (int64_t j = 0; j < d; j++) {
        t->sd[j] = sqrt(t->sd[j] / (double)n);
        if (!(t->sd[j] > 1e-12 * (fabs(t->mu[j]) + 1))) /* constant feature: leave it */
            t->sd[j] = 1;
    }
    return TQ_OK;
}

/* The features on the device: the host copy itself on the CPU. */
static tq_status features(tq_trainer *t, const tq_train_data *d, float **copy, tq_tensor **out)
{
    const float *x = d->x;
    size_t cnt = (size_t)(d->n * d->d);
    if (t->mu) {
        if (!(*copy = aligned_alloc(64, (cnt * 4 + 63) & ~(size_t)63)))
            return tq_fail(TQ_ERR_NOMEM, "out of memory for the standardized features");
        for (size_t i = 0; i < cnt; i++)
            (*copy)[i] = (float)((x[i] - t->mu[i % (size_t)d->d]) / t->sd[i % (size_t)d->d]);
        x = *copy;
    }
    int64_t dims[2] = {d->n, d->d};
    tq_status st = TQ_OK;
    if ((uintptr_t)x % 16 == 0)
        st = tq_tensor_wrap_host(t->c.dev, TQ_DTYPE_F32, 2, dims, (void *)x, out);
    if (!st && !*out && !(st = tq_tensor_new(t->c.dev, TQ_DTYPE_F32, 2, dims, out)))
        st = tq_tensor_upload(*out, x, cnt * 4);
    return st;
}

static void init_weights(tq_trainer *t)
{
    float *theta = tq_net_theta(t->net);
    if (t->nl == 1) /* convex models start at 0, as scikit-learn's do */
        return;
    for (int i = 0; i < t->nl; i++) { /* PyTorch's nn.Linear: U(-1/sqrt(in), 1/sqrt(in)) */
        double bound = 1 / sqrt((double)t->dims[i]);
        float *w = theta + tq_net_w_offset(t->net, i), *b = theta + tq_net_b_offset(t->net, i);
        for (int64_t k = 0; k < t->dims[i] * t->dims[i + 1]; k++)
            w[k] = (float)(bound * (2 * tq_rng_unit(&t->rng) - 1));
        for (int64_t k = 0; k < t->dims[i + 1]; k++)
            b[k] = (float)(bound * (2 * tq_rng_unit(&t->rng) - 1));
    }
}

static int64_t max_group(const tq_train_data *d)
{
    int64_t m = 1;
    for (int64_t g = 0; d && g < d->ngroups; g++)
        m = d->gstart[g + 1] - d->gstart[g] > m ? d->gstart[g + 1] - d->gstart[g] : m;
    return m;
}

tq_status tq_trainer_new(const tq_train_cfg *cfg, const tq_train_data *train,
                         const tq_train_data *valid, tq_trainer **out)
{
    *out = NULL;
    tq_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    t->c = *cfg;
    t->tr = train;
    t->va = valid;
    tq_status st = resolve(t);
    int listwise = t->loss == TQ_LOSS_LISTWISE;
    t->units = listwise ? train->ngroups : train->n;
    int64_t b = cfg->batch < t->units ? cfg->batch : t->units;
    t->cap = listwise ? b * max_group(train) : b;
    if (listwise && t->cap > train->n)
        t->cap = train->n;
    if (listwise && max_group(valid) > t->cap)
        t->cap = max_group(valid);
    t->per_epoch = (t->units + b - 1) / b;
    t->total_steps = t->per_epoch * cfg->epochs;
    if (!st && cfg->standardize)
        st = standardize(t);
    if (!st)
        st = features(t, train, &t->xtr, &t->ttr);
    if (!st && valid)
        st = features(t, valid, &t->xva, &t->tva);
    if (!st)
        st = tq_net_new(cfg->dev, t->nl, t->dims, cfg->act, t->cap, &t->net);
    size_t o = (size_t)(t->cap * t->dims[t->nl]);
    if (!st && (!(t->perm = malloc((size_t)t->units * 8)) || !(t->idx = malloc((size_t)t->cap * 8)) ||
                !(t->gs = malloc((size_t)(t->cap + 1) * 8)) || !(t->yb = malloc((size_t)t->cap * 8)) ||
                !(t->wb = malloc((size_t)t->cap * 4)) || !(t->dout = malloc(o * 4)) ||
                !(t->best = calloc(tq_net_size(t->net), 4))))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_optim_init(&t->opt, &t->c, tq_net_size(t->net));
    if (!st && cfg->precision && cfg->precision != TQ_DTYPE_F32)
        st = tq_net_set_precision(t->net, cfg->precision);
    /* f16's dynamic loss scaling: start at 2^16, halve on overflow (and skip
     * the step), double after 2000 clean steps */
    t->scale = cfg->precision == TQ_DTYPE_F16 ? 65536.0 : 1.0;
    if (st) {
        tq_trainer_free(t);
        return st;
    }
    tq_rng_seed(&t->rng, cfg->seed);
    init_weights(t);
    for (int64_t i = 0; i < t->units; i++)
        t->perm[i] = i;
    t->best_metric = -INFINITY;
    t->best_loss = INFINITY;
    int n = snprintf(t->describe, sizeof t->describe, "%s %lld", tq_train_kind_names[cfg->kind],
                     (long long)t->dims[0]);
    for (int i = 1; i <= t->nl && n < (int)sizeof t->describe; i++)
        n += snprintf(t->describe + n, sizeof t->describe - (size_t)n, "-%lld", (long long)t->dims[i]);
    if (n < (int)sizeof t->describe)
        snprintf(t->describe + n, sizeof t->describe - (size_t)n, "%s%s, %s loss, %s",
                 cfg->kind == TQ_TRAIN_MLP ? " " : "",
                 cfg->kind == TQ_TRAIN_MLP ? tq_train_act_names[cfg->act] : "",
                 tq_train_loss_names[t->loss], tq_train_optim_names[cfg->optim]);
    if ((st = tq_net_push(t->net)) || (cfg->optim == TQ_OPTIM_LBFGS && (st = tq_trainer_lbfgs_init(t)))) {
        tq_trainer_free(t);
        return st;
    }
    *out = t;
    return TQ_OK;
}

void tq_trainer_free(tq_trainer *t)
{
    if (!t)
        return;
    tq_trainer_lbfgs_free(t);
    tq_net_free(t->net);
    tq_optim_free(&t->opt);
    tq_tensor_free(t->ttr);
    tq_tensor_free(t->tva);
    free(t->xtr);
    free(t->xva);
    free(t->mu);
    free(t->sd);
    free(t->perm);
    free(t->idx);
    free(t->gs);
    free(t->yb);
    free(t->wb);
    free(t->dout);
    free(t->best);
    free(t->chunks);
    free(t);
}

int64_t tq_trainer_steps_per_epoch(const tq_trainer *t) { return t->per_epoch; }
double tq_trainer_l2(const tq_trainer *t) { return t->c.l2; }

void tq_trainer_solver(const tq_trainer *t, tq_train_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->lbfgs = t->c.optim == TQ_OPTIM_LBFGS;
    ev->epoch = ev->step = t->lb.iter;
    ev->loss = ev->train_loss = t->lb.f;
    ev->gmax = t->lb.gmax;
    ev->step_len = ev->lr = t->lb.step;
    ev->fevals = t->lb.fevals;
    ev->solver_state = (int)t->lb.state;
    ev->examples = t->lb.fevals * t->units;
    ev->done = t->done || t->lb.state;
}
const char *tq_trainer_describe(const tq_trainer *t) { return t->describe; }
int tq_trainer_loss(const tq_trainer *t) { return t->loss; }
const char *tq_trainer_metric_name(const tq_trainer *t)
{
    static const char *names[] = {"-loss", "AUC", "accuracy", "MRR"};
    return names[t->loss];
}

/* ---- batches ---- */

/* A validation pass: the mean loss and the metric. */
static tq_status evaluate(tq_trainer *t, double *loss, double *metric)
{
    const tq_train_data *d = t->va;
    int listwise = t->loss == TQ_LOSS_LISTWISE;
    int64_t units = listwise ? d->ngroups : d->n, o = t->dims[t->nl];
    double sum = 0, wsum = 0;
    tq_metric_acc m = {.loss = t->loss};
    tq_status st = TQ_OK;
    for (int64_t u = 0; u < units && !st;) {
        int64_t u1 = u, rows = 0, ng;
        /* as many units as fit in cap rows (a group always fits) */
        while (u1 < units) {
            int64_t r = listwise ? d->gstart[u1 + 1] - d->gstart[u1] : 1;
            if (rows + r > t->cap)
                break;
            rows += r, u1++;
        }
        int64_t n = tq_trainer_gather(t, d, NULL, u, u1, &ng);
        const float *z;
        if ((st = tq_net_input(t->net, t->tva, t->idx, n)) || (st = tq_net_forward(t->net, &z)))
            break;
        double ws;
        sum += tq_loss_batch(t->loss, z, n, o, t->yb, d->w ? t->wb : NULL, t->gs, ng, &ws, NULL);
        wsum += ws;
        tq_metric_add(&m, z, n, o, t->yb, t->gs, ng);
        u = u1;
    }
    *loss = wsum > 0 ? sum / wsum : 0;
    *metric = tq_metric_end(&m);
    if (t->loss == TQ_LOSS_MSE || isnan(*metric))
        *metric = -*loss;
    return st;
}

static void end_epoch(tq_trainer *t, tq_train_event *ev)
{
    ev->epoch_end = 1;
    ev->train_loss = t->ep_batches ? t->ep_loss / (double)t->ep_batches : 0;
    t->ep_loss = 0;
    t->ep_batches = 0;
    t->pos = 0;
    t->epoch++;
    if (t->epoch >= t->c.epochs)
        t->done = 1;
}

/* The gradient of the batch in one pass (one process). */
static tq_status batch_grad(tq_trainer *t, int64_t u0, int64_t u1, double *sum, double *ws)
{
    int64_t ng, n = tq_trainer_gather(t, t->tr, t->perm, u0, u1, &ng), o = t->dims[t->nl];
    const float *z;
    tq_status st = tq_net_input(t->net, t->ttr, t->idx, n);
    if (!st)
        st = tq_net_forward(t->net, &z);
    if (st)
        return st;
    *sum = tq_loss_batch(t->loss, z, n, o, t->yb, t->tr->w ? t->wb : NULL, t->gs, ng, ws, t->dout);
    size_t no = (size_t)(n * o);
    for (size_t i = 0; t->scale != 1.0 && i < no; i++)
        t->dout[i] = (float)(t->dout[i] * t->scale); /* a power of 2: exact */
    return isfinite(*sum) ? tq_net_backward(t->net, t->dout) : TQ_OK;
}

/* f16: checks the scaled gradient; on an overflow halves the scale and
 * returns 1 (skip the step), else divides the gradient by the scale (exact:
 * a power of 2) and doubles the scale after 2000 clean steps. */
static int unscale(tq_trainer *t)
{
    float *g = tq_net_grad(t->net);
    int nspans;
    const tq_param_span *sp = tq_net_spans(t->net, &nspans);
    for (int s = 0; s < nspans; s++)
        for (size_t i = sp[s].offset; i < sp[s].offset + sp[s].count; i++)
            if (!isfinite(g[i])) {
                t->scale /= 2;
                t->clean = 0;
                return 1;
            }
    for (int s = 0; s < nspans; s++)
        for (size_t i = sp[s].offset; i < sp[s].offset + sp[s].count; i++)
            g[i] = (float)(g[i] / t->scale);
    if (++t->clean == 2000) {
        t->scale *= 2;
        t->clean = 0;
    }
    return 0;
}

/* One L-BFGS iteration as a step that ends an "epoch": the model after it
 * is the iterate rounded to f32, validated where there is a validation set. */
static tq_status lbfgs_step(tq_trainer *t, tq_train_event *ev)
{
    if (t->done || t->lb.state) {
        t->done = 1;
        return TQ_EOF;
    }
    tq_status st = tq_trainer_lbfgs_iter(t);
    if (st)
        return st;
    float *theta = tq_net_theta(t->net);
    for (size_t i = 0; i < t->lb.n; i++)
        theta[i] = (float)t->lb.x[i];
    if ((st = tq_net_push(t->net)))
        return st;
    t->done = t->lb.state != TQ_LBFGS_RUNNING;
    t->step = t->epoch = t->lb.iter;
    tq_trainer_solver(t, ev);
    t->examples = ev->examples;
    ev->epoch_end = 1;
    if (t->va) {
        ev->has_valid = 1;
        if ((st = evaluate(t, &ev->valid_loss, &ev->valid_metric)))
            return st;
        if (ev->valid_metric > t->best_metric) {
            t->best_metric = ev->valid_metric;
            ev->improved = 1;
        }
    }
    return TQ_OK;
}

tq_status tq_trainer_step(tq_trainer *t, tq_train_event *ev)
{
    memset(ev, 0, sizeof *ev);
    if (t->c.optim == TQ_OPTIM_LBFGS)
        return lbfgs_step(t, ev);
    if (t->done)
        return TQ_EOF;
    if (t->pos == 0) /* a new epoch: a new order, from the order before */
        tq_rng_shuffle(&t->rng, t->perm, t->units);
    int64_t u1 = t->pos + t->c.batch < t->units ? t->pos + t->c.batch : t->units;
    double sum, ws;
    tq_status st = t->c.comm ? tq_trainer_chunked_grad(t, t->pos, u1, &sum, &ws)
                             : batch_grad(t, t->pos, u1, &sum, &ws);
    if (st)
        return st;
    double loss = ws > 0 ? sum / ws : 0;
    if (!isfinite(loss))
        return tq_fail(TQ_ERR_RUNTIME, "step %lld: the loss is not finite (diverging? try a "
                                       "lower --lr, or --standardize)",
                       (long long)t->step + 1);
    int skip = t->c.precision == TQ_DTYPE_F16 && unscale(t);
    if (skip && t->scale < 0x1p-24)
        return tq_fail(TQ_ERR_RUNTIME, "step %lld: the gradients overflow f16 at every loss "
                                       "scale (try --precision bf16)",
                       (long long)t->step + 1);
    /* A listwise loss does not change when every score of a group moves by
     * one amount: the last bias's gradient is 0, but for rounding, which an
     * optimizer like Adam would blow up to steps of lr. Keep it at 0. */
    if (t->loss == TQ_LOSS_LISTWISE)
        tq_net_grad(t->net)[tq_net_b_offset(t->net, t->nl - 1)] = 0;
    int nspans;
    const tq_param_span *spans = tq_net_spans(t->net, &nspans);
    double lr = tq_sched_lr(&t->c, t->step, t->total_steps);
    if (!skip) {
        tq_optim_step(&t->opt, tq_net_theta(t->net), tq_net_grad(t->net), spans, nspans, lr);
        if ((st = tq_net_push(t->net)))
            return st;
    }
    ev->skipped = skip;
    ev->loss_scale = t->scale;
    t->examples += u1 - t->pos;
    t->pos = u1;
    t->step++;
    t->ep_loss += loss;
    t->ep_batches++;
    ev->epoch = t->epoch + 1;
    ev->step = t->step;
    ev->examples = t->examples;
    ev->loss = loss;
    ev->lr = lr;
    if (t->pos < t->units)
        return TQ_OK;
    end_epoch(t, ev);
    /* scikit-learn's MLP rule: no_change epochs in a row without an
     * improvement by tol of the training loss (of the metric with a
     * validation set) end the run */
    int plateau = t->c.no_change > 0 && !t->c.patience;
    if (t->va) {
        ev->has_valid = 1;
        if ((st = evaluate(t, &ev->valid_loss, &ev->valid_metric)))
            return st;
        double before = t->best_metric;
        if (ev->valid_metric > t->best_metric) {
            t->best_metric = ev->valid_metric;
            memcpy(t->best, tq_net_theta(t->net), tq_net_size(t->net) * 4);
            t->have_best = 1;
            if (!plateau)
                t->bad_epochs = 0;
            ev->improved = 1;
        } else if (t->c.patience && ++t->bad_epochs >= t->c.patience) {
            t->done = t->stopped = 1;
        }
        if (plateau && (ev->valid_metric > before + t->c.tol ? (t->bad_epochs = 0, 0)
                                                             : ++t->bad_epochs >= t->c.no_change))
            t->done = t->stopped = 1;
    } else if (plateau) {
        if (ev->train_loss > t->best_loss - t->c.tol) {
            if (++t->bad_epochs >= t->c.no_change)
                t->done = t->stopped = 1;
        } else {
            t->bad_epochs = 0;
        }
        if (ev->train_loss < t->best_loss)
            t->best_loss = ev->train_loss;
    }
    ev->done = t->done;
    ev->stopped = t->stopped;
    return TQ_OK;
}

tq_status tq_trainer_write_model(const tq_trainer *t, tq_writer *w)
{
    size_t woff[TQ_TRAIN_MAX_LAYERS], boff[TQ_TRAIN_MAX_LAYERS];
    for (int i = 0; i < t->nl; i++) {
        woff[i] = tq_net_w_offset(t->net, i);
        boff[i] = tq_net_b_offset(t->net, i);
    }
    tq_model_desc m = {t->c.kind, t->loss, t->c.act, t->output, t->nl, t->dims,
                       (t->c.patience || (t->c.no_change > 0 && t->va)) && t->have_best
                           ? t->best
                           : tq_net_theta(t->net),
                       woff, boff, t->mu, t->sd};
    return tq_train_save(&m, w);
}
