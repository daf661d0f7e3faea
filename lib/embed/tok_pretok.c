/* tok_pretok.c: tokenizer.json's pre-tokenizers, which cut the normalized
 * text into pieces the model encodes one by one: BertPreTokenizer, Whitespace,
 * WhitespaceSplit, Punctuation, Digits, Metaspace, ByteLevel (GPT-2's split
 * pattern written out by hand, no regex engine), Split with a literal or
 * GPT-2's pattern, and Sequence. */
#include "tok.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

static unsigned fl(uint32_t c) { return tq_uc_flags(c); }
static int is_ws(uint32_t c) { return (fl(c) & TQ_UC_WSPACE) != 0; }
/* the library's punctuation: ASCII symbols or P* (what BERT's flag holds) */
static int is_punct(uint32_t c) { return (fl(c) & TQ_UC_PUNCT) != 0; }

/* A split of one piece: the spans [a, b) of s marked as matches; behavior
 * says what becomes of them and of the text between. */
typedef struct span { size_t a, b; } span;

static int emit(tok_pieces *out, const uint32_t *s, size_t a, size_t b, int origin)
{
    if (b <= a)
        return 0;
    return tok_pieces_add(out, s + a, b - a, origin && a == 0);
}

static int split_by(const uint32_t *s, size_t n, const span *m, size_t nm, int behavior,
                    int origin, tok_pieces *out)
{
    size_t from = 0; /* start of the text not yet emitted */
    for (size_t k = 0; k < nm; k++) {
        size_t a = m[k].a, b = m[k].b;
        int r = 0;
        switch (behavior) {
        case TB_REMOVED:
            r = emit(out, s, from, a, origin);
            from = b;
            break;
        case TB_ISOLATED:
            r = emit(out, s, from, a, origin) || emit(out, s, a, b, origin);
            from = b;
            break;
        case TB_PREVIOUS:
            r = emit(out, s, from, b, origin);
            from = b;
            break;
        case TB_NEXT:
            r = emit(out, s, from, a, origin);
            from = a;
            break;
        case TB_CONTIGUOUS: { /* adjacent matches become one piece */
            size_t e = b;
            while (k + 1 < nm && m[k + 1].a == e)
                e = m[++k].b;
            r = emit(out, s, from, a, origin) || emit(out, s, a, e, origin);
            from = e;
            break;
        }
        }
        if (r)
            return -1;
    }
    return emit(out, s, from, n, origin);
}

typedef struct spans { span *v; size_t n, cap; } spans;

static int add_span(spans *m, size_t a, size_t b)
{
    if (m->n == m->cap) {
        size_t c = m->cap ? 2 * m->cap : 64;
        span *p = realloc(m->v, c * sizeof *p);
        if (!p)
            return -1;
        m->v = p;
        m->cap = c;
    }
    m->v[m->n++] = (span){a, b};
    return 0;
}

/* Each character for which pred holds is a match of its own. */
static int chars_where(const uint32_t *s, size_t n, int (*pred)(uint32_t), spans *m)
{
    for (size_t i = 0; i < n; i++)
        if (pred(s[i]) && add_span(m, i, i + 1))
            return -1;
    return 0;
}

static int is_l(uint32_t c) { return (fl(c) & TQ_UC_LETTER) != 0; }
static int is_n(uint32_t c) { return (fl(c) & TQ_UC_NUMBER) != 0; }
static int is_other_sym(uint32_t c) { return !is_ws(c) && !is_l(c) && !is_n(c); }

/* GPT-2's pattern at s[i], alternatives in order, as Oniguruma tries them:
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_at(const uint32_t *s, size_t n, size_t i)
{
    if (s[i] == '\'' && i + 1 < n) {
        uint32_t c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd')
            return 2;
        if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') ||
                          (c == 'l' && s[i + 2] == 'l')))
            return 3;
    }
    size_t j = i + (s[i] == ' ');
    int (*cls[3])(uint32_t) = {is_l, is_n, is_other_sym};
    for (int k = 0; k < 3; k++) {
        if (j < n && cls[k](s[j])) {
            size_t e = j;
            while (e < n && cls[k](s[e]))
                e++;
            return e - i;
        }
    }
    size_t e = i;
    while (e < n && is_ws(s[e]))
        e++;
    if (e == i) /* cannot happen: every character is in one class */
        return 1;
    if (e == n || e - i == 1)
        return e - i;
    return e - i - 1; /* the last space goes with what follows */
}

static int gpt2_spans(const uint32_t *s, size_t n, spans *m)
{
    for (size_t i = 0; i < n;) {
        size_t l = gpt2_at(s, n, i);
        if (add_span(m, i, i + l))
            return -1;
        i += l;
    }
    return 0;
}

static int literal_spans(const uint32_t *s, size_t n, const uint32_t *p, size_t np, spans *m)
{
    for (size_t i = 0; np && i + np <= n;) {
        if (!memcmp(s + i, p, np * sizeof *p)) {
            if (add_span(m, i, i + np))
                return -1;
            i += np;
        } else {
            i++;
        }
    }
    return 0;
}

/* Runs of characters of the same kind (\w+ or [^\w\s]+), spaces dropped:
 * the Whitespace pre-tokenizer's \w+|[^\w\s]+ */
static int whitespace(const uint32_t *s, size_t n, int origin, tok_pieces *out)
{
    for (size_t i = 0; i < n;) {
        if (is_ws(s[i])) {
            i++;
            continue;
        }
        int w = (fl(s[i]) & TQ_UC_WORD) != 0;
        size_t e = i;
        while (e < n && !is_ws(s[e]) && ((fl(s[e]) & TQ_UC_WORD) != 0) == w)
            e++;
        if (emit(out, s, i, e, origin))
            return -1;
        i = e;
    }
    return 0;
}

static int bytelevel(const tok_pretok *t, const uint32_t *s, size_t n, int origin, tok_pieces *out,
                     spans *m)
{
    tok_u32 buf = {0};
    int r = 0;
    if (t->prefix_space && n && s[0] != ' ') /* the library prepends to non-empty text only */
        r = tok_u32_push(&buf, ' ');
    r = r || tok_u32_add(&buf, s, n);
    if (!r && t->use_regex)
        r = gpt2_spans(buf.v, buf.n, m);
    else if (!r)
        r = add_span(m, 0, buf.n);
    /* each piece's UTF-8 bytes become GPT-2's printable characters */
    char u[4];
    tok_u32 bytes = {0};
    for (size_t k = 0; !r && k < m->n; k++) {
        bytes.n = 0;
        for (size_t i = m->v[k].a; !r && i < m->v[k].b; i++) {
            size_t l = tq_utf8_encode(buf.v[i], u);
            for (size_t b = 0; !r && b < l; b++)
                r = tok_u32_push(&bytes, tok_byte_char((unsigned char)u[b]));
        }
        r = r || (bytes.n && tok_pieces_add(out, bytes.v, bytes.n, origin && k == 0));
    }
    free(bytes.v);
    free(buf.v);
    return r ? -1 : 0;
}

static int metaspace(const tok_pretok *t, const uint32_t *s, size_t n, int origin, tok_pieces *out,
                     spans *m)
{
    tok_u32 buf = {0};
    int r = 0;
    int starts = n && (s[0] == ' ' || s[0] == t->repl);
    if (n && !starts && (t->prepend == 2 || (t->prepend == 1 && origin)))
        r = tok_u32_push(&buf, t->repl);
    for (size_t i = 0; !r && i < n; i++)
        r = tok_u32_push(&buf, s[i] == ' ' ? t->repl : s[i]);
    if (!r && t->split) {
        for (size_t i = 0; !r && i < buf.n; i++)
            if (buf.v[i] == t->repl)
                r = add_span(m, i, i + 1);
        r = r || split_by(buf.v, buf.n, m->v, m->n, TB_NEXT, origin, out);
    } else if (!r && buf.n) {
        r = tok_pieces_add(out, buf.v, buf.n, origin);
    }
    free(buf.v);
    return r ? -1 : 0;
}

static int one(const tok_pretok *t, const uint32_t *s, size_t n, int origin, tok_pieces *out)
{
    spans m = {0};
    int r = 0;
    switch (t->type) {
    case TP_BERT: /* split at whitespace (dropped), isolate punctuation */
    case TP_WSSPLIT: {
        tok_pieces mid = {0};
        r = chars_where(s, n, is_ws, &m) || split_by(s, n, m.v, m.n, TB_REMOVED, origin, &mid);
        for (size_t k = 0; !r && k < mid.n; k++) {
            if (t->type == TP_WSSPLIT) {
                r = tok_pieces_add(out, mid.cp.v + mid.at[k], mid.len[k], mid.origin[k]);
                continue;
            }
            m.n = 0;
            const uint32_t *p = mid.cp.v + mid.at[k];
            r = chars_where(p, mid.len[k], is_punct, &m) ||
                split_by(p, mid.len[k], m.v, m.n, TB_ISOLATED, mid.origin[k], out);
        }
        tok_pieces_free(&mid);
        break;
    }
    case TP_WHITESPACE:
        r = whitespace(s, n, origin, out);
        break;
    case TP_PUNCT:
        r = chars_where(s, n, is_punct, &m) || split_by(s, n, m.v, m.n, t->behavior, origin, out);
        break;
    case TP_DIGITS:
        if (t->individual)
            r = chars_where(s, n, is_n, &m) || split_by(s, n, m.v, m.n, TB_ISOLATED, origin, out);
        else
            r = chars_where(s, n, is_n, &m) ||
                split_by(s, n, m.v, m.n, TB_CONTIGUOUS, origin, out);
        break;
    case TP_METASPACE:
        r = metaspace(t, s, n, origin, out, &m);
        break;
    case TP_BYTELEVEL:
        r = bytelevel(t, s, n, origin, out, &m);
        break;
    case TP_SPLIT: {
        r = t->pat ? literal_spans(s, n, t->pat, t->npat, &m) : gpt2_spans(s, n, &m);
        if (!r && t->invert) { /* the matches are what lies between */
            spans g = {0};
            size_t from = 0;
            for (size_t k = 0; !r && k < m.n; k++) {
                r = m.v[k].a > from && add_span(&g, from, m.v[k].a);
                from = m.v[k].b;
            }
            r = r || (from < n && add_span(&g, from, n));
            free(m.v);
            m = g;
        }
        r = r || split_by(s, n, m.v, m.n, t->behavior, origin, out);
        break;
    }
    }
    free(m.v);
    return r ? -1 : 0;
}

int tok_pretokenize(const tok_pretok *ps, size_t n, tok_pieces *p, tok_pieces *tmp)
{
    for (size_t i = 0; i < n; i++) {
        tmp->n = 0;
        tmp->cp.n = 0;
        for (size_t k = 0; k < p->n; k++)
            if (one(&ps[i], p->cp.v + p->at[k], p->len[k], p->origin[k], tmp))
                return -1;
        tok_pieces x = *p;
        *p = *tmp;
        *tmp = x;
    }
    return 0;
}

uint32_t tok_byte_char(unsigned char b)
{
    /* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves,
     * the others map to U+0100 onwards in byte order */
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)
        return b;
    unsigned k = 0;
    for (unsigned c = 0; c < b; c++)
        k += !((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE);
    return 0x100 + k;
}

/* ---- from tokenizer.json ---- */

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int jbool(const tq_json *o, const char *k, int dflt)
{
    const tq_json *v = tq_json_get(o, k);
    return v && v->type == TQ_JSON_BOOL ? v->b : dflt;
}

static const char *jstr(const tq_json *o, const char *k)
{
    const tq_json *v = tq_json_get(o, k);
    return v && v->type == TQ_JSON_STR ? v->str : NULL;
}

static tq_status behavior(const char *file, const tq_json *j, tok_pretok *t)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    const char *b = jstr(j, "behavior");
    t->behavior = TB_ISOLATED;
    if (!b)
        return TQ_OK;
    for (int i = 0; i < 5; i++)
        if (!strcmp(b, names[i])) {
            t->behavior = i;
            return TQ_OK;
        }
    return tq_fail(TQ_ERR_DATA, "%s: split behavior \"%s\" is not supported", file, b);
}

static tq_status parse_one(const char *file, const tq_json *j, tok_pretok *t)
{
    const char *ty = jstr(j, "type");
    if (!ty)
        return tq_fail(TQ_ERR_DATA, "%s: a pre_tokenizer without a type", file);
    if (!strcmp(ty, "BertPreTokenizer")) {
        t->type = TP_BERT;
    } else if (!strcmp(ty, "Whitespace")) {
        t->type = TP_WHITESPACE;
    } else if (!strcmp(ty, "WhitespaceSplit")) {
        t->type = TP_WSSPLIT;
    } else if (!strcmp(ty, "Punctuation")) {
        t->type = TP_PUNCT;
        return behavior(file, j, t);
    } else if (!strcmp(ty, "Digits")) {
        t->type = TP_DIGITS;
        t->individual = jbool(j, "individual_digits", 0);
    } else if (!strcmp(ty, "ByteLevel")) {
        t->type = TP_BYTELEVEL;
        t->prefix_space = jbool(j, "add_prefix_space", 1);
        t->use_regex = jbool(j, "use_regex", 1);
    } else if (!strcmp(ty, "Metaspace")) {
        t->type = TP_METASPACE;
        const char *r = jstr(j, "replacement");
        tok_u32 b = {0};
        if (tok_decode(r ? r : "\xe2\x96\x81", r ? strlen(r) : 3, &b))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        int one_char = b.n == 1;
        t->repl = b.n ? b.v[0] : 0;
        free(b.v);
        if (!one_char)
            return tq_fail(TQ_ERR_DATA, "%s: Metaspace's replacement is not one character", file);
        const char *ps = jstr(j, "prepend_scheme");
        t->prepend = jbool(j, "add_prefix_space", 1) ? 2 : 0;
        if (ps)
            t->prepend = !strcmp(ps, "always") ? 2 : !strcmp(ps, "first") ? 1 : 0;
        t->split = jbool(j, "split", 1);
    } else if (!strcmp(ty, "Split")) {
        t->type = TP_SPLIT;
        t->invert = jbool(j, "invert", 0);
        const tq_json *p = tq_json_get(j, "pattern");
        const char *lit = p ? jstr(p, "String") : NULL;
        const char *re = p ? jstr(p, "Regex") : NULL;
        if (lit) {
            tok_u32 b = {0};
            if (tok_decode(lit, strlen(lit), &b))
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            t->pat = b.v;
            t->npat = b.n;
            if (!b.n)
                return tq_fail(TQ_ERR_DATA, "%s: Split with an empty pattern", file);
        } else if (!re || strcmp(re, GPT2_PATTERN)) {
            return tq_fail(TQ_ERR_DATA, "%s: Split pattern %s%s%s is not supported (only "
                           "literal strings and GPT-2's pattern are)", file, re ? "\"" : "",
                           re ? re : "(none)", re ? "\"" : "");
        }
        return behavior(file, j, t);
    } else {
        return tq_fail(TQ_ERR_DATA, "%s: pre_tokenizer type \"%s\" is not supported", file, ty);
    }
    return TQ_OK;
}

static tq_status collect(const char *file, const tq_json *j, tok_pretok **ps, size_t *n,
                         size_t *cap)
{
    const char *ty = jstr(j, "type");
    if (ty && !strcmp(ty, "Sequence")) {
        const tq_json *l = tq_json_get(j, "pretokenizers");
        if (!l || l->type != TQ_JSON_ARR)
            return tq_fail(TQ_ERR_DATA, "%s: a pre_tokenizer Sequence without pretokenizers",
                           file);
        for (size_t i = 0; i < l->n; i++) {
            tq_status st = collect(file, &l->items[i], ps, n, cap);
            if (st)
                return st;
        }
        return TQ_OK;
    }
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 4;
        tok_pretok *p = realloc(*ps, c * sizeof *p);
        if (!p)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        *ps = p;
        *cap = c;
    }
    memset(&(*ps)[*n], 0, sizeof **ps);
    (*n)++;
    return parse_one(file, j, &(*ps)[*n - 1]);
}

tq_status tok_pretok_parse(const char *file, const tq_json *j, tok_pretok **ps, size_t *n)
{
    size_t cap = 0;
    *ps = NULL;
    *n = 0;
    if (!j || j->type == TQ_JSON_NULL)
        return TQ_OK;
    return collect(file, j, ps, n, &cap);
}

void tok_pretok_free(tok_pretok *ps, size_t n)
{
    for (size_t i = 0; ps && i < n; i++)
        free(ps[i].pat);
    free(ps);
}
