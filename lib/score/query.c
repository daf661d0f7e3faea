/* query.c: the reference vectors of --query: one for all rows, or one per group
 * matched by group id; normalized once with the op API at load time. */
#include "score.h"
#include "internal.h"
#include "../quant/quant.h"

struct tq_score_query {
    int64_t k, d;
    float *rows;          /* normalized, [k, d] */
    int64_t *gid;         /* sorted group ids, or NULL: one row for all */
    int64_t *row_of;      /* row of gid[i] */
};

static tq_status grow(void **p, size_t bytes)
{
    void *n = realloc(*p, bytes ? bytes : 1);
    if (!n)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    *p = n;
    return TQ_OK;
}

static tq_status read_all(tq_score_query *q, const char *path, const char *emb,
                          const char *group, int64_t *ng)
{
    tq_reader *r;
    tq_status st = tq_reader_open_path(&r, path);
    if (st)
        return st;
    tq_frame *f;
    const void *data;
    int64_t cap = 0, gcap = 0;
    tq_quant_side side; /* codes (tq-quantize): NAME_scale, NAME_ranges */
    tq_quant_side_init(&side);
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        int is_emb = !strcmp(f->name, emb), is_group = group && !strcmp(f->name, group);
        if (tq_quant_side_of(f, emb)) {
            if ((st = tq_quant_side_keep(&side, f)))
                break;
            continue;
        }
        if (!is_emb && !is_group)
            continue;
        if (is_emb && !tq_quant_decodable(f)) {
            st = tq_fail(TQ_ERR_DATA, "%s: \"%s\" must be a matrix [n, d] of floats or of "
                                      "tq-quantize's codes, not %s of rank %d",
                         path, emb, tq_dtype_name(f->dtype), f->rank);
            break;
        }
        if (is_group && (!tq_dtype_is_int(f->dtype) || f->rank != 1)) {
            st = tq_fail(TQ_ERR_DATA, "%s: \"%s\" must be integers [n], not %s of rank %d", path,
                         group, tq_dtype_name(f->dtype), f->rank);
            break;
        }
        if (!is_emb && (st = tq_frame_data(f, &data)))
            break;
        int64_t n = f->dims[0];
        if (is_emb) {
            q->d = f->dims[1];
            if (q->k + n > cap) {
                cap = 2 * (q->k + n);
                if ((st = grow((void **)&q->rows, (size_t)(cap * q->d) * 4)))
                    break;
            }
            if ((st = tq_quant_side_decode(&side, f, q->rows + q->k * q->d)))
                st = tq_fail_context(st, "%s", path);
            q->k += n;
        } else {
            if (*ng + n > gcap) {
                gcap = 2 * (*ng + n);
                if ((st = grow((void **)&q->gid, (size_t)gcap * 8)))
                    break;
            }
            st = tq_convert(TQ_DTYPE_I64, q->gid + *ng, f->dtype, data, (size_t)n, 0);
            *ng += n;
        }
        if (st)
            break;
    }
    tq_reader_close(r);
    tq_quant_side_free(&side);
    return st == TQ_EOF ? TQ_OK : st;
}

static int by_gid(const void *a, const void *b, void *ctx)
{
    const int64_t *keys = ctx;
    int64_t x = keys[*(const int64_t *)a], y = keys[*(const int64_t *)b];
    return x < y ? -1 : x > y;
}

static tq_status normalize(tq_score_query *q, tq_device *dev)
{
    int64_t dims[2] = {q->k, q->d};
    tq_tensor *t;
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dims, &t);
    if (st)
        return st;
    size_t nb = (size_t)(q->k * q->d) * 4;
    if (!(st = tq_tensor_upload(t, q->rows, nb)) && !(st = tq_op_normalize(t, 1e-12f, t)))
        st = tq_tensor_download(t, q->rows, nb);
    tq_tensor_free(t);
    return st;
}

tq_status tq_score_query_load(const char *path, const char *emb, const char *group,
                              tq_device *dev, tq_score_query **out)
{
    *out = NULL;
    tq_score_query *q = calloc(1, sizeof *q);
    if (!q)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    int64_t ng = 0;
    tq_status st = read_all(q, path, emb, group, &ng);
    if (!st && q->k == 0)
        st = tq_fail(TQ_ERR_DATA, "%s: no \"%s\" rows: nothing to compare with", path, emb);
    if (!st && q->gid && ng != q->k)
        st = tq_fail(TQ_ERR_DATA, "%s: %lld \"%s\" ids for %lld \"%s\" rows", path, (long long)ng,
                     group, (long long)q->k, emb);
    if (!st && !q->gid && q->k != 1)
        st = tq_fail(TQ_ERR_DATA,
                     "%s: %lld query rows and no \"%s\" frame: give one row, or group ids to "
                     "match rows to groups",
                     path, (long long)q->k, group);
    if (!st && q->gid) { /* sorted ids with their rows, for a binary search */
        if (!(q->row_of = malloc((size_t)q->k * 8)))
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; !st && i < q->k; i++)
            q->row_of[i] = i;
        if (!st) {
            qsort_r(q->row_of, (size_t)q->k, 8, by_gid, q->gid);
            int64_t *sorted = malloc((size_t)q->k * 8);
            if (!sorted)
                st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            for (int64_t i = 0; !st && i < q->k; i++)
                sorted[i] = q->gid[q->row_of[i]];
            for (int64_t i = 1; !st && i < q->k; i++)
                if (sorted[i] == sorted[i - 1])
                    st = tq_fail(TQ_ERR_DATA, "%s: group %lld has more than one query row", path,
                                 (long long)sorted[i]);
            if (sorted) {
                free(q->gid);
                q->gid = sorted;
            }
        }
    }
    if (!st)
        st = normalize(q, dev);
    if (st) {
        tq_score_query_free(q);
        return st;
    }
    *out = q;
    return TQ_OK;
}

int64_t tq_score_query_dim(const tq_score_query *q) { return q->d; }
int64_t tq_score_query_rows(const tq_score_query *q) { return q->k; }
int tq_score_query_has_groups(const tq_score_query *q) { return q->gid != NULL; }

tq_status tq_score_query_row(const tq_score_query *q, int64_t gid, float *dst)
{
    int64_t row = 0;
    if (q->gid) {
        int64_t lo = 0, hi = q->k;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (q->gid[mid] < gid)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == q->k || q->gid[lo] != gid)
            return tq_fail(TQ_ERR_DATA, "no query row for group %lld", (long long)gid);
        row = q->row_of[lo];
    }
    memcpy(dst, q->rows + row * q->d, (size_t)q->d * 4);
    return TQ_OK;
}

void tq_score_query_free(tq_score_query *q)
{
    if (!q)
        return;
    free(q->rows);
    free(q->gid);
    free(q->row_of);
    free(q);
}
