/* safetensors_out.c: a u64 header size, the JSON header, the data, each
 * tensor in one piece with no gap between (the format allows none), through
 * tq_outfile: a failed write leaves no file behind. */
#include "safetensors_out.h"
#include "io.h"
#include "internal.h"

#include <stdio.h>

static uint64_t bytes_of(const tq_st_out *t)
{
    uint64_t n = tq_dtype_size(t->dtype);
    for (int i = 0; i < t->rank; i++)
        n *= (uint64_t)t->dims[i];
    return n;
}

/* The order the data goes in: by falling element size, else as given. */
static size_t *data_order(const tq_st_out *t, size_t n)
{
    size_t *o = malloc((n ? n : 1) * sizeof *o), k = 0;
    for (size_t sz = 8; o && sz >= 1; sz /= 2)
        for (size_t i = 0; i < n; i++)
            if (tq_dtype_size(t[i].dtype) == sz)
                o[k++] = i;
    return o;
}

/* A JSON string literal of s (the names are tq's own, but quote what needs it). */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++)
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    fputc('"', f);
}

/* The header's JSON into *h (malloc'd), *hn bytes, padded with spaces to 8 */
static tq_status header(const tq_st_out *t, size_t n, const size_t *order,
                        const char *const *meta, size_t nmeta, char **h, size_t *hn)
{
    FILE *f = open_memstream(h, hn);
    if (!f)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    fputs("{\"__metadata__\":{", f);
    for (size_t i = 0; i < nmeta; i++) {
        if (i)
            fputc(',', f);
        json_str(f, meta[2 * i]);
        fputc(':', f);
        json_str(f, meta[2 * i + 1]);
    }
    fputc('}', f);
    uint64_t off = 0;
    for (size_t k = 0; k < n; k++) {
        const tq_st_out *e = &t[order[k]];
        uint64_t b = bytes_of(e);
        fputc(',', f);
        json_str(f, e->name);
        fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", tq_safetensors_dtype_name(e->dtype));
        for (int i = 0; i < e->rank; i++)
            fprintf(f, "%s%lld", i ? "," : "", (long long)e->dims[i]);
        fprintf(f, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                (unsigned long long)(off + b));
        off += b;
    }
    fputc('}', f);
    /* the data starts 8-aligned: spaces, as the format allows */
    long len = ftell(f);
    while (len >= 0 && len % 8)
        fputc(' ', f), len++;
    int bad = ferror(f) | (len < 0);
    if (fclose(f) || bad) {
        free(*h);
        *h = NULL;
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

tq_status tq_st_write(const char *path, const tq_st_out *t, size_t n, const char *const *meta,
                      size_t nmeta)
{
    for (size_t i = 0; i < n; i++)
        if (!tq_safetensors_dtype_name(t[i].dtype) || t[i].rank > 4)
            return tq_fail(TQ_ERR_USAGE, "%s: tensor \"%s\": no safetensors dtype for %s", path,
                           t[i].name, tq_dtype_name(t[i].dtype));
    size_t *order = data_order(t, n);
    if (!order)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    char *h = NULL;
    size_t hn = 0;
    tq_status st = header(t, n, order, meta, nmeta, &h, &hn);
    tq_outfile *o = NULL;
    if (!st)
        st = tq_outfile_open(&o, path);
    unsigned char size[8];
    for (int i = 0; i < 8; i++)
        size[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    if (!st)
        st = tq_outfile_write(o, size, 8);
    if (!st)
        st = tq_outfile_write(o, h, hn);
    for (size_t k = 0; !st && k < n; k++)
        st = tq_outfile_write(o, t[order[k]].data, (size_t)bytes_of(&t[order[k]]));
    if (o) {
        tq_status cst = tq_outfile_close(o, !st);
        st = st ? st : cst;
    }
    free(h);
    free(order);
    return st;
}
