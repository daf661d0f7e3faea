/* tok_unigram.c: the Unigram model (SentencePiece's, as the tokenizers
 * library's encode_optimized runs it): Viterbi over the pieces that start at
 * each character, a character no piece covers scored as unk (the lowest
 * score minus 10), consecutive unks fused, byte fallback when asked.
 * Ties are the library's too: a path's total is its f64 sum left to right,
 * and a later candidate replaces the best path into a position only when
 * strictly greater (so of equal totals the earliest start, the longest last
 * piece, wins). Segmentations of one multiset of pieces differ only in those
 * sums' last bits, so the scores must be the library's bits as well:
 * tok_model.c takes them as serde_json reads them, not as strtod does
 * (lib/io/json_serde.c). */
#include "tok.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNK_PENALTY 10.0

typedef struct node { double score; int64_t start; int32_t id; } node;

static int push_piece(const tok_model *m, const char *s, size_t n, tok_i32 *out)
{
    int32_t id = tok_vocab_get(&m->vocab, s, n);
    if (id >= 0)
        return tok_i32_push(out, id);
    if (m->byte_fallback) {
        int ok = 1;
        for (size_t b = 0; ok && b < n; b++) {
            char t[8];
            snprintf(t, sizeof t, "<0x%02X>", (unsigned char)s[b]);
            ok = tok_vocab_get(&m->vocab, t, 6) >= 0;
        }
        for (size_t b = 0; ok && b < n; b++) {
            char t[8];
            snprintf(t, sizeof t, "<0x%02X>", (unsigned char)s[b]);
            if (tok_i32_push(out, tok_vocab_get(&m->vocab, t, 6)))
                return -1;
        }
        if (ok)
            return 0;
    }
    return tok_i32_push(out, m->unk);
}

int tok_unigram_encode(const tok_model *m, const char *s, size_t n, tok_i32 *out)
{
    if (!n)
        return 0;
    node *best = malloc((n + 1) * sizeof *best);
    size_t *cut = malloc(2 * (n + 1) * sizeof *cut); /* (start, kind) per piece */
    if (!best || !cut) {
        free(best);
        free(cut);
        return -1;
    }
    for (size_t i = 0; i <= n; i++)
        best[i] = (node){0, -1, -1};
    double unk_score = m->min_score - UNK_PENALTY;
    for (size_t at = 0; at < n;) {
        size_t mb;
        tq_utf8_decode((const unsigned char *)s + at, n - at, &mb);
        double here = best[at].score;
        int single = 0;
        size_t lim = n - at < m->max_piece ? n - at : m->max_piece;
        for (size_t l = 1; l <= lim; l++) { /* shortest first, as the trie yields */
            int32_t id = tok_vocab_get(&m->vocab, s + at, l);
            if (id < 0)
                continue;
            node *t = &best[at + l];
            double c = m->score[id] + here;
            if (t->start < 0 || c > t->score)
                *t = (node){c, (int64_t)at, id};
            single |= l == mb;
        }
        if (!single) {
            node *t = &best[at + mb];
            double c = unk_score + here;
            if (t->start < 0 || c > t->score)
                *t = (node){c, (int64_t)at, m->unk};
        }
        at += mb;
    }
    /* back from the end: the pieces' cut points, unks fused */
    size_t k = 0;
    int r = 0;
    for (size_t e = n; e > 0;) {
        size_t st = (size_t)best[e].start;
        int fuse = best[e].id == m->unk && k && cut[k - 1] == (size_t)-1;
        if (fuse) {
            cut[k - 2] = st; /* the fused unk run now starts here */
        } else {
            cut[k++] = st;
            cut[k++] = best[e].id == m->unk ? (size_t)-1 : (size_t)-2;
        }
        e = st;
    }
    /* cut holds pairs (start, kind) from the last piece back; a piece ends
     * where the one after it starts */
    size_t end = n;
    size_t np = k / 2;
    size_t *starts = malloc((np + 1) * sizeof *starts);
    if (!starts)
        r = -1;
    for (size_t p = 0; !r && p < np; p++)
        starts[p] = cut[2 * p];
    for (size_t p = np; !r && p-- > 0;) {
        size_t a = starts[p], b = p ? starts[p - 1] : end;
        r = push_piece(m, s + a, b - a, out);
    }
    free(starts);
    free(best);
    free(cut);
    return r;
}
