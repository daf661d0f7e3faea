/* tok_precompiled.c: SentencePiece's precompiled charsmap (the Precompiled
 * normalizer of XLM-RoBERTa, T5 and the like): a darts-clone double array
 * from UTF-8 keys to offsets in a pool of NUL-terminated replacements. As
 * the tokenizers library does, each grapheme cluster shorter than 6 bytes is
 * looked up whole first (the shortest key that prefixes it wins), else its
 * characters one by one. Grapheme clusters are approximated: a character
 * with the marks, joiners and emoji modifiers after it, and CR LF. */
#include "tok.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

struct tok_charsmap {
    uint32_t *unit;
    size_t nunit;
    char *pool;
    size_t npool;
};

static int b64(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

tq_status tok_charsmap_load(const char *file, const char *s, size_t len, tok_charsmap **out)
{
    unsigned char *d = malloc(len / 4 * 3 + 3);
    if (!d)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len && s[i] != '='; i++) {
        int v = b64((unsigned char)s[i]);
        if (v < 0) {
            free(d);
            return tq_fail(TQ_ERR_DATA, "%s: precompiled_charsmap is not base64", file);
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            d[n++] = (unsigned char)(acc >> bits);
        }
    }
    uint32_t tsize = n >= 4 ? (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 |
                                  (uint32_t)d[3] << 24 : 0;
    tok_charsmap *cm = calloc(1, sizeof *cm);
    if (n < 4 || tsize % 4 || tsize > n - 4 || !tsize) {
        free(d);
        free(cm);
        return tq_fail(TQ_ERR_DATA, "%s: precompiled_charsmap is malformed", file);
    }
    cm->nunit = tsize / 4;
    cm->npool = n - 4 - tsize;
    cm->unit = malloc(tsize);
    cm->pool = malloc(cm->npool + 1);
    if (!cm->unit || !cm->pool) {
        free(d);
        tok_charsmap_free(cm);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < cm->nunit; i++) {
        const unsigned char *u = d + 4 + 4 * i;
        cm->unit[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                      (uint32_t)u[3] << 24;
    }
    memcpy(cm->pool, d + 4 + tsize, cm->npool);
    cm->pool[cm->npool] = 0;
    free(d);
    *out = cm;
    return TQ_OK;
}

void tok_charsmap_free(tok_charsmap *cm)
{
    if (!cm)
        return;
    free(cm->unit);
    free(cm->pool);
    free(cm);
}

/* darts-clone's unit fields */
static uint32_t offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }
static int has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
static uint32_t value(uint32_t u) { return u & ((1u << 31) - 1); }

/* The replacement of the shortest key that prefixes s[0..n), or NULL. */
static const char *lookup(const tok_charsmap *cm, const unsigned char *s, size_t n)
{
    size_t pos = 0;
    if (!cm->nunit)
        return NULL;
    pos ^= offset(cm->unit[0]);
    for (size_t i = 0; i < n && s[i]; i++) {
        pos ^= s[i];
        if (pos >= cm->nunit)
            return NULL;
        uint32_t u = cm->unit[pos];
        if (label(u) != s[i])
            return NULL;
        pos ^= offset(u);
        if (has_leaf(u)) { /* the leaf below holds the value */
            if (pos >= cm->nunit)
                return NULL;
            uint32_t v = value(cm->unit[pos]);
            return v < cm->npool ? cm->pool + v : NULL;
        }
    }
    return NULL;
}

/* Grapheme_Cluster_Break=Prepend (Unicode 14): these join what follows */
static int prepend(uint32_t c)
{
    return (c >= 0x600 && c <= 0x605) || c == 0x6DD || c == 0x70F || c == 0x890 || c == 0x891 ||
           c == 0x8E2 || c == 0xD4E || c == 0x110BD || c == 0x110CD || c == 0x111C2 ||
           c == 0x111C3 || c == 0x1193F || c == 0x11941 || c == 0x11A3A ||
           (c >= 0x11A84 && c <= 0x11A89) || c == 0x11D46;
}

/* Whether c continues the cluster before it (GB9, GB9a, GB9b, GB11 roughly). */
static int extends(uint32_t prev, uint32_t c)
{
    if (prev == '\r')
        return c == '\n';
    unsigned cf = tq_uc_flags(c);
    int c_ctl = (cf & TQ_UC_OTHER) && c != 0x200D && c != 0x200C && !prepend(c);
    if (prepend(prev))
        return !c_ctl && c != '\r' && c != '\n' && c != 0x2028 && c != 0x2029;
    int p_ctl = (tq_uc_flags(prev) & TQ_UC_OTHER) && prev != 0x200D && prev != 0x200C;
    if (p_ctl || c_ctl || prev == '\n' || prev == 0x2028 || prev == 0x2029)
        return 0; /* controls (and line and paragraph separators) stand alone */
    if (c == 0x200D || c == 0x200C || (c >= 0x1F3FB && c <= 0x1F3FF))
        return 1;
    if (prev == 0x200D && c >= 0x1F000 && c <= 0x1FAFF)
        return 1;
    return (cf & TQ_UC_MARKS) != 0;
}

static int put_utf8(tok_u32 *out, const char *s)
{
    return tok_decode(s, strlen(s), out);
}

int tok_charsmap_apply(const tok_charsmap *cm, const tok_u32 *in, tok_u32 *out)
{
    char buf[64];
    for (size_t i = 0; i < in->n;) {
        size_t e = i + 1;
        while (e < in->n && extends(in->v[e - 1], in->v[e]))
            e++;
        size_t bytes = 0;
        for (size_t k = i; k < e && bytes < sizeof buf - 4; k++)
            bytes += tq_utf8_encode(in->v[k], buf + bytes);
        if (bytes < 6) {
            const char *r = lookup(cm, (const unsigned char *)buf, bytes);
            if (r) {
                if (put_utf8(out, r))
                    return -1;
                i = e;
                continue;
            }
        }
        for (size_t k = i; k < e; k++) {
            size_t l = tq_utf8_encode(in->v[k], buf);
            const char *r = lookup(cm, (const unsigned char *)buf, l);
            if (r ? put_utf8(out, r) : tok_u32_push(out, in->v[k]))
                return -1;
        }
        i = e;
    }
    return 0;
}
