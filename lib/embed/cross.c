/* cross.c: a cross-encoder: both texts of a pair in one sequence, the
 * encoder of bert_forward.c, then the classification head on the first
 * token: logits = W2 tanh(W1 h_cls + b1) + b2, and the activation that
 * sentence-transformers' CrossEncoder applies in predict. The pair is laid
 * out as the model's tokenizer does it: BERT's [CLS] A [SEP] B [SEP] with
 * token types 0 then 1, MPNet's (and RoBERTa's) <s> A </s></s> B </s>
 * with no types (a tokenizer.json's own pair template, where the folder
 * has one); too long a pair is cut as the tokenizers library's
 * longest_first truncation cuts it. */
#include "cross.h"
#include "bert.h"
#include "io/json.h"
#include "internal.h"

#define SUB_TOKENS 8192 /* padded tokens per forward call, as bert.c */
#define SUB_PAIRS 64

struct tq_cross {
    bert_model *m;
    tq_tokenizer *tok;
    int json; /* the ids from tokenizer.json: its pair template lays pairs out */
    int64_t labels;
    int act; /* a tq_activation, or -1 for none */
    tq_tensor *head[4];
    char describe[400];
};

int64_t tq_cross_labels(const tq_cross *c) { return c->labels; }
int tq_cross_window(const tq_cross *c) { return c->m->cfg.max_seq; }
const char *tq_cross_describe(const tq_cross *c) { return c->describe; }

void tq_cross_close(tq_cross *c)
{
    if (!c)
        return;
    for (int i = 0; i < 4; i++)
        tq_tensor_free(c->head[i]);
    tq_bert_model_free(c->m);
    tq_tokenizer_free(c->tok);
    free(c);
}

/* config.json: the labels (id2label's, else num_labels, else transformers'
 * default of 2) and the activation sentence-transformers saved there
 * ("sentence_transformers": {"activation_fn"}, or the older
 * sbert_ce_default_activation_function), else its default: sigmoid for one
 * label, none for more. */
static tq_status head_config(const char *dir, int64_t *labels, int *act)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    tq_json *j;
    tq_status st = tq_json_load(path, &j);
    if (st)
        return st;
    const tq_json *id2 = tq_json_get(j, "id2label"), *nl = tq_json_get(j, "num_labels"),
                  *stc = tq_json_get(j, "sentence_transformers"),
                  *old = tq_json_get(j, "sbert_ce_default_activation_function");
    const tq_json *fn = stc && stc->type == TQ_JSON_OBJ ? tq_json_get(stc, "activation_fn") : NULL;
    if (!fn || fn->type != TQ_JSON_STR)
        fn = old && old->type == TQ_JSON_STR ? old : NULL;
    *labels = id2 && id2->type == TQ_JSON_OBJ             ? (int64_t)id2->n
              : nl && nl->type == TQ_JSON_NUM && nl->num >= 1 ? (int64_t)nl->num
                                                          : 2;
    if (*labels < 1 || *labels > 100000)
        st = tq_fail(TQ_ERR_DATA, "%s: %lld labels", path, (long long)*labels);
    *act = *labels == 1 ? TQ_ACT_SIGMOID : -1;
    if (!st && fn) {
        int k = tq_bert_torch_act(fn->str);
        if (k == -2)
            st = tq_fail(TQ_ERR_DATA,
                         "%s: activation %s is not supported (Sigmoid, Identity, Tanh and ReLU "
                         "of torch.nn are)",
                         path, fn->str);
        else
            *act = k;
    }
    tq_json_free(j);
    return st;
}

tq_status tq_cross_open(const char *folder, tq_device *dev, tq_cross **out)
{
    if (!dev)
        return tq_fail(TQ_ERR_USAGE, "%s: a cross-encoder needs a device", folder);
    tq_cross *c = calloc(1, sizeof *c);
    if (!c)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    bert_config cfg;
    tq_status st = tq_bert_config_bare(folder, &cfg);
    if (st) {
        free(c);
        return st;
    }
    if (!(st = tq_tokenizer_open(cfg.model_dir, &cfg.wp, &c->tok)) &&
        !(st = head_config(folder, &c->labels, &c->act)))
        st = tq_bert_model_load(&cfg, dev, &c->m); /* takes cfg over, even failing */
    else
        tq_bert_config_free(&cfg);
    if (!st)
        st = tq_bert_head_load(c->m, c->labels, c->head);
    if (!st)
        c->json = !strcmp(tq_tokenizer_source(c->tok), "tokenizer.json");
    if (st) {
        tq_cross_close(c);
        return st;
    }
    snprintf(c->describe, sizeof c->describe, "cross:%s (%s, %lld label%s, %s)", folder,
             c->m->cfg.arch_name, (long long)c->labels, c->labels == 1 ? "" : "s",
             c->act == TQ_ACT_SIGMOID ? "sigmoid"
             : c->act == TQ_ACT_TANH  ? "tanh"
             : c->act == TQ_ACT_RELU  ? "relu"
                                      : "no activation");
    *out = c;
    return TQ_OK;
}

/* One pair's ids and types (room for the window), *n of them. */
typedef struct pair {
    int64_t i; /* the pair's place in the input */
    int n;
    int32_t *ids;
    int8_t *types;
} pair;

/* A text's pieces, without the special tokens the tokenizer puts around
 * them: into *p (malloc'd), *np of them; the [CLS] and [SEP] ids too. */
static tq_status pieces(const tq_cross *c, const char *t, size_t n, int32_t **p, int *np,
                        int32_t *cls, int32_t *sep)
{
    int room = (int)(n < (size_t)1 << 28 ? n : (size_t)1 << 28) + 4, got = 0, cut = 0;
    *p = malloc((size_t)room * sizeof **p);
    if (!*p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    /* (WordPiece gives at most a piece a byte: nothing is cut) */
    tq_status st = tq_tokenizer_encode(c->tok, t, n, *p, room, &got, &cut);
    if (st)
        return st;
    if (got < 2)
        return tq_fail(TQ_ERR_DATA, "cross-encoder: the tokenizer puts no [CLS] and [SEP] "
                                    "around a text");
    *cls = (*p)[0];
    *sep = (*p)[got - 1];
    *np = got - 2;
    memmove(*p, *p + 1, (size_t)*np * sizeof **p);
    return TQ_OK;
}

/* The tokenizers library's longest_first cut of n1 + n2 pieces to max: the
 * longer one first, down to the shorter's length, then both to halves (the
 * second gets the odd one). */
static void longest_first(int *n1, int *n2, int max)
{
    if (*n1 + *n2 <= max)
        return;
    int swap = *n1 > *n2, a = swap ? *n2 : *n1, b;
    b = a > max ? a : (a > max - a ? a : max - a);
    if (a + b > max) {
        a = max / 2;
        b = a + max % 2;
    }
    *n1 = swap ? b : a;
    *n2 = swap ? a : b;
}

/* A pair by tokenizer.json's pair template and truncation. */
static tq_status encode_json(const tq_cross *c, const char *a, size_t al, const char *b,
                             size_t bl, pair *p, int *cut)
{
    int w = c->m->cfg.max_seq;
    int32_t *types = malloc((size_t)w * sizeof *types);
    p->ids = malloc((size_t)w * sizeof *p->ids);
    p->types = malloc((size_t)w);
    if (!types || !p->ids || !p->types) {
        free(types);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    tq_status st = tq_tokenizer_encode_pair(c->tok, a, al, b, bl, p->ids, types, w, &p->n, cut);
    for (int t = 0; !st && t < p->n; t++) /* RoBERTa's and MPNet's take no types */
        p->types[t] = (int8_t)(c->m->cfg.arch == BERT_ARCH_BERT && types[t] > 0);
    free(types);
    return st;
}

static tq_status encode(const tq_cross *c, const char *a, size_t al, const char *b, size_t bl,
                        pair *p, int *cut)
{
    if (c->json)
        return encode_json(c, a, al, b, bl, p, cut);
    int bert = c->m->cfg.arch == BERT_ARCH_BERT, w = c->m->cfg.max_seq;
    int specials = bert ? 3 : 4, na = 0, nb = 0;
    int32_t *pa = NULL, *pb = NULL, cls = 0, sep = 0;
    tq_status st = pieces(c, a, al, &pa, &na, &cls, &sep);
    if (!st)
        st = pieces(c, b, bl, &pb, &nb, &cls, &sep);
    if (!st) {
        int ka = na, kb = nb;
        longest_first(&ka, &kb, w - specials > 0 ? w - specials : 0);
        *cut = ka < na || kb < nb;
        p->ids = malloc((size_t)w * sizeof *p->ids);
        p->types = malloc((size_t)w);
        if (!p->ids || !p->types)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        int k = 0;
        if (!st) {
            p->ids[k++] = cls;
            memcpy(p->ids + k, pa, (size_t)ka * sizeof *pa);
            k += ka;
            p->ids[k++] = sep;
            if (!bert)
                p->ids[k++] = sep;
            int first = k; /* BERT's second segment, [SEP] included, is type 1 */
            memcpy(p->ids + k, pb, (size_t)kb * sizeof *pb);
            k += kb;
            p->ids[k++] = sep;
            for (int t = 0; t < k; t++)
                p->types[t] = (int8_t)(bert && t >= first);
            p->n = k;
        }
    }
    free(pa);
    free(pb);
    return st;
}

static int by_len(const void *x, const void *y)
{
    const pair *a = x, *b = y;
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

/* The head on pairs p[0..np) (sorted, padded to the last one's length) */
static tq_status run_sub(tq_cross *c, const pair *p, int64_t np, float *out)
{
    const bert_config *cfg = &c->m->cfg;
    int64_t len = p[np - 1].n, H = cfg->hidden;
    int64_t *ids = calloc((size_t)(np * len), sizeof *ids),
            *types = calloc((size_t)(np * len), sizeof *types);
    int *lens = malloc((size_t)np * sizeof *lens);
    float *hs = malloc((size_t)(np * len * H) * sizeof *hs), *x = malloc((size_t)(np * H) * 4),
          *h = malloc((size_t)(np * H) * 4), *lg = malloc((size_t)(np * c->labels) * 4);
    tq_status st = ids && types && lens && hs && x && h && lg
                       ? TQ_OK
                       : tq_fail(TQ_ERR_NOMEM, "cross-encoder: out of memory for a batch");
    for (int64_t i = 0; !st && i < np; i++) {
        lens[i] = p[i].n;
        for (int t = 0; t < p[i].n; t++) {
            ids[i * len + t] = p[i].ids[t];
            types[i * len + t] = p[i].types[t];
        }
    }
    int bert = cfg->arch == BERT_ARCH_BERT;
    if (!st)
        st = tq_bert_forward(c->m, np, len, ids, bert ? types : NULL, lens, hs);
    for (int64_t i = 0; !st && i < np; i++) /* the first token's state */
        memcpy(x + i * H, hs + i * len * H, (size_t)H * sizeof *x);
    if (!st)
        st = tq_bert_linear(c->m->dev, c->head[0], c->head[1], TQ_ACT_TANH, np, x, h);
    if (!st)
        st = tq_bert_linear(c->m->dev, c->head[2], c->head[3], c->act, np, h, lg);
    for (int64_t i = 0; !st && i < np; i++)
        memcpy(out + p[i].i * c->labels, lg + i * c->labels, (size_t)c->labels * sizeof *out);
    free(ids), free(types), free(lens), free(hs), free(x), free(h), free(lg);
    return st;
}

tq_status tq_cross_score(tq_cross *c, int64_t n, const char *const *a, const size_t *al,
                         const char *const *b, const size_t *bl, float *out, int64_t *cut)
{
    if (n <= 0)
        return TQ_OK;
    pair *p = calloc((size_t)n, sizeof *p);
    tq_status st = p ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "cross-encoder: out of memory");
    for (int64_t i = 0; !st && i < n; i++) {
        int cu = 0;
        p[i].i = i;
        st = encode(c, a[i], al[i], b[i], bl[i], &p[i], &cu);
        *cut += cu;
    }
    if (!st)
        qsort(p, (size_t)n, sizeof *p, by_len);
    /* sub-batches of similar length: up to SUB_PAIRS pairs, SUB_TOKENS padded tokens */
    for (int64_t s = 0; !st && s < n;) {
        int64_t e = s + 1;
        while (e < n && e - s < SUB_PAIRS && (e - s + 1) * p[e].n <= SUB_TOKENS)
            e++;
        st = run_sub(c, p + s, e - s, out);
        s = e;
    }
    for (int64_t i = 0; p && i < n; i++) {
        free(p[i].ids);
        free(p[i].types);
    }
    free(p);
    return st;
}
