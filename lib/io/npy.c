/* npy.c: NumPy .npy files in: the header (versions 1.0, 2.0, 3.0), then the
 * data in row batches, straight through when it is little-endian C order,
 * byte-swapped when big-endian, gathered when in Fortran order. */
#include "npy.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPY_MAGIC "\x93NUMPY"

static const struct {
    tq_dtype dt;
    const char *descr; /* without the byte-order character */
} npy_types[] = {
    {TQ_DTYPE_F32, "f4"}, {TQ_DTYPE_F64, "f8"}, {TQ_DTYPE_F16, "f2"}, {TQ_DTYPE_I8, "i1"},
    {TQ_DTYPE_U8, "u1"},  {TQ_DTYPE_I16, "i2"}, {TQ_DTYPE_I32, "i4"}, {TQ_DTYPE_I64, "i8"},
};

const char *tq_npy_descr(tq_dtype dt)
{
    static const char *full[] = {"<f4", "<f8", "<f2", "|i1", "|u1", "<i2", "<i4", "<i8"};
    for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
        if (npy_types[i].dt == dt)
            return full[i];
    return NULL;
}

void tq_npy_swap(void *p, size_t n, size_t es)
{
    /* fixed-size loops the compiler turns into vector shuffles */
    if (es == 2) {
        uint16_t *u = p;
        for (size_t i = 0; i < n; i++)
            u[i] = __builtin_bswap16(u[i]);
    } else if (es == 4) {
        uint32_t *u = p;
        for (size_t i = 0; i < n; i++)
            u[i] = __builtin_bswap32(u[i]);
    } else if (es == 8) {
        uint64_t *u = p;
        for (size_t i = 0; i < n; i++)
            u[i] = __builtin_bswap64(u[i]);
    }
}

size_t tq_npy_format_header(char *buf, tq_dtype dt, int rank, const int64_t *dims,
                            size_t width)
{
    char shape[TQ_MAX_RANK * 24 + 4];
    size_t n = 0;
    shape[n++] = '(';
    for (int i = 0; i < rank; i++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", i ? ", " : "",
                              (long long)dims[i]);
    if (rank == 1)
        shape[n++] = ',';
    shape[n++] = ')';
    shape[n] = 0;
    size_t h = (size_t)snprintf(buf + 10, TQ_NPY_HEADER_MAX - 10,
                                "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                                tq_npy_descr(dt), shape);
    /* the data starts on a multiple of 64 bytes, as numpy writes it */
    size_t total = (10 + h + 1 + 63) / 64 * 64;
    if (width > total)
        total = width;
    memcpy(buf, NPY_MAGIC "\x01\x00", 8);
    tq_put16((unsigned char *)buf + 8, (uint16_t)(total - 10));
    memset(buf + 10 + h, ' ', total - 10 - h - 1);
    buf[total - 1] = '\n';
    return total;
}

/* ---------------------------------------------------------------- header */

typedef struct lit {
    const char *p, *end;
} lit;

static void skip_ws(lit *l)
{
    while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
        l->p++;
}

static int eat(lit *l, char c)
{
    skip_ws(l);
    if (l->p < l->end && *l->p == c) {
        l->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes, as numpy writes them. */
static int pystr(lit *l, char *out, size_t cap)
{
    skip_ws(l);
    if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
        return -1;
    char q = *l->p++;
    size_t n = 0;
    while (l->p < l->end && *l->p != q) {
        if (*l->p == '\\' || n + 1 >= cap)
            return -1;
        out[n++] = *l->p++;
    }
    if (l->p >= l->end)
        return -1;
    l->p++;
    out[n] = 0;
    return 0;
}

static tq_status bad_header(const char *label, const char *why)
{
    return tq_fail(TQ_ERR_DATA, "%s: not a valid .npy header: %s", label, why);
}

static tq_status parse_descr(const char *label, const char *d, tq_npy_header *h)
{
    char order = d[0];
    const char *t = d + 1;
    if (order != '<' && order != '>' && order != '|' && order != '=')
        order = '=', t = d;
    if (!strcmp(t, "b1")) { /* bool: one byte of 0 or 1 */
        h->dtype = TQ_DTYPE_U8;
        h->swap = 0;
        return TQ_OK;
    }
    for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
        if (!strcmp(t, npy_types[i].descr)) {
            h->dtype = npy_types[i].dt;
            size_t es = tq_dtype_size(h->dtype);
            int big = order == '>' || (order == '=' && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
            if (order == '|' && es > 1)
                return bad_header(label, "a multi-byte dtype without a byte order");
            h->swap = big && es > 1;
            return TQ_OK;
        }
    return tq_fail(TQ_ERR_DATA,
                   "%s: npy dtype '%s' has no tq dtype (tq reads f2 f4 f8 i1 u1 i2 i4 i8 b1)",
                   label, d);
}

static tq_status parse_dict(const char *label, const char *text, size_t len, tq_npy_header *h)
{
    lit l = {text, text + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(&l, '{'))
        return bad_header(label, "no dictionary");
    while (!eat(&l, '}')) {
        char key[32], val[64];
        if (pystr(&l, key, sizeof key) || !eat(&l, ':'))
            return bad_header(label, "a key that is not a string");
        skip_ws(&l);
        if (!strcmp(key, "descr")) {
            if (l.p < l.end && *l.p == '[')
                return tq_fail(TQ_ERR_DATA, "%s: structured npy dtypes are not supported",
                               label);
            if (pystr(&l, val, sizeof val))
                return bad_header(label, "descr is not a string");
            tq_status st = parse_descr(label, val, h);
            if (st)
                return st;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if ((size_t)(l.end - l.p) >= 4 && !memcmp(l.p, "True", 4))
                h->fortran = 1, l.p += 4;
            else if ((size_t)(l.end - l.p) >= 5 && !memcmp(l.p, "False", 5))
                h->fortran = 0, l.p += 5;
            else
                return bad_header(label, "fortran_order is not True or False");
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if (!eat(&l, '('))
                return bad_header(label, "shape is not a tuple");
            h->rank = 0;
            while (!eat(&l, ')')) {
                skip_ws(&l);
                char *end;
                errno = 0;
                long long v = strtoll(l.p, &end, 10);
                if (end == l.p || errno || v < 0)
                    return bad_header(label, "a dim that is not a count");
                if (h->rank == TQ_MAX_RANK)
                    return tq_fail(TQ_ERR_DATA, "%s: npy array of rank over %d", label,
                                   TQ_MAX_RANK);
                h->dims[h->rank++] = v;
                l.p = end;
                if (l.p < l.end && *l.p == 'L') /* Python 2 longs */
                    l.p++;
                if (!eat(&l, ',')) {
                    if (!eat(&l, ')'))
                        return bad_header(label, "shape is not a tuple of counts");
                    break;
                }
            }
            have_shape = 1;
        } else {
            return bad_header(label, "an unknown key");
        }
        if (!eat(&l, ',')) {
            if (!eat(&l, '}'))
                return bad_header(label, "no comma between entries");
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return bad_header(label, "descr, fortran_order or shape is missing");
    uint64_t bytes;
    if (tq_dtype_payload_bytes(h->dtype, h->rank, h->dims, &bytes))
        return tq_fail_context(TQ_ERR_DATA, "%s", label);
    return TQ_OK;
}

tq_status tq_npy_read_header(int fd, const char *label, tq_npy_header *h)
{
    unsigned char pre[12];
    memset(h, 0, sizeof *h);
    ssize_t got = tq_read_full(fd, pre, 10);
    if (got < 0)
        return tq_fail(TQ_ERR_IO, "%s: read failed: %s", label, strerror(errno));
    if (got < 10 || memcmp(pre, NPY_MAGIC, 6))
        return tq_fail(TQ_ERR_DATA, "%s: not a .npy file (no \\x93NUMPY magic)", label);
    unsigned major = pre[6];
    uint64_t hlen, pre_len = 10;
    if (major == 1) {
        hlen = tq_le16(pre + 8);
    } else if (major == 2 || major == 3) {
        if ((got = tq_read_full(fd, pre + 10, 2)) != 2)
            return got < 0 ? tq_fail(TQ_ERR_IO, "%s: read failed: %s", label, strerror(errno))
                           : tq_fail(TQ_ERR_DATA, "%s: truncated .npy header", label);
        hlen = tq_le32(pre + 8);
        pre_len = 12;
    } else {
        return tq_fail(TQ_ERR_DATA, "%s: .npy format version %u.%u is not supported", label,
                       major, pre[7]);
    }
    if (hlen > (1u << 20))
        return tq_fail(TQ_ERR_DATA, "%s: .npy header of %llu bytes is too large", label,
                       (unsigned long long)hlen);
    char *text = malloc(hlen + 1);
    if (!text)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    got = tq_read_full(fd, text, hlen);
    tq_status st = got == (ssize_t)hlen ? parse_dict(label, text, hlen, h)
                   : got < 0 ? tq_fail(TQ_ERR_IO, "%s: read failed: %s", label, strerror(errno))
                             : tq_fail(TQ_ERR_DATA, "%s: truncated .npy header", label);
    free(text);
    h->data_offset = pre_len + hlen;
    return st;
}

/* ---------------------------------------------------------------- import */

typedef struct npy_in {
    int fd;
    const char *label;
    tq_npy_header h;
    size_t es;
    uint64_t row_elems, row_bytes;
    const char *name;
    tq_sink *sink;
} npy_in;

static tq_status put_rows(npy_in *in, void *data, int64_t rows)
{
    int64_t dims[TQ_MAX_RANK];
    memcpy(dims, in->h.dims, sizeof dims);
    if (in->h.rank)
        dims[0] = rows;
    if (in->h.swap)
        tq_npy_swap(data, (size_t)((uint64_t)rows * in->row_elems), in->es);
    tq_frame f;
    tq_io_frame(&f, in->name, in->h.dtype, in->h.rank, dims, data,
                (uint64_t)rows * in->row_bytes);
    return in->sink->put(in->sink, &f);
}

static tq_status truncated(npy_in *in, uint64_t have, uint64_t want)
{
    return tq_fail(TQ_ERR_DATA, "%s: truncated .npy data: %llu of %llu bytes", in->label,
                   (unsigned long long)have, (unsigned long long)want);
}

/* C order: batches of rows read straight into the frame buffer. */
static tq_status import_c(npy_in *in, int64_t batch)
{
    int64_t rows = in->h.rank ? in->h.dims[0] : 1;
    size_t cap = (size_t)((uint64_t)(rows < batch ? rows : batch) * in->row_bytes);
    unsigned char *buf = malloc(cap ? cap : 1);
    if (!buf)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for a batch of %lld rows", (long long)batch);
    tq_status st = TQ_OK;
    uint64_t done = 0, want = (uint64_t)rows * in->row_bytes;
    int64_t r = 0;
    do {
        int64_t n = rows - r < batch ? rows - r : batch;
        size_t bytes = (size_t)((uint64_t)n * in->row_bytes);
        ssize_t got = tq_read_full(in->fd, buf, bytes);
        if (got < 0)
            st = tq_fail(TQ_ERR_IO, "%s: read failed: %s", in->label, strerror(errno));
        else if ((size_t)got < bytes)
            st = truncated(in, done + (uint64_t)got, want);
        else
            st = put_rows(in, buf, n);
        done += bytes;
        r += n;
    } while (!st && r < rows);
    free(buf);
    return st;
}

/* Fortran order: the whole array (mapped when it is a file), gathered into C
 * order one batch at a time. */
static tq_status import_fortran(npy_in *in, int64_t batch)
{
    int rank = in->h.rank;
    int64_t rows = in->h.dims[0];
    uint64_t total = (uint64_t)rows * in->row_bytes;
    struct stat sb;
    unsigned char *all = NULL;
    int mapped = 0;
    tq_status st = TQ_OK;
    if (!fstat(in->fd, &sb) && S_ISREG(sb.st_mode) && total) {
        if ((uint64_t)sb.st_size < in->h.data_offset + total)
            return truncated(in, (uint64_t)sb.st_size - in->h.data_offset, total);
        void *m = mmap(NULL, (size_t)(in->h.data_offset + total), PROT_READ, MAP_PRIVATE,
                       in->fd, 0);
        if (m != MAP_FAILED) {
            all = (unsigned char *)m + in->h.data_offset;
            mapped = 1;
            lseek(in->fd, (off_t)(in->h.data_offset + total), SEEK_SET);
        }
    }
    if (!mapped) {
        all = malloc(total ? (size_t)total : 1);
        if (!all)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for a Fortran-order array");
        ssize_t got = tq_read_full(in->fd, all, (size_t)total);
        if (got < 0)
            st = tq_fail(TQ_ERR_IO, "%s: read failed: %s", in->label, strerror(errno));
        else if ((uint64_t)got < total)
            st = truncated(in, (uint64_t)got, total);
    }
    /* foff[j]: where inner element j (C order over dims 1..) sits in a column-
     * major array, in units of dims[0] elements */
    uint64_t *foff = st ? NULL : malloc((in->row_elems ? in->row_elems : 1) * sizeof *foff);
    int64_t n0 = rows < batch ? rows : batch;
    unsigned char *buf = foff ? malloc(n0 ? (size_t)((uint64_t)n0 * in->row_bytes) : 1) : NULL;
    if (!st && !buf)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st) {
        int64_t idx[TQ_MAX_RANK] = {0};
        for (uint64_t j = 0; j < in->row_elems; j++) {
            uint64_t off = 0, stride = 1;
            for (int d = 1; d < rank; d++) {
                off += (uint64_t)idx[d] * stride;
                stride *= (uint64_t)in->h.dims[d];
            }
            foff[j] = off;
            for (int d = rank - 1; d >= 1; d--) {
                if (++idx[d] < in->h.dims[d])
                    break;
                idx[d] = 0;
            }
        }
    }
    for (int64_t r = 0; !st && (r < rows || r == 0); r += n0) {
        int64_t n = rows - r < batch ? rows - r : batch;
        for (int64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < in->row_elems; j++)
                memcpy(buf + ((uint64_t)i * in->row_elems + j) * in->es,
                       all + ((uint64_t)(r + i) + (uint64_t)rows * foff[j]) * in->es, in->es);
        st = put_rows(in, buf, n);
        if (rows == 0)
            break;
    }
    free(buf);
    free(foff);
    if (mapped)
        munmap(all - in->h.data_offset, (size_t)(in->h.data_offset + total));
    else
        free(all);
    return st;
}

tq_status tq_import_npy(const char *path, const tq_import_opts *o, tq_sink *s)
{
    npy_in in = {.fd = 0, .label = strcmp(path, "-") ? path : "stdin", .sink = s,
                 .name = o->name ? o->name : "x"};
    tq_status ost = tq_input_open(path, &in.fd);
    if (ost)
        return ost;
    tq_pipe_grow(in.fd);
    tq_status st = tq_npy_read_header(in.fd, in.label, &in.h);
    if (!st) {
        in.es = tq_dtype_size(in.h.dtype);
        in.row_elems = 1;
        for (int d = 1; d < in.h.rank; d++)
            in.row_elems *= (uint64_t)in.h.dims[d];
        in.row_bytes = in.row_elems * in.es;
        int64_t batch = o->batch > 0 ? o->batch : tq_io_default_batch(in.row_bytes);
        st = in.h.fortran && in.h.rank > 1 ? import_fortran(&in, batch) : import_c(&in, batch);
    }
    if (!st) {
        char extra;
        ssize_t got = tq_read_full(in.fd, &extra, 1);
        if (got > 0)
            st = tq_fail(TQ_ERR_DATA, "%s: data continues past the shape in the .npy header",
                         in.label);
    }
    if (in.fd > 0)
        close(in.fd);
    return st;
}
