/* safetensors.c: every tensor of a stream as one safetensors file: a u64 header
 * size, a JSON header (dtype, shape, data_offsets per tensor, __metadata__),
 * then each tensor's bytes in one piece. The header needs every shape, and
 * interleaved batches (key emb key emb) must end up contiguous per tensor, so
 * payloads go to an unlinked spool file first and are copied into place at the
 * end: memory stays at one frame. */
#include "io.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

typedef struct seg {
    uint64_t off, len;
} seg;

typedef struct st_tensor {
    seg *segs;
    size_t nseg, cap;
    char *meta; /* the first batch's metadata */
    size_t meta_len;
} st_tensor;

typedef struct st_sink {
    tq_sink base;
    tq_outfile *out;
    int spool;
    uint64_t spooled;
    tq_catalog cat;
    st_tensor *t; /* parallel to cat.e */
    size_t cap_t;
    tq_catalog skipped; /* names skipped with a note */
    tq_note_fn note;
    void *ctx;
} st_sink;

static tq_status skip(st_sink *k, const tq_frame *f)
{
    size_t before = k->skipped.n, idx;
    tq_status st = tq_catalog_add(&k->skipped, f, &idx);
    if (!st && k->skipped.n > before && k->note) {
        char msg[TQ_MAX_NAME + 96];
        snprintf(msg, sizeof msg, "skipping frame \"%s\": safetensors has no %s dtype", f->name,
                 tq_dtype_name(f->dtype));
        k->note(k->ctx, msg);
    }
    return st;
}

static tq_status st_put(tq_sink *s, tq_frame *f)
{
    st_sink *k = (st_sink *)s;
    if (!tq_safetensors_dtype_name(f->dtype))
        return skip(k, f);
    if (!strcmp(f->name, "__metadata__"))
        return tq_fail(TQ_ERR_DATA, "a tensor named __metadata__ cannot be stored in safetensors");
    size_t idx, before = k->cat.n;
    /* room for a new tensor first: st_close frees one per catalog entry */
    if (k->cat.n + 1 > k->cap_t) {
        size_t cap = k->cap_t ? 2 * k->cap_t : 8;
        st_tensor *n = realloc(k->t, cap * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        k->t = n;
        k->cap_t = cap;
    }
    tq_status st = tq_catalog_add(&k->cat, f, &idx);
    if (st)
        return st;
    if (k->cat.n > before) {
        memset(&k->t[idx], 0, sizeof k->t[idx]);
        if (f->meta_len) {
            if (!(k->t[idx].meta = malloc(f->meta_len)))
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            memcpy(k->t[idx].meta, f->meta, f->meta_len);
            k->t[idx].meta_len = f->meta_len;
        }
    }
    if (f->rank == 0 && k->cat.e[idx].frames > 1)
        return tq_fail(TQ_ERR_DATA, "frame \"%s\": scalars (rank 0) cannot be concatenated",
                       f->name);
    const void *raw;
    if ((st = tq_frame_data(f, &raw)))
        return st;
    for (uint64_t done = 0; done < f->raw_size;) {
        ssize_t w = pwrite(k->spool, (const char *)raw + done, (size_t)(f->raw_size - done),
                           (off_t)(k->spooled + done));
        if (w < 0 && errno != EINTR)
            return tq_fail(TQ_ERR_IO, "spool file for safetensors: write failed: %s",
                           strerror(errno));
        if (w > 0)
            done += (uint64_t)w;
    }
    st_tensor *t = &k->t[idx];
    if (t->nseg && t->segs[t->nseg - 1].off + t->segs[t->nseg - 1].len == k->spooled) {
        t->segs[t->nseg - 1].len += f->raw_size; /* runs of one tensor stay one piece */
    } else {
        if (t->nseg == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 4;
            seg *n = realloc(t->segs, cap * sizeof *n);
            if (!n)
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            t->segs = n;
            t->cap = cap;
        }
        t->segs[t->nseg++] = (seg){k->spooled, f->raw_size};
    }
    k->spooled += f->raw_size;
    return TQ_OK;
}

static tq_status json_header(st_sink *k, tq_buf *b)
{
    tq_status st = tq_buf_add(b, "{", 1);
    char num[64];
    int any = 0;
    for (size_t i = 0; i < k->cat.n && !st; i++) {
        const char *m = k->t[i].meta;
        for (size_t j = 0; j < k->t[i].meta_len && !st;) {
            size_t len = strlen(m + j);
            const char *eq = memchr(m + j, '=', len);
            tq_buf key = {0};
            st = tq_buf_add(&key, k->cat.e[i].name, strlen(k->cat.e[i].name));
            if (!st)
                st = tq_buf_add(&key, ".", 1);
            if (!st)
                st = tq_buf_add(&key, m + j, (size_t)(eq - (m + j)));
            if (!st)
                st = tq_buf_add(b, any ? "," : "\"__metadata__\":{", any ? 1 : 16);
            if (!st)
                st = tq_buf_json(b, key.p, key.len);
            if (!st)
                st = tq_buf_add(b, ":", 1);
            if (!st)
                st = tq_buf_json(b, eq + 1, len - (size_t)(eq + 1 - (m + j)));
            tq_buf_free(&key);
            any = 1;
            j += len + 1;
        }
    }
    if (any && !st)
        st = tq_buf_add(b, "},", 2);
    uint64_t off = 0;
    for (size_t i = 0; i < k->cat.n && !st; i++) {
        tq_tensor_entry *e = &k->cat.e[i];
        uint64_t bytes = 0;
        tq_dtype_payload_bytes(e->dtype, e->rank, e->dims, &bytes);
        st = tq_buf_add(b, i ? "," : "", i ? 1 : 0);
        if (!st)
            st = tq_buf_json(b, e->name, strlen(e->name));
        int n = snprintf(num, sizeof num, ":{\"dtype\":\"%s\",\"shape\":[", tq_safetensors_dtype_name(e->dtype));
        if (!st)
            st = tq_buf_add(b, num, (size_t)n);
        for (int d = 0; d < e->rank && !st; d++) {
            n = snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)e->dims[d]);
            st = tq_buf_add(b, num, (size_t)n);
        }
        n = snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}",
                     (unsigned long long)off, (unsigned long long)(off + bytes));
        if (!st)
            st = tq_buf_add(b, num, (size_t)n);
        off += bytes;
    }
    if (!st)
        st = tq_buf_add(b, "}", 1);
    /* the data then starts on a multiple of 8 bytes, as the reference writer
     * pads it; the format allows trailing spaces in the header */
    while (!st && b->len % 8)
        st = tq_buf_add(b, " ", 1);
    return st;
}

static tq_status copy_out(st_sink *k, uint64_t off, uint64_t len)
{
    int out = tq_outfile_fd(k->out);
    while (len) {
        loff_t from = (loff_t)off;
        ssize_t n = copy_file_range(k->spool, &from, out, NULL, (size_t)(len < (1u << 30) ? len : (1u << 30)), 0);
        if (n <= 0)
            break; /* not supported here (a pipe, old kernel): copy by hand */
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    static char buf[1 << 20];
    while (len) {
        ssize_t n = pread(k->spool, buf, len < sizeof buf ? (size_t)len : sizeof buf, (off_t)off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            return tq_fail(TQ_ERR_IO, "spool file for safetensors: read failed");
        }
        tq_status st = tq_outfile_write(k->out, buf, (size_t)n);
        if (st)
            return st;
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return TQ_OK;
}

static tq_status st_write(st_sink *k)
{
    if (!k->cat.n)
        return tq_fail(TQ_ERR_DATA, "no tensor to write to safetensors (str and block-coded "
                                    "frames are skipped)");
    tq_buf b = {0};
    tq_status st = tq_buf_reserve(&b, 8);
    if (!st) {
        b.len = 8;
        st = json_header(k, &b);
    }
    if (!st) {
        tq_put64((unsigned char *)b.p, (uint64_t)(b.len - 8));
        st = tq_outfile_write(k->out, b.p, b.len);
    }
    tq_buf_free(&b);
    for (size_t i = 0; i < k->cat.n && !st; i++)
        for (size_t j = 0; j < k->t[i].nseg && !st; j++)
            st = copy_out(k, k->t[i].segs[j].off, k->t[i].segs[j].len);
    return st;
}

static tq_status st_close(tq_sink *s, int commit)
{
    st_sink *k = (st_sink *)s;
    tq_status st = commit ? st_write(k) : TQ_OK;
    tq_status cst = tq_outfile_close(k->out, commit && !st);
    for (size_t i = 0; i < k->cat.n; i++) {
        free(k->t[i].segs);
        free(k->t[i].meta);
    }
    free(k->t);
    tq_catalog_free(&k->cat);
    tq_catalog_free(&k->skipped);
    close(k->spool);
    free(k);
    return st ? st : cst;
}

/* An unlinked temporary file beside the output (so copy_file_range can share
 * blocks), or in $TMPDIR for standard output. */
static tq_status spool_open(const char *path, int *fd)
{
    const char *dir = getenv("TMPDIR");
    char tmp[4096];
    if (path && strcmp(path, "-")) {
        const char *slash = strrchr(path, '/');
        snprintf(tmp, sizeof tmp, "%.*s.tq-spool-XXXXXX", slash ? (int)(slash - path + 1) : 0,
                 path);
    } else {
        snprintf(tmp, sizeof tmp, "%s/tq-spool-XXXXXX", dir && *dir ? dir : "/tmp");
    }
    *fd = mkostemp(tmp, O_CLOEXEC);
    if (*fd < 0)
        return tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create a spool file: %s", tmp,
                       strerror(errno));
    unlink(tmp);
    return TQ_OK;
}

tq_status tq_sink_safetensors(tq_sink **s, const char *path, tq_note_fn note, void *ctx)
{
    st_sink *k = calloc(1, sizeof *k);
    if (!k)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = tq_outfile_open(&k->out, path);
    if (!st && (st = spool_open(path, &k->spool)))
        tq_outfile_close(k->out, 0);
    if (st) {
        free(k);
        return st;
    }
    k->base.put = st_put;
    k->base.close = st_close;
    k->note = note;
    k->ctx = ctx;
    *s = &k->base;
    return TQ_OK;
}
