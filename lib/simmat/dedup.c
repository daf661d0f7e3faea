/* dedup.c: near-duplicate removal, a filter. Rows pass in order, with their
 * keys and every frame of their batch that has one row per row, except those
 * whose score with an earlier kept row (or a row of --db) is >= the
 * threshold. The kept rows stay on the device, one tensor per batch, and each
 * new batch is searched against them all (simtopk, k = 1); inside a batch the
 * rows are decided in order against the batch's kept rows by exact scores.
 * Both use the exact scores, so the decisions do not depend on batch sizes.
 * Memory: 4 x d bytes per kept row, plus the frames of one batch. */
#include "../internal.h"
#include "../simscore.h"
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
    tq_tensor *t;
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
    unsigned char *keep;
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

/* Decides the rows of one batch (q, n rows, normalized as the metric wants). */
static tq_status decide(dd *z, int64_t n, int64_t *kept_out)
{
    tq_sim *s = z->s;
    int64_t d = s->db.d, qd[2] = {n, d}, kd[2] = {n, 1};
    int metric = s->metric == TQ_SIM_L2;
    float thr = (float)s->threshold;
    float *best = malloc((size_t)(n + 1) * 4);
    int64_t *bi = malloc((size_t)(n + 1) * 8);
    tq_tensor *qt = NULL, *vt = NULL, *it = NULL;
    tq_status st = !best || !bi ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    for (int64_t i = 0; !st && i < n; i++)
        best[i] = -INFINITY, bi[i] = -1;
    if (!st && (s->dbt || z->nc)) {
        if (!(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, qd, &qt)) &&
            !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, kd, &vt)) &&
            !(st = tq_tensor_new(s->dev, TQ_DTYPE_I64, 2, kd, &it)) &&
            !(st = tq_tensor_upload(qt, z->q, (size_t)(n * d) * 4)) &&
            !(st = tq_tensor_upload(vt, best, (size_t)n * 4)))
            st = tq_tensor_upload(it, bi, (size_t)n * 8);
        tq_metric m = metric ? TQ_METRIC_L2 : TQ_METRIC_DOT;
        int64_t base = 0;
        if (!st && s->dbt) {
            st = tq_op_simtopk(qt, s->dbt, m, base, vt, it);
            base += s->dbt->dims[0];
        }
        for (int c = 0; !st && c < z->nc; c++) {
            st = tq_op_simtopk(qt, z->c[c].t, m, base, vt, it);
            base += z->c[c].rows;
        }
        if (!st)
            st = tq_tensor_download(vt, best, (size_t)n * 4);
        tq_tensor_free(qt), tq_tensor_free(vt), tq_tensor_free(it);
    }
    int64_t kept = 0;
    int64_t *ki = malloc((size_t)(n + 1) * 8);
    if (!st && !ki)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < n; i++) {
        /* an empty slot (idx -1) is no match; NaN never reaches the threshold */
        int dup = best[i] >= thr;
        for (int64_t a = 0; !dup && a < kept; a++)
            dup = tq_simscore(metric, z->q + i * d, z->q + ki[a] * d, d) >= thr;
        z->keep[i] = !dup;
        if (!dup)
            ki[kept++] = i;
    }
    if (!st && kept) { /* the kept rows join the set on the device */
        int64_t cd[2] = {kept, d};
        float *rows = malloc((size_t)(kept * d + 1) * 4);
        if (!rows)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t a = 0; !st && a < kept; a++)
            memcpy(rows + a * d, z->q + ki[a] * d, (size_t)d * 4);
        if (!st && z->nc == z->capc) {
            int cap = z->capc ? 2 * z->capc : 16;
            chunk *nc = realloc(z->c, (size_t)cap * sizeof *nc);
            if (!nc)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            else
                z->c = nc, z->capc = cap;
        }
        tq_tensor *t = NULL;
        if (!st && !(st = tq_tensor_new(s->dev, TQ_DTYPE_F32, 2, cd, &t)) &&
            !(st = tq_tensor_upload(t, rows, (size_t)(kept * d) * 4)))
            z->c[z->nc++] = (chunk){t, kept};
        else
            tq_tensor_free(t);
        free(rows);
    }
    free(best), free(bi), free(ki);
    *kept_out = kept;
    return st;
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
    while ((st = tq_reader_next(in, &f)) == TQ_OK) {
        const char *qn = s->q_name ? s->q_name : s->db.name[0] ? s->db.name : s->vec_name;
        int vec = tq_sim_is_vectors(f, qn);
        if (!vec) {
            if ((st = hold(&z, f)))
                break;
            continue;
        }
        if (!s->db.name[0]) { /* the first batch fixes the name and the width */
            snprintf(s->db.name, sizeof s->db.name, "%s", f->name);
            s->db.d = f->dims[1];
        }
        if ((st = tq_sim_frame_f32(f, &z.q, &z.qcap)))
            break;
        int64_t n = f->dims[0], d = f->dims[1], kept;
        if (d != s->db.d) {
            st = tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": rows of %lld values after %lld",
                         (unsigned long long)f->index, f->name, (long long)d, (long long)s->db.d);
            break;
        }
        unsigned char *nk = realloc(z.keep, (size_t)n + 1);
        if (!nk) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        z.keep = nk;
        if (s->metric == TQ_SIM_COSINE)
            tq_sim_normalize_rows(z.q, n, d);
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
        s->kept += kept;
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
        tq_tensor_free(z.c[c].t);
    free(z.c);
    free(z.q);
    free(z.keep);
    return st == TQ_EOF ? TQ_OK : st;
}
