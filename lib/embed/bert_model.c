/* bert_model.c: loads a BertModel's weights from model.safetensors (names as
 * Hugging Face writes them, with or without a "bert." prefix) onto the device,
 * once. */
#include "bert.h"
#include "io/safetensors_in.h"
#include "internal.h"

typedef struct loader {
    tq_st_file *st;
    const char *prefix; /* "" or "bert." */
    tq_device *dev;
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

static tq_status layer(loader *l, const bert_config *c, int64_t li, bert_layer *L)
{
    int64_t H = c->hidden, I = c->inter;
    tq_status st;
    char n[160];
#define NAME(s) (snprintf(n, sizeof n, "encoder.layer.%lld." s, (long long)li), n)
    if ((st = mat_lp(l, c->prec, NAME("attention.self.query.weight"), H, H, &L->wq)) ||
        (st = vec(l, NAME("attention.self.query.bias"), H, &L->bq)) ||
        (st = mat_lp(l, c->prec, NAME("attention.self.key.weight"), H, H, &L->wk)) ||
        (st = vec(l, NAME("attention.self.key.bias"), H, &L->bk)) ||
        (st = mat_lp(l, c->prec, NAME("attention.self.value.weight"), H, H, &L->wv)) ||
        (st = vec(l, NAME("attention.self.value.bias"), H, &L->bv)) ||
        (st = mat_lp(l, c->prec, NAME("attention.output.dense.weight"), H, H, &L->wo)) ||
        (st = vec(l, NAME("attention.output.dense.bias"), H, &L->bo)) ||
        (st = vec(l, NAME("attention.output.LayerNorm.weight"), H, &L->ln1_g)) ||
        (st = vec(l, NAME("attention.output.LayerNorm.bias"), H, &L->ln1_b)) ||
        (st = mat_lp(l, c->prec, NAME("intermediate.dense.weight"), I, H, &L->wi)) ||
        (st = vec(l, NAME("intermediate.dense.bias"), I, &L->bi)) ||
        (st = mat_lp(l, c->prec, NAME("output.dense.weight"), H, I, &L->wo2)) ||
        (st = vec(l, NAME("output.dense.bias"), H, &L->bo2)) ||
        (st = vec(l, NAME("output.LayerNorm.weight"), H, &L->ln2_g)) ||
        (st = vec(l, NAME("output.LayerNorm.bias"), H, &L->ln2_b)))
        return st;
#undef NAME
    return TQ_OK;
}

static tq_status embeddings(loader *l, const bert_config *c, bert_model *m)
{
    int64_t H = c->hidden;
    float *tt = NULL;
    int64_t td[2] = {c->types, H};
    tq_status st;
    if ((st = mat(l, "embeddings.word_embeddings.weight", c->vocab, H, &m->wemb)) ||
        (st = mat(l, "embeddings.position_embeddings.weight", c->max_pos, H, &m->pemb)) ||
        (st = host(l, "embeddings.token_type_embeddings.weight", 2, td, &tt)) ||
        (st = put(l, tt, 1, &H, &m->temb0)) ||
        (st = vec(l, "embeddings.LayerNorm.weight", H, &m->eln_g)) ||
        (st = vec(l, "embeddings.LayerNorm.bias", H, &m->eln_b))) {
        free(tt);
        return st;
    }
    free(tt);
    return TQ_OK;
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
        j->st[i] = i == 0 ? embeddings(j->l, &j->m->cfg, j->m)
                          : layer(j->l, &j->m->cfg, i - 1, &j->m->layer[i - 1]);
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
    char *path = malloc(strlen(m->cfg.model_dir) + 20);
    if (!path) {
        tq_bert_model_free(m);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    sprintf(path, "%s/model.safetensors", m->cfg.model_dir);
    loader l = {NULL, "", dev};
    tq_status st = tq_st_open(path, &l.st);
    free(path);
    if (!st && !tq_st_has(l.st, "embeddings.word_embeddings.weight") &&
        tq_st_has(l.st, "bert.embeddings.word_embeddings.weight"))
        l.prefix = "bert.";
    if (!st && !(m->layer = calloc((size_t)m->cfg.layers, sizeof *m->layer)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = load_all(&l, m);
    if (!st)
        st = tq_bert_plans_new(dev, &m->plans);
    tq_st_close(l.st);
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
    tq_tensor *e[] = {m->wemb, m->pemb, m->temb0, m->eln_g, m->eln_b};
    for (size_t k = 0; k < sizeof e / sizeof *e; k++)
        tq_tensor_free(e[k]);
    tq_bert_config_free(&m->cfg);
    free(m);
}
