/* columns.c: frames built a row at a time by the text imports. */
#include "columns.h"
#include "internal.h"

void tq_column_init(tq_column *c, const char *name, tq_dtype dt, int rank,
                    const int64_t *row_dims)
{
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->dtype = dt;
    c->rank = rank;
    c->row_elems = 1;
    for (int d = 1; d < rank; d++) {
        c->dims[d] = row_dims[d - 1];
        c->row_elems *= (uint64_t)row_dims[d - 1];
    }
    c->row_bytes = c->row_elems * tq_dtype_size(dt);
}

void *tq_column_next_row(tq_column *c)
{
    uint64_t need = ((uint64_t)c->dims[0] + 1) * c->row_bytes;
    if (need > c->cap || !c->data) { /* rows of 0 bytes still get a pointer */
        size_t cap = c->cap ? 2 * c->cap : 4096;
        while (cap < need)
            cap *= 2;
        unsigned char *n = realloc(c->data, cap);
        if (!n)
            return NULL;
        c->data = n;
        c->cap = cap;
    }
    return c->data + (uint64_t)c->dims[0]++ * c->row_bytes;
}

tq_status tq_column_add_str(tq_column *c, const char *s, size_t n)
{
    /* str frames hold UTF-8: check each string as the format's reader will */
    unsigned char small[256], *one = n + 16 <= sizeof small ? small : malloc(n + 16);
    if (!one)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_put64(one, 0);
    tq_put64(one + 8, n);
    memcpy(one + 16, s, n);
    tq_status bad = tq_str_check(one, n + 16, 1);
    if (one != small)
        free(one);
    if (bad)
        return tq_fail(TQ_ERR_DATA, "a string that is not valid UTF-8");
    if ((size_t)c->dims[0] == c->cap_ends) {
        size_t cap = c->cap_ends ? 2 * c->cap_ends : 256;
        uint64_t *e = realloc(c->ends, cap * sizeof *e);
        if (!e)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        c->ends = e;
        c->cap_ends = cap;
    }
    tq_status st = tq_buf_add(&c->chars, s, n);
    if (st)
        return st;
    c->ends[c->dims[0]++] = c->chars.len;
    return TQ_OK;
}

tq_status tq_column_emit(tq_column *c, tq_sink *s)
{
    if (c->dims[0] == 0)
        return TQ_OK;
    tq_frame f;
    tq_status st;
    if (c->dtype == TQ_DTYPE_STR) {
        uint64_t n = (uint64_t)c->dims[0], head = 8 * (n + 1);
        unsigned char *p = malloc(head + c->chars.len);
        if (!p)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        tq_put64(p, 0);
        for (uint64_t i = 0; i < n; i++)
            tq_put64(p + 8 * (i + 1), c->ends[i]);
        if (c->chars.len)
            memcpy(p + head, c->chars.p, c->chars.len);
        tq_io_frame(&f, c->name, c->dtype, 1, c->dims, p, head + c->chars.len);
        st = s->put(s, &f);
        free(p);
        c->chars.len = 0;
    } else {
        tq_io_frame(&f, c->name, c->dtype, c->rank, c->dims, c->data,
                    (uint64_t)c->dims[0] * c->row_bytes);
        st = s->put(s, &f);
    }
    c->dims[0] = 0;
    return st;
}

void tq_column_free(tq_column *c)
{
    free(c->data);
    free(c->ends);
    tq_buf_free(&c->chars);
    memset(c, 0, sizeof *c);
}
