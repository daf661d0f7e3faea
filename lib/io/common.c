/* common.c: small pieces the io sinks and imports share: frames over raw data,
 * the default import batch, a text buffer, and the per-name shape catalog. */
#include "io.h"
#include "internal.h"

#include <errno.h>

void tq_io_frame(tq_frame *f, const char *name, tq_dtype dt, int rank, const int64_t *dims,
                 const void *data, uint64_t nbytes)
{
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->dtype = dt;
    f->rank = rank;
    memcpy(f->dims, dims, (size_t)rank * sizeof *dims);
    f->stored = data;
    f->stored_size = f->raw_size = nbytes;
}

int64_t tq_io_default_batch(uint64_t row_bytes)
{
    /* 16 MiB frames keep memory flat and stay large next to a frame header */
    uint64_t rows = row_bytes ? (16u << 20) / row_bytes : 65536;
    return rows < 1 ? 1 : rows > 65536 ? 65536 : (int64_t)rows;
}

tq_status tq_buf_reserve(tq_buf *b, size_t extra)
{
    if (b->len + extra <= b->cap)
        return TQ_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    b->p = p;
    b->cap = cap;
    return TQ_OK;
}

tq_status tq_buf_add(tq_buf *b, const void *p, size_t n)
{
    tq_status st = tq_buf_reserve(b, n + 1);
    if (st)
        return st;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
    return TQ_OK;
}

tq_status tq_buf_json(tq_buf *b, const char *s, size_t n)
{
    tq_status st = tq_buf_reserve(b, 6 * n + 3);
    if (st)
        return st;
    b->p[b->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                      : c == '\t' ? "\\t" : c == '\r' ? "\\r" : c == '\b' ? "\\b"
                      : c == '\f' ? "\\f" : NULL;
        if (e) {
            memcpy(b->p + b->len, e, 2);
            b->len += 2;
        } else if (c < 0x20) {
            b->len += (size_t)snprintf(b->p + b->len, 7, "\\u%04x", c);
        } else {
            b->p[b->len++] = (char)c;
        }
    }
    b->p[b->len++] = '"';
    return TQ_OK;
}

void tq_buf_free(tq_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

tq_status tq_catalog_add(tq_catalog *c, const tq_frame *f, size_t *idx)
{
    for (size_t i = 0; i < c->n; i++) {
        tq_tensor_entry *e = &c->e[i];
        if (strcmp(e->name, f->name))
            continue;
        if (e->dtype != f->dtype || e->rank != f->rank)
            return tq_fail(TQ_ERR_DATA, "frame \"%s\" is %s rank %d, its earlier batches "
                                        "%s rank %d",
                           f->name, tq_dtype_name(f->dtype), f->rank,
                           tq_dtype_name(e->dtype), e->rank);
        for (int d = 1; d < f->rank; d++)
            if (e->dims[d] != f->dims[d])
                return tq_fail(TQ_ERR_DATA,
                               "frame \"%s\": dim %d is %lld, the earlier batches have %lld",
                               f->name, d, (long long)f->dims[d], (long long)e->dims[d]);
        e->dims[0] += tq_frame_rows(f);
        e->frames++;
        *idx = i;
        return TQ_OK;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 8;
        tq_tensor_entry *n = realloc(c->e, cap * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        c->e = n;
        c->cap = cap;
    }
    tq_tensor_entry *e = &c->e[c->n];
    memset(e, 0, sizeof *e);
    memcpy(e->name, f->name, sizeof e->name);
    e->dtype = f->dtype;
    e->rank = f->rank;
    memcpy(e->dims, f->dims, sizeof e->dims);
    e->dims[0] = tq_frame_rows(f);
    e->frames = 1;
    *idx = c->n++;
    return TQ_OK;
}

void tq_catalog_free(tq_catalog *c)
{
    free(c->e);
    memset(c, 0, sizeof *c);
}

tq_status tq_io_file_status(FILE *out)
{
    if (!ferror(out))
        return TQ_OK;
    if (errno == EPIPE)
        return tq_fail(TQ_ERR_PIPE, "reader went away");
    return tq_fail(TQ_ERR_IO, "write failed: %s", strerror(errno));
}

tq_status tq_io_name_check(const char *name) { return tq_name_check(name, strlen(name)); }
