/* tok_model.c: tokenizer.json's "model" read into a tok_model (WordPiece,
 * BPE, Unigram), and the WordPiece model itself: greedy longest match with
 * the continuing prefix, the whole word as unk when a piece fails. */
#include "tok.h"
#include "unicode.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

int tok_wordpiece_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out)
{
    size_t chars = 0;
    for (size_t i = 0; i < n; i++)
        chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    if (!n)
        return 0;
    if (chars > (size_t)m->max_chars)
        return tok_i32_push(out, m->unk);
    char *key = malloc(m->nprefix + n);
    if (!key)
        return -1;
    size_t first = out->n;
    int r = 0;
    for (size_t start = 0; start < n && !r;) {
        size_t end = n;
        int32_t id = -1;
        while (end > start) {
            size_t k = 0;
            if (start)
                memcpy(key, m->prefix, m->nprefix), k = m->nprefix;
            memcpy(key + k, s + start, end - start);
            id = tok_vocab_get(&m->vocab, key, k + end - start);
            if (id >= 0)
                break;
            do /* back one character */
                end--;
            while (end > start && ((unsigned char)s[end] & 0xC0) == 0x80);
        }
        if (id < 0) { /* the word is unknown as a whole */
            out->n = first;
            r = tok_i32_push(out, m->unk);
            break;
        }
        r = tok_i32_push(out, id);
        start = end;
    }
    free(key);
    return r;
}

int tok_model_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out)
{
    switch (m->type) {
    case TM_WORDPIECE:
        return tok_wordpiece_encode(m, s, n, out);
    case TM_BPE:
        return tok_bpe_encode(m, s, n, out);
    default:
        return tok_unigram_encode(m, s, n, out);
    }
}

void tok_model_free(tok_model *m)
{
    tok_vocab_free(&m->vocab);
    free(m->prefix);
    free(m->suffix);
    free(m->merges);
    free(m->score);
    memset(m, 0, sizeof *m);
}

/* ---- from tokenizer.json ---- */

static int jbool(const tq_json *o, const char *k, int dflt)
{
    const tq_json *v = tq_json_get(o, k);
    return v && v->type == TQ_JSON_BOOL ? v->b : dflt;
}

static tq_status jcopy(const tq_json *o, const char *k, const char *dflt, char **s, size_t *n)
{
    const tq_json *v = tq_json_get(o, k);
    const char *src = v && v->type == TQ_JSON_STR ? v->str : dflt;
    size_t len = v && v->type == TQ_JSON_STR ? v->len : strlen(dflt);
    *s = malloc(len + 1);
    if (!*s)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memcpy(*s, src, len);
    (*s)[len] = 0;
    *n = len;
    return TQ_OK;
}

/* vocab as {"token": id, ...} (WordPiece, BPE) */
static tq_status vocab_map(const char *file, const tq_json *v, tok_model *m)
{
    if (!v || v->type != TQ_JSON_OBJ)
        return tq_fail(TQ_ERR_DATA, "%s: the model's vocab is not an object", file);
    for (size_t i = 0; i < v->n; i++) {
        const tq_json *id = &v->items[i];
        if (id->type != TQ_JSON_NUM || id->num < 0 || id->num >= TOK_MAX_ID ||
            id->num != (double)(int32_t)id->num)
            return tq_fail(TQ_ERR_DATA, "%s: vocab id of \"%s\" is not a valid id", file,
                           v->keys[i]);
        if (tok_vocab_put(&m->vocab, v->keys[i], strlen(v->keys[i]), (int32_t)id->num))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

/* vocab as [["piece", score], ...] (Unigram), ids in order */
static tq_status vocab_list(const char *file, const tq_json *v, tok_model *m)
{
    if (!v || v->type != TQ_JSON_ARR)
        return tq_fail(TQ_ERR_DATA, "%s: the Unigram vocab is not a list", file);
    m->score = malloc((v->n + 1) * sizeof *m->score);
    if (!m->score)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    m->min_score = DBL_MAX;
    for (size_t i = 0; i < v->n; i++) {
        const tq_json *e = &v->items[i];
        if (e->type != TQ_JSON_ARR || e->n != 2 || e->items[0].type != TQ_JSON_STR ||
            e->items[1].type != TQ_JSON_NUM)
            return tq_fail(TQ_ERR_DATA, "%s: Unigram vocab entry %zu is not [piece, score]",
                           file, i);
        /* the score the library holds, not the nearest double: Viterbi's
         * ties (one multiset of pieces, several orders) fall on its bits */
        m->score[i] = e->items[1].num_serde;
        if (m->score[i] < m->min_score)
            m->min_score = m->score[i];
        if (e->items[0].len > m->max_piece)
            m->max_piece = e->items[0].len;
        if (tok_vocab_put(&m->vocab, e->items[0].str, e->items[0].len, (int32_t)i))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

tq_status tok_model_parse(const char *file, const tq_json *j, tok_model *m)
{
    memset(m, 0, sizeof *m);
    const tq_json *ty = j ? tq_json_get(j, "type") : NULL;
    if (!ty || ty->type != TQ_JSON_STR)
        return tq_fail(TQ_ERR_DATA, "%s: the model has no type", file);
    const tq_json *unk = tq_json_get(j, "unk_token");
    tq_status st;
    m->unk = -1;
    if (!strcmp(ty->str, "WordPiece")) {
        m->type = TM_WORDPIECE;
        const tq_json *mc = tq_json_get(j, "max_input_chars_per_word");
        m->max_chars = mc && mc->type == TQ_JSON_NUM ? (int)mc->num : 100;
        st = jcopy(j, "continuing_subword_prefix", "##", &m->prefix, &m->nprefix);
        if (!st)
            st = vocab_map(file, tq_json_get(j, "vocab"), m);
        const char *u = unk && unk->type == TQ_JSON_STR ? unk->str : "[UNK]";
        if (!st && (m->unk = tok_vocab_get(&m->vocab, u, strlen(u))) < 0)
            st = tq_fail(TQ_ERR_DATA, "%s: WordPiece's unk_token \"%s\" is not in the vocab",
                         file, u);
        return st;
    }
    if (!strcmp(ty->str, "BPE")) {
        m->type = TM_BPE;
        const tq_json *d = tq_json_get(j, "dropout");
        if (d && d->type == TQ_JSON_NUM && d->num > 0)
            return tq_fail(TQ_ERR_DATA, "%s: BPE dropout is not supported (it is random)", file);
        m->fuse_unk = jbool(j, "fuse_unk", 0);
        m->byte_fallback = jbool(j, "byte_fallback", 0);
        m->ignore_merges = jbool(j, "ignore_merges", 0);
        st = jcopy(j, "continuing_subword_prefix", "", &m->prefix, &m->nprefix);
        if (!st)
            st = jcopy(j, "end_of_word_suffix", "", &m->suffix, &m->nsuffix);
        if (!st)
            st = vocab_map(file, tq_json_get(j, "vocab"), m);
        if (!st && unk && unk->type == TQ_JSON_STR)
            m->unk = tok_vocab_get(&m->vocab, unk->str, unk->len);
        if (!st)
            st = tok_bpe_merges(file, tq_json_get(j, "merges"), m);
        return st;
    }
    if (!strcmp(ty->str, "Unigram")) {
        m->type = TM_UNIGRAM;
        m->byte_fallback = jbool(j, "byte_fallback", 0);
        st = vocab_list(file, tq_json_get(j, "vocab"), m);
        const tq_json *u = tq_json_get(j, "unk_id");
        if (!st && (!u || u->type != TQ_JSON_NUM || u->num < 0 || u->num >= (double)m->vocab.n))
            st = tq_fail(TQ_ERR_DATA, "%s: Unigram without a valid unk_id", file);
        if (!st)
            m->unk = (int32_t)u->num;
        return st;
    }
    return tq_fail(TQ_ERR_DATA, "%s: model type \"%s\" is not supported", file, ty->str);
}
