/* hash.c: the feature-hashing embedder hash:DIM, exactly as man/tq-embed.1
 * specifies it (words, word bigrams, character 3- to 5-grams, FNV-1a 64,
 * sublinear tf, L2 norm): the spec is the contract, this is one reading of it. */
#include "embed.h"
#include "../internal.h"

#include <math.h>
#include <stdlib.h>

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME 1099511628211ull
#define HASH_MAX_DIM 65536

enum { K_WORD, K_BIGRAM, K_NGRAM };
static const double kind_weight[3] = {1.0, 1.0, 0.5};
static const double sign_of[2] = {1.0, -1.0};

typedef struct hash_embedder {
    tq_embedder base;
} hash_embedder;

/* One distinct feature of a document, in first-seen order: tf is counted per
 * 64-bit hash. */
typedef struct feat {
    uint64_t h;
    uint32_t count;
    uint16_t kind;
    uint32_t slot;
} feat;

/* Per-chunk scratch: no allocation per feature or per document. The hash
 * table holds 1 + an index into feats (0: empty), small enough for L1. */
typedef struct scratch {
    uint32_t *tab;
    feat *feats;
    size_t cap, used;
    double *acc;
    uint32_t *touched; /* buckets written, to reset acc without a sweep */
    unsigned char *mark;
    size_t ntouched;
    unsigned char *word;        /* "<" word ">" */
    uint64_t bigram_h;          /* FNV-1a state after "B", previous word, " " */
    uint32_t *cps;              /* byte offset of each code point of word */
    size_t wcap, wlen, ncp;
    int have_prev;
    uint64_t dim_m; /* fastmod multiplier of dim */
    int oom;
} scratch;

/* a % d for 32-bit a and d, exact, without a division (Lemire, Kaser, Kurz 2019). */
static inline uint32_t fastmod(uint32_t a, uint64_t m, uint32_t d)
{
    return (uint32_t)(((unsigned __int128)(m * a) * d) >> 64);
}

static inline uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * FNV_PRIME;
    return h;
}

/* MurmurHash3's 64-bit finalizer: FNV-1a alone leaves its high bits, which
 * pick the bucket, poorly mixed by the last bytes of a key. */
static inline uint64_t fmix64(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 33;
    return h;
}

/* h is already mixed: its low bits (the bucket uses the high ones) index the table. */
static inline size_t slot_of(uint64_t h, size_t mask) { return (size_t)h & mask; }

static int table_grow(scratch *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 4096;
    uint32_t *nt = calloc(ncap, sizeof *nt);
    feat *nf = realloc(s->feats, ncap / 2 * sizeof *nf);
    if (nf)
        s->feats = nf;
    if (!nt || !nf) {
        free(nt);
        return -1;
    }
    for (size_t i = 0; i < s->used; i++) {
        size_t j = slot_of(nf[i].h, ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = (uint32_t)i + 1;
        nf[i].slot = (uint32_t)j;
    }
    free(s->tab);
    s->tab = nt, s->cap = ncap;
    return 0;
}

static inline void feature(scratch *s, uint64_t h, uint32_t kind)
{
    h = fmix64(h);
    if (s->used + 1 > s->cap / 2 && table_grow(s)) {
        s->oom = 1;
        return;
    }
    uint32_t *tab = s->tab;
    feat *f = s->feats;
    size_t mask = s->cap - 1, j = slot_of(h, mask);
    for (uint32_t k; (k = tab[j]); j = (j + 1) & mask)
        if (f[k - 1].h == h) {
            f[k - 1].count++;
            return;
        }
    tab[j] = (uint32_t)++s->used;
    f[s->used - 1] = (feat){h, 1, (uint16_t)kind, (uint32_t)j};
}

/* The word in s->word (with its markers) is complete: its features. */
static void word_done(scratch *s)
{
    const unsigned char *w = s->word + 1;
    size_t wl = s->wlen - 2;
    uint64_t hw = fnv(FNV_OFFSET, (const unsigned char *)"W", 1);
    feature(s, fnv(hw, w, wl), K_WORD);
    if (s->have_prev)
        feature(s, fnv(s->bigram_h, w, wl), K_BIGRAM);
    uint64_t hc0 = fnv(FNV_OFFSET, (const unsigned char *)"C", 1);
    for (size_t i = 0; i + 3 <= s->ncp; i++) {
        uint64_t h = fnv(hc0, s->word + s->cps[i], s->cps[i + 3] - s->cps[i]);
        feature(s, h, K_NGRAM);
        for (size_t n = 4; n <= 5 && i + n <= s->ncp; n++) {
            h = fnv(h, s->word + s->cps[i + n - 1], s->cps[i + n] - s->cps[i + n - 1]);
            feature(s, h, K_NGRAM);
        }
    }
    /* the next word's bigram starts with "B", this word and a space */
    s->bigram_h = fnv(fnv(fnv(FNV_OFFSET, (const unsigned char *)"B", 1), w, wl),
                      (const unsigned char *)" ", 1);
    s->have_prev = 1;
}

/* Decodes one strict UTF-8 code point; returns its length, or 0 if p does not
 * start a valid sequence. */
static size_t utf8_cp(const unsigned char *p, size_t n, uint32_t *cp)
{
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

static int is_word_cp(uint32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
    if (c <= 0xBF || c == 0xD7 || c == 0xF7)
        return 0;
    if ((c >= 0x2000 && c <= 0x206F) || (c >= 0x3000 && c <= 0x303F))
        return 0;
    if (c >= 0xFF00 && ((c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20) ||
                        (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65) ||
                        (c >= 0xFFF0 && c <= 0xFFFF)))
        return 0;
    return 1;
}

static int word_reserve(scratch *s, size_t need)
{
    if (need <= s->wcap)
        return 0;
    size_t nc = s->wcap ? s->wcap : 256;
    while (nc < need)
        nc *= 2;
    unsigned char *w = realloc(s->word, nc);
    if (w)
        s->word = w;
    uint32_t *c = realloc(s->cps, (nc + 1) * sizeof *c);
    if (c)
        s->cps = c;
    if (!w || !c)
        return -1;
    s->wcap = nc;
    return 0;
}

static void embed_one(scratch *s, int64_t dim, const unsigned char *t, size_t n, float *out)
{
    s->used = 0;
    s->have_prev = 0;
    s->wlen = 0;
    for (size_t i = 0; i <= n && !s->oom;) {
        uint32_t cp = 0;
        size_t l = i < n ? utf8_cp(t + i, n - i, &cp) : 0;
        if (l && is_word_cp(cp)) {
            if (!s->wlen) {
                s->word[0] = '<';
                s->cps[0] = 0;
                s->wlen = 1, s->ncp = 1;
            }
            if (word_reserve(s, s->wlen + l + 2)) {
                s->oom = 1;
                break;
            }
            s->cps[s->ncp++] = (uint32_t)s->wlen;
            for (size_t k = 0; k < l; k++) {
                unsigned char b = t[i + k];
                s->word[s->wlen++] = (b >= 'A' && b <= 'Z') ? b + 32 : b;
            }
        } else if (s->wlen) {
            s->cps[s->ncp++] = (uint32_t)s->wlen;
            s->word[s->wlen++] = '>';
            s->cps[s->ncp] = (uint32_t)s->wlen;
            word_done(s);
            s->wlen = 0;
        }
        i += l ? l : 1;
    }
    memset(out, 0, (size_t)dim * sizeof *out);
    s->ntouched = 0;
    for (size_t i = 0; i < s->used; i++) {
        feat *e = &s->feats[i];
        uint32_t b = fastmod((uint32_t)(e->h >> 32), s->dim_m, (uint32_t)dim);
        double v = kind_weight[e->kind];
        if (e->count > 1) /* most features occur once: spare the log */
            v *= 1.0 + log((double)e->count);
        /* branch-free: signs and first touches are coin flips to a predictor */
        s->acc[b] += v * sign_of[e->h >> 31 & 1];
        s->touched[s->ntouched] = b;
        s->ntouched += !s->mark[b];
        s->mark[b] = 1;
        s->tab[e->slot] = 0;
    }
    double ss = 0;
    for (size_t i = 0; i < s->ntouched; i++)
        ss += s->acc[s->touched[i]] * s->acc[s->touched[i]];
    double norm = sqrt(ss);
    for (size_t i = 0; i < s->ntouched; i++) {
        uint32_t b = s->touched[i];
        if (norm > 0)
            out[b] = (float)(s->acc[b] / norm);
        s->acc[b] = 0;
        s->mark[b] = 0;
    }
}

typedef struct job {
    int64_t dim;
    const char *const *text;
    const size_t *len;
    float *out;
    int failed;
} job;

static void run_range(void *ctx, int64_t b, int64_t e)
{
    job *j = ctx;
    scratch s = {0};
    s.dim_m = UINT64_MAX / (uint64_t)j->dim + 1;
    s.acc = calloc((size_t)j->dim, sizeof *s.acc);
    s.touched = malloc(((size_t)j->dim + 1) * sizeof *s.touched); /* +1: branch-free append */
    s.mark = calloc((size_t)j->dim, 1);
    if (!s.acc || !s.touched || !s.mark || table_grow(&s) || word_reserve(&s, 256))
        s.oom = 1;
    for (int64_t i = b; i < e && !s.oom; i++)
        embed_one(&s, j->dim, (const unsigned char *)j->text[i], j->len[i],
                  j->out + i * j->dim);
    if (s.oom)
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    free(s.acc), free(s.touched), free(s.mark), free(s.tab), free(s.feats);
    free(s.word), free(s.cps);
}

static tq_status hash_run(tq_embedder *e, int64_t n, const char *const *text,
                          const size_t *len, float *out)
{
    job j = {e->dim, text, len, out, 0};
    tq_parallel_for(n, 16, run_range, &j);
    return j.failed ? tq_fail(TQ_ERR_NOMEM, "hash embedder: out of memory") : TQ_OK;
}

static void hash_close(tq_embedder *e) { free(e); }

static const tq_embedder_ops hash_ops = {hash_run, hash_close};

tq_status tq_embed_hash_open(const char *args, tq_embedder **e)
{
    long dim = 384;
    if (args && *args) {
        dim = 0;
        for (const char *p = args; *p; p++) {
            if (*p < '0' || *p > '9' || dim > HASH_MAX_DIM)
                return tq_fail(TQ_ERR_USAGE, "hash:%s: DIM must be a number 1..%d", args,
                               HASH_MAX_DIM);
            dim = dim * 10 + (*p - '0');
        }
    }
    if (dim < 1 || dim > HASH_MAX_DIM)
        return tq_fail(TQ_ERR_USAGE, "hash:%s: DIM must be a number 1..%d", args ? args : "",
                       HASH_MAX_DIM);
    hash_embedder *h = calloc(1, sizeof *h);
    if (!h)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    h->base.ops = &hash_ops;
    h->base.dim = dim;
    snprintf(h->base.describe, sizeof h->base.describe, "hash:%ld", dim);
    *e = &h->base;
    return TQ_OK;
}
