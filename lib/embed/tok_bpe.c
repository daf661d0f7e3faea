/* tok_bpe.c: the BPE model as the tokenizers library runs it: a piece's
 * characters (prefix/suffix added, unknown ones as byte tokens or [unk],
 * fused when asked), then merges by rank, lowest first, leftmost on ties,
 * through a heap as the library does, so long words stay fast. */
#include "tok.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t pair_hash(int32_t a, int32_t b)
{
    uint64_t h = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static const tok_merge *merge_get(const tok_model *m, int32_t a, int32_t b)
{
    if (!m->merges)
        return NULL;
    for (uint64_t i = pair_hash(a, b) & m->mmask;; i = (i + 1) & m->mmask) {
        const tok_merge *g = &m->merges[i];
        if (g->rank < 0)
            return NULL;
        if (g->a == a && g->b == b)
            return g;
    }
}

static tq_status merge_part(const char *file, const tok_model *m, const char *s, size_t n,
                            int32_t *id)
{
    *id = tok_vocab_get(&m->vocab, s, n);
    if (*id < 0)
        return tq_fail(TQ_ERR_DATA, "%s: merge token \"%.*s\" is not in the vocabulary", file,
                       (int)n, s);
    return TQ_OK;
}

tq_status tok_bpe_merges(const char *file, const tq_json *j, tok_model *m)
{
    if (!j || j->type != TQ_JSON_ARR)
        return tq_fail(TQ_ERR_DATA, "%s: BPE without merges", file);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)j->n + 2)
        cap *= 2;
    m->merges = malloc(cap * sizeof *m->merges);
    if (!m->merges)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < cap; i++)
        m->merges[i].rank = -1;
    m->mmask = cap - 1;
    char *join = NULL;
    tq_status st = TQ_OK;
    for (size_t r = 0; !st && r < j->n; r++) {
        const tq_json *e = &j->items[r];
        const char *a, *b;
        size_t na, nb;
        if (e->type == TQ_JSON_STR) { /* "a b" */
            const char *sp = memchr(e->str, ' ', e->len);
            if (!sp || memchr(sp + 1, ' ', e->len - (size_t)(sp + 1 - e->str))) {
                st = tq_fail(TQ_ERR_DATA, "%s: merge %zu is not two tokens", file, r + 1);
                break;
            }
            a = e->str, na = (size_t)(sp - e->str);
            b = sp + 1, nb = e->len - na - 1;
        } else if (e->type == TQ_JSON_ARR && e->n == 2 && e->items[0].type == TQ_JSON_STR &&
                   e->items[1].type == TQ_JSON_STR) { /* ["a", "b"] */
            a = e->items[0].str, na = e->items[0].len;
            b = e->items[1].str, nb = e->items[1].len;
        } else {
            st = tq_fail(TQ_ERR_DATA, "%s: merge %zu is not two tokens", file, r + 1);
            break;
        }
        /* the merged token drops the right part's continuing prefix */
        size_t skip = m->nprefix && nb >= m->nprefix ? m->nprefix : 0;
        int32_t ia, ib, in;
        char *p = realloc(join, na + nb + 1);
        if (!p) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        join = p;
        memcpy(join, a, na);
        memcpy(join + na, b + skip, nb - skip);
        st = merge_part(file, m, a, na, &ia);
        if (!st)
            st = merge_part(file, m, b, nb, &ib);
        if (!st)
            st = merge_part(file, m, join, na + nb - skip, &in);
        if (st)
            break;
        /* a repeated pair takes the later rank, as the library's map does */
        uint64_t i = pair_hash(ia, ib) & m->mmask;
        while (m->merges[i].rank >= 0 && !(m->merges[i].a == ia && m->merges[i].b == ib))
            i = (i + 1) & m->mmask;
        m->merges[i] = (tok_merge){ia, ib, (int32_t)r, in};
    }
    free(join);
    return st;
}

/* ---- encoding ---- */

typedef struct sym { int32_t id, prev, next; size_t len; } sym;
typedef struct cand { int32_t rank, pos, id; } cand;
typedef struct heap { cand *v; size_t n, cap; } heap;

static int before(const cand *x, const cand *y)
{
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static int heap_push(heap *h, cand c)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        cand *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return -1;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i && before(&c, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = c;
    return 0;
}

static cand heap_pop(heap *h)
{
    cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        const cand *best = &last;
        if (l < h->n && before(&h->v[l], best))
            s = l, best = &h->v[l];
        if (r < h->n && before(&h->v[r], best))
            s = r;
        if (s == i)
            break;
        h->v[i] = h->v[s];
        i = s;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

typedef struct word { sym *v; size_t n, cap; } word;

static int word_add(word *w, int32_t id, size_t len)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        sym *v = realloc(w->v, cap * sizeof *v);
        if (!v)
            return -1;
        w->v = v;
        w->cap = cap;
    }
    int32_t i = (int32_t)w->n;
    w->v[w->n++] = (sym){id, i - 1, -1, len};
    if (i)
        w->v[i - 1].next = i;
    return 0;
}

static int push_pair(const tok_model *m, heap *h, const word *w, int32_t pos)
{
    int32_t nx = w->v[pos].next;
    if (nx < 0)
        return 0;
    const tok_merge *g = merge_get(m, w->v[pos].id, w->v[nx].id);
    return g ? heap_push(h, (cand){g->rank, pos, g->id}) : 0;
}

static int merge_all(const tok_model *m, word *w)
{
    heap h = {0};
    int r = 0;
    for (size_t i = 0; !r && i + 1 < w->n; i++)
        r = push_pair(m, &h, w, (int32_t)i);
    while (!r && h.n) {
        cand c = heap_pop(&h);
        sym *s = &w->v[c.pos];
        if (!s->len || s->next < 0)
            continue;
        const tok_merge *g = merge_get(m, s->id, w->v[s->next].id);
        if (!g || g->id != c.id) /* stale: the pair changed since */
            continue;
        sym *right = &w->v[s->next];
        s->id = c.id;
        s->len += right->len;
        s->next = right->next;
        right->len = 0;
        if (s->next >= 0)
            w->v[s->next].prev = c.pos;
        if (s->prev >= 0)
            r = push_pair(m, &h, w, s->prev);
        r = r || push_pair(m, &h, w, c.pos);
    }
    free(h.v);
    return r;
}

/* The characters of a piece as ids (prefix on all but the first, suffix on
 * the last), unknown ones as <0xNN> byte tokens or [unk]. */
static int chars(const tok_model *m, const char *s, size_t n, word *w, char *key)
{
    int32_t unk = -1;
    size_t unk_len = 0;
    for (size_t i = 0; i < n;) {
        size_t used;
        tq_utf8_decode((const unsigned char *)s + i, n - i, &used);
        size_t k = 0;
        if (i && m->nprefix)
            memcpy(key, m->prefix, m->nprefix), k = m->nprefix;
        memcpy(key + k, s + i, used);
        k += used;
        if (i + used == n && m->nsuffix)
            memcpy(key + k, m->suffix, m->nsuffix), k += m->nsuffix;
        int32_t id = tok_vocab_get(&m->vocab, key, k);
        if (id >= 0) {
            if (unk >= 0 && word_add(w, unk, unk_len))
                return -1;
            unk = -1;
            if (word_add(w, id, used))
                return -1;
        } else {
            int done = 0;
            if (m->byte_fallback) { /* all the bytes as tokens, or none */
                int32_t bid[64];
                done = k <= 64;
                for (size_t b = 0; done && b < k; b++) {
                    char t[8];
                    snprintf(t, sizeof t, "<0x%02X>", (unsigned char)key[b]);
                    done = (bid[b] = tok_vocab_get(&m->vocab, t, 6)) >= 0;
                }
                for (size_t b = 0; done && b < k; b++)
                    if (word_add(w, bid[b], 1))
                        return -1;
            }
            if (!done && m->unk >= 0) {
                if (unk >= 0 && m->fuse_unk) {
                    unk_len += used;
                } else {
                    if (unk >= 0 && word_add(w, unk, unk_len))
                        return -1;
                    unk = m->unk;
                    unk_len = used;
                }
            }
        }
        i += used;
    }
    return unk >= 0 ? word_add(w, unk, unk_len) : 0;
}

int tok_bpe_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out)
{
    if (!n)
        return 0;
    if (m->ignore_merges) {
        int32_t id = tok_vocab_get(&m->vocab, s, n);
        if (id >= 0)
            return tok_i32_push(out, id);
    }
    char *key = malloc(m->nprefix + m->nsuffix + 8);
    word w = {0};
    int r = !key || chars(m, s, n, &w, key) || merge_all(m, &w);
    for (size_t i = 0; !r && i < w.n; i++)
        if (w.v[i].len)
            r = tok_i32_push(out, w.v[i].id);
    free(key);
    free(w.v);
    return r ? -1 : 0;
}
