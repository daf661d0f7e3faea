/* pairs.c: tq-score --cross-encoder: text pairs scored by a cross-encoder
 * and ranked within their groups. The input is lines of
 * QID<TAB>QUERY<TAB>DOCID<TAB>TEXT (the text everything after the third
 * tab), a group being a run of lines with the same QID; whole groups are
 * buffered until a batch's worth of pairs, then scored, ranked and written
 * as frames "group" (str, the QID), "key" (str, the DOCID), "score" (f32)
 * and "rank" (i64). */
#include "pairs.h"
#include "embed/cross.h"
#include "embed/text_input.h"
#include "internal.h"

tq_status tq_pairs_add(pbuf *b, const char *f[4], const size_t fl[4], int new_group)
{
    if (b->n == b->cap) {
        int64_t nc = b->cap * 2 + 64;
        size_t *o = realloc(b->off, (size_t)(4 * nc + 1) * sizeof *o);
        if (!o)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        b->off = o;
        b->cap = nc;
    }
    if (new_group) {
        if (b->ngroups + 1 >= b->gcap) {
            int64_t nc = b->gcap * 2 + 64;
            int64_t *g = realloc(b->gstart, (size_t)nc * sizeof *g);
            if (!g)
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            b->gstart = g;
            b->gcap = nc;
        }
        b->gstart[b->ngroups++] = b->n;
    }
    for (int k = 0; k < 4; k++) {
        b->off[4 * b->n + k] = b->bytes.len;
        tq_status st = tq_buf_add(&b->bytes, f[k], fl[k]);
        if (st)
            return st;
    }
    b->off[4 * ++b->n] = b->bytes.len;
    return TQ_OK;
}

static const char *field(const pbuf *b, int64_t i, int k, size_t *len)
{
    size_t s = b->off[4 * i + k], e = b->off[4 * i + k + 1];
    *len = e - s;
    return b->bytes.p + s;
}

tq_status tq_pairs_flush(const tq_score_pairs_opts *o, pbuf *b, tq_writer *w,
                       tq_score_pairs_stats *s)
{
    int64_t n = b->n, L = tq_cross_labels(o->ce);
    if (!n)
        return TQ_OK;
    b->gstart[b->ngroups] = n;
    const char **q = malloc((size_t)n * sizeof *q), **t = malloc((size_t)n * sizeof *t);
    const char **gk = malloc((size_t)n * sizeof *gk), **dk = malloc((size_t)n * sizeof *dk);
    size_t *ql = malloc((size_t)n * sizeof *ql), *tl = malloc((size_t)n * sizeof *tl);
    size_t *gl = malloc((size_t)n * sizeof *gl), *dl = malloc((size_t)n * sizeof *dl);
    float *out = malloc((size_t)(n * L) * sizeof *out), *sc = malloc((size_t)n * sizeof *sc);
    int64_t *order = malloc((size_t)n * sizeof *order), *rank = malloc((size_t)n * sizeof *rank);
    int64_t *keep = malloc((size_t)n * sizeof *keep);
    tq_status st = q && t && gk && dk && ql && tl && gl && dl && out && sc && order && rank && keep
                       ? TQ_OK
                       : tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < n; i++) {
        q[i] = field(b, i, 1, &ql[i]);
        t[i] = field(b, i, 3, &tl[i]);
    }
    if (!st)
        st = tq_cross_score(o->ce, n, q, ql, t, tl, out, &s->cut);
    int64_t kept = 0;
    for (int64_t g = 0; !st && g < b->ngroups; g++) {
        int64_t g0 = b->gstart[g], m = b->gstart[g + 1] - g0;
        for (int64_t i = 0; i < m; i++)
            sc[g0 + i] = out[(g0 + i) * L + o->label];
        if ((st = tq_score_rank(sc + g0, m, order + g0, rank + g0)))
            break;
        for (int64_t r = 0; r < m; r++) { /* kept rows, in rank or input order */
            int64_t i = o->sort ? g0 + order[g0 + r] : g0 + r;
            if (!o->top || rank[i] <= o->top)
                keep[kept++] = i;
        }
    }
    float *ksc = sc ? malloc((size_t)(kept + 1) * sizeof *ksc) : NULL;
    int64_t *krank = malloc((size_t)(kept + 1) * sizeof *krank);
    if (!st && (!ksc || !krank))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; !st && j < kept; j++) {
        int64_t i = keep[j];
        gk[j] = field(b, i, 0, &gl[j]);
        dk[j] = field(b, i, 2, &dl[j]);
        ksc[j] = sc[i];
        krank[j] = rank[i];
    }
    for (int64_t at = 0; !st && at < kept; at += o->batch) { /* frames of --batch rows */
        int64_t m = kept - at < o->batch ? kept - at : o->batch;
        if (!(st = tq_writer_write_str(w, "group", m, gk + at, gl + at)) &&
            !(st = tq_writer_write_str(w, "key", m, dk + at, dl + at)) &&
            !(st = tq_writer_write(w, "score", TQ_DTYPE_F32, 1, &m, o->meta, o->meta_len, ksc + at,
                                   (uint64_t)m * sizeof *ksc)))
            st = tq_writer_write(w, "rank", TQ_DTYPE_I64, 1, &m, NULL, 0, krank + at,
                                 (uint64_t)m * sizeof *krank);
    }
    s->rows_in += n;
    s->rows_out += kept;
    s->groups += b->ngroups;
    free(q), free(t), free(gk), free(dk), free(ql), free(tl), free(gl), free(dl);
    free(out), free(sc), free(order), free(rank), free(keep), free(ksc), free(krank);
    b->bytes.len = 0;
    b->n = b->ngroups = 0;
    return st;
}

/* Splits a line at its first three tabs into f[0..4). */
static int split(const char *l, size_t n, const char *f[4], size_t fl[4])
{
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        const char *tab = memchr(l + at, '\t', n - at);
        if (!tab)
            return 0;
        f[k] = l + at;
        fl[k] = (size_t)(tab - (l + at));
        at = (size_t)(tab - l) + 1;
    }
    f[3] = l + at;
    fl[3] = n - at;
    return 1;
}

tq_status tq_score_pairs(const tq_score_pairs_opts *o, const char *const *files, int nfiles,
                         tq_writer *w, tq_score_pairs_stats *s)
{
    pbuf b = {0};
    tq_buf last = {0}; /* the QID of the group being read */
    tq_status st = TQ_OK;
    int64_t line = 0;
    int have = 0;
    memset(s, 0, sizeof *s);
    for (int fi = 0; !st && fi < nfiles; fi++) {
        tq_lines *r = NULL;
        if ((st = tq_lines_open(&r, files[fi], o->max_line)))
            break;
        const char *l;
        size_t n;
        int too_long;
        while (!st && (st = tq_lines_next(r, &l, &n, &too_long)) == TQ_OK) {
            line++;
            const char *f[4];
            size_t fl[4];
            if (too_long)
                st = tq_fail(TQ_ERR_DATA, "%s: line %lld: longer than %zu bytes", files[fi],
                             (long long)line, o->max_line);
            else if (memchr(l, 0, n))
                st = tq_fail(TQ_ERR_DATA, "%s: line %lld: a NUL byte: binary data, not text",
                             files[fi], (long long)line);
            else if (tq_utf8_valid(l, n) != n)
                st = tq_fail(TQ_ERR_DATA, "%s: line %lld: not valid UTF-8", files[fi],
                             (long long)line);
            else if (!split(l, n, f, fl))
                st = tq_fail(TQ_ERR_DATA,
                             "%s: line %lld: wants QID<TAB>QUERY<TAB>DOCID<TAB>TEXT (fewer "
                             "than 3 tabs)",
                             files[fi], (long long)line);
            if (st)
                break;
            int new_group = !have || last.len != fl[0] || memcmp(last.p, f[0], fl[0]);
            /* a whole batch's worth of pairs at a group's end: score them */
            if (new_group && b.n >= o->batch && (st = tq_pairs_flush(o, &b, w, s)))
                break;
            if (new_group) {
                last.len = 0;
                if ((st = tq_buf_add(&last, f[0], fl[0])))
                    break;
                have = 1;
            }
            st = tq_pairs_add(&b, f, fl, new_group);
        }
        if (st == TQ_EOF)
            st = TQ_OK;
        tq_lines_close(r);
    }
    if (!st)
        st = tq_pairs_flush(o, &b, w, s);
    tq_pairs_free(&b);
    tq_buf_free(&last);
    return st;
}

void tq_pairs_free(pbuf *b)
{
    tq_buf_free(&b->bytes);
    free(b->off);
    free(b->gstart);
    memset(b, 0, sizeof *b);
}
