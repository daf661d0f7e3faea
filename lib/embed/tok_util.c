/* tok_util.c: the growable buffers, UTF-8 as Rust's from_utf8_lossy reads
 * it, and the token -> id hash table the tokenizer.json models share. */
#include "tok.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *p = realloc(*v, c * size);
    if (!p)
        return -1;
    *v = p;
    *cap = c;
    return 0;
}

int tok_u32_add(tok_u32 *b, const uint32_t *s, size_t n)
{
    if (grow((void **)&b->v, &b->cap, b->n + n, sizeof *b->v))
        return -1;
    if (n)
        memcpy(b->v + b->n, s, n * sizeof *s);
    b->n += n;
    return 0;
}

int tok_u32_push(tok_u32 *b, uint32_t x) { return tok_u32_add(b, &x, 1); }

int tok_i32_push(tok_i32 *b, int32_t x)
{
    if (grow((void **)&b->v, &b->cap, b->n + 1, sizeof *b->v))
        return -1;
    b->v[b->n++] = x;
    return 0;
}

int tok_pieces_add(tok_pieces *p, const uint32_t *s, size_t n, int origin)
{
    if (p->n == p->cap) {
        size_t c = p->cap ? 2 * p->cap : 64;
        size_t *at = realloc(p->at, c * sizeof *at);
        if (!at)
            return -1;
        p->at = at;
        size_t *len = realloc(p->len, c * sizeof *len);
        if (!len)
            return -1;
        p->len = len;
        unsigned char *o = realloc(p->origin, c);
        if (!o)
            return -1;
        p->origin = o;
        p->cap = c;
    }
    p->at[p->n] = p->cp.n;
    p->len[p->n] = n;
    p->origin[p->n] = (unsigned char)origin;
    p->n++;
    return tok_u32_add(&p->cp, s, n);
}

void tok_pieces_free(tok_pieces *p)
{
    free(p->cp.v);
    free(p->at);
    free(p->len);
    free(p->origin);
    memset(p, 0, sizeof *p);
}

/* The length of the valid prefix of a UTF-8 sequence starting at s[0] (a
 * lead byte), per the Unicode standard's table of well-formed sequences: a
 * maximal invalid subpart is that prefix (at least one byte). */
static size_t valid_prefix(const unsigned char *s, size_t n, size_t need)
{
    size_t i = 1;
    for (; i < need && i < n; i++) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (i == 1) {
            if (s[0] == 0xE0)
                lo = 0xA0;
            else if (s[0] == 0xED)
                hi = 0x9F;
            else if (s[0] == 0xF0)
                lo = 0x90;
            else if (s[0] == 0xF4)
                hi = 0x8F;
        }
        if (s[i] < lo || s[i] > hi)
            break;
    }
    return i;
}

int tok_decode(const char *text, size_t n, tok_u32 *out)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                    : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        uint32_t cp;
        if (need == 1) {
            cp = c;
            i++;
        } else if (!need) {
            cp = 0xFFFD;
            i++;
        } else {
            size_t k = valid_prefix(s + i, n - i, need);
            if (k < need) {
                cp = 0xFFFD;
                i += k;
            } else {
                size_t used;
                cp = tq_utf8_decode(s + i, n - i, &used);
                i += used;
            }
        }
        if (tok_u32_push(out, cp))
            return -1;
    }
    return 0;
}

size_t tok_encode(const uint32_t *cp, size_t n, char *out)
{
    size_t b = 0;
    for (size_t i = 0; i < n; i++)
        b += tq_utf8_encode(cp[i], out + b);
    return b;
}

/* ---- vocabulary ---- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int32_t tok_vocab_get(const tok_vocab *v, const char *s, size_t len)
{
    if (!v->slots)
        return -1;
    for (uint64_t i = hash_bytes(s, len) & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slots[i];
        if (id < 0)
            return -1;
        if (v->len[id] == len && !memcmp(v->tok[id], s, len))
            return id;
    }
}

static int rehash(tok_vocab *v, uint64_t cap)
{
    int32_t *slots = malloc(cap * sizeof *slots);
    if (!slots)
        return -1;
    memset(slots, 0xff, cap * sizeof *slots);
    for (int64_t id = 0; id < v->n; id++) {
        if (!v->tok[id])
            continue;
        uint64_t i = hash_bytes(v->tok[id], v->len[id]) & (cap - 1);
        while (slots[i] >= 0)
            i = (i + 1) & (cap - 1);
        slots[i] = (int32_t)id;
    }
    free(v->slots);
    v->slots = slots;
    v->mask = cap - 1;
    return 0;
}

int tok_vocab_put(tok_vocab *v, const char *s, size_t len, int32_t id)
{
    if (id < 0)
        return -1;
    int32_t old = tok_vocab_get(v, s, len);
    if (old == id)
        return 0;
    if (id >= v->cap) {
        int64_t c = v->cap ? v->cap : 1024;
        while (c <= id)
            c *= 2;
        char **t = realloc(v->tok, (size_t)c * sizeof *t);
        if (!t)
            return -1;
        v->tok = t;
        uint32_t *l = realloc(v->len, (size_t)c * sizeof *l);
        if (!l)
            return -1;
        v->len = l;
        for (int64_t i = v->cap; i < c; i++)
            v->tok[i] = NULL, v->len[i] = 0;
        v->cap = c;
    }
    int stale = old >= 0;
    if (v->tok[id]) { /* the id had another token: that one goes */
        free(v->tok[id]);
        v->tok[id] = NULL;
        v->count--;
        stale = 1;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = 0;
    if (old >= 0) { /* the token had another id: the later one wins */
        free(v->tok[old]);
        v->tok[old] = NULL;
        v->count--;
    }
    v->tok[id] = copy;
    v->len[id] = (uint32_t)len;
    if (id >= v->n)
        v->n = id + 1;
    v->count++;
    uint64_t cap = v->mask + 1;
    if (!v->slots || (uint64_t)v->count * 2 > cap || stale) {
        while ((uint64_t)v->count * 2 > cap || cap < 16)
            cap *= 2;
        return rehash(v, cap);
    }
    uint64_t i = hash_bytes(s, len) & v->mask;
    while (v->slots[i] >= 0)
        i = (i + 1) & v->mask;
    v->slots[i] = id;
    return 0;
}

void tok_vocab_free(tok_vocab *v)
{
    for (int64_t i = 0; i < v->n; i++)
        free(v->tok[i]);
    free(v->tok);
    free(v->len);
    free(v->slots);
    memset(v, 0, sizeof *v);
}
