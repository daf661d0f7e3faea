/* bert_model.c: loads a BertModel's weights from model.safetensors (names as
 * Hugging Face writes them, with or without a "bert." prefix) onto the device,
 * once; the attention weights are cut per head here. */
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
    return tq_tensor_upload(*t, w, n * sizeof(float));
}

/* Reads NAME (prefixed) of the given shape into host memory. */
static tq_status host(loader *l, const char *name, int rank, const int64_t *dims, float **w)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s", l->prefix, name);
    return tq_st_read_f32(l->st, full, rank, dims, w);
}

static tq_status tensor(loader *l, const char *name, int rank, const int64_t *dims, tq_tensor **t)
{
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

/* Stacks the query, key and value projections: rows [0, H) query, [H, 2H)
 * key, [2H, 3H) value, so x W^T gives each token's q, k, v side by side. */
static tq_status qkv(loader *l, int64_t li, int64_t hid, bert_layer *L)
{
    static const char *const what[3] = {"query", "key", "value"};
    char name[160];
    int64_t dw[2] = {hid, hid}, d3[2] = {3 * hid, hid}, n3 = 3 * hid;
    float *w = malloc((size_t)(3 * hid * hid) * sizeof *w), *b = malloc((size_t)n3 * sizeof *b);
    tq_status st = w && b ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int k = 0; !st && k < 3; k++) {
        float *hw = NULL, *hb = NULL;
        snprintf(name, sizeof name, "encoder.layer.%lld.attention.self.%s.weight", (long long)li,
                 what[k]);
        st = host(l, name, 2, dw, &hw);
        snprintf(name, sizeof name, "encoder.layer.%lld.attention.self.%s.bias", (long long)li,
                 what[k]);
        if (!st)
            st = host(l, name, 1, &hid, &hb);
        if (!st) {
            memcpy(w + k * hid * hid, hw, (size_t)(hid * hid) * sizeof *w);
            memcpy(b + k * hid, hb, (size_t)hid * sizeof *b);
        }
        free(hw);
        free(hb);
    }
    if (!st)
        st = put(l, w, 2, d3, &L->wqkv);
    if (!st)
        st = put(l, b, 1, &n3, &L->bqkv);
    free(w);
    free(b);
    return st;
}

/* The attention output dense W_o [hidden, hidden]: head h's context columns
 * are rows h*dh.. of W_o^T, so the transpose is stored cut per head. */
static tq_status split_out(loader *l, int64_t li, int64_t heads, int64_t hid, tq_tensor **wo_t)
{
    char name[160];
    float *w = NULL;
    int64_t dw[2] = {hid, hid}, dh = hid / heads, dhd[2] = {dh, hid};
    snprintf(name, sizeof name, "encoder.layer.%lld.attention.output.dense.weight",
             (long long)li);
    tq_status st = host(l, name, 2, dw, &w);
    float *t = st ? NULL : malloc((size_t)(hid * hid) * sizeof *t);
    if (!st && !t)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < hid; i++)
        for (int64_t j = 0; j < hid; j++)
            t[j * hid + i] = w[i * hid + j];
    for (int64_t h = 0; !st && h < heads; h++)
        st = put(l, t + h * dh * hid, 2, dhd, &wo_t[h]);
    free(w);
    free(t);
    return st;
}

static tq_status layer(loader *l, const bert_config *c, int64_t li, bert_layer *L)
{
    int64_t H = c->hidden, I = c->inter, nh = c->heads;
    if (!(L->wo_t = calloc((size_t)nh, sizeof(tq_tensor *))))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st;
    char n[160];
#define NAME(s) (snprintf(n, sizeof n, "encoder.layer.%lld." s, (long long)li), n)
    if ((st = qkv(l, li, H, L)) ||
        (st = split_out(l, li, nh, H, L->wo_t)) ||
        (st = vec(l, NAME("attention.output.dense.bias"), H, &L->bo)) ||
        (st = vec(l, NAME("attention.output.LayerNorm.weight"), H, &L->ln1_g)) ||
        (st = vec(l, NAME("attention.output.LayerNorm.bias"), H, &L->ln1_b)) ||
        (st = mat(l, NAME("intermediate.dense.weight"), I, H, &L->wi)) ||
        (st = vec(l, NAME("intermediate.dense.bias"), I, &L->bi)) ||
        (st = mat(l, NAME("output.dense.weight"), H, I, &L->wo2)) ||
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
    if (!st)
        st = embeddings(&l, &m->cfg, m);
    if (!st && !(m->layer = calloc((size_t)m->cfg.layers, sizeof *m->layer)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < m->cfg.layers; i++)
        st = layer(&l, &m->cfg, i, &m->layer[i]);
    tq_st_close(l.st);
    if (st) {
        tq_bert_model_free(m);
        return st;
    }
    *out = m;
    return TQ_OK;
}

static void free_heads(tq_tensor **t, int64_t n)
{
    if (!t)
        return;
    for (int64_t i = 0; i < n; i++)
        tq_tensor_free(t[i]);
    free(t);
}

void tq_bert_model_free(bert_model *m)
{
    if (!m)
        return;
    for (int64_t i = 0; m->layer && i < m->cfg.layers; i++) {
        bert_layer *L = &m->layer[i];
        free_heads(L->wo_t, m->cfg.heads);
        tq_tensor *one[] = {L->wqkv, L->bqkv, L->bo, L->ln1_g, L->ln1_b, L->wi, L->bi,
                            L->wo2, L->bo2, L->ln2_g, L->ln2_b};
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
