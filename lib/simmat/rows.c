/* rows.c: vectors and their keys gathered from a stream into host memory: the
 * database of tq-simmat, and the helpers every mode uses on query batches. */
#include "../internal.h"
#include "../op/simscore.h"
#include "simmat.h"
#include "../tool/pick.h"

#include <sys/mman.h>

tq_status tq_sim_check_width(const tq_sim *s, const tq_frame *f)
{
    if (f->dims[1] == s->db.d)
        return TQ_OK;
    if (!s->db_label) /* one input: its later rows against its earlier ones */
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": rows of %lld values after %lld",
                       (unsigned long long)f->index, f->name, (long long)f->dims[1],
                       (long long)s->db.d);
    tq_took q = {.what = "query vectors", .name = f->name, .from = s->q_label, .rank = 2,
                 .dims = {f->dims[0], f->dims[1]}};
    tq_took db = {.what = "database vectors", .name = s->db.name, .from = s->db_label,
                  .rank = 2, .dims = {s->db.n, s->db.d}};
    return tq_took_same_width(&q, &db);
}

const char *tq_sim_query_name(const tq_sim *s)
{
    return s->q_name ? s->q_name : s->db.name[0] ? s->db.name : s->vec_name;
}

void tq_sim_saw(tq_sim *s, const tq_frame *f, int vec)
{
    s->in_frames++;
    if (vec) {
        s->q_frames++;
        return;
    }
    /* each name once; a long list ends in "..." */
    size_t len = strlen(s->in_names), cap = sizeof s->in_names;
    char one[TQ_MAX_NAME + 8];
    snprintf(one, sizeof one, "\"%s\"", f->name);
    if (strstr(s->in_names, one) || (len >= 3 && !strcmp(s->in_names + len - 3, "...")))
        return;
    if (len + strlen(one) + 2 < cap - 4)
        snprintf(s->in_names + len, cap - len, "%s%s", len ? ", " : "", one);
    else
        snprintf(s->in_names + len, cap - len, "%s...", len ? ", " : "");
}

tq_status tq_sim_check_queries(const tq_sim *s)
{
    if (!s->in_frames || s->q_frames)
        return TQ_OK; /* an empty stream has nothing to answer; else vectors were read */
    const char *what = s->db_label && !s->self ? "query vectors" : "vectors";
    const char *qn = tq_sim_query_name(s);
    if (qn && *qn)
        return tq_fail(TQ_ERR_DATA, "no %s in %s: no frame \"%s\" among its frames (%s): "
                                    "give vectors (tq-embed, tq-quantize) or name their frame "
                                    "with --name",
                       what, s->q_label, qn, s->in_names);
    return tq_fail(TQ_ERR_DATA, "no %s in %s: none of its frames (%s) is a rank 2 float or code "
                                "frame (as tq-embed or tq-quantize writes them)",
                   what, s->q_label, s->in_names);
}

int tq_sim_floatlike(tq_dtype dt)
{
    /* q2 rows are searched as the f32 values they decode to */
    return tq_dtype_is_float(dt) || dt == TQ_DTYPE_Q2;
}

int tq_sim_is_vectors(const tq_frame *f, const char *name)
{
    if (name)
        return !strcmp(f->name, name);
    return f->rank == 2 && tq_sim_floatlike(f->dtype) && strcmp(f->name, "key") &&
           !tq_quant_side_stem(f, NULL);
}

int tq_sim_ranges_take(tq_sim_ranges *g, tq_frame *f, const char *name, tq_status *st)
{
    char stem[TQ_MAX_NAME + 1];
    if (tq_quant_side_stem(f, stem) != 2 || (name && strcmp(stem, name)))
        return 0;
    if (!g->side.ranges) /* also a zeroed holder: none kept yet */
        tq_quant_side_init(&g->side);
    else if (strcmp(g->stem, stem))
        tq_quant_side_free(&g->side); /* another name's ranges: the last one counts */
    memcpy(g->stem, stem, sizeof stem);
    *st = tq_quant_side_keep(&g->side, f);
    return 1;
}

int tq_sim_ranges_has(const tq_sim_ranges *g, const tq_frame *f)
{
    return g && g->side.ranges && f->rank == 2 &&
           (f->dtype == TQ_DTYPE_U8 || f->dtype == TQ_DTYPE_I8) && !strcmp(g->stem, f->name);
}

void tq_sim_ranges_free(tq_sim_ranges *g)
{
    tq_quant_side_free(&g->side);
    g->stem[0] = 0;
}

/* Vectors come as rank 2 frames of a float dtype (or codes, decoded). */
static tq_status check_vectors(const tq_frame *f)
{
    if (f->rank == 2 && (f->dtype == TQ_DTYPE_U8 || f->dtype == TQ_DTYPE_I8))
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s codes need their ranges, \"%s_ranges\" "
                                    "f32 [2, %lld] before them (tq-quantize --ranges)%s",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), f->name,
                       (long long)f->dims[1],
                       f->dtype == TQ_DTYPE_I8 ? ", or a database of int8 codes with scales" : "");
    if (f->rank != 2 || !tq_sim_floatlike(f->dtype))
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": vectors must be a rank 2 float frame, "
                                    "not %s rank %d",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), f->rank);
    /* rows of no values have no similarity; and a header may declare
     * millions of them with no payload at all, each owed a result */
    if (f->dims[1] == 0 && f->dims[0] > 0)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows of 0 values: nothing to compare",
                       (unsigned long long)f->index, f->name, (long long)f->dims[0]);
    return TQ_OK;
}

tq_status tq_sim_frame_f32(tq_frame *f, tq_sim_ranges *g, float **buf, size_t *cap)
{
    const void *data;
    int coded = tq_sim_ranges_has(g, f);
    tq_status st = coded ? TQ_OK : check_vectors(f);
    if (!st && !coded)
        st = tq_frame_data(f, &data);
    if (st)
        return st;
    size_t n = (size_t)(f->dims[0] * f->dims[1]);
    if (n > *cap) {
        float *nb = realloc(*buf, n * sizeof *nb);
        if (!nb)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for %zu values", n);
        *buf = nb, *cap = n;
    }
    if (coded)
        return tq_quant_side_decode(&g->side, f, *buf);
    if (n)
        return tq_convert(TQ_DTYPE_F32, *buf, f->dtype, data, n, 0);
    return TQ_OK;
}

void tq_sim_normalize_rows(float *x, int64_t n, int64_t d)
{
    for (int64_t i = 0; i < n; i++) {
        float *r = x + i * d;
        double nn = sqrt(tq_simscore_dot(r, r, d));
        double inv = 1.0 / (nn > 1e-12 ? nn : 1e-12);
        for (int64_t j = 0; j < d; j++)
            r[j] = (float)(r[j] * inv);
    }
}

typedef struct add_job {
    float *x;         /* the first new row */
    const void *data; /* the payload */
    tq_dtype dtype;   /* TQ_DTYPE_INVALID: the rows are in x already */
    int64_t d;
    int normalize;
    tq_status st;     /* a failed chunk's (all chunks fail alike) */
} add_job;

static void add_rows(void *ctx, int64_t begin, int64_t end)
{
    add_job *j = ctx;
    /* bytes of a row: q2's blocks have no element size */
    uint64_t rb = 0;
    int64_t rd[2] = {1, j->d};
    if (j->dtype != TQ_DTYPE_INVALID)
        tq_dtype_payload_bytes(j->dtype, 2, rd, &rb);
    float *x = j->x + begin * j->d;
    tq_status st = TQ_OK;
    if (j->dtype != TQ_DTYPE_INVALID)
        st = tq_convert(TQ_DTYPE_F32, x, j->dtype, (const char *)j->data + (size_t)begin * rb,
                        (size_t)((end - begin) * j->d), 0);
    if (st)
        __atomic_store_n(&j->st, st, __ATOMIC_RELAXED);
    else if (j->normalize)
        tq_sim_normalize_rows(x, end - begin, j->d);
}

tq_status tq_sim_rows_add_frame(tq_sim_rows *rows, tq_frame *f, int normalize, tq_reader *r,
                                tq_sim_ranges *g)
{
    int coded = tq_sim_ranges_has(g, f);
    tq_status st = coded ? TQ_OK : check_vectors(f);
    if (st)
        return st;
    int64_t n = f->dims[0], d = f->dims[1];
    if (rows->n == 0 && rows->cap == 0)
        rows->d = d;
    rows->decoded |= f->dtype == TQ_DTYPE_Q2;
    if (d != rows->d)
        return tq_fail(TQ_ERR_DATA, "rows of %lld values after rows of %lld", (long long)d,
                       (long long)rows->d);
    const void *data = NULL;
    if (!coded && (st = tq_frame_data(f, &data)))
        return st;
    /* A database in one plain f32 frame, used as it is (dot, l2): its rows
     * stay in the file's mapping (private, read only), shared with the page
     * cache instead of copied into memory of their own. */
    void *base;
    size_t len;
    if (r && !coded && !normalize && !rows->x && f->dtype == TQ_DTYPE_F32 && data == f->stored &&
        n > 0 && d > 0 && (uintptr_t)data % 64 == 0 && tq_reader_take_map(r, &base, &len)) {
        rows->x = (float *)data, rows->map = base, rows->map_len = len;
        rows->n = rows->cap = n;
        return TQ_OK;
    }
    if (rows->n + n > rows->cap) {
        int64_t cap = rows->cap ? rows->cap : 1024;
        while (cap < rows->n + n)
            cap *= 2;
        /* rows in a mapping move to memory of their own to grow */
        size_t bytes = (size_t)(cap * (d ? d : 1)) * sizeof(float);
        float *nx = rows->map ? malloc(bytes) : realloc(rows->x, bytes);
        if (!nx)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for %lld rows", (long long)cap);
        if (rows->map) {
            memcpy(nx, rows->x, (size_t)(rows->n * d) * sizeof *nx);
            munmap(rows->map, rows->map_len);
            rows->map = NULL;
        }
        rows->x = nx, rows->cap = cap;
    }
    float *x = rows->x + rows->n * d;
    if (coded) { /* decoded in place (on the pool), then normalized there */
        if ((st = tq_quant_side_decode(&g->side, f, x)))
            return st;
        data = x;
    }
    /* straight from the payload (often mapped) into the rows, on every
     * thread: the copy and the page faults of a 150 MB database were a tenth
     * of a top-k search on one thread while the others waited */
    add_job j = {x, data, coded ? TQ_DTYPE_INVALID : f->dtype, d, normalize, TQ_OK};
    if (n > 0 && d > 0)
        tq_parallel_for(n, 1 + (256 << 10) / d, add_rows, &j);
    if (j.st)
        return tq_fail(j.st, "frame %llu \"%s\": cannot convert to f32",
                       (unsigned long long)f->index, f->name);
    rows->n += n;
    return TQ_OK;
}

tq_status tq_sim_rows_keys(tq_sim_rows *rows, tq_frame *f, int64_t have)
{
    if (f->dtype != TQ_DTYPE_I64 && f->dtype != TQ_DTYPE_STR)
        return TQ_OK;
    if (rows->key_dtype == TQ_DTYPE_INVALID && have == 0)
        rows->key_dtype = f->dtype;
    if (f->dtype != rows->key_dtype)
        return tq_fail(TQ_ERR_DATA, "frame %llu: key dtype %s after %s",
                       (unsigned long long)f->index, tq_dtype_name(f->dtype),
                       tq_dtype_name(rows->key_dtype));
    int64_t n = f->dims[0];
    if (f->dtype == TQ_DTYPE_I64) {
        const void *data;
        tq_status st = tq_frame_data(f, &data);
        if (st)
            return st;
        int64_t *nk = realloc(rows->ikey, (size_t)(have + n + 1) * sizeof *nk);
        if (!nk)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for keys");
        rows->ikey = nk;
        memcpy(nk + have, data, (size_t)n * 8);
        return TQ_OK;
    }
    uint64_t *no = realloc(rows->skey_off, (size_t)(have + n + 1) * sizeof *no);
    if (!no)
        return tq_fail(TQ_ERR_NOMEM, "out of memory for keys");
    rows->skey_off = no;
    if (have == 0)
        no[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        tq_status st = tq_frame_str(f, i, &s, &len);
        if (!st)
            st = tq_buf_add(&rows->skey, s, len);
        if (st)
            return st;
        no[have + i + 1] = rows->skey.len;
    }
    return TQ_OK;
}

tq_status tq_sim_fail_label(tq_status st, const char *label)
{
    /* the reader's own messages start with the label already */
    const char *l = strcmp(label, "-") ? label : "stdin";
    size_t ll = strlen(l);
    if (strncmp(tq_errmsg(), l, ll) || tq_errmsg()[ll] != ':')
        tq_fail_context(st, "%s", l);
    return st;
}

tq_status tq_sim_rows_load(tq_sim_rows *rows, const char *path, const char *label,
                           const char *name, int normalize)
{
    memset(rows, 0, sizeof *rows);
    tq_reader *r;
    tq_status st = tq_reader_open_path_as(&r, path, label);
    if (st)
        return st;
    tq_frame *f;
    int64_t key_rows = 0, pending = -1; /* rows of the last key frame, not yet matched */
    tq_sim_ranges g = {0};
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        if (tq_sim_ranges_take(&g, f, rows->name[0] ? rows->name : name, &st)) {
            if (st)
                break;
            continue;
        }
        if (!strcmp(f->name, "key") && f->rank == 1) {
            if (pending >= 0) /* two key frames in a row: the first labelled nothing */
                break;
            if ((st = tq_sim_rows_keys(rows, f, key_rows)))
                break;
            pending = f->dims[0];
            continue;
        }
        if (!rows->name[0] && !tq_sim_is_vectors(f, name))
            continue;
        if (rows->name[0] && strcmp(f->name, rows->name))
            continue;
        if (!rows->name[0])
            snprintf(rows->name, sizeof rows->name, "%s", f->name);
        if ((st = tq_sim_rows_add_frame(rows, f, normalize, r, &g)))
            break;
        if (pending >= 0 && pending != f->dims[0]) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows after a key frame of %lld",
                         (unsigned long long)f->index, f->name, (long long)f->dims[0],
                         (long long)pending);
            break;
        }
        key_rows += pending >= 0 ? pending : 0;
        if (pending < 0 && key_rows) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": rows without keys after rows with keys",
                         (unsigned long long)f->index, f->name);
            break;
        }
        pending = -1;
    }
    if (st == TQ_EOF && pending >= 0)
        st = tq_fail(TQ_ERR_DATA, "a key frame labels no vectors");
    if (st == TQ_EOF && !rows->name[0])
        st = tq_fail(TQ_ERR_DATA, name ? "no frame \"%s\"" : "no vectors (a rank 2 float frame)%s",
                     name ? name : "");
    if (st == TQ_EOF && key_rows && key_rows != rows->n)
        st = tq_fail(TQ_ERR_DATA, "%lld keys for %lld rows", (long long)key_rows,
                     (long long)rows->n);
    if (st == TQ_EOF && !key_rows)
        rows->key_dtype = TQ_DTYPE_INVALID;
    tq_reader_close(r);
    tq_sim_ranges_free(&g);
    if (st != TQ_EOF) {
        tq_sim_fail_label(st, label);
        tq_sim_rows_free(rows);
        return st;
    }
    return TQ_OK;
}

void tq_sim_rows_free(tq_sim_rows *rows)
{
    if (rows->map)
        munmap(rows->map, rows->map_len);
    else
        free(rows->x);
    free(rows->ikey);
    free(rows->skey_off);
    tq_buf_free(&rows->skey);
    memset(rows, 0, sizeof *rows);
}
