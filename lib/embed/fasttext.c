/* fasttext.c: sentence vectors of a fastText model, as `fasttext print-sentence-vectors`
 * computes them for one line: tokens, subword and word n-gram ids, row sums. */
#include "fasttext.h"
#include "../internal.h"

#include <math.h>
#include <stdatomic.h>

#define FT_NGRAM_MUL 116049371u
#define EOS "</s>"
#define LABEL "__label__"

/* Growable id list; one per worker call. */
typedef struct idbuf {
    int32_t *v;
    size_t n, cap;
    int oom;
} idbuf;

static void push(idbuf *b, int32_t id)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 256;
        int32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v) {
            b->oom = 1;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = id;
}

/* A bucket id becomes a row: after the words, through the pruned index if any. */
static void push_hash(const ft_model *m, idbuf *b, int32_t id)
{
    if (m->pruneidx_size == 0 || id < 0)
        return;
    if (m->pruneidx_size > 0) {
        int64_t lo = 0, hi = m->nprune;
        while (lo < hi) {
            int64_t mid = (lo + hi) / 2;
            if (m->prune_from[mid] < id)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == m->nprune || m->prune_from[lo] != id)
            return;
        id = m->prune_to[lo];
    }
    push(b, m->nwords + id);
}

/* Character n-grams (minn..maxn code points) of "<" word ">"; UTF-8 continuation
 * bytes never start an n-gram; 1-grams of the boundary markers are left out. */
static void subwords(const ft_model *m, idbuf *b, const char *w, size_t n)
{
    if (m->maxn <= 0 || m->bucket <= 0)
        return;
    char stack[256];
    size_t len = n + 2;
    char *s = len <= sizeof stack ? stack : malloc(len);
    if (!s) {
        b->oom = 1;
        return;
    }
    s[0] = '<';
    memcpy(s + 1, w, n);
    s[n + 1] = '>';
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)s[i] & 0xC0) == 0x80)
            continue;
        size_t j = i;
        for (int32_t k = 1; j < len && k <= m->maxn; k++) {
            j++;
            while (j < len && ((unsigned char)s[j] & 0xC0) == 0x80)
                j++;
            if (k >= m->minn && !(k == 1 && (i == 0 || j == len)))
                push_hash(m, b, (int32_t)(ft_hash(s + i, j - i) % (uint32_t)m->bucket));
        }
    }
    if (s != stack)
        free(s);
}

static void add_row(const ft_model *m, float *x, int32_t id)
{
    if (id < 0 || id >= m->rows)
        return;
    size_t d = (size_t)m->dim;
    if (!m->quant) {
        const unsigned char *r = m->dense + (size_t)id * d * 4;
        for (size_t j = 0; j < d; j++) {
            float v;
            memcpy(&v, r + 4 * j, 4); /* rows are not 4-byte aligned in the file */
            x[j] += v;
        }
        return;
    }
    float alpha = m->qnorm ? m->norm_centroids[m->norm_codes[id]] : 1.0f;
    const unsigned char *code = m->codes + (size_t)id * (size_t)m->nsubq;
    size_t ds = (size_t)m->dsub;
    for (int32_t q = 0; q < m->nsubq; q++) {
        const float *c;
        size_t n = ds;
        if (q == m->nsubq - 1) {
            n = (size_t)m->lastdsub;
            c = m->centroids + (size_t)q * 256 * ds + (size_t)code[q] * n;
        } else {
            c = m->centroids + ((size_t)q * 256 + code[q]) * ds;
        }
        float *y = x + (size_t)q * ds;
        for (size_t j = 0; j < n; j++)
            y[j] += alpha * c[j];
    }
}

static void scale(float *x, int32_t dim, float a)
{
    for (int32_t j = 0; j < dim; j++)
        x[j] *= a;
}

static int is_sep(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f' || c == '\0';
}

static int is_eos(const char *s, size_t n) { return n == 4 && !memcmp(s, EOS, 4); }

/* Supervised models: the mean of the input rows of every word id, subword id and
 * word n-gram id of the line, which ends with the end-of-sentence token. */
static void sentence_sup(const ft_model *m, const char *t, size_t len, idbuf *ids, idbuf *hs, float *out)
{
    ids->n = hs->n = 0;
    size_t i = 0;
    for (;;) {
        while (i < len && is_sep((unsigned char)t[i]) && t[i] != '\n')
            i++;
        const char *w;
        size_t n;
        if (i >= len || t[i] == '\n') {
            w = EOS; /* the line's end (fastText reads up to the newline) */
            n = 4;
        } else {
            size_t s = i;
            while (i < len && !is_sep((unsigned char)t[i]))
                i++;
            w = t + s;
            n = i - s;
        }
        uint32_t h = ft_hash(w, n);
        int32_t wid = ft_lookup(m, w, n, h);
        int type = wid >= 0 ? m->wtype[wid] : (n >= 9 && !memcmp(w, LABEL, 9)) ? FT_LABEL : FT_WORD;
        if (type == FT_WORD) {
            if (wid >= 0)
                push(ids, wid);
            if (!is_eos(w, n))
                subwords(m, ids, w, n);
            push(hs, (int32_t)h);
        }
        if (is_eos(w, n))
            break;
    }
    for (size_t a = 0; a < hs->n; a++) {
        uint64_t h = (uint64_t)(int64_t)hs->v[a];
        for (size_t b = a + 1; b < hs->n && b < a + (size_t)(m->word_ngrams > 0 ? m->word_ngrams : 0); b++) {
            h = h * FT_NGRAM_MUL + (uint64_t)(int64_t)hs->v[b];
            if (m->bucket > 0)
                push_hash(m, ids, (int32_t)(h % (uint64_t)m->bucket));
        }
    }
    memset(out, 0, (size_t)m->dim * sizeof *out);
    for (size_t a = 0; a < ids->n; a++)
        add_row(m, out, ids->v[a]);
    if (ids->n)
        scale(out, m->dim, (float)(1.0 / (double)ids->n));
}

/* Unsupervised models: the mean of the unit-length word vectors (each the mean
 * of its rows) over the words whose vector is not zero; no end-of-sentence. */
static void sentence_unsup(const ft_model *m, const char *t, size_t len, idbuf *ids, float *vec, float *out)
{
    const char *nl = memchr(t, '\n', len);
    if (nl)
        len = (size_t)(nl - t);
    memset(out, 0, (size_t)m->dim * sizeof *out);
    int32_t count = 0;
    size_t i = 0;
    for (;;) {
        while (i < len && is_sep((unsigned char)t[i]) && t[i] != '\0')
            i++;
        if (i >= len)
            break;
        size_t s = i;
        while (i < len && (!is_sep((unsigned char)t[i]) || t[i] == '\0'))
            i++;
        const char *w = t + s;
        size_t n = i - s;
        ids->n = 0;
        int32_t wid = ft_lookup(m, w, n, ft_hash(w, n));
        if (wid >= 0)
            push(ids, wid);
        if (!is_eos(w, n))
            subwords(m, ids, w, n);
        memset(vec, 0, (size_t)m->dim * sizeof *vec);
        for (size_t a = 0; a < ids->n; a++)
            add_row(m, vec, ids->v[a]);
        if (ids->n)
            scale(vec, m->dim, (float)(1.0 / (double)ids->n));
        float ss = 0;
        for (int32_t j = 0; j < m->dim; j++)
            ss += vec[j] * vec[j];
        float norm = sqrtf(ss);
        if (norm > 0) {
            scale(vec, m->dim, (float)(1.0 / norm));
            for (int32_t j = 0; j < m->dim; j++)
                out[j] += vec[j];
            count++;
        }
    }
    if (count)
        scale(out, m->dim, (float)(1.0 / count));
}

typedef struct job {
    const ft_model *m;
    const char *const *text;
    const size_t *len;
    float *out;
    atomic_int oom;
} job;

static void run_range(void *ctx, int64_t begin, int64_t end)
{
    job *j = ctx;
    const ft_model *m = j->m;
    idbuf ids = {0}, hs = {0};
    float *vec = malloc((size_t)m->dim * sizeof *vec);
    for (int64_t r = begin; r < end; r++) {
        float *o = j->out + r * m->dim;
        if (!vec) {
            ids.oom = 1;
            break;
        }
        if (m->model == FT_MODEL_SUP)
            sentence_sup(m, j->text[r], j->len[r], &ids, &hs, o);
        else
            sentence_unsup(m, j->text[r], j->len[r], &ids, vec, o);
        if (ids.oom || hs.oom)
            break;
    }
    if (ids.oom || hs.oom)
        atomic_store(&j->oom, 1);
    free(ids.v);
    free(hs.v);
    free(vec);
}

static tq_status ft_run(tq_embedder *e, int64_t n, const char *const *text, const size_t *len, float *out)
{
    job j = {(const ft_model *)e, text, len, out, 0};
    tq_parallel_for(n, 16, run_range, &j);
    if (atomic_load(&j.oom))
        return tq_fail(TQ_ERR_NOMEM, "%s: out of memory", e->describe);
    return TQ_OK;
}

static void ft_close(tq_embedder *e)
{
    ft_model_free((ft_model *)e);
    free(e);
}

static const tq_embedder_ops ft_ops = {ft_run, ft_close};

tq_status tq_embed_fasttext_open(const char *path, tq_embedder **e)
{
    *e = NULL;
    ft_model *m = calloc(1, sizeof *m);
    if (!m)
        return tq_fail(TQ_ERR_NOMEM, "%s: out of memory", path);
    tq_status st = ft_model_load(m, path);
    if (st) {
        ft_model_free(m);
        free(m);
        return st;
    }
    m->base.ops = &ft_ops;
    m->base.dim = m->dim;
    snprintf(m->base.describe, sizeof m->base.describe, "fasttext:%s", path);
    *e = &m->base;
    return TQ_OK;
}
