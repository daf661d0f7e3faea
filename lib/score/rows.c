/* rows.c: rows of an aligned frame, held until their group is scored. */
#include "rows.h"
#include "internal.h"

tq_status tq_rowcol_init(tq_rowcol *c, const tq_frame *f)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", f->name);
    c->dtype = f->dtype;
    c->rank = f->rank;
    memcpy(c->dims, f->dims, sizeof c->dims);
    if (f->dtype != TQ_DTYPE_STR) {
        if (f->rank == 1 && !tq_dtype_size(f->dtype))
            return tq_fail(TQ_ERR_DATA,
                           "frame %llu \"%s\": rows of a rank-1 %s frame cannot be split",
                           (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype));
        tq_status st = tq_dtype_payload_bytes(f->dtype, f->rank - 1, f->dims + 1, &c->row_bytes);
        if (st)
            return st;
    }
    if (f->meta_len) {
        if (!(c->meta = malloc(f->meta_len)))
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        memcpy(c->meta, f->meta, f->meta_len);
        c->meta_len = f->meta_len;
    }
    return TQ_OK;
}

static tq_status reserve(tq_rowcol *c, size_t bytes, int64_t rows)
{
    if (c->len + bytes > c->cap || !c->data) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + bytes)
            cap *= 2;
        unsigned char *n = realloc(c->data, cap);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory holding rows of \"%s\"", c->name);
        c->data = n, c->cap = cap;
    }
    if (c->dtype == TQ_DTYPE_STR && c->n + rows > c->cap_rows) {
        int64_t cap = c->cap_rows ? c->cap_rows : 256;
        while (cap < c->n + rows)
            cap *= 2;
        uint64_t *e = realloc(c->ends, (size_t)cap * sizeof *e);
        if (!e)
            return tq_fail(TQ_ERR_NOMEM, "out of memory holding rows of \"%s\"", c->name);
        c->ends = e, c->cap_rows = cap;
    }
    return TQ_OK;
}

tq_status tq_rowcol_append(tq_rowcol *c, tq_frame *f)
{
    const unsigned char *p;
    tq_status st = tq_frame_data(f, (const void **)&p);
    if (st)
        return st;
    int64_t n = f->dims[0];
    if (c->dtype != TQ_DTYPE_STR) {
        size_t bytes = (size_t)n * c->row_bytes;
        if ((st = reserve(c, bytes, n)))
            return st;
        if (bytes)
            memcpy(c->data + c->len, p, bytes);
        c->len += bytes;
        c->n += n;
        return TQ_OK;
    }
    /* str: n+1 offsets, then the bytes (the reader has checked them) */
    uint64_t total = tq_le64(p + 8 * (uint64_t)n);
    if ((st = reserve(c, (size_t)total, n)))
        return st;
    if (total)
        memcpy(c->data + c->len, p + 8 * ((uint64_t)n + 1), (size_t)total);
    for (int64_t i = 0; i < n; i++)
        c->ends[c->n + i] = c->len + tq_le64(p + 8 * (uint64_t)(i + 1));
    c->len += (size_t)total;
    c->n += n;
    return TQ_OK;
}

const void *tq_rowcol_row(const tq_rowcol *c, int64_t i)
{
    return c->data + (uint64_t)i * c->row_bytes;
}

static uint64_t str_start(const tq_rowcol *c, int64_t i) { return i ? c->ends[i - 1] : 0; }

tq_status tq_rowcol_write(const tq_rowcol *c, const int64_t *idx, int64_t k, tq_writer *w)
{
    int64_t dims[TQ_MAX_RANK];
    memcpy(dims, c->dims, sizeof dims);
    dims[0] = k;
    uint64_t bytes = 0;
    if (c->dtype == TQ_DTYPE_STR) {
        bytes = 8 * ((uint64_t)k + 1);
        for (int64_t i = 0; i < k; i++)
            bytes += c->ends[idx[i]] - str_start(c, idx[i]);
    } else {
        bytes = (uint64_t)k * c->row_bytes;
    }
    unsigned char *out = malloc(bytes ? (size_t)bytes : 1);
    if (!out)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (c->dtype == TQ_DTYPE_STR) {
        uint64_t at = 0, head = 8 * ((uint64_t)k + 1);
        tq_put64(out, 0);
        for (int64_t i = 0; i < k; i++) {
            uint64_t s = str_start(c, idx[i]), l = c->ends[idx[i]] - s;
            if (l)
                memcpy(out + head + at, c->data + s, (size_t)l);
            at += l;
            tq_put64(out + 8 * (uint64_t)(i + 1), at);
        }
    } else {
        for (int64_t i = 0; i < k; i++)
            memcpy(out + (uint64_t)i * c->row_bytes, tq_rowcol_row(c, idx[i]), c->row_bytes);
    }
    tq_status st = tq_writer_write(w, c->name, c->dtype, c->rank, dims, c->meta, c->meta_len,
                                   out, bytes);
    free(out);
    return st;
}

void tq_rowcol_drop(tq_rowcol *c, int64_t n)
{
    if (n <= 0)
        return;
    size_t cut = c->dtype == TQ_DTYPE_STR ? (size_t)c->ends[n - 1] : (size_t)n * c->row_bytes;
    memmove(c->data, c->data + cut, c->len - cut);
    c->len -= cut;
    if (c->dtype == TQ_DTYPE_STR)
        for (int64_t i = n; i < c->n; i++)
            c->ends[i - n] = c->ends[i] - cut;
    c->n -= n;
}

void tq_rowcol_free(tq_rowcol *c)
{
    free(c->data);
    free(c->ends);
    free(c->meta);
    memset(c, 0, sizeof *c);
}
