/* writer.c: writes TQ streams: frames passed through byte for byte, or new
 * frames from data (optionally zlib-compressed); files are written atomically. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#define WRITE_BUF (256u << 10)

struct tq_writer {
    int fd;
    int own;
    char label[256];
    char *path, *tmp;     /* atomic output: final and temporary paths */
    unsigned char *buf;
    size_t len;
    int level;            /* zlib level for new frames, 0 = none */
    unsigned char *hdr;
    tq_status failed;     /* sticky: once a write failed, later ones fail too */
};

static tq_status write_all(tq_writer *w, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(w->fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EPIPE)
                return w->failed = tq_fail(TQ_ERR_PIPE, "%s: reader went away", w->label);
            return w->failed = tq_fail(TQ_ERR_IO, "%s: write failed: %s", w->label,
                                       strerror(errno));
        }
        c += k;
        n -= (size_t)k;
    }
    return TQ_OK;
}

tq_status tq_writer_flush(tq_writer *w)
{
    if (w->failed)
        return w->failed;
    tq_status st = write_all(w, w->buf, w->len);
    w->len = 0;
    return st;
}

/* Buffers small pieces; a large piece goes out directly after the buffer. */
static tq_status emit(tq_writer *w, const void *p, size_t n)
{
    if (w->failed)
        return w->failed;
    if (w->len + n <= WRITE_BUF) {
        if (n)
            memcpy(w->buf + w->len, p, n);
        w->len += n;
        return TQ_OK;
    }
    tq_status st = tq_writer_flush(w);
    if (st)
        return st;
    if (n >= WRITE_BUF / 2)
        return write_all(w, p, n);
    memcpy(w->buf, p, n);
    w->len = n;
    return TQ_OK;
}

static const unsigned char zeros[TQ_ALIGN];

static tq_status emit_frame(tq_writer *w, const void *hdr, size_t hdr_len,
                            const void *payload, uint64_t stored)
{
    tq_status st = emit(w, hdr, hdr_len);
    if (!st)
        st = emit(w, payload, (size_t)stored);
    if (!st)
        st = emit(w, zeros, (size_t)(tq_align_up(stored) - stored));
    return st;
}

static tq_status writer_new(tq_writer **out, int fd, const char *label)
{
    tq_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->buf = malloc(WRITE_BUF)) || !(w->hdr = malloc(TQ_MAX_HEADER))) {
        if (w)
            free(w->buf);
        free(w);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    w->fd = fd;
    snprintf(w->label, sizeof w->label, "%s", !label || !strcmp(label, "-") ? "stdout" : label);
    tq_pipe_grow(fd);
    *out = w;
    return TQ_OK;
}

tq_status tq_writer_open_fd(tq_writer **out, int fd, const char *label)
{
    return writer_new(out, fd, label);
}

tq_status tq_writer_open_path(tq_writer **out, const char *path)
{
    if (!strcmp(path, "-"))
        return writer_new(out, 1, "stdout");
    int fd;
    char *tmp;
    tq_status st = tq_atomic_open(path, &fd, &tmp);
    if (st)
        return st;
    st = writer_new(out, fd, path);
    if (st) {
        close(fd);
        return tq_atomic_finish(tmp, path, 0, st);
    }
    (*out)->own = 1;
    (*out)->tmp = tmp;
    if (!((*out)->path = strdup(path))) {
        tq_writer_close(*out, 0);
        *out = NULL;
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

void tq_writer_set_compress(tq_writer *w, int level) { w->level = level < 0 ? 0 : level > 9 ? 9 : level; }

/* Encodes and writes a frame whose fields are known to be valid. */
static tq_status put_new(tq_writer *w, const tq_frame *f)
{
    uint32_t crc = tq_crc32c(0, f->stored, (size_t)f->stored_size);
    size_t hl = tq_header_encode(w->hdr, f, crc);
    return emit_frame(w, w->hdr, hl, f->stored, f->stored_size);
}

/* Checks the shape against the raw size: what the reader checks. */
static tq_status check_shape(const char *name, tq_dtype dt, int rank, const int64_t *dims,
                             uint64_t raw_size)
{
    if (!tq_dtype_name(dt) || rank < 0 || rank > TQ_MAX_RANK || (rank && !dims))
        return tq_fail(TQ_ERR_USAGE, "frame \"%s\": bad dtype or rank", name);
    if (dt == TQ_DTYPE_STR) {
        if (rank != 1 || dims[0] < 0 || (uint64_t)dims[0] >= raw_size / 8 ||
            raw_size > TQ_MAX_FRAME_BYTES)
            return tq_fail(TQ_ERR_USAGE, "frame \"%s\": a str frame has rank 1 and room for "
                           "its offsets", name);
        return TQ_OK;
    }
    uint64_t want;
    if (tq_dtype_payload_bytes(dt, rank, dims, &want))
        return tq_fail_context(TQ_ERR_USAGE, "frame \"%s\"", name);
    if (want != raw_size)
        return tq_fail(TQ_ERR_USAGE, "frame \"%s\": %llu bytes given, the shape needs %llu",
                       name, (unsigned long long)raw_size, (unsigned long long)want);
    return TQ_OK;
}

/* A frame made by the caller gets every check the reader makes, so that the
 * writer never writes a stream the reader would refuse. */
static tq_status check_frame(const tq_frame *f)
{
    size_t nl = strnlen(f->name, sizeof f->name);
    if (nl == sizeof f->name)
        return tq_fail(TQ_ERR_USAGE, "frame name is not NUL-terminated");
    if (tq_name_check(f->name, nl))
        return TQ_ERR_USAGE;
    if ((f->meta_len && !f->meta) || tq_meta_check(f->meta, f->meta_len))
        return tq_fail_context(TQ_ERR_USAGE, "frame \"%s\": metadata", f->name);
    if (f->flags & ~TQ_FLAG_ZLIB)
        return tq_fail(TQ_ERR_USAGE, "frame \"%s\": unknown flags 0x%x", f->name, f->flags);
    tq_status st = check_shape(f->name, f->dtype, f->rank, f->dims, f->raw_size);
    if (st)
        return st;
    if (f->stored_size > TQ_MAX_FRAME_BYTES || (f->stored_size && !f->stored))
        return tq_fail(TQ_ERR_USAGE, "frame \"%s\": no stored bytes or too many",
                       f->name);
    if (!(f->flags & TQ_FLAG_ZLIB)) {
        if (f->stored_size != f->raw_size)
            return tq_fail(TQ_ERR_USAGE, "frame \"%s\": stored size %llu differs from raw "
                           "size %llu without zlib", f->name,
                           (unsigned long long)f->stored_size, (unsigned long long)f->raw_size);
        if (f->dtype == TQ_DTYPE_STR && tq_str_check(f->stored, f->raw_size, f->dims[0]))
            return tq_fail_context(TQ_ERR_USAGE, "frame \"%s\"", f->name);
        return TQ_OK;
    }
    tq_frame probe = *f; /* inflating checks the zlib stream; keeps nothing of f */
    probe.priv_raw = probe.priv_buf = NULL;
    st = tq_frame_inflate(&probe, f->dtype == TQ_DTYPE_STR);
    free(probe.priv_raw);
    return st ? tq_fail_context(st == TQ_ERR_DATA ? TQ_ERR_USAGE : st, "frame \"%s\"", f->name)
              : TQ_OK;
}

tq_status tq_writer_put(tq_writer *w, const tq_frame *f)
{
    if (f->priv_hdr) /* read and checked by a reader: the bytes as they were */
        return emit_frame(w, f->priv_hdr, f->priv_hdr_len, f->stored, f->stored_size);
    tq_status st = check_frame(f);
    return st ? st : put_new(w, f);
}

static tq_status write_level(tq_writer *w, const char *name, tq_dtype dt, int rank,
                             const int64_t *dims, const char *meta, size_t meta_len,
                             const void *data, uint64_t nbytes, int level)
{
    tq_frame f;
    memset(&f, 0, sizeof f);
    if (!name)
        return tq_fail(TQ_ERR_USAGE, "frame without a name");
    size_t nl = strlen(name);
    if (tq_name_check(name, nl))
        return TQ_ERR_USAGE;
    if ((meta_len && !meta) || tq_meta_check(meta, meta_len))
        return tq_fail_context(TQ_ERR_USAGE, "frame \"%s\": metadata", name);
    if (nbytes && !data)
        return tq_fail(TQ_ERR_USAGE, "frame \"%s\": no data for %llu bytes", name,
                       (unsigned long long)nbytes);
    tq_status st = check_shape(name, dt, rank, dims, nbytes);
    if (st)
        return st;
    if (dt == TQ_DTYPE_STR && tq_str_check(data, nbytes, dims[0]))
        return tq_fail_context(TQ_ERR_USAGE, "frame \"%s\"", name);
    memcpy(f.name, name, nl + 1);
    f.dtype = dt;
    f.rank = rank;
    if (rank)
        memcpy(f.dims, dims, (size_t)rank * sizeof *dims);
    f.meta = meta;
    f.meta_len = meta_len;
    f.raw_size = nbytes;
    unsigned char *z = NULL;
    if (level > 0 && nbytes > 0) {
        uLongf zl = compressBound((uLong)nbytes);
        z = malloc(zl);
        if (!z)
            return tq_fail(TQ_ERR_NOMEM, "out of memory compressing \"%s\"", name);
        if (compress2(z, &zl, data, (uLong)nbytes, level) != Z_OK) {
            free(z);
            return tq_fail(TQ_ERR_RUNTIME, "zlib failed to compress \"%s\"", name);
        }
        f.flags = TQ_FLAG_ZLIB;
        f.stored = z;
        f.stored_size = zl;
    } else {
        f.stored = data;
        f.stored_size = nbytes;
    }
    st = put_new(w, &f);
    free(z);
    return st;
}

tq_status tq_writer_write(tq_writer *w, const char *name, tq_dtype dt, int rank,
                          const int64_t *dims, const char *meta, size_t meta_len,
                          const void *data, uint64_t nbytes)
{
    return write_level(w, name, dt, rank, dims, meta, meta_len, data, nbytes, w->level);
}

tq_status tq_writer_write_str(tq_writer *w, const char *name, int64_t n,
                              const char *const *s, const size_t *len)
{
    if (n < 0 || (n && (!s || !len)))
        return tq_fail(TQ_ERR_USAGE, "str frame \"%s\": bad row count or no strings",
                       name ? name : "");
    for (int64_t i = 0; i < n; i++)
        if (len[i] && !s[i])
            return tq_fail(TQ_ERR_USAGE, "str frame \"%s\": string %lld is NULL",
                           name ? name : "", (long long)i);
    uint64_t total = 8 * ((uint64_t)n + 1);
    for (int64_t i = 0; i < n; i++)
        total += len[i];
    unsigned char *p = malloc(total ? total : 1);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for str frame \"%s\"", name);
    uint64_t off = 0, base = 8 * ((uint64_t)n + 1);
    tq_put64(p, 0);
    for (int64_t i = 0; i < n; i++) {
        memcpy(p + base + off, s[i], len[i]);
        off += len[i];
        tq_put64(p + 8 * (i + 1), off);
    }
    int64_t dims[1] = {n};
    tq_status st = tq_writer_write(w, name, TQ_DTYPE_STR, 1, dims, NULL, 0, p, total);
    free(p);
    return st;
}

tq_status tq_writer_recompress(tq_writer *w, tq_frame *f, int level)
{
    const void *raw;
    tq_status st = tq_frame_data(f, &raw);
    if (st)
        return st;
    return write_level(w, f->name, f->dtype, f->rank, f->dims, f->meta, f->meta_len, raw,
                       f->raw_size, level);
}

tq_status tq_writer_close(tq_writer *w, int commit)
{
    if (!w)
        return TQ_OK;
    tq_status st = commit ? tq_writer_flush(w) : TQ_OK;
    if (w->own) {
        if (close(w->fd) && !st && commit)
            st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", w->label, strerror(errno));
    }
    st = tq_atomic_finish(w->tmp, w->path, commit, st);
    free(w->path);
    free(w->buf);
    free(w->hdr);
    free(w);
    return st;
}
