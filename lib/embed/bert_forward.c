/* bert_forward.c: the BERT encoder on a padded batch, every product, layer
 * norm, GELU, add and gather through the op API on the model's device.
 * Attention is the fused op (tq_op_attention, the one tq-attend runs): the
 * projections give q, k, v of all heads side by side, the op splits the heads
 * and masks each document's padding with key_len. */
#include "bert.h"
#include "internal.h"

typedef struct scratch {
    tq_tensor *x, *x3, *tmp, *x1, *attn, *ctx, *mid, *key_len;
    tq_tensor *q, *k, *v, *q3, *k3, *v3; /* q3.. are [b, len, H] views of q.. */
} scratch;

static void scratch_free(scratch *s)
{
    /* views before their parents */
    tq_tensor *all[] = {s->x3, s->x, s->tmp, s->x1, s->attn, s->ctx, s->mid, s->key_len,
                        s->q3, s->k3, s->v3, s->q, s->k, s->v};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tq_tensor_free(all[i]);
}

static tq_status new3(tq_device *dev, int64_t a, int64_t b, int64_t c, tq_tensor **t)
{
    int64_t d[3] = {a, b, c};
    return tq_tensor_new(dev, TQ_DTYPE_F32, 3, d, t);
}

/* Self-attention of every document over its own real tokens; the output
 * projection without its bias (layer() adds it). */
static tq_status attention(const bert_model *m, const bert_layer *L, scratch *s)
{
    tq_attention_args args = {(int)m->cfg.heads, 0.0f, 0, s->key_len, NULL, NULL, NULL, NULL};
    tq_status st;
    if ((st = tq_op_matmul(s->x, 0, L->wq, 1, 1, 0, s->q)) ||
        (st = tq_op_add(s->q, L->bq, s->q)) ||
        (st = tq_op_matmul(s->x, 0, L->wk, 1, 1, 0, s->k)) ||
        (st = tq_op_add(s->k, L->bk, s->k)) ||
        (st = tq_op_matmul(s->x, 0, L->wv, 1, 1, 0, s->v)) ||
        (st = tq_op_add(s->v, L->bv, s->v)) ||
        (st = tq_op_attention(s->q3, s->k3, s->v3, &args, s->ctx)))
        return st;
    return tq_op_matmul(s->ctx, 0, L->wo, 1, 1, 0, s->attn);
}

/* The projections [b*len, H], their [b, len, H] views, and key_len [b]: each
 * document's real tokens (every document has at least [CLS], so no query of
 * a real token is fully masked; padding rows are computed and ignored). */
static tq_status heads_setup(const bert_model *m, int64_t b, int64_t len, const int *lens,
                             scratch *s)
{
    tq_device *dev = m->dev;
    int64_t n = b * len, H = m->cfg.hidden, d2[2] = {n, H}, d3[3] = {b, len, H};
    tq_status st;
    if ((st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->q)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->k)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->v)) ||
        (st = tq_tensor_view(s->q, 0, TQ_DTYPE_F32, 3, d3, &s->q3)) ||
        (st = tq_tensor_view(s->k, 0, TQ_DTYPE_F32, 3, d3, &s->k3)) ||
        (st = tq_tensor_view(s->v, 0, TQ_DTYPE_F32, 3, d3, &s->v3)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &b, &s->key_len)))
        return st;
    int64_t *kl = malloc((size_t)b * sizeof *kl + 1);
    if (!kl)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < b; i++)
        kl[i] = lens[i];
    st = tq_tensor_upload(s->key_len, kl, (size_t)b * sizeof *kl);
    free(kl);
    return st;
}

static tq_status layer(const bert_model *m, const bert_layer *L, scratch *s)
{
    float eps = (float)m->cfg.eps;
    tq_status st;
    if ((st = attention(m, L, s)) ||
        (st = tq_op_add(s->attn, L->bo, s->attn)) ||
        (st = tq_op_add(s->attn, s->x3, s->x1)) ||
        (st = tq_op_layernorm(s->x1, L->ln1_g, L->ln1_b, eps, s->x1)) ||
        (st = tq_op_matmul(s->x1, 0, L->wi, 1, 1, 0, s->mid)) ||
        (st = tq_op_add(s->mid, L->bi, s->mid)) ||
        (st = tq_op_gelu(s->mid, s->mid)) ||
        (st = tq_op_matmul(s->mid, 0, L->wo2, 1, 1, 0, s->attn)) ||
        (st = tq_op_add(s->attn, L->bo2, s->attn)) ||
        (st = tq_op_add(s->attn, s->x1, s->x3)) ||
        (st = tq_op_layernorm(s->x3, L->ln2_g, L->ln2_b, eps, s->x3)))
        return st;
    return TQ_OK;
}

static tq_status embed(const bert_model *m, int64_t b, int64_t len, const int64_t *ids,
                       scratch *s)
{
    tq_device *dev = m->dev;
    int64_t n = b * len, H = m->cfg.hidden;
    tq_tensor *idx = NULL, *pidx = NULL;
    int64_t *pos = malloc((size_t)n * sizeof *pos);
    if (!pos)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        pos[i] = i % len;
    tq_status st;
    int64_t d2[2] = {n, H};
    if (!(st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &idx)) &&
        !(st = tq_tensor_upload(idx, ids, (size_t)n * sizeof *ids)) &&
        !(st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &pidx)) &&
        !(st = tq_tensor_upload(pidx, pos, (size_t)n * sizeof *pos)) &&
        !(st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->x)) &&
        !(st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->tmp)) &&
        !(st = tq_op_gather(m->wemb, idx, s->x)) && !(st = tq_op_gather(m->pemb, pidx, s->tmp)) &&
        !(st = tq_op_add(s->x, s->tmp, s->x)) && !(st = tq_op_add(s->x, m->temb0, s->x)) &&
        !(st = tq_op_layernorm(s->x, m->eln_g, m->eln_b, (float)m->cfg.eps, s->x))) {
        int64_t d3[3] = {b, len, H};
        st = tq_tensor_view(s->x, 0, TQ_DTYPE_F32, 3, d3, &s->x3);
    }
    tq_tensor_free(idx);
    tq_tensor_free(pidx);
    free(pos);
    return st;
}

tq_status tq_bert_forward(const bert_model *m, int64_t b, int64_t len, const int64_t *ids,
                          const int *lens, float *out)
{
    for (int64_t i = 0; i < b * len; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            return tq_fail(TQ_ERR_DATA, "bert: token id %lld outside the vocabulary of %lld",
                           (long long)ids[i], (long long)m->cfg.vocab);
    if (len > m->cfg.max_pos)
        return tq_fail(TQ_ERR_USAGE, "bert: %lld tokens exceed max_position_embeddings",
                       (long long)len);
    tq_device *dev = m->dev;
    int64_t H = m->cfg.hidden;
    scratch s = {0};
    tq_status st;
    if (!(st = embed(m, b, len, ids, &s)) && !(st = new3(dev, b, len, H, &s.x1)) &&
        !(st = new3(dev, b, len, H, &s.attn)) && !(st = heads_setup(m, b, len, lens, &s)) &&
        !(st = new3(dev, b, len, H, &s.ctx)) &&
        !(st = new3(dev, b, len, m->cfg.inter, &s.mid))) {
        for (int64_t i = 0; !st && i < m->cfg.layers; i++)
            st = layer(m, &m->layer[i], &s);
        if (!st)
            st = tq_tensor_download(s.x3, out, (size_t)(b * len * H) * sizeof *out);
    }
    scratch_free(&s);
    return st;
}
