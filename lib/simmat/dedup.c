/* dedup.c: near-duplicate removal, a filter. Rows pass in order, with their
 * keys and every frame of their batch that has one row per row, except those
 * whose score with an earlier kept row (or a row of --db) is >= the
 * threshold. The kept rows stay on the device, in chunks merged as they grow
 * (O(log batches) of them), and each new batch is searched against them all
 * (simtopk, k = 1); inside a batch the rows are decided in order against the
 * batch's kept rows, by the int8 screen where the device has it, else by
 * each row's partners in the batch (simtopk of the batch with itself). All
 * use the exact scores, so the decisions do not depend on batch sizes.
 * Codes (tq-quantize's int8 with scales, bits, or ggml's q8_0) are compared
 * as codes, by codetopk and the same scores, and pass as codes (with their
 * scales).
 * Memory: 4 x d bytes per kept row (codes: their bytes), plus the frames of
 * one batch. */
#include "../internal.h"
#include "../op/simscore.h"
#include "simmat.h"

/* A frame read before its batch's vectors, kept until they decide. */
typedef struct held {
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];
    char *meta;
    size_t meta_len;
    void *data;
    uint64_t bytes;
} held;

typedef struct chunk {
    tq_tensor *t, *sc; /* rows (f32 or codes), int8 scales */
    int64_t rows;
} chunk;

typedef struct dd {
    tq_sim *s;
    held *h;
    int nh, caph;
    chunk *c;
    int nc, capc;
    float *q;
    size_t qcap;
    unsigned char *qc; /* codes (s->code): the batch's rows */
    float *qs;         /* int8: their scales */
    unsigned char *keep;
    tq_sim_screen *screen; /* float rows on a device with the int8 screen */
    int screen_tried;      /* at the first batch only: it must see every row */
} dd;

static tq_status hold(dd *z, tq_frame *f)
{
    if (z->nh == z->caph) {
        int cap = z->caph ? 2 * z->caph : 8;
        held *nh = realloc(z->h, (size_t)cap * sizeof *nh);
        if (!nh)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        z->h = nh, z->caph = cap;
    }
    held *h = &z->h[z->nh];
    memset(h, 0, sizeof *h);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    snprintf(h->name, sizeof h->name, "%s", f->name);
    h->dtype = f->dtype;
    h->rank = f->rank;
    memcpy(h->dims, f->dims, sizeof h->dims);
    h->bytes = f->raw_size;
    h->meta_len = f->meta_len;
    h->data = malloc(h->bytes + 1);
    h->meta = malloc(f->meta_len + 1);
    if (!h->data || !h->meta) {
        free(h->data), free(h->meta);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    if (h->bytes)
        memcpy(h->data, data, h->bytes);
    if (f->meta_len)
        memcpy(h->meta, f->meta, f->meta_len);
    z->nh++;
    return TQ_OK;
}

/* Writes the rows of a frame that keep[] keeps (a frame of n rows), or the
 * whole frame when its rows are not the batch's. */
static tq_status write_kept(tq_writer *w, const char *name, tq_dtype dt, int rank,
                            const int64_t *dims, const char *meta, size_t meta_len,
                            const void *data, uint64_t bytes, int64_t n, const unsigned char *keep,
                            int64_t kept)
{
    int all = rank < 1 || dims[0] != n;
    if (dt == TQ_DTYPE_STR) { /* rank 1: the offsets, then the bytes */
        if (all)
            n = dims[0], kept = n;
        const uint64_t *off = data;
        const char *chars = (const char *)(off + n + 1);
        const char **ss = malloc((size_t)(kept + 1) * sizeof *ss);
        size_t *ll = malloc((size_t)(kept + 1) * sizeof *ll);
        if (!ss || !ll) {
            free(ss), free(ll);
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        }
        int64_t o = 0;
        for (int64_t i = 0; i < n; i++)
            if (all || keep[i])
                ss[o] = chars + off[i], ll[o++] = (size_t)(off[i + 1] - off[i]);
        tq_status st = tq_writer_write_str(w, name, kept, ss, ll);
        free(ss), free(ll);
        return st;
    }
    if (all)
        return tq_writer_write(w, name, dt, rank, dims, meta, meta_len, data, bytes);
    uint64_t row = n ? bytes / (uint64_t)n : 0;
    unsigned char *out = malloc((size_t)(row * (uint64_t)kept) + 1);
    if (!out)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    int64_t o = 0;
    for (int64_t i = 0; i < n; i++)
        if (keep[i])
            memcpy(out + row * (uint64_t)o++, (const unsigned char *)data + row * (uint64_t)i, row);
    int64_t nd[TQ_MAX_RANK];
    memcpy(nd, dims, (size_t)rank * sizeof *nd);
    nd[0] = kept;
    tq_status st = tq_writer_write(w, name, dt, rank, nd, meta, meta_len, out, row * (uint64_t)kept);
    free(out);
    return st;
}

/* Bytes of a row of the batch: f32 values, or codes. */
static size_t row_bytes(const tq_sim *s)
{
    uint64_t b = 0;
    int64_t dims[2] = {1, s->db.d};
    tq_dtype_payload_bytes(s->code ? s->code : TQ_DTYPE_F32, 2, dims, &b);
    return (size_t)b;
}

/* The codes dedup compares as codes: tq-quantize's int8 and bits, and q8_0
 * (ggml has no dot product of two q4_0 rows). */
static tq_dtype code_of(tq_dtype dt)
{
    return dt == TQ_DTYPE_I8 || dt == TQ_DTYPE_BIT || dt == TQ_DTYPE_Q8_0 ? dt : 0;
}

/* The exact score of batch rows i and j. */
static float pair_score(const dd *z, int64_t i, int64_t j)
{
    const tq_sim *s = z->s;
    int64_t d = s->db.d;
    if (!s->code)
        return tq_simscore(s->metric == TQ_SIM_L2, z->q + i * d, z->q + j * d, d);
    size_t rb = row_bytes(s);
    int i8 = s->code == TQ_DTYPE_I8;
    return tq_codescore(s->code, z->qc + i * rb, z->qc + j * rb, d, i8 ? z->qs[i] : 0,
                        i8 ? z->qs[j] : 0);
}

/* The best score of each of the batch's n rows (tensor qt, scales qst for
 * int8) with the --db rows and the kept rows so far, into best: top-1 lists
 * by simtopk, or codetopk for codes. */
static tq_status best_earlier(dd *z, tq_tensor *qt, tq_tensor *qst, int64_t n, float *best)
{
    tq_sim *s = z->s;
    int64_t kd[2] = {n, 1};
    int64_t *bi = malloc((size_t)(n + 1) * 8);
    tq_tensor *vt = NULL, *it = NULL;
    tq_status st = !bi ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    for (int64_t i = 0; !st && i < n; i++)
        bi[i] = -1;
    if (!st && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, kd, &vt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_I64, 2, kd, &it)) &&
        !(st = tq_tensor_upload(vt, best, (size_t)n * 4)))
        st = tq_tensor_upload(it, bi, (size_t)n * 8);
    tq_metric m = s->code == TQ_DTYPE_BIT  ? TQ_METRIC_HAMMING
                  : s->metric == TQ_SIM_L2 ? TQ_METRIC_L2
                                           : TQ_METRIC_DOT;
    int64_t base = 0;
    tq_tensor *db = s->code ? s->cxt : s->dbt;
    if (!st && db) {
        st = s->code ? tq_op_codetopk(qt, qst, db, s->cst, m, base, vt, it)
                     : tq_op_simtopk(qt, db, m, base, vt, it);
        base += db->dims[0];
    }
    for (int c = 0; !st && c < z->nc; c++) {
        st = s->code ? tq_op_codetopk(qt, qst, z->c[c].t, z->c[c].sc, m, base, vt, it)
                     : tq_op_simtopk(qt, z->c[c].t, m, base, vt, it);
        base += z->c[c].rows;
    }
    if (!st)
        st = tq_tensor_download(vt, best, (size_t)n * 4);
    tq_tensor_free(vt), tq_tensor_free(it);
    free(bi);
    return st;
}

/* Each row's DD_NEAR best partners within its batch by exact score (the
 * simtopk of the batch with itself: on a GPU, tiles of the device's products
 * and only the lists back), into nv/ni [n, kw]. The rows are then decided in
 * order from the lists: a row whose kw-th partner still reaches the
 * threshold may have more than its list holds, and is decided by the exact
 * loop over the batch's kept rows as before. Without the lists that loop
 * ran for every row: n^2/2 pairs scored one by one on one core, 16 s of a
 * 40,000-row dedup that took 0.5 s on the CPU's screen (an H200, 2026-11). */
enum { DD_NEAR = 16, DD_NEAR_MIN = 64 };

static tq_status batch_near(dd *z, tq_tensor *qt, int64_t n, int64_t kw, float *nv, int64_t *ni)
{
    tq_sim *s = z->s;
    int64_t kd[2] = {n, kw};
    tq_tensor *vt = NULL, *it = NULL;
    for (int64_t i = 0; i < n * kw; i++)
        nv[i] = -INFINITY, ni[i] = -1;
    tq_status st;
    if (!(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, kd, &vt)) &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_I64, 2, kd, &it)) &&
        !(st = tq_tensor_upload(vt, nv, (size_t)(n * kw) * 4)) &&
        !(st = tq_tensor_upload(it, ni, (size_t)(n * kw) * 8)) &&
        !(st = tq_op_simtopk(qt, qt, s->metric == TQ_SIM_L2 ? TQ_METRIC_L2 : TQ_METRIC_DOT, 0, vt, it)) &&
        !(st = tq_tensor_download(vt, nv, (size_t)(n * kw) * 4)))
        st = tq_tensor_download(it, ni, (size_t)(n * kw) * 8);
    tq_tensor_free(vt), tq_tensor_free(it);
    return st;
}

/* Whether row i of the batch is a near-duplicate of a kept row before it,
 * by its partner list (kw entries of nv/ni; NULL: none) when that list holds
 * every partner that reaches thr, else by the exact loop over the kept rows
 * ki[0..kept). */
static int dup_in_batch(const dd *z, int64_t i, const float *nv, const int64_t *ni, int64_t kw,
                        int64_t n, const int64_t *ki, int64_t kept, float thr)
{
    if (nv && (kw == n || !(nv[i * kw + kw - 1] >= thr))) {
        for (int64_t r = 0; r < kw; r++) {
            int64_t j = ni[i * kw + r];
            if (j >= 0 && j < i && nv[i * kw + r] >= thr && z->keep[j])
                return 1;
        }
        return 0;
    }
    for (int64_t a = 0; a < kept; a++)
        if (pair_score(z, i, ki[a]) >= thr)
            return 1;
    return 0;
}

/* The last two kept chunks as one, while the last holds at least half the
 * rows of the one before (a binary counter's carries): O(log batches)
 * chunks, so that each batch makes that many searches, not one for every
 * batch before it (780 searches of a few host waits each for tq-embed's
 * 1,024-row frames of 40,000 rows), and each kept row is copied O(log
 * batches) times. Not while the int8 screen is on: it points into the
 * chunks' rows. */
static tq_status merge_chunks(dd *z)
{
    tq_sim *s = z->s;
    size_t rb = row_bytes(s);
    int i8 = s->code == TQ_DTYPE_I8;
    tq_status st = TQ_OK;
    while (!st && !z->screen && z->nc >= 2 && z->c[z->nc - 1].rows * 2 >= z->c[z->nc - 2].rows) {
        chunk *a = &z->c[z->nc - 2], *b = a + 1;
        int64_t rows = a->rows + b->rows, cd[2] = {rows, s->db.d};
        unsigned char *h = malloc((size_t)rows * rb + 1);
        float *hs = malloc((size_t)rows * 4 + 1);
        tq_tensor *t = NULL, *t2 = NULL;
        if (!h || !hs)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        if (!st && !(st = tq_tensor_download(a->t, h, (size_t)a->rows * rb)) &&
            !(st = tq_tensor_download(b->t, h + (size_t)a->rows * rb, (size_t)b->rows * rb)) &&
            i8 && !(st = tq_tensor_download(a->sc, hs, (size_t)a->rows * 4)))
            st = tq_tensor_download(b->sc, hs + a->rows, (size_t)b->rows * 4);
        if (!st && !(st = tq_tensor_new(s->dev, s->code ? s->code : TQ_DTYPE_F32, 2, cd, &t)) &&
            !(st = tq_tensor_upload(t, h, (size_t)rows * rb)) && i8 &&
            !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, cd, &t2)))
            st = tq_tensor_upload(t2, hs, (size_t)rows * 4);
        if (!st) {
            tq_tensor_free(a->t), tq_tensor_free(a->sc), tq_tensor_free(b->t), tq_tensor_free(b->sc);
            *a = (chunk){t, t2, rows};
            z->nc--;
        } else {
            tq_tensor_free(t), tq_tensor_free(t2);
        }
        free(h), free(hs);
    }
    return st;
}

/* The kept rows ki[0..kept) of the batch join the set on the device. */
static tq_status keep_rows(dd *z, const int64_t *ki, int64_t kept)
{
    tq_sim *s = z->s;
    size_t rb = row_bytes(s);
    int64_t cd[2] = {kept, s->db.d};
    unsigned char *rows = malloc((size_t)kept * rb + 1);
    float *sc = malloc((size_t)kept * 4 + 1);
    tq_status st = !rows || !sc ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    const unsigned char *src = s->code ? z->qc : (const unsigned char *)z->q;
    for (int64_t a = 0; !st && a < kept; a++) {
        memcpy(rows + (size_t)a * rb, src + (size_t)ki[a] * rb, rb);
        sc[a] = s->code == TQ_DTYPE_I8 ? z->qs[ki[a]] : 0;
    }
    if (!st && z->nc == z->capc) {
        int cap = z->capc ? 2 * z->capc : 16;
        chunk *nc = realloc(z->c, (size_t)cap * sizeof *nc);
        if (!nc)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        else
            z->c = nc, z->capc = cap;
    }
    tq_tensor *t = NULL, *t2 = NULL;
    if (!st && !(st = tq_tensor_new(s->dev, s->code ? s->code : TQ_DTYPE_F32, 2, cd, &t)) &&
        !(st = tq_tensor_upload(t, rows, (size_t)kept * rb)) && s->code == TQ_DTYPE_I8 &&
        !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, cd, &t2)))
        st = tq_tensor_upload(t2, sc, (size_t)kept * 4);
    if (!st)
        z->c[z->nc++] = (chunk){t, t2, kept};
    else
        tq_tensor_free(t), tq_tensor_free(t2);
    free(rows), free(sc);
    return st ? st : merge_chunks(z);
}

/* Decides the rows of one batch (z->q, n rows normalized as the metric
 * wants, or z->qc codes with z->qs scales). */
static tq_status decide(dd *z, int64_t n, int64_t *kept_out)
{
    tq_sim *s = z->s;
    int64_t d = s->db.d, qd[2] = {n, d};
    float thr = (float)s->threshold;
    float *best = malloc((size_t)(n + 1) * 4), *nv = NULL;
    int64_t *ki = malloc((size_t)(n + 1) * 8), *ni = NULL;
    int64_t kw = n < DD_NEAR ? n : DD_NEAR;
    tq_tensor *qt = NULL, *qst = NULL;
    tq_status st = !best || !ki ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    if (z->screen && !tq_sim_screen_dedup_fits(z->q, n, d)) { /* simtopk's path from here on */
        tq_sim_screen_free(z->screen);
        z->screen = NULL;
    }
    int64_t kept = 0;
    if (!st && z->screen)
        st = tq_sim_screen_dedup(s, z->screen, z->q, n, z->keep, ki, &kept);
    for (int64_t i = 0; !st && !z->screen && i < n; i++)
        best[i] = -INFINITY;
    int near = !st && !z->screen && !s->code && n >= DD_NEAR_MIN;
    if (near && (!(nv = malloc((size_t)(n * kw) * 4)) || !(ni = malloc((size_t)(n * kw) * 8))))
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st && !z->screen && ((s->code ? s->cxt : s->dbt) || z->nc || near)) {
        if (!(st = tq_tensor_new(s->dev, s->code ? s->code : TQ_DTYPE_F32, 2, qd, &qt)) &&
            !(st = tq_tensor_upload(qt, s->code ? (const void *)z->qc : (const void *)z->q,
                                    (size_t)n * row_bytes(s))) &&
            s->code == TQ_DTYPE_I8 && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 1, qd, &qst)))
            st = tq_tensor_upload(qst, z->qs, (size_t)n * 4);
        if (!st && ((s->code ? s->cxt : s->dbt) || z->nc))
            st = best_earlier(z, qt, qst, n, best);
        if (!st && near)
            st = batch_near(z, qt, n, kw, nv, ni);
        tq_tensor_free(qt), tq_tensor_free(qst);
    }
    for (int64_t i = 0; !st && !z->screen && i < n; i++) {
        /* an empty slot (idx -1) is no match; NaN never reaches the threshold */
        int dup = best[i] >= thr || dup_in_batch(z, i, near ? nv : NULL, ni, kw, n, ki, kept, thr);
        z->keep[i] = !dup;
        if (!dup)
            ki[kept++] = i;
    }
    if (!st && kept)
        st = keep_rows(z, ki, kept);
    if (!st && kept && z->screen) { /* the screen's kept rows now lie in the chunk */
        const float *rows = tq_tensor_host(z->c[z->nc - 1].t);
        if (rows)
            tq_sim_screen_dedup_moved(z->screen, rows, kept);
        else
            tq_sim_screen_free(z->screen), z->screen = NULL;
    }
    free(best), free(ki), free(nv), free(ni);
    *kept_out = kept;
    return st;
}

/* Codes are compared by their own metric: int8 by dot, bits by hamming (the
 * input's kind is known at its first batch). */
static tq_status check_metric(const tq_sim *s, const tq_frame *f)
{
    if ((s->code == TQ_DTYPE_I8 || s->code == TQ_DTYPE_Q8_0) && s->metric != TQ_SIM_DOT)
        return tq_fail(TQ_ERR_USAGE, "frame %llu \"%s\": %s codes are compared with --metric dot",
                       (unsigned long long)f->index, f->name, tq_dtype_name(s->code));
    if (s->code == TQ_DTYPE_BIT && s->metric != TQ_SIM_HAMMING)
        return tq_fail(TQ_ERR_USAGE, "frame %llu \"%s\": bit codes are compared with --metric "
                                     "hamming", (unsigned long long)f->index, f->name);
    if (!s->code && s->metric == TQ_SIM_HAMMING)
        return tq_fail(TQ_ERR_USAGE, "frame %llu \"%s\": --metric hamming wants bit codes "
                                     "(tq-quantize --to bit)", (unsigned long long)f->index, f->name);
    return TQ_OK;
}

/* The held scales of an int8 batch of n rows: the last NAME_scale f32 [n]. */
static const held *scales_of(const dd *z, const char *name, int64_t n)
{
    char sn[TQ_MAX_NAME + 8];
    snprintf(sn, sizeof sn, "%s_scale", name);
    for (int i = z->nh - 1; i >= 0; i--)
        if (!strcmp(z->h[i].name, sn))
            return z->h[i].dtype == TQ_DTYPE_F32 && z->h[i].rank == 1 && z->h[i].dims[0] == n
                       ? &z->h[i]
                       : NULL;
    return NULL;
}

/* The batch's rows into z: f32 (normalized for the cosine), or codes and
 * scales, of the kind and width of the rows before. */
static tq_status load_batch(dd *z, tq_frame *f)
{
    tq_sim *s = z->s;
    int ranged = tq_sim_ranges_has(&s->qranges, f);
    tq_dtype fcode = ranged ? 0 : code_of(f->dtype);
    if (f->dtype == TQ_DTYPE_Q4_0)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": q4_0 rows cannot be compared with each "
                                    "other (ggml pairs q4_0 with q8_0 only): dedup q8_0 codes, or "
                                    "floats", (unsigned long long)f->index, f->name);
    if (s->db_label && f->rank == 2 && fcode != s->code &&
        (fcode || ranged || tq_sim_floatlike(f->dtype))) {
        /* --db of one kind, queries of another: decisions that mix codes and
         * floats would be neither's, so like with like only */
        char qk[64];
        snprintf(qk, sizeof qk, "%s %s", tq_dtype_name(f->dtype),
                 fcode ? "codes" : ranged ? "codes over ranges (float values)" : "vectors");
        const char *dk = s->code ? tq_dtype_name(s->code) : "float";
        if (s->code)
            return tq_fail(TQ_ERR_DATA, "the database holds %s codes (\"%s\" from %s) and the "
                                        "query vectors are %s (\"%s\" from %s): --dedup compares "
                                        "like with like: quantize the queries the same way "
                                        "(tq-quantize --to %s) or give a float database",
                           dk, s->db.name, s->db_label, qk, f->name, s->q_label,
                           s->code == TQ_DTYPE_I8 ? "int8" : tq_dtype_name(s->code));
        return tq_fail(TQ_ERR_DATA, "the database holds float vectors (\"%s\" from %s) and the "
                                    "query vectors are %s (\"%s\" from %s): --dedup compares "
                                    "like with like: give float queries or a database of the "
                                    "same codes (tq-quantize)",
                       s->db.name, s->db_label, qk, f->name, s->q_label);
    }
    if (f->rank != 2 || fcode != s->code || (!fcode && !ranged && !tq_sim_floatlike(f->dtype)))
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s rank %d where the rows are %s%s",
                       (unsigned long long)f->index, f->name, tq_dtype_name(f->dtype), f->rank,
                       s->code ? tq_dtype_name(s->code) : "float vectors",
                       s->code ? " codes [n, d]" : " [n, d]");
    int64_t n = f->dims[0], d = f->dims[1];
    if (d != s->db.d)
        return tq_sim_check_width(s, f);
    if (!s->code) {
        tq_status st = tq_sim_frame_f32(f, &s->qranges, &z->q, &z->qcap);
        if (!st && s->metric == TQ_SIM_COSINE)
            tq_sim_normalize_rows(z->q, n, d);
        return st;
    }
    const held *h = s->code == TQ_DTYPE_I8 ? scales_of(z, f->name, n) : NULL;
    if (s->code == TQ_DTYPE_I8 && !h)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": int8 codes need their scales, the frame "
                                    "\"%s_scale\" f32 [%lld] just before them (tq-quantize --to int8)",
                       (unsigned long long)f->index, f->name, f->name, (long long)n);
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    size_t rb = row_bytes(s);
    unsigned char *qc = realloc(z->qc, (size_t)n * rb + 1);
    if (qc)
        z->qc = qc;
    float *qs = qc ? realloc(z->qs, (size_t)n * 4 + 1) : NULL;
    if (!qs)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    z->qs = qs;
    memcpy(z->qc, data, (size_t)n * rb);
    if (h)
        memcpy(z->qs, h->data, (size_t)n * 4);
    return TQ_OK;
}

/* The names of the frames before the first vectors: a batch's own (its keys,
 * its scales), which after a batch belong to the next one. */
typedef struct names {
    char name[16][TQ_MAX_NAME + 1];
    int n, full;
} names;

static int names_has(const names *p, const char *name)
{
    if (p->full)
        return 1; /* too many to tell: every frame is a batch's own, as before */
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->name[i], name))
            return 1;
    return 0;
}

static void names_add(names *p, const char *name)
{
    if (names_has(p, name))
        return;
    if (p->n == 16)
        p->full = 1;
    else
        snprintf(p->name[p->n++], sizeof p->name[0], "%s", name);
}

static void drop_held(dd *z)
{
    for (int i = 0; i < z->nh; i++)
        free(z->h[i].data), free(z->h[i].meta);
    z->nh = 0;
}

tq_status tq_sim_dedup(tq_sim *s, tq_reader *in, tq_writer *out)
{
    dd z;
    memset(&z, 0, sizeof z);
    z.s = s;
    tq_frame *f;
    tq_status st;
    names pre = {.n = 0};
    int64_t last_n = -1, last_kept = 0; /* the batch just written */
    while ((st = tq_reader_next(in, &f)) == TQ_OK) {
        const char *qn = tq_sim_query_name(s);
        int vec = qn ? !strcmp(f->name, qn) : tq_sim_codes_is_vectors(f, NULL);
        tq_sim_saw(s, f, vec);
        /* the ranges of codes: kept to decode them, and passed on with them */
        if (!vec && tq_sim_ranges_take(&s->qranges, f, qn, &st) && st)
            break;
        if (!vec) {
            /* right after a batch, a frame of another name than the batches'
             * own with one row per row is an aligned column that follows its
             * vectors (emb, then y): it loses the same rows (tq-score reads it
             * so too); passed whole, it would no longer line up */
            if (last_n >= 0 && !z.nh && f->rank >= 1 && f->dims[0] == last_n &&
                !names_has(&pre, f->name)) {
                const void *data;
                if ((st = tq_frame_data(f, &data)) ||
                    (st = write_kept(out, f->name, f->dtype, f->rank, f->dims, f->meta,
                                     f->meta_len, data, f->raw_size, last_n, z.keep, last_kept)))
                    break;
                continue;
            }
            if (last_n < 0)
                names_add(&pre, f->name);
            if ((st = hold(&z, f)))
                break;
            continue;
        }
        tq_dtype fcode = tq_sim_ranges_has(&s->qranges, f) ? 0 : code_of(f->dtype);
        if (!s->db.name[0]) { /* the first batch fixes the name, the kind and the width */
            snprintf(s->db.name, sizeof s->db.name, "%s", f->name);
            s->db.d = f->rank == 2 ? f->dims[1] : 0;
            s->code = fcode;
            if ((st = check_metric(s, f)))
                break;
        }
        if ((st = load_batch(&z, f)))
            break;
        int64_t n = f->dims[0], kept;
        if (!s->code && !z.screen_tried++ && (st = tq_sim_screen_dedup_open(s, z.q, n, &z.screen)))
            break;
        unsigned char *nk = realloc(z.keep, (size_t)n + 1);
        if (!nk) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        z.keep = nk;
        if ((st = decide(&z, n, &kept)))
            break;
        for (int i = 0; !st && i < z.nh; i++) {
            held *h = &z.h[i];
            st = write_kept(out, h->name, h->dtype, h->rank, h->dims, h->meta, h->meta_len,
                            h->data, h->bytes, n, z.keep, kept);
        }
        drop_held(&z);
        const void *data;
        if (!st && !(st = tq_frame_data(f, &data)))
            st = write_kept(out, f->name, f->dtype, f->rank, f->dims, f->meta, f->meta_len, data,
                            f->raw_size, n, z.keep, kept);
        last_n = n, last_kept = kept;
        s->kept += kept;
        s->q_seen += n;
        s->dropped += n - kept;
        if (st)
            break;
    }
    /* frames after the last batch pass through */
    for (int i = 0; st == TQ_EOF && i < z.nh; i++) {
        held *h = &z.h[i];
        tq_status ws = write_kept(out, h->name, h->dtype, h->rank, h->dims, h->meta,
                                  h->meta_len, h->data, h->bytes, -1, NULL, 0);
        if (ws)
            st = ws;
    }
    drop_held(&z);
    free(z.h);
    for (int c = 0; c < z.nc; c++)
        tq_tensor_free(z.c[c].t), tq_tensor_free(z.c[c].sc);
    free(z.c);
    free(z.q);
    free(z.qc), free(z.qs);
    free(z.keep);
    tq_sim_screen_free(z.screen);
    return st == TQ_EOF ? TQ_OK : st;
}
