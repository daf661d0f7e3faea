/* json.c: a strict recursive-descent JSON reader into a tree: no comments, no
 * trailing commas, no NaN; strings are checked for escapes and surrogates. */
#include "json.h"
#include "internal.h"

#include <errno.h>
#include <math.h>

#define MAX_DEPTH 64

typedef struct jp {
    const char *s;
    size_t n, i;
    const char *why;
} jp;

static const char nomem[] = "out of memory"; /* not the text's fault */

static int fail(jp *p, const char *why)
{
    if (!p->why)
        p->why = why;
    return -1;
}

static void ws(jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int lit(jp *p, const char *w)
{
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k))
        return fail(p, "unexpected character");
    p->i += k;
    return 0;
}

static int hex4(jp *p, unsigned *u)
{
    if (p->n - p->i < 4)
        return fail(p, "truncated \\u escape");
    *u = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return fail(p, "bad \\u escape");
        *u = *u << 4 | (unsigned)d;
    }
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Escapes only ever shrink the text, so the output fits in the input's span. */
static int string(jp *p, char **out, size_t *len)
{
    p->i++; /* the opening quote */
    size_t start = p->i;
    while (p->i < p->n && p->s[p->i] != '"')
        p->i += p->s[p->i] == '\\' ? 2 : 1;
    if (p->i >= p->n)
        return fail(p, "unterminated string");
    size_t end = p->i;
    char *o = malloc(end - start + 1);
    if (!o)
        return fail(p, nomem);
    size_t k = 0;
    p->i = start;
    while (p->i < end) {
        unsigned char c = (unsigned char)p->s[p->i++];
        if (c < 0x20) {
            free(o);
            return fail(p, "control character in string");
        }
        if (c != '\\') {
            o[k++] = (char)c;
            continue;
        }
        char e = p->s[p->i++];
        unsigned u;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u':
            if (hex4(p, &u))
                break;
            if (u >= 0xD800 && u < 0xDC00) {
                unsigned lo;
                if (end - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                    fail(p, "unpaired surrogate in string");
                    break;
                }
                p->i += 2;
                if (hex4(p, &lo))
                    break;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    fail(p, "unpaired surrogate in string");
                    break;
                }
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            } else if (u >= 0xDC00 && u < 0xE000) {
                fail(p, "unpaired surrogate in string");
                break;
            }
            k += put_utf8(o + k, u);
            break;
        default: fail(p, "bad escape in string");
        }
        if (p->why) {
            free(o);
            return -1;
        }
    }
    p->i = end + 1;
    o[k] = 0;
    *out = o;
    *len = k;
    return 0;
}

static int number(jp *p, tq_json *v)
{
    size_t b = p->i;
    if (p->i < p->n && p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return fail(p, "bad number");
    if (p->s[p->i] == '0')
        p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return fail(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return fail(p, "bad number");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    char buf[64];
    size_t k = p->i - b;
    if (k >= sizeof buf)
        return fail(p, "number too long");
    memcpy(buf, p->s + b, k);
    buf[k] = 0;
    v->num = strtod(buf, NULL);
    if (!isfinite(v->num))
        return fail(p, "number out of range");
    v->num_serde = tq_json_serde_num(buf);
    return 0;
}

static int value(jp *p, tq_json *v, int depth);

static int grow(jp *p, tq_json *v, size_t *cap, int keys)
{
    if (v->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    tq_json *it = realloc(v->items, nc * sizeof *it);
    if (!it)
        return fail(p, nomem);
    v->items = it;
    if (keys) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k)
            return fail(p, nomem);
        v->keys = k;
    }
    *cap = nc;
    return 0;
}

static int container(jp *p, tq_json *v, int depth, int obj)
{
    if (depth > MAX_DEPTH)
        return fail(p, "nested too deeply");
    v->type = obj ? TQ_JSON_OBJ : TQ_JSON_ARR;
    char close = obj ? '}' : ']';
    size_t cap = 0;
    p->i++;
    ws(p);
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return 0;
    }
    for (;;) {
        if (grow(p, v, &cap, obj))
            return -1;
        if (obj) {
            ws(p);
            if (p->i >= p->n || p->s[p->i] != '"')
                return fail(p, "expected a string key");
            size_t kl;
            if (string(p, &v->keys[v->n], &kl))
                return -1;
            ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') {
                free(v->keys[v->n]);
                return fail(p, "expected ':'");
            }
            p->i++;
        }
        memset(&v->items[v->n], 0, sizeof *v->items);
        v->n++;
        if (value(p, &v->items[v->n - 1], depth + 1))
            return -1;
        ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            return 0;
        }
        return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int value(jp *p, tq_json *v, int depth)
{
    ws(p);
    if (p->i >= p->n)
        return fail(p, "unexpected end");
    switch (p->s[p->i]) {
    case '{': return container(p, v, depth, 1);
    case '[': return container(p, v, depth, 0);
    case '"': v->type = TQ_JSON_STR; return string(p, &v->str, &v->len);
    case 't': v->type = TQ_JSON_BOOL; v->b = 1; return lit(p, "true");
    case 'f': v->type = TQ_JSON_BOOL; return lit(p, "false");
    case 'n': v->type = TQ_JSON_NULL; return lit(p, "null");
    default: v->type = TQ_JSON_NUM; return number(p, v);
    }
}

static void clear(tq_json *v)
{
    for (size_t i = 0; i < v->n; i++) {
        clear(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
}

void tq_json_free(tq_json *v)
{
    if (v) {
        clear(v);
        free(v);
    }
}

tq_status tq_json_parse(const char *s, size_t n, tq_json **out)
{
    jp p = {s, n, 0, NULL};
    tq_json *v = calloc(1, sizeof *v);
    if (!v)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!value(&p, v, 0)) {
        ws(&p);
        if (p.i < n)
            fail(&p, "text after the value");
    }
    if (p.why) {
        tq_json_free(v);
        if (p.why == nomem)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        return tq_fail(TQ_ERR_DATA, "byte %zu: %s", p.i, p.why);
    }
    *out = v;
    return TQ_OK;
}

tq_status tq_json_load(const char *path, tq_json **out)
{
    FILE *f;
    tq_status ost = tq_input_fopen(path, &f);
    if (ost)
        return ost;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return tq_fail(TQ_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return tq_fail(TQ_ERR_IO, "%s: read error", path);
    }
    tq_status st = tq_json_parse(buf, n, out);
    free(buf);
    if (st)
        return tq_fail_context(st, "%s: not valid JSON", path);
    return TQ_OK;
}

const tq_json *tq_json_get(const tq_json *obj, const char *key)
{
    if (!obj || obj->type != TQ_JSON_OBJ)
        return NULL;
    for (size_t i = obj->n; i-- > 0;)
        if (!strcmp(obj->keys[i], key))
            return &obj->items[i];
    return NULL;
}
