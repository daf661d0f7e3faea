/* bert_int8_file.c: the int8 encoder's weights as tq-quantize --model stores
 * them (model.int8.safetensors), and read back: exactly the state that
 * bert_int8.c's calibration leaves at load (int8 codes with their row scales,
 * of the word embeddings and of the layers' products; the rest columns' f32
 * weights, the activations' column scales and rest column indices, the
 * second feed-forward product in the dtype it kept), so that a load gives
 * the same bits with no calibration. One table of the names serves both
 * ways; tq-quantize(1), ENCODER FOLDERS, documents it. */
#include "bert.h"
#include "io/safetensors_in.h"
#include "io/safetensors_out.h"
#include "internal.h"

#include <math.h>
#include <stddef.h>

/* The sizes a tensor's shape is made of */
enum { D_NONE, D_H, D_I, D_R, D_V };

typedef struct i8_entry {
    const char *name; /* after "encoder.layer.N." (the word embeddings': whole) */
    size_t at;        /* offsetof(bert_layer, field) (the word embeddings': unused) */
    tq_dtype dt;      /* TQ_DTYPE_INVALID: the second feed-forward's (cfg.ffn2) */
    int d0, d1;       /* D_*: the shape */
} i8_entry;

#define AT(f) offsetof(bert_layer, f)
static const i8_entry layer_table[] = {
    {"attention.q.weight", AT(wq), TQ_DTYPE_I8, D_H, D_H},
    {"attention.q.weight_scale", AT(sq), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.q.weight_rest", AT(rq), TQ_DTYPE_F32, D_H, D_R},
    {"attention.q.bias", AT(bq), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.k.weight", AT(wk), TQ_DTYPE_I8, D_H, D_H},
    {"attention.k.weight_scale", AT(sk), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.k.weight_rest", AT(rk), TQ_DTYPE_F32, D_H, D_R},
    {"attention.k.bias", AT(bk), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.v.weight", AT(wv), TQ_DTYPE_I8, D_H, D_H},
    {"attention.v.weight_scale", AT(sv), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.v.weight_rest", AT(rv), TQ_DTYPE_F32, D_H, D_R},
    {"attention.v.bias", AT(bv), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.input.col_scale", AT(cs_x), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.input.rest_cols", AT(rc_x), TQ_DTYPE_I64, D_R, D_NONE},
    {"attention.o.weight", AT(wo), TQ_DTYPE_I8, D_H, D_H},
    {"attention.o.weight_scale", AT(so), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.o.weight_rest", AT(ro), TQ_DTYPE_F32, D_H, D_R},
    {"attention.o.bias", AT(bo), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.o.input.col_scale", AT(cs_ctx), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.o.input.rest_cols", AT(rc_ctx), TQ_DTYPE_I64, D_R, D_NONE},
    {"attention.LayerNorm.weight", AT(ln1_g), TQ_DTYPE_F32, D_H, D_NONE},
    {"attention.LayerNorm.bias", AT(ln1_b), TQ_DTYPE_F32, D_H, D_NONE},
    {"ffn.in.weight", AT(wi), TQ_DTYPE_I8, D_I, D_H},
    {"ffn.in.weight_scale", AT(si), TQ_DTYPE_F32, D_I, D_NONE},
    {"ffn.in.weight_rest", AT(ri), TQ_DTYPE_F32, D_I, D_R},
    {"ffn.in.bias", AT(bi), TQ_DTYPE_F32, D_I, D_NONE},
    {"ffn.in.input.col_scale", AT(cs_x1), TQ_DTYPE_F32, D_H, D_NONE},
    {"ffn.in.input.rest_cols", AT(rc_x1), TQ_DTYPE_I64, D_R, D_NONE},
    {"ffn.out.weight", AT(wo2), TQ_DTYPE_INVALID, D_H, D_I},
    {"ffn.out.bias", AT(bo2), TQ_DTYPE_F32, D_H, D_NONE},
    {"output.LayerNorm.weight", AT(ln2_g), TQ_DTYPE_F32, D_H, D_NONE},
    {"output.LayerNorm.bias", AT(ln2_b), TQ_DTYPE_F32, D_H, D_NONE},
};
#undef AT
enum { NLAYER = sizeof layer_table / sizeof *layer_table };

/* The word embeddings' codes and row scales (bert_wemb.c), under the f32
 * table's name and that name's _scale, as the layers' weights */
static const i8_entry wemb_table[] = {
    {"embeddings.word_embeddings.weight", 0, TQ_DTYPE_I8, D_V, D_H},
    {"embeddings.word_embeddings.weight_scale", 0, TQ_DTYPE_F32, D_V, D_NONE},
};

static int64_t size_of(const bert_config *c, int d)
{
    return d == D_H   ? c->hidden
           : d == D_I ? c->inter
           : d == D_R ? tq_bert_int8_rest(c->hidden)
           : d == D_V ? c->vocab
                      : 0;
}

static int rank_of(const i8_entry *e, const bert_config *c, int64_t dims[2])
{
    dims[0] = size_of(c, e->d0);
    dims[1] = size_of(c, e->d1);
    return e->d1 == D_NONE ? 1 : 2;
}

static tq_tensor **field(bert_layer *L, const i8_entry *e)
{
    return (tq_tensor **)((char *)L + e->at);
}

/* ---- saving ---- */

static void add(tq_st_out *o, size_t *n, char *name, const tq_tensor *t)
{
    tq_st_out *x = &o[(*n)++];
    x->name = name;
    x->dtype = t->dtype;
    x->rank = t->rank;
    for (int i = 0; i < t->rank; i++)
        x->dims[i] = t->dims[i];
    x->data = tq_tensor_host(t);
}

tq_status tq_bert_int8_save(const bert_model *m, const char *path, const char *const *meta,
                            size_t nmeta, uint64_t *bytes)
{
    const bert_config *c = &m->cfg;
    if (c->prec != TQ_DTYPE_I8 || !m->wemb_scale || tq_device_backend(m->dev) != TQ_BACKEND_CPU)
        return tq_fail(TQ_ERR_USAGE, "tq_bert_int8_save: an int8 model on the CPU");
    size_t cap = 7 + (size_t)c->layers * NLAYER, n = 0;
    tq_st_out *o = calloc(cap, sizeof *o);
    char (*names)[96] = calloc(cap, sizeof *names);
    tq_status st = o && names ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st) {
        /* the embeddings under the names model.safetensors gives them (the
         * f32 loader reads the f32 ones from here the same way), the word
         * embeddings as int8 codes and their scales */
        static const char *const emb[] = {
            "embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight_scale",
            "embeddings.position_embeddings.weight", "embeddings.token_type_embeddings.weight",
            "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"};
        const tq_tensor *et[] = {m->wemb, m->wemb_scale, m->pemb, m->temb, m->eln_g, m->eln_b};
        for (int i = 0; i < 6; i++)
            if (et[i]) {
                snprintf(names[n], sizeof names[n], "%s", emb[i]);
                add(o, &n, names[n], et[i]);
            }
        if (m->rel_table) { /* MPNet's bias table: host floats, not a tensor */
            snprintf(names[n], sizeof names[n], "encoder.relative_attention_bias.weight");
            o[n] = (tq_st_out){names[n], TQ_DTYPE_F32, 2, {c->rel_buckets, c->heads}, m->rel_table};
            n++;
        }
        for (int64_t li = 0; li < c->layers; li++)
            for (int k = 0; k < NLAYER; k++) {
                snprintf(names[n], sizeof names[n], "encoder.layer.%lld.%s", (long long)li,
                         layer_table[k].name);
                add(o, &n, names[n], *field(&m->layer[li], &layer_table[k]));
            }
        st = tq_st_write(path, o, n, meta, nmeta);
    }
    *bytes = 0;
    for (size_t i = 0; !st && i < n; i++) {
        uint64_t b = tq_dtype_size(o[i].dtype);
        for (int d = 0; d < o[i].rank; d++)
            b *= (uint64_t)o[i].dims[d];
        *bytes += b;
    }
    free(o);
    free(names);
    return st;
}

/* ---- loading ---- */

/* The rest column indices: distinct, in order, within the hidden size (the
 * kernels index rows by them: a corrupt file must not reach them). */
static tq_status check_cols(const char *file, const char *name, const int64_t *cols, int64_t r,
                            int64_t H)
{
    for (int64_t p = 0; p < r; p++)
        if (cols[p] < 0 || cols[p] >= H || (p && cols[p] <= cols[p - 1]))
            return tq_fail(TQ_ERR_DATA, "%s: tensor \"%s\": column %lld is not an increasing "
                           "column of 0..%lld", file, name, (long long)cols[p], (long long)H - 1);
    return TQ_OK;
}

static tq_status check_finite(const char *file, const char *name, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return tq_fail(TQ_ERR_DATA, "%s: tensor \"%s\": value %lld is not finite", file,
                           name, (long long)i);
    return TQ_OK;
}

static tq_status one(const tq_st_file *f, const char *file, const bert_config *c, tq_device *dev,
                     const i8_entry *e, const char *name, tq_tensor **t)
{
    int64_t dims[2];
    int rank = rank_of(e, c, dims);
    tq_dtype want = e->dt == TQ_DTYPE_INVALID ? c->ffn2 : e->dt;
    tq_dtype have = tq_st_dtype(f, name);
    tq_status st = tq_tensor_new(dev, want, rank, dims, t);
    if (st)
        return st;
    void *w = tq_tensor_host(*t);
    /* the second feed-forward product: kept as the quantizing machine's
     * calibration kept it (bf16 where it multiplies bf16), read in the dtype
     * this machine multiplies, rounded or widened as bert_int8.c would */
    if (e->dt == TQ_DTYPE_INVALID && have != want &&
        (have == TQ_DTYPE_F32 || have == TQ_DTYPE_BF16))
        st = tq_st_read_to(f, name, rank, dims, want, w);
    else
        st = tq_st_read_raw(f, name, want, rank, dims, w);
    int64_t numel = dims[0] * (rank == 2 ? dims[1] : 1);
    if (!st && want == TQ_DTYPE_I64)
        st = check_cols(file, name, w, numel, c->hidden);
    else if (!st && want == TQ_DTYPE_F32)
        st = check_finite(file, name, w, numel);
    if (!st)
        tq_tensor_set_constant(*t);
    return st;
}

tq_status tq_bert_int8_layer_load(const tq_st_file *f, const char *file, const bert_config *c,
                                  tq_device *dev, int64_t li, bert_layer *L)
{
    tq_status st = TQ_OK;
    char name[96];
    for (int k = 0; !st && k < NLAYER; k++) {
        snprintf(name, sizeof name, "encoder.layer.%lld.%s", (long long)li, layer_table[k].name);
        st = one(f, file, c, dev, &layer_table[k], name, field(L, &layer_table[k]));
    }
    return st;
}

tq_status tq_bert_int8_wemb_load(const tq_st_file *f, const char *file, const bert_config *c,
                                 tq_device *dev, tq_tensor **codes, tq_tensor **scale)
{
    tq_status st = one(f, file, c, dev, &wemb_table[0], wemb_table[0].name, codes);
    return st ? st : one(f, file, c, dev, &wemb_table[1], wemb_table[1].name, scale);
}
