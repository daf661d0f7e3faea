/* tools.c: tq-bench --tools: the tools as whole processes. */
#include "bench.h"

tq_status tqb_tools_run(const char *bindir, int reps, double scale, tqb_result **rows,
                        int *nrows, FILE *log)
{
    (void)bindir, (void)reps, (void)scale, (void)rows, (void)nrows, (void)log;
    return tq_fail(TQ_ERR_USAGE, "--tools is not written yet");
}
