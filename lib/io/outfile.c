/* outfile.c: binary output that is not a TQ stream (.npy, safetensors), written
 * atomically as the writer does: a temporary file beside the target, renamed
 * on success, removed on failure or interruption. */
#include "io.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct tq_outfile {
    int fd;
    char *path, *tmp; /* NULL for standard output */
    tq_status failed; /* sticky: a failed write fails the close */
};

tq_status tq_outfile_open(tq_outfile **out, const char *path)
{
    tq_outfile *o = calloc(1, sizeof *o);
    if (!o)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!path || !strcmp(path, "-")) {
        o->fd = 1;
        *out = o;
        return TQ_OK;
    }
    tq_status st;
    if (!(o->path = strdup(path)))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    else
        st = tq_atomic_open(path, &o->fd, &o->tmp);
    if (st) {
        free(o->path);
        free(o);
        return st;
    }
    *out = o;
    return TQ_OK;
}

const char *tq_outfile_label(const tq_outfile *o) { return o->path ? o->path : "stdout"; }
int tq_outfile_fd(const tq_outfile *o) { return o->fd; }

uint64_t tq_outfile_tell(const tq_outfile *o)
{
    off_t at = lseek(o->fd, 0, SEEK_CUR);
    return at < 0 ? 0 : (uint64_t)at;
}

int tq_outfile_seekable(const tq_outfile *o)
{
    struct stat sb;
    if (fstat(o->fd, &sb) || !(S_ISREG(sb.st_mode) || S_ISCHR(sb.st_mode)) || isatty(o->fd))
        return 0;
    int fl = fcntl(o->fd, F_GETFL);
    if (fl < 0 || (fl & O_APPEND)) /* pwrite would append, not place */
        return 0;
    return lseek(o->fd, 0, SEEK_CUR) >= 0;
}

static tq_status write_fail(tq_outfile *o)
{
    if (errno == EPIPE)
        return o->failed = tq_fail(TQ_ERR_PIPE, "%s: reader went away", tq_outfile_label(o));
    return o->failed = tq_fail(TQ_ERR_IO, "%s: write failed: %s", tq_outfile_label(o),
                               strerror(errno));
}

tq_status tq_outfile_write(tq_outfile *o, const void *p, size_t n)
{
    const char *c = p;
    if (o->failed)
        return o->failed;
    while (n) {
        ssize_t k = write(o->fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return write_fail(o);
        }
        c += k;
        n -= (size_t)k;
    }
    return TQ_OK;
}

tq_status tq_outfile_pwrite(tq_outfile *o, const void *p, size_t n, uint64_t off)
{
    const char *c = p;
    if (o->failed)
        return o->failed;
    while (n) {
        ssize_t k = pwrite(o->fd, c, n, (off_t)off);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return write_fail(o);
        }
        c += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return TQ_OK;
}

tq_status tq_outfile_close(tq_outfile *o, int commit)
{
    if (!o)
        return TQ_OK;
    tq_status st = commit ? o->failed : TQ_OK;
    if (o->path && close(o->fd) && !st && commit)
        st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", o->path, strerror(errno));
    st = tq_atomic_finish(o->tmp, o->path, commit, st);
    free(o->path);
    free(o);
    return st;
}
