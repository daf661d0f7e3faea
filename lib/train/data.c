/* data.c: the examples of tq-train read from a TQ stream into host memory:
 * features (f32 [n, d]: any float dtype converted, tq-quantize's codes decoded
 * on load as tq-quantize --to f32 decodes them), targets, optional row
 * weights and group ids. Frames are picked by the rule every tool follows
 * (CONVENTIONS.md): the name given, else the default name, else the one frame
 * of the right rank and kind. */
#include "../internal.h"
#include "../quant/quant.h"
#include "../tool/pick.h"
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
    int features;    /* rows decoded through side (the features and their candidates) */
    int seen;        /* a candidate: rows came (not only side frames) */
    tq_quant_side side; /* the codes' NAME_scale and NAME_ranges */
} col;

#define MAX_CAND 8

typedef struct loader {
    const tq_train_names *nm;
    const char *path;
    col x, y, g, w;
    col cand[MAX_CAND]; /* rank 2 float frames, while x has no name */
    int ncand;
    char skipped[TQ_MAX_NAME + 1]; /* int8 or uint8 rows without scales or ranges */
    tq_dtype skipped_dt;
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
    void *dst = (char *)c->v + (size_t)(c->rows * w) * es;
    tq_status st = c->features ? tq_quant_side_decode(&c->side, f, dst) : tq_frame_data(f, &data);
    if (!st && !c->features && rows && w)
        st = tq_convert(c->dtype, dst, f->dtype, data, (size_t)(rows * w), w);
    if (st)
        return tq_fail_context(st, "frame %llu \"%s\"", (unsigned long long)f->index, f->name);
    c->rows += rows;
    return TQ_OK;
}

/* Features: rows of floats or of codes; int8 and uint8 frames count as codes
 * only after their scales or ranges (any other bytes are not features). */
static int is_features(const tq_frame *f, const tq_quant_side *side)
{
    if (f->dtype == TQ_DTYPE_I8 || f->dtype == TQ_DTYPE_U8)
        return f->rank == 2 && side && (side->scale_n >= 0 || side->ranges);
    return tq_quant_decodable(f);
}

/* The candidate for the features named `name`, added if new (NULL: too many). */
static col *candidate(loader *L, const char *name)
{
    int i = 0;
    while (i < L->ncand && strcmp(L->cand[i].name, name))
        i++;
    if (i == MAX_CAND)
        return NULL;
    if (i == L->ncand) {
        col *c = &L->cand[L->ncand++];
        c->dtype = TQ_DTYPE_F32, c->features = 1;
        snprintf(c->name, sizeof c->name, "%s", name);
        tq_quant_side_init(&c->side);
    }
    return &L->cand[i];
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
        if (tq_quant_side_of(f, nm->x))
            return tq_quant_side_keep(&L->x.side, f);
        if (strcmp(f->name, nm->x))
            return TQ_OK;
        if (!tq_quant_decodable(f))
            return bad(f, "must be a rank 2 frame of floats or of tq-quantize's codes",
                       "the features");
        return append(&L->x, f, -1);
    }
    if (!strcmp(f->name, "key"))
        return TQ_OK;
    char stem[TQ_MAX_NAME + 1];
    if (tq_quant_side_stem(f, stem)) { /* the codes of stem come after it */
        col *c = candidate(L, stem);
        if (!c)
            return tq_fail(TQ_ERR_DATA, "more than %d rank 2 float frames: name the features with --x",
                           MAX_CAND);
        c->side.scale_n = -1; /* scales that met no codes were no codes' scales */
        return tq_quant_side_keep(&c->side, f);
    }
    col *c = NULL;
    for (int i = 0; i < L->ncand && !c; i++)
        if (!strcmp(L->cand[i].name, f->name))
            c = &L->cand[i];
    if (!is_features(f, c ? &c->side : NULL)) {
        if (f->rank == 2 && (f->dtype == TQ_DTYPE_I8 || f->dtype == TQ_DTYPE_U8) && !L->skipped[0])
            snprintf(L->skipped, sizeof L->skipped, "%s", f->name), L->skipped_dt = f->dtype;
        return TQ_OK;
    }
    if (!c && !(c = candidate(L, f->name)))
        return tq_fail(TQ_ERR_DATA, "more than %d rank 2 float frames: name the features with --x",
                       MAX_CAND);
    c->seen = 1;
    return append(c, f, -1);
}

static void col_free(col *c)
{
    free(c->v);
    tq_quant_side_free(&c->side);
}

/* The features when --x names none: "emb" (or the name given as the default:
 * the training set's, for the validation set), else the one candidate. */
static tq_status choose_x(loader *L)
{
    int kept = 0; /* candidates that had only side frames are none */
    for (int i = 0; i < L->ncand; i++) {
        if (L->cand[i].seen)
            L->cand[kept++] = L->cand[i];
        else
            col_free(&L->cand[i]);
    }
    L->ncand = kept;
    int pick = -1;
    for (int i = 0; i < L->ncand; i++)
        if (!strcmp(L->cand[i].name, L->nm->x_def ? L->nm->x_def : "emb"))
            pick = i;
    if (pick < 0 && L->ncand == 1)
        pick = 0;
    if (pick < 0 && !L->ncand && L->skipped[0])
        return tq_fail(TQ_ERR_DATA, "no features: \"%s\" is %s rows with neither \"%s_scale\" "
                                    "nor \"%s_ranges\" before them (tq-quantize's codes have one)",
                       L->skipped, tq_dtype_name(L->skipped_dt), L->skipped, L->skipped);
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
    col_free(&L->x);
    L->x = L->cand[pick];
    L->cand[pick].v = NULL;
    tq_quant_side_init(&L->cand[pick].side);
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
    if ((st = tq_quant_side_end(&L->x.side, L->x.name)))
        return st;
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
    d->from = tq_took_label(L->path);
    return TQ_OK;
}

tq_status tq_train_data_load(const char *path, const tq_train_names *names, tq_train_data *d)
{
    memset(d, 0, sizeof *d);
    loader L;
    memset(&L, 0, sizeof L);
    L.nm = names;
    L.path = path;
    L.x.dtype = TQ_DTYPE_F32;
    L.x.features = 1;
    tq_quant_side_init(&L.x.side);
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
