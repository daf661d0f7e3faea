/* bert_forward.c: the BERT encoder on a padded batch, every product, softmax,
 * layer norm, GELU, add and gather through the op API on the model's device.
 * Attention is built per head from batched matmuls until a fused op exists:
 * one product projects q, k, v of all heads ([b*len, 3 hidden]); seen as rows
 * of dh floats, a gather pulls each head's rows out into a contiguous
 * [b, len, dh] tensor, so no transpose op is needed. */
#include "bert.h"
#include "internal.h"

#include <math.h>

/* Added to the scores of padded keys: exp() of it underflows to exactly 0
 * after the max subtraction, and it stays finite so no inf - inf NaN can
 * arise (every row has at least one real key, [CLS]). */
#define MASK_NEG (-1e30f)

typedef struct scratch {
    tq_tensor *x, *x3, *tmp, *x1, *attn, *q, *k, *v, *s, *ctx, *mid, *mask;
    tq_tensor *qkv, *qkv_rows, *q2, *k2, *v2; /* projections; q, k, v are views of q2.. */
    tq_tensor **idx;                          /* 3 * heads gather indices, [b*len] each */
    int64_t nidx;
} scratch;

static void scratch_free(scratch *s)
{
    /* views before their parents */
    tq_tensor *all[] = {s->x3, s->x, s->tmp, s->x1, s->attn, s->q, s->k, s->v, s->s,
                        s->ctx, s->mid, s->mask, s->qkv_rows, s->qkv, s->q2, s->k2, s->v2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tq_tensor_free(all[i]);
    for (int64_t i = 0; s->idx && i < s->nidx; i++)
        tq_tensor_free(s->idx[i]);
    free(s->idx);
}

static tq_status new3(tq_device *dev, int64_t a, int64_t b, int64_t c, tq_tensor **t)
{
    int64_t d[3] = {a, b, c};
    return tq_tensor_new(dev, TQ_DTYPE_F32, 3, d, t);
}

static tq_status attention(const bert_model *m, const bert_layer *L, scratch *s)
{
    int64_t nh = m->cfg.heads, dh = m->cfg.hidden / nh;
    float scale = (float)(1.0 / sqrt((double)dh));
    tq_status st;
    if ((st = tq_op_matmul(s->x, 0, L->wqkv, 1, 1, 0, s->qkv)) ||
        (st = tq_op_add(s->qkv, L->bqkv, s->qkv)))
        return st;
    for (int64_t h = 0; !st && h < nh; h++) {
        if ((st = tq_op_gather(s->qkv_rows, s->idx[h], s->q2)) ||
            (st = tq_op_gather(s->qkv_rows, s->idx[nh + h], s->k2)) ||
            (st = tq_op_gather(s->qkv_rows, s->idx[2 * nh + h], s->v2)) ||
            (st = tq_op_matmul(s->q, 0, s->k, 1, scale, 0, s->s)) ||
            (st = tq_op_add(s->s, s->mask, s->s)) ||
            (st = tq_op_softmax(s->s, s->s)) ||
            (st = tq_op_matmul(s->s, 0, s->v, 0, 1, 0, s->ctx)))
            break;
        /* the output dense, head by head: attn += ctx_h (W_o^T rows of head h) */
        st = tq_op_matmul(s->ctx, 0, L->wo_t[h], 0, 1, h ? 1.0f : 0.0f, s->attn);
    }
    return st;
}

/* Projection buffers and the gather indices: row (b*len + t) * 3 heads +
 * part * heads + h of the [b*len*3*heads, dh] view is token t of doc b, head
 * h, part q/k/v. */
static tq_status heads_setup(const bert_model *m, int64_t b, int64_t len, scratch *s)
{
    tq_device *dev = m->dev;
    int64_t n = b * len, nh = m->cfg.heads, H = m->cfg.hidden, dh = H / nh;
    int64_t d2[2] = {n, 3 * H}, rows[2] = {n * 3 * nh, dh}, dn[2] = {n, dh}, d3[3] = {b, len, dh};
    tq_status st;
    if ((st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, d2, &s->qkv)) ||
        (st = tq_tensor_view(s->qkv, 0, TQ_DTYPE_F32, 2, rows, &s->qkv_rows)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dn, &s->q2)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dn, &s->k2)) ||
        (st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dn, &s->v2)) ||
        (st = tq_tensor_view(s->q2, 0, TQ_DTYPE_F32, 3, d3, &s->q)) ||
        (st = tq_tensor_view(s->k2, 0, TQ_DTYPE_F32, 3, d3, &s->k)) ||
        (st = tq_tensor_view(s->v2, 0, TQ_DTYPE_F32, 3, d3, &s->v)))
        return st;
    s->nidx = 3 * nh;
    s->idx = calloc((size_t)s->nidx, sizeof *s->idx);
    int64_t *host = malloc((size_t)n * sizeof *host);
    if (!s->idx || !host) {
        free(host);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    for (int64_t j = 0; !st && j < s->nidx; j++) {
        for (int64_t r = 0; r < n; r++)
            host[r] = r * 3 * nh + j;
        if (!(st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &s->idx[j])))
            st = tq_tensor_upload(s->idx[j], host, (size_t)n * sizeof *host);
    }
    free(host);
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

/* The key-padding mask [b, len, len]: 0 for real keys, MASK_NEG for padding. */
static tq_status make_mask(tq_device *dev, int64_t b, int64_t len, const int *lens, tq_tensor **t)
{
    tq_status st = new3(dev, b, len, len, t);
    if (st)
        return st;
    float *h = malloc((size_t)(b * len * len) * sizeof *h);
    if (!h)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < b; i++)
        for (int64_t r = 0; r < len; r++)
            for (int64_t j = 0; j < len; j++)
                h[(i * len + r) * len + j] = j < lens[i] ? 0.0f : MASK_NEG;
    st = tq_tensor_upload(*t, h, (size_t)(b * len * len) * sizeof *h);
    free(h);
    return st;
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
    int64_t H = m->cfg.hidden, dh = H / m->cfg.heads;
    scratch s = {0};
    tq_status st;
    if (!(st = embed(m, b, len, ids, &s)) && !(st = make_mask(dev, b, len, lens, &s.mask)) &&
        !(st = new3(dev, b, len, H, &s.x1)) && !(st = new3(dev, b, len, H, &s.attn)) &&
        !(st = heads_setup(m, b, len, &s)) && !(st = new3(dev, b, len, len, &s.s)) &&
        !(st = new3(dev, b, len, dh, &s.ctx)) &&
        !(st = new3(dev, b, len, m->cfg.inter, &s.mid))) {
        for (int64_t i = 0; !st && i < m->cfg.layers; i++)
            st = layer(m, &m->layer[i], &s);
        if (!st)
            st = tq_tensor_download(s.x3, out, (size_t)(b * len * H) * sizeof *out);
    }
    scratch_free(&s);
    return st;
}
