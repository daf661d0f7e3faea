/* train-grad: checks tq-train's gradients (lib/train: the network's backward
 * through the op API, and each loss's gradient) against central finite
 * differences of an independent float64 forward and loss written here, for
 * every model x loss x activation. Prints one line per case; exits 1 on a
 * failure. Usage: train-grad [SEED] */
#include "train/loss.h"
#include "train/net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prob {
    int nl, act, loss;
    int64_t dims[4], n, ng, gs[8];
    float x[16 * 8];
    double y[16];
    float w[16];
    int weighted;
} prob;

static uint64_t rs = 88172645463325252u;
static double unif(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1p-53;
}

static double act64(int a, double z)
{
    switch (a) {
    case TQ_ACT_RELU: return z > 0 ? z : 0;
    case TQ_ACT_TANH: return tanh(z);
    case TQ_ACT_SIGMOID: return 1 / (1 + exp(-z));
    default: return 0.5 * z * erfc(-z / sqrt(2.0));
    }
}

/* The float64 loss of parameters th (the net's flat layout). */
static double loss64(const prob *p, const double *th, const size_t *wo, const size_t *bo)
{
    double h[16][32], z[16][32];
    int64_t o = p->dims[p->nl];
    for (int64_t r = 0; r < p->n; r++) {
        double in[32];
        for (int64_t j = 0; j < p->dims[0]; j++)
            in[j] = p->x[r * p->dims[0] + j];
        for (int i = 0; i < p->nl; i++) {
            for (int64_t c = 0; c < p->dims[i + 1]; c++) {
                double s = th[bo[i] + (size_t)c];
                for (int64_t k = 0; k < p->dims[i]; k++)
                    s += in[k] * th[wo[i] + (size_t)(k * p->dims[i + 1] + c)];
                h[r][c] = i + 1 < p->nl ? act64(p->act, s) : s;
            }
            for (int64_t c = 0; c < p->dims[i + 1]; c++)
                in[c] = h[r][c];
        }
        for (int64_t c = 0; c < o; c++)
            z[r][c] = in[c];
    }
    double sum = 0, ws = 0;
    if (p->loss == TQ_LOSS_LISTWISE) {
        for (int64_t g = 0; g < p->ng; g++) {
            double mx = -INFINITY, se = 0, ys = 0, l = 0;
            for (int64_t r = p->gs[g]; r < p->gs[g + 1]; r++)
                mx = fmax(mx, z[r][0]), ys += p->y[r];
            for (int64_t r = p->gs[g]; r < p->gs[g + 1]; r++)
                se += exp(z[r][0] - mx);
            for (int64_t r = p->gs[g]; r < p->gs[g + 1]; r++)
                l -= p->y[r] / ys * (z[r][0] - mx - log(se));
            sum += l;
        }
        return sum / (double)p->ng;
    }
    for (int64_t r = 0; r < p->n; r++) {
        double wr = p->weighted ? p->w[r] : 1, l;
        if (p->loss == TQ_LOSS_MSE)
            l = (z[r][0] - p->y[r]) * (z[r][0] - p->y[r]);
        else if (p->loss == TQ_LOSS_LOGISTIC) {
            double s = 1 / (1 + exp(-z[r][0]));
            l = -(p->y[r] * log(s) + (1 - p->y[r]) * log(1 - s));
        } else {
            double mx = -INFINITY, se = 0;
            for (int64_t c = 0; c < o; c++)
                mx = fmax(mx, z[r][c]);
            for (int64_t c = 0; c < o; c++)
                se += exp(z[r][c] - mx);
            l = -(z[r][(int)p->y[r]] - mx - log(se));
        }
        sum += wr * l, ws += wr;
    }
    return sum / ws;
}

static int run_case(tq_device *dev, int nl, int act, int loss, int weighted, tq_dtype prec, double tol)
{
    prob p;
    memset(&p, 0, sizeof p);
    p.nl = nl, p.act = act, p.loss = loss, p.weighted = weighted;
    p.n = 12;
    p.dims[0] = 5;
    if (nl == 3)
        p.dims[1] = 7, p.dims[2] = 6;
    else if (nl == 2)
        p.dims[1] = 9;
    p.dims[nl] = loss == TQ_LOSS_SOFTMAX ? 4 : 1;
    for (int64_t i = 0; i < p.n * p.dims[0]; i++)
        p.x[i] = (float)(2 * unif() - 1);
    for (int64_t r = 0; r < p.n; r++) {
        p.w[r] = (float)(0.2 + unif());
        p.y[r] = loss == TQ_LOSS_MSE ? 2 * unif() - 1
                 : loss == TQ_LOSS_LOGISTIC ? (unif() < 0.5 ? 0 : unif() < 0.5 ? 1 : 0.3)
                 : loss == TQ_LOSS_SOFTMAX ? (double)(r % 4)
                                           : 0;
    }
    int64_t gsz[] = {3, 1, 5, 3};
    p.ng = loss == TQ_LOSS_LISTWISE ? 4 : 1;
    p.gs[0] = 0;
    for (int g = 0; g < p.ng; g++) {
        p.gs[g + 1] = loss == TQ_LOSS_LISTWISE ? p.gs[g] + gsz[g] : p.n;
        if (loss == TQ_LOSS_LISTWISE) /* one row marked 1; the third group two */
            p.y[p.gs[g] + (g % gsz[g])] = 1, p.y[p.gs[g + 1] - 1] = g == 2 ? 1 : p.y[p.gs[g + 1] - 1];
    }
    tq_net *net;
    if (tq_net_new(dev, nl, p.dims, act, p.n, &net) || tq_net_set_precision(net, prec)) {
        printf("FAIL net: %s\n", tq_errmsg());
        return 1;
    }
    size_t n = tq_net_size(net), wo[4], bo[4];
    float *th = tq_net_theta(net);
    for (int i = 0; i < nl; i++)
        wo[i] = tq_net_w_offset(net, i), bo[i] = tq_net_b_offset(net, i);
    int nsp;
    const tq_param_span *sp = tq_net_spans(net, &nsp);
    for (int s = 0; s < nsp; s++)
        for (size_t i = sp[s].offset; i < sp[s].offset + sp[s].count; i++)
            th[i] = (float)(unif() - 0.5);
    tq_tensor *xt;
    int64_t xd[2] = {p.n, p.dims[0]}, idx[16];
    for (int64_t r = 0; r < p.n; r++)
        idx[r] = r;
    const float *z;
    float dout[64];
    double ws;
    int bad = tq_net_push(net) || tq_tensor_new(dev, TQ_DTYPE_F32, 2, xd, &xt) ||
              tq_tensor_upload(xt, p.x, sizeof(float) * (size_t)(p.n * p.dims[0])) ||
              tq_net_input(net, xt, idx, p.n) || tq_net_forward(net, &z);
    if (!bad) {
        tq_loss_batch(loss, z, p.n, p.dims[nl], p.y, weighted ? p.w : NULL, p.gs, p.ng, &ws, dout);
        bad = tq_net_backward(net, dout);
    }
    if (bad) {
        printf("FAIL run: %s\n", tq_errmsg());
        return 1;
    }
    const float *g = tq_net_grad(net);
    double *t64 = malloc(n * 8), num = 0, den = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        t64[i] = th[i];
    for (int s = 0; s < nsp; s++)
        for (size_t i = sp[s].offset; i < sp[s].offset + sp[s].count; i++) {
            double h = 1e-6, keep = t64[i];
            t64[i] = keep + h;
            double lp = loss64(&p, t64, wo, bo);
            t64[i] = keep - h;
            double lm = loss64(&p, t64, wo, bo);
            t64[i] = keep;
            double fd = (lp - lm) / (2 * h), e = fabs(g[i] - fd);
            num += e * e, den += fd * fd;
            worst = e > worst ? e : worst;
        }
    /* The analytic gradient is f32 (each value within ~1e-6 relative of its
     * exact sums); the differences are float64 with h = 1e-6, truncation
     * error ~h^2 and rounding ~1e-16/h = 1e-10. Correct gradients come out
     * near 1e-7; a relative error of 1e-5 leaves room for the f32 side and
     * catches any wrong term (which moves a gradient by its own size). */
    double rel = sqrt(num / (den > 0 ? den : 1));
    static const char *acts[] = {"relu", "tanh", "sigmoid", "gelu"};
    printf("%s %d layer%s %s, %s loss%s, %s products: %zu parameters, relative error %.2e\n",
           rel < tol && (prec == TQ_DTYPE_F32 || rel > 1e-5) ? "ok" : "FAIL", nl, nl > 1 ? "s" : "", nl > 1 ? acts[act] : "(no activation)",
           tq_train_loss_names[loss], weighted ? ", weighted" : "", tq_dtype_name(prec), n, rel);
    free(t64);
    tq_tensor_free(xt);
    tq_net_free(net);
    return !(rel < tol && (prec == TQ_DTYPE_F32 || rel > 1e-5));
}

int main(int argc, char **argv)
{
    if (argc > 1)
        rs = strtoull(argv[1], NULL, 10) * 2654435761u + 1;
    tq_device *dev;
    if (tq_device_open("cpu", &dev)) {
        printf("FAIL device: %s\n", tq_errmsg());
        return 1;
    }
    int fails = 0;
    for (int loss = 0; loss < 4; loss++) {
        fails += run_case(dev, 1, 0, loss, 0, TQ_DTYPE_F32, 1e-5); /* linear, logistic, softmax */
        if (loss != TQ_LOSS_LISTWISE)
            fails += run_case(dev, 1, 0, loss, 1, TQ_DTYPE_F32, 1e-5);
        for (int act = 0; act < 4; act++)
            fails += run_case(dev, act == 1 ? 3 : 2, act, loss, loss == TQ_LOSS_SOFTMAX,
                              TQ_DTYPE_F32, 1e-5);
        /* --precision: each product's operands rounded to 8 (bf16) or 11
         * (f16) significant bits, relative errors 2^-9 and 2^-12 per operand;
         * through the layers the gradient's error stays within a few times
         * that: 2^-6 and 2^-9 bound it (bf16 comes out near 3e-3, f16 near
         * 3e-4). It must also exceed 1e-5, the f32 bound: an operand left
         * unrounded would pass the upper bound alone. */
        fails += run_case(dev, 2, TQ_ACT_TANH, loss, 0, TQ_DTYPE_BF16, 0x1p-6);
        fails += run_case(dev, 2, TQ_ACT_TANH, loss, 0, TQ_DTYPE_F16, 0x1p-9);
    }
    tq_device_close(dev);
    printf("%d failed\n", fails);
    return fails != 0;
}
