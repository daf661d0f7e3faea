/* fuzz_reader.c: libFuzzer target for the TQ stream reader. The input is read
 * as a stream twice, from a pipe and from a regular file chained to a second
 * copy of itself; every frame's data and strings are touched and the frames
 * are written again. Beyond the sanitizers it asserts what tq-format.5
 * promises: a refused stream is TQ_ERR_DATA with one line naming the input,
 * and whatever the reader accepted is written back as a stream it accepts.
 * Each input also runs with its CRCs made right, frame by frame, so that
 * mutations reach the checks behind the CRCs (zlib, str, shapes, batches). */
#include "tq.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPECT(cond) \
    do {             \
        if (!(cond)) \
            abort(); \
    } while (0)

/* A refusal: one line, "LABEL: frame N", TQ_ERR_DATA. */
static void check_refusal(tq_status st, const char *label)
{
    EXPECT(st == TQ_ERR_DATA);
    const char *m = tq_errmsg();
    EXPECT(!strchr(m, '\n'));
    EXPECT(!strncmp(m, label, strlen(label)) && !strncmp(m + strlen(label), ": frame ", 8));
}

/* Reads every frame of r, touches it, writes it to w; returns frames read and
 * leaves the reader's last status in *end. */
static uint64_t drain(tq_reader *r, tq_writer *w, const char *label, tq_status *end)
{
    tq_frame *f;
    tq_status st;
    uint64_t frames = 0;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        frames++;
        const void *data;
        EXPECT(tq_frame_data(f, &data) == TQ_OK); /* checked when read */
        volatile unsigned char sink = 0;
        if (f->raw_size)
            sink ^= ((const unsigned char *)data)[0] ^ ((const unsigned char *)data)[f->raw_size - 1];
        if (f->dtype == TQ_DTYPE_STR)
            for (int64_t i = 0; i < f->dims[0]; i++) {
                const char *s;
                size_t len;
                EXPECT(tq_frame_str(f, i, &s, &len) == TQ_OK);
                if (len)
                    sink ^= (unsigned char)(s[0] ^ s[len - 1]);
            }
        (void)sink;
        (void)tq_frame_meta_get(f, "a");
        EXPECT(tq_writer_put(w, f) == TQ_OK);
        if (f->raw_size <= (1u << 20))
            EXPECT(tq_writer_recompress(w, f, frames % 2 ? 0 : 1) == TQ_OK);
    }
    if (st != TQ_EOF)
        check_refusal(st, label);
    *end = st;
    return frames;
}

static int memfd_with(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    EXPECT(fd >= 0);
    EXPECT(size == 0 || write(fd, data, size) == (ssize_t)size);
    EXPECT(lseek(fd, 0, SEEK_SET) == 0);
    return fd;
}

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

/* Rewrites the CRCs of every frame that fits; returns whether any changed. */
static int fix_crcs(uint8_t *d, size_t size)
{
    int changed = 0;
    for (size_t o = 0; size - o >= 48 && !memcmp(d + o, "\x89TQF", 4);) {
        size_t hl = le32(d + o + 16);
        if (hl < 48 || hl > size - o)
            break;
        uint64_t stored = le64(d + o + 24);
        int fits = stored <= size - o - hl;
        uint32_t c;
        if (fits) { /* the payload CRC first: the header CRC covers it */
            c = tq_crc32c(0, d + o + hl, (size_t)stored);
            changed |= c != le32(d + o + 20);
            put32(d + o + 20, c);
        }
        c = tq_crc32c(tq_crc32c(0, d + o, 44), d + o + 48, hl - 48);
        changed |= c != le32(d + o + 44);
        put32(d + o + 44, c);
        if (!fits)
            break;
        o += hl + ((size_t)(stored + 63) & ~(size_t)63);
        if (o > size)
            break;
    }
    return changed;
}

static void one(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    EXPECT(fixed);
    memcpy(fixed, data, size);
    if (fix_crcs(fixed, size))
        one(fixed, size);
    free(fixed);
    return 0;
}

static void one(const uint8_t *data, size_t size)
{
    static int devnull = -1;
    if (devnull < 0)
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

    /* 1: through a pipe, whole (it fits the pipe buffer), to /dev/null */
    int p[2];
    EXPECT(pipe(p) == 0);
    fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    EXPECT(size == 0 || write(p[1], data, size) == (ssize_t)size);
    close(p[1]);
    tq_reader *r;
    tq_writer *w;
    EXPECT(tq_reader_open_fd(&r, p[0], "-") == TQ_OK);
    EXPECT(tq_writer_open_fd(&w, devnull, "null") == TQ_OK);
    tq_status end;
    drain(r, w, "stdin", &end);
    tq_reader_close(r);
    EXPECT(tq_writer_close(w, 1) == TQ_OK);
    close(p[0]);

    /* 2: from a file chained to a copy of itself, into a file that must then
     * read back whole */
    int a = memfd_with(data, size), b = memfd_with(data, size), out = memfd_with(NULL, 0);
    EXPECT(tq_reader_open_fd(&r, a, "a") == TQ_OK);
    EXPECT(tq_reader_chain_fd(r, b, "b") == TQ_OK);
    EXPECT(tq_writer_open_fd(&w, out, "out") == TQ_OK);
    tq_frame *f;
    tq_status st;
    uint64_t frames = 0;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        frames++;
        EXPECT(tq_writer_put(w, f) == TQ_OK);
    }
    if (st != TQ_EOF)
        check_refusal(st, strncmp(tq_errmsg(), "a:", 2) ? "b" : "a");
    tq_reader_close(r);
    EXPECT(tq_writer_close(w, 1) == TQ_OK);
    EXPECT(lseek(out, 0, SEEK_SET) == 0);
    EXPECT(tq_reader_open_fd(&r, out, "out") == TQ_OK);
    EXPECT(tq_writer_open_fd(&w, devnull, "null") == TQ_OK);
    /* what the reader accepted, written again, reads back whole */
    EXPECT(drain(r, w, "out", &end) == frames && end == TQ_EOF);
    tq_reader_close(r);
    EXPECT(tq_writer_close(w, 1) == TQ_OK);
    close(a);
    close(b);
    close(out);
}
