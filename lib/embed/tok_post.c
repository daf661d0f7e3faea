/* tok_post.c: tokenizer.json's post_processor as two templates (one text,
 * a pair): TemplateProcessing as written, BertProcessing and
 * RobertaProcessing as the library builds them, ByteLevel (offsets only:
 * no ids change) and Sequence; none gives A, and A B with B's type 1. */
#include "tok.h"

#include <stdlib.h>
#include <string.h>

typedef struct tpl { tok_tpl *v; size_t n, cap; } tpl;

static int tpl_add(tpl *t, int seq, const int32_t *ids, size_t nids, int type_id)
{
    if (t->n == t->cap) {
        size_t c = t->cap ? 2 * t->cap : 8;
        tok_tpl *p = realloc(t->v, c * sizeof *p);
        if (!p)
            return -1;
        t->v = p;
        t->cap = c;
    }
    tok_tpl *e = &t->v[t->n];
    *e = (tok_tpl){seq, NULL, nids, type_id};
    if (nids) {
        if (!(e->ids = malloc(nids * sizeof *ids)))
            return -1;
        memcpy(e->ids, ids, nids * sizeof *ids);
    }
    t->n++;
    return 0;
}

static void tpl_free(tpl *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].ids);
    free(t->v);
    memset(t, 0, sizeof *t);
}

static int valid_id(const tq_json *v)
{
    return v->type == TQ_JSON_NUM && v->num >= 0 && v->num < TOK_MAX_ID &&
           v->num == (double)(int32_t)v->num;
}

/* ["token", id] as BertProcessing and RobertaProcessing write cls and sep */
static tq_status pair_id(const char *file, const tq_json *j, const char *k, int32_t *id)
{
    const tq_json *v = tq_json_get(j, k);
    if (!v || v->type != TQ_JSON_ARR || v->n != 2 || !valid_id(&v->items[1]))
        return tq_fail(TQ_ERR_DATA, "%s: the post_processor's %s is not [token, id]", file, k);
    *id = (int32_t)v->items[1].num;
    return TQ_OK;
}

static tq_status template_part(const char *file, const tq_json *list, const tq_json *specials,
                               tpl *out)
{
    if (!list || list->type != TQ_JSON_ARR)
        return tq_fail(TQ_ERR_DATA, "%s: TemplateProcessing without its templates", file);
    for (size_t i = 0; i < list->n; i++) {
        const tq_json *e = &list->items[i];
        const tq_json *sp = tq_json_get(e, "SpecialToken");
        const tq_json *sq = tq_json_get(e, "Sequence");
        const tq_json *it = sp ? sp : sq;
        const tq_json *id = it ? tq_json_get(it, "id") : NULL;
        const tq_json *ty = it ? tq_json_get(it, "type_id") : NULL;
        int type_id = ty && ty->type == TQ_JSON_NUM ? (int)ty->num : 0;
        if (!id || id->type != TQ_JSON_STR)
            return tq_fail(TQ_ERR_DATA, "%s: a template piece without an id", file);
        int r;
        if (sq) {
            if (strcmp(id->str, "A") && strcmp(id->str, "B"))
                return tq_fail(TQ_ERR_DATA, "%s: template sequence \"%s\" is neither A nor B",
                               file, id->str);
            r = tpl_add(out, id->str[0] - 'A', NULL, 0, type_id);
        } else {
            const tq_json *s = specials ? tq_json_get(specials, id->str) : NULL;
            const tq_json *ids = s ? tq_json_get(s, "ids") : NULL;
            if (!ids || ids->type != TQ_JSON_ARR)
                return tq_fail(TQ_ERR_DATA, "%s: template special token \"%s\" has no ids",
                               file, id->str);
            int32_t v[64];
            if (ids->n > 64)
                return tq_fail(TQ_ERR_DATA, "%s: special token \"%s\" has too many ids", file,
                               id->str);
            for (size_t k = 0; k < ids->n; k++) {
                if (!valid_id(&ids->items[k]))
                    return tq_fail(TQ_ERR_DATA, "%s: special token \"%s\" has an id that is "
                                   "not valid", file, id->str);
                v[k] = (int32_t)ids->items[k].num;
            }
            r = tpl_add(out, -1, v, ids->n, type_id);
        }
        if (r)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

static tq_status one(const char *file, const tq_json *j, tpl *s, tpl *p, int *set)
{
    const tq_json *ty = tq_json_get(j, "type");
    if (!ty || ty->type != TQ_JSON_STR)
        return tq_fail(TQ_ERR_DATA, "%s: a post_processor without a type", file);
    const char *name = ty->str;
    if (!strcmp(name, "ByteLevel"))
        return TQ_OK;
    if (!strcmp(name, "Sequence")) {
        const tq_json *l = tq_json_get(j, "processors");
        if (!l || l->type != TQ_JSON_ARR)
            return tq_fail(TQ_ERR_DATA, "%s: a post_processor Sequence without processors", file);
        for (size_t i = 0; i < l->n; i++) {
            tq_status st = one(file, &l->items[i], s, p, set);
            if (st)
                return st;
        }
        return TQ_OK;
    }
    int bert = !strcmp(name, "BertProcessing"), roberta = !strcmp(name, "RobertaProcessing");
    int templ = !strcmp(name, "TemplateProcessing");
    if (!bert && !roberta && !templ)
        return tq_fail(TQ_ERR_DATA, "%s: post_processor type \"%s\" is not supported", file, name);
    if (*set)
        return tq_fail(TQ_ERR_DATA, "%s: two post_processors that add tokens", file);
    *set = 1;
    if (templ) {
        const tq_json *sp = tq_json_get(j, "special_tokens");
        tq_status st = template_part(file, tq_json_get(j, "single"), sp, s);
        return st ? st : template_part(file, tq_json_get(j, "pair"), sp, p);
    }
    int32_t cls, sep;
    tq_status st = pair_id(file, j, "cls", &cls);
    if (!st)
        st = pair_id(file, j, "sep", &sep);
    if (st)
        return st;
    int r = tpl_add(s, -1, &cls, 1, 0) || tpl_add(s, 0, NULL, 0, 0) || tpl_add(s, -1, &sep, 1, 0);
    if (bert) /* [CLS] A [SEP] B [SEP], B's part type 1 */
        r = r || tpl_add(p, -1, &cls, 1, 0) || tpl_add(p, 0, NULL, 0, 0) ||
            tpl_add(p, -1, &sep, 1, 0) || tpl_add(p, 1, NULL, 0, 1) || tpl_add(p, -1, &sep, 1, 1);
    else /* <s> A </s> </s> B </s>, all type 0 */
        r = r || tpl_add(p, -1, &cls, 1, 0) || tpl_add(p, 0, NULL, 0, 0) ||
            tpl_add(p, -1, &sep, 1, 0) || tpl_add(p, -1, &sep, 1, 0) || tpl_add(p, 1, NULL, 0, 0) ||
            tpl_add(p, -1, &sep, 1, 0);
    return r ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
}

tq_status tok_post_parse(const char *file, const tq_json *j, const tok_json *t,
                         tok_tpl **single, size_t *ns, tok_tpl **pair, size_t *np)
{
    (void)t;
    tpl s = {0}, p = {0};
    int set = 0;
    tq_status st = j && j->type != TQ_JSON_NULL ? one(file, j, &s, &p, &set) : TQ_OK;
    if (!st && !set) { /* no template: the texts as they are */
        if (tpl_add(&s, 0, NULL, 0, 0) || tpl_add(&p, 0, NULL, 0, 0) || tpl_add(&p, 1, NULL, 0, 1))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    if (st) {
        tpl_free(&s);
        tpl_free(&p);
        return st;
    }
    *single = s.v, *ns = s.n;
    *pair = p.v, *np = p.n;
    return TQ_OK;
}
