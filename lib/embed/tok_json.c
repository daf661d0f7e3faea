/* tok_json.c: a tokenizer.json read whole, and one text through it as the
 * tokenizers library does: added tokens matched in the raw text (those not
 * "normalized"), each stretch between them normalized, then the normalized
 * added tokens matched, then pre-tokenized and encoded by the model. */
#include "tok.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

static int is_ws(uint32_t c) { return (tq_uc_flags(c) & TQ_UC_WSPACE) != 0; }
static int is_wordch(uint32_t c)
{
    return c == '_' || (tq_uc_flags(c) & (TQ_UC_LETTER | TQ_UC_NUMBER)) != 0;
}

/* The added token (of the class normalized) that matches leftmost-longest
 * at or after s[from]: its index, *a and *b its span with lstrip/rstrip's
 * spaces; -1 none. single_word tokens inside a word do not match. */
static long next_added(const tok_json *t, int normalized, const uint32_t *s, size_t n,
                       size_t from, size_t floor, size_t *a, size_t *b)
{
    for (size_t i = from; i < n; i++) {
        long best = -1;
        size_t bl = 0;
        for (size_t k = 0; k < t->nadded; k++) {
            const tok_added *d = &t->added[k];
            if (d->normalized != normalized || !d->n || d->n <= bl || i + d->n > n ||
                s[i] != d->cp[0] || memcmp(s + i, d->cp, d->n * sizeof *s))
                continue;
            if (d->single_word && ((i > 0 && is_wordch(s[i - 1])) ||
                                   (i + d->n < n && is_wordch(s[i + d->n]))))
                continue;
            best = (long)k;
            bl = d->n;
        }
        if (best < 0)
            continue;
        const tok_added *d = &t->added[best];
        size_t x = i, y = i + d->n;
        while (d->lstrip && x > floor && is_ws(s[x - 1]))
            x--;
        while (d->rstrip && y < n && is_ws(s[y]))
            y++;
        *a = x;
        *b = y;
        return best;
    }
    return -1;
}

typedef struct work {
    tok_u32 norm, tmp;
    tok_pieces p, ptmp;
    char *utf8;
    size_t utf8_cap;
} work;

/* Pre-tokenizes and encodes one normalized stretch free of added tokens. */
static int encode_plain(const tok_json *t, work *w, const uint32_t *s, size_t n, int origin,
                        tok_i32 *out)
{
    w->p.n = 0;
    w->p.cp.n = 0;
    if (tok_pieces_add(&w->p, s, n, origin) || tok_pretokenize(t->pre, t->npre, &w->p, &w->ptmp))
        return -1;
    for (size_t k = 0; k < w->p.n; k++) {
        size_t l = w->p.len[k];
        if (!l)
            continue;
        if (4 * l > w->utf8_cap) {
            char *u = realloc(w->utf8, 4 * l);
            if (!u)
                return -1;
            w->utf8 = u;
            w->utf8_cap = 4 * l;
        }
        size_t nb = tok_encode(w->p.cp.v + w->p.at[k], l, w->utf8);
        if (tok_model_encode(&t->model, w->utf8, nb, out))
            return -1;
    }
    return 0;
}

/* A stretch between raw added tokens: normalized, then split at the
 * normalized added tokens. */
static int encode_stretch(const tok_json *t, work *w, const uint32_t *s, size_t n, int origin,
                          tok_i32 *out)
{
    w->norm.n = 0;
    if (tok_u32_add(&w->norm, s, n) || tok_normalize(t->norm, t->nnorm, &w->norm, &w->tmp))
        return -1;
    /* the normalized text is kept aside: encode_plain reuses the buffers */
    tok_u32 ns = {0};
    if (tok_u32_add(&ns, w->norm.v, w->norm.n)) {
        free(ns.v);
        return -1;
    }
    int r = 0;
    size_t from = 0, a, b;
    long k;
    while (!r && (k = next_added(t, 1, ns.v, ns.n, from, from, &a, &b)) >= 0) {
        r = (a > from && encode_plain(t, w, ns.v + from, a - from, origin && from == 0, out)) ||
            tok_i32_push(out, t->added[k].id);
        from = b;
    }
    if (!r && (from < ns.n || !ns.n))
        r = encode_plain(t, w, ns.v + from, ns.n - from, origin && from == 0, out);
    free(ns.v);
    return r;
}

int tok_json_ids(const tok_json *t, const char *text, size_t len, tok_i32 *out)
{
    tok_u32 cp = {0};
    work w = {0};
    int r = tok_decode(text, len, &cp);
    size_t from = 0, a, b;
    long k;
    while (!r && (k = next_added(t, 0, cp.v, cp.n, from, from, &a, &b)) >= 0) {
        r = (a > from && encode_stretch(t, &w, cp.v + from, a - from, from == 0, out)) ||
            tok_i32_push(out, t->added[k].id);
        from = b;
    }
    if (!r && (from < cp.n || !cp.n))
        r = encode_stretch(t, &w, cp.v + from, cp.n - from, from == 0, out);
    free(cp.v);
    free(w.norm.v);
    free(w.tmp.v);
    tok_pieces_free(&w.p);
    tok_pieces_free(&w.ptmp);
    free(w.utf8);
    return r;
}

/* ---- loading ---- */

static int jbool(const tq_json *o, const char *k, int dflt)
{
    const tq_json *v = tq_json_get(o, k);
    return v && v->type == TQ_JSON_BOOL ? v->b : dflt;
}

static tq_status added_tokens(const char *file, const tq_json *l, tok_json *t)
{
    if (!l || l->type == TQ_JSON_NULL)
        return TQ_OK;
    if (l->type != TQ_JSON_ARR)
        return tq_fail(TQ_ERR_DATA, "%s: added_tokens is not a list", file);
    t->added = calloc(l->n + 1, sizeof *t->added);
    if (!t->added)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < l->n; i++) {
        const tq_json *e = &l->items[i];
        const tq_json *c = tq_json_get(e, "content"), *id = tq_json_get(e, "id");
        if (!c || c->type != TQ_JSON_STR || !id || id->type != TQ_JSON_NUM || id->num < 0 ||
            id->num >= TOK_MAX_ID)
            return tq_fail(TQ_ERR_DATA, "%s: added token %zu lacks content or id", file, i);
        tok_added *d = &t->added[t->nadded++];
        int special = jbool(e, "special", 0);
        d->id = (int32_t)id->num;
        d->lstrip = jbool(e, "lstrip", 0);
        d->rstrip = jbool(e, "rstrip", 0);
        d->single_word = jbool(e, "single_word", 0);
        d->normalized = jbool(e, "normalized", !special);
        tok_u32 b = {0}, tmp = {0};
        int r = tok_decode(c->str, c->len, &b);
        /* a normalized token is matched in normalized text: as normalized */
        if (!r && d->normalized)
            r = tok_normalize(t->norm, t->nnorm, &b, &tmp);
        free(tmp.v);
        d->cp = b.v;
        d->n = b.n;
        if (r)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        if (d->id >= t->vocab_size)
            t->vocab_size = d->id + 1;
    }
    return TQ_OK;
}

static int32_t find_pad(const tok_json *t, const tq_json *padding)
{
    const tq_json *pid = padding ? tq_json_get(padding, "pad_id") : NULL;
    if (pid && pid->type == TQ_JSON_NUM)
        return (int32_t)pid->num;
    static const char *const names[] = {"[PAD]", "<pad>"};
    for (int i = 0; i < 2; i++) {
        for (size_t k = 0; k < t->nadded; k++) {
            tok_u32 b = {0};
            if (tok_decode(names[i], strlen(names[i]), &b))
                return -1;
            int same = b.n == t->added[k].n && !memcmp(b.v, t->added[k].cp, b.n * sizeof *b.v);
            free(b.v);
            if (same)
                return t->added[k].id;
        }
        int32_t id = tok_vocab_get(&t->model.vocab, names[i], strlen(names[i]));
        if (id >= 0)
            return id;
    }
    return -1;
}

tq_status tok_json_load(const char *path, tok_json *t)
{
    memset(t, 0, sizeof *t);
    t->model.unk = -1;
    tq_json *j;
    tq_status st = tq_json_load(path, &j);
    if (st)
        return st;
    if (j->type != TQ_JSON_OBJ)
        st = tq_fail(TQ_ERR_DATA, "%s: not a JSON object", path);
    if (!st)
        st = tok_norm_parse(path, tq_json_get(j, "normalizer"), &t->norm, &t->nnorm);
    if (!st)
        st = tok_pretok_parse(path, tq_json_get(j, "pre_tokenizer"), &t->pre, &t->npre);
    if (!st)
        st = tok_model_parse(path, tq_json_get(j, "model"), &t->model);
    if (!st) {
        t->vocab_size = t->model.vocab.n;
        st = added_tokens(path, tq_json_get(j, "added_tokens"), t);
    }
    if (!st)
        st = tok_post_parse(path, tq_json_get(j, "post_processor"), t, &t->single, &t->nsingle,
                            &t->pair, &t->npair);
    const tq_json *tr = tq_json_get(j, "truncation");
    const tq_json *ml = tr && tr->type == TQ_JSON_OBJ ? tq_json_get(tr, "max_length") : NULL;
    if (!st && ml && ml->type == TQ_JSON_NUM && ml->num > 0)
        t->max_length = ml->num > 1e9 ? 1000000000 : (int)ml->num;
    if (!st)
        t->pad_id = find_pad(t, tq_json_get(j, "padding"));
    /* every id the tokenizer can give counts in its size, so that a model
     * whose table is shorter is refused at open, never indexed past */
    for (size_t i = 0; !st && i < t->nsingle + t->npair; i++) {
        const tok_tpl *e = i < t->nsingle ? &t->single[i] : &t->pair[i - t->nsingle];
        for (size_t k = 0; k < e->nids; k++)
            if (e->ids[k] >= t->vocab_size)
                t->vocab_size = (int64_t)e->ids[k] + 1;
    }
    tq_json_free(j);
    if (st)
        tok_json_free(t);
    return st;
}

void tok_json_free(tok_json *t)
{
    tok_norm_free(t->norm, t->nnorm);
    tok_pretok_free(t->pre, t->npre);
    tok_model_free(&t->model);
    for (size_t i = 0; i < t->nadded; i++)
        free(t->added[i].cp);
    free(t->added);
    for (size_t i = 0; i < t->nsingle; i++)
        free(t->single[i].ids);
    for (size_t i = 0; i < t->npair; i++)
        free(t->pair[i].ids);
    free(t->single);
    free(t->pair);
    memset(t, 0, sizeof *t);
}
