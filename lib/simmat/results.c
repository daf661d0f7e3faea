/* results.c: what every mode of tq-simmat writes and shares, in one place:
 * the rows of a product slice, metric names, the pairs of --threshold and
 * the lists of --topk (with the keys of their rows), and the frames of the
 * query stream that are not its vectors. search.c, codes.c and screen.c all
 * write through it, so that none of them calls another for it. */
#include "../internal.h"
#include "simmat.h"

/* Query rows per product: about 16 MiB of scores, which are still in cache
 * when they are written and are the only memory the output takes, but at
 * least 96 (the micro-kernel's strips stay full) and a multiple of 48. Every
 * value of tq_op_rowprod is the same whatever the rows of the call, so this
 * sets only how the matrix is cut into frames, never a bit of it. */
int64_t tq_sim_slice_rows(int64_t ndb)
{
    int64_t r = ((int64_t)16 << 20) / 4 / (ndb ? ndb : 1);
    r = r < 96 ? 96 : r > 4096 ? 4096 : r;
    return r / 48 * 48;
}

const char *tq_sim_metric_name(tq_sim_metric m)
{
    return m == TQ_SIM_COSINE ? "cosine" : m == TQ_SIM_DOT ? "dot" : m == TQ_SIM_L2 ? "l2" : "hamming";
}

/* Writes the frame NAME of the keys of rows r at the indices idx[0..m) (less
 * base; -1: no row, written as -1 or ""), with dims (rank 1 or 2). */
static tq_status write_keys(tq_writer *w, const char *name, const tq_sim_rows *r,
                            const int64_t *idx, int64_t base, int rank, const int64_t *dims)
{
    int64_t m = rank == 1 ? dims[0] : dims[0] * dims[1];
    if (r->key_dtype == TQ_DTYPE_I64) {
        int64_t *kk = malloc((size_t)(m + 1) * 8);
        if (!kk)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t i = 0; i < m; i++)
            kk[i] = idx[i] < 0 ? -1 : r->ikey[idx[i] - base];
        tq_status st = tq_writer_write(w, name, TQ_DTYPE_I64, rank, dims, NULL, 0, kk,
                                       (uint64_t)m * 8);
        free(kk);
        return st;
    }
    const char **ss = malloc((size_t)(m + 1) * sizeof *ss);
    size_t *ll = malloc((size_t)(m + 1) * sizeof *ll);
    tq_status st = TQ_OK;
    if (!ss || !ll)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < m; i++) {
        int64_t at = idx[i] - base;
        ss[i] = idx[i] < 0 ? "" : r->skey.p + r->skey_off[at];
        ll[i] = idx[i] < 0 ? 0 : r->skey_off[at + 1] - r->skey_off[at];
    }
    if (!st)
        st = tq_writer_write_str(w, name, m, ss, ll);
    free(ss);
    free(ll);
    return st;
}

tq_status tq_sim_pairs_add(tq_sim_pairs *p, int64_t i, int64_t j, float v)
{
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 4096;
        int64_t *ni = realloc(p->i, (size_t)cap * 8), *nj = ni ? realloc(p->j, (size_t)cap * 8) : NULL;
        if (ni)
            p->i = ni;
        if (nj)
            p->j = nj;
        float *nv = nj ? realloc(p->v, (size_t)cap * 4) : NULL;
        if (!nv)
            return tq_fail(TQ_ERR_NOMEM, "out of memory for pairs");
        p->v = nv, p->cap = cap;
    }
    p->i[p->n] = i, p->j[p->n] = j, p->v[p->n] = v;
    p->n++;
    return TQ_OK;
}

tq_status tq_sim_pairs_write(tq_sim *s, const tq_sim_pairs *p, const tq_sim_rows *qk, int64_t r0,
                             tq_writer *w)
{
    s->pairs += p->n;
    int64_t m = p->n;
    tq_status st = tq_writer_write(w, "i", TQ_DTYPE_I64, 1, &m, NULL, 0, p->i, (uint64_t)m * 8);
    if (!st)
        st = tq_writer_write(w, "j", TQ_DTYPE_I64, 1, &m, NULL, 0, p->j, (uint64_t)m * 8);
    if (!st)
        st = tq_writer_write(w, "score", TQ_DTYPE_F32, 1, &m, NULL, 0, p->v, (uint64_t)m * 4);
    if (!st && qk->key_dtype != TQ_DTYPE_INVALID)
        st = write_keys(w, "key_i", qk, p->i, r0, 1, &m);
    if (!st && s->db.key_dtype != TQ_DTYPE_INVALID)
        st = write_keys(w, "key_j", &s->db, p->j, 0, 1, &m);
    return st;
}

tq_status tq_sim_topk_write(tq_sim *s, const float *v, const int64_t *ix, int64_t n, tq_writer *w)
{
    int64_t k = s->k, kd[2] = {n, k};
    char meta[160];
    size_t ml = (size_t)snprintf(meta, sizeof meta, "k=%lld%cmetric=%s%cshard=%d/%d%cdb_rows=%lld%cdb_keys=%d",
                                 (long long)k, 0, tq_sim_metric_name(s->metric), 0, s->shard_i, s->shard_n, 0,
                                 (long long)s->db.n, 0, s->db.key_dtype != TQ_DTYPE_INVALID) + 1;
    tq_status st = tq_writer_write(w, "idx", TQ_DTYPE_I64, 2, kd, meta, ml, ix, (uint64_t)(n * k) * 8);
    if (!st)
        st = tq_writer_write(w, "score", TQ_DTYPE_F32, 2, kd, NULL, 0, v, (uint64_t)(n * k) * 4);
    if (!st && s->db.key_dtype != TQ_DTYPE_INVALID)
        st = write_keys(w, "db_key", &s->db, ix, 0, 2, kd);
    return st;
}

tq_status tq_sim_side_frame(const tq_sim *s, tq_frame *f, tq_writer *w, tq_sim_rows *qk,
                            int64_t *qk_rows)
{
    if (s->mode != TQ_SIM_THRESHOLD)
        return tq_writer_put(w, f);
    if (strcmp(f->name, "key") || f->rank != 1)
        return TQ_OK;
    tq_sim_rows_free(qk);
    *qk_rows = f->dims[0];
    return tq_sim_rows_keys(qk, f, 0);
}
