/* bert_forward.c: the BERT encoder on a padded batch, every product, layer
 * norm, GELU, add and gather through the op API on the model's device.
 * Attention is the fused op (tq_op_attention, the one tq-attend runs): the
 * projections give q, k, v of all heads side by side, the op splits the heads
 * and masks each document's padding with key_len. On a device with graphs
 * (CUDA, HIP) the layers of a batch shape are recorded once and replayed for
 * later batches of that shape, their tensors kept with the graph.
 * One unit with bert_int8.c, split for size: the int8 products run inside this
 * forward pass, and their calibration runs this forward pass in f32. */
#include "bert.h"
#include "internal.h"

typedef struct scratch {
    tq_tensor *x, *x3, *tmp, *x1, *ctx, *mid, *key_len, *idx, *pidx;
    tq_tensor *bias; /* MPNet: the relative position bias [heads, len, len], else NULL */
    tq_tensor *tidx; /* the tokens' types (pairs of texts), i64 [b len] */
    tq_tensor *q, *k, *v, *q3, *k3, *v3; /* q3.. are [b, len, H] views of q.. */
    /* with --precision bf16/f16: x, ctx, x1 and mid in that dtype, as the
     * products take them (NULL in f32) */
    tq_tensor *xl, *ctxl, *x1l, *midl;
    tq_tensor *xl3; /* a [b, len, H] view of xl, as x3 of x */
    /* with --precision int8: x, ctx and x1 as int8 codes, and their rows'
     * scales (mid goes to the second feed-forward in midl: bf16, or f32) */
    tq_tensor *xq, *xs, *ctxq, *ctxs, *x1q, *x1s;
} scratch;

static void scratch_free(scratch *s)
{
    /* views before their parents */
    tq_tensor *all[] = {s->x3, s->x, s->tmp, s->x1, s->ctx, s->mid, s->key_len,
                        s->q3, s->k3, s->v3, s->q, s->k, s->v, s->idx, s->pidx,
                        s->xl3, s->xl, s->ctxl, s->x1l, s->midl, s->xq, s->xs, s->ctxq,
                        s->ctxs, s->x1q, s->x1s, s->bias, s->tidx};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tq_tensor_free(all[i]);
    memset(s, 0, sizeof *s);
}

/* A batch shape's tensors and the graph of its layers, kept for the next
 * batch of that shape (a few shapes, the least recently used dropped). */
#define BERT_PLANS 4
typedef struct bert_plan {
    int64_t b, len;
    unsigned long used;
    scratch s;
    tq_graph *g;
    int no_graph; /* recording failed once (an op that runs on the host) */
} bert_plan;

struct bert_plans {
    bert_plan p[BERT_PLANS];
    unsigned long clock;
};

static void plan_free(bert_plan *p)
{
    tq_graph_free(p->g);
    scratch_free(&p->s);
    memset(p, 0, sizeof *p);
}

tq_status tq_bert_plans_new(tq_device *dev, bert_plans **ps)
{
    *ps = NULL;
    if (!tq_device_has_graphs(dev))
        return TQ_OK;
    if (!(*ps = calloc(1, sizeof **ps)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    return TQ_OK;
}

void tq_bert_plans_free(bert_plans *ps)
{
    if (!ps)
        return;
    for (int i = 0; i < BERT_PLANS; i++)
        plan_free(&ps->p[i]);
    free(ps);
}

static tq_status new3(tq_device *dev, int64_t a, int64_t b, int64_t c, tq_tensor **t)
{
    int64_t d[3] = {a, b, c};
    return tq_tensor_new(dev, TQ_DTYPE_F32, 3, d, t);
}

/* A product's left operand as the layer's weights take it: x itself in f32;
 * lp, the weights' dtype (bf16, f16), into which x's producer (a layer norm,
 * the attention) already rounded it; or, with int8 weights (q given), x
 * times the column factors cs quantized into codes q with a scale a row in
 * qs, but for the rest columns rc (cs 0 there) that the product takes from
 * x in f32. The scratch holds lp or q and qs for the model's precision, NULL
 * the others. */
typedef struct operand {
    const tq_tensor *x, *scale; /* scale: the codes' row scales, NULL but int8 */
    const tq_tensor *f32, *rc;  /* int8: the input and its rest columns */
} operand;

static tq_status prepare(const tq_tensor *x, const tq_tensor *lp, const tq_tensor *cs,
                         const tq_tensor *rc, tq_tensor *q, tq_tensor *qs, operand *op)
{
    op->x = op->f32 = x;
    op->scale = NULL;
    op->rc = rc;
    if (q) {
        op->x = q;
        op->scale = qs;
        return tq_op_quantize_rows(x, cs, q, qs);
    }
    if (lp)
        op->x = lp;
    return TQ_OK;
}

/* Layer norm of x into y and, when the products take another dtype, into lp
 * as well (rounded as each row leaves the norm: the next product's operand
 * without a pass of its own). */
static tq_status norm(const bert_model *m, const tq_tensor *x, const tq_tensor *g,
                      const tq_tensor *b, tq_tensor *y, tq_tensor *lp)
{
    float eps = (float)m->cfg.eps;
    return lp ? tq_op_layernorm_low(x, g, b, eps, y, lp) : tq_op_layernorm(x, g, b, eps, y);
}

/* c = a w^T + beta c, then `then`: by the int8 product for codes (ws the
 * weights' row scales, wr their rest columns), else tq_op_matmul_then. */
static tq_status product(const operand *a, const tq_tensor *w, const tq_tensor *ws,
                         const tq_tensor *wr, float beta, const tq_matmul_then *then, tq_tensor *c)
{
    if (a->scale) {
        tq_i8_rest rest = {a->f32, a->rc, wr};
        return tq_op_matmul_i8_rest(a->x, a->scale, w, ws, &rest, beta, then, c);
    }
    return tq_op_matmul_then(a->x, 0, w, 1, 1.0f, beta, then, c);
}

/* bf16 and int8 let the attention's products take bf16 too (where the
 * device has them): on 256-token passages they were a fifth of the time,
 * and embeddings moved by less than the products' own rounding (smallest
 * cosine to f32 over 200 passages 0.99998 with bf16, 0.99938 with int8,
 * both as before). f16 keeps f32 attention: bf16 is the coarser. */
static int low_attention(const bert_model *m)
{
    return m->cfg.prec == TQ_DTYPE_BF16 || m->cfg.prec == TQ_DTYPE_I8;
}

/* Self-attention of every document over its own real tokens, and the output
 * projection, its bias and the residual: x3 += ctx Wo + bo (x3 as the
 * product's C with beta 1: no pass of its own). With int8, x is quantized
 * once for q, k and v, ctx once for the output projection. */
static tq_status attention(const bert_model *m, int64_t li, scratch *s)
{
    const bert_layer *L = &m->layer[li];
    /* ctx comes out rounded into ctxl too (bf16, f16), for the output
     * projection */
    tq_attention_args args = {(int)m->cfg.heads, 0.0f, 0, s->key_len, NULL, NULL, NULL, NULL,
                              low_attention(m), s->ctxl, s->bias};
    tq_matmul_then bq = {L->bq, 0, NULL, 0}, bk = {L->bk, 0, NULL, 0}, bv = {L->bv, 0, NULL, 0},
                   bo = {L->bo, 0, NULL, 0};
    operand x, ctx;
    tq_status st;
    /* x came out of a layer norm (the embeddings' or the last layer's),
     * which rounded it into xl */
    if ((st = prepare(s->x, s->xl, L->cs_x, L->rc_x, s->xq, s->xs, &x)) ||
        (st = product(&x, L->wq, L->sq, L->rq, 0, &bq, s->q)) ||
        (st = product(&x, L->wk, L->sk, L->rk, 0, &bk, s->k)) ||
        (st = product(&x, L->wv, L->sv, L->rv, 0, &bv, s->v)) ||
        (st = tq_op_attention(s->q3, s->k3, s->v3, &args, s->ctx)))
        return st;
    if (m->calib) /* bert_int8.c's calibration runs here, in f32 */
        tq_bert_calib_fold(m, li, 1, s->ctx, s->key_len);
    if ((st = prepare(s->ctx, s->ctxl, L->cs_ctx, L->rc_ctx, s->ctxq, s->ctxs, &ctx)))
        return st;
    return product(&ctx, L->wo, L->so, L->ro, 1, &bo, s->x3);
}

/* The biases, GELU, residuals and mid's rounding to the products' dtype ride
 * on the products (tq_op_matmul_then, tq_op_matmul_i8): on the CPU no pass
 * of their own (its bf16 and int8 kernels add the bias as they store C).
 * With int8, x1 is quantized for the first feed-forward product; the second
 * takes mid in bf16 (or f32), as bert_int8.c says why. */
static tq_status layer(const bert_model *m, int64_t li, scratch *s)
{
    const bert_layer *L = &m->layer[li];
    /* with a low copy, mid's f32 is never read: low_only lets the CPU's bf16
     * kernel round its tiles straight into it (and take a GELU made for
     * bf16), mid itself unwritten */
    tq_matmul_then ffn1 = {L->bi, 1, s->midl, s->midl != NULL}, ffn2 = {L->bo2, 0, NULL, 0};
    operand x1;
    tq_status st;
    if (m->calib)
        tq_bert_calib_fold(m, li, 0, s->x, s->key_len);
    if ((st = attention(m, li, s)) || (st = norm(m, s->x3, L->ln1_g, L->ln1_b, s->x1, s->x1l)))
        return st;
    if (m->calib)
        tq_bert_calib_fold(m, li, 2, s->x1, s->key_len);
    if ((st = prepare(s->x1, s->x1l, L->cs_x1, L->rc_x1, s->x1q, s->x1s, &x1)) ||
        (st = product(&x1, L->wi, L->si, L->ri, 0, &ffn1, s->mid)) ||
        (st = tq_op_matmul_then(s->midl ? s->midl : s->mid, 0, L->wo2, 1, 1, 1, &ffn2, s->x1)) ||
        (st = norm(m, s->x1, L->ln2_g, L->ln2_b, s->x3, s->xl3)))
        return st;
    return TQ_OK;
}

/* MPNet's position bias for documents of len tokens: every layer's, and
 * every document's (it depends on positions alone). */
static tq_status rel_bias(const bert_model *m, int64_t len, scratch *s)
{
    int64_t d[3] = {m->cfg.heads, len, len};
    float *h = malloc((size_t)(d[0] * len * len + 1) * sizeof *h);
    if (!h)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_bert_rel_bias(m, len, h);
    tq_status st = tq_tensor_new(m->dev, TQ_DTYPE_F32, 3, d, &s->bias);
    if (!st)
        st = tq_tensor_upload(s->bias, h, (size_t)(d[0] * len * len) * sizeof *h);
    free(h);
    return st;
}

/* The tensors of a batch shape, all of them, before anything runs. */
static tq_status scratch_new(const bert_model *m, int64_t b, int64_t len, scratch *s)
{
    tq_device *dev = m->dev;
    int64_t n = b * len, H = m->cfg.hidden, d2[2] = {n, H}, d3[3] = {b, len, H};
    tq_status st;
    if ((st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &s->idx)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &s->pidx)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &s->tidx)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->x)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->tmp)) ||
        (st = tq_tensor_view(s->x, 0, TQ_DTYPE_F32, 3, d3, &s->x3)) ||
        (st = new3(dev, b, len, H, &s->x1)) ||
        (st = new3(dev, b, len, H, &s->ctx)) || (st = new3(dev, b, len, m->cfg.inter, &s->mid)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->q)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->k)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->v)) ||
        (st = tq_tensor_view(s->q, 0, TQ_DTYPE_F32, 3, d3, &s->q3)) ||
        (st = tq_tensor_view(s->k, 0, TQ_DTYPE_F32, 3, d3, &s->k3)) ||
        (st = tq_tensor_view(s->v, 0, TQ_DTYPE_F32, 3, d3, &s->v3)))
        return st;
    tq_dtype lp = m->cfg.prec;
    if (lp == TQ_DTYPE_I8) {
        int64_t di[3] = {b, len, m->cfg.inter};
        if ((st = tq_tensor_new(dev, TQ_DTYPE_I8, 2, d2, &s->xq)) ||
            (st = tq_tensor_new(dev, TQ_DTYPE_I8, 3, d3, &s->ctxq)) ||
            (st = tq_tensor_new(dev, TQ_DTYPE_I8, 3, d3, &s->x1q)) ||
            (st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &n, &s->xs)) ||
            (st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &n, &s->ctxs)) ||
            (st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &n, &s->x1s)) ||
            (m->cfg.ffn2 == TQ_DTYPE_BF16 &&
             (st = tq_tensor_new(dev, TQ_DTYPE_BF16, 3, di, &s->midl))))
            return st;
    } else if (lp != TQ_DTYPE_F32) {
        int64_t di[3] = {b, len, m->cfg.inter};
        if ((st = tq_tensor_new(dev, lp, 2, d2, &s->xl)) ||
            (st = tq_tensor_view(s->xl, 0, lp, 3, d3, &s->xl3)) ||
            (st = tq_tensor_new(dev, lp, 3, d3, &s->ctxl)) ||
            (st = tq_tensor_new(dev, lp, 3, d3, &s->x1l)) ||
            (st = tq_tensor_new(dev, lp, 3, di, &s->midl)))
            return st;
    }
    if (m->rel_table && (st = rel_bias(m, len, s)))
        return st;
    return tq_tensor_new(dev, TQ_DTYPE_I64, 1, &b, &s->key_len);
}

/* The batch's inputs onto the device: token ids, positions, and key_len, each
 * document's real tokens (every document has at least [CLS], so no query of
 * a real token is fully masked; padding rows are computed and ignored). */
static tq_status inputs(const bert_model *m, int64_t b, int64_t len, const int64_t *ids,
                        const int64_t *types, const int *lens, scratch *s)
{
    int64_t n = b * len;
    int64_t *pos = malloc((size_t)(n + b) * sizeof *pos + 1);
    if (!pos)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++) /* (padding's positions too: its rows are ignored) */
        pos[i] = i % len + m->cfg.pos_offset;
    for (int64_t i = 0; i < b; i++)
        pos[n + i] = lens[i];
    tq_status st = tq_tensor_upload(s->idx, ids, (size_t)n * sizeof *ids);
    if (!st)
        st = tq_tensor_upload(s->pidx, pos, (size_t)n * sizeof *pos);
    if (!st)
        st = tq_tensor_upload(s->key_len, pos + n, (size_t)b * sizeof *pos);
    if (!st && types)
        st = tq_tensor_upload(s->tidx, types, (size_t)n * sizeof *types);
    free(pos);
    return st;
}

/* types: the tokens' types were given (a pair of texts), else all are 0 */
static tq_status embed(const bert_model *m, int types, scratch *s)
{
    tq_status st;
    /* the word embeddings: a gather, or int8 rows dequantized as looked up */
    if ((st = tq_bert_wemb_lookup(m, s->idx, s->x)) ||
        (st = tq_op_gather(m->pemb, s->pidx, s->tmp)) ||
        (st = tq_op_add(s->x, s->tmp, s->x)))
        return st;
    if (types && m->temb) {
        if ((st = tq_op_gather(m->temb, s->tidx, s->tmp)) || (st = tq_op_add(s->x, s->tmp, s->x)))
            return st;
    } else if (m->temb0 && (st = tq_op_add(s->x, m->temb0, s->x)))
        return st;
    return norm(m, s->x, m->eln_g, m->eln_b, s->x, s->xl);
}

static tq_status layers(const bert_model *m, scratch *s)
{
    tq_status st = TQ_OK;
    for (int64_t i = 0; !st && i < m->cfg.layers; i++)
        st = layer(m, i, s);
    return st;
}

/* The plan for a shape: the one kept, or a new one in the least recently
 * used place. */
static tq_status plan_get(const bert_model *m, int64_t b, int64_t len, bert_plan **out)
{
    bert_plans *ps = m->plans;
    bert_plan *p = &ps->p[0];
    for (int i = 0; i < BERT_PLANS; i++) {
        if (ps->p[i].b == b && ps->p[i].len == len) {
            p = &ps->p[i];
            p->used = ++ps->clock;
            *out = p;
            return TQ_OK;
        }
        if (ps->p[i].used < p->used)
            p = &ps->p[i];
    }
    plan_free(p);
    tq_status st = scratch_new(m, b, len, &p->s);
    if (st) {
        plan_free(p);
        return st;
    }
    p->b = b;
    p->len = len;
    p->used = ++ps->clock;
    *out = p;
    return TQ_OK;
}

/* The layers, through the plan's graph: recorded at its first batch, then
 * replayed. An op that cannot be recorded (one that runs on the host) drops
 * the recording, and this shape runs its ops one by one from then on. */
static tq_status layers_graphed(const bert_model *m, bert_plan *p)
{
    if (p->g)
        return tq_graph_launch(p->g);
    if (p->no_graph)
        return layers(m, &p->s);
    int rec;
    tq_status st = tq_graph_begin(m->dev, &rec);
    if (st || !rec)
        return st ? st : layers(m, &p->s);
    st = layers(m, &p->s);
    tq_status est = tq_graph_end(m->dev, !st, &p->g);
    if (st || est || !p->g) {
        p->no_graph = 1;
        return layers(m, &p->s);
    }
    return tq_graph_launch(p->g);
}

tq_status tq_bert_forward(const bert_model *m, int64_t b, int64_t len, const int64_t *ids,
                          const int64_t *types, const int *lens, float *out)
{
    for (int64_t i = 0; types && i < b * len; i++)
        if (types[i] < 0 || types[i] >= (m->temb ? m->cfg.types : 1))
            return tq_fail(TQ_ERR_DATA, "bert: token type %lld outside the model's %lld",
                           (long long)types[i], (long long)(m->temb ? m->cfg.types : 1));
    for (int64_t i = 0; i < b * len; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            return tq_fail(TQ_ERR_DATA, "bert: token id %lld outside the vocabulary of %lld",
                           (long long)ids[i], (long long)m->cfg.vocab);
    if (len + m->cfg.pos_offset > m->cfg.max_pos)
        return tq_fail(TQ_ERR_USAGE, "bert: %lld tokens exceed max_position_embeddings",
                       (long long)len);
    size_t bytes = (size_t)(b * len * m->cfg.hidden) * sizeof *out;
    tq_status st;
    if (m->plans) { /* a device with graphs: tensors and graph kept per shape */
        bert_plan *p;
        if (!(st = plan_get(m, b, len, &p)) && !(st = inputs(m, b, len, ids, types, lens, &p->s)) &&
            !(st = embed(m, types != NULL, &p->s)) && !(st = layers_graphed(m, p)))
            st = tq_tensor_download(p->s.x3, out, bytes);
        return st;
    }
    scratch s = {0}; /* elsewhere memory is bounded by the batch: nothing kept */
    if (!(st = scratch_new(m, b, len, &s)) && !(st = inputs(m, b, len, ids, types, lens, &s)) &&
        !(st = embed(m, types != NULL, &s)) && !(st = layers(m, &s)))
        st = tq_tensor_download(s.x3, out, bytes);
    scratch_free(&s);
    return st;
}
