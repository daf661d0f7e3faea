/* wordpiece.c: BERT's tokenizer as BertTokenizer (backed by the tokenizers
 * library, which sentence-transformers uses) does it: clean the text (drop NUL,
 * U+FFFD and controls; whitespace to spaces), space out CJK ideographs, strip
 * accents and lower-case, split on whitespace and punctuation, then greedy
 * longest-match WordPiece with "##" and [UNK] for words that do not fit. */
#include "wordpiece.h"
#include "unicode.h"
#include "../internal.h"

#include <errno.h>

#define MAX_WORD_CHARS 100 /* BertTokenizer's max_input_chars_per_word */

struct tq_wordpiece {
    tq_wordpiece_opts opts;
    char *text;          /* all tokens, NUL-separated */
    uint32_t *off;       /* offset of token i in text */
    uint32_t *len;
    int64_t n;
    int32_t *slots;      /* open-addressing table of ids, -1 empty */
    uint64_t mask;
    int32_t cls, sep, unk;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

int32_t tq_wordpiece_id(const tq_wordpiece *wp, const char *tok, size_t len)
{
    for (uint64_t i = hash_bytes(tok, len) & wp->mask;; i = (i + 1) & wp->mask) {
        int32_t id = wp->slots[i];
        if (id < 0)
            return -1;
        if (wp->len[id] == len && !memcmp(wp->text + wp->off[id], tok, len))
            return id;
    }
}

int64_t tq_wordpiece_vocab_size(const tq_wordpiece *wp) { return wp->n; }

void tq_wordpiece_free(tq_wordpiece *wp)
{
    if (!wp)
        return;
    free(wp->text);
    free(wp->off);
    free(wp->len);
    free(wp->slots);
    free(wp);
}

tq_status tq_wordpiece_load(const char *path, const tq_wordpiece_opts *opts, tq_wordpiece **out)
{
    FILE *f;
    tq_status ost = tq_input_fopen(path, &f);
    if (ost)
        return ost;
    tq_wordpiece *wp = calloc(1, sizeof *wp);
    char *buf = NULL;
    size_t size = 0;
    tq_status st = TQ_OK;
    if (!wp) {
        fclose(f);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    wp->opts = *opts;
    if (fseek(f, 0, SEEK_END) == 0) {
        long s = ftell(f);
        size = s > 0 ? (size_t)s : 0;
        rewind(f);
    }
    if (size > (256u << 20))
        st = tq_fail(TQ_ERR_DATA, "%s: a vocabulary of %zu bytes is too large", path, size);
    else if (!(buf = malloc(size + 1)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    else if (fread(buf, 1, size, f) != size)
        st = tq_fail(TQ_ERR_IO, "%s: read failed", path);
    fclose(f);
    if (st)
        goto fail;
    buf[size] = 0;
    int64_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += buf[i] == '\n';
    lines += size && buf[size - 1] != '\n';
    wp->off = malloc((size_t)(lines + 1) * sizeof *wp->off);
    wp->len = malloc((size_t)(lines + 1) * sizeof *wp->len);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)lines)
        cap *= 2;
    wp->slots = malloc(cap * sizeof *wp->slots);
    if (!wp->off || !wp->len || !wp->slots) {
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memset(wp->slots, 0xff, cap * sizeof *wp->slots);
    wp->mask = cap - 1;
    wp->text = buf;
    buf = NULL;
    /* Tokens are lines, kept whole but for the line end: vocab.txt may hold
     * tokens with inner spaces, and BertTokenizer strips only the newline. */
    size_t p = 0;
    for (int64_t id = 0; id < lines; id++) {
        size_t e = p;
        while (e < size && wp->text[e] != '\n')
            e++;
        size_t l = e - p;
        if (l && wp->text[p + l - 1] == '\r')
            l--;
        wp->text[p + l] = 0;
        wp->off[id] = (uint32_t)p;
        wp->len[id] = (uint32_t)l;
        /* a repeated token keeps its last id, as BertTokenizer's dict does */
        uint64_t i = hash_bytes(wp->text + p, l) & wp->mask;
        for (;; i = (i + 1) & wp->mask) {
            int32_t o = wp->slots[i];
            if (o < 0 || (wp->len[o] == l && !memcmp(wp->text + wp->off[o], wp->text + p, l)))
                break;
        }
        wp->slots[i] = (int32_t)id;
        p = e + 1;
    }
    wp->n = lines;
    wp->cls = tq_wordpiece_id(wp, "[CLS]", 5);
    wp->sep = tq_wordpiece_id(wp, "[SEP]", 5);
    wp->unk = tq_wordpiece_id(wp, "[UNK]", 5);
    if (wp->cls < 0 || wp->sep < 0 || wp->unk < 0) {
        st = tq_fail(TQ_ERR_DATA, "%s: the vocabulary lacks [CLS], [SEP] or [UNK]", path);
        goto fail;
    }
    *out = wp;
    return TQ_OK;
fail:
    free(buf);
    tq_wordpiece_free(wp);
    return st;
}

/* ---- encoding ---- */

typedef struct cps {
    uint32_t *v;
    size_t n, cap;
} cps;

static int cps_push(cps *c, uint32_t x)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        uint32_t *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return -1;
        c->v = v;
        c->cap = cap;
    }
    c->v[c->n++] = x;
    return 0;
}

static int is_separator(uint32_t cp)
{
    /* after cleaning, Python's str.split() also splits at U+2028 and U+2029 */
    return cp == ' ' || cp == 0x2028 || cp == 0x2029;
}

/* Lower-cases character by character, as the tokenizers library's BertNormalizer
 * does (so no final-sigma context: a word-final capital sigma becomes U+03C3). */
static int lower_token(const uint32_t *s, size_t n, cps *out)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t m[4];
        int k = tq_uc_lower_cp(s[i], m);
        for (int t = 0; t < k; t++)
            if (cps_push(out, m[t]))
                return -1;
    }
    return 0;
}

static int strip_accents(const uint32_t *s, size_t n, cps *out)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t d[18];
        int k = tq_uc_decompose(s[i], d);
        for (int t = 0; t < k; t++)
            if (!(tq_uc_flags(d[t]) & TQ_UC_MARK) && cps_push(out, d[t]))
                return -1;
    }
    return 0;
}

typedef struct emit_ctx {
    const tq_wordpiece *wp;
    int32_t *ids;
    int room, n;
    char *buf; /* the word's UTF-8 */
    size_t *at; /* byte offset of each code point in buf */
} emit_ctx;

static int emit_id(emit_ctx *e, int32_t id)
{
    if (e->n >= e->room)
        return 1; /* full: the rest is cut */
    e->ids[e->n++] = id;
    return 0;
}

/* Greedy longest match over one word; [UNK] for the whole word if a piece fails. */
static int wordpiece_word(emit_ctx *e, const uint32_t *w, size_t n)
{
    if (n > MAX_WORD_CHARS)
        return emit_id(e, e->wp->unk);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        e->at[i] = bytes;
        bytes += tq_utf8_encode(w[i], e->buf + bytes);
    }
    e->at[n] = bytes;
    int32_t found[MAX_WORD_CHARS];
    int nf = 0;
    for (size_t start = 0; start < n;) {
        size_t end = n;
        int32_t id = -1;
        while (end > start) {
            /* a piece after the first is looked up as "##piece" */
            size_t l = e->at[end] - e->at[start];
            char key[2 + 4 * MAX_WORD_CHARS];
            key[0] = key[1] = '#';
            memcpy(key + 2, e->buf + e->at[start], l);
            id = start ? tq_wordpiece_id(e->wp, key, l + 2)
                       : tq_wordpiece_id(e->wp, key + 2, l);
            if (id >= 0)
                break;
            end--;
        }
        if (id < 0)
            return emit_id(e, e->wp->unk);
        found[nf++] = id;
        start = end;
    }
    for (int i = 0; i < nf; i++)
        if (emit_id(e, found[i]))
            return 1;
    return 0;
}

typedef struct scratch {
    cps clean, low, acc;
} scratch;

/* Basic tokenization and WordPiece of a stretch of text free of special
 * tokens; returns -1 out of memory, 1 when the ids are full, else 0. */
static int encode_plain(emit_ctx *ec, scratch *sc, const char *text, size_t len)
{
    const tq_wordpiece *wp = ec->wp;
    cps *cl = &sc->clean;
    cl->n = 0;
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        size_t used;
        uint32_t cp = tq_utf8_decode(s + i, len - i, &used);
        i += used;
        unsigned f = tq_uc_flags(cp);
        if (cp == 0 || cp == 0xFFFD || (f & TQ_UC_CTRL))
            continue;
        int bad = 0;
        if (f & TQ_UC_SPACE)
            bad = cps_push(cl, ' ');
        else if ((f & TQ_UC_CJK) && wp->opts.chinese_chars)
            bad = cps_push(cl, ' ') || cps_push(cl, cp) || cps_push(cl, ' ');
        else
            bad = cps_push(cl, cp);
        if (bad)
            return -1;
    }
    int strip = wp->opts.strip_accents < 0 ? wp->opts.lower_case : wp->opts.strip_accents;
    int full = 0;
    for (size_t i = 0; i < cl->n && !full;) {
        if (is_separator(cl->v[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < cl->n && !is_separator(cl->v[j]))
            j++;
        const uint32_t *tok = cl->v + i;
        size_t tn = j - i;
        i = j;
        if (strip) {
            sc->acc.n = 0;
            if (strip_accents(tok, tn, &sc->acc))
                return -1;
            tok = sc->acc.v;
            tn = sc->acc.n;
        }
        if (wp->opts.lower_case) {
            sc->low.n = 0;
            if (lower_token(tok, tn, &sc->low))
                return -1;
            tok = sc->low.v;
            tn = sc->low.n;
        }
        /* punctuation marks become words of their own */
        for (size_t a = 0; a < tn && !full;) {
            if (tq_uc_flags(tok[a]) & TQ_UC_PUNCT) {
                full = wordpiece_word(ec, tok + a, 1);
                a++;
                continue;
            }
            size_t b = a;
            while (b < tn && !(tq_uc_flags(tok[b]) & TQ_UC_PUNCT))
                b++;
            full = wordpiece_word(ec, tok + a, b - a);
            a = b;
        }
    }
    return full;
}

/* The special tokens BertTokenizer matches in the raw text, case-sensitively
 * and before any cleaning: "x[SEP]y" is x, [SEP], y; "[sep]" is three words. */
static const char *const specials[] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};

/* The special token starting text (its id, *l its length), or -1. */
static int32_t special_at(const tq_wordpiece *wp, const char *text, size_t len, size_t *l)
{
    for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
        size_t n = strlen(specials[k]);
        if (n <= len && !memcmp(text, specials[k], n)) {
            int32_t id = tq_wordpiece_id(wp, specials[k], n);
            if (id >= 0) {
                *l = n;
                return id;
            }
        }
    }
    return -1;
}

tq_status tq_wordpiece_encode(const tq_wordpiece *wp, const char *text, size_t len,
                              int32_t *ids, int max_len, int *n)
{
    if (max_len < 2)
        return tq_fail(TQ_ERR_USAGE, "wordpiece: max_len must be at least 2");
    scratch sc = {0};
    char buf[4 * MAX_WORD_CHARS + 4];
    size_t at[MAX_WORD_CHARS + 1];
    emit_ctx e = {wp, ids + 1, max_len - 2, 0, buf, at};
    int r = 0;
    size_t from = 0; /* start of the plain text not yet encoded */
    for (size_t i = 0; i < len && !r;) {
        const char *b = memchr(text + i, '[', len - i);
        if (!b)
            break;
        i = (size_t)(b - text);
        size_t l;
        int32_t id = special_at(wp, b, len - i, &l);
        if (id < 0) {
            i++;
            continue;
        }
        r = encode_plain(&e, &sc, text + from, i - from);
        if (!r)
            r = emit_id(&e, id);
        i += l;
        from = i;
    }
    if (!r)
        r = encode_plain(&e, &sc, text + from, len - from);
    free(sc.clean.v);
    free(sc.low.v);
    free(sc.acc.v);
    if (r < 0)
        return tq_fail(TQ_ERR_NOMEM, "out of memory tokenizing");
    ids[0] = wp->cls;
    ids[e.n + 1] = wp->sep;
    *n = e.n + 2;
    return TQ_OK;
}
