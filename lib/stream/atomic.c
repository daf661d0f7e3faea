/* atomic.c: output files written atomically: a temporary file beside the target
 * (so rename(2) is atomic), renamed on success, removed on failure, and removed
 * too if a signal interrupts the run (CONVENTIONS.md: no half-written FILE). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* The registry the signal handler walks: plain pointers, no locking, since a
 * tool opens its outputs from one thread and unlink is async-signal-safe. */
#define MAX_TEMP 16
static char *temp_paths[MAX_TEMP];

void tq_tempfile_add(const char *path)
{
    for (int i = 0; i < MAX_TEMP; i++)
        if (!temp_paths[i]) {
            temp_paths[i] = (char *)path;
            return;
        }
}

void tq_tempfile_remove(const char *path)
{
    for (int i = 0; i < MAX_TEMP; i++)
        if (temp_paths[i] == path)
            temp_paths[i] = NULL;
}

void tq_tempfile_cleanup_all(void)
{
    for (int i = 0; i < MAX_TEMP; i++)
        if (temp_paths[i])
            unlink(temp_paths[i]);
}

tq_status tq_atomic_open(const char *path, int *fd, char **tmp)
{
    /* Only a regular file (or a new one) is replaced by rename: a device, a
     * FIFO or a socket (-o /dev/null, -o /dev/stdout, a named pipe) is written
     * in place, or rename would put a plain file where the device was. */
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        *tmp = NULL;
        *fd = open(path, O_WRONLY | O_CLOEXEC);
        if (*fd < 0)
            return tq_fail(TQ_ERR_CANTCREATE, "%s: cannot open for writing: %s", path,
                           strerror(errno));
        return TQ_OK;
    }
    size_t tl = strlen(path) + 32;
    char *t = malloc(tl);
    if (!t)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    const char *base = strrchr(path, '/');
    snprintf(t, tl, "%.*s.%s.tmp-XXXXXX", base ? (int)(base - path + 1) : 0, path,
             base ? base + 1 : path);
    *fd = mkostemp(t, O_CLOEXEC);
    if (*fd < 0) {
        tq_status st = tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", path, strerror(errno));
        free(t);
        return st;
    }
    tq_tempfile_add(t);
    /* mkstemp makes 0600; the finished file gets the mode a plain create would */
    mode_t um = umask(0);
    umask(um);
    fchmod(*fd, 0666 & ~um);
    *tmp = t;
    return TQ_OK;
}

tq_status tq_atomic_finish(char *tmp, const char *path, int commit, tq_status st)
{
    if (!tmp)
        return st;
    if (commit && !st && rename(tmp, path))
        st = tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", path, strerror(errno));
    if (!commit || st)
        unlink(tmp);
    tq_tempfile_remove(tmp);
    free(tmp);
    return st;
}
