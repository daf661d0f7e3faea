/* tok_vocabtxt.c: a vocab.txt folder whose special tokens are not BERT's
 * ([CLS] [SEP] [UNK], as MPNet's <s> </s> <unk>): built as transformers
 * converts it (BertNormalizer, BertPreTokenizer, WordPiece, the special tokens
 * as added tokens, RobertaProcessing for the MPNet and RoBERTa classes, else
 * BertProcessing), with the names from tokenizer_config.json and
 * special_tokens_map.json. Folders with BERT's names stay with wordpiece.c. */
#include "tok.h"
#include "../internal.h"

#include <sys/stat.h>

enum { SP_CLS, SP_SEP, SP_UNK, SP_PAD, SP_MASK, SP_N };
static const char *const keys[SP_N] = {"cls_token", "sep_token", "unk_token", "pad_token",
                                       "mask_token"};
static const char *const bert_names[SP_N] = {"[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]"};

typedef struct names {
    char *name[SP_N];
    int lstrip[SP_N];
    char *cls_name; /* tokenizer_class, or NULL */
} names;

static void names_free(names *n)
{
    for (int i = 0; i < SP_N; i++)
        free(n->name[i]);
    free(n->cls_name);
}

static char *dup_str(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* The token names a config file gives (a string, or {"content": ...}). */
static tq_status read_names(const char *dir, const char *file, names *n)
{
    char *p = malloc(strlen(dir) + strlen(file) + 2);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    sprintf(p, "%s/%s", dir, file);
    struct stat sb;
    tq_json *j = NULL;
    tq_status st = stat(p, &sb) ? TQ_OK : tq_json_load(p, &j);
    free(p);
    for (int i = 0; !st && j && i < SP_N; i++) {
        const tq_json *v = tq_json_get(j, keys[i]);
        const tq_json *c = v && v->type == TQ_JSON_OBJ ? tq_json_get(v, "content") : v;
        if (!c || c->type != TQ_JSON_STR)
            continue;
        free(n->name[i]);
        if (!(n->name[i] = dup_str(c->str, c->len)))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        const tq_json *l = v->type == TQ_JSON_OBJ ? tq_json_get(v, "lstrip") : NULL;
        if (l && l->type == TQ_JSON_BOOL)
            n->lstrip[i] = l->b;
    }
    const tq_json *tc = j ? tq_json_get(j, "tokenizer_class") : NULL;
    if (!st && tc && tc->type == TQ_JSON_STR && !n->cls_name &&
        !(n->cls_name = dup_str(tc->str, tc->len)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_json_free(j);
    return st;
}

static tq_status load_vocab(const char *dir, tok_model *m)
{
    char *p = malloc(strlen(dir) + 16);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    sprintf(p, "%s/vocab.txt", dir);
    FILE *f;
    tq_status st = tq_input_fopen(p, &f);
    free(p);
    if (st)
        return st;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int32_t id = 0;
    /* as wordpiece.c: a token is its line without the line end */
    while (!st && (got = getline(&line, &cap, f)) >= 0) {
        size_t l = (size_t)got;
        if (l && line[l - 1] == '\n')
            l--;
        if (l && line[l - 1] == '\r')
            l--;
        if (tok_vocab_put(&m->vocab, line, l, id++))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    free(line);
    fclose(f);
    return st;
}

static int is_roberta_like(const char *cls)
{
    return cls && (!strncmp(cls, "MPNet", 5) || !strncmp(cls, "Roberta", 7) ||
                   !strncmp(cls, "XLMRoberta", 10));
}

static tq_status build(const char *dir, const tq_wordpiece_opts *o, const names *n, tok_json *t)
{
    tok_model *m = &t->model;
    m->type = TM_WORDPIECE;
    m->max_chars = 100;
    m->unk = -1;
    if (!(m->prefix = dup_str("##", 2)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    m->nprefix = 2;
    tq_status st = load_vocab(dir, m);
    if (st)
        return st;
    int32_t id[SP_N];
    for (int i = 0; i < SP_N; i++)
        id[i] = tok_vocab_get(&m->vocab, n->name[i], strlen(n->name[i]));
    if (id[SP_CLS] < 0 || id[SP_SEP] < 0 || id[SP_UNK] < 0)
        return tq_fail(TQ_ERR_DATA, "%s/vocab.txt: the vocabulary lacks %s, %s or %s", dir,
                       n->name[SP_CLS], n->name[SP_SEP], n->name[SP_UNK]);
    m->unk = id[SP_UNK];
    t->vocab_size = m->vocab.n;
    t->pad_id = id[SP_PAD];
    t->norm = calloc(1, sizeof *t->norm);
    t->pre = calloc(1, sizeof *t->pre);
    t->added = calloc(SP_N, sizeof *t->added);
    if (!t->norm || !t->pre || !t->added)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    t->nnorm = t->npre = 1;
    *t->norm = (tok_norm){.type = TN_BERT, .clean = 1, .chinese = o->chinese_chars,
                          .lower = o->lower_case,
                          .strip_acc = o->strip_accents < 0 ? o->lower_case : o->strip_accents};
    t->pre->type = TP_BERT;
    int rob = is_roberta_like(n->cls_name);
    for (int i = 0; i < SP_N; i++) {
        if (id[i] < 0)
            continue;
        tok_added *d = &t->added[t->nadded++];
        tok_u32 b = {0};
        if (tok_decode(n->name[i], strlen(n->name[i]), &b))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        *d = (tok_added){b.v, b.n, id[i], n->lstrip[i] || (rob && i == SP_MASK), 0, 0, 0};
    }
    /* the post-processor transformers gives the class */
    char post[160];
    snprintf(post, sizeof post,
             "{\"type\": \"%s\", \"cls\": [\"c\", %d], \"sep\": [\"s\", %d]}",
             rob ? "RobertaProcessing" : "BertProcessing", (int)id[SP_CLS], (int)id[SP_SEP]);
    tq_json *pj = NULL;
    st = tq_json_parse(post, strlen(post), &pj);
    if (!st)
        st = tok_post_parse(dir, pj, t, &t->single, &t->nsingle, &t->pair, &t->npair);
    tq_json_free(pj);
    return st;
}

tq_status tok_json_from_vocab(const char *dir, const tq_wordpiece_opts *o, tok_json *t, int *used)
{
    names n = {0};
    *used = 0;
    memset(t, 0, sizeof *t);
    tq_status st = TQ_OK;
    for (int i = 0; !st && i < SP_N; i++)
        if (!(n.name[i] = dup_str(bert_names[i], strlen(bert_names[i]))))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = read_names(dir, "special_tokens_map.json", &n);
    if (!st)
        st = read_names(dir, "tokenizer_config.json", &n);
    int bert = 1;
    for (int i = 0; !st && i < SP_N; i++)
        bert &= !strcmp(n.name[i], bert_names[i]);
    if (!st && !bert) {
        *used = 1;
        st = build(dir, o, &n, t);
        if (st)
            tok_json_free(t);
    }
    names_free(&n);
    return st;
}
