/* codes.c: tq-simmat over quantized vectors, tq-quantize's int8 codes with a
 * scale a row (the frame NAME_scale before each batch of NAME), sign bits, or
 * ggml's q8_0/q4_0 blocks (met by q8_0 queries): the database's codes are
 * read whole, the queries batch by batch, and each batch's top-k comes from
 * tq_op_codetopk, its full matrix and the pairs over a threshold from
 * tq_op_codematrix: the same scores (integer dot products scaled and rounded
 * once, minus Hamming distances, or ggml's block dot products), ties to the
 * lower index. --dedup over codes is dedup.c's. */
#include "../internal.h"
#include "../op/simscore.h"
#include "quant/quant.h"
#include "simmat.h"

#include <math.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && !strcmp(s + n - m, suffix);
}

static int is_code(tq_dtype dt)
{
    return dt == TQ_DTYPE_I8 || dt == TQ_DTYPE_BIT || dt == TQ_DTYPE_Q8_0 || dt == TQ_DTYPE_Q4_0;
}

/* The vector frame of a stream: NAME, or the first rank 2 frame that is not
 * a key, a scale or ranges, and is floats or codes. */
int tq_sim_codes_is_vectors(const tq_frame *f, const char *name)
{
    if (name)
        return !strcmp(f->name, name);
    return f->rank == 2 && strcmp(f->name, "key") && !ends_with(f->name, "_scale") &&
           !ends_with(f->name, "_ranges") &&
           (tq_sim_floatlike(f->dtype) || is_code(f->dtype));
}

/* Bytes of a row of d values of a code. */
static size_t row_bytes(tq_dtype dt, int64_t d)
{
    uint64_t b = 0;
    int64_t dims[2] = {1, d};
    tq_dtype_payload_bytes(dt, 2, dims, &b);
    return (size_t)b;
}

/* The queries' code: the database's, but q8_0 for ggml's blocks (q4_0 rows
 * meet q8_0 queries, as in ggml's dot products); and the metric. */
static tq_dtype query_code(const tq_sim *s)
{
    return s->code == TQ_DTYPE_Q4_0 ? TQ_DTYPE_Q8_0 : s->code;
}

static tq_metric code_metric(const tq_sim *s)
{
    return s->code == TQ_DTYPE_BIT ? TQ_METRIC_HAMMING : TQ_METRIC_DOT;
}

tq_status tq_sim_codes_probe(const char *path, const char *label, const char *name, tq_dtype *code)
{
    tq_reader *r;
    tq_status st = tq_reader_open_path_as(&r, path, label);
    if (st)
        return st;
    tq_frame *f;
    *code = TQ_DTYPE_INVALID;
    tq_sim_ranges g = {0}; /* int8 codes over ranges are decoded: floats */
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        if (tq_sim_ranges_take(&g, f, name, &st)) {
            if (st)
                break;
            continue;
        }
        if (tq_sim_codes_is_vectors(f, name)) {
            *code = is_code(f->dtype) && !tq_sim_ranges_has(&g, f) ? f->dtype : TQ_DTYPE_INVALID;
            break;
        }
    }
    tq_sim_ranges_free(&g);
    tq_reader_close(r);
    return st == TQ_EOF ? TQ_OK : st;
}

/* A scale frame waiting for its codes. */
typedef struct pending {
    float *v;
    int64_t n;   /* -1: none */
} pending;

static tq_status keep_scale(pending *p, tq_frame *f)
{
    if (f->dtype != TQ_DTYPE_F32 || f->rank != 1)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": scales must be f32 [n]",
                       (unsigned long long)f->index, f->name);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    float *v = realloc(p->v, (size_t)(f->dims[0] + 1) * 4);
    if (!v)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memcpy(v, data, (size_t)f->dims[0] * 4);
    p->v = v, p->n = f->dims[0];
    return TQ_OK;
}

/* Checks a codes frame against the database's kind and its pending scales
 * (query: a frame of the queries, whose width is checked against the
 * database's, naming both inputs). */
static tq_status check_codes(const tq_sim *s, const tq_frame *f, const pending *p, tq_dtype want,
                             int query)
{
    if (f->rank != 2 || f->dtype != want)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s rank %d where %s codes [n, d] are "
                                    "wanted (the database holds %s)",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), f->rank,
                       tq_dtype_name(want), tq_dtype_name(s->code));
    if (query && s->db.n && f->dims[1] != s->db.d)
        return tq_sim_check_width(s, f);
    if (s->db.n && f->dims[1] != s->db.d)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": rows of %lld values after %lld",
                       (unsigned long long)f->index, f->name, (long long)f->dims[1],
                       (long long)s->db.d);
    if (s->code == TQ_DTYPE_I8 && p->n != f->dims[0])
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": int8 codes need their scales, the frame "
                                    "\"%s_scale\" f32 [%lld] just before them (tq-quantize --to int8)",
                       (unsigned long long)f->index, f->name, f->name, (long long)f->dims[0]);
    return TQ_OK;
}

tq_status tq_sim_codes_load(tq_sim *s, const char *path, const char *label, const char *name)
{
    tq_reader *r;
    tq_status st = tq_reader_open_path_as(&r, path, label);
    if (st)
        return st;
    pending p = {NULL, -1};
    char scale_name[TQ_MAX_NAME + 8] = "";
    int64_t key_rows = 0, keys_pending = -1, cap = 0;
    tq_frame *f;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        if (!strcmp(f->name, "key") && f->rank == 1) {
            if ((st = tq_sim_rows_keys(&s->db, f, key_rows)))
                break;
            keys_pending = f->dims[0];
            continue;
        }
        if (ends_with(f->name, "_scale")) {
            /* the scales of the next codes frame (checked when it comes) */
            snprintf(scale_name, sizeof scale_name, "%s", f->name);
            if ((st = keep_scale(&p, f)))
                break;
            continue;
        }
        if (s->db.name[0] ? strcmp(f->name, s->db.name) : !tq_sim_codes_is_vectors(f, name))
            continue;
        if (!s->db.name[0]) {
            snprintf(s->db.name, sizeof s->db.name, "%s", f->name);
            s->code = f->dtype;
            s->db.d = f->rank == 2 ? f->dims[1] : 0;
        }
        if ((st = check_codes(s, f, &p, s->code, 0)))
            break;
        int64_t n = f->dims[0];
        size_t rb = row_bytes(s->code, s->db.d);
        if (s->db.n + n > cap) {
            cap = cap ? cap : 1024;
            while (cap < s->db.n + n)
                cap *= 2;
            unsigned char *nx = realloc(s->cx, (size_t)cap * rb + 1);
            float *ns = nx ? realloc(s->cscale, (size_t)cap * 4 + 1) : NULL;
            if (nx)
                s->cx = nx;
            if (!ns) {
                st = tq_fail(TQ_ERR_NOMEM, "out of memory for %lld rows", (long long)cap);
                break;
            }
            s->cscale = ns;
        }
        const void *data;
        if ((st = tq_frame_data(f, &data)))
            break;
        memcpy(s->cx + (size_t)s->db.n * rb, data, (size_t)n * rb);
        if (s->code == TQ_DTYPE_I8)
            memcpy(s->cscale + s->db.n, p.v, (size_t)n * 4);
        p.n = -1;
        if (keys_pending >= 0 && keys_pending != n) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows after a key frame of %lld",
                         (unsigned long long)f->index, f->name, (long long)n,
                         (long long)keys_pending);
            break;
        }
        key_rows += keys_pending >= 0 ? keys_pending : 0;
        keys_pending = -1;
        s->db.n += n;
    }
    free(p.v);
    tq_reader_close(r);
    if (st == TQ_EOF && !s->db.name[0])
        st = tq_fail(TQ_ERR_DATA, "no vectors");
    if (st == TQ_EOF && key_rows && key_rows != s->db.n)
        st = tq_fail(TQ_ERR_DATA, "%lld keys for %lld rows", (long long)key_rows,
                     (long long)s->db.n);
    if (st == TQ_EOF && !key_rows)
        s->db.key_dtype = TQ_DTYPE_INVALID;
    if (st != TQ_EOF)
        return tq_sim_fail_label(st, label);
    /* the shard's rows on the device */
    s->s0 = s->db.n * s->shard_i / s->shard_n;
    s->s1 = s->db.n * (s->shard_i + 1) / s->shard_n;
    size_t rb = row_bytes(s->code, s->db.d);
    int64_t dims[2] = {s->s1 - s->s0, s->db.d};
    st = tq_tensor_new(s->dev, s->code, 2, dims, &s->cxt);
    if (!st)
        st = tq_tensor_upload(s->cxt, s->cx + (size_t)s->s0 * rb, (size_t)dims[0] * rb);
    if (!st && s->code == TQ_DTYPE_I8 && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, dims, &s->cst)))
        st = tq_tensor_upload(s->cst, s->cscale + s->s0, (size_t)dims[0] * 4);
    return st;
}

/* The k best of each query's m k candidates (vals, idx [n, m k], best first)
 * by the exact dot product of the f32 rows, into the first k of each list. */
void tq_sim_rescore(const tq_sim *s, const float *qf, int64_t n, int64_t mk, float *v, int64_t *ix)
{
    int64_t d = s->db.d, k = s->k;
    for (int64_t i = 0; i < n; i++) {
        float *vi = v + i * mk;
        int64_t *ii = ix + i * mk;
        for (int64_t c = 0; c < mk; c++)
            vi[c] = ii[c] < 0 ? -INFINITY : tq_simscore(0, qf + i * d, s->rescore.x + ii[c] * d, d);
        /* insertion sort by the exact order of top-k lists (m k is small) */
        for (int64_t c = 1; c < mk; c++) {
            float sv = vi[c];
            int64_t si = ii[c], p = c;
            while (p > 0 && tq_simscore_better(sv, si, vi[p - 1], ii[p - 1])) {
                vi[p] = vi[p - 1], ii[p] = ii[p - 1];
                p--;
            }
            vi[p] = sv, ii[p] = si;
        }
        /* compact: the first k of each list, rows of k */
        memmove(v + i * k, vi, (size_t)k * 4);
        memmove(ix + i * k, ii, (size_t)k * 8);
    }
}

static tq_status run_batch(tq_sim *s, const void *q, const float *qs, const float *qf, int64_t n,
                           tq_writer *w)
{
    int64_t d = s->db.d, k = s->k * (qf && s->rescore.x ? s->rescore_m : 1);
    int64_t qd[2] = {n, d}, kd[2] = {n, k};
    size_t rb = row_bytes(query_code(s), d);
    tq_tensor *qt = NULL, *qst = NULL, *vt = NULL, *it = NULL;
    float *v = malloc((size_t)(n * k + 1) * 4);
    int64_t *ix = malloc((size_t)(n * k + 1) * 8);
    tq_status st = !v || !ix ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    for (int64_t i = 0; !st && i < n * k; i++)
        v[i] = -INFINITY, ix[i] = -1;
    if (!st && !(st = tq_tensor_new(s->dev, query_code(s), 2, qd, &qt)) &&
        !(st = tq_tensor_upload(qt, q, (size_t)n * rb)) && s->code == TQ_DTYPE_I8 &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, qd, &qst)))
        st = tq_tensor_upload(qst, qs, (size_t)n * 4);
    if (!st && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, kd, &vt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_I64, 2, kd, &it)) &&
        !(st = tq_tensor_upload(vt, v, (size_t)(n * k) * 4)) &&
        !(st = tq_tensor_upload(it, ix, (size_t)(n * k) * 8)) &&
        !(st = tq_op_codetopk(qt, qst, s->cxt, s->cst,
                              code_metric(s), s->s0,
                              vt, it)) &&
        !(st = tq_tensor_download(vt, v, (size_t)(n * k) * 4)))
        st = tq_tensor_download(it, ix, (size_t)(n * k) * 8);
    tq_tensor_free(qt), tq_tensor_free(qst), tq_tensor_free(vt), tq_tensor_free(it);
    if (!st && k != s->k)
        tq_sim_rescore(s, qf, n, k, v, ix);
    if (!st)
        st = tq_sim_topk_write(s, v, ix, n, w);
    free(v);
    free(ix);
    return st;
}

/* The scores of n query codes q (scales qs for int8) with the shard's rows
 * into out [n, shard rows] (tq_op_codematrix: codetopk's values). */
static tq_status code_scores(tq_sim *s, const void *q, const float *qs, int64_t n, float *out)
{
    int64_t d = s->db.d, nd = s->s1 - s->s0, qd[2] = {n, d}, od[2] = {n, nd};
    size_t rb = row_bytes(query_code(s), d);
    tq_tensor *qt = NULL, *qst = NULL, *ot = NULL;
    tq_status st = tq_tensor_new(s->dev, query_code(s), 2, qd, &qt);
    if (!st)
        st = tq_tensor_upload(qt, q, (size_t)n * rb);
    if (!st && s->code == TQ_DTYPE_I8 && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, qd, &qst)))
        st = tq_tensor_upload(qst, qs, (size_t)n * 4);
    if (!st && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, od, &ot)) &&
        !(st = tq_op_codematrix(qt, qst, s->cxt, s->cst,
                                code_metric(s), ot)))
        st = tq_tensor_download(ot, out, (size_t)(n * nd) * 4);
    tq_tensor_free(qt), tq_tensor_free(qst), tq_tensor_free(ot);
    return st;
}

/* The full matrix of n query rows, a frame "sim" a slice of buf's rows. */
static tq_status run_full(tq_sim *s, const unsigned char *q, const float *qs, int64_t n,
                          float *buf, tq_writer *w)
{
    int64_t nd = s->s1 - s->s0, rows = tq_sim_slice_rows(nd);
    size_t rb = row_bytes(query_code(s), s->db.d);
    char meta[64];
    size_t ml = (size_t)snprintf(meta, sizeof meta, "metric=%s", tq_sim_metric_name(s->metric)) + 1;
    for (int64_t i0 = 0; i0 < n; i0 += rows) {
        int64_t r = n - i0 < rows ? n - i0 : rows, dims[2] = {r, nd};
        tq_status st = code_scores(s, q + (size_t)i0 * rb, qs ? qs + i0 : NULL, r, buf);
        if (!st)
            st = tq_writer_write(w, "sim", TQ_DTYPE_F32, 2, dims, meta, ml, buf,
                                 (uint64_t)(r * nd) * 4);
        if (st)
            return st;
    }
    return TQ_OK;
}

/* --threshold: the pairs of the batch's rows and the shard's rows scoring at
 * least the threshold (exact scores, so no margin and no second pass); the
 * input against itself gives each pair once, i < j. */
static tq_status run_threshold(tq_sim *s, const unsigned char *q, const float *qs, int64_t n,
                               float *buf, tq_sim_pairs *p, const tq_sim_rows *qk, tq_writer *w)
{
    int64_t nd = s->s1 - s->s0, rows = tq_sim_slice_rows(nd), r0 = s->q_seen;
    size_t rb = row_bytes(query_code(s), s->db.d);
    float thr = (float)s->threshold;
    p->n = 0;
    for (int64_t i0 = 0; i0 < n; i0 += rows) {
        int64_t r = n - i0 < rows ? n - i0 : rows;
        tq_status st = code_scores(s, q + (size_t)i0 * rb, qs ? qs + i0 : NULL, r, buf);
        for (int64_t i = 0; !st && i < r; i++) {
            int64_t g = r0 + i0 + i, j = s->self ? g + 1 - s->s0 : 0;
            for (j = j < 0 ? 0 : j; !st && j < nd; j++)
                if (buf[i * nd + j] >= thr)
                    st = tq_sim_pairs_add(p, g, s->s0 + j, buf[i * nd + j]);
        }
        if (st)
            return st;
    }
    return tq_sim_pairs_write(s, p, qk, r0, w);
}

/* One batch of query codes (scales qs for int8; qf: the float rows they
 * came from, or NULL) in the mode of s. */
static tq_status run_mode(tq_sim *s, const unsigned char *q, const float *qs, const float *qf,
                          int64_t n, float *buf, tq_sim_pairs *p, const tq_sim_rows *qk,
                          tq_writer *w)
{
    if (s->mode == TQ_SIM_FULL)
        return run_full(s, q, qs, n, buf, w);
    if (s->mode == TQ_SIM_THRESHOLD)
        return run_threshold(s, q, qs, n, buf, p, qk, w);
    return run_batch(s, q, qs, qf, n, w);
}

/* Float query rows to f32 (*qf) and to the database's code (*qc, and the
 * scales in p for int8). */
static tq_status quantize_queries(const tq_sim *s, tq_frame *f, float **qf, unsigned char **qc,
                                  pending *p)
{
    int64_t n = f->dims[0], d = f->dims[1];
    if (d != s->db.d)
        return tq_sim_check_width(s, f);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    size_t rb = row_bytes(query_code(s), d);
    float *nf = realloc(*qf, (size_t)(n * d + 1) * 4);
    if (nf)
        *qf = nf;
    unsigned char *nc = nf ? realloc(*qc, (size_t)n * rb + 1) : NULL;
    if (nc)
        *qc = nc;
    float *ns = nc ? realloc(p->v, (size_t)(n + 1) * 4) : NULL;
    if (!ns)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    p->v = ns, p->n = n;
    if (n > 0 && d > 0 && (st = tq_convert(TQ_DTYPE_F32, *qf, f->dtype, data, (size_t)(n * d), 0)))
        return st;
    tq_quant_code c = s->code == TQ_DTYPE_I8    ? TQ_QUANT_INT8
                      : s->code == TQ_DTYPE_BIT ? TQ_QUANT_BIT
                                                : TQ_QUANT_Q8_0;
    const char *why;
    int64_t bad = tq_quant_bad_row(c, *qf, n, d, &why);
    if (bad >= 0)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": row %lld has %s",
                       (unsigned long long)f->index, f->name, (long long)bad, why);
    return tq_quant_rows(c, *qf, n, d, NULL, *qc, p->v);
}

tq_status tq_sim_codes_run(tq_sim *s, tq_reader *in, tq_writer *out)
{
    pending p = {NULL, -1};
    float *qf = NULL, *buf = NULL;
    unsigned char *qc = NULL;
    /* the queries' frame: its own name (each input's frames are its own),
     * else the database's (set by the load) */
    const char *qn = tq_sim_query_name(s);
    char want_scale[TQ_MAX_NAME + 8];
    snprintf(want_scale, sizeof want_scale, "%s_scale", qn);
    tq_sim_pairs pairs = {0};
    tq_sim_rows qk;       /* --threshold: the keys of the next batch */
    memset(&qk, 0, sizeof qk);
    int64_t qk_rows = -1; /* rows of the last key frame, not yet matched */
    tq_status st = TQ_OK;
    if (s->mode != TQ_SIM_TOPK) { /* a slice of the matrix */
        int64_t nd = s->s1 - s->s0;
        if (!(buf = malloc((size_t)(tq_sim_slice_rows(nd) * nd + 1) * 4)))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    tq_frame *f;
    while (!st && (st = tq_reader_next(in, &f)) == TQ_OK) {
        tq_sim_saw(s, f, !strcmp(f->name, qn));
        if (!strcmp(f->name, want_scale)) {
            if ((st = keep_scale(&p, f)))
                break;
            continue; /* the scales are the query's, consumed with it */
        }
        if (strcmp(f->name, qn)) {
            if ((st = tq_sim_side_frame(s, f, out, &qk, &qk_rows)))
                break;
            continue;
        }
        if (s->mode == TQ_SIM_THRESHOLD && qk_rows >= 0 && qk_rows != f->dims[0]) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows after a key frame of %lld",
                         (unsigned long long)f->index, f->name, (long long)f->dims[0],
                         (long long)qk_rows);
            break;
        }
        const void *data;
        if ((tq_dtype_is_float(f->dtype) ||
             (f->dtype == TQ_DTYPE_Q4_0 && query_code(s) == TQ_DTYPE_Q8_0)) && f->rank == 2) {
            /* float queries: quantized here, as tq-quantize would (q4_0
             * queries decoded first: ggml's q4_0 rows meet q8_0 only) */
            if ((st = quantize_queries(s, f, &qf, &qc, &p)) ||
                (st = run_mode(s, qc, p.v, qf, f->dims[0], buf, &pairs, &qk, out)))
                break;
        } else {
            if (s->rescore.x) {
                st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": --rescore wants the queries in "
                                          "full precision (float), not codes",
                             (unsigned long long)f->index, f->name);
                break;
            }
            if ((st = check_codes(s, f, &p, query_code(s), 1)) || (st = tq_frame_data(f, &data)) ||
                (st = run_mode(s, data, p.v, NULL, f->dims[0], buf, &pairs, &qk, out)))
                break;
        }
        tq_sim_rows_free(&qk);
        qk_rows = -1;
        p.n = -1;
        s->q_seen += f->dims[0];
    }
    free(p.v);
    free(qf);
    free(qc);
    free(buf);
    free(pairs.i), free(pairs.j), free(pairs.v);
    tq_sim_rows_free(&qk);
    return st == TQ_EOF ? TQ_OK : st;
}
