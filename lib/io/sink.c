/* sink.c: the simple sinks: the TQ stream itself (pass-through or recompressed),
 * a name filter in front of another sink, and the --info table of frames. */
#include "io.h"
#include "internal.h"

/* ---------------------------------------------------------------- stream */

typedef struct stream_sink {
    tq_sink base;
    tq_writer *w;
    int level;
    tq_catalog cat; /* imports are checked here as the reader checks streams */
} stream_sink;

static tq_status stream_put(tq_sink *s, tq_frame *f)
{
    stream_sink *k = (stream_sink *)s;
    size_t idx;
    tq_status st = tq_catalog_add(&k->cat, f, &idx);
    if (st)
        return st;
    return k->level < 0 ? tq_writer_put(k->w, f) : tq_writer_recompress(k->w, f, k->level);
}

static tq_status stream_close(tq_sink *s, int commit)
{
    stream_sink *k = (stream_sink *)s;
    tq_status st = tq_writer_close(k->w, commit);
    tq_catalog_free(&k->cat);
    free(k);
    return st;
}

tq_status tq_sink_stream(tq_sink **s, tq_writer *w, int level)
{
    stream_sink *k = calloc(1, sizeof *k);
    if (!k)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    k->base.put = stream_put;
    k->base.close = stream_close;
    k->w = w;
    k->level = level;
    *s = &k->base;
    return TQ_OK;
}

/* ---------------------------------------------------------------- select */

typedef struct select_sink {
    tq_sink base;
    tq_sink *inner;
    char *const *names;
    size_t n;
} select_sink;

static tq_status select_put(tq_sink *s, tq_frame *f)
{
    select_sink *k = (select_sink *)s;
    for (size_t i = 0; i < k->n; i++)
        if (!strcmp(k->names[i], f->name))
            return k->inner->put(k->inner, f);
    return TQ_OK;
}

static tq_status select_close(tq_sink *s, int commit)
{
    select_sink *k = (select_sink *)s;
    tq_status st = k->inner->close(k->inner, commit);
    free(k);
    return st;
}

tq_status tq_sink_select(tq_sink **s, tq_sink *inner, char *const *names, size_t n)
{
    select_sink *k = calloc(1, sizeof *k);
    if (!k)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    k->base.put = select_put;
    k->base.close = select_close;
    k->inner = inner;
    k->names = names;
    k->n = n;
    *s = &k->base;
    return TQ_OK;
}

/* ---------------------------------------------------------------- info */

typedef struct info_sink {
    tq_sink base;
    FILE *out;
    uint64_t index; /* imported frames carry no index: count them here */
} info_sink;

static void human(char *out, size_t n, uint64_t b)
{
    if (b >= 10u << 20)
        snprintf(out, n, "%.1fM", (double)b / (1 << 20));
    else if (b >= 10u << 10)
        snprintf(out, n, "%.1fK", (double)b / (1 << 10));
    else
        snprintf(out, n, "%llu", (unsigned long long)b);
}

static tq_status info_put(tq_sink *s, tq_frame *f)
{
    info_sink *k = (info_sink *)s;
    char shape[256] = "";
    size_t len = 0;
    for (int i = 0; i < f->rank && len < sizeof shape; i++)
        len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", i ? "x" : "",
                                (long long)f->dims[i]);
    if (f->rank == 0)
        snprintf(shape, sizeof shape, "scalar");
    char st[32], raw[32];
    human(st, sizeof st, f->stored_size);
    human(raw, sizeof raw, f->raw_size);
    fprintf(k->out, "%5llu  %-16s %-5s %-20s %9s %9s  %s\n", (unsigned long long)k->index++,
            f->name, tq_dtype_name(f->dtype), shape, st, raw,
            f->flags & TQ_FLAG_ZLIB ? "zlib" : "-");
    return tq_io_file_status(k->out);
}

static tq_status info_close(tq_sink *s, int commit)
{
    (void)commit;
    free(s);
    return TQ_OK;
}

tq_status tq_sink_info(tq_sink **s, FILE *out)
{
    info_sink *k = calloc(1, sizeof *k);
    if (!k)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    k->base.put = info_put;
    k->base.close = info_close;
    k->out = out;
    fprintf(out, "%5s  %-16s %-5s %-20s %9s %9s  %s\n", "frame", "name", "dtype", "shape",
            "stored", "raw", "codec");
    *s = &k->base;
    return TQ_OK;
}
