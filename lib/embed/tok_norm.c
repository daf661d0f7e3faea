/* tok_norm.c: tokenizer.json's normalizers, as the tokenizers library runs
 * them, on code points: BertNormalizer, Lowercase, StripAccents, NFD, NFKD,
 * NFC, NFKC, Replace, Prepend, Strip, Precompiled and Sequence of them. */
#include "tok.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

/* BertNormalizer: clean (drop NUL, U+FFFD and C* characters but tab and
 * line ends; whitespace to spaces), space out CJK ideographs, strip accents
 * (NFD then drop Mn), lower-case, in that order. */
static int bert(const tok_norm *t, const tok_u32 *in, tok_u32 *out)
{
    for (size_t i = 0; i < in->n; i++) {
        uint32_t cp = in->v[i];
        unsigned f = tq_uc_flags(cp);
        int keep_ctl = cp == '\t' || cp == '\n' || cp == '\r';
        if (t->clean) {
            if (cp == 0 || cp == 0xFFFD || ((f & TQ_UC_OTHER) && !keep_ctl))
                continue;
            if (keep_ctl || (f & TQ_UC_WSPACE))
                cp = ' ';
        }
        uint32_t d[18], l[4];
        int nd = 1;
        d[0] = cp;
        if (t->strip_acc)
            nd = tq_uc_decompose(cp, d);
        int cjk = t->chinese && (f & TQ_UC_CJK);
        if (cjk && tok_u32_push(out, ' '))
            return -1;
        for (int k = 0; k < nd; k++) {
            if (t->strip_acc && (tq_uc_flags(d[k]) & TQ_UC_MARK))
                continue;
            int nl = 1;
            l[0] = d[k];
            if (t->lower)
                nl = tq_uc_lower_cp(d[k], l);
            if (tok_u32_add(out, l, (size_t)nl))
                return -1;
        }
        if (cjk && tok_u32_push(out, ' '))
            return -1;
    }
    return 0;
}

/* How many characters the Replace regex (one class, qmin..qmax times)
 * matches at s[i], or 0. */
static size_t class_run(const tok_norm *t, const tok_u32 *s, size_t i)
{
    size_t k = 0;
    while (i + k < s->n && k < t->qmax &&
           (t->class_ws ? (tq_uc_flags(s->v[i + k]) & TQ_UC_WSPACE) != 0 : s->v[i + k] == t->pat[0]))
        k++;
    return k >= t->qmin && k ? k : 0;
}

static int replace(const tok_norm *t, const tok_u32 *in, tok_u32 *out)
{
    for (size_t i = 0; i < in->n;) {
        size_t m = 0;
        if (t->regex)
            m = class_run(t, in, i);
        else if (t->npat && i + t->npat <= in->n &&
                 !memcmp(in->v + i, t->pat, t->npat * sizeof *t->pat))
            m = t->npat;
        if (m) {
            if (tok_u32_add(out, t->rep, t->nrep))
                return -1;
            i += m;
        } else if (tok_u32_push(out, in->v[i++]))
            return -1;
    }
    return 0;
}

static int one(const tok_norm *t, const tok_u32 *in, tok_u32 *out)
{
    uint32_t buf[18];
    switch (t->type) {
    case TN_BERT:
        return bert(t, in, out);
    case TN_LOWER:
        for (size_t i = 0; i < in->n; i++)
            if (tok_u32_add(out, buf, (size_t)tq_uc_lower_cp(in->v[i], buf)))
                return -1;
        return 0;
    case TN_STRIP_ACCENTS: /* the library drops every combining mark, M* */
        for (size_t i = 0; i < in->n; i++)
            if (!(tq_uc_flags(in->v[i]) & TQ_UC_MARKS) && tok_u32_push(out, in->v[i]))
                return -1;
        return 0;
    case TN_NFD:
    case TN_NFKD:
    case TN_NFC:
    case TN_NFKC: {
        uint32_t *v;
        int k = tq_uc_normalize(in->v, in->n, t->type == TN_NFKD || t->type == TN_NFKC,
                                t->type == TN_NFC || t->type == TN_NFKC, &v);
        int r = k < 0 || tok_u32_add(out, v, (size_t)k);
        free(k < 0 ? NULL : v);
        return r ? -1 : 0;
    }
    case TN_REPLACE:
        return replace(t, in, out);
    case TN_PREPEND: /* only a non-empty text gets the prefix */
        if (in->n && tok_u32_add(out, t->rep, t->nrep))
            return -1;
        return tok_u32_add(out, in->v, in->n);
    case TN_STRIP: {
        size_t a = 0, b = in->n;
        while (t->left && a < b && (tq_uc_flags(in->v[a]) & TQ_UC_WSPACE))
            a++;
        while (t->right && b > a && (tq_uc_flags(in->v[b - 1]) & TQ_UC_WSPACE))
            b--;
        return tok_u32_add(out, in->v + a, b - a);
    }
    case TN_PRECOMPILED:
        return tok_charsmap_apply(t->cm, in, out);
    }
    return -1;
}

int tok_normalize(const tok_norm *ns, size_t n, tok_u32 *s, tok_u32 *tmp)
{
    for (size_t i = 0; i < n; i++) {
        tmp->n = 0;
        if (one(&ns[i], s, tmp))
            return -1;
        tok_u32 x = *s;
        *s = *tmp;
        *tmp = x;
    }
    return 0;
}

void tok_norm_free(tok_norm *ns, size_t n)
{
    for (size_t i = 0; ns && i < n; i++) {
        free(ns[i].pat);
        free(ns[i].rep);
        tok_charsmap_free(ns[i].cm);
    }
    free(ns);
}

/* ---- from tokenizer.json ---- */

static int jbool(const tq_json *o, const char *k, int dflt)
{
    const tq_json *v = tq_json_get(o, k);
    return v && v->type == TQ_JSON_BOOL ? v->b : dflt;
}

static tq_status jstr_cps(const char *file, const tq_json *v, const char *what, uint32_t **cp,
                          size_t *n)
{
    if (!v || v->type != TQ_JSON_STR)
        return tq_fail(TQ_ERR_DATA, "%s: %s is not a string", file, what);
    tok_u32 b = {0};
    if (tok_decode(v->str, v->len, &b))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    *cp = b.v;
    *n = b.n;
    return TQ_OK;
}

/* Replace's regex: the few that models use, one character or \s repeated
 * ({n,}, {n,m}, +, *); anything else is refused by name. */
static tq_status parse_regex(const char *file, const char *re, tok_norm *t)
{
    size_t p = 0;
    if (re[0] == '\\' && re[1] == 's')
        t->class_ws = 1, p = 2;
    else if (re[0] && re[0] != '\\' && !strchr("[](){}.*+?^$|", re[0]))
        p = 1;
    else
        return tq_fail(TQ_ERR_DATA, "%s: Replace regex \"%s\" is not supported", file, re);
    t->pat = malloc(sizeof *t->pat);
    if (!t->pat)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    t->pat[0] = (unsigned char)re[0];
    t->npat = 1;
    t->regex = 1;
    const char *q = re + p;
    char *end;
    if (!*q)
        t->qmin = t->qmax = 1;
    else if (!strcmp(q, "+"))
        t->qmin = 1, t->qmax = SIZE_MAX;
    else if (!strcmp(q, "*"))
        t->qmin = 1, t->qmax = SIZE_MAX; /* an empty match replaces nothing here */
    else if (*q == '{') {
        t->qmin = strtoul(q + 1, &end, 10);
        t->qmax = t->qmin;
        if (*end == ',') {
            t->qmax = end[1] == '}' ? SIZE_MAX : strtoul(end + 1, &end, 10);
            if (t->qmax == SIZE_MAX)
                end++;
        }
        if (*end != '}' || end[1] || !t->qmax)
            return tq_fail(TQ_ERR_DATA, "%s: Replace regex \"%s\" is not supported", file, re);
        if (!t->qmin)
            t->qmin = 1;
    } else
        return tq_fail(TQ_ERR_DATA, "%s: Replace regex \"%s\" is not supported", file, re);
    return TQ_OK;
}

static tq_status parse_one(const char *file, const tq_json *j, tok_norm *t)
{
    const tq_json *ty = tq_json_get(j, "type");
    if (!ty || ty->type != TQ_JSON_STR)
        return tq_fail(TQ_ERR_DATA, "%s: a normalizer without a type", file);
    const char *s = ty->str;
    if (!strcmp(s, "BertNormalizer")) {
        t->type = TN_BERT;
        t->clean = jbool(j, "clean_text", 1);
        t->chinese = jbool(j, "handle_chinese_chars", 1);
        t->lower = jbool(j, "lowercase", 1);
        t->strip_acc = jbool(j, "strip_accents", t->lower); /* null follows lowercase */
    } else if (!strcmp(s, "Lowercase")) {
        t->type = TN_LOWER;
    } else if (!strcmp(s, "StripAccents")) {
        t->type = TN_STRIP_ACCENTS;
    } else if (!strcmp(s, "NFD") || !strcmp(s, "NFKD") || !strcmp(s, "NFC") ||
               !strcmp(s, "NFKC")) {
        t->type = !strcmp(s, "NFD") ? TN_NFD : !strcmp(s, "NFKD") ? TN_NFKD
                : !strcmp(s, "NFC") ? TN_NFC : TN_NFKC;
    } else if (!strcmp(s, "Strip")) {
        t->type = TN_STRIP;
        t->left = jbool(j, "strip_left", 1);
        t->right = jbool(j, "strip_right", 1);
    } else if (!strcmp(s, "Prepend")) {
        t->type = TN_PREPEND;
        return jstr_cps(file, tq_json_get(j, "prepend"), "Prepend's prepend", &t->rep, &t->nrep);
    } else if (!strcmp(s, "Replace")) {
        t->type = TN_REPLACE;
        const tq_json *pat = tq_json_get(j, "pattern");
        const tq_json *lit = pat ? tq_json_get(pat, "String") : NULL;
        const tq_json *re = pat ? tq_json_get(pat, "Regex") : NULL;
        tq_status st = jstr_cps(file, tq_json_get(j, "content"), "Replace's content", &t->rep,
                                &t->nrep);
        if (!st && lit)
            st = jstr_cps(file, lit, "Replace's pattern", &t->pat, &t->npat);
        else if (!st && re && re->type == TQ_JSON_STR)
            st = parse_regex(file, re->str, t);
        else if (!st)
            st = tq_fail(TQ_ERR_DATA, "%s: Replace without a pattern", file);
        return st;
    } else if (!strcmp(s, "Precompiled")) {
        t->type = TN_PRECOMPILED;
        const tq_json *m = tq_json_get(j, "precompiled_charsmap");
        if (!m || m->type == TQ_JSON_NULL) { /* nothing to map: a no-op Replace */
            t->type = TN_REPLACE;
            return TQ_OK;
        }
        if (m->type != TQ_JSON_STR)
            return tq_fail(TQ_ERR_DATA, "%s: precompiled_charsmap is not a string", file);
        return tok_charsmap_load(file, m->str, m->len, &t->cm);
    } else {
        return tq_fail(TQ_ERR_DATA, "%s: normalizer type \"%s\" is not supported", file, s);
    }
    return TQ_OK;
}

/* Flattens Sequence (nested too) into one list. */
static tq_status collect(const char *file, const tq_json *j, tok_norm **ns, size_t *n, size_t *cap)
{
    const tq_json *ty = tq_json_get(j, "type");
    if (ty && ty->type == TQ_JSON_STR && !strcmp(ty->str, "Sequence")) {
        const tq_json *l = tq_json_get(j, "normalizers");
        if (!l || l->type != TQ_JSON_ARR)
            return tq_fail(TQ_ERR_DATA, "%s: a normalizer Sequence without normalizers", file);
        for (size_t i = 0; i < l->n; i++) {
            tq_status st = collect(file, &l->items[i], ns, n, cap);
            if (st)
                return st;
        }
        return TQ_OK;
    }
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 4;
        tok_norm *p = realloc(*ns, c * sizeof *p);
        if (!p)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        *ns = p;
        *cap = c;
    }
    memset(&(*ns)[*n], 0, sizeof **ns);
    (*n)++;
    return parse_one(file, j, &(*ns)[*n - 1]);
}

tq_status tok_norm_parse(const char *file, const tq_json *j, tok_norm **ns, size_t *n)
{
    size_t cap = 0;
    *ns = NULL;
    *n = 0;
    if (!j || j->type == TQ_JSON_NULL)
        return TQ_OK;
    return collect(file, j, ns, n, &cap);
}
