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

/* Whether a module's type names class cls ("sentence_transformers.models.Pooling",
 * or the later packages' paths to the same class). */
static int is_module(const char *type, const char *cls)
{
    size_t a = strlen(type), b = strlen(cls);
    return a > b && !strcmp(type + a - b, cls) && type[a - b - 1] == '.';
}

/* modules.json: a Transformer, then a Pooling, then any Dense modules, then
 * optionally a Normalize. */
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
        if (is_module(t->str, "Transformer")) {
            order_ok = i == 0;
            have_tf = 1;
            c->model_dir = join(folder, p->str);
            if (!c->model_dir)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        } else if (is_module(t->str, "Pooling")) {
            order_ok = have_tf && !*pool_dir;
            *pool_dir = join(folder, p->str);
            if (!*pool_dir)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        } else if (is_module(t->str, "Dense")) {
            order_ok = *pool_dir && !c->normalize && c->ndense < BERT_MAX_DENSE;
            if (order_ok && !(c->dense[c->ndense++].dir = join(folder, p->str)))
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        } else if (is_module(t->str, "Normalize")) {
            order_ok = *pool_dir && i == m->n - 1;
            c->normalize = 1;
        } else
            st = tq_fail(TQ_ERR_DATA, "%s: module type \"%s\" is not supported", file, t->str);
        if (!st && !order_ok)
            st = tq_fail(TQ_ERR_DATA,
                         "%s: expected the modules Transformer, Pooling, up to %d Dense, "
                         "optional Normalize in that order",
                         file, BERT_MAX_DENSE);
    }
    if (!st && (!have_tf || !*pool_dir))
        st = tq_fail(TQ_ERR_DATA, "%s: needs a Transformer and a Pooling module", file);
    tq_json_free(m);
    return st;
}

/* sentence-transformers' names of the pooling modes: the legacy boolean
 * keys and the names of "pooling_mode", in BERT_POOL_* order */
static const char *const pool_key[BERT_POOL_MODES] = {
    "pooling_mode_cls_token",           "pooling_mode_max_tokens",
    "pooling_mode_mean_tokens",         "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"};
static const char *const pool_name[BERT_POOL_MODES] = {
    "cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"};

static tq_status pool_mode(const tq_json *v, const char *file, bert_config *c)
{
    int k = 0;
    if (v->type == TQ_JSON_STR)
        while (k < BERT_POOL_MODES && strcmp(v->str, pool_name[k]))
            k++;
    if (v->type != TQ_JSON_STR || k == BERT_POOL_MODES)
        return tq_fail(TQ_ERR_DATA,
                       "%s: pooling_mode must be cls, max, mean, mean_sqrt_len_tokens, "
                       "weightedmean or lasttoken%s%s",
                       file, v->type == TQ_JSON_STR ? ", not " : "",
                       v->type == TQ_JSON_STR ? v->str : "");
    if (c->npool == BERT_POOL_MODES)
        return tq_fail(TQ_ERR_DATA, "%s: more than %d pooling modes", file, BERT_POOL_MODES);
    c->pool[c->npool++] = k;
    return TQ_OK;
}

/* The Pooling module's config.json: "pooling_mode" (a name or a list of
 * names, sentence-transformers 6) or the older boolean keys, on together
 * in their order; several are concatenated, as the module does. */
static tq_status pooling(const char *dir, bert_config *c)
{
    tq_json *p;
    tq_status st = load(dir, "config.json", 0, &p);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", dir);
    const tq_json *mode = tq_json_get(p, "pooling_mode");
    int64_t dim;
    c->npool = 0;
    if (mode && mode->type == TQ_JSON_ARR)
        for (size_t i = 0; !st && i < mode->n; i++)
            st = pool_mode(&mode->items[i], file, c);
    else if (mode && mode->type != TQ_JSON_NULL)
        st = pool_mode(mode, file, c);
    else
        for (int k = 0; !st && k < BERT_POOL_MODES; k++) {
            int on = 0;
            st = get_bool(p, file, pool_key[k], 0, &on);
            if (!st && on)
                c->pool[c->npool++] = k;
        }
    if (!st && !c->npool)
        st = tq_fail(TQ_ERR_DATA, "%s: no pooling mode is on", file);
    if (!st)
        st = get_bool(p, file, "include_prompt", 1, &c->include_prompt);
    if (!st)
        st = get_int(p, file, tq_json_get(p, "embedding_dimension") ? "embedding_dimension"
                                                                    : "word_embedding_dimension",
                     0, 1, c->hidden, &dim);
    if (!st && dim != c->hidden)
        st = tq_fail(TQ_ERR_DATA, "%s: the embedding dimension %lld != hidden_size %lld", file,
                     (long long)dim, (long long)c->hidden);
    c->pooled = c->npool * c->hidden;
    c->dim = c->pooled;
    tq_json_free(p);
    return st;
}

/* config.json's model_type: the family, and where its positions start.
 * RoBERTa (XLM-RoBERTa, CamemBERT) and MPNet number real tokens from
 * padding_idx + 1, as fairseq did (pad_token_id, 1 in every released model;
 * MPNet's is fixed at 1 in transformers' MPNetEmbeddings). */
static tq_status arch(const tq_json *j, const char *file, bert_config *c)
{
    static const struct {
        const char *type;
        int arch;
    } known[] = {{"bert", BERT_ARCH_BERT},           {"roberta", BERT_ARCH_ROBERTA},
                 {"xlm-roberta", BERT_ARCH_ROBERTA}, {"camembert", BERT_ARCH_ROBERTA},
                 {"mpnet", BERT_ARCH_MPNET}};
    const tq_json *t = tq_json_get(j, "model_type");
    c->arch = BERT_ARCH_BERT;
    c->arch_name = "bert";
    if (t && t->type != TQ_JSON_STR)
        return tq_fail(TQ_ERR_DATA, "%s: \"model_type\" must be a string", file);
    if (t) {
        size_t i = 0, n = sizeof known / sizeof *known;
        while (i < n && strcmp(t->str, known[i].type))
            i++;
        if (i == n)
            return tq_fail(TQ_ERR_DATA,
                           "%s: model_type \"%s\" is not supported (bert, roberta, "
                           "xlm-roberta, camembert and mpnet are)",
                           file, t->str);
        c->arch = known[i].arch;
        c->arch_name = known[i].type;
    }
    if (c->arch == BERT_ARCH_BERT)
        return TQ_OK;
    int64_t pad = 1;
    if (c->arch == BERT_ARCH_ROBERTA) {
        tq_status st = get_int(j, file, "pad_token_id", 0, 0, 1, &pad);
        if (st)
            return st;
    }
    c->pos_offset = pad + 1;
    return TQ_OK;
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
    if ((st = arch(j, file, c)))
        goto out;
    if (!(st = get_int(j, file, "hidden_size", 1, 1, 0, &c->hidden)) &&
        !(st = get_int(j, file, "num_hidden_layers", 1, 1, 0, &c->layers)) &&
        !(st = get_int(j, file, "num_attention_heads", 1, 1, 0, &c->heads)) &&
        !(st = get_int(j, file, "intermediate_size", 1, 1, 0, &c->inter)) &&
        !(st = get_int(j, file, "max_position_embeddings", 1, 2, 0, &c->max_pos)) &&
        !(st = get_int(j, file, "type_vocab_size", 0, 1, 2, &c->types)) &&
        !(st = get_int(j, file, "vocab_size", 1, 1, 0, &c->vocab))) {
        if (c->arch == BERT_ARCH_MPNET)
            st = get_int(j, file, "relative_attention_num_buckets", 0, 2, 32, &c->rel_buckets);
        if (!st && c->max_pos <= c->pos_offset + 1)
            st = tq_fail(TQ_ERR_DATA, "%s: max_position_embeddings %lld leaves no position past "
                         "the padding id", file, (long long)c->max_pos);
        if (st)
            ;
        else if (c->hidden % c->heads)
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
out:
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
    /* positions past the padding id: RoBERTa's 514 embeddings hold 512 tokens */
    int64_t room = c->max_pos - c->pos_offset;
    c->max_seq = (int)(msl < room ? msl : room);
    tq_json_free(s);
    return st;
}

int tq_bert_torch_act(const char *cls)
{
    static const struct {
        const char *cls;
        int act;
    } acts[] = {{"torch.nn.modules.activation.Tanh", TQ_ACT_TANH},
                {"torch.nn.modules.linear.Identity", -1},
                {"torch.nn.modules.activation.ReLU", TQ_ACT_RELU},
                {"torch.nn.modules.activation.Sigmoid", TQ_ACT_SIGMOID}};
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
        if (!strcmp(cls, acts[i].cls))
            return acts[i].act;
    return -2;
}

/* A Dense module's config.json: sizes, bias, and an activation of the four
 * that torch.nn names and the op API has (Tanh is the module's default). */
static tq_status dense(bert_dense_cfg *d, int64_t in)
{
    tq_json *j;
    tq_status st = load(d->dir, "config.json", 0, &j);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/config.json", d->dir);
    const tq_json *a = tq_json_get(j, "activation_function");
    int resid = 0;
    if (!(st = get_int(j, file, "in_features", 1, 1, 0, &d->in)) &&
        !(st = get_int(j, file, "out_features", 1, 1, 0, &d->out)) &&
        !(st = get_bool(j, file, "bias", 1, &d->bias)) &&
        !(st = get_bool(j, file, "use_residual", 0, &resid))) {
        d->act = TQ_ACT_TANH;
        if (a && a->type != TQ_JSON_NULL) {
            int k = a->type == TQ_JSON_STR ? tq_bert_torch_act(a->str) : -2;
            if (k == -2)
                st = tq_fail(TQ_ERR_DATA,
                             "%s: activation_function %s is not supported (Tanh, Identity, ReLU "
                             "and Sigmoid of torch.nn are)",
                             file, a->type == TQ_JSON_STR ? a->str : "(not a string)");
            else
                d->act = k;
        }
        if (!st && resid)
            st = tq_fail(TQ_ERR_DATA, "%s: use_residual is not supported", file);
        if (!st && d->in != in)
            st = tq_fail(TQ_ERR_DATA, "%s: in_features %lld, but the module before gives %lld",
                         file, (long long)d->in, (long long)in);
    }
    tq_json_free(j);
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
    for (int i = 0; !st && i < c->ndense; i++)
        if (!(st = dense(&c->dense[i], c->dim)))
            c->dim = c->dense[i].out;
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
    for (int i = 0; i < c->ndense; i++) {
        free(c->dense[i].dir);
        c->dense[i].dir = NULL;
    }
    c->ndense = 0;
}

/* config_sentence_transformers.json's "prompts" (name to text) and
 * "default_prompt_name": the text of prompt name, or with name NULL of the
 * default one (*text NULL when there is none). */
tq_status tq_bert_prompt(const char *folder, const char *name, char **text)
{
    *text = NULL;
    tq_json *j;
    tq_status st = load(folder, "config_sentence_transformers.json", 1, &j);
    if (st)
        return st;
    char file[4200];
    snprintf(file, sizeof file, "%s/config_sentence_transformers.json", folder);
    const tq_json *ps = j ? tq_json_get(j, "prompts") : NULL;
    if (!name) {
        const tq_json *d = j ? tq_json_get(j, "default_prompt_name") : NULL;
        if (d && d->type == TQ_JSON_STR)
            name = d->str;
        else if (d && d->type != TQ_JSON_NULL)
            st = tq_fail(TQ_ERR_DATA, "%s: default_prompt_name must be a string or null", file);
    }
    if (!st && name) {
        const tq_json *p = ps && ps->type == TQ_JSON_OBJ ? tq_json_get(ps, name) : NULL;
        if (ps && ps->type != TQ_JSON_OBJ && ps->type != TQ_JSON_NULL)
            st = tq_fail(TQ_ERR_DATA, "%s: \"prompts\" must be an object", file);
        else if (!p || p->type != TQ_JSON_STR) {
            char have[512] = "";
            size_t at = 0;
            for (size_t i = 0; ps && ps->type == TQ_JSON_OBJ && i < ps->n && at < sizeof have; i++)
                at += (size_t)snprintf(have + at, sizeof have - at, "%s%s", i ? ", " : "",
                                       ps->keys[i]);
            st = tq_fail(TQ_ERR_USAGE, "%s: the model has no prompt \"%s\" (%s%s)", folder, name,
                         *have ? "it has: " : "its config_sentence_transformers.json names none",
                         have);
        } else if (!(*text = strdup(p->str)))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    tq_json_free(j);
    return st;
}

/* tokenizer_config.json's model_max_length, where it is a real limit (the
 * tokenizers library writes 1e30 for none), caps the window. */
static tq_status model_max_length(bert_config *c)
{
    tq_json *t;
    tq_status st = load(c->model_dir, "tokenizer_config.json", 1, &t);
    if (st || !t)
        return st;
    const tq_json *v = tq_json_get(t, "model_max_length");
    if (v && v->type == TQ_JSON_NUM && v->num >= 2 && v->num < c->max_seq)
        c->max_seq = (int)v->num;
    tq_json_free(t);
    return TQ_OK;
}

tq_status tq_bert_config_bare(const char *folder, bert_config *c)
{
    memset(c, 0, sizeof *c);
    c->prec = TQ_DTYPE_F32;
    if (!(c->model_dir = strdup(folder)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = model_config(c);
    if (!st)
        st = tokenizer(c);
    if (!st)
        st = model_max_length(c);
    c->pool[0] = BERT_POOL_CLS;
    c->npool = 1;
    c->pooled = c->dim = c->hidden;
    if (st)
        tq_bert_config_free(c);
    return st;
}
