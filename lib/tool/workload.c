/* workload.c: what a tool knows of its work before it opens a device, for
 * auto's rule by size (lib/op/autopick.c): the elements of an input's
 * tensors from its frame headers alone, the bytes of a text input, and for
 * standard input from a pipe, a bounded read-ahead that makes it a file. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A pipe's read-ahead stops here: more than this is large work. */
#define READAHEAD_MAX (16u << 20)
#define CENSUS_FRAMES 4096 /* headers read; past them, counted by bytes */

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void *feed(void *arg);

/* Standard input from a pipe, read ahead while auto might take a GPU: at
 * most READAHEAD_MAX bytes. Ended by then, the bytes go to a memory file
 * that becomes standard input (a regular file: counted below); else a
 * thread feeds them, then the rest of the pipe, into a new pipe that
 * becomes standard input, and the input counts as large. Once a process. */
static int stdin_state; /* 0 not looked at, 1 a file (or made one), 2 large, 3 unknown */
static struct feeder {
    unsigned char *buf;
    size_t n;
    int from, to;
} feeder;

static int stdin_readahead(void)
{
    struct stat sb;
    if (stdin_state)
        return stdin_state;
    stdin_state = 3;
    if (fstat(0, &sb))
        return stdin_state;
    if (S_ISREG(sb.st_mode))
        return stdin_state = 1;
    if (!S_ISFIFO(sb.st_mode) && !S_ISSOCK(sb.st_mode))
        return stdin_state;
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    ssize_t k = 1;
    while (buf && n < READAHEAD_MAX) {
        if (n == cap) {
            unsigned char *b2 = realloc(buf, cap *= 2);
            if (!b2)
                break;
            buf = b2;
        }
        k = read(0, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    if (!buf || k < 0) { /* the reader meets the error itself */
        free(buf);
        return stdin_state;
    }
    if (k == 0) { /* the end: a memory file with what came */
        int fd = memfd_create("tq-stdin", 0);
        size_t done = 0;
        while (fd >= 0 && done < n && (k = write(fd, buf + done, n - done)) > 0)
            done += (size_t)k;
        free(buf);
        if (fd < 0 || done < n || lseek(fd, 0, SEEK_SET) || dup2(fd, 0) < 0) {
            if (fd >= 0)
                close(fd);
            return stdin_state; /* what was read is lost: the reader sees less */
        }
        close(fd);
        return stdin_state = 1;
    }
    int p[2];
    pthread_t th;
    feeder = (struct feeder){buf, n, dup(0), -1};
    if (feeder.from < 0 || pipe(p)) {
        free(buf);
        return stdin_state;
    }
    feeder.to = p[1];
    if (dup2(p[0], 0) < 0 || pthread_create(&th, NULL, feed, &feeder)) {
        free(buf);
        return stdin_state;
    }
    close(p[0]);
    pthread_detach(th);
    return stdin_state = 2;
}

static void *feed(void *arg)
{
    struct feeder *f = arg;
    size_t done = 0;
    ssize_t k;
    while (done < f->n && (k = write(f->to, f->buf + done, f->n - done)) != 0) {
        if (k < 0 && errno != EINTR)
            goto out;
        done += k > 0 ? (size_t)k : 0;
    }
    free(f->buf);
    f->buf = NULL;
    for (;;) {
        char b[1 << 16];
        k = read(f->from, b, sizeof b);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        for (ssize_t w = 0, o = 0; o < k; o += w > 0 ? w : 0)
            if ((w = write(f->to, b + o, (size_t)(k - o))) < 0 && errno != EINTR)
                goto out;
    }
out:
    close(f->to);
    close(f->from);
    return NULL;
}

/* The fd of an input ("-": standard input), opened for counting; -1 when
 * it cannot be counted (then *large says whether a pipe was too long). */
static int count_fd(const char *path, int *large)
{
    *large = 0;
    if (!path || !strcmp(path, "-")) {
        int s = stdin_readahead();
        *large = s == 2;
        return s == 1 ? dup(0) : -1;
    }
    struct stat sb;
    int fd = open(path, O_RDONLY);
    if (fd >= 0 && (fstat(fd, &sb) || !S_ISREG(sb.st_mode))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The bytes of fd from its offset on (a dup of standard input shares its
 * offset: nothing here moves it). */
static off_t span(int fd, off_t *at)
{
    struct stat sb;
    *at = lseek(fd, 0, SEEK_CUR);
    if (*at < 0)
        *at = 0;
    return fstat(fd, &sb) ? *at : sb.st_size;
}

int tq_tool_census(tq_tool *t, const char *path, tq_census *c)
{
    memset(c, 0, sizeof *c);
    if (!tq_device_auto_weighs(t->device))
        return -1;
    int large, fd = count_fd(path, &large);
    if (fd < 0)
        return large ? 1 : -1;
    off_t at, end = span(fd, &at), start = at;
    c->bytes = (double)(end - at);
    int frames = 0;
    while (at < end && frames < CENSUS_FRAMES) {
        unsigned char h[48 + 8 * 8];
        if (pread(fd, h, sizeof h, at) < 48 || memcmp(h, "\x89TQF", 4))
            break;
        int rank = h[8];
        uint64_t hlen = le(h + 16, 4), stored = le(h + 24, 8);
        if (rank > 8 || hlen < 48 + 8u * (unsigned)rank)
            break;
        double el = 1;
        for (int i = 0; i < rank; i++)
            el *= (double)le(h + 48 + 8 * i, 8);
        if (rank >= 2) {
            c->elems += el;
            if (!c->cols) {
                c->cols = (double)le(h + 48 + 8 * (rank - 1), 8);
                c->rows = (double)le(h + 48 + 8 * (rank - 2), 8);
            }
        }
        at += (off_t)(hlen + ((stored + 63) & ~(uint64_t)63));
        frames++;
    }
    if (at < end && at > start) /* the rest, by the bytes read so far */
        c->elems *= (double)(end - start) / (double)(at - start);
    close(fd);
    return 0;
}

double tq_tool_bytes(tq_tool *t, const char *path)
{
    if (!tq_device_auto_weighs(t->device))
        return -1;
    int large, fd = count_fd(path, &large);
    if (fd < 0)
        return large ? TQ_WORK_LARGE : -1;
    off_t at, end = span(fd, &at);
    close(fd);
    return (double)(end - at);
}

tq_status tq_tool_device_open(tq_tool *t, double flops, tq_device **dev)
{
    tq_status st = tq_device_open_for(t->device, flops, dev);
    if (st)
        return st;
    tq_tool_log(t, TQ_LOG_INFO, "device %s", tq_device_why(*dev));
    if (tq_device_startup(*dev)[0])
        tq_tool_log(t, TQ_LOG_INFO, "%s: %s", tq_device_name(*dev), tq_device_startup(*dev));
    return TQ_OK;
}
