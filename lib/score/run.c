/* run.c: tq-score over a stream. Input batches are read whole (a batch ends
 * where a frame name repeats); the frames with as many rows as the batch's emb
 * are aligned and their rows are held until their group ends: groups are
 * contiguous runs of one id, so memory is bounded by the largest group plus an
 * input and an output batch. Other frames pass through as they come. */
#include "score.h"
#include "rows.h"
#include "internal.h"
#include "../quant/quant.h"
#include "../tool/pick.h"

typedef struct runner {
    const tq_score_run_opts *o;
    tq_writer *w;
    tq_score_stats *stats;
    tq_frame *batch;              /* copies of the frames of the batch being read */
    int nbatch, cap_batch;
    tq_rowcol *cols;              /* the aligned frames, in the first batch's order */
    int ncols, schema;
    int emb_col, group_col, extra_col[TQ_SCORE_MAX_FEATURES];
    tq_quant_code code;           /* the candidates' code (tq-quantize); F32: floats */
    int scale_col;                /* int8 candidates: their NAME_scale, aligned */
    tq_quant_side side;           /* ranges candidates: NAME_ranges, before them */
    int64_t d;
    int64_t *gid;                 /* group id of each held row */
    int64_t nbuf, cap_gid;        /* rows held */
    int64_t gstart, cur;          /* the group being read: first row, id */
    int in_group;
    int64_t *done;                /* ids of finished groups: an open-addressing set */
    int64_t ndone, cap_done;
    unsigned char *done_used;
    int64_t *ridx, *rrank;        /* rows ready for output: index, rank, score */
    float *rscore;
    int64_t nready, cap_ready;
} runner;

static tq_status oom(void) { return tq_fail(TQ_ERR_NOMEM, "out of memory"); }

static tq_status grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return TQ_OK;
    int64_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *n = realloc(*p, (size_t)c * elem);
    if (!n)
        return oom();
    *p = n, *cap = c;
    return TQ_OK;
}

/* ---- the set of finished group ids ---- */

static uint64_t mix(int64_t v)
{
    uint64_t x = (uint64_t)v * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static int done_has(const runner *r, int64_t v)
{
    if (!r->cap_done)
        return 0;
    for (uint64_t i = mix(v) & (uint64_t)(r->cap_done - 1);; i = (i + 1) & (uint64_t)(r->cap_done - 1)) {
        if (!r->done_used[i])
            return 0;
        if (r->done[i] == v)
            return 1;
    }
}

static tq_status done_add(runner *r, int64_t v)
{
    if (2 * (r->ndone + 1) > r->cap_done) { /* rehash at half full */
        int64_t cap = r->cap_done ? 2 * r->cap_done : 1024;
        int64_t *old = r->done;
        unsigned char *old_used = r->done_used;
        int64_t old_cap = r->cap_done;
        r->done = malloc((size_t)cap * 8);
        r->done_used = calloc((size_t)cap, 1);
        if (!r->done || !r->done_used) {
            free(r->done), free(r->done_used);
            r->done = old, r->done_used = old_used;
            return oom();
        }
        r->cap_done = cap, r->ndone = 0;
        for (int64_t i = 0; i < old_cap; i++)
            if (old_used[i])
                done_add(r, old[i]);
        free(old), free(old_used);
    }
    uint64_t i = mix(v) & (uint64_t)(r->cap_done - 1);
    while (r->done_used[i])
        i = (i + 1) & (uint64_t)(r->cap_done - 1);
    r->done[i] = v, r->done_used[i] = 1, r->ndone++;
    return TQ_OK;
}

/* ---- one finished group: scores, ranks, and the rows it sends out ---- */

static tq_status finish_group(runner *r, int64_t a, int64_t b)
{
    const tq_score_run_opts *o = r->o;
    int64_t m = b - a, d = r->d;
    if (m == 0)
        return TQ_OK;
    int64_t gid = r->group_col >= 0 ? r->gid[a] : 0;
    float *emb = malloc((size_t)(m * d + 1) * 4), *score = malloc((size_t)m * 4);
    float *extra[TQ_SCORE_MAX_FEATURES] = {0};
    int64_t *order = malloc((size_t)m * 8), *rank = malloc((size_t)m * 8);
    tq_status st = emb && score && order && rank ? TQ_OK : oom();
    const tq_rowcol *e = &r->cols[r->emb_col];
    if (!st && r->code == TQ_QUANT_F32)
        st = tq_convert(TQ_DTYPE_F32, emb, e->dtype, tq_rowcol_row(e, a), (size_t)(m * d), 0);
    else if (!st) /* codes: the values tq-quantize --to f32 gives */
        st = tq_quant_dequant(r->code, tq_rowcol_row(e, a), m, d, r->side.ranges,
                              r->scale_col >= 0 ? tq_rowcol_row(&r->cols[r->scale_col], a) : NULL,
                              emb);
    for (int j = 0; !st && j < o->cfg.nextra; j++) {
        const tq_rowcol *c = &r->cols[r->extra_col[j]];
        if (!(extra[j] = malloc((size_t)m * 4)))
            st = oom();
        else
            st = tq_convert(TQ_DTYPE_F32, extra[j], c->dtype, tq_rowcol_row(c, a), (size_t)m, 0);
    }
    if (!st)
        st = tq_score_group(&o->cfg, emb, m, d, (const float *const *)extra, gid, score);
    if (st && r->group_col >= 0)
        st = tq_fail_context(st, "group %lld", (long long)gid);
    if (!st)
        st = tq_score_rank(score, m, order, rank);
    int64_t keep = o->top && o->top < m ? o->top : m;
    if (!st && !(st = grow((void **)&r->ridx, &r->cap_ready, r->nready + keep, 8))) {
        int64_t cap = r->cap_ready;
        void *p1 = realloc(r->rrank, (size_t)cap * 8), *p2 = p1 ? realloc(r->rscore, (size_t)cap * 4) : NULL;
        if (p1)
            r->rrank = p1;
        if (p2)
            r->rscore = p2;
        if (!p1 || !p2)
            st = oom();
    }
    for (int64_t i = 0, k = 0; !st && i < m; i++) {
        int64_t row = o->sort ? order[i] : i;
        if (rank[row] > keep)
            continue;
        r->ridx[r->nready + k] = a + row;
        r->rrank[r->nready + k] = rank[row];
        r->rscore[r->nready + k] = score[row];
        k++;
    }
    if (!st) {
        r->nready += keep;
        r->stats->groups++;
    }
    free(emb), free(score), free(order), free(rank);
    for (int j = 0; j < o->cfg.nextra; j++)
        free(extra[j]);
    return st;
}

/* Writes the ready rows in frames of at most o->batch rows, then forgets the
 * held rows of the finished groups. */
static tq_status emit_ready(runner *r)
{
    tq_status st = TQ_OK;
    for (int64_t at = 0; at < r->nready && !st; at += r->o->batch) {
        int64_t k = r->nready - at < r->o->batch ? r->nready - at : r->o->batch;
        for (int c = 0; c < r->ncols && !st; c++)
            st = tq_rowcol_write(&r->cols[c], r->ridx + at, k, r->w);
        if (!st)
            st = tq_writer_write(r->w, "score", TQ_DTYPE_F32, 1, &k, r->o->meta, r->o->meta_len,
                                 r->rscore + at, (uint64_t)k * 4);
        if (!st)
            st = tq_writer_write(r->w, "rank", TQ_DTYPE_I64, 1, &k, NULL, 0, r->rrank + at,
                                 (uint64_t)k * 8);
        if (!st)
            r->stats->rows_out += k;
    }
    r->nready = 0;
    int64_t cut = r->gstart;
    for (int c = 0; c < r->ncols; c++)
        tq_rowcol_drop(&r->cols[c], cut);
    if (r->group_col >= 0 && cut)
        memmove(r->gid, r->gid + cut, (size_t)(r->nbuf - cut) * 8);
    r->nbuf -= cut;
    r->gstart = 0;
    return st;
}

/* ---- batches ---- */

static tq_status clone_frame(const tq_frame *f, tq_frame *c)
{
    *c = *f;
    size_t hl = f->priv_hdr_len, ss = (size_t)f->stored_size;
    unsigned char *b = malloc(hl + ss + 1);
    if (!b)
        return oom();
    memcpy(b, f->priv_hdr, hl);
    if (ss)
        memcpy(b + hl, f->stored, ss);
    c->priv_hdr = b;
    c->stored = b + hl;
    c->meta = f->meta_len ? (const char *)b + TQ_FIXED_HEADER + 8 * f->rank + strlen(f->name) : NULL;
    c->priv_raw = NULL;
    c->priv_buf = b;
    c->priv_cap = hl + ss + 1;
    return TQ_OK;
}

static tq_status frame_fail(const tq_frame *f, const char *why)
{
    return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %s", (unsigned long long)f->index, f->name,
                   why);
}

static int col_of(const runner *r, const char *name)
{
    for (int c = 0; c < r->ncols; c++)
        if (!strcmp(r->cols[c].name, name))
            return c;
    return -1;
}

/* The first batch with an emb frame fixes which frames are aligned, and
 * checks the group and feature frames and the dims. */
static tq_status set_schema(runner *r, const int *aligned, const tq_frame *emb)
{
    const tq_score_run_opts *o = r->o;
    tq_status st;
    if (emb->dims[1] == 0 && emb->dims[0] > 0)
        return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": %lld rows of 0 values: nothing to score",
                       (unsigned long long)emb->index, emb->name, (long long)emb->dims[0]);
    r->d = r->stats->d = emb->dims[1];
    if (o->cfg.query && tq_score_query_dim(o->cfg.query) != r->d) {
        /* each input's frames from that input: name both, and both widths */
        tq_took q = {.what = "query", .name = o->query_emb ? o->query_emb : o->emb,
                     .from = o->query_path, .rank = 2,
                     .dims = {tq_score_query_rows(o->cfg.query), tq_score_query_dim(o->cfg.query)}};
        tq_took c = {.what = "candidates", .name = o->emb,
                     .from = o->in_label ? o->in_label : "the input", .rank = 2,
                     .dims = {emb->dims[0], r->d}};
        return tq_took_same_width(&q, &c);
    }
    if (o->cfg.model && tq_score_model_dim(o->cfg.model) != r->d)
        return tq_fail(TQ_ERR_DATA, "%s: the model takes vectors of dim %lld, \"%s\" from %s has "
                                    "%lld",
                       o->model_path, (long long)tq_score_model_dim(o->cfg.model), o->emb,
                       o->in_label ? o->in_label : "the input", (long long)r->d);
    if (!(r->cols = calloc((size_t)r->nbatch, sizeof *r->cols)))
        return oom();
    for (int i = 0; i < r->nbatch; i++)
        if (aligned[i] > 0 && (st = tq_rowcol_init(&r->cols[r->ncols++], &r->batch[i])))
            return st;
    r->emb_col = col_of(r, o->emb);
    r->group_col = col_of(r, o->group);
    /* codes decode as tq-quantize --to f32 decodes them: int8 rows with their
     * scales (an aligned NAME_scale), or any int8 and uint8 rows after ranges */
    char sname[TQ_MAX_NAME + 8];
    snprintf(sname, sizeof sname, "%s_scale", o->emb);
    int sc = emb->dtype == TQ_DTYPE_I8 ? col_of(r, sname) : -1;
    if (sc >= 0 && (r->cols[sc].dtype != TQ_DTYPE_F32 || r->cols[sc].rank != 1))
        return tq_fail(TQ_ERR_DATA, "\"%s\" must be the scales of \"%s\", f32 [n]", sname, o->emb);
    r->scale_col = sc;
    r->code = tq_quant_code_of(emb->dtype, sc >= 0);
    int ranged = r->code == TQ_QUANT_INT8_RANGES || r->code == TQ_QUANT_UINT8_RANGES;
    if (ranged && (!r->side.ranges || r->side.ranges_d != r->d) && emb->dtype == TQ_DTYPE_I8)
        return tq_fail(TQ_ERR_DATA, "\"%s\" is int8: it needs its scales, \"%s\" f32 [n] with its "
                                    "rows, or ranges \"%s_ranges\" f32 [2, %lld] before it "
                                    "(tq-quantize)", o->emb, sname, o->emb, (long long)r->d);
    if (ranged && (!r->side.ranges || r->side.ranges_d != r->d))
        return tq_fail(TQ_ERR_DATA, "\"%s\" is uint8: it needs its ranges, \"%s_ranges\" f32 "
                                    "[2, %lld] before it (tq-quantize)", o->emb, o->emb,
                       (long long)r->d);
    if (r->group_col >= 0) {
        const tq_rowcol *g = &r->cols[r->group_col];
        if (!tq_dtype_is_int(g->dtype) || g->rank != 1)
            return tq_fail(TQ_ERR_DATA, "\"%s\" must be integer group ids [n], not %s of rank %d",
                           o->group, tq_dtype_name(g->dtype), g->rank);
    } else if (o->cfg.query && tq_score_query_has_groups(o->cfg.query)) {
        return tq_fail(TQ_ERR_DATA,
                       "%s: one query row per group, but the input has no \"%s\" frame",
                       o->query_path, o->group);
    }
    for (int j = 0; j < o->cfg.nextra; j++) {
        int c = col_of(r, o->extra[j]);
        if (c < 0)
            return tq_fail(TQ_ERR_DATA, "--feature %s: no frame \"%s\" with the %lld rows of \"%s\"",
                           o->extra[j], o->extra[j], (long long)emb->dims[0], o->emb);
        const tq_rowcol *f = &r->cols[c];
        if (!tq_dtype_size(f->dtype) || (f->rank == 2 ? f->dims[1] != 1 : f->rank != 1))
            return tq_fail(TQ_ERR_DATA,
                           "--feature %s: must be one number a row ([n] or [n, 1]), not %s of "
                           "rank %d",
                           o->extra[j], tq_dtype_name(f->dtype), f->rank);
        r->extra_col[j] = c;
    }
    r->schema = 1;
    return TQ_OK;
}

/* Takes the group ids of the rows just added, finishing each group that ends. */
static tq_status scan_groups(runner *r, int64_t from)
{
    tq_status st;
    for (int64_t i = from; i < r->nbuf; i++) {
        int64_t g = r->gid[i];
        if (r->in_group && g == r->cur)
            continue;
        if (r->in_group) {
            if ((st = finish_group(r, r->gstart, i)) || (st = done_add(r, r->cur)))
                return st;
            r->gstart = i;
        }
        if (done_has(r, g))
            return tq_fail(TQ_ERR_DATA,
                           "group %lld comes again at row %lld after other groups: groups must be "
                           "contiguous runs of rows (sort by group first)",
                           (long long)g, (long long)(r->stats->rows_in - (r->nbuf - i)));
        r->cur = g, r->in_group = 1;
    }
    return TQ_OK;
}

static tq_status classify(runner *r, int *aligned, const tq_frame *ef);

static tq_status process_batch(runner *r)
{
    const tq_score_run_opts *o = r->o;
    tq_status st = TQ_OK;
    int e = -1;
    for (int i = 0; i < r->nbatch; i++)
        if (!strcmp(r->batch[i].name, o->emb))
            e = i;
    if (e < 0) { /* no candidates here: everything passes through */
        for (int i = 0; i < r->nbatch && !st; i++)
            st = tq_writer_put(r->w, &r->batch[i]);
        return st;
    }
    const tq_frame *ef = &r->batch[e];
    if (!tq_quant_decodable(ef))
        return frame_fail(ef, "the candidates must be a matrix [n, d] of floats or of "
                              "tq-quantize's codes");
    int *aligned = malloc((size_t)r->nbatch * sizeof *aligned);
    if (!aligned)
        return oom();
    st = classify(r, aligned, ef);
    free(aligned);
    return st;
}

/* Sends the frames that are not aligned on, holds the rows of the aligned
 * ones, and finishes the groups that end in this batch. */
static tq_status classify(runner *r, int *aligned, const tq_frame *ef)
{
    const tq_score_run_opts *o = r->o;
    tq_status st = TQ_OK;
    int64_t n = ef->dims[0];
    for (int i = 0; i < r->nbatch; i++) {
        const tq_frame *f = &r->batch[i];
        /* the ranges of codes (once, [2, d]) are never rows of the candidates */
        aligned[i] = f->rank >= 1 && f->dims[0] == n && tq_quant_side_of(f, o->emb) != 2;
        /* an earlier score and rank are replaced by the new ones */
        if (aligned[i] && (!strcmp(f->name, "score") || !strcmp(f->name, "rank")))
            aligned[i] = -1;
    }
    for (int i = 0; i < r->nbatch && !st; i++) {
        if (aligned[i])
            continue;
        if (tq_quant_side_of(&r->batch[i], o->emb) == 2)
            st = tq_quant_side_keep(&r->side, &r->batch[i]);
        if (!st)
            st = tq_writer_put(r->w, &r->batch[i]);
    }
    if (!st && !r->schema)
        st = set_schema(r, aligned, ef);
    if (st)
        return st;
    int seen = 0;
    for (int i = 0; i < r->nbatch; i++) {
        if (aligned[i] <= 0)
            continue;
        if (col_of(r, r->batch[i].name) < 0)
            return frame_fail(&r->batch[i], "has the rows of the candidates here, but not in "
                                            "the first batch: the aligned frames must be the "
                                            "same in every batch");
        seen++;
    }
    if (seen != r->ncols)
        for (int c = 0; c < r->ncols; c++) {
            int found = 0;
            for (int i = 0; i < r->nbatch; i++)
                found |= aligned[i] > 0 && !strcmp(r->batch[i].name, r->cols[c].name);
            if (!found)
                return tq_fail(TQ_ERR_DATA, "frame %llu \"%s\": its batch has no \"%s\" frame of "
                                            "%lld rows, as the first batch had",
                               (unsigned long long)ef->index, o->emb, r->cols[c].name,
                               (long long)n);
        }
    for (int i = 0; i < r->nbatch && !st; i++)
        if (aligned[i] > 0)
            st = tq_rowcol_append(&r->cols[col_of(r, r->batch[i].name)], &r->batch[i]);
    if (!st && r->group_col >= 0) {
        const void *g;
        tq_frame *gf = NULL;
        for (int i = 0; i < r->nbatch; i++)
            if (aligned[i] > 0 && !strcmp(r->batch[i].name, o->group))
                gf = &r->batch[i];
        if (!(st = grow((void **)&r->gid, &r->cap_gid, r->nbuf + n, 8)) &&
            !(st = tq_frame_data(gf, &g)))
            st = tq_convert(TQ_DTYPE_I64, r->gid + r->nbuf, gf->dtype, g, (size_t)n, 0);
    }
    if (st)
        return st;
    int64_t from = r->nbuf;
    r->nbuf += n;
    r->stats->rows_in += n;
    if (r->group_col >= 0 && (st = scan_groups(r, from)))
        return st;
    /* finished rows wait for a full output batch, so that small groups still
     * make frames of a useful size */
    return r->gstart >= o->batch ? emit_ready(r) : TQ_OK;
}

static void clear_batch(runner *r)
{
    for (int i = 0; i < r->nbatch; i++)
        tq_frame_release(&r->batch[i]);
    r->nbatch = 0;
}

tq_status tq_score_run(const tq_score_run_opts *o, tq_reader *rd, tq_writer *w,
                       tq_score_stats *stats)
{
    runner r = {.o = o, .w = w, .stats = stats, .emb_col = -1, .group_col = -1, .scale_col = -1};
    tq_quant_side_init(&r.side);
    memset(stats, 0, sizeof *stats);
    tq_frame *f;
    tq_status st;
    for (;;) {
        st = tq_reader_next(rd, &f);
        if (st && st != TQ_EOF)
            break;
        int repeat = 0;
        for (int i = 0; !st && i < r.nbatch && !repeat; i++)
            repeat = !strcmp(r.batch[i].name, f->name);
        if (st == TQ_EOF || repeat) {
            tq_status bst = process_batch(&r);
            clear_batch(&r);
            if (bst) {
                st = bst;
                break;
            }
            if (st == TQ_EOF)
                break;
        }
        if (r.nbatch == r.cap_batch) {
            int cap = r.cap_batch ? 2 * r.cap_batch : 8;
            tq_frame *n = realloc(r.batch, (size_t)cap * sizeof *n);
            if (!n) {
                st = oom();
                break;
            }
            r.batch = n, r.cap_batch = cap;
        }
        if ((st = clone_frame(f, &r.batch[r.nbatch])))
            break;
        r.nbatch++;
    }
    if (st == TQ_EOF) {
        st = TQ_OK;
        if (r.schema && r.nbuf > r.gstart)
            st = finish_group(&r, r.gstart, r.nbuf);
        r.gstart = r.nbuf;
        if (!st && r.schema)
            st = emit_ready(&r);
    }
    clear_batch(&r);
    free(r.batch);
    for (int c = 0; c < r.ncols; c++)
        tq_rowcol_free(&r.cols[c]);
    free(r.cols);
    free(r.gid), free(r.done), free(r.done_used);
    free(r.ridx), free(r.rrank), free(r.rscore);
    tq_quant_side_free(&r.side);
    return st;
}
