/* error.c: the one error convention of libtq: a status code returned, and a
 * one-line message kept per thread for the tool to print. */
#include "tq.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char tq_msg[1024];

const char *tq_errmsg(void) { return tq_msg; }

tq_status tq_fail(tq_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tq_msg, sizeof tq_msg, fmt, ap);
    va_end(ap);
    return st;
}

tq_status tq_fail_context(tq_status st, const char *fmt, ...)
{
    char ctx[512], both[sizeof ctx + sizeof tq_msg + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    size_t c = strlen(ctx);
    if (!strncmp(tq_msg, ctx, c) && tq_msg[c] == ':')
        return st; /* the message names it already ("cuda:0: ...") */
    snprintf(both, sizeof both, "%s: %s", ctx, tq_msg);
    size_t n = strlen(both);
    if (n >= sizeof tq_msg)
        n = sizeof tq_msg - 1;
    memcpy(tq_msg, both, n);
    tq_msg[n] = 0;
    return st;
}

int tq_status_exit_code(tq_status st)
{
    switch (st) {
    case TQ_OK:
    case TQ_EOF:
    case TQ_ERR_PIPE:
        return 0;
    case TQ_ERR_USAGE:
        return 2;
    case TQ_ERR_DATA:
        return 65;
    case TQ_ERR_NOINPUT:
        return 66;
    case TQ_ERR_CANTCREATE:
        return 73;
    case TQ_ERR_IO:
        return 74;
    case TQ_ERR_RUNTIME:
    case TQ_ERR_NOMEM:
        return 1;
    }
    return 1;
}
