/* bert.c: the BERT-family sentence encoder as an embedder: tokenizes a batch
 * (the prompt before each text; texts past the window cut, or split into
 * overlapping windows whose pooled vectors are averaged), sorts it by length
 * so that sub-batches waste little on padding, runs the encoder, pools as the
 * Pooling module says, then the Dense modules and Normalize; rows come back
 * in input order. */
#include "bert.h"
#include "internal.h"

#include <math.h>
#include <sys/stat.h>

/* Padded tokens per forward call: bounds the scratch memory, and the
 * attention scores ([b, len, len]) with it. */
#define TOKEN_BUDGET 8192
#define MAX_SUB_BATCH 64
/* What one more sub-batch costs, in tokens of work: on the CPU its ~110 ops'
 * hand-offs to the threads (~1.5 ms, ~7 tokens) and smaller products; on a
 * device with graphs a graph of its own for each new shape, so there large
 * sub-batches win. */
#define SPLIT_COST_CPU 32
#define SPLIT_COST_GRAPHS 2048

typedef struct bert_embedder {
    tq_embedder base;
    bert_model *m;
    tq_tokenizer *tok;
    char *prompt;    /* put before every text, or NULL */
    size_t prompt_n;
    int skip;        /* tokens the pooling leaves out: the prompt's, with include_prompt off */
    int chunk;       /* texts past the window: embedded in windows */
    /* the special tokens the tokenizer puts around a text's pieces: before
     * ([CLS], <s>) and after ([SEP], </s>); a window of a long text keeps
     * them and cuts the pieces */
    int head, tail;
} bert_embedder;

typedef struct doc {
    int64_t i; /* its row of pooled vectors (a text's, or a window's) */
    int n;     /* tokens */
    int skip;  /* its first tokens left out of the pooling (a prompt's) */
    int32_t *ids;
} doc;

static int by_len(const void *a, const void *b)
{
    const doc *x = a, *y = b;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The sizes of the sub-batches of n documents sorted by length, each padded
 * to its last one's length, that cost the least: padded tokens plus
 * split_cost a sub-batch, at most MAX_SUB_BATCH documents and TOKEN_BUDGET
 * padded tokens each (or one document). Dynamic programming over the sorted
 * lengths, O(n MAX_SUB_BATCH); a greedy cut (64 documents at a time) padded
 * 2000 short sentences in batches of 256 by 12%, this by 2.5%. Into size[],
 * returns their count; -1 when out of memory. */
static int64_t plan_sub_batches(const doc *d, int64_t n, int64_t split_cost, int64_t *size)
{
    int64_t *cost = malloc((size_t)(n + 1) * sizeof *cost);
    int64_t *from = malloc((size_t)(n + 1) * sizeof *from);
    if (!cost || !from) {
        free(cost);
        free(from);
        return -1;
    }
    cost[0] = 0;
    for (int64_t i = 1; i <= n; i++) { /* the best cut of d[0..i): last sub-batch d[j..i) */
        cost[i] = -1;
        for (int64_t k = 1; k <= i && k <= MAX_SUB_BATCH; k++) {
            int64_t pad = k * d[i - 1].n;
            if (k > 1 && pad > TOKEN_BUDGET)
                break;
            int64_t c = cost[i - k] + pad + split_cost;
            if (cost[i] < 0 || c < cost[i]) /* ties: the smaller last sub-batch */
                cost[i] = c, from[i] = i - k;
        }
    }
    int64_t count = 0;
    for (int64_t i = n; i > 0; i = from[i])
        count++;
    int64_t at = count;
    for (int64_t i = n; i > 0; i = from[i])
        size[--at] = i - from[i];
    free(cost);
    free(from);
    return count;
}

/* Runs docs[0..nd), all padded to the last one's length (they are sorted). */
static tq_status sub_batch(bert_embedder *be, doc *docs, int64_t nd, float *out)
{
    const bert_config *c = &be->m->cfg;
    int64_t len = docs[nd - 1].n, H = c->hidden;
    int64_t *ids = calloc((size_t)(nd * len), sizeof *ids);
    int *lens = malloc((size_t)nd * sizeof *lens);
    float *hs = malloc((size_t)(nd * len * H) * sizeof *hs);
    tq_status st = TQ_OK;
    if (!ids || !lens || !hs)
        st = tq_fail(TQ_ERR_NOMEM, "bert: out of memory for a batch");
    for (int64_t i = 0; !st && i < nd; i++) {
        lens[i] = docs[i].n;
        for (int t = 0; t < docs[i].n; t++)
            ids[i * len + t] = docs[i].ids[t]; /* padding stays 0: masked anyway */
    }
    if (!st)
        st = tq_bert_forward(be->m, nd, len, ids, NULL, lens, hs);
    for (int64_t i = 0; !st && i < nd; i++)
        tq_bert_pool(c, hs + i * len * H, docs[i].n, docs[i].skip, out + docs[i].i * c->pooled);
    free(ids);
    free(lens);
    free(hs);
    return st;
}

/* Text i with the prompt before it: the text itself when there is none. */
static const char *prompted(const bert_embedder *be, const char *t, size_t n, char **buf,
                            size_t *len)
{
    *len = n;
    if (!be->prompt)
        return t;
    if (!(*buf = malloc(be->prompt_n + n + 1)))
        return NULL;
    memcpy(*buf, be->prompt, be->prompt_n);
    memcpy(*buf + be->prompt_n, t, n);
    *len = be->prompt_n + n;
    return *buf;
}

/* A text's ids cut to the window (ids has room for it), as the tokenizer cuts. */
static tq_status encode_cut(bert_embedder *be, const char *t, size_t n, int32_t *ids, int *got,
                            int *cut)
{
    return tq_tokenizer_encode(be->tok, t, n, ids, be->m->cfg.max_seq, got, cut);
}

/* All of a text's ids, uncut, into *full (malloc'd), *nf of them. */
static tq_status encode_all(bert_embedder *be, const char *t, size_t tn, int32_t **full, int *nf)
{
    /* a byte-level or Metaspace tokenizer may give a bit more than a token
     * a byte: room for two, grown until nothing is cut */
    size_t room = 2 * tn + 16;
    for (;;) {
        if (room > (size_t)1 << 30)
            return tq_fail(TQ_ERR_DATA, "bert: a text of %zu bytes is too long to embed whole", tn);
        int cut = 0;
        free(*full);
        if (!(*full = malloc(room * sizeof **full)))
            return tq_fail(TQ_ERR_NOMEM, "bert: out of memory for windows");
        tq_status st = tq_tokenizer_encode(be->tok, t, tn, *full, (int)room, nf, &cut);
        if (st || !cut)
            return st;
        room *= 2;
    }
}

/* Appends a document of n ids (copied) as row *used of the pooled vectors. */
static tq_status push(doc **d, int64_t *used, int64_t *cap, const int32_t *ids, int n,
                      int skip)
{
    if (*used == *cap) {
        int64_t nc = *cap * 2 + 16;
        doc *more = realloc(*d, (size_t)nc * sizeof *more);
        if (!more)
            return tq_fail(TQ_ERR_NOMEM, "bert: out of memory for documents");
        *d = more;
        *cap = nc;
    }
    doc *x = &(*d)[*used];
    if (!(x->ids = malloc((size_t)(n + 1) * sizeof *x->ids)))
        return tq_fail(TQ_ERR_NOMEM, "bert: out of memory for documents");
    memcpy(x->ids, ids, (size_t)n * sizeof *ids);
    x->n = n;
    x->skip = skip;
    x->i = (*used)++;
    return TQ_OK;
}

static void docs_free(doc *d, int64_t n)
{
    for (int64_t i = 0; d && i < n; i++)
        free(d[i].ids);
    free(d);
}

/* A long text as windows of the window's size that overlap by a quarter,
 * each with the specials around its pieces; *win gets their count. */
static tq_status windows(bert_embedder *be, const char *t, size_t tn, doc **d, int64_t *used,
                         int64_t *cap, int *win)
{
    int w = be->m->cfg.max_seq, body = w - be->head - be->tail;
    int stride = body - body / 4 > 0 ? body - body / 4 : 1;
    int32_t *full = NULL, *o = malloc((size_t)w * sizeof *o);
    int nf = 0;
    tq_status st = o ? encode_all(be, t, tn, &full, &nf)
                     : tq_fail(TQ_ERR_NOMEM, "bert: out of memory for windows");
    int pieces = nf - be->head - be->tail;
    *win = 0;
    for (int at = 0; !st && (at == 0 || at + body - stride < pieces); at += stride) {
        int np = pieces - at < body ? pieces - at : body;
        memcpy(o, full, be->head * sizeof *o);
        memcpy(o + be->head, full + be->head + at, (size_t)np * sizeof *o);
        memcpy(o + be->head + np, full + nf - be->tail, be->tail * sizeof *o);
        /* (the prompt starts the text: its first window's) */
        if (!(st = push(d, used, cap, o, be->head + np + be->tail, at ? 0 : be->skip)))
            ++*win;
    }
    be->base.windows += *win;
    free(full);
    free(o);
    return st;
}

/* The documents the encoder runs: a text each, cut to the window, or with
 * chunk a long text's windows; win[i]: text i's documents (in order). */
static tq_status tokenize(bert_embedder *be, int64_t n, const char *const *text,
                          const size_t *len, doc **d, int64_t *nd, int *win)
{
    int w = be->m->cfg.max_seq;
    int64_t cap = 0;
    int32_t *ids = malloc((size_t)(w + 1) * sizeof *ids);
    tq_status st = ids ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "bert: out of memory");
    *d = NULL;
    *nd = 0;
    for (int64_t i = 0; !st && i < n; i++) {
        char *buf = NULL;
        size_t tn;
        const char *t = prompted(be, text[i], len[i], &buf, &tn);
        int got = 0, cut = 0;
        st = t ? encode_cut(be, t, tn, ids, &got, &cut)
               : tq_fail(TQ_ERR_NOMEM, "bert: out of memory");
        win[i] = 1;
        be->base.texts_long += cut;
        if (!st && cut && be->chunk)
            st = windows(be, t, tn, d, nd, &cap, &win[i]);
        else if (!st)
            st = push(d, nd, &cap, ids, got, be->skip);
        free(buf);
    }
    free(ids);
    if (st) {
        docs_free(*d, *nd);
        *d = NULL;
    }
    return st;
}

/* Each text's pooled row: its document's, or the mean of its windows'. */
static void gather_windows(const bert_config *c, int64_t n, const int *win, const float *rows,
                           float *pooled)
{
    int64_t P = c->pooled, at = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t d = 0; d < P; d++) {
            double v = 0;
            for (int k = 0; k < win[i]; k++)
                v += rows[(at + k) * P + d];
            pooled[i * P + d] = (float)(v / win[i]);
        }
        at += win[i];
    }
}

static tq_status run(tq_embedder *e, int64_t n, const char *const *text, const size_t *len,
                     float *out)
{
    bert_embedder *be = (bert_embedder *)e;
    const bert_config *c = &be->m->cfg;
    if (n <= 0)
        return TQ_OK;
    doc *d = NULL;
    int64_t nd = 0, *size = NULL, count = 0;
    int *win = malloc((size_t)n * sizeof *win);
    float *rows = NULL, *pooled = NULL;
    tq_status st = win ? tokenize(be, n, text, len, &d, &nd, win)
                       : tq_fail(TQ_ERR_NOMEM, "bert: out of memory for %lld documents",
                                 (long long)n);
    if (!st) {
        rows = malloc((size_t)(nd * c->pooled) * sizeof *rows);
        pooled = nd > n ? malloc((size_t)(n * c->pooled) * sizeof *pooled) : rows;
        qsort(d, (size_t)nd, sizeof *d, by_len);
        size = malloc((size_t)nd * sizeof *size);
        int64_t split_cost = be->m->plans ? SPLIT_COST_GRAPHS : SPLIT_COST_CPU;
        count = size ? plan_sub_batches(d, nd, split_cost, size) : -1;
        if (count < 0 || !rows || !pooled)
            st = tq_fail(TQ_ERR_NOMEM, "bert: out of memory for %lld documents", (long long)n);
    }
    for (int64_t s = 0, b = 0; !st && s < count; b += size[s++])
        st = sub_batch(be, d + b, size[s], rows);
    if (!st && nd > n)
        gather_windows(c, n, win, rows, pooled);
    if (!st)
        st = tq_bert_head(be->m, n, pooled, out);
    if (pooled != rows)
        free(pooled);
    free(rows);
    free(size);
    docs_free(d, nd);
    free(win);
    return st;
}

static void close_bert(tq_embedder *e)
{
    bert_embedder *be = (bert_embedder *)e;
    tq_bert_model_free(be->m);
    tq_tokenizer_free(be->tok);
    free(be->prompt);
    free(be);
}

static const tq_embedder_ops bert_ops = {run, close_bert};

/* The prompt from the options or the folder's config, and how many of its
 * tokens the pooling leaves out: the prompt alone encoded, less its [SEP]
 * (sentence-transformers' prompt length), when include_prompt is off. */
static tq_status set_prompt(bert_embedder *be, const char *path, const tq_embed_opts *o)
{
    tq_status st = TQ_OK;
    if (o->prompt)
        be->prompt = strdup(o->prompt);
    else if ((st = tq_bert_prompt(path, o->prompt_name, &be->prompt)))
        return st;
    if (!be->prompt) {
        if (o->prompt)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        return TQ_OK;
    }
    be->prompt_n = strlen(be->prompt);
    if (be->m->cfg.include_prompt)
        return TQ_OK;
    int w = be->m->cfg.max_seq, got = 0, cut = 0;
    int32_t *ids = malloc((size_t)(w + 1) * sizeof *ids);
    if (!ids)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    st = encode_cut(be, be->prompt, be->prompt_n, ids, &got, &cut);
    be->skip = got - (be->tail > 0); /* (sentence-transformers drops one special) */
    free(ids);
    return st;
}

static int is_file(const char *dir, const char *name)
{
    char p[4096];
    struct stat sb;
    return (size_t)snprintf(p, sizeof p, "%s/%s", dir, name) < sizeof p && !stat(p, &sb) &&
           S_ISREG(sb.st_mode);
}

/* Whether the folder's int8 products are to be loaded (*stored): it has
 * tq-quantize --model's file, and no --precision, or int8, was asked. Other
 * precisions need the f32 weights, which such a folder lacks: a usage error
 * (the folder is as tq-quantize made it; the option asks what it cannot give). */
static tq_status int8_folder(bert_embedder *be, const bert_config *cfg, tq_device *dev,
                             const tq_embed_opts *o, int *stored)
{
    *stored = 0;
    if (!is_file(cfg->model_dir, TQ_BERT_INT8_FILE))
        return TQ_OK;
    tq_dtype asked = o->prec_asked ? o->prec_asked : o->prec;
    if (!o->prec_default && asked != TQ_DTYPE_I8) {
        if (is_file(cfg->model_dir, "model.safetensors"))
            return TQ_OK;
        return tq_fail(TQ_ERR_USAGE, "%s: an int8 folder of tq-quantize --model has no f32 "
                       "weights for --precision %s: leave --precision out (int8), or use the "
                       "folder it was made from", cfg->model_dir, tq_dtype_name(asked));
    }
    *stored = 1;
    snprintf(be->base.note, sizeof be->base.note,
             "int8 products loaded from %s/%s (tq-quantize --model), not calibrated%s",
             cfg->model_dir, TQ_BERT_INT8_FILE,
             tq_device_native_product(dev, TQ_DTYPE_I8) ? ""
                                  : "; this CPU has no AVX512-VNNI: the portable integer loop "
                                    "(the same sums, slower)");
    return TQ_OK;
}

tq_status tq_embed_bert_open(const char *path, tq_device *dev, const tq_embed_opts *o,
                             tq_embedder **out)
{
    tq_dtype prec = o->prec;
    if (!dev)
        return tq_fail(TQ_ERR_USAGE, "%s: a BERT model needs a device", path);
    bert_embedder *be = calloc(1, sizeof *be);
    if (!be)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    be->base.ops = &bert_ops;
    bert_config cfg;
    tq_status st = tq_bert_config_load(path, &cfg);
    if (st) {
        free(be);
        return st;
    }
    /* tokenizer.json when the folder has one, else vocab.txt */
    st = tq_tokenizer_open(cfg.model_dir, &cfg.wp, &be->tok);
    if (!st && tq_tokenizer_vocab_size(be->tok) > cfg.vocab)
        st = tq_fail(TQ_ERR_DATA, "%s/%s: %lld tokens, more than vocab_size %lld",
                     cfg.model_dir, tq_tokenizer_source(be->tok),
                     (long long)tq_tokenizer_vocab_size(be->tok), (long long)cfg.vocab);
    if (st) {
        tq_bert_config_free(&cfg);
        close_bert(&be->base);
        return st;
    }
    /* a folder of tq-quantize --model: its int8 products as stored, no
     * calibration; int8 folders have no f32 weights (unless one was put back) */
    int stored = 0;
    if (!st)
        st = int8_folder(be, &cfg, dev, o, &stored);
    if (st) {
        tq_bert_config_free(&cfg);
        close_bert(&be->base);
        return st;
    }
    /* int8 otherwise: the f32 model first, which calibrates the int8 one */
    cfg.prec = stored ? TQ_DTYPE_I8 : prec == TQ_DTYPE_I8 ? TQ_DTYPE_F32 : prec;
    st = tq_bert_model_load(&cfg, dev, &be->m);
    if (!st && prec == TQ_DTYPE_I8 && !stored)
        st = tq_bert_int8(be->m, be->tok);
    if (st) {
        close_bert(&be->base);
        return st;
    }
    /* the specials around a text: those of the empty text, [CLS] (or
     * <s>) first, the rest after */
    int32_t sp[16];
    int nsp = 0, cut = 0;
    if (!st)
        st = tq_tokenizer_encode(be->tok, "", 0, sp, 16, &nsp, &cut);
    be->head = nsp > 0;
    be->tail = nsp - be->head;
    if (st || (st = set_prompt(be, path, o))) {
        close_bert(&be->base);
        return st;
    }
    be->chunk = o->on_long == TQ_LONG_CHUNK;
    be->base.dim = be->m->cfg.dim;
    be->base.window = be->m->cfg.max_seq;
    snprintf(be->base.tokenizer, sizeof be->base.tokenizer, "%s", tq_tokenizer_source(be->tok));
    snprintf(be->base.describe, sizeof be->base.describe, "bert:%s", path);
    *out = &be->base;
    return TQ_OK;
}
