/* curve.c: the learning curve of a run, kept a step and an epoch at a time,
 * and written as a TQ stream (--log) for tq-cat, NumPy or a plot of one's
 * own; plot.c draws it. */
#include "../internal.h"
#include "train.h"

static int grow(void **p, int64_t n, size_t es)
{
    void *q = realloc(*p, (size_t)n * es);
    if (!q)
        return 0;
    *p = q;
    return 1;
}

tq_status tq_train_curve_add(tq_train_curve *c, const tq_train_event *ev, double seconds)
{
    if (c->ns == c->cap_s) {
        int64_t n = c->cap_s ? 2 * c->cap_s : 1024;
        if (!grow((void **)&c->s_step, n, 8) || !grow((void **)&c->s_loss, n, 8))
            return tq_fail(TQ_ERR_NOMEM, "out of memory for the learning curve");
        c->cap_s = n;
    }
    c->s_step[c->ns] = ev->step;
    c->s_loss[c->ns++] = ev->loss;
    if (!ev->epoch_end)
        return TQ_OK;
    if (c->ne == c->cap_e) {
        int64_t n = c->cap_e ? 2 * c->cap_e : 64;
        void **cols[] = {(void **)&c->e_epoch, (void **)&c->e_step, (void **)&c->e_examples,
                         (void **)&c->e_train, (void **)&c->e_valid, (void **)&c->e_metric,
                         (void **)&c->e_lr, (void **)&c->e_sec};
        for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
            if (!grow(cols[i], n, 8))
                return tq_fail(TQ_ERR_NOMEM, "out of memory for the learning curve");
        c->cap_e = n;
    }
    int64_t e = c->ne++;
    c->e_epoch[e] = ev->epoch;
    c->e_step[e] = ev->step;
    c->e_examples[e] = ev->examples;
    c->e_train[e] = ev->train_loss;
    c->e_valid[e] = ev->has_valid ? ev->valid_loss : 0;
    c->e_metric[e] = ev->has_valid ? ev->valid_metric : 0;
    c->e_lr[e] = ev->lr;
    c->e_sec[e] = seconds;
    c->has_valid |= ev->has_valid;
    return TQ_OK;
}

void tq_train_curve_free(tq_train_curve *c)
{
    free(c->s_step);
    free(c->s_loss);
    free(c->e_epoch);
    free(c->e_step);
    free(c->e_examples);
    free(c->e_train);
    free(c->e_valid);
    free(c->e_metric);
    free(c->e_lr);
    free(c->e_sec);
    memset(c, 0, sizeof *c);
}

tq_status tq_train_curve_write(const tq_train_curve *c, const char *path)
{
    tq_writer *w;
    tq_status st = tq_writer_open_path(&w, path);
    if (st)
        return st;
    char meta[64];
    int ml = snprintf(meta, sizeof meta, "metric=%s", c->metric) + 1;
    struct {
        const char *name;
        tq_dtype dt;
        const void *v;
        int64_t n;
        int valid_only;
    } cols[] = {
        {"epoch", TQ_DTYPE_I64, c->e_epoch, c->ne, 0},
        {"step", TQ_DTYPE_I64, c->e_step, c->ne, 0},
        {"examples", TQ_DTYPE_I64, c->e_examples, c->ne, 0},
        {"train_loss", TQ_DTYPE_F64, c->e_train, c->ne, 0},
        {"valid_loss", TQ_DTYPE_F64, c->e_valid, c->ne, 1},
        {"metric", TQ_DTYPE_F64, c->e_metric, c->ne, 1},
        {"lr", TQ_DTYPE_F64, c->e_lr, c->ne, 0},
        {"seconds", TQ_DTYPE_F64, c->e_sec, c->ne, 0},
        {"batch_step", TQ_DTYPE_I64, c->s_step, c->ns, 0},
        {"batch_loss", TQ_DTYPE_F64, c->s_loss, c->ns, 0},
    };
    for (size_t i = 0; i < sizeof cols / sizeof cols[0] && !st; i++) {
        if (cols[i].valid_only && !c->has_valid)
            continue;
        int is_metric = !strcmp(cols[i].name, "metric");
        st = tq_writer_write(w, cols[i].name, cols[i].dt, 1, &cols[i].n, is_metric ? meta : NULL,
                             is_metric ? (size_t)ml : 0, cols[i].v ? cols[i].v : "",
                             (uint64_t)cols[i].n * 8);
    }
    tq_status cst = tq_writer_close(w, !st);
    return st ? st : cst;
}
