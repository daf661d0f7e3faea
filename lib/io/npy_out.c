/* npy_out.c: one tensor of a stream as a .npy file. Batches are written as they
 * come; the header, whose shape needs the total rows, is reserved first and
 * rewritten in place at the end, so memory stays at one frame. */
#include "npy.h"
#include "internal.h"

typedef struct npy_sink {
    tq_sink base;
    tq_outfile *out;
    tq_catalog cat;
    size_t width; /* bytes reserved for the header */
    uint64_t start; /* where the file starts in the output */
} npy_sink;

static tq_status npy_put(tq_sink *s, tq_frame *f)
{
    npy_sink *k = (npy_sink *)s;
    if (k->cat.n && strcmp(k->cat.e[0].name, f->name))
        return tq_fail(TQ_ERR_USAGE,
                       "the stream holds more than one tensor (\"%s\", \"%s\"): pick one "
                       "with --name",
                       k->cat.e[0].name, f->name);
    if (!tq_npy_descr(f->dtype))
        return tq_fail(TQ_ERR_DATA, "frame \"%s\" is %s, which .npy cannot hold%s", f->name,
                       tq_dtype_name(f->dtype),
                       f->dtype == TQ_DTYPE_BF16 ? " (--to safetensors keeps bf16)" : "");
    size_t idx;
    tq_status st = tq_catalog_add(&k->cat, f, &idx);
    if (st)
        return st;
    if (f->rank == 0 && k->cat.e[0].frames > 1)
        return tq_fail(TQ_ERR_DATA, "frame \"%s\": scalars (rank 0) cannot be concatenated",
                       f->name);
    if (k->cat.e[0].frames == 1) {
        /* room for the largest row count the header may have to say */
        char hdr[TQ_NPY_HEADER_MAX];
        int64_t dims[TQ_MAX_RANK];
        memcpy(dims, f->dims, sizeof dims);
        if (f->rank)
            dims[0] = INT64_MAX;
        k->width = tq_npy_format_header(hdr, f->dtype, f->rank, dims, 0);
        memset(hdr, 0, k->width);
        if ((st = tq_outfile_write(k->out, hdr, k->width)))
            return st;
    }
    const void *raw;
    if ((st = tq_frame_data(f, &raw)))
        return st;
    return tq_outfile_write(k->out, raw, (size_t)f->raw_size);
}

static tq_status npy_close(tq_sink *s, int commit)
{
    npy_sink *k = (npy_sink *)s;
    tq_status st = TQ_OK;
    if (commit && !k->cat.n)
        st = tq_fail(TQ_ERR_DATA, "no tensor to write to .npy");
    if (commit && !st) {
        char hdr[TQ_NPY_HEADER_MAX];
        tq_tensor_entry *e = &k->cat.e[0];
        size_t n = tq_npy_format_header(hdr, e->dtype, e->rank, e->dims, k->width);
        st = tq_outfile_pwrite(k->out, hdr, n, k->start);
    }
    tq_status cst = tq_outfile_close(k->out, commit && !st);
    tq_catalog_free(&k->cat);
    free(k);
    return st ? st : cst;
}

tq_status tq_sink_npy(tq_sink **s, const char *path)
{
    npy_sink *k = calloc(1, sizeof *k);
    if (!k)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_outfile_open(&k->out, path);
    if (!st && !tq_outfile_seekable(k->out)) {
        st = tq_fail(TQ_ERR_USAGE, "--to npy writes its header last: give -o FILE or "
                                   "redirect to a file, not a pipe");
        tq_outfile_close(k->out, 0);
    }
    if (st) {
        free(k);
        return st;
    }
    k->start = tq_outfile_tell(k->out);
    k->base.put = npy_put;
    k->base.close = npy_close;
    *s = &k->base;
    return TQ_OK;
}
