/* reader.c: reads and verifies TQ streams from pipes or files, frame by frame.
 * Every check of tq-format.5 happens here, so a tool only ever sees frames that
 * are whole, consistent with earlier batches of the same name, and CRC-clean. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read-ahead for headers and small frames. A larger rest goes straight to its
 * destination, and payloads are read piece by piece so that each piece is
 * CRC-checked while it is still in the cache. */
#define READ_BUF (256u << 10)
#define DIRECT_MIN (64u << 10)
#define PIECE (256u << 10)
/* A zlib payload is inflated when read (to check it); the result is kept for
 * tq_frame_data up to this raw size, above it only checked in bounded memory. */
#define KEEP_INFLATED (64u << 20)
/* A payload this large in a regular file is mapped, not copied: the page cache
 * serves it in place (payloads start at multiples of 64 for this). */
#define MAP_MIN (1u << 20)
/* Payload buffers this large are aligned to and advised onto huge pages:
 * reading a pipe into a 16 MiB buffer of small pages cost 25% more time. */
#define HUGE_MIN (2u << 20)

typedef struct input {
    int fd;
    int own;
    int is_file;          /* a regular file: payloads can be mapped */
    off_t base;           /* file position where the stream starts */
    char label[256];
} input;

/* What the first batch of a name fixed: later batches must agree. Names are
 * kept in an arena and found through a hash table, so that a stream of many
 * names costs time linear in its frames. */
typedef struct batch_shape {
    size_t name_at;       /* offset of the NUL-terminated name in the arena */
    uint64_t hash;
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];
} batch_shape;

/* A frame read ahead (tq_reader_lookahead), to be handed out again: its
 * header bytes copied, its payload buffers or mapping taken from the reader. */
typedef struct ahead {
    tq_frame f;
    unsigned char *hdr;
    void *map;
    size_t map_len;
} ahead;

struct tq_reader {
    input *inputs;
    size_t n_inputs, cur;
    unsigned char *buf;   /* read-ahead buffer */
    size_t pos, len;
    int eof;              /* the current input reported end of file */
    uint64_t offset;      /* bytes of the current input consumed */
    uint64_t index;       /* frames read, over all inputs */
    unsigned char *hdr;   /* header bytes of the current frame */
    tq_frame frame;
    void *map;            /* mapping behind frame.stored, if mapped */
    size_t map_len;
    batch_shape *shapes;
    size_t n_shapes, cap_shapes;
    char *names;          /* arena of the names in shapes */
    size_t names_len, names_cap;
    uint32_t *slots;      /* hash table: 1 + index into shapes, 0 = empty */
    size_t n_slots;       /* a power of two, at least twice n_shapes */
    ahead *ahead;         /* frames read ahead, handed out first by next */
    size_t n_ahead, next_ahead, cap_ahead;
    size_t n_first;       /* of them, the first batch of every tensor */
    int looked;           /* tq_reader_lookahead ran */
    tq_status look_st;    /* and failed: every later call fails alike */
    char *look_msg;       /* its message, which later calls would lose */
    ahead *out_ahead;     /* the one handed out last, released by next */
};

static tq_status read_failed(tq_reader *r)
{
    return tq_fail(TQ_ERR_IO, "%s: read failed: %s", r->inputs[r->cur].label, strerror(errno));
}

/* One read into the empty read-ahead buffer. */
static tq_status fill(tq_reader *r)
{
    r->pos = r->len = 0;
    for (;;) {
        ssize_t n = read(r->inputs[r->cur].fd, r->buf, READ_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return read_failed(r);
        if (n == 0)
            r->eof = 1;
        r->len = (size_t)n;
        return TQ_OK;
    }
}

/* Copies n bytes from the input to dst; *got says how many arrived before EOF. */
static tq_status take(tq_reader *r, void *dst, size_t n, size_t *got)
{
    unsigned char *d = dst;
    *got = 0;
    while (*got < n) {
        if (r->pos < r->len) {
            size_t k = r->len - r->pos;
            if (k > n - *got)
                k = n - *got;
            memcpy(d + *got, r->buf + r->pos, k);
            r->pos += k;
            *got += k;
            r->offset += k;
            continue;
        }
        if (r->eof)
            return TQ_OK;
        if (n - *got < DIRECT_MIN) {
            tq_status st = fill(r);
            if (st)
                return st;
            continue;
        }
        ssize_t k = read(r->inputs[r->cur].fd, d + *got, n - *got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return read_failed(r);
        if (k == 0)
            r->eof = 1;
        *got += (size_t)k;
        r->offset += (uint64_t)k;
    }
    return TQ_OK;
}

static tq_status add_input(tq_reader *r, int fd, const char *label, int own)
{
    input *n = realloc(r->inputs, (r->n_inputs + 1) * sizeof *n);
    if (!n)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    r->inputs = n;
    input *in = &r->inputs[r->n_inputs++];
    in->fd = fd;
    in->own = own;
    snprintf(in->label, sizeof in->label, "%s", !label || !strcmp(label, "-") ? "stdin" : label);
    struct stat sb;
    in->base = lseek(fd, 0, SEEK_CUR);
    in->is_file = in->base >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
    tq_pipe_grow(fd);
    return TQ_OK;
}

tq_status tq_reader_open_fd(tq_reader **out, int fd, const char *label)
{
    tq_reader *r = calloc(1, sizeof *r);
    if (!r)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    r->buf = malloc(READ_BUF);
    r->hdr = malloc(TQ_MAX_HEADER);
    if (!r->buf || !r->hdr || add_input(r, fd, label, 0)) {
        tq_reader_close(r);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    *out = r;
    return TQ_OK;
}

tq_status tq_input_open(const char *path, int *fd)
{
    if (!strcmp(path, "-")) {
        *fd = 0;
        return TQ_OK;
    }
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", path, strerror(errno));
    /* open(2) gives a directory for reading; its read would fail later as an
     * I/O error (74) where the user named the wrong file (66) */
    struct stat sb;
    if (!fstat(*fd, &sb) && S_ISDIR(sb.st_mode)) {
        close(*fd);
        *fd = -1;
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", path, strerror(EISDIR));
    }
    return TQ_OK;
}

tq_status tq_input_fopen(const char *path, FILE **f)
{
    int fd;
    tq_status st = tq_input_open(path, &fd);
    if (st)
        return st;
    if (fd == 0) {
        *f = stdin;
        return TQ_OK;
    }
    if (!(*f = fdopen(fd, "r"))) {
        close(fd);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    return TQ_OK;
}

tq_status tq_reader_open_path(tq_reader **out, const char *path)
{
    return tq_reader_open_path_as(out, path, path);
}

tq_status tq_reader_open_path_as(tq_reader **out, const char *path, const char *label)
{
    int fd;
    tq_status st = tq_input_open(path, &fd);
    if (st)
        return st;
    st = tq_reader_open_fd(out, fd, label);
    if (st) {
        if (fd > 0)
            close(fd);
        return st;
    }
    (*out)->inputs[0].own = fd > 0;
    return TQ_OK;
}

tq_status tq_reader_chain_fd(tq_reader *r, int fd, const char *label)
{
    return add_input(r, fd, label, 0);
}

int tq_reader_take_map(tq_reader *r, void **base, size_t *len)
{
    if (!r->map)
        return 0;
    *base = r->map, *len = r->map_len;
    r->map = NULL; /* no longer the reader's to unmap */
    return 1;
}

static void ahead_release(ahead *a)
{
    tq_frame_release(&a->f);
    free(a->hdr);
    if (a->map)
        munmap(a->map, a->map_len);
    memset(a, 0, sizeof *a);
}

void tq_reader_close(tq_reader *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_inputs; i++)
        if (r->inputs[i].own)
            close(r->inputs[i].fd);
    free(r->inputs);
    free(r->buf);
    free(r->hdr);
    free(r->shapes);
    free(r->names);
    free(r->slots);
    if (r->map)
        munmap(r->map, r->map_len);
    tq_frame_release(&r->frame);
    for (size_t i = r->next_ahead; i < r->n_ahead; i++)
        ahead_release(&r->ahead[i]);
    if (r->out_ahead)
        ahead_release(r->out_ahead);
    free(r->ahead);
    free(r->look_msg);
    free(r);
}

/* "stdin: frame 3 "emb", byte 4096: " before the current message. */
static tq_status where(tq_reader *r, tq_status st, uint64_t at)
{
    if (r->frame.name[0])
        return tq_fail_context(st, "%s: frame %llu \"%s\", byte %llu",
                               r->inputs[r->cur].label, (unsigned long long)r->index,
                               r->frame.name, (unsigned long long)at);
    return tq_fail_context(st, "%s: frame %llu, byte %llu", r->inputs[r->cur].label,
                           (unsigned long long)r->index, (unsigned long long)at);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Puts shape i in the table (which has room). */
static void slot_put(tq_reader *r, size_t i)
{
    size_t k = (size_t)r->shapes[i].hash & (r->n_slots - 1);
    while (r->slots[k])
        k = (k + 1) & (r->n_slots - 1);
    r->slots[k] = (uint32_t)(i + 1);
}

/* Remembers the shape of a name seen for the first time. */
static tq_status add_shape(tq_reader *r, const tq_frame *f, uint64_t hash)
{
    size_t len = strlen(f->name) + 1;
    if (r->n_shapes + 1 >= UINT32_MAX)
        return tq_fail(TQ_ERR_NOMEM, "too many frame names");
    if (r->n_shapes == r->cap_shapes) {
        size_t cap = r->cap_shapes ? 2 * r->cap_shapes : 16;
        batch_shape *n = realloc(r->shapes, cap * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        r->shapes = n;
        r->cap_shapes = cap;
    }
    if (r->names_len + len > r->names_cap) {
        size_t cap = r->names_cap ? 2 * r->names_cap : 4096;
        char *n = realloc(r->names, cap);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        r->names = n;
        r->names_cap = cap;
    }
    if (2 * (r->n_shapes + 1) > r->n_slots) {
        size_t n_slots = r->n_slots ? 2 * r->n_slots : 64;
        uint32_t *n = calloc(n_slots, sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        free(r->slots);
        r->slots = n;
        r->n_slots = n_slots;
        for (size_t i = 0; i < r->n_shapes; i++)
            slot_put(r, i);
    }
    batch_shape *b = &r->shapes[r->n_shapes];
    b->name_at = r->names_len;
    memcpy(r->names + r->names_len, f->name, len);
    r->names_len += len;
    b->hash = hash;
    b->dtype = f->dtype;
    b->rank = f->rank;
    memcpy(b->dims, f->dims, sizeof b->dims);
    slot_put(r, r->n_shapes++);
    return TQ_OK;
}

static tq_status check_batch(tq_reader *r, const tq_frame *f)
{
    uint64_t hash = name_hash(f->name);
    for (size_t k = r->n_slots ? (size_t)hash & (r->n_slots - 1) : 0; r->n_slots && r->slots[k];
         k = (k + 1) & (r->n_slots - 1)) {
        batch_shape *b = &r->shapes[r->slots[k] - 1];
        if (b->hash != hash || strcmp(r->names + b->name_at, f->name))
            continue;
        if (b->dtype != f->dtype)
            return tq_fail(TQ_ERR_DATA, "dtype %s differs from the earlier batches (%s)",
                           tq_dtype_name(f->dtype), tq_dtype_name(b->dtype));
        if (b->rank != f->rank)
            return tq_fail(TQ_ERR_DATA, "rank %d differs from the earlier batches (%d)",
                           f->rank, b->rank);
        for (int d = 1; d < f->rank; d++)
            if (b->dims[d] != f->dims[d])
                return tq_fail(TQ_ERR_DATA,
                               "dim %d is %lld, the earlier batches have %lld", d,
                               (long long)f->dims[d], (long long)b->dims[d]);
        return TQ_OK;
    }
    return add_shape(r, f, hash);
}

/* Parses and checks the header now in r->hdr (header_len bytes). */
static tq_status parse_header(tq_reader *r, size_t header_len, uint64_t start)
{
    const unsigned char *h = r->hdr;
    tq_frame *f = &r->frame;
    uint32_t want = tq_le32(h + 44), got = tq_header_crc(h, header_len);
    if (want != got)
        return where(r, tq_fail(TQ_ERR_DATA, "header CRC mismatch (stored %08x, computed %08x)",
                                want, got), start + 44);
    unsigned rank = h[8];
    size_t name_len = tq_le16(h + 10), meta_len = tq_le32(h + 12);
    const unsigned char *p = h + TQ_FIXED_HEADER;
    /* name first, so that later messages can name the frame */
    const char *name = (const char *)p + 8 * rank;
    if (tq_name_check(name, name_len))
        return where(r, TQ_ERR_DATA, start + TQ_FIXED_HEADER + 8 * rank);
    memcpy(f->name, name, name_len);
    f->name[name_len] = 0;
    f->dtype = (tq_dtype)tq_le16(h + 6);
    if (!tq_dtype_name(f->dtype))
        return where(r, tq_fail(TQ_ERR_DATA, "unknown dtype code %u", tq_le16(h + 6)), start + 6);
    f->rank = (int)rank;
    f->flags = h[9];
    if (f->flags & ~TQ_FLAG_ZLIB)
        return where(r, tq_fail(TQ_ERR_DATA, "unknown flags 0x%02x", f->flags), start + 9);
    if (tq_le32(h + 40))
        return where(r, tq_fail(TQ_ERR_DATA, "reserved header field is not zero"), start + 40);
    for (unsigned i = 0; i < rank; i++) {
        uint64_t d = tq_le64(p + 8 * i);
        if (d > (uint64_t)INT64_MAX)
            return where(r, tq_fail(TQ_ERR_DATA, "dim %u is too large", i),
                         start + TQ_FIXED_HEADER + 8 * i);
        f->dims[i] = (int64_t)d;
    }
    f->meta = meta_len ? (const char *)p + 8 * rank + name_len : NULL;
    f->meta_len = meta_len;
    if (tq_meta_check(f->meta, meta_len))
        return where(r, TQ_ERR_DATA, start + TQ_FIXED_HEADER + 8 * rank + name_len);
    for (size_t i = TQ_FIXED_HEADER + 8 * rank + name_len + meta_len; i < header_len; i++)
        if (h[i])
            return where(r, tq_fail(TQ_ERR_DATA, "header padding is not zero"), start + i);
    f->stored_size = tq_le64(h + 24);
    f->raw_size = tq_le64(h + 32);
    if (f->dtype == TQ_DTYPE_STR) {
        if (rank != 1)
            return where(r, tq_fail(TQ_ERR_DATA, "str frames have rank 1, not %u", rank), start + 8);
        if (f->raw_size > TQ_MAX_FRAME_BYTES ||
            (uint64_t)f->dims[0] >= f->raw_size / 8)
            return where(r, tq_fail(TQ_ERR_DATA,
                                    "str payload of %llu bytes does not fit %lld rows",
                                    (unsigned long long)f->raw_size, (long long)f->dims[0]),
                         start + 32);
    } else {
        uint64_t bytes;
        if (tq_dtype_payload_bytes(f->dtype, f->rank, f->dims, &bytes))
            return where(r, TQ_ERR_DATA, start + TQ_FIXED_HEADER);
        if (bytes != f->raw_size)
            return where(r, tq_fail(TQ_ERR_DATA,
                                    "raw size %llu does not match the shape (%llu bytes)",
                                    (unsigned long long)f->raw_size,
                                    (unsigned long long)bytes),
                         start + 32);
    }
    if (!(f->flags & TQ_FLAG_ZLIB) && f->stored_size != f->raw_size)
        return where(r, tq_fail(TQ_ERR_DATA, "stored size %llu differs from raw size %llu "
                                             "in an uncompressed frame",
                                (unsigned long long)f->stored_size,
                                (unsigned long long)f->raw_size),
                     start + 24);
    if (f->stored_size > TQ_MAX_FRAME_BYTES)
        return where(r, tq_fail(TQ_ERR_DATA, "stored size %llu is over the frame limit",
                                (unsigned long long)f->stored_size),
                     start + 24);
    tq_status st = check_batch(r, f);
    return st ? where(r, st, start) : TQ_OK;
}

/* Makes room for want payload bytes, of which have already arrived. The buffer
 * grows with the bytes that actually arrive, so a truncated stream that claims
 * a huge payload fails at its real end instead of allocating the claim. */
static tq_status grow(tq_frame *f, uint64_t have, uint64_t want)
{
    if (f->priv_cap >= want || f->priv_cap >= have + PIECE)
        return TQ_OK;
    uint64_t cap = 2 * (uint64_t)f->priv_cap;
    if (cap < have + (1u << 20))
        cap = have + (1u << 20);
    if (cap > want)
        cap = want;
    void *n = NULL;
    if (cap >= HUGE_MIN) {
        cap = (cap + HUGE_MIN - 1) & ~(uint64_t)(HUGE_MIN - 1);
        if (posix_memalign(&n, HUGE_MIN, (size_t)cap))
            n = NULL;
        if (n) {
            madvise(n, (size_t)cap, MADV_HUGEPAGE);
            if (have)
                memcpy(n, f->priv_buf, (size_t)have);
            free(f->priv_buf);
        }
    } else {
        n = realloc(f->priv_buf, (size_t)cap);
    }
    if (!n)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for a %llu-byte payload",
                       (unsigned long long)want);
    f->priv_buf = n;
    f->priv_cap = (size_t)cap;
    return TQ_OK;
}

/* Maps the payload and its padding (want bytes at the current position) when
 * the input is a regular file that holds them all; 0 if it did. Anything else
 * (a short file, a failed mmap) is left to the read path, which reports it. */
static int map_payload(tq_reader *r, uint64_t want, uint32_t *crc)
{
    input *in = &r->inputs[r->cur];
    struct stat sb;
    off_t at = in->base + (off_t)r->offset;
    if (!in->is_file || want < MAP_MIN || fstat(in->fd, &sb) || sb.st_size < at ||
        (uint64_t)(sb.st_size - at) < want)
        return -1;
    off_t page = (off_t)sysconf(_SC_PAGESIZE), from = at & ~(page - 1);
    size_t len = (size_t)(want + (uint64_t)(at - from));
    void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, in->fd, from);
    if (m == MAP_FAILED)
        return -1;
    madvise(m, len, MADV_SEQUENTIAL);
    /* the file position and the read-ahead move past the payload */
    if (lseek(in->fd, at + (off_t)want, SEEK_SET) < 0) {
        munmap(m, len);
        return -1;
    }
    r->pos = r->len = 0;
    r->offset += want;
    r->map = m;
    r->map_len = len;
    r->frame.stored = (const unsigned char *)m + (at - from);
    *crc = tq_crc32c(0, r->frame.stored, (size_t)r->frame.stored_size);
    return 0;
}

/* Reads the stored payload and its padding into the frame's buffer, piece by
 * piece, each CRC'd while in the cache. */
static tq_status read_pieces(tq_reader *r, uint64_t start, uint64_t want, uint32_t *crc)
{
    tq_frame *f = &r->frame;
    uint64_t have = 0;
    *crc = 0;
    while (have < want) {
        tq_status st = grow(f, have, want);
        if (st)
            return where(r, st, start);
        uint64_t chunk = want - have < PIECE ? want - have : PIECE;
        /* drain the read-ahead exactly, so that the pieces after it can be read
         * straight into place */
        if (r->pos < r->len && r->len - r->pos < chunk)
            chunk = r->len - r->pos;
        unsigned char *p = (unsigned char *)f->priv_buf + have;
        size_t got;
        if ((st = take(r, p, (size_t)chunk, &got)))
            return st;
        if (have < f->stored_size)
            *crc = tq_crc32c(*crc, p,
                             (size_t)(f->stored_size - have < got ? f->stored_size - have : got));
        have += got;
        if (got < chunk)
            return where(r, tq_fail(TQ_ERR_DATA, "truncated payload: %llu of %llu bytes "
                                                 "(with padding to 64)",
                                    (unsigned long long)have, (unsigned long long)want),
                         r->offset);
    }
    static const unsigned char empty[1];
    f->stored = f->priv_buf ? f->priv_buf : empty; /* never NULL, even for 0 bytes */
    return TQ_OK;
}

/* Reads the payload and checks its padding, its CRC and what it holds (the
 * zlib stream, str offsets and UTF-8). */
static tq_status read_payload(tq_reader *r, uint64_t start)
{
    tq_frame *f = &r->frame;
    uint64_t want = tq_align_up(f->stored_size);
    uint32_t crc;
    if (map_payload(r, want, &crc)) {
        tq_status st = read_pieces(r, start, want, &crc);
        if (st)
            return st;
    }
    const unsigned char *pad = (const unsigned char *)f->stored + f->stored_size;
    for (uint64_t i = 0; i < want - f->stored_size; i++)
        if (pad[i])
            return where(r, tq_fail(TQ_ERR_DATA, "payload padding is not zero"),
                         start + f->stored_size + i);
    uint32_t stored_crc = tq_le32(r->hdr + 20);
    if (crc != stored_crc)
        return where(r, tq_fail(TQ_ERR_DATA, "payload CRC mismatch (stored %08x, computed %08x)",
                                stored_crc, crc),
                     start);
    tq_status st = TQ_OK;
    if (f->flags & TQ_FLAG_ZLIB)
        st = tq_frame_inflate(f, f->dtype == TQ_DTYPE_STR || f->raw_size <= KEEP_INFLATED);
    else if (f->dtype == TQ_DTYPE_STR)
        st = tq_str_check(f->stored, f->raw_size, f->dims[0]);
    return st ? where(r, st, start) : TQ_OK;
}

static tq_status read_frame(tq_reader *r, tq_frame **out);

/* The failure of the lookahead, again: once it failed, the stream's position is
 * past the bad bytes, and a caller that went on would read as if they were not
 * there (tq-quantize exited 0 on a truncated input that way). */
static tq_status look_failed(const tq_reader *r)
{
    return tq_fail(r->look_st, "%s", r->look_msg ? r->look_msg : "failed");
}

tq_status tq_reader_next(tq_reader *r, tq_frame **out)
{
    if (r->out_ahead) {
        ahead_release(r->out_ahead);
        r->out_ahead = NULL;
    }
    if (r->map) { /* also a mapping handed back with a frame read ahead */
        munmap(r->map, r->map_len);
        r->map = NULL;
    }
    if (r->next_ahead < r->n_ahead) {
        ahead *a = &r->ahead[r->next_ahead++];
        r->map = a->map, r->map_len = a->map_len; /* for tq_reader_take_map */
        a->map = NULL;
        r->out_ahead = a;
        *out = &a->f;
        return TQ_OK;
    }
    if (r->ahead) {
        free(r->ahead);
        r->ahead = NULL;
        r->n_ahead = r->next_ahead = r->cap_ahead = 0;
    }
    if (r->look_st)
        return look_failed(r);
    return read_frame(r, out);
}

/* Keeps the frame just read for later: its header bytes copied (the reader
 * reuses its buffer), its payload buffers and mapping taken over. */
static tq_status keep_ahead(tq_reader *r)
{
    if (r->n_ahead == r->cap_ahead) {
        size_t cap = r->cap_ahead ? 2 * r->cap_ahead : 8;
        ahead *n = realloc(r->ahead, cap * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        r->ahead = n;
        r->cap_ahead = cap;
    }
    tq_frame *f = &r->frame;
    ahead *a = &r->ahead[r->n_ahead];
    memset(a, 0, sizeof *a);
    if (!(a->hdr = malloc(f->priv_hdr_len)))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memcpy(a->hdr, f->priv_hdr, f->priv_hdr_len);
    a->f = *f;
    a->f.priv_hdr = a->hdr;
    if (f->meta)
        a->f.meta = (const char *)a->hdr + (f->meta - (const char *)f->priv_hdr);
    a->map = r->map, a->map_len = r->map_len;
    r->map = NULL;
    f->priv_raw = f->priv_buf = NULL; /* now the kept frame's */
    f->priv_cap = 0;
    r->n_ahead++;
    return TQ_OK;
}

/* Frames of distinct names looked ahead at most: a stream of a name per frame
 * must not be held whole (nor its names compared pairwise without end). */
#define AHEAD_MAX 1024

tq_status tq_reader_lookahead(tq_reader *r, size_t *n)
{
    if (r->look_st)
        return look_failed(r);
    if (!r->looked) {
        r->looked = 1;
        tq_status st = TQ_OK;
        tq_frame *f;
        while (r->n_ahead < AHEAD_MAX && (st = read_frame(r, &f)) == TQ_OK) {
            int again = 0;
            for (size_t i = 0; i < r->n_ahead && !again; i++)
                again = !strcmp(r->ahead[i].f.name, f->name);
            if ((st = keep_ahead(r)))
                break;
            if (again)
                break;
            r->n_first++;
        }
        if (st != TQ_OK && st != TQ_EOF) {
            r->look_st = st;
            r->look_msg = strdup(tq_errmsg());
            return st;
        }
    }
    *n = r->n_first;
    return TQ_OK;
}

const tq_frame *tq_reader_ahead(const tq_reader *r, size_t i)
{
    return i < r->n_first && i < r->n_ahead ? &r->ahead[i].f : NULL;
}

/* What the first bytes of an input that is not a stream are, when they say it:
 * a NumPy file or text, and the tq-cat that converts it; "" when they do not. */
static const char *not_stream_hint(const unsigned char *h, size_t got)
{
    if (got >= 6 && !memcmp(h, "\x93NUMPY", 6))
        return ": this is a NumPy .npy file; convert it with 'tq-cat --from npy'";
    int tab = 0, comma = 0;
    for (size_t i = 0; i < got; i++) {
        unsigned char c = h[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            return ""; /* a control byte: binary, not text */
        if (c == 0x7f)
            return "";
        tab |= c == '\t', comma |= c == ',';
    }
    if (!got)
        return "";
    if (h[0] == '{' || h[0] == '[')
        return ": this looks like JSON text; convert JSON lines with 'tq-cat --from jsonl'";
    if (tab)
        return ": this looks like text (TSV); convert it with 'tq-cat --from tsv'";
    if (comma)
        return ": this looks like text (CSV); convert it with 'tq-cat --from csv'";
    return ": this looks like text; convert numbers with 'tq-cat --from tsv', embed words "
           "with 'tq-embed'";
}

static tq_status read_frame(tq_reader *r, tq_frame **out)
{
    tq_frame *f = &r->frame;
    free(f->priv_raw);
    f->priv_raw = NULL;
    f->name[0] = 0;
    f->stored = NULL;
    if (r->map) {
        munmap(r->map, r->map_len);
        r->map = NULL;
    }
    for (;;) {
        size_t got;
        uint64_t start = r->offset;
        tq_status st = take(r, r->hdr, TQ_FIXED_HEADER, &got);
        if (st)
            return st;
        if (got == 0) {
            if (r->cur + 1 < r->n_inputs) { /* next input of a concatenation */
                r->cur++;
                r->eof = 0;
                r->pos = r->len = 0;
                r->offset = 0;
                continue;
            }
            return TQ_EOF;
        }
        const unsigned char *h = r->hdr;
        if (memcmp(h, TQ_MAGIC, got < 4 ? got : 4))
            return where(r, tq_fail(TQ_ERR_DATA, "bad magic: not a TQ stream%s",
                                    start ? "" : not_stream_hint(h, got)),
                         start);
        if (got < TQ_FIXED_HEADER)
            return where(r, tq_fail(TQ_ERR_DATA, "truncated header: %zu of %d bytes", got,
                                    TQ_FIXED_HEADER),
                         r->offset);
        if (tq_le16(h + 4) != TQ_FORMAT_VERSION)
            return where(r, tq_fail(TQ_ERR_DATA, "unknown format version %u (this reads %d)",
                                    tq_le16(h + 4), TQ_FORMAT_VERSION),
                         start + 4);
        unsigned rank = h[8];
        size_t name_len = tq_le16(h + 10), meta_len = tq_le32(h + 12);
        size_t header_len = tq_le32(h + 16);
        if (rank > TQ_MAX_RANK)
            return where(r, tq_fail(TQ_ERR_DATA, "rank %u is over the limit of %d", rank,
                                    TQ_MAX_RANK),
                         start + 8);
        if (name_len > TQ_MAX_NAME)
            return where(r, tq_fail(TQ_ERR_DATA, "name length %zu is over the limit of %d",
                                    name_len, TQ_MAX_NAME),
                         start + 10);
        if (meta_len > TQ_MAX_META)
            return where(r, tq_fail(TQ_ERR_DATA, "metadata length %zu is over the limit of %d",
                                    meta_len, TQ_MAX_META),
                         start + 12);
        if (header_len != tq_align_up(TQ_FIXED_HEADER + 8 * rank + name_len + meta_len))
            return where(r, tq_fail(TQ_ERR_DATA, "header length %zu does not match its fields "
                                                 "(%llu)", header_len,
                                    (unsigned long long)tq_align_up(TQ_FIXED_HEADER + 8 * rank +
                                                                    name_len + meta_len)),
                         start + 16);
        st = take(r, r->hdr + TQ_FIXED_HEADER, header_len - TQ_FIXED_HEADER, &got);
        if (st)
            return st;
        if (got < header_len - TQ_FIXED_HEADER)
            return where(r, tq_fail(TQ_ERR_DATA, "truncated header: %zu of %zu bytes",
                                    TQ_FIXED_HEADER + got, header_len),
                         r->offset);
        f->index = r->index;
        f->offset = start;
        st = parse_header(r, header_len, start);
        if (st)
            return st;
        st = read_payload(r, start + header_len);
        if (st)
            return st;
        f->priv_hdr = r->hdr;
        f->priv_hdr_len = header_len;
        r->index++;
        *out = f;
        return TQ_OK;
    }
}
