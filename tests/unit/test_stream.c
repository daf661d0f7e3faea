/* test_stream.c: the stream format through the library: the bytes of a frame
 * against tq-format.5 (encoded here by hand), writer -> reader round trips of
 * every dtype with metadata and compression, pass-through byte for byte, the
 * frame accessors, and the errors of bad API use. */
#include "tq.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t rand64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static uint32_t ref_crc(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
    }
    return ~crc;
}

/* An in-memory file: a regular file, so the reader may map it. */
static int memfile(void)
{
    int fd = memfd_create("tq-test", MFD_CLOEXEC);
    if (fd < 0) {
        FILE *f = tmpfile();
        fd = dup(fileno(f));
        fclose(f);
    }
    return fd;
}

/* All bytes of fd, from its start, in a malloc'd buffer. */
static unsigned char *slurp(int fd, size_t *n)
{
    off_t end = lseek(fd, 0, SEEK_END);
    unsigned char *p = malloc(end > 0 ? (size_t)end : 1);
    *n = (size_t)end;
    if (pread(fd, p, *n, 0) != (ssize_t)*n)
        *n = 0;
    return p;
}

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static int contains(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

/* ---- the layout of tq-format.5, encoded here ---- */

static void check_layout(void)
{
    int fd = memfile();
    tq_writer *w;
    CHECK(tq_writer_open_fd(&w, fd, "mem") == TQ_OK, "open");
    float data[6] = {1, 2, 3, 4, 5, 6};
    const char meta[] = "model=m1\0dim=3"; /* two entries, NUL-terminated */
    int64_t dims[2] = {2, 3};
    CHECK(tq_writer_write(w, "emb", TQ_DTYPE_F32, 2, dims, meta, sizeof meta, data, 24) == TQ_OK,
          "write: %s", tq_errmsg());
    CHECK(tq_writer_close(w, 1) == TQ_OK, "close");
    size_t n;
    unsigned char *got = slurp(fd, &n);
    /* header: 48 fixed + 16 dims + 3 name + 15 metadata = 82 -> 128 */
    unsigned char want[128 + 64];
    memset(want, 0, sizeof want);
    memcpy(want, "\x89TQF", 4);
    put_le(want + 4, 1, 2);      /* version */
    put_le(want + 6, 1, 2);      /* dtype f32 */
    want[8] = 2;                 /* rank */
    want[9] = 0;                 /* flags */
    put_le(want + 10, 3, 2);     /* name_len */
    put_le(want + 12, 15, 4);    /* meta_len */
    put_le(want + 16, 128, 4);   /* header_len */
    put_le(want + 24, 24, 8);    /* stored_size */
    put_le(want + 32, 24, 8);    /* raw_size */
    put_le(want + 48, 2, 8);
    put_le(want + 56, 3, 8);
    memcpy(want + 64, "emb", 3);
    memcpy(want + 67, meta, 15);
    for (int i = 0; i < 6; i++) { /* IEEE binary32, little-endian */
        uint32_t u;
        memcpy(&u, &data[i], 4);
        put_le(want + 128 + 4 * i, u, 4);
    }
    put_le(want + 20, ref_crc(0, want + 128, 24), 4);
    put_le(want + 44, ref_crc(ref_crc(0, want, 44), want + 48, 80), 4);
    CHECK(n == sizeof want && memcmp(got, want, n) == 0, "frame bytes differ from the spec (%zu)", n);
    free(got);
    close(fd);

    /* a rank-0 frame with no metadata and an odd-sized name: 48 + 5 -> 64 */
    fd = memfile();
    tq_writer_open_fd(&w, fd, "mem");
    double v = -2.0;
    CHECK(tq_writer_write(w, "scale", TQ_DTYPE_F64, 0, NULL, NULL, 0, &v, 8) == TQ_OK, "rank 0");
    tq_writer_close(w, 1);
    got = slurp(fd, &n);
    CHECK(n == 128 && got[8] == 0 && got[16] == 64 && memcmp(got + 48, "scale", 5) == 0 &&
          got[64 + 7] == 0xc0 && got[64 + 8] == 0, "rank-0 frame (%zu bytes)", n);
    free(got);
    close(fd);
}

/* ---- round trips ---- */

typedef struct made {
    const char *name;
    tq_dtype dt;
    int rank;
    int64_t dims[3];
    unsigned char *data;
    uint64_t bytes;
} made;

/* Random frames of every dtype; str gets a few strings (some empty, some not
 * ASCII), written through tq_writer_write_str. */
static const char *strings[] = {"", "a", "héllo", "\xe4\xb8\xad\xe6\x96\x87", "x y z", ""};

static void make_frames(made *m, int *count)
{
    int k = 0;
    for (int dt = 1; dt <= 14; dt++) {
        if (dt == TQ_DTYPE_STR)
            continue;
        made *f = &m[k++];
        f->name = tq_dtype_name((tq_dtype)dt);
        f->dt = (tq_dtype)dt;
        f->rank = dt == TQ_DTYPE_F64 ? 3 : 2;
        f->dims[0] = 3;
        f->dims[1] = dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0 || dt == TQ_DTYPE_Q2 ? 64 : dt == TQ_DTYPE_BIT ? 13 : 5;
        f->dims[2] = 2;
        tq_dtype_payload_bytes(f->dt, f->rank, f->dims, &f->bytes);
        f->data = malloc(f->bytes);
        for (uint64_t i = 0; i < f->bytes; i++)
            f->data[i] = (unsigned char)(rand64() % (i % 3 ? 256 : 4)); /* compressible */
    }
    *count = k;
}

static void check_roundtrip(void)
{
    made m[16];
    int nm;
    make_frames(m, &nm);
    const int levels[3] = {0, 1, 9};
    for (int li = 0; li < 3; li++) {
        int fd = memfile();
        tq_writer *w;
        tq_writer_open_fd(&w, fd, "mem");
        tq_writer_set_compress(w, levels[li]);
        for (int i = 0; i < nm; i++) {
            char meta[64];
            int ml = snprintf(meta, sizeof meta, "dtype=%s%cn=%d%cempty=", m[i].name, 0, i, 0) + 1;
            CHECK(tq_writer_write(w, m[i].name, m[i].dt, m[i].rank, m[i].dims, meta, (size_t)ml,
                                  m[i].data, m[i].bytes) == TQ_OK,
                  "write %s: %s", m[i].name, tq_errmsg());
        }
        size_t lens[6];
        for (int i = 0; i < 6; i++)
            lens[i] = strlen(strings[i]);
        CHECK(tq_writer_write_str(w, "txt", 6, strings, lens) == TQ_OK, "write str: %s", tq_errmsg());
        CHECK(tq_writer_write_str(w, "none", 0, NULL, NULL) == TQ_OK, "zero strings: %s", tq_errmsg());
        CHECK(tq_writer_close(w, 1) == TQ_OK, "close");
        lseek(fd, 0, SEEK_SET);
        tq_reader *r;
        CHECK(tq_reader_open_fd(&r, fd, "mem") == TQ_OK, "reader");
        tq_frame *f;
        uint64_t offset = 0;
        for (int i = 0; i < nm + 2; i++) {
            tq_status st = tq_reader_next(r, &f);
            CHECK(st == TQ_OK, "level %d frame %d: %s", levels[li], i, tq_errmsg());
            if (st)
                break;
            CHECK(f->index == (uint64_t)i && f->offset == offset, "index %llu offset %llu",
                  (unsigned long long)f->index, (unsigned long long)f->offset);
            offset += f->priv_hdr_len + ((f->stored_size + 63) & ~63ull);
            const void *data;
            CHECK(tq_frame_data(f, &data) == TQ_OK, "data: %s", tq_errmsg());
            int zipped = levels[li] > 0 && f->raw_size > 0;
            CHECK(!!(f->flags & TQ_FLAG_ZLIB) == zipped, "%s: flags %u at level %d", f->name,
                  f->flags, levels[li]);
            if (i < nm) {
                made *e = &m[i];
                char meta_n[16];
                snprintf(meta_n, sizeof meta_n, "%d", i);
                CHECK(!strcmp(f->name, e->name) && f->dtype == e->dt && f->rank == e->rank &&
                      !memcmp(f->dims, e->dims, (size_t)e->rank * 8) && f->raw_size == e->bytes &&
                      !memcmp(data, e->data, e->bytes),
                      "%s at level %d does not round-trip", e->name, levels[li]);
                const char *dv = tq_frame_meta_get(f, "dtype"), *nv = tq_frame_meta_get(f, "n"),
                           *ev = tq_frame_meta_get(f, "empty");
                CHECK(dv && !strcmp(dv, e->name) && nv && !strcmp(nv, meta_n) && ev && !*ev &&
                      !tq_frame_meta_get(f, "dtyp") && !tq_frame_meta_get(f, "x"),
                      "%s: metadata", e->name);
            } else if (i == nm) {
                CHECK(f->dtype == TQ_DTYPE_STR && f->rank == 1 && f->dims[0] == 6, "str shape");
                for (int k = 0; k < 6; k++) {
                    const char *s;
                    size_t len;
                    CHECK(tq_frame_str(f, k, &s, &len) == TQ_OK && len == lens[k] &&
                              !memcmp(s, strings[k], len),
                          "string %d", k);
                }
                const char *s;
                size_t len;
                CHECK(tq_frame_str(f, 6, &s, &len) == TQ_ERR_USAGE &&
                          tq_frame_str(f, -1, &s, &len) == TQ_ERR_USAGE,
                      "rows out of range are refused");
            } else {
                CHECK(f->dtype == TQ_DTYPE_STR && f->dims[0] == 0 && f->raw_size == 8, "empty str");
            }
        }
        CHECK(tq_reader_next(r, &f) == TQ_EOF && tq_reader_next(r, &f) == TQ_EOF, "EOF, twice");
        tq_reader_close(r);
        close(fd);
    }
    for (int i = 0; i < nm; i++)
        free(m[i].data);
}

/* Pass-through: frames read and put again give the same bytes; from a file
 * (large payloads mapped), from a file opened at an offset, and from a pipe. */
struct feeder {
    int fd;
    const unsigned char *p;
    size_t n;
};

static void *feed(void *arg)
{
    struct feeder *f = arg;
    for (size_t at = 0; at < f->n;) {
        size_t k = 1 + rand64() % 5000;
        if (k > f->n - at)
            k = f->n - at;
        ssize_t w = write(f->fd, f->p + at, k);
        if (w <= 0)
            break;
        at += (size_t)w;
    }
    close(f->fd);
    return NULL;
}

static int copy_stream(int in, int out, tq_status *end)
{
    tq_reader *r;
    tq_writer *w;
    tq_reader_open_fd(&r, in, "in");
    tq_writer_open_fd(&w, out, "out");
    tq_frame *f;
    int frames = 0;
    tq_status st;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        if (tq_writer_put(w, f))
            break;
        frames++;
    }
    *end = st;
    tq_writer_close(w, 1);
    tq_reader_close(r);
    return frames;
}

static void check_passthrough(void)
{
    int fd = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, fd, "mem");
    made m[16];
    int nm;
    make_frames(m, &nm);
    for (int round = 0; round < 2; round++) {
        tq_writer_set_compress(w, round ? 6 : 0);
        for (int i = 0; i < nm; i++)
            tq_writer_write(w, m[i].name, m[i].dt, m[i].rank, m[i].dims, "a=b", 4, m[i].data,
                            m[i].bytes);
    }
    /* 3 MiB, and 1 MiB + 8 bytes: mapped from a file */
    size_t big = 3u << 20;
    unsigned char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (unsigned char)rand64();
    int64_t d1[1] = {(int64_t)big}, d2[1] = {(1 << 20) + 8};
    tq_writer_set_compress(w, 0);
    tq_writer_write(w, "big", TQ_DTYPE_U8, 1, d1, NULL, 0, b, big);
    tq_writer_write(w, "big2", TQ_DTYPE_U8, 1, d2, NULL, 0, b + 5, (uint64_t)d2[0]);
    tq_writer_write(w, "f32", TQ_DTYPE_F32, 2, m[0].dims, NULL, 0, m[0].data, m[0].bytes);
    CHECK(tq_writer_close(w, 1) == TQ_OK, "close");
    size_t n;
    unsigned char *orig = slurp(fd, &n);
    int total = 2 * nm + 3;

    int out = memfile();
    lseek(fd, 0, SEEK_SET);
    tq_status end;
    CHECK(copy_stream(fd, out, &end) == total && end == TQ_EOF, "file copy: %s", tq_errmsg());
    size_t n2;
    unsigned char *copy = slurp(out, &n2);
    CHECK(n2 == n && !memcmp(orig, copy, n), "file pass-through is not byte-identical");
    free(copy);
    close(out);

    /* the stream starting at the second frame of an fd opened further on */
    uint64_t second = 0;
    {
        tq_reader *r;
        tq_frame *f;
        lseek(fd, 0, SEEK_SET);
        tq_reader_open_fd(&r, fd, "in");
        tq_reader_next(r, &f);
        tq_reader_next(r, &f);
        second = f->offset;
        tq_reader_close(r);
    }
    lseek(fd, (off_t)second, SEEK_SET);
    out = memfile();
    CHECK(copy_stream(fd, out, &end) == total - 1 && end == TQ_EOF, "copy from an offset: %s",
          tq_errmsg());
    copy = slurp(out, &n2);
    CHECK(n2 == n - second && !memcmp(orig + second, copy, n2), "copy from an offset differs");
    free(copy);
    close(out);

    /* through a pipe, written in random small pieces */
    int p[2];
    if (pipe(p) == 0) {
        struct feeder fe = {p[1], orig, n};
        pthread_t th;
        pthread_create(&th, NULL, feed, &fe);
        out = memfile();
        CHECK(copy_stream(p[0], out, &end) == total && end == TQ_EOF, "pipe copy: %s", tq_errmsg());
        pthread_join(th, NULL);
        close(p[0]);
        copy = slurp(out, &n2);
        CHECK(n2 == n && !memcmp(orig, copy, n), "pipe pass-through is not byte-identical");
        free(copy);
        close(out);
    }
    /* the same stream twice from two chained inputs: indices go on, offsets
     * restart; the second copy's batches agree with the first's */
    {
        int a = memfile(), c = memfile();
        if (write(a, orig, n) != (ssize_t)n || write(c, orig, n) != (ssize_t)n)
            CHECK(0, "write");
        lseek(a, 0, SEEK_SET);
        lseek(c, 0, SEEK_SET);
        tq_reader *r;
        tq_frame *f;
        tq_reader_open_fd(&r, a, "a");
        tq_reader_chain_fd(r, c, "c");
        int k = 0, ok = 1;
        tq_status st;
        while ((st = tq_reader_next(r, &f)) == TQ_OK) {
            if (k == total)
                ok &= f->offset == 0 && f->index == (uint64_t)total;
            k++;
        }
        CHECK(st == TQ_EOF && k == 2 * total && ok, "chained inputs: %d frames, %s", k, tq_errmsg());
        tq_reader_close(r);
        close(a);
        close(c);
    }
    free(orig);
    free(b);
    close(fd);
    for (int i = 0; i < nm; i++)
        free(m[i].data);
}

/* A frame filled in by hand and put gives what tq_writer_write gives. */
static void check_put_by_hand(void)
{
    float data[4] = {0.5f, -1, 2, 3};
    int a = memfile(), b = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, a, "a");
    int64_t dims[2] = {2, 2};
    tq_writer_write(w, "v", TQ_DTYPE_F32, 2, dims, "k=1", 4, data, 16);
    tq_writer_close(w, 1);

    tq_writer_open_fd(&w, b, "b");
    tq_frame f;
    memset(&f, 0, sizeof f);
    strcpy(f.name, "v");
    f.dtype = TQ_DTYPE_F32;
    f.rank = 2;
    f.dims[0] = f.dims[1] = 2;
    f.meta = "k=1";
    f.meta_len = 4;
    f.stored = data;
    f.stored_size = f.raw_size = 16;
    CHECK(tq_writer_put(w, &f) == TQ_OK, "put by hand: %s", tq_errmsg());
    /* bad frames by hand: each refused, nothing written */
    tq_frame g = f;
    g.flags = 2;
    CHECK(tq_writer_put(w, &g) == TQ_ERR_USAGE && contains(tq_errmsg(), "flags"), "flags: %s",
          tq_errmsg());
    g = f;
    g.stored_size = 12;
    CHECK(tq_writer_put(w, &g) == TQ_ERR_USAGE && contains(tq_errmsg(), "stored size"),
          "stored size: %s", tq_errmsg());
    g = f;
    g.raw_size = g.stored_size = 12;
    CHECK(tq_writer_put(w, &g) == TQ_ERR_USAGE && contains(tq_errmsg(), "shape needs 16"),
          "raw size: %s", tq_errmsg());
    g = f;
    g.name[0] = 0;
    CHECK(tq_writer_put(w, &g) == TQ_ERR_USAGE && contains(tq_errmsg(), "empty frame name"),
          "empty name: %s", tq_errmsg());
    g = f;
    g.meta = "k1";
    g.meta_len = 3;
    CHECK(tq_writer_put(w, &g) == TQ_ERR_USAGE && contains(tq_errmsg(), "metadata"), "meta: %s",
          tq_errmsg());
    g = f;
    g.flags = TQ_FLAG_ZLIB; /* claims zlib, holds raw floats */
    CHECK(tq_writer_put(w, &g) == TQ_ERR_USAGE && contains(tq_errmsg(), "zlib"), "zlib: %s",
          tq_errmsg());
    /* a real zlib payload by hand is accepted */
    unsigned char z[64];
    uLongf zl = sizeof z;
    compress2(z, &zl, (const Bytef *)data, 16, 6);
    g = f;
    g.flags = TQ_FLAG_ZLIB;
    g.stored = z;
    g.stored_size = zl;
    CHECK(tq_writer_put(w, &g) == TQ_OK, "zlib by hand: %s", tq_errmsg());
    tq_writer_close(w, 1);
    size_t na, nb;
    unsigned char *pa = slurp(a, &na), *pb = slurp(b, &nb);
    CHECK(nb > na && !memcmp(pa, pb, na), "put by hand differs from write");
    /* the second frame of b reads back as the same floats */
    lseek(b, 0, SEEK_SET);
    tq_reader *r;
    tq_frame *rf;
    tq_reader_open_fd(&r, b, "b");
    const void *d = NULL;
    CHECK(tq_reader_next(r, &rf) == TQ_OK && tq_reader_next(r, &rf) == TQ_OK &&
              tq_frame_data(rf, &d) == TQ_OK && !memcmp(d, data, 16) &&
              tq_reader_next(r, &rf) == TQ_EOF,
          "hand-made zlib frame: %s", tq_errmsg());
    tq_reader_close(r);
    free(pa);
    free(pb);
    close(a);
    close(b);
}

/* Bad API use: the right status, a message naming the problem, and nothing
 * written: the stream holds only the good frames afterwards. */
static void check_api_errors(void)
{
    int fd = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, fd, "mem");
    float x[64] = {0};
    int64_t d2[2] = {2, 3}, d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, dq[2] = {1, 33};
    struct { tq_status st; const char *part; } got[24];
    int k = 0;
#define TRY(call, part_)                                                                     \
    do {                                                                                     \
        got[k].st = (call);                                                                  \
        CHECK(got[k].st == TQ_ERR_USAGE && contains(tq_errmsg(), part_),                     \
              "%s: status %d, message '%s'", #call, got[k].st, tq_errmsg());                 \
        k++;                                                                                 \
    } while (0)
    TRY(tq_writer_write(w, "", TQ_DTYPE_F32, 2, d2, NULL, 0, x, 24), "empty frame name");
    TRY(tq_writer_write(w, "a\tb", TQ_DTYPE_F32, 2, d2, NULL, 0, x, 24), "control");
    TRY(tq_writer_write(w, "a\"b", TQ_DTYPE_F32, 2, d2, NULL, 0, x, 24), "quote");
    TRY(tq_writer_write(w, NULL, TQ_DTYPE_F32, 2, d2, NULL, 0, x, 24), "name");
    char longname[300];
    memset(longname, 'n', 299);
    longname[299] = 0;
    TRY(tq_writer_write(w, longname, TQ_DTYPE_F32, 2, d2, NULL, 0, x, 24), "over the limit");
    TRY(tq_writer_write(w, "m", TQ_DTYPE_F32, 2, d2, "k=v", 3, x, 24), "NUL");
    TRY(tq_writer_write(w, "m", TQ_DTYPE_F32, 2, d2, "kv", 3, x, 24), "key=value");
    TRY(tq_writer_write(w, "m", TQ_DTYPE_F32, 2, d2, NULL, 4, x, 24), "metadata");
    TRY(tq_writer_write(w, "s", TQ_DTYPE_F32, 2, d2, NULL, 0, x, 20), "20 bytes given, the shape needs 24");
    TRY(tq_writer_write(w, "s", TQ_DTYPE_F32, 2, d2, NULL, 0, NULL, 24), "no data");
    TRY(tq_writer_write(w, "r", TQ_DTYPE_F32, 9, d9, NULL, 0, x, 4), "rank");
    TRY(tq_writer_write(w, "r", TQ_DTYPE_F32, -1, d2, NULL, 0, x, 4), "rank");
    TRY(tq_writer_write(w, "t", (tq_dtype)15, 1, d2, NULL, 0, x, 4), "dtype");
    TRY(tq_writer_write(w, "q", TQ_DTYPE_Q8_0, 2, dq, NULL, 0, x, 34), "multiple of 32");
    TRY(tq_writer_write(w, "z", TQ_DTYPE_STR, 1, d2, NULL, 0, x, 8), "str");
    unsigned char sbad[24] = {0};
    sbad[8] = 5; /* offsets 0, 5 over 0 bytes */
    int64_t d1[1] = {2};
    TRY(tq_writer_write(w, "z", TQ_DTYPE_STR, 1, d1, NULL, 0, sbad, 24), "out of order or range");
    const char *bad_utf8[1] = {"\xc3("};
    size_t bl[1] = {2};
    TRY(tq_writer_write_str(w, "u", 1, bad_utf8, bl), "UTF-8");
    TRY(tq_writer_write_str(w, "u", -1, bad_utf8, bl), "row count");
    const char *nul[1] = {NULL};
    TRY(tq_writer_write_str(w, "u", 1, nul, bl), "NULL");
#undef TRY
    /* one good frame after all that */
    CHECK(tq_writer_write(w, "ok", TQ_DTYPE_F32, 2, d2, NULL, 0, x, 24) == TQ_OK, "good frame");
    CHECK(tq_writer_close(w, 1) == TQ_OK, "close after refused frames");
    lseek(fd, 0, SEEK_SET);
    tq_reader *r;
    tq_frame *f;
    tq_reader_open_fd(&r, fd, "mem");
    CHECK(tq_reader_next(r, &f) == TQ_OK && !strcmp(f->name, "ok") &&
              tq_reader_next(r, &f) == TQ_EOF,
          "the stream holds only the good frame: %s", tq_errmsg());
    /* str accessors on a non-str frame */
    const char *s;
    size_t len;
    tq_reader_close(r);
    lseek(fd, 0, SEEK_SET);
    tq_reader_open_fd(&r, fd, "mem");
    tq_reader_next(r, &f);
    CHECK(tq_frame_str(f, 0, &s, &len) == TQ_ERR_USAGE && contains(tq_errmsg(), "not str"),
          "tq_frame_str on f32: %s", tq_errmsg());
    CHECK(tq_frame_meta_get(f, "anything") == NULL, "no metadata");
    tq_reader_close(r);
    close(fd);

    /* inputs and outputs that cannot be opened */
    CHECK(tq_reader_open_path(&r, "/nonexistent/x.tq") == TQ_ERR_NOINPUT &&
              contains(tq_errmsg(), "/nonexistent/x.tq: cannot open"),
          "open missing: %s", tq_errmsg());
    CHECK(tq_writer_open_path(&w, "/nonexistent/dir/x.tq") == TQ_ERR_CANTCREATE &&
              contains(tq_errmsg(), "cannot create"),
          "create in a missing folder: %s", tq_errmsg());
    /* a reader that went away: TQ_ERR_PIPE, sticky */
    int p[2];
    if (pipe(p) == 0) {
        signal(SIGPIPE, SIG_IGN);
        close(p[0]);
        tq_writer_open_fd(&w, p[1], "pipe");
        static float big[1 << 20];
        int64_t db[1] = {1 << 20};
        tq_status st = tq_writer_write(w, "b", TQ_DTYPE_F32, 1, db, NULL, 0, big, sizeof big);
        CHECK(st == TQ_ERR_PIPE, "closed pipe: %d %s", st, tq_errmsg());
        CHECK(tq_writer_write(w, "b", TQ_DTYPE_F32, 1, db, NULL, 0, big, sizeof big) == TQ_ERR_PIPE,
              "failure is sticky");
        CHECK(tq_writer_close(w, 1) == TQ_ERR_PIPE, "close reports it");
        close(p[1]);
    }
}

/* -o FILE is atomic: nothing at FILE until a committed close; an abandoned
 * writer leaves no file and no temporary behind. */
static void check_atomic(void)
{
    char dir[] = "/tmp/tq-test-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "%s/out.tq", dir);
    tq_writer *w;
    float x[3] = {1, 2, 3};
    int64_t d[1] = {3};
    CHECK(tq_writer_open_path(&w, path) == TQ_OK, "open path");
    tq_writer_write(w, "x", TQ_DTYPE_F32, 1, d, NULL, 0, x, 12);
    tq_writer_flush(w);
    struct stat sb;
    CHECK(stat(path, &sb) != 0, "FILE exists before close");
    CHECK(tq_writer_close(w, 1) == TQ_OK && stat(path, &sb) == 0 && sb.st_size == 128,
          "FILE after commit");
    tq_writer_open_path(&w, path);
    tq_writer_write(w, "y", TQ_DTYPE_F32, 1, d, NULL, 0, x, 12);
    tq_writer_close(w, 0);
    CHECK(stat(path, &sb) == 0 && sb.st_size == 128, "abandoned writer replaced FILE");
    unlink(path);
    CHECK(rmdir(dir) == 0, "a temporary file was left in %s", dir);
}

/* A compressed frame above the size kept when read: checked when read, then
 * inflated again on demand; and recompression both ways. */
static void check_large_zlib(void)
{
    size_t n = (65u << 20) + 64;
    unsigned char *raw = calloc(n, 1);
    if (!raw) {
        CHECK(0, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i += 4099)
        raw[i] = (unsigned char)i;
    int fd = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, fd, "mem");
    tq_writer_set_compress(w, 1);
    int64_t d[1] = {(int64_t)n};
    CHECK(tq_writer_write(w, "z", TQ_DTYPE_U8, 1, d, NULL, 0, raw, n) == TQ_OK, "write");
    tq_writer_close(w, 1);
    lseek(fd, 0, SEEK_SET);
    tq_reader *r;
    tq_frame *f;
    tq_reader_open_fd(&r, fd, "mem");
    const void *data;
    CHECK(tq_reader_next(r, &f) == TQ_OK && (f->flags & TQ_FLAG_ZLIB) && f->stored_size < n / 50,
          "read: %s", tq_errmsg());
    CHECK(tq_frame_data(f, &data) == TQ_OK && !memcmp(data, raw, n), "inflated on demand");
    /* recompress: to raw and back */
    int out = memfile();
    tq_writer_open_fd(&w, out, "out");
    CHECK(tq_writer_recompress(w, f, 0) == TQ_OK && tq_writer_recompress(w, f, 9) == TQ_OK,
          "recompress: %s", tq_errmsg());
    tq_writer_close(w, 1);
    tq_reader_close(r);
    lseek(out, 0, SEEK_SET);
    tq_reader_open_fd(&r, out, "out");
    CHECK(tq_reader_next(r, &f) == TQ_OK && f->flags == 0 && f->stored_size == n &&
              !memcmp(f->stored, raw, n),
          "decompressed copy");
    CHECK(tq_reader_next(r, &f) == TQ_OK && f->flags == TQ_FLAG_ZLIB &&
              tq_frame_data(f, &data) == TQ_OK && !memcmp(data, raw, n),
          "level 9 copy");
    tq_reader_close(r);
    close(out);
    close(fd);
    free(raw);
}

/* A first frame with an empty payload: stored is a valid pointer, not NULL
 * (found by fuzzing: NULL + 0 in the padding check). */
static void check_empty_first(void)
{
    int fd = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, fd, "mem");
    int64_t d[2] = {0, 3};
    tq_writer_write(w, "e", TQ_DTYPE_F32, 2, d, NULL, 0, NULL, 0);
    tq_writer_close(w, 1);
    lseek(fd, 0, SEEK_SET);
    tq_reader *r;
    tq_frame *f;
    const void *data = NULL;
    tq_reader_open_fd(&r, fd, "mem");
    CHECK(tq_reader_next(r, &f) == TQ_OK && f->stored != NULL && f->raw_size == 0 &&
              tq_frame_data(f, &data) == TQ_OK && data != NULL,
          "empty first frame: %s", tq_errmsg());
    tq_reader_close(r);
    close(fd);
}

/* Many names: the batch check stays linear (it was quadratic: 100000
 * distinct names took 23 s), and still tells names apart. */
static void check_many_names(void)
{
    int fd = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, fd, "mem");
    enum { N = 200000 };
    char name[32];
    unsigned char x[2] = {1, 2};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof name, "n%d", i);
            int64_t d[2] = {pass + 1, 1};
            tq_writer_write(w, name, TQ_DTYPE_U8, 2, d, NULL, 0, x, (uint64_t)(pass + 1));
        }
    int64_t bad[2] = {1, 2};
    tq_writer_write(w, "n77777", TQ_DTYPE_U8, 2, bad, NULL, 0, x, 2);
    tq_writer_close(w, 1);
    lseek(fd, 0, SEEK_SET);
    tq_reader *r;
    tq_frame *f;
    tq_reader_open_fd(&r, fd, "mem");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int frames = 0;
    tq_status st;
    while ((st = tq_reader_next(r, &f)) == TQ_OK)
        frames++;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(frames == 2 * N && st == TQ_ERR_DATA &&
              contains(tq_errmsg(), "frame 400000 \"n77777\"") &&
              contains(tq_errmsg(), "dim 1 is 2, the earlier batches have 1"),
          "%d frames, then: %s", frames, tq_errmsg());
    CHECK(secs < 5, "400000 frames of 200000 names took %.1f s", secs);
    tq_reader_close(r);
    close(fd);
}

/* tq_frame_meta_get reads whole keys only. */
static void check_meta(void)
{
    tq_frame f;
    memset(&f, 0, sizeof f);
    static const char meta[] = "dim=3\0dims=4\0url=a=b\0e=\0last=z";
    f.meta = meta;
    f.meta_len = sizeof meta;
    const char *v;
    CHECK((v = tq_frame_meta_get(&f, "dim")) && !strcmp(v, "3"), "dim");
    CHECK((v = tq_frame_meta_get(&f, "dims")) && !strcmp(v, "4"), "dims");
    CHECK((v = tq_frame_meta_get(&f, "url")) && !strcmp(v, "a=b"), "value with '='");
    CHECK((v = tq_frame_meta_get(&f, "e")) && !strcmp(v, ""), "empty value");
    CHECK((v = tq_frame_meta_get(&f, "last")) && !strcmp(v, "z"), "last entry");
    CHECK(!tq_frame_meta_get(&f, "di") && !tq_frame_meta_get(&f, "dimsx") &&
              !tq_frame_meta_get(&f, "3") && !tq_frame_meta_get(&f, "a"),
          "prefixes, values and missing keys are not keys");
}

/* tq_reader_lookahead: the first batch of every tensor is looked at first,
 * then every frame comes out of tq_reader_next as if nothing had been read
 * ahead: pass-through byte-identical (a mapped payload, a zlib one, metadata
 * and all), data intact, and the frames ahead are those before the first
 * name that comes again. */
static void check_lookahead(void)
{
    int fd = memfile();
    tq_writer *w;
    tq_writer_open_fd(&w, fd, "mem");
    float a[6] = {1, 2, 3, 4, 5, 6};
    int64_t da[2] = {2, 3}, dz[1] = {1000}, db[1] = {(int64_t)(3u << 20)};
    int32_t z[1000];
    for (int i = 0; i < 1000; i++)
        z[i] = i % 7;
    unsigned char *big = malloc(3u << 20);
    for (size_t i = 0; i < (3u << 20); i++)
        big[i] = (unsigned char)rand64();
    for (int round = 0; round < 2; round++) {
        tq_writer_set_compress(w, 0);
        tq_writer_write(w, "a", TQ_DTYPE_F32, 2, da, "k=v", 4, a, sizeof a);
        tq_writer_write(w, "big", TQ_DTYPE_U8, 1, db, NULL, 0, big, 3u << 20);
        tq_writer_set_compress(w, 6);
        tq_writer_write(w, "z", TQ_DTYPE_I32, 1, dz, NULL, 0, z, sizeof z);
    }
    CHECK(tq_writer_close(w, 1) == TQ_OK, "close");
    size_t n;
    unsigned char *orig = slurp(fd, &n);

    lseek(fd, 0, SEEK_SET);
    tq_reader *r;
    tq_reader_open_fd(&r, fd, "in");
    size_t ahead = 0, again = 0;
    CHECK(tq_reader_lookahead(r, &ahead) == TQ_OK && ahead == 3, "lookahead: %zu frames", ahead);
    CHECK(tq_reader_lookahead(r, &again) == TQ_OK && again == 3, "lookahead twice: %zu", again);
    const char *names[] = {"a", "big", "z"};
    for (size_t i = 0; i < 3; i++) {
        const tq_frame *f = tq_reader_ahead(r, i);
        CHECK(f && !strcmp(f->name, names[i]) && f->index == i, "frame ahead %zu", i);
    }
    CHECK(tq_reader_ahead(r, 3) == NULL, "only the first batch of each tensor is ahead");
    int out = memfile();
    tq_writer *wo;
    tq_writer_open_fd(&wo, out, "out");
    tq_frame *f;
    tq_status st;
    int frames = 0, data_ok = 1;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        const void *d;
        if (!strcmp(f->name, "z"))
            data_ok &= tq_frame_data(f, &d) == TQ_OK && !memcmp(d, z, sizeof z);
        if (!strcmp(f->name, "big"))
            data_ok &= tq_frame_data(f, &d) == TQ_OK && !memcmp(d, big, 3u << 20);
        if (!strcmp(f->name, "a"))
            data_ok &= !strcmp(tq_frame_meta_get(f, "k"), "v");
        CHECK(f->index == (uint64_t)frames, "index %llu", (unsigned long long)f->index);
        if (tq_writer_put(wo, f))
            break;
        frames++;
    }
    CHECK(st == TQ_EOF && frames == 6 && data_ok, "frames after lookahead: %d, %s", frames,
          tq_errmsg());
    CHECK(tq_writer_close(wo, 1) == TQ_OK, "close copy");
    tq_reader_close(r);
    size_t n2;
    unsigned char *copy = slurp(out, &n2);
    CHECK(n2 == n && !memcmp(orig, copy, n), "pass-through after lookahead is not byte-identical");
    free(copy);
    close(out);

    /* a stream of distinct names ends first: all of it is ahead; a reader
     * closed with frames still ahead frees them */
    lseek(fd, 0, SEEK_SET);
    int one = memfile();
    tq_writer_open_fd(&w, one, "one");
    tq_writer_write(w, "a", TQ_DTYPE_F32, 2, da, NULL, 0, a, sizeof a);
    tq_writer_write(w, "big", TQ_DTYPE_U8, 1, db, NULL, 0, big, 3u << 20);
    tq_writer_close(w, 1);
    lseek(one, 0, SEEK_SET);
    tq_reader_open_fd(&r, one, "one");
    CHECK(tq_reader_lookahead(r, &ahead) == TQ_OK && ahead == 2, "distinct names: %zu", ahead);
    CHECK(tq_reader_next(r, &f) == TQ_OK && !strcmp(f->name, "a"), "first after lookahead");
    tq_reader_close(r);
    close(one);

    /* a name per frame: 1024 frames ahead at most, then all in order */
    int many = memfile();
    tq_writer_open_fd(&w, many, "many");
    for (int i = 0; i < 1500; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        tq_writer_write(w, name, TQ_DTYPE_F32, 2, da, NULL, 0, a, sizeof a);
    }
    tq_writer_close(w, 1);
    lseek(many, 0, SEEK_SET);
    tq_reader_open_fd(&r, many, "many");
    CHECK(tq_reader_lookahead(r, &ahead) == TQ_OK && ahead == 1024, "many names: %zu ahead",
          ahead);
    frames = 0;
    int in_order = 1;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        char name[16];
        snprintf(name, sizeof name, "n%d", frames++);
        in_order &= !strcmp(f->name, name);
    }
    CHECK(st == TQ_EOF && frames == 1500 && in_order, "many names: %d frames", frames);
    tq_reader_close(r);
    close(many);

    /* a stream cut inside its second frame: the lookahead fails, and so does
     * every later call, with the same message (a caller that went on read the
     * cut stream as a whole one, and tq-quantize exited 0) */
    int cut = memfile();
    tq_writer_open_fd(&w, cut, "cut");
    tq_writer_write(w, "a", TQ_DTYPE_F32, 2, da, NULL, 0, a, sizeof a);
    tq_writer_write(w, "b", TQ_DTYPE_F32, 2, da, NULL, 0, a, sizeof a);
    tq_writer_close(w, 1);
    off_t whole = lseek(cut, 0, SEEK_END);
    CHECK(ftruncate(cut, whole - 30) == 0, "truncate");
    lseek(cut, 0, SEEK_SET);
    tq_reader_open_fd(&r, cut, "cut");
    st = tq_reader_lookahead(r, &ahead);
    char first[256];
    snprintf(first, sizeof first, "%s", tq_errmsg());
    CHECK(st == TQ_ERR_DATA && strstr(first, "truncated"), "cut lookahead: %d %s", st, first);
    tq_fail(TQ_ERR_IO, "something else in between");
    CHECK(tq_reader_lookahead(r, &ahead) == TQ_ERR_DATA && !strcmp(tq_errmsg(), first),
          "lookahead again: %s", tq_errmsg());
    CHECK(tq_reader_next(r, &f) == TQ_OK && !strcmp(f->name, "a"), "the frame read before it");
    CHECK(tq_reader_next(r, &f) == TQ_ERR_DATA && !strcmp(tq_errmsg(), first),
          "next after a failed lookahead: %s", tq_errmsg());
    tq_reader_close(r);
    close(cut);
    free(orig);
    free(big);
    close(fd);
}

int main(void)
{
    check_layout();
    check_roundtrip();
    check_passthrough();
    check_put_by_hand();
    check_api_errors();
    check_atomic();
    check_large_zlib();
    check_meta();
    check_empty_first();
    check_many_names();
    check_lookahead();
    return CHECK_DONE();
}
