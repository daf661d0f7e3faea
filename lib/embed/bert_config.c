/* bert_config.c: the settings of a sentence-transformers model folder, from
 * modules.json, the Transformer module's config.json, tokenizer_config.json,
 * sentence_bert_config.json and the Pooling module's config.json. */
#include "bert.h"
#include "io/json.h"
#include "internal.h"

#include <math.h>

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s%s", a, *a && *b && a[strlen(a) - 1] != '/' ? "/" : "", b);
    return s;
}

/* Loads DIR/NAME; a missing optional file leaves *v NULL. */
static tq_status load(const char *dir, const char *name, int optional, tq_json **v)
{
    *v = NULL;
    char *p = join(dir, name);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    FILE *probe = fopen(p, "rb");
    if (probe || !optional) {
        if (probe)
            fclose(probe);
        st = tq_json_load(p, v);
        if (!st && (*v)->type != TQ_JSON_OBJ && (*v)->type != TQ_JSON_ARR) {
            st = tq_fail(TQ_ERR_DATA, "%s: not a JSON object or array", p);
            tq_json_free(*v);
            *v = NULL;
        }
    }
    free(p);
    return st;
}

static tq_status get_int(const tq_json *o, const char *file, const char *key, int required,
                         int64_t lo, int64_t def, int64_t *out)
{
    const tq_json *v = tq_json_get(o, key);
    if (!v || v->type == TQ_JSON_NULL) {
        if (required)
            return tq_fail(TQ_ERR_DATA, "%s: \"%s\" is missing", file, key);
        *out = def;
        return TQ_OK;
    }
    if (v->type != TQ_JSON_NUM || v->num != floor(v->num) || v->num < (double)lo ||
        v->num > 1e9)
        return tq_fail(TQ_ERR_DATA, "%s: \"%s\" must be an integer >= %lld", file, key,
                       (long long)lo);
    *out = (int64_t)v->num;
    return TQ_OK;
}

/* A boolean member; null or absent gives def. */
static tq_status get_bool(const tq_json *o, const char *file, const char *key, int def, int *out)
{
    const tq_json *v = tq_json_get(o, key);
    if (!v || v->type == TQ_JSON_NULL) {
        *out = def;
        return TQ_OK;
    }
    if (v->type != TQ_JSON_BOOL)
        return tq_fail(TQ_ERR_DATA, "%s: \"%s\" must be true or false", file, key);
    *out = v->b;
    return TQ_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* modules.json: a Transformer, then a Pooling, then optionally a Normalize. */
static tq_status modules(const char *folder, bert_config *c, char **pool_dir)
{
    tq_json *m;
    tq_status st = load(folder, "modules.json", 0, &m);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/modules.json", folder);
    int have_tf = 0;
    if (m->type != TQ_JSON_ARR)
        st = tq_fail(TQ_ERR_DATA, "%s: not a JSON array of modules", file);
    for (size_t i = 0; !st && i < m->n; i++) {
        const tq_json *t = tq_json_get(&m->items[i], "type"), *p = tq_json_get(&m->items[i], "path");
        if (!t || t->type != TQ_JSON_STR || !p || p->type != TQ_JSON_STR) {
            st = tq_fail(TQ_ERR_DATA, "%s: module %zu lacks \"type\" or \"path\"", file, i);
            break;
        }
        int order_ok = 1;
        if (ends_with(t->str, "models.Transformer")) {
            order_ok = i == 0;
            have_tf = 1;
            c->model_dir = join(folder, p->str);
            if (!c->model_dir)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        } else if (ends_with(t->str, "models.Pooling")) {
            order_ok = have_tf && !*pool_dir;
            *pool_dir = join(folder, p->str);
            if (!*pool_dir)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        } else if (ends_with(t->str, "models.Normalize")) {
            order_ok = *pool_dir && i == m->n - 1;
            c->normalize = 1;
        } else
            st = tq_fail(TQ_ERR_DATA, "%s: module type \"%s\" is not supported", file, t->str);
        if (!st && !order_ok)
            st = tq_fail(TQ_ERR_DATA,
                         "%s: expected the modules Transformer, Pooling, optional Normalize "
                         "in that order",
                         file);
    }
    if (!st && (!have_tf || !*pool_dir))
        st = tq_fail(TQ_ERR_DATA, "%s: needs a Transformer and a Pooling module", file);
    tq_json_free(m);
    return st;
}

static tq_status pooling(const char *dir, bert_config *c)
{
    tq_json *p;
    tq_status st = load(dir, "config.json", 0, &p);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", dir);
    static const char *const unsupported[] = {"pooling_mode_mean_sqrt_len_tokens",
                                              "pooling_mode_weightedmean_tokens",
                                              "pooling_mode_lasttoken"};
    int mean = 0, cls = 0, max = 0, other = 0;
    int64_t dim;
    if (!(st = get_bool(p, file, "pooling_mode_mean_tokens", 0, &mean)) &&
        !(st = get_bool(p, file, "pooling_mode_cls_token", 0, &cls)) &&
        !(st = get_bool(p, file, "pooling_mode_max_tokens", 0, &max)) &&
        !(st = get_int(p, file, "word_embedding_dimension", 0, 1, c->hidden, &dim))) {
        for (size_t i = 0; !st && i < 3; i++) {
            int on = 0;
            st = get_bool(p, file, unsupported[i], 0, &on);
            if (!st && on)
                st = tq_fail(TQ_ERR_DATA, "%s: \"%s\" is not supported", file, unsupported[i]);
            other |= on;
        }
        if (!st && mean + cls + max != 1)
            st = tq_fail(TQ_ERR_DATA,
                         "%s: exactly one of mean, cls and max pooling must be on (%d are)",
                         file, mean + cls + max);
        if (!st && dim != c->hidden)
            st = tq_fail(TQ_ERR_DATA, "%s: word_embedding_dimension %lld != hidden_size %lld",
                         file, (long long)dim, (long long)c->hidden);
        c->pool = mean ? BERT_POOL_MEAN : cls ? BERT_POOL_CLS : BERT_POOL_MAX;
    }
    (void)other;
    tq_json_free(p);
    return st;
}

static tq_status model_config(bert_config *c)
{
    tq_json *j;
    tq_status st = load(c->model_dir, "config.json", 0, &j);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", c->model_dir);
    const tq_json *act = tq_json_get(j, "hidden_act"), *eps = tq_json_get(j, "layer_norm_eps"),
                  *pe = tq_json_get(j, "position_embedding_type");
    if (!(st = get_int(j, file, "hidden_size", 1, 1, 0, &c->hidden)) &&
        !(st = get_int(j, file, "num_hidden_layers", 1, 1, 0, &c->layers)) &&
        !(st = get_int(j, file, "num_attention_heads", 1, 1, 0, &c->heads)) &&
        !(st = get_int(j, file, "intermediate_size", 1, 1, 0, &c->inter)) &&
        !(st = get_int(j, file, "max_position_embeddings", 1, 2, 0, &c->max_pos)) &&
        !(st = get_int(j, file, "type_vocab_size", 0, 1, 2, &c->types)) &&
        !(st = get_int(j, file, "vocab_size", 1, 1, 0, &c->vocab))) {
        if (c->hidden % c->heads)
            st = tq_fail(TQ_ERR_DATA, "%s: hidden_size is not a multiple of num_attention_heads",
                         file);
        else if (act && (act->type != TQ_JSON_STR || strcmp(act->str, "gelu")))
            st = tq_fail(TQ_ERR_DATA, "%s: hidden_act must be \"gelu\" (the exact erf form)",
                         file);
        else if (pe && (pe->type != TQ_JSON_STR || strcmp(pe->str, "absolute")))
            st = tq_fail(TQ_ERR_DATA, "%s: only \"absolute\" position embeddings are supported",
                         file);
        else if (eps && (eps->type != TQ_JSON_NUM || !(eps->num > 0)))
            st = tq_fail(TQ_ERR_DATA, "%s: layer_norm_eps must be a positive number", file);
        c->eps = eps && eps->type == TQ_JSON_NUM ? eps->num : 1e-12;
    }
    tq_json_free(j);
    return st;
}

/* tokenizer_config.json and sentence_bert_config.json: both optional, with
 * BertTokenizer's and sentence-transformers' defaults. */
static tq_status tokenizer(bert_config *c)
{
    tq_json *t, *s;
    tq_status st = load(c->model_dir, "tokenizer_config.json", 1, &t);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/tokenizer_config.json", c->model_dir);
    int strip = -1;
    const tq_json *sa = tq_json_get(t, "strip_accents");
    if (sa && sa->type == TQ_JSON_BOOL)
        strip = sa->b;
    else if (sa && sa->type != TQ_JSON_NULL)
        st = tq_fail(TQ_ERR_DATA, "%s: \"strip_accents\" must be true, false or null", file);
    c->wp.strip_accents = strip;
    if (!st)
        st = get_bool(t, file, "do_lower_case", 1, &c->wp.lower_case);
    if (!st)
        st = get_bool(t, file, "tokenize_chinese_chars", 1, &c->wp.chinese_chars);
    tq_json_free(t);
    if (st)
        return st;
    if ((st = load(c->model_dir, "sentence_bert_config.json", 1, &s)))
        return st;
    snprintf(file, sizeof file, "%s/sentence_bert_config.json", c->model_dir);
    int64_t msl;
    int lower = 0;
    st = get_int(s, file, "max_seq_length", 0, 2, c->max_pos, &msl);
    if (!st)
        st = get_bool(s, file, "do_lower_case", 0, &lower);
    /* sentence-transformers lower-cases the text itself then: the same as the
     * tokenizer's lower-casing except for accents, which follow strip_accents. */
    if (!st && lower)
        c->wp.lower_case = 1;
    c->max_seq = (int)(msl < c->max_pos ? msl : c->max_pos);
    tq_json_free(s);
    return st;
}

tq_status tq_bert_config_load(const char *folder, bert_config *c)
{
    memset(c, 0, sizeof *c);
    c->prec = TQ_DTYPE_F32;
    char *pool_dir = NULL;
    tq_status st = modules(folder, c, &pool_dir);
    if (!st)
        st = model_config(c);
    if (!st)
        st = pooling(pool_dir, c);
    if (!st)
        st = tokenizer(c);
    free(pool_dir);
    if (st)
        tq_bert_config_free(c);
    return st;
}

void tq_bert_config_free(bert_config *c)
{
    free(c->model_dir);
    c->model_dir = NULL;
}
