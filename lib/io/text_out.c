/* text_out.c: frames as TSV, CSV or JSON lines: one line per tensor row, the
 * frames of a batch that have the same rows side by side (key first), a header
 * line per table, and --head/--tail counted over a whole table, not a batch.
 *
 * A batch is a run of frames with distinct names. The names of a layout's first
 * batch fix the layout: a name seen again starts the next batch, a name outside
 * the layout starts a new layout. So "key emb key emb" prints as one table of
 * key and emb, while "k k k v v v" (two tensors, one after the other) prints as
 * a table of k and then a table of v.
 *
 * --head on a stream that never ends: a frame of a new name may come at any
 * time and start a table of its own, so reading stops early only when the
 * names that can come are known (--name): once each is in a table that has
 * its rows, put answers TQ_EOF. */
#include "io.h"
#include "internal.h"

typedef struct held { /* a frame of the pending batch, copied out of the reader */
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];
    unsigned char *data;
    size_t cap;
    int64_t rows, row_elems;
    uint64_t row_bytes;
} held;

typedef struct table {
    char *sig;          /* the column layout: names, dtypes, trailing dims */
    char *header;       /* the header line ("" for JSON lines or --no-header) */
    int64_t shown;      /* rows printed so far (--head) */
    int started;        /* its header was printed */
    struct kept **ring; /* --tail: the last rows, formatted */
    int64_t ring_len, ring_cap, ring_next;
} table;

typedef char name_t[TQ_MAX_NAME + 1];

typedef struct text_sink {
    tq_sink base;
    FILE *out;
    tq_text_opts o;
    held *pend;
    size_t npend, cap_pend;
    name_t *layout;
    size_t nlayout, cap_layout;
    int layout_fixed;
    table *tables;
    size_t ntables;
    long current;       /* the table whose header is in force, -1: none */
    int printed;        /* something was printed (tables are set apart by a blank line) */
    tq_buf line;
    float *conv;        /* a block-coded row, decoded */
    size_t conv_cap;
    const held **group;
    unsigned char *full; /* --head with o.only: o.only[i] is in a full table */
} text_sink;

int tq_text_format_from_name(const char *name, tq_text_format *fmt)
{
    static const char *names[] = {"tsv", "csv", "jsonl"};
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, names[i])) {
            *fmt = (tq_text_format)i;
            return 0;
        }
    return -1;
}

static int is_code(tq_dtype dt)
{
    return dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0 || dt == TQ_DTYPE_BIT || dt == TQ_DTYPE_Q2;
}

/* ---------------------------------------------------------------- escaping */

static tq_status add_tsv_str(tq_buf *b, const char *s, size_t n)
{
    tq_status st = tq_buf_reserve(b, 2 * n + 1);
    for (size_t i = 0; i < n && !st; i++) {
        char c = s[i], e = c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\\' ? '\\' : 0;
        if (e) {
            b->p[b->len++] = '\\';
            b->p[b->len++] = e;
        } else {
            b->p[b->len++] = c;
        }
    }
    return st;
}

static tq_status add_csv_str(tq_buf *b, const char *s, size_t n)
{
    int quote = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r')
            quote = 1;
    if (!quote)
        return tq_buf_add(b, s, n);
    tq_status st = tq_buf_reserve(b, 2 * n + 3);
    if (st)
        return st;
    b->p[b->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            b->p[b->len++] = '"';
        b->p[b->len++] = s[i];
    }
    b->p[b->len++] = '"';
    return TQ_OK;
}

static tq_status add_str(tq_buf *b, tq_text_format fmt, const char *s, size_t n)
{
    return fmt == TQ_TEXT_TSV ? add_tsv_str(b, s, n)
         : fmt == TQ_TEXT_CSV ? add_csv_str(b, s, n)
                              : tq_buf_json(b, s, n);
}

static tq_status add_value(tq_buf *b, tq_text_format fmt, tq_dtype dt, const void *v)
{
    char num[TQ_NUM_MAX];
    size_t n = tq_fmt_number(num, dt, v);
    if (fmt == TQ_TEXT_JSONL && (num[0] == 'n' || num[n - 1] == 'f')) {
        /* JSON has no NaN or infinity; these spellings are what Python's json
         * module (and JavaScript) read and write */
        const char *w = num[0] == 'n' ? "NaN" : num[0] == '-' ? "-Infinity" : "Infinity";
        return tq_buf_add(b, w, strlen(w));
    }
    if (fmt == TQ_TEXT_JSONL && !strcmp(num, "-0") && tq_dtype_is_float(dt))
        return tq_buf_add(b, "-0.0", 4); /* JSON readers take "-0" for the integer 0 */
    return tq_buf_add(b, num, n);
}

/* ---------------------------------------------------------------- layout */

static void str_at(const held *h, int64_t i, const char **s, size_t *n)
{
    const unsigned char *p = h->data;
    uint64_t a = tq_le64(p + 8 * i), e = tq_le64(p + 8 * (i + 1));
    *s = (const char *)p + 8 * ((uint64_t)h->rows + 1) + a;
    *n = (size_t)(e - a);
}

/* "name", or "name[j]" for [n, d], or "name[i,j]" for higher ranks */
static tq_status header_cols(tq_buf *b, tq_text_format fmt, const held *h, int first)
{
    char col[TQ_MAX_NAME + 8 * 24];
    char sep = fmt == TQ_TEXT_CSV ? ',' : '\t';
    tq_status st = TQ_OK;
    if (h->dtype == TQ_DTYPE_STR || h->rank <= 1) {
        if (!first)
            st = tq_buf_add(b, &sep, 1);
        return st ? st : add_str(b, fmt, h->name, strlen(h->name));
    }
    int64_t idx[TQ_MAX_RANK] = {0};
    for (int64_t e = 0; e < h->row_elems && !st; e++) {
        size_t n = (size_t)snprintf(col, sizeof col, "%s[", h->name);
        for (int d = 1; d < h->rank; d++)
            n += (size_t)snprintf(col + n, sizeof col - n, "%s%lld", d > 1 ? "," : "",
                                  (long long)idx[d]);
        col[n++] = ']';
        if (!first || e)
            st = tq_buf_add(b, &sep, 1);
        if (!st)
            st = add_str(b, fmt, col, n);
        for (int d = h->rank - 1; d >= 1; d--) { /* next index in C order */
            if (++idx[d] < h->dims[d])
                break;
            idx[d] = 0;
        }
    }
    return st;
}

static tq_status find_table(text_sink *k, const held **g, size_t ng, table **out)
{
    tq_buf sig = {0};
    tq_status st = TQ_OK;
    for (size_t i = 0; i < ng && !st; i++) {
        char d[64];
        st = tq_buf_add(&sig, g[i]->name, strlen(g[i]->name));
        for (int j = 0; j < g[i]->rank && !st; j++) {
            int n = snprintf(d, sizeof d, "\1%lld", j ? (long long)g[i]->dims[j] : -1LL);
            st = tq_buf_add(&sig, d, (size_t)n);
        }
        int n = snprintf(d, sizeof d, "\2%d\3", (int)g[i]->dtype);
        if (!st)
            st = tq_buf_add(&sig, d, (size_t)n);
    }
    if (st) {
        tq_buf_free(&sig);
        return st;
    }
    for (size_t i = 0; i < k->ntables; i++)
        if (!strcmp(k->tables[i].sig, sig.p)) {
            tq_buf_free(&sig);
            *out = &k->tables[i];
            return TQ_OK;
        }
    tq_buf hdr = {0};
    st = tq_buf_add(&hdr, "", 0);
    if (k->o.header && k->o.format != TQ_TEXT_JSONL) {
        for (size_t i = 0; i < ng && !st; i++)
            st = header_cols(&hdr, k->o.format, g[i], i == 0);
        if (!st)
            st = tq_buf_add(&hdr, "\n", 1);
    }
    table *t = st ? NULL : realloc(k->tables, (k->ntables + 1) * sizeof *t);
    if (!t) {
        tq_buf_free(&sig);
        tq_buf_free(&hdr);
        return st ? st : tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    k->tables = t;
    t = &k->tables[k->ntables++];
    memset(t, 0, sizeof *t);
    t->sig = sig.p;
    t->header = hdr.p;
    *out = t;
    return TQ_OK;
}

/* ---------------------------------------------------------------- rows */

/* A JSON array of the row shape dims[0..rank), values from *p on. */
static tq_status json_nd(tq_buf *b, tq_dtype dt, const unsigned char **p, const int64_t *dims,
                         int rank)
{
    tq_status st = tq_buf_add(b, "[", 1);
    size_t es = tq_dtype_size(dt);
    for (int64_t i = 0; i < dims[0] && !st; i++) {
        if (i)
            st = tq_buf_add(b, ",", 1);
        if (st)
            break;
        if (rank > 1) {
            st = json_nd(b, dt, p, dims + 1, rank - 1);
        } else {
            st = add_value(b, TQ_TEXT_JSONL, dt, *p);
            *p += es;
        }
    }
    return st ? st : tq_buf_add(b, "]", 1);
}

static tq_status format_row(text_sink *k, const held **g, size_t ng, int64_t r)
{
    tq_buf *b = &k->line;
    tq_text_format fmt = k->o.format;
    char sep = fmt == TQ_TEXT_CSV ? ',' : '\t';
    b->len = 0;
    tq_status st = tq_buf_add(b, fmt == TQ_TEXT_JSONL ? "{" : "", fmt == TQ_TEXT_JSONL);
    for (size_t c = 0; c < ng && !st; c++) {
        const held *h = g[c];
        if (fmt == TQ_TEXT_JSONL) {
            st = tq_buf_add(b, c ? ",\"" : "\"", c ? 2 : 1);
            if (!st)
                st = tq_buf_add(b, h->name, strlen(h->name));
            if (!st)
                st = tq_buf_add(b, "\":", 2);
        } else if (c) {
            st = tq_buf_add(b, &sep, 1);
        }
        if (st)
            break;
        if (h->dtype == TQ_DTYPE_STR) {
            const char *s;
            size_t n;
            str_at(h, r, &s, &n);
            st = add_str(b, fmt, s, n);
            continue;
        }
        const unsigned char *p = h->data + (uint64_t)r * h->row_bytes;
        tq_dtype dt = h->dtype;
        if (is_code(dt)) {
            /* block codes and sign bits print as the values they stand for */
            st = tq_convert(TQ_DTYPE_F32, k->conv, dt, p, (size_t)h->row_elems,
                            h->dims[h->rank - 1]);
            p = (const unsigned char *)k->conv;
            dt = TQ_DTYPE_F32;
        }
        size_t es = tq_dtype_size(dt);
        if (st)
            break;
        if (fmt == TQ_TEXT_JSONL && h->rank >= 2) {
            st = json_nd(b, dt, &p, h->dims + 1, h->rank - 1);
            continue;
        }
        for (int64_t e = 0; e < h->row_elems && !st; e++) {
            if (e)
                st = tq_buf_add(b, &sep, 1);
            if (!st)
                st = add_value(b, fmt, dt, p + e * es);
        }
    }
    if (!st && fmt == TQ_TEXT_JSONL)
        st = tq_buf_add(b, "}", 1);
    return st ? st : tq_buf_add(b, "\n", 1);
}

static void start_table(text_sink *k, table *t)
{
    if (k->current == t - k->tables)
        return;
    if (k->printed && k->o.format != TQ_TEXT_JSONL && k->o.header)
        fputc('\n', k->out);
    fputs(t->header, k->out);
    k->current = t - k->tables;
    k->printed = 1;
    t->started = 1;
}

/* A formatted row kept for --tail (rows may hold NUL bytes: keep the length). */
typedef struct kept {
    size_t len;
    char s[];
} kept;

static tq_status ring_push(table *t, int64_t cap, const tq_buf *line)
{
    kept *r = malloc(sizeof *r + line->len);
    if (!r)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for --tail");
    r->len = line->len;
    memcpy(r->s, line->p, line->len);
    if (t->ring_len < cap) {
        if (t->ring_len == t->ring_cap) { /* grows with the rows seen, up to --tail */
            int64_t nc = t->ring_cap ? 2 * t->ring_cap : 64;
            if (nc > cap)
                nc = cap;
            kept **n = realloc(t->ring, (size_t)nc * sizeof *n);
            if (!n) {
                free(r);
                return tq_fail(TQ_ERR_NOMEM, "out of memory for --tail");
            }
            t->ring = n;
            t->ring_cap = nc;
        }
        t->ring[t->ring_len++] = r;
        t->ring_next = t->ring_len % cap;
        return TQ_OK;
    }
    free(t->ring[t->ring_next]);
    t->ring[t->ring_next] = r;
    t->ring_next = (t->ring_next + 1) % cap;
    return TQ_OK;
}

static tq_status emit_group(text_sink *k, const held **g, size_t ng)
{
    table *t = NULL;
    tq_status st = find_table(k, g, ng, &t);
    if (st)
        return st;
    int64_t n = g[0]->rows;
    for (size_t i = 0; i < ng; i++)
        if (n > 0 && is_code(g[i]->dtype) && (size_t)g[i]->row_elems > k->conv_cap) {
            float *c = realloc(k->conv, (size_t)g[i]->row_elems * sizeof *c);
            if (!c)
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            k->conv = c;
            k->conv_cap = (size_t)g[i]->row_elems;
        }
    if (k->o.tail >= 0) {
        for (int64_t r = n > k->o.tail ? n - k->o.tail : 0; r < n && !st; r++) {
            st = format_row(k, g, ng, r);
            if (!st)
                st = ring_push(t, k->o.tail, &k->line);
        }
        return st;
    }
    int64_t hi = n;
    if (k->o.head >= 0) {
        hi = k->o.head - t->shown < n ? k->o.head - t->shown : n;
        if (hi <= 0 && t->started)
            return TQ_OK; /* this table has shown its rows and its header */
    }
    start_table(k, t);
    for (int64_t r = 0; r < hi && !st; r++) {
        st = format_row(k, g, ng, r);
        if (!st && fwrite(k->line.p, 1, k->line.len, k->out) != k->line.len)
            st = tq_io_file_status(k->out);
    }
    if (hi > 0)
        t->shown += hi;
    if (k->full && t->shown >= k->o.head)
        for (size_t i = 0; i < ng; i++)
            for (size_t j = 0; j < k->o.nonly; j++)
                k->full[j] |= !strcmp(g[i]->name, k->o.only[j]);
    return st ? st : tq_io_file_status(k->out);
}

/* Every name that can come is in a table that has shown its rows. */
static int all_full(const text_sink *k)
{
    if (!k->full)
        return 0;
    for (size_t j = 0; j < k->o.nonly; j++)
        if (!k->full[j])
            return 0;
    return 1;
}

static tq_status flush_batch(text_sink *k)
{
    tq_status st = TQ_OK;
    const held **g = k->group;
    int used[64], *u = k->npend <= 64 ? used : calloc(k->npend, sizeof *u);
    if (!u)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memset(u, 0, k->npend * sizeof *u);
    for (size_t i = 0; i < k->npend && !st; i++) {
        if (u[i])
            continue;
        size_t ng = 0;
        for (size_t j = i; j < k->npend; j++)
            if (!u[j] && k->pend[j].rows == k->pend[i].rows && !strcmp(k->pend[j].name, "key")) {
                g[ng++] = &k->pend[j];
                u[j] = 1;
            }
        for (size_t j = i; j < k->npend; j++)
            if (!u[j] && k->pend[j].rows == k->pend[i].rows) {
                g[ng++] = &k->pend[j];
                u[j] = 1;
            }
        st = emit_group(k, g, ng);
    }
    if (u != used)
        free(u);
    k->npend = 0;
    return st;
}

/* ---------------------------------------------------------------- sink */

static int in_names(const name_t *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return 1;
    return 0;
}

static tq_status fix_layout(text_sink *k)
{
    if (k->npend > k->cap_layout) {
        name_t *n = realloc(k->layout, k->npend * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        k->layout = n;
        k->cap_layout = k->npend;
    }
    for (size_t i = 0; i < k->npend; i++)
        memcpy(k->layout[i], k->pend[i].name, sizeof(name_t));
    k->nlayout = k->npend;
    k->layout_fixed = 1;
    return TQ_OK;
}

static tq_status hold(text_sink *k, tq_frame *f)
{
    const void *raw;
    tq_status st = tq_frame_data(f, &raw);
    if (st)
        return st;
    if (k->npend == k->cap_pend) {
        size_t cap = k->cap_pend ? 2 * k->cap_pend : 4;
        held *n = realloc(k->pend, cap * sizeof *n);
        const held **g = n ? realloc(k->group, cap * sizeof *g) : NULL;
        if (n)
            k->pend = n;
        if (!g)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        memset(n + k->cap_pend, 0, (cap - k->cap_pend) * sizeof *n);
        k->group = g;
        k->cap_pend = cap;
    }
    held *h = &k->pend[k->npend];
    if (f->raw_size > h->cap) {
        unsigned char *d = realloc(h->data, (size_t)f->raw_size);
        if (!d)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for frame \"%s\"", f->name);
        h->data = d;
        h->cap = (size_t)f->raw_size;
    }
    if (f->raw_size)
        memcpy(h->data, raw, (size_t)f->raw_size);
    memcpy(h->name, f->name, sizeof h->name);
    h->dtype = f->dtype;
    h->rank = f->rank;
    memcpy(h->dims, f->dims, sizeof h->dims);
    h->rows = tq_frame_rows(f);
    h->row_elems = 1;
    for (int d = 1; d < f->rank; d++)
        h->row_elems *= f->dims[d];
    h->row_bytes = 0;
    if (f->dtype != TQ_DTYPE_STR) {
        int64_t one[TQ_MAX_RANK];
        memcpy(one, f->dims, sizeof one);
        one[0] = 1;
        tq_dtype_payload_bytes(f->dtype, f->rank, one, &h->row_bytes);
    }
    k->npend++;
    return TQ_OK;
}

static tq_status text_put(tq_sink *s, tq_frame *f)
{
    text_sink *k = (text_sink *)s;
    int again = 0;
    for (size_t i = 0; i < k->npend; i++)
        if (!strcmp(k->pend[i].name, f->name))
            again = 1;
    tq_status st = TQ_OK;
    if (again) {
        if (!k->layout_fixed)
            st = fix_layout(k);
        if (!st)
            st = flush_batch(k);
    } else if (k->layout_fixed && !in_names(k->layout, k->nlayout, f->name)) {
        k->layout_fixed = 0;
        st = flush_batch(k);
    }
    if (!st && all_full(k))
        return TQ_EOF; /* nothing later can print: the caller stops reading */
    return st ? st : hold(k, f);
}

static tq_status text_close(tq_sink *s, int commit)
{
    text_sink *k = (text_sink *)s;
    tq_status st = commit ? flush_batch(k) : TQ_OK;
    for (size_t i = 0; i < k->ntables; i++) {
        table *t = &k->tables[i];
        if (commit && !st && k->o.tail >= 0) {
            start_table(k, t);
            for (int64_t j = 0; j < t->ring_len; j++) {
                const kept *r = t->ring[(t->ring_next + j) % t->ring_len];
                fwrite(r->s, 1, r->len, k->out);
            }
            st = tq_io_file_status(k->out);
        }
        for (int64_t j = 0; j < t->ring_len; j++)
            free(t->ring[j]);
        free(t->ring);
        free(t->sig);
        free(t->header);
    }
    for (size_t i = 0; i < k->cap_pend; i++)
        free(k->pend[i].data);
    free(k->pend);
    free(k->group);
    free(k->layout);
    free(k->tables);
    free(k->conv);
    free(k->full);
    tq_buf_free(&k->line);
    free(k);
    return st;
}

tq_status tq_sink_text(tq_sink **s, FILE *out, const tq_text_opts *o)
{
    text_sink *k = calloc(1, sizeof *k);
    if (!k)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    k->base.put = text_put;
    k->base.close = text_close;
    k->out = out;
    k->o = *o;
    k->current = -1;
    if (o->head >= 0 && o->nonly && !(k->full = calloc(o->nonly, 1))) {
        free(k);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    *s = &k->base;
    return TQ_OK;
}
