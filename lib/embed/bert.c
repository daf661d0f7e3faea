/* bert.c: the BERT-family sentence encoder as an embedder: tokenizes a batch,
 * sorts it by length so that sub-batches waste little on padding, runs the
 * encoder, pools (mean over real tokens, [CLS], or max) and normalizes as the
 * sentence-transformers folder says; rows come back in input order. */
#include "bert.h"
#include "internal.h"

#include <math.h>

/* Padded tokens per forward call: bounds the scratch memory, and the
 * attention scores ([b, len, len]) with it. */
#define TOKEN_BUDGET 8192
#define MAX_SUB_BATCH 64
/* What one more sub-batch costs, in tokens of work: on the CPU its ~110 ops'
 * hand-offs to the threads (~1.5 ms, ~7 tokens) and smaller products; on a
 * device with graphs a graph of its own for each new shape, so there large
 * sub-batches win. */
#define SPLIT_COST_CPU 32
#define SPLIT_COST_GRAPHS 2048

typedef struct bert_embedder {
    tq_embedder base;
    bert_model *m;
    tq_tokenizer *tok;
} bert_embedder;

typedef struct doc {
    int64_t i; /* position in the input */
    int n;     /* tokens */
    int32_t *ids;
} doc;

static int by_len(const void *a, const void *b)
{
    const doc *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void pool(const bert_config *c, const float *hs, int n, float *out)
{
    int64_t H = c->hidden;
    double ss = 0;
    for (int64_t d = 0; d < H; d++) {
        double v;
        if (c->pool == BERT_POOL_CLS)
            v = hs[d];
        else if (c->pool == BERT_POOL_MAX) {
            v = hs[d];
            for (int t = 1; t < n; t++)
                v = hs[t * H + d] > v ? hs[t * H + d] : v;
        } else {
            v = 0;
            for (int t = 0; t < n; t++)
                v += hs[t * H + d];
            v /= n;
        }
        out[d] = (float)v;
        ss += v * v;
    }
    /* as torch.nn.functional.normalize: divide by max(norm, 1e-12) */
    if (c->normalize) {
        double norm = sqrt(ss);
        double inv = 1.0 / (norm > 1e-12 ? norm : 1e-12);
        for (int64_t d = 0; d < H; d++)
            out[d] = (float)(out[d] * inv);
    }
}

/* The sizes of the sub-batches of n documents sorted by length, each padded
 * to its last one's length, that cost the least: padded tokens plus
 * split_cost a sub-batch, at most MAX_SUB_BATCH documents and TOKEN_BUDGET
 * padded tokens each (or one document). Dynamic programming over the sorted
 * lengths, O(n MAX_SUB_BATCH); a greedy cut (64 documents at a time) padded
 * 2000 short sentences in batches of 256 by 12%, this by 2.5%. Into size[],
 * returns their count; -1 when out of memory. */
static int64_t plan_sub_batches(const doc *d, int64_t n, int64_t split_cost, int64_t *size)
{
    int64_t *cost = malloc((size_t)(n + 1) * sizeof *cost);
    int64_t *from = malloc((size_t)(n + 1) * sizeof *from);
    if (!cost || !from) {
        free(cost);
        free(from);
        return -1;
    }
    cost[0] = 0;
    for (int64_t i = 1; i <= n; i++) { /* the best cut of d[0..i): last sub-batch d[j..i) */
        cost[i] = -1;
        for (int64_t k = 1; k <= i && k <= MAX_SUB_BATCH; k++) {
            int64_t pad = k * d[i - 1].n;
            if (k > 1 && pad > TOKEN_BUDGET)
                break;
            int64_t c = cost[i - k] + pad + split_cost;
            if (cost[i] < 0 || c < cost[i]) /* ties: the smaller last sub-batch */
                cost[i] = c, from[i] = i - k;
        }
    }
    int64_t count = 0;
    for (int64_t i = n; i > 0; i = from[i])
        count++;
    int64_t at = count;
    for (int64_t i = n; i > 0; i = from[i])
        size[--at] = i - from[i];
    free(cost);
    free(from);
    return count;
}

/* Runs docs[0..nd), all padded to the last one's length (they are sorted). */
static tq_status sub_batch(bert_embedder *be, doc *docs, int64_t nd, float *out)
{
    const bert_config *c = &be->m->cfg;
    int64_t len = docs[nd - 1].n, H = c->hidden;
    int64_t *ids = calloc((size_t)(nd * len), sizeof *ids);
    int *lens = malloc((size_t)nd * sizeof *lens);
    float *hs = malloc((size_t)(nd * len * H) * sizeof *hs);
    tq_status st = TQ_OK;
    if (!ids || !lens || !hs)
        st = tq_fail(TQ_ERR_NOMEM, "bert: out of memory for a batch");
    for (int64_t i = 0; !st && i < nd; i++) {
        lens[i] = docs[i].n;
        for (int t = 0; t < docs[i].n; t++)
            ids[i * len + t] = docs[i].ids[t]; /* padding stays 0: masked anyway */
    }
    if (!st)
        st = tq_bert_forward(be->m, nd, len, ids, lens, hs);
    for (int64_t i = 0; !st && i < nd; i++)
        pool(c, hs + i * len * H, docs[i].n, out + docs[i].i * H);
    free(ids);
    free(lens);
    free(hs);
    return st;
}

static tq_status run(tq_embedder *e, int64_t n, const char *const *text, const size_t *len,
                     float *out)
{
    bert_embedder *be = (bert_embedder *)e;
    int maxlen = be->m->cfg.max_seq;
    if (n <= 0)
        return TQ_OK;
    doc *d = calloc((size_t)n, sizeof *d);
    int32_t *ids = malloc((size_t)n * (size_t)maxlen * sizeof *ids);
    tq_status st = TQ_OK;
    if (!d || !ids)
        st = tq_fail(TQ_ERR_NOMEM, "bert: out of memory for %lld documents", (long long)n);
    for (int64_t i = 0; !st && i < n; i++) {
        d[i].i = i;
        d[i].ids = ids + i * maxlen;
        st = tq_tokenizer_encode(be->tok, text[i], len[i], d[i].ids, maxlen, &d[i].n, NULL);
    }
    int64_t *size = NULL, count = 0;
    if (!st) {
        qsort(d, (size_t)n, sizeof *d, by_len);
        size = malloc((size_t)n * sizeof *size);
        int64_t split_cost = be->m->plans ? SPLIT_COST_GRAPHS : SPLIT_COST_CPU;
        count = size ? plan_sub_batches(d, n, split_cost, size) : -1;
        if (count < 0)
            st = tq_fail(TQ_ERR_NOMEM, "bert: out of memory for %lld documents", (long long)n);
    }
    for (int64_t s = 0, b = 0; !st && s < count; b += size[s++])
        st = sub_batch(be, d + b, size[s], out);
    free(size);
    free(d);
    free(ids);
    return st;
}

static void close_bert(tq_embedder *e)
{
    bert_embedder *be = (bert_embedder *)e;
    tq_bert_model_free(be->m);
    tq_tokenizer_free(be->tok);
    free(be);
}

static const tq_embedder_ops bert_ops = {run, close_bert};

tq_status tq_embed_bert_open(const char *path, tq_device *dev, tq_dtype prec, tq_embedder **out)
{
    if (!dev)
        return tq_fail(TQ_ERR_USAGE, "%s: a BERT model needs a device", path);
    bert_embedder *be = calloc(1, sizeof *be);
    if (!be)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    be->base.ops = &bert_ops;
    bert_config cfg;
    tq_status st = tq_bert_config_load(path, &cfg);
    if (st) {
        free(be);
        return st;
    }
    /* tokenizer.json when the folder has one, else vocab.txt */
    st = tq_tokenizer_open(cfg.model_dir, &cfg.wp, &be->tok);
    if (!st && tq_tokenizer_vocab_size(be->tok) > cfg.vocab)
        st = tq_fail(TQ_ERR_DATA, "%s/%s: %lld tokens, more than vocab_size %lld",
                     cfg.model_dir, tq_tokenizer_source(be->tok),
                     (long long)tq_tokenizer_vocab_size(be->tok), (long long)cfg.vocab);
    if (st) {
        tq_bert_config_free(&cfg);
        close_bert(&be->base);
        return st;
    }
    /* int8: the f32 model first, which calibrates the int8 one */
    cfg.prec = prec == TQ_DTYPE_I8 ? TQ_DTYPE_F32 : prec;
    st = tq_bert_model_load(&cfg, dev, &be->m);
    if (!st && prec == TQ_DTYPE_I8)
        st = tq_bert_int8(be->m, be->tok);
    if (st) {
        close_bert(&be->base);
        return st;
    }
    be->base.dim = be->m->cfg.hidden;
    snprintf(be->base.describe, sizeof be->base.describe, "bert:%s", path);
    *out = &be->base;
    return TQ_OK;
}
