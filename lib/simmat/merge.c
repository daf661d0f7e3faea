/* merge.c: tq-simmat --merge: the top-k streams of the shards of one database
 * (tq-simmat --topk K --shard I/N, I = 0..N-1, same queries) into the stream
 * a single run writes. Each shard ranked its rows by the same exact scores
 * and the same order (larger first, ties to the lower index), so a merge of
 * the sorted lists by that order is exactly the single run's list. */
#include "../internal.h"
#include "../op/simscore.h"
#include "simmat.h"

/* One shard's results for the current batch. */
typedef struct part {
    int64_t *idx, rows, k;
    float *score;
    int keys;            /* db_key follows score */
    int64_t others;      /* frames read that were no top-k batch */
    tq_dtype kdt;
    int64_t *ikey;
    tq_buf skey;
    uint64_t *skoff;
    char meta[256];      /* the idx frame's metadata, shard=0/1 */
    size_t meta_len;
    int shard_i, shard_n; /* the shard=I/N of the metadata */
} part;

static void part_free(part *p)
{
    free(p->idx), free(p->score), free(p->ikey), free(p->skoff);
    tq_buf_free(&p->skey);
    memset(p, 0, sizeof *p);
}

static tq_status copy_out(tq_frame *f, void **dst, size_t elem)
{
    const void *data;
    tq_status st = tq_frame_data(f, &data);
    if (st)
        return st;
    free(*dst);
    *dst = malloc((size_t)f->raw_size + elem);
    if (!*dst)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memcpy(*dst, data, (size_t)f->raw_size);
    return TQ_OK;
}

/* Reads shard s's next batch of results; frames before them are written
 * (shard 0) or skipped (the others: the same query frames). */
static tq_status read_part(tq_reader *r, int s, tq_writer *w, part *p, int *eof)
{
    tq_frame *f;
    tq_status st;
    int have = 0; /* 1 idx, 2 score, 3 db_key */
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        if (!strcmp(f->name, "idx") && have == 0) {
            const char *k = tq_frame_meta_get(f, "k"), *dk = tq_frame_meta_get(f, "db_keys");
            if (!k || f->dtype != TQ_DTYPE_I64 || f->rank != 2)
                return tq_fail(TQ_ERR_DATA, "frame %llu \"idx\": not the output of tq-simmat --topk",
                               (unsigned long long)f->index);
            const char *sh = tq_frame_meta_get(f, "shard");
            int used = 0;
            if (!sh || sscanf(sh, "%d/%d%n", &p->shard_i, &p->shard_n, &used) != 2 || sh[used] ||
                p->shard_n < 1 || p->shard_i < 0 || p->shard_i >= p->shard_n)
                return tq_fail(TQ_ERR_DATA, "frame %llu \"idx\": no shard=I/N in its metadata",
                               (unsigned long long)f->index);
            p->rows = f->dims[0], p->k = f->dims[1];
            p->keys = dk && !strcmp(dk, "1");
            /* a single run's metadata: the same entries, shard=0/1 */
            p->meta_len = 0;
            for (size_t at = 0; f->meta && at < f->meta_len; at += strlen(f->meta + at) + 1) {
                const char *e = f->meta + at;
                int n = snprintf(p->meta + p->meta_len, sizeof p->meta - p->meta_len, "%s",
                                 strncmp(e, "shard=", 6) ? e : "shard=0/1");
                if (n < 0 || (size_t)n + 1 > sizeof p->meta - p->meta_len)
                    return tq_fail(TQ_ERR_DATA, "frame %llu \"idx\": metadata too long",
                                   (unsigned long long)f->index);
                p->meta_len += (size_t)n + 1;
            }
            if ((st = copy_out(f, (void **)&p->idx, 8)))
                return st;
            have = 1;
        } else if (have == 1 && !strcmp(f->name, "score")) {
            if (f->dtype != TQ_DTYPE_F32 || f->rank != 2 || f->dims[0] != p->rows || f->dims[1] != p->k)
                return tq_fail(TQ_ERR_DATA, "frame %llu \"score\": does not match its idx",
                               (unsigned long long)f->index);
            if ((st = copy_out(f, (void **)&p->score, 4)))
                return st;
            if (!p->keys)
                return TQ_OK;
            have = 2;
        } else if (have == 2 && !strcmp(f->name, "db_key")) {
            p->kdt = f->dtype;
            if (f->dtype == TQ_DTYPE_I64)
                return copy_out(f, (void **)&p->ikey, 8);
            if (f->dtype != TQ_DTYPE_STR || f->dims[0] != p->rows * p->k)
                return tq_fail(TQ_ERR_DATA, "frame %llu \"db_key\": does not match its idx",
                               (unsigned long long)f->index);
            free(p->skoff); /* the previous batch's */
            p->skoff = malloc((size_t)(f->dims[0] + 1) * 8);
            if (!p->skoff)
                return tq_fail(TQ_ERR_NOMEM, "out of memory");
            p->skoff[0] = 0;
            p->skey.len = 0;
            for (int64_t i = 0; i < f->dims[0]; i++) {
                const char *sv;
                size_t len;
                if ((st = tq_frame_str(f, i, &sv, &len)) || (st = tq_buf_add(&p->skey, sv, len)))
                    return st;
                p->skoff[i + 1] = p->skey.len;
            }
            return TQ_OK;
        } else if (have) {
            return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": expected the rest of a top-k batch",
                           (unsigned long long)f->index, f->name);
        } else {
            p->others++;
            if (s == 0 && (st = tq_writer_put(w, f)))
                return st;
        }
    }
    if (st == TQ_EOF && !have) {
        *eof = 1;
        return TQ_OK;
    }
    return st == TQ_EOF ? tq_fail(TQ_ERR_DATA, "truncated top-k batch") : st;
}

static tq_status merge_batch(part *p, int n, tq_writer *w)
{
    int64_t rows = p[0].rows, k = p[0].k;
    for (int s = 1; s < n; s++)
        if (p[s].rows != rows || p[s].k != k || p[s].keys != p[0].keys ||
            (p[0].keys && p[s].kdt != p[0].kdt))
            return tq_fail(TQ_ERR_DATA, "shard %d's batch (%lld x %lld) differs from shard 0's "
                                        "(%lld x %lld): not shards of one query stream",
                           s, (long long)p[s].rows, (long long)p[s].k, (long long)rows, (long long)k);
    int64_t *mi = malloc((size_t)(rows * k + 1) * 8), *src = malloc((size_t)(rows * k + 1) * 16);
    float *mv = malloc((size_t)(rows * k + 1) * 4);
    int64_t at[n];
    tq_status st = !mi || !mv || !src ? tq_fail(TQ_ERR_NOMEM, "out of memory") : TQ_OK;
    for (int64_t r = 0; !st && r < rows; r++) {
        for (int s = 0; s < n; s++)
            at[s] = 0;
        for (int64_t o = 0; o < k; o++) {
            int b = 0;
            for (int s = 1; s < n; s++) {
                int64_t x = r * k + at[s], y = r * k + at[b];
                if (at[s] < k && (at[b] >= k || tq_simscore_better(p[s].score[x], p[s].idx[x],
                                                                 p[b].score[y], p[b].idx[y])))
                    b = s;
            }
            int64_t x = r * k + at[b];
            mv[r * k + o] = p[b].score[x];
            mi[r * k + o] = p[b].idx[x];
            src[2 * (r * k + o)] = b, src[2 * (r * k + o) + 1] = x;
            at[b]++;
        }
    }
    int64_t dims[2] = {rows, k};
    if (!st)
        st = tq_writer_write(w, "idx", TQ_DTYPE_I64, 2, dims, p[0].meta, p[0].meta_len, mi,
                             (uint64_t)(rows * k) * 8);
    if (!st)
        st = tq_writer_write(w, "score", TQ_DTYPE_F32, 2, dims, NULL, 0, mv, (uint64_t)(rows * k) * 4);
    if (!st && p[0].keys && p[0].kdt == TQ_DTYPE_I64) {
        for (int64_t o = 0; o < rows * k; o++)
            mi[o] = p[src[2 * o]].ikey[src[2 * o + 1]];
        st = tq_writer_write(w, "db_key", TQ_DTYPE_I64, 2, dims, NULL, 0, mi, (uint64_t)(rows * k) * 8);
    } else if (!st && p[0].keys) {
        const char **ss = malloc((size_t)(rows * k + 1) * sizeof *ss);
        size_t *ll = malloc((size_t)(rows * k + 1) * sizeof *ll);
        if (!ss || !ll)
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
        for (int64_t o = 0; !st && o < rows * k; o++) {
            const part *q = &p[src[2 * o]];
            int64_t x = src[2 * o + 1];
            ss[o] = q->skey.p ? q->skey.p + q->skoff[x] : "";
            ll[o] = (size_t)(q->skoff[x + 1] - q->skoff[x]);
        }
        if (!st)
            st = tq_writer_write_str(w, "db_key", rows * k, ss, ll);
        free(ss), free(ll);
    }
    free(mi), free(mv), free(src);
    return st;
}

/* The parts must be the shards 0..N-1 of one search, each once: the same
 * metadata (k, metric, database rows, keys) and N = the number of files. */
static tq_status check_shards(const part *p, int n)
{
    for (int s = 0; s < n; s++) {
        if (p[s].meta_len != p[0].meta_len || memcmp(p[s].meta, p[0].meta, p[0].meta_len))
            return tq_fail(TQ_ERR_DATA, "files 1 and %d are not shards of one search "
                                        "(k, metric or database differ)", s + 1);
        if (p[s].shard_n != n)
            return tq_fail(TQ_ERR_DATA, "file %d is shard %d/%d, but %d files were given",
                           s + 1, p[s].shard_i, p[s].shard_n, n);
        for (int t = 0; t < s; t++)
            if (p[t].shard_i == p[s].shard_i)
                return tq_fail(TQ_ERR_DATA, "files %d and %d are both shard %d/%d", t + 1, s + 1,
                               p[s].shard_i, n);
    }
    return TQ_OK;
}

tq_status tq_sim_merge(tq_reader **in, int n, tq_writer *out)
{
    part *p = calloc((size_t)n, sizeof *p);
    if (!p)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    int64_t batches = 0;
    for (;;) {
        int eofs = 0;
        for (int s = 0; !st && s < n; s++) {
            int eof = 0;
            st = read_part(in[s], s, out, &p[s], &eof);
            eofs += eof;
        }
        if (st || eofs == n)
            break;
        if (eofs) {
            st = tq_fail(TQ_ERR_DATA, "the shards hold different numbers of batches");
            break;
        }
        st = check_shards(p, n);
        if (!st)
            st = merge_batch(p, n, out);
        batches++;
    }
    /* streams with frames but no top-k batch (a query stream, a database):
     * passing them back would merge nothing and exit 0 */
    for (int s = 0; !st && !batches && s < n; s++)
        if (p[s].others)
            st = tq_fail(TQ_ERR_DATA, "file %d holds no top-k lists (\"idx\" with shard=I/N, "
                                      "\"score\"): not an output of tq-simmat --topk --shard",
                         s + 1);
    for (int s = 0; s < n; s++)
        part_free(&p[s]);
    free(p);
    return st;
}
