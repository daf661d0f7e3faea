/* bert_model.c: loads an encoder's weights from model.safetensors (names as
 * Hugging Face writes them, with or without the family's prefix: "bert.",
 * "roberta.", "mpnet.") onto the device, once; and the Dense modules'. */
#include "bert.h"
#include "io/safetensors_in.h"
#include "internal.h"

typedef struct loader {
    tq_st_file *st;
    const char *prefix; /* "" or "bert." */
    tq_device *dev;
    const char *path;   /* the file, for messages */
} loader;

static tq_status put(loader *l, const float *w, int rank, const int64_t *dims, tq_tensor **t)
{
    tq_status st = tq_tensor_new(l->dev, TQ_DTYPE_F32, rank, dims, t);
    if (st)
        return st;
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= (size_t)dims[i];
    st = tq_tensor_upload(*t, w, n * sizeof(float));
    /* weights never change: the device may keep them in its kernels' layout */
    tq_tensor_set_constant(*t);
    return st;
}

/* NAME as the file spells it ("bert." or nothing before it) */
static const char *prefixed(const loader *l, const char *name, char full[256])
{
    snprintf(full, 256, "%s%s", l->prefix, name);
    return full;
}

/* Reads NAME (prefixed) of the given shape into host memory. */
static tq_status host(loader *l, const char *name, int rank, const int64_t *dims, float **w)
{
    char full[256];
    return tq_st_read_f32(l->st, prefixed(l, name, full), rank, dims, w);
}

/* On the CPU: NAME straight from the file's map into a new constant tensor
 * of dtype dt (converted, rounded as tq_convert rounds): no copy of the
 * weights in between (~90 MB of page faults and unmapping in f32: a third
 * of a small run's start-up). */
static tq_status cpu_tensor(loader *l, const char *name, tq_dtype dt, int rank,
                            const int64_t *dims, tq_tensor **t)
{
    char full[256];
    tq_status st = tq_tensor_new(l->dev, dt, rank, dims, t);
    if (!st)
        st = tq_st_read_to(l->st, prefixed(l, name, full), rank, dims, dt, tq_tensor_host(*t));
    if (!st)
        tq_tensor_set_constant(*t);
    return st;
}

static tq_status tensor(loader *l, const char *name, int rank, const int64_t *dims, tq_tensor **t)
{
    if (tq_device_backend(l->dev) == TQ_BACKEND_CPU)
        return cpu_tensor(l, name, TQ_DTYPE_F32, rank, dims, t);
    float *w = NULL;
    tq_status st = host(l, name, rank, dims, &w);
    if (!st)
        st = put(l, w, rank, dims, t);
    free(w);
    return st;
}

static tq_status vec(loader *l, const char *name, int64_t d, tq_tensor **t)
{
    return tensor(l, name, 1, &d, t);
}

static tq_status mat(loader *l, const char *name, int64_t r, int64_t c, tq_tensor **t)
{
    int64_t d[2] = {r, c};
    return tensor(l, name, 2, d, t);
}

/* A layer's weight matrix in the products' precision (cfg->prec): rounded
 * to nearest even on the host, as tq_op_convert would. */
static tq_status mat_lp(loader *l, tq_dtype prec, const char *name, int64_t r, int64_t c,
                        tq_tensor **t)
{
    if (prec == TQ_DTYPE_F32)
        return mat(l, name, r, c, t);
    int64_t d[2] = {r, c};
    if (tq_device_backend(l->dev) == TQ_BACKEND_CPU)
        return cpu_tensor(l, name, prec, 2, d, t);
    float *w = NULL;
    uint16_t *h = NULL;
    tq_status st = host(l, name, 2, d, &w);
    size_t n = (size_t)(r * c);
    if (!st && !(h = malloc(n ? n * 2 : 2)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_convert(prec, h, TQ_DTYPE_F32, w, n, 0);
    if (!st)
        st = tq_tensor_new(l->dev, prec, 2, d, t);
    if (!st)
        st = tq_tensor_upload(*t, h, n * 2);
    if (!st)
        tq_tensor_set_constant(*t);
    free(w);
    free(h);
    return st;
}

/* A layer's tensors' names after "encoder.layer.N.": BERT's (RoBERTa's
 * are the same) and MPNet's, in bert_layer's order wq bq wk bk wv bv wo bo
 * ln1_g ln1_b wi bi wo2 bo2 ln2_g ln2_b. */
static const char *const layer_names[2][16] = {
    {"attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
     "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
     "attention.output.dense.weight", "attention.output.dense.bias",
     "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
     "intermediate.dense.weight", "intermediate.dense.bias", "output.dense.weight",
     "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias"},
    {"attention.attn.q.weight", "attention.attn.q.bias", "attention.attn.k.weight",
     "attention.attn.k.bias", "attention.attn.v.weight", "attention.attn.v.bias",
     "attention.attn.o.weight", "attention.attn.o.bias", "attention.LayerNorm.weight",
     "attention.LayerNorm.bias", "intermediate.dense.weight", "intermediate.dense.bias",
     "output.dense.weight", "output.dense.bias", "output.LayerNorm.weight",
     "output.LayerNorm.bias"}};

static tq_status layer(loader *l, const bert_config *c, int64_t li, bert_layer *L)
{
    int64_t H = c->hidden, I = c->inter;
    const char *const *nm = layer_names[c->arch == BERT_ARCH_MPNET];
    tq_tensor **mats[5] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wi};
    tq_tensor **vecs[10] = {&L->bq,    &L->bk, &L->bv,  &L->bo,    &L->ln1_g,
                            &L->ln1_b, &L->bi, &L->bo2, &L->ln2_g, &L->ln2_b};
    /* the names' places of the mats and vecs above, and the vecs' sizes */
    static const int mat_at[5] = {0, 2, 4, 6, 10}, vec_at[10] = {1, 3, 5, 7, 8, 9, 11, 13, 14, 15};
    int64_t vec_n[10] = {H, H, H, H, H, H, I, H, H, H};
    tq_status st = TQ_OK;
    char n[200];
#define NAME(i) (snprintf(n, sizeof n, "encoder.layer.%lld.%s", (long long)li, nm[i]), n)
    for (int i = 0; !st && i < 5; i++)
        st = mat_lp(l, c->prec, NAME(mat_at[i]), i == 4 ? I : H, H, mats[i]);
    for (int i = 0; !st && i < 10; i++)
        st = vec(l, NAME(vec_at[i]), vec_n[i], vecs[i]);
    if (!st)
        st = mat_lp(l, c->prec, NAME(12), H, I, &L->wo2);
#undef NAME
    return st;
}

static tq_status embeddings(loader *l, const bert_config *c, bert_model *m)
{
    int64_t H = c->hidden;
    float *tt = NULL;
    int64_t td[2] = {c->types, H};
    tq_status st;
    int64_t rd[2] = {c->rel_buckets, c->heads};
    int mpnet = c->arch == BERT_ARCH_MPNET; /* no token types; a position bias */
    /* an int8 folder's word embeddings: codes and row scales (bert_wemb.c) */
    if ((c->prec == TQ_DTYPE_I8
             ? (st = tq_bert_int8_wemb_load(l->st, l->path, c, l->dev, &m->wemb, &m->wemb_scale))
             : (st = mat(l, "embeddings.word_embeddings.weight", c->vocab, H, &m->wemb))) ||
        (st = mat(l, "embeddings.position_embeddings.weight", c->max_pos, H, &m->pemb)) ||
        (!mpnet && (st = host(l, "embeddings.token_type_embeddings.weight", 2, td, &tt))) ||
        (!mpnet && (st = put(l, tt, 1, &H, &m->temb0))) ||
        (!mpnet && (st = put(l, tt, 2, td, &m->temb))) ||
        (mpnet && (st = host(l, "encoder.relative_attention_bias.weight", 2, rd, &m->rel_table))) ||
        (st = vec(l, "embeddings.LayerNorm.weight", H, &m->eln_g)) ||
        (st = vec(l, "embeddings.LayerNorm.bias", H, &m->eln_b))) {
        free(tt);
        return st;
    }
    free(tt);
    return TQ_OK;
}

/* A Dense module's weights from its folder's model.safetensors (linear.weight
 * [out, in], linear.bias [out]); without a bias, a zero one. */
static tq_status dense(const bert_dense_cfg *d, tq_device *dev, tq_tensor **w, tq_tensor **b)
{
    char *path = malloc(strlen(d->dir) + 20);
    if (!path)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    sprintf(path, "%s/model.safetensors", d->dir);
    loader l = {NULL, "", dev, path};
    tq_status st = tq_st_open(path, &l.st);
    free(path);
    float *zero = NULL;
    if (!st)
        st = mat(&l, "linear.weight", d->out, d->in, w);
    if (!st && d->bias)
        st = vec(&l, "linear.bias", d->out, b);
    else if (!st && !(zero = calloc((size_t)d->out, sizeof *zero)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    else if (!st)
        st = put(&l, zero, 1, &d->out, b);
    free(zero);
    tq_st_close(l.st);
    return st;
}

/* The embeddings (part 0) and each layer (part 1 + i), on the CPU on the
 * pool's threads: faulting in their memory and rounding them is most of a
 * small run's start-up, and the word embeddings alone are half the model
 * (GPUs: in this thread, whose device queue it is). A part's failure keeps
 * its status and message (the messages are per thread) for the caller, the
 * first part's in order. */
typedef struct load_job {
    loader *l;
    bert_model *m;
    tq_status *st;
    char (*msg)[1024];
} load_job;

static void load_parts(void *ctx, int64_t begin, int64_t end)
{
    load_job *j = ctx;
    for (int64_t i = begin; i < end; i++) {
        /* an int8 folder's layers: tq-quantize --model's codes (bert_int8_file.c) */
        const bert_config *c = &j->m->cfg;
        bert_layer *L = i ? &j->m->layer[i - 1] : NULL;
        j->st[i] = i == 0 ? embeddings(j->l, c, j->m)
                   : c->prec == TQ_DTYPE_I8
                       ? tq_bert_int8_layer_load(j->l->st, j->l->path, c, j->l->dev, i - 1, L)
                       : layer(j->l, c, i - 1, L);
        if (j->st[i])
            snprintf(j->msg[i], sizeof j->msg[i], "%s", tq_errmsg());
    }
}

static tq_status load_all(loader *l, bert_model *m)
{
    int64_t parts = 1 + m->cfg.layers;
    tq_status *st = calloc((size_t)parts, sizeof *st);
    char (*msg)[1024] = calloc((size_t)parts, sizeof *msg);
    if (!st || !msg) {
        free(st);
        free(msg);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    load_job j = {l, m, st, msg};
    if (tq_device_backend(l->dev) == TQ_BACKEND_CPU)
        tq_parallel_for(parts, 1, load_parts, &j);
    else
        load_parts(&j, 0, parts);
    tq_status first = TQ_OK;
    for (int64_t i = 0; i < parts && !first; i++)
        if (st[i])
            first = tq_fail(st[i], "%s", msg[i]);
    free(st);
    free(msg);
    return first;
}

tq_status tq_bert_model_load(bert_config *cfg, tq_device *dev, bert_model **out)
{
    bert_model *m = calloc(1, sizeof *m);
    if (!m) {
        tq_bert_config_free(cfg);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    m->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    m->dev = dev;
    char *path = malloc(strlen(m->cfg.model_dir) + sizeof TQ_BERT_INT8_FILE + 2);
    if (!path) {
        tq_bert_model_free(m);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    /* int8 (only from a tq-quantize --model folder: --precision int8 on an
     * f32 folder loads f32 and calibrates): its products' file, on the CPU,
     * whose products alone are int8 in this version */
    int i8 = m->cfg.prec == TQ_DTYPE_I8;
    sprintf(path, "%s/%s", m->cfg.model_dir, i8 ? TQ_BERT_INT8_FILE : "model.safetensors");
    loader l = {NULL, "", dev, path};
    tq_status st = TQ_OK;
    if (i8 && tq_device_backend(dev) != TQ_BACKEND_CPU)
        st = tq_fail(TQ_ERR_USAGE, "%s: int8 products run on the CPU in this version: "
                     "use --device cpu", path);
    if (!st)
        st = tq_st_open(path, &l.st);
    const char *fmt = l.st ? tq_st_meta(l.st, "format") : NULL;
    const char *ver = l.st ? tq_st_meta(l.st, "version") : NULL;
    if (!st && i8 && fmt && !strcmp(fmt, "tq-int8-encoder") && ver && !strcmp(ver, "1"))
        /* an earlier tq-quantize's (f32 word embeddings): its layout is not
         * read any more; the f32 folder it came from makes this version */
        st = tq_fail(TQ_ERR_DATA, "%s: an int8 encoder of version 1 (an earlier tq-quantize); "
                     "this tq reads version " TQ_BERT_INT8_VERSION ": re-run tq-quantize --model "
                     "on the f32 folder", path);
    else if (!st && i8 && (!fmt || strcmp(fmt, "tq-int8-encoder") || !ver ||
                           strcmp(ver, TQ_BERT_INT8_VERSION)))
        st = tq_fail(TQ_ERR_DATA, "%s: not an int8 encoder of tq-quantize --model (its "
                     "__metadata__ lacks format tq-int8-encoder, version " TQ_BERT_INT8_VERSION ")",
                     path);
    if (i8) /* bf16 where this device multiplies bf16, as bert_int8.c decides */
        m->cfg.ffn2 = tq_device_native_product(dev, TQ_DTYPE_BF16) ? TQ_DTYPE_BF16 : TQ_DTYPE_F32;
    /* the names as the base model saves them, or inside a task model's
     * ("bert.embeddings...": BertForMaskedLM and its kin) */
    static const char *const prefixes[] = {"bert.", "roberta.", "mpnet."};
    for (size_t i = 0; !st && !tq_st_has(l.st, "embeddings.word_embeddings.weight") &&
                       i < sizeof prefixes / sizeof *prefixes;
         i++) {
        char full[64];
        snprintf(full, sizeof full, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (tq_st_has(l.st, full))
            l.prefix = prefixes[i];
    }
    if (!st && !(m->layer = calloc((size_t)m->cfg.layers, sizeof *m->layer)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = load_all(&l, m);
    tq_st_close(l.st);
    free(path);
    for (int i = 0; !st && i < m->cfg.ndense; i++)
        st = dense(&m->cfg.dense[i], dev, &m->dense_w[i], &m->dense_b[i]);
    if (!st)
        st = tq_bert_plans_new(dev, &m->plans);
    if (st) {
        tq_bert_model_free(m);
        return st;
    }
    *out = m;
    return TQ_OK;
}

void tq_bert_model_free(bert_model *m)
{
    if (!m)
        return;
    tq_bert_plans_free(m->plans); /* its graphs use the weights */
    for (int64_t i = 0; m->layer && i < m->cfg.layers; i++) {
        bert_layer *L = &m->layer[i];
        tq_tensor *one[] = {L->wq,  L->bq,    L->wk,    L->bk,  L->wv,   L->bv,  L->wo,
                            L->bo,  L->ln1_g, L->ln1_b, L->wi,  L->bi,   L->wo2, L->bo2,
                            L->ln2_g, L->ln2_b, L->sq,  L->sk,  L->sv,   L->so,  L->si,
                            L->cs_x, L->cs_ctx, L->cs_x1, L->rc_x, L->rc_ctx, L->rc_x1,
                            L->rq,  L->rk,    L->rv,    L->ro,  L->ri};
        for (size_t k = 0; k < sizeof one / sizeof *one; k++)
            tq_tensor_free(one[k]);
    }
    free(m->layer);
    tq_tensor *e[] = {m->wemb, m->wemb_scale, m->pemb, m->temb0, m->temb, m->eln_g, m->eln_b};
    for (size_t k = 0; k < sizeof e / sizeof *e; k++)
        tq_tensor_free(e[k]);
    for (int i = 0; i < BERT_MAX_DENSE; i++) {
        tq_tensor_free(m->dense_w[i]);
        tq_tensor_free(m->dense_b[i]);
    }
    free(m->rel_table);
    tq_bert_config_free(&m->cfg);
    free(m);
}

tq_status tq_bert_head_load(const bert_model *m, int64_t labels, tq_tensor *t[4])
{
    const bert_config *c = &m->cfg;
    char *path = malloc(strlen(c->model_dir) + 20);
    if (!path)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    sprintf(path, "%s/model.safetensors", c->model_dir);
    loader l = {NULL, "", m->dev, path};
    tq_status st = tq_st_open(path, &l.st);
    free(path);
    /* BertForSequenceClassification: the base model's pooler, then
     * "classifier"; RoBERTa's kin and MPNet: "classifier.dense", then
     * "classifier.out_proj" (the same two products) */
    int bert = c->arch == BERT_ARCH_BERT;
    const char *n1 = bert ? (tq_st_has(l.st, "bert.pooler.dense.weight") ? "bert.pooler.dense"
                                                                          : "pooler.dense")
                          : "classifier.dense",
               *n2 = bert ? "classifier" : "classifier.out_proj";
    char w[96], b[96];
    snprintf(w, sizeof w, "%s.weight", n1);
    snprintf(b, sizeof b, "%s.bias", n1);
    if (!st && !(st = mat(&l, w, c->hidden, c->hidden, &t[0])))
        st = vec(&l, b, c->hidden, &t[1]);
    snprintf(w, sizeof w, "%s.weight", n2);
    snprintf(b, sizeof b, "%s.bias", n2);
    if (!st && !(st = mat(&l, w, labels, c->hidden, &t[2])))
        st = vec(&l, b, labels, &t[3]);
    tq_st_close(l.st);
    return st;
}
