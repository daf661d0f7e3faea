/* run.c: the measuring loop of tq-bench: for each device, op and size, the
 * op's tensors are made, its call timed (timing.c) and its rate set against
 * the device's ceilings. A failing op (not available, out of device memory)
 * costs its row, not the run; a device that fails (a launch refused, an
 * illegal address) ends the run, since no later row on it could be trusted. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

static tq_status call(void *ctx) { return tqb_inst_run(ctx); }

static tq_status add_row(tqb_report *r, int *cap, tqb_result **row)
{
    if (r->nrows == *cap) {
        int nc = *cap ? 2 * *cap : 64;
        tqb_result *n = realloc(r->rows, (size_t)nc * sizeof *n);
        if (!n)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        r->rows = n, *cap = nc;
    }
    *row = &r->rows[r->nrows];
    memset(*row, 0, sizeof **row);
    return TQ_OK;
}

tq_status tqb_run(const tqb_plan *p, tqb_report *r, int *nfailed)
{
    int cap = r->nrows;
    *nfailed = 0;
    for (int d = 0; d < r->ctx.ndev; d++) {
        tq_device *dev = r->ctx.devs[d];
        int small = tqb_device_small(dev);
        for (int o = 0; o < p->nops; o++) {
            const tqb_opdef *op = p->ops[o];
            const int64_t *sizes = p->sizes ? p->sizes : small ? op->small : op->sizes;
            int nsizes = p->sizes ? p->nsizes : 2;
            for (int s = 0; s < nsizes; s++) {
                if (p->progress)
                    p->progress(p->cb, tq_device_name(dev), op->name, sizes[s]);
                tqb_inst *in = NULL;
                tqb_result *row = NULL;
                tq_status st = add_row(r, &cap, &row);
                if (st)
                    return st;
                if (!(st = tqb_inst_new(op, dev, sizes[s], p->seed, &in)))
                    st = tqb_time(call, in, dev, p->reps, p->min_time, &row->t);
                if (st) {
                    /* tq_fail_context names op, size and device once */
                    tq_fail_context(st, "%s n=%lld on %s", op->name, (long long)sizes[s],
                                    tq_device_name(dev));
                    if (st == TQ_ERR_RUNTIME) {
                        tqb_inst_free(in);
                        return st;
                    }
                    if (p->failed)
                        p->failed(p->cb, tq_errmsg());
                    ++*nfailed;
                    tqb_inst_free(in);
                    continue;
                }
                snprintf(row->device, sizeof row->device, "%s", tq_device_name(dev));
                snprintf(row->op, sizeof row->op, "%s", op->name);
                snprintf(row->shape, sizeof row->shape, "%s", in->shape);
                snprintf(row->dtype, sizeof row->dtype, "%s", in->dtype);
                row->n = sizes[s];
                row->flops = in->flops;
                row->bytes = in->bytes;
                tqb_result_rate(row, r->ceil ? &r->ceil[d] : NULL);
                r->nrows++;
                tqb_inst_free(in);
            }
        }
    }
    return TQ_OK;
}

void tqb_report_free_rows(tqb_report *r)
{
    for (int i = 0; i < r->nrows; i++)
        tqb_timing_free(&r->rows[i].t);
    free(r->rows);
    r->rows = NULL;
    r->nrows = 0;
}
