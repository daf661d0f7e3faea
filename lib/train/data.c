/* data.c: the examples of tq-train read from a TQ stream into host memory:
 * features (f32 [n, d], any float or block-quantized dtype converted on
 * load), targets, optional row weights and group ids. Frames are picked by the
 * rule every tool follows (CONVENTIONS.md): the name given, else the default
 * name, else the one frame of the right rank and kind. */
#include "../internal.h"
#include "train.h"

#include <math.h>

/* One column being gathered: the rows of every frame of one name, in order,
 * converted to `dtype`. */
typedef struct col {
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;
    int64_t rows, cols;
    int src_int;     /* a frame came as integers */
    void *v;
    size_t cap;      /* bytes */
} col;

#define MAX_CAND 8

typedef struct loader {
    const tq_train_names *nm;
    col x, y, g, w;
    col cand[MAX_CAND]; /* rank 2 float frames, while x has no name */
    int ncand;
} loader;

static tq_status bad(const tq_frame *f, const char *fmt, const char *what)
{
    return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s %s", (unsigned long long)f->index,
                   f->name, what, fmt);
}

/* Appends the rows of f to c, converted. cols: the row width c takes (-1:
 * from the first frame). */
static tq_status append(col *c, tq_frame *f, int64_t cols)
{
    int64_t rows = f->rank ? f->dims[0] : 1, w = 1;
    for (int i = 1; i < f->rank; i++)
        w *= f->dims[i];
    if (cols >= 0 && w != cols)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": rows of %lld values, not %lld",
                       (unsigned long long)f->index, f->name, (long long)w, (long long)cols);
    if (c->rows && w != c->cols)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": rows of %lld values after rows of %lld",
                       (unsigned long long)f->index, f->name, (long long)w, (long long)c->cols);
    if (!c->name[0])
        snprintf(c->name, sizeof c->name, "%s", f->name);
    c->cols = w;
    c->src_int |= tq_dtype_is_int(f->dtype);
    size_t es = tq_dtype_size(c->dtype), need = (size_t)((c->rows + rows) * w) * es;
    if (need > c->cap) {
        size_t nc = c->cap ? c->cap : 4096;
        while (nc < need)
            nc *= 2;
        void *nv = realloc(c->v, nc);
        if (!nv)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for %zu bytes of \"%s\"", nc, f->name);
        c->v = nv, c->cap = nc;
    }
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (!st && rows && w)
        st = tq_convert(c->dtype, (char *)c->v + (size_t)(c->rows * w) * es, f->dtype, data,
                        (size_t)(rows * w), w);
    if (st)
        return tq_fail_context(st, "frame %llu \"%s\"", (unsigned long long)f->index, f->name);
    c->rows += rows;
    return TQ_OK;
}

static int is_features(const tq_frame *f)
{
    return f->rank == 2 && (tq_dtype_is_float(f->dtype) || f->dtype == TQ_DTYPE_Q8_0 ||
                            f->dtype == TQ_DTYPE_Q4_0);
}

static tq_status take(loader *L, tq_frame *f)
{
    const tq_train_names *nm = L->nm;
    const char *y = nm->y ? nm->y : "y", *g = nm->group ? nm->group : "group";
    if (!strcmp(f->name, y)) {
        if (!(tq_dtype_is_float(f->dtype) || tq_dtype_is_int(f->dtype)) || f->rank < 1 ||
            f->rank > 2 || (f->rank == 2 && f->dims[1] != 1))
            return bad(f, "must be numbers [n] or [n, 1]", "the targets");
        return append(&L->y, f, 1);
    }
    if (*g && !strcmp(f->name, g)) {
        if (!tq_dtype_is_int(f->dtype) || f->rank < 1 || f->rank > 2 ||
            (f->rank == 2 && f->dims[1] != 1))
            return bad(f, "must be integers [n] or [n, 1]", "the group ids");
        return append(&L->g, f, 1);
    }
    if (nm->weight && !strcmp(f->name, nm->weight)) {
        if (!tq_dtype_is_float(f->dtype) || f->rank < 1 || f->rank > 2 ||
            (f->rank == 2 && f->dims[1] != 1))
            return bad(f, "must be floats [n] or [n, 1]", "the weights");
        return append(&L->w, f, 1);
    }
    if (nm->x) {
        if (strcmp(f->name, nm->x))
            return TQ_OK;
        if (!is_features(f))
            return bad(f, "must be a rank 2 float (or q8_0, q4_0) frame", "the features");
        return append(&L->x, f, -1);
    }
    if (!is_features(f) || !strcmp(f->name, "key"))
        return TQ_OK;
    int i = 0;
    while (i < L->ncand && strcmp(L->cand[i].name, f->name))
        i++;
    if (i == MAX_CAND)
        return tq_fail(TQ_ERR_DATA, "more than %d rank 2 float frames: name the features with --x",
                       MAX_CAND);
    if (i == L->ncand)
        L->cand[L->ncand++].dtype = TQ_DTYPE_F32;
    return append(&L->cand[i], f, -1);
}

/* The features when --x names none: "emb", else the one candidate. */
static tq_status choose_x(loader *L)
{
    int pick = -1;
    for (int i = 0; i < L->ncand; i++)
        if (!strcmp(L->cand[i].name, "emb"))
            pick = i;
    if (pick < 0 && L->ncand == 1)
        pick = 0;
    if (pick < 0 && !L->ncand)
        return tq_fail(TQ_ERR_DATA, "no features: no rank 2 float frame");
    if (pick < 0) {
        char names[512];
        int n = 0;
        for (int i = 0; i < L->ncand && n < (int)sizeof names; i++)
            n += snprintf(names + n, sizeof names - (size_t)n, "%s\"%s\"", i ? ", " : "",
                          L->cand[i].name);
        return tq_fail(TQ_ERR_DATA, "which frame holds the features? %s: name one with --x", names);
    }
    L->x = L->cand[pick];
    L->cand[pick].v = NULL;
    return TQ_OK;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static tq_status finish(loader *L, tq_train_data *d)
{
    tq_status st;
    if (!L->nm->x && (st = choose_x(L)))
        return st;
    if (!L->x.name[0])
        return tq_fail(TQ_ERR_DATA, "no frame \"%s\" (the features)", L->nm->x);
    if (!L->y.name[0])
        return tq_fail(TQ_ERR_DATA, "no frame \"%s\" (the targets; name them with --y)",
                       L->nm->y ? L->nm->y : "y");
    if (L->nm->weight && !L->w.name[0])
        return tq_fail(TQ_ERR_DATA, "no frame \"%s\" (the weights)", L->nm->weight);
    if (L->nm->group && *L->nm->group && !L->g.name[0])
        return tq_fail(TQ_ERR_DATA, "no frame \"%s\" (the group ids)", L->nm->group);
    int64_t n = L->x.rows;
    const col *other[3] = {&L->y, &L->g, &L->w};
    for (int i = 0; i < 3; i++)
        if (other[i]->name[0] && other[i]->rows != n)
            return tq_fail(TQ_ERR_DATA, "%lld rows of features \"%s\" but %lld of \"%s\"",
                           (long long)n, L->x.name, (long long)other[i]->rows, other[i]->name);
    if (!n)
        return tq_fail(TQ_ERR_DATA, "no examples: \"%s\" has no rows", L->x.name);
    if (!L->x.cols)
        return tq_fail(TQ_ERR_DATA, "the features \"%s\" have no columns", L->x.name);
    const float *x = L->x.v;
    for (int64_t i = 0; i < n * L->x.cols; i++)
        if (!isfinite(x[i]))
            return tq_fail(TQ_ERR_DATA, "row %lld of \"%s\": feature %lld is %s",
                           (long long)(i / L->x.cols), L->x.name, (long long)(i % L->x.cols),
                           isnan(x[i]) ? "NaN" : "infinite");
    const double *y = L->y.v;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(y[i]))
            return tq_fail(TQ_ERR_DATA, "row %lld of \"%s\": the target is not finite",
                           (long long)i, L->y.name);
    const float *w = L->w.v;
    for (int64_t i = 0; w && i < n; i++)
        if (!isfinite(w[i]) || w[i] < 0)
            return tq_fail(TQ_ERR_DATA, "row %lld of \"%s\": weight %g is not a finite number >= 0",
                           (long long)i, L->w.name, w[i]);
    /* groups: contiguous runs; an id seen before the run that ended is an error */
    const int64_t *g = L->g.v;
    int64_t runs = 1;
    for (int64_t i = 1; g && i < n; i++)
        runs += g[i] != g[i - 1];
    if (!(d->gstart = malloc((size_t)(runs + 1) * 8)) || (g && !(d->gid = malloc((size_t)runs * 8))))
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    int64_t k = 0;
    d->gstart[0] = 0;
    for (int64_t i = 1; g && i < n; i++)
        if (g[i] != g[i - 1])
            d->gstart[++k] = i;
    d->gstart[runs] = n;
    d->ngroups = runs;
    if (g) {
        for (int64_t r = 0; r < runs; r++)
            d->gid[r] = g[d->gstart[r]];
        /* sorted copy to find an id of two runs */
        int64_t *s = malloc((size_t)runs * 8);
        if (!s)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        memcpy(s, d->gid, (size_t)runs * 8);
        qsort(s, (size_t)runs, 8, cmp_i64);
        int64_t dup = 0;
        int found = 0;
        for (int64_t r = 1; r < runs && !found; r++)
            if (s[r] == s[r - 1])
                dup = s[r], found = 1;
        free(s);
        if (found)
            return tq_fail(TQ_ERR_DATA, "group %lld of \"%s\" comes back after other groups: "
                                        "the rows of a group must be contiguous",
                           (long long)dup, L->g.name);
    }
    d->n = n;
    d->d = L->x.cols;
    d->x = L->x.v, L->x.v = NULL;
    d->y = L->y.v, L->y.v = NULL;
    d->y_int = L->y.src_int;
    d->w = L->w.v, L->w.v = NULL;
    snprintf(d->xname, sizeof d->xname, "%s", L->x.name);
    return TQ_OK;
}

static void col_free(col *c) { free(c->v); }

tq_status tq_train_data_load(const char *path, const tq_train_names *names, tq_train_data *d)
{
    memset(d, 0, sizeof *d);
    loader L;
    memset(&L, 0, sizeof L);
    L.nm = names;
    L.x.dtype = TQ_DTYPE_F32;
    L.y.dtype = TQ_DTYPE_F64;
    L.g.dtype = TQ_DTYPE_I64;
    L.w.dtype = TQ_DTYPE_F32;
    tq_reader *r;
    tq_status st = tq_reader_open_path(&r, path);
    if (st)
        return st;
    tq_frame *f;
    while ((st = tq_reader_next(r, &f)) == TQ_OK && !(st = take(&L, f)))
        ;
    tq_reader_close(r);
    if (st == TQ_EOF)
        st = finish(&L, d);
    col_free(&L.x);
    col_free(&L.y);
    col_free(&L.g);
    col_free(&L.w);
    for (int i = 0; i < L.ncand; i++)
        col_free(&L.cand[i]);
    if (st) {
        tq_train_data_free(d);
        return tq_fail_context(st, "%s", strcmp(path, "-") ? path : "stdin");
    }
    return TQ_OK;
}

void tq_train_data_free(tq_train_data *d)
{
    free(d->x);
    free(d->y);
    free(d->w);
    free(d->gstart);
    free(d->gid);
    memset(d, 0, sizeof *d);
}
