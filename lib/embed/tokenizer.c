/* tokenizer.c: one interface over tokenizer.json and vocab.txt: the text's
 * own ids (tok_json.c or wordpiece.c), cut as the tokenizers library cuts
 * (longest_first, right side, room kept for the special tokens), then the
 * post-processor's template around them. */
#include "tokenizer.h"
#include "tok.h"
#include "../internal.h"

#include <sys/stat.h>

struct tq_tokenizer {
    tok_json *j;          /* tokenizer.json, or NULL */
    tq_wordpiece *wp;     /* vocab.txt, or NULL */
    tok_tpl *single, *pair;
    size_t nsingle, npair;
    int32_t pad;
    int64_t vocab_size;
    int max_length;
    int json_file;        /* t->j came from tokenizer.json, not vocab.txt */
};

static tq_status vocab_txt(tq_tokenizer *t, const char *dir, const tq_wordpiece_opts *o)
{
    char *p = malloc(strlen(dir) + 16);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    sprintf(p, "%s/vocab.txt", dir);
    tq_status st = tq_wordpiece_load(p, o, &t->wp);
    free(p);
    if (st)
        return st;
    t->vocab_size = tq_wordpiece_vocab_size(t->wp);
    t->pad = tq_wordpiece_id(t->wp, "[PAD]", 5);
    /* BertTokenizer's templates: [CLS] A [SEP], and [CLS] A [SEP] B [SEP] */
    int32_t cls = tq_wordpiece_id(t->wp, "[CLS]", 5), sep = tq_wordpiece_id(t->wp, "[SEP]", 5);
    t->single = calloc(3, sizeof *t->single);
    t->pair = calloc(5, sizeof *t->pair);
    if (!t->single || !t->pair)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    int32_t ids[5] = {cls, -1, sep, -1, sep}, seq[5] = {-1, 0, -1, 1, -1};
    for (int i = 0; i < 5; i++) {
        tok_tpl *e = &t->pair[i];
        e->seq = seq[i];
        e->type_id = i >= 3;
        if (seq[i] < 0) {
            if (!(e->ids = malloc(sizeof *e->ids)))
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            e->ids[0] = ids[i];
            e->nids = 1;
        }
        if (i < 3) {
            t->single[i] = *e;
            t->single[i].ids = NULL;
            if (e->nids && !(t->single[i].ids = malloc(sizeof *e->ids)))
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            if (e->nids)
                t->single[i].ids[0] = ids[i];
        }
    }
    t->nsingle = 3;
    t->npair = 5;
    return TQ_OK;
}

tq_status tq_tokenizer_open(const char *dir, const tq_wordpiece_opts *o, tq_tokenizer **out)
{
    tq_tokenizer *t = calloc(1, sizeof *t);
    char *p = malloc(strlen(dir) + 20);
    tq_status st = TQ_OK;
    if (!t || !p) {
        free(t);
        free(p);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    sprintf(p, "%s/tokenizer.json", dir);
    struct stat sb;
    int used = 1, json = stat(p, &sb) == 0;
    if (!(t->j = calloc(1, sizeof *t->j)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    else if (json)
        st = tok_json_load(p, t->j);
    else /* vocab.txt: wordpiece.c, unless its special tokens are not BERT's */
        st = tok_json_from_vocab(dir, o, t->j, &used);
    if (st || !used) {
        free(t->j);
        t->j = NULL;
        if (!st)
            st = vocab_txt(t, dir, o);
    } else {
        t->single = t->j->single, t->nsingle = t->j->nsingle;
        t->pair = t->j->pair, t->npair = t->j->npair;
        t->pad = t->j->pad_id;
        t->vocab_size = t->j->vocab_size;
        t->max_length = t->j->max_length;
        t->json_file = json;
    }
    free(p);
    if (st) {
        tq_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TQ_OK;
}

void tq_tokenizer_free(tq_tokenizer *t)
{
    if (!t)
        return;
    if (t->j) {
        tok_json_free(t->j); /* owns the templates */
        free(t->j);
    } else {
        for (size_t i = 0; t->single && i < t->nsingle; i++)
            free(t->single[i].ids);
        for (size_t i = 0; t->pair && i < t->npair; i++)
            free(t->pair[i].ids);
        free(t->single);
        free(t->pair);
    }
    tq_wordpiece_free(t->wp);
    free(t);
}

int64_t tq_tokenizer_vocab_size(const tq_tokenizer *t) { return t->vocab_size; }
int32_t tq_tokenizer_pad_id(const tq_tokenizer *t) { return t->pad; }
int tq_tokenizer_max_length(const tq_tokenizer *t) { return t->max_length; }
const char *tq_tokenizer_source(const tq_tokenizer *t)
{
    return t->json_file ? "tokenizer.json" : "vocab.txt";
}

/* The text's own ids, no template. */
static tq_status text_ids(const tq_tokenizer *t, const char *s, size_t len, tok_i32 *out)
{
    if (t->j)
        return tok_json_ids(t->j, s, len, out) ? tq_fail(TQ_ERR_NOMEM, "out of memory tokenizing")
                                               : TQ_OK;
    /* wordpiece.c adds [CLS] and [SEP] itself: room for every piece (each
     * takes at least one byte), then the two dropped */
    int room = len + 2 > 0x7fffffff ? 0x7fffffff : (int)len + 2, n;
    int32_t *ids = malloc((size_t)room * sizeof *ids);
    if (!ids)
        return tq_fail(TQ_ERR_NOMEM, "out of memory tokenizing");
    tq_status st = tq_wordpiece_encode(t->wp, s, len, ids, room, &n);
    for (int i = 1; !st && i + 1 < n; i++)
        if (tok_i32_push(out, ids[i]))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory tokenizing");
    free(ids);
    return st;
}

static size_t specials(const tok_tpl *tp, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += tp[i].seq < 0 ? tp[i].nids : 0;
    return k;
}

/* The library's longest_first over a pair: the shorter kept whole when it
 * fits in half, else both cut to about half (the extra one to the longer). */
static void longest_first(size_t *na, size_t *nb, size_t max)
{
    if (*na + *nb <= max)
        return;
    size_t n1 = *na, n2 = *nb;
    int swap = n1 > n2;
    if (swap)
        n1 = *nb, n2 = *na;
    n2 = n1 > max ? n1 : (n1 > max - n1 ? n1 : max - n1);
    if (n1 + n2 > max) {
        n1 = max / 2;
        n2 = n1 + max % 2;
    }
    if (swap) {
        size_t x = n1;
        n1 = n2, n2 = x;
    }
    if (*na > n1)
        *na = n1;
    if (*nb > n2)
        *nb = n2;
}

static tq_status encode(const tq_tokenizer *t, const char *a, size_t alen, const char *b,
                        size_t blen, int32_t *ids, int32_t *type_ids, int max_len, int *n,
                        int *truncated)
{
    const tok_tpl *tp = b ? t->pair : t->single;
    size_t ntp = b ? t->npair : t->nsingle;
    size_t sp = specials(tp, ntp);
    if (max_len < 0 || (size_t)max_len < sp)
        return tq_fail(TQ_ERR_USAGE, "tokenizer: a window of %d tokens has no room beyond the "
                       "%zu special tokens", max_len, sp);
    tok_i32 x[2] = {{0}, {0}};
    tq_status st = text_ids(t, a, alen, &x[0]);
    if (!st && b)
        st = text_ids(t, b, blen, &x[1]);
    if (st) {
        free(x[0].v);
        free(x[1].v);
        return st;
    }
    size_t na = x[0].n, nb = x[1].n, room = (size_t)max_len - sp;
    if (b)
        longest_first(&na, &nb, room);
    else if (na > room)
        na = room;
    *truncated = na < x[0].n || nb < x[1].n;
    size_t k = 0, keep[2] = {na, nb};
    for (size_t i = 0; i < ntp; i++) {
        const int32_t *src = tp[i].seq < 0 ? tp[i].ids : x[tp[i].seq].v;
        size_t cnt = tp[i].seq < 0 ? tp[i].nids : keep[tp[i].seq];
        if (tp[i].seq == 1 && !b)
            cnt = 0;
        /* (a template naming a text twice could outgrow the room: cut) */
        for (size_t c = 0; c < cnt && k < (size_t)max_len; c++) {
            ids[k] = src[c];
            if (type_ids)
                type_ids[k] = tp[i].type_id;
            k++;
        }
    }
    *n = (int)k;
    free(x[0].v);
    free(x[1].v);
    return TQ_OK;
}

tq_status tq_tokenizer_encode(const tq_tokenizer *t, const char *text, size_t len, int32_t *ids,
                              int max_len, int *n, int *truncated)
{
    int cut;
    return encode(t, text, len, NULL, 0, ids, NULL, max_len, n, truncated ? truncated : &cut);
}

tq_status tq_tokenizer_encode_pair(const tq_tokenizer *t, const char *a, size_t alen,
                                   const char *b, size_t blen, int32_t *ids, int32_t *type_ids,
                                   int max_len, int *n, int *truncated)
{
    int cut;
    return encode(t, a, alen, b ? b : "", b ? blen : 0, ids, type_ids, max_len, n,
                  truncated ? truncated : &cut);
}
