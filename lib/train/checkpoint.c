/* checkpoint.c: saving and restoring the whole state of a training run, so
 * that a run killed at any point and resumed from its last checkpoint writes
 * the same model bytes as one never interrupted. The file is a TQ stream: a
 * "checkpoint" frame whose metadata holds the options and a fingerprint of
 * the data (a resume with anything different is refused, saying what), then
 * the counters, the generator, the weights and the optimizer's moments (for
 * lbfgs: the iterate, its gradient and the pairs of its memory). */
#include "../internal.h"
#include "trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

enum { C_EPOCH, C_POS, C_STEP, C_EXAMPLES, C_BATCHES, C_BAD, C_HAVE_BEST, C_DONE, C_STOPPED,
       C_OPT_T, C_UNITS, C_SIZE, C_CLEAN, C_COUNT };

int64_t tq_trainer_step_count(const tq_trainer *t) { return t->step; }

static uint32_t data_crc(const tq_train_data *d)
{
    if (!d)
        return 0;
    uint32_t c = tq_crc32c(0, d->x, (size_t)(d->n * d->d) * 4);
    c = tq_crc32c(c, d->y, (size_t)d->n * 8);
    if (d->w)
        c = tq_crc32c(c, d->w, (size_t)d->n * 4);
    return tq_crc32c(c, d->gstart, (size_t)(d->ngroups + 1) * 8);
}

/* The options and data as "key=value\0" pairs: the keys are the options'
 * names, so a mismatch reads as the option to change. */
static size_t describe(const tq_trainer *t, char *m, size_t cap)
{
    const tq_train_cfg *c = &t->c;
    size_t n = 0;
#define KV(...) n += (size_t)snprintf(m + n, n < cap ? cap - n : 0, __VA_ARGS__) + 1
    KV("model=%s", tq_train_kind_names[c->kind]);
    KV("loss=%s", tq_train_loss_names[t->loss]);
    char h[256] = "";
    size_t hl = 0;
    for (int i = 1; i < t->nl && hl < sizeof h; i++)
        hl += (size_t)snprintf(h + hl, sizeof h - hl, "%s%lld", i > 1 ? "," : "", (long long)t->dims[i]);
    KV("hidden=%s", h);
    KV("activation=%s", tq_train_act_names[c->act]);
    KV("classes=%lld", (long long)t->dims[t->nl]);
    KV("standardize=%d", c->standardize);
    KV("optimizer=%s", tq_train_optim_names[c->optim]);
    KV("lr=%.17g", c->lr);
    KV("momentum=%.17g", c->momentum);
    KV("beta1=%.17g", c->beta1);
    KV("beta2=%.17g", c->beta2);
    KV("eps=%.17g", c->eps);
    KV("l2=%.17g", c->l2);
    KV("weight-decay=%.17g", c->wd);
    KV("schedule=%s", tq_train_sched_names[c->sched]);
    KV("warmup=%lld", (long long)c->warmup);
    KV("batch=%lld", (long long)c->batch);
    KV("epochs=%lld", (long long)c->epochs);
    KV("patience=%lld", (long long)c->patience);
    KV("max-iter=%lld", (long long)c->max_iter);
    KV("tol=%.17g", c->tol);
    KV("n-iter-no-change=%lld", (long long)c->no_change);
    KV("seed=%llu", (unsigned long long)c->seed);
    KV("precision=%s", tq_dtype_name(c->precision ? c->precision : TQ_DTYPE_F32));
    KV("data=%lld x %lld, crc %08x", (long long)t->tr->n, (long long)t->tr->d, data_crc(t->tr));
    KV("valid=%lld x %lld, crc %08x", t->va ? (long long)t->va->n : 0LL,
       t->va ? (long long)t->va->d : 0LL, data_crc(t->va));
#undef KV
    return n;
}

static tq_status put(tq_writer *w, const char *name, tq_dtype dt, int64_t n, const void *v)
{
    return tq_writer_write(w, name, dt, 1, &n, NULL, 0, v, (uint64_t)n * tq_dtype_size(dt));
}

static tq_status fsync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
             slash ? path : ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return tq_fail(TQ_ERR_IO, "%s: cannot open to sync: %s", dir, strerror(errno));
    int bad = fsync(fd) && errno != EINVAL; /* some file systems cannot sync a folder */
    close(fd);
    return bad ? tq_fail(TQ_ERR_IO, "%s: sync failed: %s", dir, strerror(errno)) : TQ_OK;
}

/* The L-BFGS state: "lbfgs" f64 [x, g, s (memory x n), y (memory x n), rho
 * (memory), f, fold, step, gmax], "lbfgs_n" i64 [head, count, iter, fevals,
 * state]. */
#define LB_DOUBLES(n) (2 * (n) + 2 * TQ_LBFGS_MEMORY * (n) + TQ_LBFGS_MEMORY + 4)
static tq_status put_lbfgs(tq_writer *w, const tq_lbfgs *lb)
{
    size_t n = lb->n, m = TQ_LBFGS_MEMORY, at = 0;
    double *v = malloc(LB_DOUBLES(n) * 8);
    if (!v)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for the checkpoint");
    memcpy(v + at, lb->x, n * 8), at += n;
    memcpy(v + at, lb->g, n * 8), at += n;
    memcpy(v + at, lb->s, m * n * 8), at += m * n;
    memcpy(v + at, lb->y, m * n * 8), at += m * n;
    memcpy(v + at, lb->rho, m * 8), at += m;
    v[at++] = lb->f, v[at++] = lb->fold, v[at++] = lb->step, v[at++] = lb->gmax;
    int64_t c[5] = {lb->head, lb->count, lb->iter, lb->fevals, lb->state};
    tq_status st = put(w, "lbfgs", TQ_DTYPE_F64, (int64_t)at, v);
    free(v);
    return st ? st : put(w, "lbfgs_n", TQ_DTYPE_I64, 5, c);
}

static tq_status take(tq_frame *f, tq_dtype dt, int64_t n, void *dst, const char *path);

static tq_status take_lbfgs(tq_frame *f, tq_lbfgs *lb, const char *path)
{
    size_t n = lb->n, m = TQ_LBFGS_MEMORY, at = 0;
    double *v = malloc(LB_DOUBLES(n) * 8);
    if (!v)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for the checkpoint");
    tq_status st = take(f, TQ_DTYPE_F64, (int64_t)LB_DOUBLES(n), v, path);
    if (!st) {
        memcpy(lb->x, v + at, n * 8), at += n;
        memcpy(lb->g, v + at, n * 8), at += n;
        memcpy(lb->s, v + at, m * n * 8), at += m * n;
        memcpy(lb->y, v + at, m * n * 8), at += m * n;
        memcpy(lb->rho, v + at, m * 8), at += m;
        lb->f = v[at++], lb->fold = v[at++], lb->step = v[at++], lb->gmax = v[at++];
    }
    free(v);
    return st;
}

tq_status tq_trainer_checkpoint(const tq_trainer *t, const char *path, void (*hook)(void))
{
    char meta[4096];
    size_t ml = describe(t, meta, sizeof meta);
    if (ml > sizeof meta)
        return tq_fail(TQ_ERR_USAGE, "checkpoint: options too long");
    int64_t cnt[C_COUNT] = {t->epoch, t->pos, t->step, t->examples, t->ep_batches, t->bad_epochs,
                            t->have_best, t->done, t->stopped, t->opt.t, t->units,
                            (int64_t)tq_net_size(t->net), t->clean};
    double sums[4] = {t->ep_loss, t->best_metric, t->scale, t->best_loss};
    int64_t one = 1, size = cnt[C_SIZE];
    int fd;
    char *tmp;
    tq_writer *w = NULL;
    tq_status st = tq_atomic_open(path, &fd, &tmp);
    if (st)
        return st;
    if (!tmp) { /* not a regular file: nothing to rename over */
        close(fd);
        return tq_fail(TQ_ERR_CANTCREATE, "%s: a checkpoint must be a regular file", path);
    }
    st = tq_writer_open_fd(&w, fd, path);
    if (!st)
        st = tq_writer_write(w, "checkpoint", TQ_DTYPE_I64, 0, NULL, meta, ml, &one, 8);
    if (!st)
        st = put(w, "counters", TQ_DTYPE_I64, C_COUNT, cnt);
    if (!st)
        st = put(w, "rng", TQ_DTYPE_I64, 4, t->rng.s);
    if (!st)
        st = put(w, "sums", TQ_DTYPE_F64, 4, sums);
    if (!st)
        st = put(w, "theta", TQ_DTYPE_F32, size, tq_net_theta(t->net));
    if (!st && hook) {
        tq_writer_flush(w);
        hook();
    }
    if (!st)
        st = put(w, "best", TQ_DTYPE_F32, size, t->best);
    if (!st)
        st = put(w, "m", TQ_DTYPE_F64, size, t->opt.m);
    if (!st && t->opt.v)
        st = put(w, "v", TQ_DTYPE_F64, size, t->opt.v);
    if (!st)
        st = put(w, "perm", TQ_DTYPE_I64, t->units, t->perm);
    if (!st && t->c.optim == TQ_OPTIM_LBFGS)
        st = put_lbfgs(w, &t->lb);
    tq_status cst = tq_writer_close(w, !st);
    if (!st)
        st = cst;
    if (!st && fsync(fd))
        st = tq_fail(TQ_ERR_IO, "%s: sync failed: %s", path, strerror(errno));
    if (close(fd) && !st)
        st = tq_fail(TQ_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    st = tq_atomic_finish(tmp, path, 1, st);
    return st ? st : fsync_dir(path);
}

/* ---- resume ---- */

static const char *meta_next(const char *m, size_t len, size_t *at)
{
    if (*at >= len)
        return NULL;
    const char *e = m + *at;
    *at += strlen(e) + 1;
    return e;
}

/* The first key whose value differs between the file's and ours. */
static tq_status compare(const char *path, const tq_frame *f, const char *ours, size_t ol)
{
    size_t a = 0;
    const char *e;
    while ((e = meta_next(ours, ol, &a))) {
        const char *eq = strchr(e, '=');
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - e), e);
        const char *theirs = tq_frame_meta_get(f, key);
        if (!theirs)
            return tq_fail(TQ_ERR_DATA, "%s: not a checkpoint of this tq-train (no %s)", path, key);
        if (strcmp(theirs, eq + 1)) {
            if (!strcmp(key, "data") || !strcmp(key, "valid"))
                return tq_fail(TQ_ERR_DATA, "%s: a checkpoint of other %s data (%s there, %s here)",
                               path, key[0] == 'd' ? "training" : "validation", theirs, eq + 1);
            return tq_fail(TQ_ERR_DATA, "%s: a checkpoint of other options: --%s %s there, %s here",
                           path, key, theirs, eq + 1);
        }
    }
    return TQ_OK;
}

static tq_status take(tq_frame *f, tq_dtype dt, int64_t n, void *dst, const char *path)
{
    const void *data;
    if (f->dtype != dt || f->rank != 1 || f->dims[0] != n)
        return tq_fail(TQ_ERR_DATA, "%s: frame \"%s\" is not %s [%lld]", path, f->name,
                       tq_dtype_name(dt), (long long)n);
    tq_status st = tq_frame_data(f, &data);
    if (!st && n)
        memcpy(dst, data, (size_t)n * tq_dtype_size(dt));
    return st;
}

tq_status tq_trainer_resume(tq_trainer *t, const char *path)
{
    tq_reader *r;
    tq_status st = tq_reader_open_path(&r, path);
    if (st)
        return st;
    char ours[4096];
    size_t ol = describe(t, ours, sizeof ours);
    int64_t cnt[C_COUNT], size = (int64_t)tq_net_size(t->net);
    double sums[4];
    unsigned seen = 0;
    int lbfgs = t->c.optim == TQ_OPTIM_LBFGS;
    tq_frame *f;
    while (!st && (st = tq_reader_next(r, &f)) == TQ_OK) {
        if (!strcmp(f->name, "checkpoint")) {
            st = compare(path, f, ours, ol);
            seen |= 1;
        } else if (!(seen & 1)) {
            st = tq_fail(TQ_ERR_DATA, "%s: not a tq-train checkpoint", path);
        } else if (!strcmp(f->name, "counters")) {
            if (!(st = take(f, TQ_DTYPE_I64, C_COUNT, cnt, path)) &&
                (cnt[C_UNITS] != t->units || cnt[C_SIZE] != size))
                st = tq_fail(TQ_ERR_DATA, "%s: the checkpoint's sizes do not fit", path);
            seen |= 2;
        } else if (!strcmp(f->name, "rng")) {
            st = take(f, TQ_DTYPE_I64, 4, t->rng.s, path), seen |= 4;
        } else if (!strcmp(f->name, "sums")) {
            st = take(f, TQ_DTYPE_F64, 4, sums, path), seen |= 8;
        } else if (!strcmp(f->name, "theta")) {
            st = take(f, TQ_DTYPE_F32, size, tq_net_theta(t->net), path), seen |= 16;
        } else if (!strcmp(f->name, "best")) {
            st = take(f, TQ_DTYPE_F32, size, t->best, path), seen |= 32;
        } else if (!strcmp(f->name, "m")) {
            st = take(f, TQ_DTYPE_F64, size, t->opt.m, path), seen |= 64;
        } else if (!strcmp(f->name, "v") && t->opt.v) {
            st = take(f, TQ_DTYPE_F64, size, t->opt.v, path), seen |= 128;
        } else if (!strcmp(f->name, "perm")) {
            st = take(f, TQ_DTYPE_I64, t->units, t->perm, path), seen |= 256;
        } else if (!strcmp(f->name, "lbfgs") && lbfgs) {
            st = take_lbfgs(f, &t->lb, path), seen |= 512;
        } else if (!strcmp(f->name, "lbfgs_n") && lbfgs) {
            int64_t c[5];
            if (!(st = take(f, TQ_DTYPE_I64, 5, c, path))) {
                t->lb.head = c[0], t->lb.count = c[1], t->lb.iter = c[2], t->lb.fevals = c[3];
                t->lb.state = c[4];
                if (c[0] < 0 || c[0] >= TQ_LBFGS_MEMORY || c[1] < 0 || c[1] > TQ_LBFGS_MEMORY)
                    st = tq_fail(TQ_ERR_DATA, "%s: the checkpoint's L-BFGS memory does not fit", path);
            }
            seen |= 1024;
        }
    }
    tq_reader_close(r);
    if (st != TQ_EOF)
        return st == TQ_OK ? tq_fail(TQ_ERR_DATA, "%s: not a tq-train checkpoint", path) : st;
    unsigned want = (t->opt.v ? 511 : 511 & ~128u) | (lbfgs ? 1536u : 0);
    if ((seen & want) != want)
        return tq_fail(TQ_ERR_DATA, "%s: an incomplete checkpoint", path);
    t->epoch = cnt[C_EPOCH];
    t->pos = cnt[C_POS];
    t->step = cnt[C_STEP];
    t->examples = cnt[C_EXAMPLES];
    t->ep_batches = cnt[C_BATCHES];
    t->bad_epochs = cnt[C_BAD];
    t->have_best = (int)cnt[C_HAVE_BEST];
    t->done = (int)cnt[C_DONE];
    t->stopped = (int)cnt[C_STOPPED];
    t->opt.t = cnt[C_OPT_T];
    t->ep_loss = sums[0];
    t->best_metric = sums[1];
    t->scale = sums[2];
    t->best_loss = sums[3];
    t->clean = cnt[C_CLEAN];
    return tq_net_push(t->net);
}
