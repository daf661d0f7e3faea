/* fault-planted BUG OUT: tq-cat's pass-through, standard input to OUT, done
 * right (BUG "none") or with one bug planted of those the host fault sweep is
 * there to find, so that tests/bats/host-faults.bats can show that the sweep
 * reports each:
 *   unchecked  a malloc'd copy of each payload, used unchecked: a crash
 *   status     out of memory ends with exit 74, an I/O error's
 *   tempfile   a failure ends the process without removing the temporary file
 *   leak       a failure leaves an allocation unfreed (LeakSanitizer's to see)
 *   silent     a failure ends with exit 0 and no word
 *   hang       out of memory waits forever */
#include "tool/tool.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char *copy; /* the last payload, as a tool that changes it would hold it */
} state;

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "fault-planted");
    if (argc != 3)
        tq_tool_usage(&t, "usage: fault-planted none|unchecked|status|tempfile|leak|silent|hang OUT");
    const char *bug = argv[1];
    t.output = argv[2];
    tq_reader *r = NULL;
    tq_writer *w = NULL;
    tq_frame *f;
    state *s = calloc(1, sizeof *s);
    tq_status st = s ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_reader_open_fd(&r, 0, "stdin");
    if (!st)
        st = tq_tool_open_output(&t, &w);
    while (!st && !(st = tq_reader_next(r, &f))) {
        free(s->copy);
        s->copy = malloc(f->stored_size + 1);
        if (!s->copy && strcmp(bug, "unchecked")) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        if (f->stored_size)
            memcpy(s->copy, f->stored, f->stored_size);
        st = tq_writer_put(w, f);
    }
    if (st == TQ_EOF)
        st = TQ_OK;
    if (st && !strcmp(bug, "hang") && st == TQ_ERR_NOMEM)
        for (;;)
            pause();
    if (st && !strcmp(bug, "status") && st == TQ_ERR_NOMEM)
        tq_tool_fail(&t, TQ_ERR_IO); /* "out of memory", exit 74 */
    if (st && !strcmp(bug, "tempfile")) {
        fprintf(stderr, "fault-planted: error: %s\n", tq_errmsg());
        _exit(tq_status_exit_code(st));
    }
    if (st && !strcmp(bug, "silent")) {
        tq_writer_close(w, 0);
        return 0;
    }
    if (st && !strcmp(bug, "leak")) {
        free(s); /* and not s->copy */
        s = NULL;
    }
    tq_status cst = tq_writer_close(w, !st);
    st = st ? st : cst;
    tq_reader_close(r);
    if (s)
        free(s->copy);
    free(s);
    if (st)
        tq_tool_fail(&t, st);
    return 0;
}
