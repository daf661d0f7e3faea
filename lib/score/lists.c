/* lists.c: tq-score --cross-encoder on tq-simmat's --topk lists: each query
 * row (frame "key", with "idx" and "db_key" after it) is a group of its K
 * candidates; the query's text and each candidate's come from TSV files of
 * ID<TAB>TEXT lines (the ones tq-embed --tsv embedded), looked up by key
 * (an integer key by its decimal spelling). The pairs then go the way of
 * pairs.c's. */
#include "pairs.h"
#include "internal.h"

#include <inttypes.h>

/* ID -> TEXT of a TSV file, in one block, open addressing on the ID. */
typedef struct textmap {
    tq_buf bytes;
    size_t *off; /* line i: its ID at off[2i]..off[2i+1], its text to off[2i+2] */
    int64_t n, cap;
    int64_t *slot; /* line index, -1 empty */
    uint64_t mask;
    const char *path;
} textmap;

static uint64_t fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void map_free(textmap *m)
{
    tq_buf_free(&m->bytes);
    free(m->off);
    free(m->slot);
}

/* The text of id, or NULL. */
static const char *map_get(const textmap *m, const char *id, size_t n, size_t *len)
{
    for (uint64_t i = fnv(id, n) & m->mask;; i = (i + 1) & m->mask) {
        int64_t k = m->slot[i];
        if (k < 0)
            return NULL;
        size_t a = m->off[2 * k], b = m->off[2 * k + 1];
        if (b - a == n && !memcmp(m->bytes.p + a, id, n)) {
            *len = m->off[2 * k + 2] - b;
            return m->bytes.p + b;
        }
    }
}

static tq_status map_load(const char *path, size_t max_line, textmap *m)
{
    memset(m, 0, sizeof *m);
    m->path = path;
    tq_lines *r;
    tq_status st = tq_lines_open(&r, path, max_line);
    if (st)
        return st;
    const char *l;
    size_t n;
    int too_long;
    int64_t line = 0;
    while ((st = tq_lines_next(r, &l, &n, &too_long)) == TQ_OK) {
        line++;
        const char *tab = memchr(l, '\t', n);
        if (too_long || !tab || memchr(l, 0, n) || tq_utf8_valid(l, n) != n) {
            st = tq_fail(TQ_ERR_DATA, "%s: line %lld: %s", path, (long long)line,
                         too_long ? "too long"
                         : !tab   ? "wants ID<TAB>TEXT (no tab)"
                                  : "not UTF-8 text");
            break;
        }
        if (m->n + 1 >= m->cap) {
            int64_t nc = m->cap * 2 + 256;
            size_t *o = realloc(m->off, (size_t)(2 * nc + 1) * sizeof *o);
            if (!o) {
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
                break;
            }
            m->off = o;
            m->cap = nc;
        }
        m->off[2 * m->n] = m->bytes.len;
        m->off[2 * m->n + 1] = m->bytes.len + (size_t)(tab - l);
        if ((st = tq_buf_add(&m->bytes, l, (size_t)(tab - l))) ||
            (st = tq_buf_add(&m->bytes, tab + 1, n - (size_t)(tab - l) - 1)))
            break;
        m->off[2 * ++m->n] = m->bytes.len;
    }
    tq_lines_close(r);
    if (st != TQ_EOF) {
        map_free(m);
        return st;
    }
    uint64_t size = 16;
    while (size < 2 * (uint64_t)m->n)
        size *= 2;
    m->mask = size - 1;
    if (!(m->slot = malloc(size * sizeof *m->slot))) {
        map_free(m);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    memset(m->slot, 0xff, size * sizeof *m->slot);
    for (int64_t k = 0; k < m->n; k++) { /* a repeated ID: the last line counts */
        size_t a = m->off[2 * k], b = m->off[2 * k + 1];
        uint64_t i = fnv(m->bytes.p + a, b - a) & m->mask;
        for (; m->slot[i] >= 0; i = (i + 1) & m->mask) {
            int64_t o = m->slot[i];
            if (m->off[2 * o + 1] - m->off[2 * o] == b - a &&
                !memcmp(m->bytes.p + m->off[2 * o], m->bytes.p + a, b - a))
                break;
        }
        m->slot[i] = k;
    }
    return TQ_OK;
}

/* Key i of a str or i64 frame, spelled as text (into num for an integer). */
static tq_status key_of(tq_frame *f, int64_t i, char num[24], const char **s, size_t *n)
{
    if (f->dtype == TQ_DTYPE_STR)
        return tq_frame_str(f, i, s, n);
    const void *d;
    tq_status st = tq_frame_data(f, &d);
    if (st)
        return st;
    int64_t v;
    memcpy(&v, (const char *)d + i * 8, 8);
    *n = (size_t)snprintf(num, 24, "%" PRId64, v);
    *s = num;
    return TQ_OK;
}

/* Text of key (s, n) in m, or a one-line error naming both. */
static tq_status text_of(const textmap *m, const char *what, const char *s, size_t n,
                         const char **t, size_t *tn)
{
    if ((*t = map_get(m, s, n, tn)))
        return TQ_OK;
    return tq_fail(TQ_ERR_DATA, "%s %.*s: no line with that ID in %s", what, (int)(n > 200 ? 200 : n),
                   s, m->path);
}

/* Keeps a copy of the batch's query keys (the "key" frame is gone by the
 * time its db_key comes). */
typedef struct qkeys {
    tq_buf bytes;
    size_t *off;
    int64_t n;
} qkeys;

static tq_status keep_keys(tq_frame *f, qkeys *q)
{
    int64_t n = tq_frame_rows(f);
    free(q->off);
    q->bytes.len = 0;
    q->n = 0;
    if (!(q->off = malloc((size_t)(n + 1) * sizeof *q->off)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    q->off[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        char num[24];
        const char *s;
        size_t len;
        tq_status st = key_of(f, i, num, &s, &len);
        if (!st)
            st = tq_buf_add(&q->bytes, s, len);
        if (st)
            return st;
        q->off[i + 1] = q->bytes.len;
    }
    q->n = n;
    return TQ_OK;
}

/* One batch: query i's candidates j < k whose idx is a row (>= 0). */
static tq_status batch(const tq_score_pairs_opts *o, const textmap *qm, const textmap *dm,
                       const qkeys *q, const int64_t *id, int64_t k, tq_frame *db, pbuf *b,
                       tq_writer *w, tq_score_pairs_stats *s)
{
    tq_status st = TQ_OK;
    for (int64_t i = 0; !st && i < q->n; i++) {
        const char *f[4];
        size_t fl[4];
        f[0] = q->bytes.p + q->off[i];
        fl[0] = q->off[i + 1] - q->off[i];
        if (b->n >= o->batch && (st = tq_pairs_flush(o, b, w, s)))
            break;
        if ((st = text_of(qm, "query", f[0], fl[0], &f[1], &fl[1])))
            break;
        for (int64_t j = 0, first = 1; !st && j < k; j++) {
            if (id[i * k + j] < 0) /* fewer database rows than k */
                continue;
            char num[24];
            if (!(st = key_of(db, i * k + j, num, &f[2], &fl[2])) &&
                !(st = text_of(dm, "candidate", f[2], fl[2], &f[3], &fl[3])))
                st = tq_pairs_add(b, f, fl, first);
            first = 0;
        }
    }
    return st;
}

tq_status tq_score_lists(const tq_score_pairs_opts *o, tq_reader *r, const char *query_texts,
                         const char *texts, tq_writer *w, tq_score_pairs_stats *s)
{
    textmap qm, dm;
    memset(s, 0, sizeof *s);
    tq_status st = map_load(query_texts, o->max_line, &qm);
    if (st)
        return st;
    if ((st = map_load(texts, o->max_line, &dm))) {
        map_free(&qm);
        return st;
    }
    pbuf b = {0};
    qkeys q = {0};
    tq_frame *f;
    int state = 0; /* 1: a "key" kept; 2: its "idx" too (copied: the frame goes) */
    int64_t *idx_copy = NULL, k = 0;
    while (!st && (st = tq_reader_next(r, &f)) == TQ_OK) {
        if (!strcmp(f->name, "key") && (f->dtype == TQ_DTYPE_STR || f->dtype == TQ_DTYPE_I64) &&
            f->rank == 1) {
            st = keep_keys(f, &q);
            state = 1;
        } else if (state == 1 && !strcmp(f->name, "idx")) {
            const void *d;
            if (f->dtype != TQ_DTYPE_I64 || f->rank != 2 || f->dims[0] != q.n)
                st = tq_fail(TQ_ERR_DATA, "frame %llu \"idx\": not i64 [%lld, k] after its keys",
                             (unsigned long long)f->index, (long long)q.n);
            else if (!(st = tq_frame_data(f, &d))) {
                free(idx_copy);
                size_t nb = (size_t)(f->dims[0] * f->dims[1]) * 8;
                if (!(idx_copy = malloc(nb + 8)))
                    st = tq_fail(TQ_ERR_NOMEM, "out of memory");
                else {
                    memcpy(idx_copy, d, nb);
                    k = f->dims[1];
                    state = 2;
                }
            }
        } else if (state == 2 && !strcmp(f->name, "db_key")) {
            if ((f->dtype != TQ_DTYPE_STR && f->dtype != TQ_DTYPE_I64) ||
                f->dims[0] != q.n * k)
                st = tq_fail(TQ_ERR_DATA, "frame %llu \"db_key\": does not match its idx",
                             (unsigned long long)f->index);
            else
                st = batch(o, &qm, &dm, &q, idx_copy, k, f, &b, w, s);
            state = 0;
        }
    }
    if (st == TQ_EOF)
        st = state ? tq_fail(TQ_ERR_DATA, "the stream ends inside a top-k batch (key, idx, "
                                          "db_key)")
                   : TQ_OK;
    if (!st && !s->rows_in && !b.n && !q.n)
        st = tq_fail(TQ_ERR_DATA, "no top-k lists in the input: frames \"key\", \"idx\" and "
                                  "\"db_key\", as tq-simmat --topk writes them with keys");
    if (!st)
        st = tq_pairs_flush(o, &b, w, s);
    free(idx_copy);
    free(q.off);
    tq_buf_free(&q.bytes);
    tq_pairs_free(&b);
    map_free(&qm);
    map_free(&dm);
    return st;
}
