/* frame.c: the frame header (encoding, checks shared by reader and writer) and
 * the accessors of a frame: rows, metadata, strings, lazy decompression. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

uint32_t tq_header_crc(const unsigned char *hdr, size_t header_len)
{
    uint32_t crc = tq_crc32c(0, hdr, 44);
    return tq_crc32c(crc, hdr + TQ_FIXED_HEADER, header_len - TQ_FIXED_HEADER);
}

size_t tq_header_encode(unsigned char *hdr, const tq_frame *f, uint32_t payload_crc)
{
    size_t name_len = strlen(f->name);
    size_t len = tq_align_up(TQ_FIXED_HEADER + 8 * (size_t)f->rank + name_len + f->meta_len);
    memset(hdr, 0, len);
    memcpy(hdr, TQ_MAGIC, 4);
    tq_put16(hdr + 4, TQ_FORMAT_VERSION);
    tq_put16(hdr + 6, (uint16_t)f->dtype);
    hdr[8] = (unsigned char)f->rank;
    hdr[9] = (unsigned char)f->flags;
    tq_put16(hdr + 10, (uint16_t)name_len);
    tq_put32(hdr + 12, (uint32_t)f->meta_len);
    tq_put32(hdr + 16, (uint32_t)len);
    tq_put32(hdr + 20, payload_crc);
    tq_put64(hdr + 24, f->stored_size);
    tq_put64(hdr + 32, f->raw_size);
    unsigned char *p = hdr + TQ_FIXED_HEADER;
    for (int i = 0; i < f->rank; i++, p += 8)
        tq_put64(p, (uint64_t)f->dims[i]);
    memcpy(p, f->name, name_len);
    if (f->meta_len)
        memcpy(p + name_len, f->meta, f->meta_len);
    tq_put32(hdr + 44, tq_header_crc(hdr, len));
    return len;
}

tq_status tq_name_check(const char *name, size_t len)
{
    if (len == 0)
        return tq_fail(TQ_ERR_DATA, "empty frame name");
    if (len > TQ_MAX_NAME)
        return tq_fail(TQ_ERR_DATA, "frame name of %zu bytes is over the limit of %d",
                       len, TQ_MAX_NAME);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        /* printable names: they appear in tables, TSV headers and messages */
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
            return tq_fail(TQ_ERR_DATA, "frame name has a control, quote or backslash character");
    }
    return TQ_OK;
}

tq_status tq_meta_check(const char *meta, size_t len)
{
    if (len == 0)
        return TQ_OK;
    if (len > TQ_MAX_META)
        return tq_fail(TQ_ERR_DATA, "metadata of %zu bytes is over the limit of %d", len,
                       TQ_MAX_META);
    if (meta[len - 1] != 0)
        return tq_fail(TQ_ERR_DATA, "metadata does not end with a NUL");
    for (size_t i = 0; i < len;) {
        size_t n = strlen(meta + i);
        const char *eq = memchr(meta + i, '=', n);
        if (!eq || eq == meta + i)
            return tq_fail(TQ_ERR_DATA, "metadata entry %zu is not key=value", i);
        i += n + 1;
    }
    return TQ_OK;
}

tq_status tq_str_check(const void *raw, uint64_t raw_size, int64_t n)
{
    const unsigned char *p = raw;
    if (n < 0 || (uint64_t)n >= raw_size / 8)
        return tq_fail(TQ_ERR_DATA, "str payload of %llu bytes cannot hold %lld offsets",
                       (unsigned long long)raw_size, (long long)n + 1);
    uint64_t base = 8 * ((uint64_t)n + 1), prev = 0;
    if (tq_le64(p) != 0)
        return tq_fail(TQ_ERR_DATA, "str offsets do not start at 0");
    for (int64_t i = 1; i <= n; i++) {
        uint64_t o = tq_le64(p + 8 * i);
        if (o < prev || o > raw_size - base)
            return tq_fail(TQ_ERR_DATA, "str offset %lld is out of order or range", (long long)i);
        prev = o;
    }
    if (prev != raw_size - base)
        return tq_fail(TQ_ERR_DATA, "str offsets end at %llu, the payload holds %llu bytes",
                       (unsigned long long)prev, (unsigned long long)(raw_size - base));
    /* UTF-8: structure only (lead and continuation bytes), no overlong forms */
    const unsigned char *s = p + base, *end = s + prev;
    while (s < end) {
        unsigned char c = *s;
        int k = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 && c >= 0xc2 ? 1 : (c & 0xf0) == 0xe0 ? 2
              : (c & 0xf8) == 0xf0 && c <= 0xf4 ? 3 : -1;
        if (k < 0 || end - s <= k)
            return tq_fail(TQ_ERR_DATA, "str payload is not valid UTF-8 at byte %lld",
                           (long long)(s - p));
        for (int j = 1; j <= k; j++)
            if ((s[j] & 0xc0) != 0x80)
                return tq_fail(TQ_ERR_DATA, "str payload is not valid UTF-8 at byte %lld",
                               (long long)(s - p));
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xf0 && s[1] < 0x90) ||
            (c == 0xf4 && s[1] > 0x8f) || (c == 0xed && s[1] > 0x9f))
            return tq_fail(TQ_ERR_DATA, "str payload is not valid UTF-8 at byte %lld",
                           (long long)(s - p));
        s += k + 1;
    }
    return TQ_OK;
}

int64_t tq_frame_rows(const tq_frame *f) { return f->rank ? f->dims[0] : 1; }

const char *tq_frame_meta_get(const tq_frame *f, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < f->meta_len;) {
        const char *e = f->meta + i;
        if (strncmp(e, key, kl) == 0 && e[kl] == '=')
            return e + kl + 1;
        i += strlen(e) + 1;
    }
    return NULL;
}

tq_status tq_frame_inflate(tq_frame *f, int keep)
{
    /* Kept output grows with what the data really yields, up to raw_size, so a
     * header that lies about its size cannot make us allocate it up front; a
     * check without keeping inflates into one small window, over and over. */
    enum { WINDOW = 1 << 18 };
    size_t cap = f->raw_size < WINDOW ? (size_t)f->raw_size : WINDOW;
    unsigned char *out = malloc(cap ? cap : 1), *win = out;
    unsigned char spill[64]; /* catches output past raw_size */
    if (!out)
        return tq_fail(TQ_ERR_NOMEM, "out of memory inflating a payload");
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit(&z) != Z_OK) {
        free(out);
        return tq_fail(TQ_ERR_NOMEM, "zlib cannot start");
    }
    const unsigned char *in = f->stored;
    uint64_t in_left = f->stored_size, done = 0; /* done: bytes inflated in all */
    size_t at = 0;                               /* bytes used of the window or buffer */
    tq_status st = TQ_OK;
    for (;;) {
        unsigned char *dst;
        size_t room;
        if (done == f->raw_size) {
            dst = spill; /* any byte landing here is one too many */
            room = sizeof spill;
        } else {
            if (at == cap) {
                if (!keep) {
                    at = 0;
                } else {
                    size_t ncap = cap * 2 > f->raw_size ? (size_t)f->raw_size : cap * 2;
                    unsigned char *n = realloc(out, ncap);
                    if (!n) {
                        st = tq_fail(TQ_ERR_NOMEM, "out of memory inflating a payload");
                        break;
                    }
                    out = win = n;
                    cap = ncap;
                }
            }
            dst = win + at;
            room = cap - at;
            if (room > f->raw_size - done)
                room = (size_t)(f->raw_size - done);
        }
        uInt in_chunk = in_left > (1u << 30) ? (1u << 30) : (uInt)in_left;
        uInt out_chunk = room > (1u << 30) ? (1u << 30) : (uInt)room;
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = in_chunk;
        z.next_out = dst;
        z.avail_out = out_chunk;
        int zr = inflate(&z, Z_NO_FLUSH);
        uInt made = out_chunk - z.avail_out;
        in += in_chunk - z.avail_in;
        in_left -= in_chunk - z.avail_in;
        if (dst == spill && made) {
            st = tq_fail(TQ_ERR_DATA, "zlib payload inflates past its raw size of %llu",
                         (unsigned long long)f->raw_size);
            break;
        }
        done += made;
        if (dst != spill)
            at += made;
        if (zr == Z_STREAM_END) {
            if (in_left)
                st = tq_fail(TQ_ERR_DATA, "zlib payload has %llu bytes after its end",
                             (unsigned long long)in_left);
            else if (done != f->raw_size)
                st = tq_fail(TQ_ERR_DATA, "zlib payload inflates to %llu bytes, the header "
                             "says %llu", (unsigned long long)done,
                             (unsigned long long)f->raw_size);
            break;
        }
        if (zr == Z_MEM_ERROR) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory inflating a payload");
            break;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            st = tq_fail(TQ_ERR_DATA, "zlib payload is corrupt (%s)",
                         z.msg ? z.msg : zr == Z_NEED_DICT ? "wants a dictionary" : "bad data");
            break;
        }
        if (zr == Z_BUF_ERROR && !in_left) {
            st = tq_fail(TQ_ERR_DATA, "zlib payload is truncated after %llu bytes",
                         (unsigned long long)done);
            break;
        }
    }
    inflateEnd(&z);
    if (!st && keep && f->dtype == TQ_DTYPE_STR)
        st = tq_str_check(out, f->raw_size, f->dims[0]);
    if (st || !keep) {
        free(out);
        return st;
    }
    free(f->priv_raw);
    f->priv_raw = out;
    return TQ_OK;
}

tq_status tq_frame_data(tq_frame *f, const void **data)
{
    if (!(f->flags & TQ_FLAG_ZLIB)) {
        *data = f->stored;
        return TQ_OK;
    }
    if (!f->priv_raw) {
        tq_status st = tq_frame_inflate(f, 1);
        if (st)
            return tq_fail_context(st, "frame %llu \"%s\", byte %llu",
                                   (unsigned long long)f->index, f->name,
                                   (unsigned long long)f->offset);
    }
    *data = f->priv_raw;
    return TQ_OK;
}

tq_status tq_frame_str(tq_frame *f, int64_t i, const char **s, size_t *len)
{
    const void *raw;
    if (f->dtype != TQ_DTYPE_STR)
        return tq_fail(TQ_ERR_USAGE, "frame \"%s\" is not str", f->name);
    tq_status st = tq_frame_data(f, &raw);
    if (st)
        return st;
    if (i < 0 || i >= f->dims[0])
        return tq_fail(TQ_ERR_USAGE, "row %lld out of range", (long long)i);
    const unsigned char *p = raw;
    uint64_t a = tq_le64(p + 8 * i), b = tq_le64(p + 8 * (i + 1));
    *s = (const char *)p + 8 * ((uint64_t)f->dims[0] + 1) + a;
    *len = (size_t)(b - a);
    return TQ_OK;
}

void tq_frame_release(tq_frame *f)
{
    free(f->priv_raw);
    free(f->priv_buf);
    f->priv_raw = f->priv_buf = NULL;
    f->priv_cap = 0;
}

void tq_pipe_grow(int fd)
{
#ifdef F_SETPIPE_SZ
    /* 1 MiB: the default limit for unprivileged users (pipe-max-size) */
    fcntl(fd, F_SETPIPE_SZ, 1 << 20);
#else
    (void)fd;
#endif
}

ssize_t tq_read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got > (1u << 30) ? (1u << 30) : n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}
