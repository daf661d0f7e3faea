/* net.h: the network tq-train trains (not public): a chain of affine layers
 * with an activation between them, its parameters in one flat f32 vector on
 * the host (what the optimizer updates and the model file holds), run forward
 * and backward with the op API on the device. */
#ifndef TQ_TRAIN_NET_H
#define TQ_TRAIN_NET_H

#include "optim.h"

typedef struct tq_net tq_net;

/* nl layers, dims[0] inputs, dims[i + 1] outputs of layer i; act between
 * layers (TQ_ACT_* or TQ_TRAIN_GELU); cap: the most rows a batch has. The
 * parameters start at 0. */
tq_status tq_net_new(tq_device *dev, int nl, const int64_t *dims, int act, int64_t cap,
                     tq_net **net);
void tq_net_free(tq_net *net);

/* The flat parameters and gradient (host, n values), and where each layer's
 * weights [in, out] (row-major) and biases [out] are in them. */
float *tq_net_theta(tq_net *net);
float *tq_net_grad(tq_net *net);
size_t tq_net_size(const tq_net *net);
size_t tq_net_w_offset(const tq_net *net, int layer);
size_t tq_net_b_offset(const tq_net *net, int layer);
const tq_param_span *tq_net_spans(const tq_net *net, int *n);

/* --precision: every product's operands (inputs, weights, output gradients)
 * rounded to prec (TQ_DTYPE_BF16 or F16) first, the products and sums in f32;
 * TQ_DTYPE_F32 (the default) rounds nothing. */
tq_status tq_net_set_precision(tq_net *net, tq_dtype prec);

/* After the host parameters changed: copies them to the device (nothing to do
 * where the device works in host memory). */
tq_status tq_net_push(tq_net *net);

/* Gathers rows idx[0..n) of x (f32 [N, dims[0]] on the device) as the input of
 * the next forward, n <= cap. */
tq_status tq_net_input(tq_net *net, const tq_tensor *x, const int64_t *idx, int64_t n);
/* Forward of the input rows; *out: the last layer's outputs [n, dims[nl]] on
 * the host (before any output function), valid until the next call. */
tq_status tq_net_forward(tq_net *net, const float **out);
/* Backward of the last forward, dout the loss's gradient with respect to its
 * outputs [n, dims[nl]]: fills the gradient of every parameter. */
tq_status tq_net_backward(tq_net *net, const float *dout);

#endif
