/* tensor.c: dense tensors in a device's memory, and moving their bytes between
 * the host and the device. */
#include "backend.h"
#include "internal.h"

/* A tensor record of dtype dt and shape dims on dev, over no memory yet. */
static tq_tensor *tensor_record(tq_device *dev, tq_dtype dt, int rank, const int64_t *dims,
                                uint64_t bytes)
{
    tq_tensor *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->dtype = dt;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    t->dev = dev;
    t->nbytes = (size_t)bytes;
    return t;
}

tq_status tq_tensor_new(tq_device *dev, tq_dtype dt, int rank, const int64_t *dims,
                        tq_tensor **out)
{
    if (dt == TQ_DTYPE_STR)
        return tq_fail(TQ_ERR_USAGE, "str tensors live in frames, not on devices");
    uint64_t bytes;
    tq_status st = tq_dtype_payload_bytes(dt, rank, dims, &bytes);
    if (st)
        return tq_fail_context(TQ_ERR_USAGE, "new tensor");
    tq_tensor *t = tensor_record(dev, dt, rank, dims, bytes);
    if (!t)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    t->owns = 1;
    st = dev->backend->alloc(dev->ctx, t->nbytes, &t->buf);
    if (st) {
        free(t);
        return st;
    }
    *out = t;
    return TQ_OK;
}

tq_status tq_tensor_view(const tq_tensor *parent, size_t offset, tq_dtype dt, int rank,
                         const int64_t *dims, tq_tensor **out)
{
    uint64_t bytes;
    if (dt == TQ_DTYPE_STR || tq_dtype_payload_bytes(dt, rank, dims, &bytes))
        return tq_fail(TQ_ERR_USAGE, "view: bad dtype or shape");
    if (offset % 16 || offset > parent->nbytes || bytes > parent->nbytes - offset)
        return tq_fail(TQ_ERR_USAGE, "view of %llu bytes at %zu does not fit a tensor of %zu",
                       (unsigned long long)bytes, offset, parent->nbytes);
    tq_tensor *t = tensor_record(parent->dev, dt, rank, dims, bytes);
    if (!t)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    t->buf = parent->buf;
    t->offset = parent->offset + offset;
    *out = t;
    return TQ_OK;
}

tq_status tq_tensor_wrap_host(tq_device *dev, tq_dtype dt, int rank, const int64_t *dims,
                              void *host, tq_tensor **out)
{
    *out = NULL;
    uint64_t bytes;
    if (dt == TQ_DTYPE_STR || tq_dtype_payload_bytes(dt, rank, dims, &bytes) ||
        (uintptr_t)host % 16)
        return tq_fail(TQ_ERR_USAGE, "wrap: bad dtype, shape or alignment");
    if (dev->backend->kind != TQ_BACKEND_CPU)
        return TQ_OK;
    tq_tensor *t = tensor_record(dev, dt, rank, dims, bytes);
    if (!t)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    t->buf = host;
    *out = t;
    return TQ_OK;
}

void tq_tensor_free(tq_tensor *t)
{
    if (!t)
        return;
    if (t->derived)
        t->dev->backend->derived_free(t->derived);
    if (t->owns)
        t->dev->backend->free(t->dev->ctx, t->buf);
    free(t);
}

void tq_tensor_set_constant(tq_tensor *t) { t->constant = 1; }

int64_t tq_tensor_numel(const tq_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        n *= t->dims[i];
    return n;
}

void *tq_tensor_host(const tq_tensor *t)
{
    return t->dev->backend->kind == TQ_BACKEND_CPU ? (char *)t->buf + t->offset : NULL;
}

tq_status tq_tensor_upload(tq_tensor *t, const void *src, size_t nbytes)
{
    if (t->constant)
        return tq_fail(TQ_ERR_USAGE, "upload into a tensor declared constant");
    if (nbytes != t->nbytes)
        return tq_fail(TQ_ERR_USAGE, "upload of %zu bytes into a tensor of %zu", nbytes,
                       t->nbytes);
    return t->dev->backend->upload(t->dev->ctx, t->buf, t->offset, src, nbytes);
}

tq_status tq_tensor_download(const tq_tensor *t, void *dst, size_t nbytes)
{
    if (nbytes != t->nbytes)
        return tq_fail(TQ_ERR_USAGE, "download of %zu bytes from a tensor of %zu", nbytes,
                       t->nbytes);
    return t->dev->backend->download(t->dev->ctx, t->buf, t->offset, dst, nbytes);
}
