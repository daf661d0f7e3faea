/* tq-attend: multi-head attention over a TQ stream. Q (and, with --self, K
 * and V) from standard input, K and V from --kv FILE otherwise; each whole
 * tensor (all its batches) is one sequence (rank 2) or a batch of sequences
 * (rank 3), read into memory; "out" replaces Q batch by batch, so keys and
 * other frames stay aligned. Stream handling here; the layer in lib/attend. */
#include "tool/tool.h"
#include "attend/attend.h"
#include "quant/quant.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_Q = TQ_OPT_TOOL_BASE,
    OPT_KV,
    OPT_K,
    OPT_V,
    OPT_SELF,
    OPT_HEADS,
    OPT_WEIGHTS,
    OPT_CAUSAL,
    OPT_SCALE,
    OPT_KEY_LEN,
    OPT_KEY_MASK,
    OPT_GROUP,
    OPT_CONSENSUS,
    OPT_WEIGHTS_OUT,
};

static void help(void)
{
    fputs(
        "Usage: tq-attend [OPTION]...\n"
        "Multi-head scaled dot-product attention: softmax(Q K^T / sqrt(d) + mask) V per\n"
        "head. Q is read from standard input; K and V from --kv FILE or, with --self,\n"
        "from standard input too. A rank 2 tensor [n, d] is one sequence; a rank 3\n"
        "tensor [b, n, d] is b sequences. Writes \"out\" in place of Q's batches.\n\n"
        "Inputs:\n"
        "      --q NAME          frame of the queries (default: emb, else the one rank 2\n"
        "                        or 3 float frame; see tq(7))\n"
        "      --kv FILE         read K and V from FILE\n"
        "      --self            self-attention: K = V = Q unless --k/--v name other\n"
        "                        frames of standard input\n"
        "      --k NAME, --v NAME  frames of K and V (default: k and v, else the one\n"
        "                        rank 2 or 3 float frame of FILE; with --self: Q)\n"
        "      --heads H         heads, dividing the widths (default: 1)\n"
        "      --weights FILE    projections wq, wk, wv, wo [out, in] and optional bq,\n"
        "                        bk, bv, bo [out]: y = x W^T + b (default: none)\n"
        "      --scale X         scale of the scores (default: 1/sqrt(head width))\n\n"
        "Masks (a masked key gets no attention):\n"
        "      --causal          query i sees keys j <= i\n"
        "      --key-len NAME    integer frame [b]: keys j >= len are padding\n"
        "      --key-mask NAME   integer frame [n] or [b, n] beside K: 0 masks the key\n"
        "      --group NAME      integer frame [n] or [b, n]: rows attend within their\n"
        "                        group only (with --kv, FILE holds the keys' groups)\n\n"
        "Outputs:\n"
        "      --consensus       also \"consensus\" [n]: attention each row receives from\n"
        "                        the other rows, summed, averaged over heads (K rows = Q rows)\n"
        "      --weights-out     also \"attn\" [b, H, n, m], the weights: O(n^2) memory,\n"
        "                        small inputs only\n\n" TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-embed hyps.txt | tq-attend --self --heads 4 --consensus | tq-cat -t tsv\n"
        "  tq-attend --q q --kv kv.tq --heads 8 --causal < q.tq > out.tq\n"
        "  tq-attend --self --weights layer.tq --heads 8 --group doc < emb.tq > ctx.tq\n",
        stdout);
}

/* ------------------------------------------------------------ collecting */

/* All batches of one named frame, concatenated as f32 or i64. */
typedef struct col {
    const char *name;
    tq_dtype as;        /* f32 or i64 */
    int rank, seen;
    int64_t dims[TQ_MAX_RANK]; /* dims[0] summed over batches */
    void *data;
    size_t bytes, cap;
    tq_quant_side side; /* codes (tq-quantize): NAME_scale, NAME_ranges */
} col;

static tq_status col_add(col *c, tq_frame *f, const char *src)
{
    int want_float = c->as == TQ_DTYPE_F32;
    /* rows of codes (tq-quantize) read as their decoded values */
    int coded = want_float && !tq_dtype_is_float(f->dtype) && tq_quant_decodable(f);
    if (coded)
        ;
    else if (want_float ? !tq_dtype_is_float(f->dtype) : !tq_dtype_is_int(f->dtype))
        return tq_fail(TQ_ERR_DATA, "%s: frame \"%s\" must be %s, not %s", src, f->name,
                       want_float ? "a float tensor" : "an integer tensor",
                       tq_dtype_name(f->dtype));
    if (f->rank < 1)
        return tq_fail(TQ_ERR_DATA, "%s: frame \"%s\" has rank 0", src, f->name);
    if (want_float && f->rank > 1 && f->dims[0] > 0 && f->dims[f->rank - 1] == 0)
        return tq_fail(TQ_ERR_DATA, "%s: frame \"%s\": %lld rows of 0 values: nothing to attend with",
                       src, f->name, (long long)f->dims[0]);
    if (!c->seen) {
        c->rank = f->rank;
        memcpy(c->dims, f->dims, sizeof c->dims);
        c->dims[0] = 0;
        c->seen = 1;
    }
    const void *data = NULL;
    tq_status st = coded ? TQ_OK : tq_frame_data(f, &data);
    if (st)
        return st;
    size_t n = 1;
    for (int i = 0; i < f->rank; i++)
        n *= (size_t)f->dims[i];
    size_t add = n * 4 * (c->as == TQ_DTYPE_I64 ? 2 : 1);
    if (c->bytes + add > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->bytes + add)
            cap *= 2;
        void *p = realloc(c->data, cap);
        if (!p)
            return tq_fail(TQ_ERR_NOMEM, "out of memory reading \"%s\"", f->name);
        c->data = p;
        c->cap = cap;
    }
    void *dst = (char *)c->data + c->bytes;
    if (coded)
        st = tq_quant_side_decode(&c->side, f, dst);
    else
        st = tq_convert(c->as, dst, f->dtype, data, n, 0);
    if (st)
        return tq_fail_context(st, "%s", src);
    /* NaN and infinities refused here, on the host, before any device work
     * or output: every backend answers alike (tq-attend(1)) */
    const char *from = strcmp(src, "stdin") ? tq_took_label(src) : "standard input";
    if (want_float && (st = tq_attend_finite(f, data, dst, from, c->dims[0])))
        return st;
    c->bytes += add;
    c->dims[0] += f->dims[0];
    return TQ_OK;
}

/* A frame kept to be written later, in its place: its bytes as read. */
typedef struct event {
    tq_frame f;     /* header fields; priv_hdr and stored point at mem */
    void *mem;
    int64_t qrows;  /* is_q: rows of the Q batch, where "out" goes */
    int is_q;
} event;

typedef struct state {
    tq_tool *t;
    event *ev;
    size_t nev, cap;
} state;

static tq_status keep(state *s, const tq_frame *f, int is_q)
{
    if (s->nev == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        event *e = realloc(s->ev, cap * sizeof *e);
        if (!e)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        s->ev = e;
        s->cap = cap;
    }
    event *e = &s->ev[s->nev];
    memset(e, 0, sizeof *e);
    e->is_q = is_q;
    if (is_q) {
        e->qrows = f->dims[0];
        s->nev++;
        return TQ_OK;
    }
    e->f = *f;
    e->mem = malloc(f->priv_hdr_len + f->stored_size + 1);
    if (!e->mem)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    memcpy(e->mem, f->priv_hdr, f->priv_hdr_len);
    memcpy((char *)e->mem + f->priv_hdr_len, f->stored, f->stored_size);
    e->f.priv_hdr = e->mem;
    e->f.stored = (char *)e->mem + f->priv_hdr_len;
    e->f.meta = NULL; /* the writer emits the header bytes as they were */
    e->f.meta_len = 0;
    e->f.priv_raw = e->f.priv_buf = NULL;
    s->nev++;
    return TQ_OK;
}

/* Reads a stream into the collectors whose names match (each collector once,
 * though several options may name the same frame). Standard input
 * (keep_rest): batches of qname become Q events, frames of the names in
 * consumed are dropped, every other frame is kept to pass through. --kv:
 * nothing is kept. */
static tq_status read_stream(state *s, tq_reader *r, const char *label, col **cols, int ncols,
                             int keep_rest, const char *qname, const char *const *consumed,
                             int nconsumed)
{
    tq_status st;
    tq_frame *f;
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        for (int i = 0; i < ncols && !st; i++) {
            int dup = 0;
            for (int j = 0; j < i; j++)
                dup |= cols[j] == cols[i];
            if (cols[i] && !dup && !strcmp(f->name, cols[i]->name))
                st = col_add(cols[i], f, label);
            else if (cols[i] && !dup && cols[i]->as == TQ_DTYPE_F32 &&
                     tq_quant_side_of(f, cols[i]->name) &&
                     (st = tq_quant_side_keep(&cols[i]->side, f))) /* NAME_scale, NAME_ranges */
                st = tq_fail_context(st, "%s", label);
        }
        if (!st && keep_rest) {
            int drop = 0;
            for (int i = 0; i < nconsumed; i++)
                drop |= consumed[i] && !strcmp(f->name, consumed[i]);
            if (!strcmp(f->name, qname))
                st = keep(s, f, 1);
            else if (!drop)
                st = keep(s, f, 0);
        }
        if (st)
            break;
        tq_tool_progress(s->t, "%s: %llu frames", label, (unsigned long long)f->index + 1);
    }
    return st == TQ_EOF ? TQ_OK : st;
}

/* ------------------------------------------------------------ checks */

/* Sequences and length of a tensor collector: rank 2 [n, d] is one sequence
 * of n; rank 3 [b, n, d] is b of n. */
static tq_status seq_shape(const col *c, const char *what, int64_t *b, int64_t *n, int64_t *d)
{
    if (!c->seen)
        return tq_fail(TQ_ERR_DATA, "no frame \"%s\" (%s) in the input", c->name, what);
    if (c->rank != 2 && c->rank != 3)
        return tq_fail(TQ_ERR_DATA, "\"%s\" (%s) must be rank 2 [n, d] or 3 [b, n, d], not %d",
                       c->name, what, c->rank);
    *b = c->rank == 3 ? c->dims[0] : 1;
    *n = c->rank == 3 ? c->dims[1] : c->dims[0];
    *d = c->dims[c->rank - 1];
    return TQ_OK;
}

/* An integer collector with one value per row of b sequences of n. */
static tq_status per_row(const col *c, int64_t b, int64_t n, int rank3)
{
    if (!c->seen)
        return tq_fail(TQ_ERR_DATA, "no frame \"%s\" in the input", c->name);
    int64_t count = (int64_t)(c->bytes / 8);
    int ok = rank3 ? c->rank == 2 && c->dims[0] == b && c->dims[1] == n
                   : c->rank == 1 && c->dims[0] == n;
    if (!ok)
        return tq_fail(TQ_ERR_DATA, "\"%s\" must have one value per row: %s%lld%s, not %lld values",
                       c->name, rank3 ? "[" : "[", (long long)(rank3 ? b : n),
                       rank3 ? ", ...]" : "]", (long long)count);
    return TQ_OK;
}

/* ------------------------------------------------------------ what was taken */

static tq_took took_of(const col *c, const char *what, const char *from)
{
    tq_took k = {.what = what, .name = c->name, .from = from, .rank = c->rank};
    memcpy(k.dims, c->dims, sizeof k.dims);
    return k;
}

/* Under -v, Q, K and V with their shapes and inputs, one collector once:
 * "queries: frame "emb" [1 x 384] from standard input; keys and values:
 * frame "emb" [2 x 384] from kv.tq". */
static void say_took(tq_tool *t, const col *q, const col *k, const col *v, const char *qfrom,
                     const char *kfrom)
{
    const char *what = k == q ? (v == q ? "queries, keys and values" : "queries and keys")
                              : v == q ? "queries and values" : "queries";
    tq_took took[3] = {took_of(q, what, qfrom)};
    int n = 1;
    if (k != q)
        took[n++] = took_of(k, v == k ? "keys and values" : "keys", kfrom);
    if (v != q && v != k)
        took[n++] = took_of(v, "values", kfrom);
    tq_tool_took(t, took, n);
}

/* ------------------------------------------------------------ main */

static float float_arg(tq_tool *t, const char *opt, const char *arg)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(v) || v <= 0)
        tq_tool_usage(t, "%s wants a positive number, not '%s'", opt, arg);
    return (float)v;
}

static int count_arg(tq_tool *t, const char *opt, const char *arg, int hi)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 1 || v > hi)
        tq_tool_usage(t, "%s wants a number from 1 to %d, not '%s'", opt, hi, arg);
    return (int)v;
}

typedef struct opts {
    const char *q, *kv, *k, *v, *weights, *key_len, *key_mask, *group;
    int self, heads, causal, consensus, weights_out;
    float scale;
} opts;

static tq_status write_all(state *s, tq_writer *w, const opts *o, const tq_attend_job *j,
                           int rank3)
{
    int64_t row = 0; /* rows (sequences when rank 3) of Q written so far */
    int64_t per = rank3 ? j->Lq : 1;
    tq_status st = TQ_OK;
    for (size_t i = 0; i < s->nev && !st; i++) {
        event *e = &s->ev[i];
        if (!e->is_q) {
            st = tq_writer_put(w, &e->f);
            continue;
        }
        int64_t od[3] = {e->qrows, rank3 ? j->Lq : j->dout, j->dout}, cd[2] = {e->qrows, j->Lk};
        size_t n = (size_t)(e->qrows * per * j->dout);
        st = tq_writer_write(w, "out", TQ_DTYPE_F32, rank3 ? 3 : 2, od, NULL, 0,
                             j->out + row * per * j->dout, n * 4);
        if (!st && o->consensus)
            st = tq_writer_write(w, "consensus", TQ_DTYPE_F32, rank3 ? 2 : 1, cd, NULL, 0,
                                 j->received + row * per, (size_t)(e->qrows * per) * 4);
        row += e->qrows;
    }
    if (!st && o->weights_out) {
        int64_t wd[4] = {j->B, j->heads, j->Lq, j->Lk};
        st = tq_writer_write(w, "attn", TQ_DTYPE_F32, 4, wd, NULL, 0, j->weights,
                             (uint64_t)(j->B * j->heads * j->Lq * j->Lk) * 4);
    }
    return st;
}

/* The getopt loop into o, and the check that no file is named. */
static void parse_args(tq_tool *t, int argc, char **argv, opts *o)
{
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"q", required_argument, NULL, OPT_Q},
        {"kv", required_argument, NULL, OPT_KV},
        {"k", required_argument, NULL, OPT_K},
        {"v", required_argument, NULL, OPT_V},
        {"self", no_argument, NULL, OPT_SELF},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"weights", required_argument, NULL, OPT_WEIGHTS},
        {"causal", no_argument, NULL, OPT_CAUSAL},
        {"scale", required_argument, NULL, OPT_SCALE},
        {"key-len", required_argument, NULL, OPT_KEY_LEN},
        {"key-mask", required_argument, NULL, OPT_KEY_MASK},
        {"group", required_argument, NULL, OPT_GROUP},
        {"consensus", no_argument, NULL, OPT_CONSENSUS},
        {"weights-out", no_argument, NULL, OPT_WEIGHTS_OUT},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int c;
    while ((c = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS, longopts)) != -1) {
        if (tq_tool_option(t, c, optarg, help))
            continue;
        switch (c) {
        case OPT_Q: o->q = optarg; break;
        case OPT_KV: o->kv = optarg; break;
        case OPT_K: o->k = optarg; break;
        case OPT_V: o->v = optarg; break;
        case OPT_SELF: o->self = 1; break;
        case OPT_HEADS: o->heads = count_arg(t, "--heads", optarg, 65536); break;
        case OPT_WEIGHTS: o->weights = optarg; break;
        case OPT_CAUSAL: o->causal = 1; break;
        case OPT_SCALE: o->scale = float_arg(t, "--scale", optarg); break;
        case OPT_KEY_LEN: o->key_len = optarg; break;
        case OPT_KEY_MASK: o->key_mask = optarg; break;
        case OPT_GROUP: o->group = optarg; break;
        case OPT_CONSENSUS: o->consensus = 1; break;
        case OPT_WEIGHTS_OUT: o->weights_out = 1; break;
        default: tq_tool_usage(t, "unknown option");
        }
    }
    if (optind < argc)
        tq_tool_usage(t, "no file arguments: Q comes from standard input ('%s')", argv[optind]);
}

/* With --kv: 1 when the queries' stream is empty (its empty output written). */
static int no_queries(tq_tool *t, tq_reader *in)
{
    tq_status st;
    /* queries against keys of their own, as tq-simmat --db and tq-score:
     * an empty stream of queries (no frame at all) asks nothing, and gets
     * nothing, exit 0 */
    char names[64];
    size_t nf;
    if ((st = tq_tool_frame_names(in, names, sizeof names, &nf)))
        tq_tool_fail(t, st);
    if (!nf) {
        tq_writer *wr;
        if ((st = tq_tool_open_output(t, &wr)) || (st = tq_writer_close(wr, 1)))
            tq_tool_fail(t, st);
        return 1;
    }
    return 0;
}

/* The shapes of Q, K and V checked against each other (and --weights, and
 * --consensus), said, and set in j with the options of the run. */
static void fill_job(tq_tool *t, const opts *o, tq_attend_weights *w, col *cq, col *pk, col *pv,
                     tq_attend_job *j)
{
    tq_status st;
    int64_t bk, bv, lv;
    if ((st = seq_shape(cq, "queries", &j->B, &j->Lq, &j->dq)) ||
        (st = seq_shape(pk, "keys", &bk, &j->Lk, &j->dk)) ||
        (st = seq_shape(pv, "values", &bv, &lv, &j->dv)))
        tq_tool_fail(t, st);
    const char *qfrom = "standard input", *kfrom = o->kv ? tq_took_label(o->kv) : qfrom;
    tq_took took_q = took_of(cq, "queries", qfrom), took_k = took_of(pk, "keys", kfrom),
            took_v = took_of(pv, "values", kfrom);
    if (pk->rank != cq->rank || pv->rank != cq->rank || bk != j->B || bv != j->B) {
        char a[400], b[400], c3[400];
        tq_took_say(&took_q, a, sizeof a), tq_took_say(&took_k, b, sizeof b);
        tq_took_say(&took_v, c3, sizeof c3);
        tq_tool_fail(t, tq_fail(TQ_ERR_DATA, "the queries, keys and values differ in rank or "
                                              "sequence count: %s; %s; %s", a, b, c3));
    }
    say_took(t, cq, pk, pv, qfrom, kfrom);
    if (!o->weights && (st = tq_took_same_width(&took_q, &took_k)))
        tq_tool_fail(t, st);
    if (lv != j->Lk)
        tq_tool_fail(t, tq_fail(TQ_ERR_DATA, "\"%s\" has %lld rows, \"%s\" %lld", pk->name,
                                 (long long)j->Lk, pv->name, (long long)lv));
    if (o->consensus && j->Lk != j->Lq)
        tq_tool_fail(t, tq_fail(TQ_ERR_DATA, "--consensus needs keys that are the query rows "
                                              "(%lld keys, %lld queries)",
                                 (long long)j->Lk, (long long)j->Lq));
    j->q = cq->data, j->k = pk->data, j->v = pv->data;
    j->w = o->weights ? w : NULL;
    if (o->weights && (w->in[0] != j->dq || w->in[1] != j->dk || w->in[2] != j->dv))
        tq_tool_fail(t, tq_fail(TQ_ERR_DATA, "--weights %s: wq, wk, wv take widths %lld, %lld, "
                                              "%lld; the queries (%s), keys and values (%s) "
                                              "have %lld, %lld, %lld",
                                 o->weights, (long long)w->in[0], (long long)w->in[1],
                                 (long long)w->in[2], qfrom, kfrom, (long long)j->dq,
                                 (long long)j->dk, (long long)j->dv));
    j->heads = o->heads, j->causal = o->causal, j->scale = o->scale;
    j->want_received = o->consensus, j->want_weights = o->weights_out;
}

/* --key-len, and --group and --key-mask as the groups of the queries and keys
 * in j (held in *qg_out and *kg_out for the caller to free). */
static void set_groups(tq_tool *t, const opts *o, col *cg, col *ckg, col *cmask, col *clen,
                       tq_attend_job *j, int rank3, int64_t **qg_out, int64_t **kg_out)
{
    tq_status st;
    int64_t *qg = NULL, *kg = NULL;
    if (o->key_len) {
        if (!clen->seen || clen->rank != 1 || clen->dims[0] != j->B)
            tq_tool_fail(t, tq_fail(TQ_ERR_DATA, "\"%s\" must hold one length per sequence "
                                                  "(%lld)", o->key_len, (long long)j->B));
        j->key_len = clen->data;
    }
    if (o->group || o->key_mask) {
        /* key masks ride on the groups: a masked key's group matches no query */
        const int64_t *ug = NULL, *ukg = NULL;
        if (o->group) {
            col *kgc = o->kv ? ckg : cg;
            if ((st = per_row(cg, j->B, j->Lq, rank3)) || (st = per_row(kgc, j->B, j->Lk, rank3)))
                tq_tool_fail(t, st);
            ug = cg->data;
            ukg = kgc->data;
        }
        if (o->key_mask && (st = per_row(cmask, j->B, j->Lk, rank3)))
            tq_tool_fail(t, st);
        qg = malloc((size_t)(j->B * j->Lq) * 8 + 8);
        kg = malloc((size_t)(j->B * j->Lk) * 8 + 8);
        if (!qg || !kg) {
            free(qg), free(kg); /* the one that came is held by no live variable */
            tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
        }
        for (int64_t i = 0; i < j->B * j->Lq; i++) {
            qg[i] = ug ? ug[i] : 0;
            if (qg[i] == INT64_MIN)
                tq_tool_fail(t, tq_fail(TQ_ERR_DATA, "\"%s\": group -2^63 is reserved", o->group));
        }
        const int64_t *mk = cmask->data;
        for (int64_t i = 0; i < j->B * j->Lk; i++)
            kg[i] = mk && mk[i] == 0 ? INT64_MIN : ukg ? ukg[i] : 0;
        j->qgroup = qg, j->kgroup = kg;
        *qg_out = qg, *kg_out = kg;
    }
}

/* The work, for auto (tq(7)): each query value against the keys' length (of
 * the first key frame: --kv FILE's, else the queries'); -1 when not known. */
static double attend_work(tq_tool *t, const char *kv)
{
    tq_census q, k;
    int a = tq_tool_census(t, "-", &q), b = kv ? tq_tool_census(t, kv, &k) : a;
    if (a > 0 || b > 0)
        return TQ_WORK_LARGE;
    return a || b ? -1 : tq_work_attend(q.elems, kv ? k.rows : q.rows);
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-attend");
    opts o = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 1, 0, 0, 0, 0.0f};
    parse_args(&t, argc, argv, &o);
    tq_tool_ready(&t); /* --list-devices needs no --self or --kv */
    if (!o.self == !o.kv)
        tq_tool_usage(&t, "give exactly one of --self and --kv FILE");
    if (o.key_len && o.key_mask)
        tq_tool_usage(&t, "--key-len and --key-mask exclude each other");

    tq_attend_weights w;
    memset(&w, 0, sizeof w);
    tq_device *dev = NULL;
    tq_status st = tq_tool_device_open(&t, attend_work(&t, o.kv), &dev);
    if (!st && o.weights)
        st = tq_attend_weights_load(o.weights, &w);
    if (st)
        tq_tool_fail(&t, st);
    /* which frames: tq(7)'s one rule, Q from standard input, K and V from
     * --kv FILE (with --self they are Q unless named) */
    tq_reader *in = NULL, *kvr = NULL;
    if ((st = tq_reader_open_path(&in, "-")) || (o.kv && (st = tq_reader_open_path(&kvr, o.kv))))
        tq_tool_fail(&t, st);
    if (o.kv && no_queries(&t, in)) {
        tq_reader_close(in), tq_reader_close(kvr);
        tq_attend_weights_free(&w);
        tq_device_close(dev);
        return 0;
    }
#define SEQ_PICK(WHAT, OPT, GIVEN, DEF)                                                  \
    {.what = WHAT, .option = OPT, .given = GIVEN, .def = DEF, .rank_lo = 2, .rank_hi = 3,      \
     .kind = tq_dtype_is_float, .codes = 1, .fits = "rank 2 or 3 float or code"}
    tq_pick pq = SEQ_PICK("queries", "--q", o.q, "emb");
    tq_tool_pick(&t, in, NULL, NULL, &pq);
    o.q = pq.name[0] ? pq.name : "emb";
    tq_pick pk_ = SEQ_PICK("keys", "--k", o.k, "k"), pv_ = SEQ_PICK("values", "--v", o.v, "v");
    if (o.kv) {
        tq_tool_pick(&t, kvr, NULL, NULL, &pk_);
        tq_tool_pick(&t, kvr, NULL, NULL, &pv_);
    }
    const char *kname = o.k ? o.k : o.self ? o.q : pk_.name[0] ? pk_.name : "k";
    const char *vname = o.v ? o.v : o.self ? (o.k ? o.k : o.q) : pv_.name[0] ? pv_.name : "v";
    col cq = {.name = o.q, .as = TQ_DTYPE_F32}, ck = {.name = kname, .as = TQ_DTYPE_F32},
        cv = {.name = vname, .as = TQ_DTYPE_F32};
    tq_quant_side_init(&cq.side), tq_quant_side_init(&ck.side), tq_quant_side_init(&cv.side);
    col cg = {.name = o.group, .as = TQ_DTYPE_I64}, ckg = {.name = o.group, .as = TQ_DTYPE_I64};
    col clen = {.name = o.key_len, .as = TQ_DTYPE_I64}, cmask = {.name = o.key_mask, .as = TQ_DTYPE_I64};
    /* each input's frames from that input only: with --kv, K and V never
     * share Q's collector, whatever their names */
    col *pk = !o.kv && !strcmp(kname, o.q) ? &cq : &ck;
    col *pv = !o.kv && !strcmp(vname, o.q) ? &cq : !strcmp(vname, kname) ? pk : &cv;
    state s = {&t, NULL, 0, 0};
    double t0 = tq_tool_now();
    /* K's side (K, V, its groups and mask) from --kv FILE or standard input;
     * the key length, one per sequence, always from standard input */
    if (o.kv) {
        col *kvcols[] = {pk, pv, o.group ? &ckg : NULL, o.key_mask ? &cmask : NULL};
        st = read_stream(&s, kvr, o.kv, kvcols, 4, 0, NULL, NULL, 0);
        col *incols[] = {&cq, o.group ? &cg : NULL, o.key_len ? &clen : NULL};
        if (!st)
            st = read_stream(&s, in, "stdin", incols, 3, 1, o.q, NULL, 0);
    } else {
        col *incols[] = {&cq, pk, pv, o.group ? &cg : NULL, o.key_len ? &clen : NULL,
                         o.key_mask ? &cmask : NULL};
        const char *consumed[] = {kname, vname};
        st = read_stream(&s, in, "stdin", incols, 6, 1, o.q, consumed, 2);
    }
    tq_reader_close(in);
    tq_reader_close(kvr);
    if (st)
        tq_tool_fail(&t, st);

    tq_attend_job j;
    memset(&j, 0, sizeof j);
    fill_job(&t, &o, &w, &cq, pk, pv, &j);
    int rank3 = cq.rank == 3;
    int64_t *qg = NULL, *kg = NULL;
    set_groups(&t, &o, &cg, &ckg, &cmask, &clen, &j, rank3, &qg, &kg);
    tq_tool_log(&t, TQ_LOG_INFO, "%lld sequence%s, %lld queries, %lld keys, %d heads, device %s",
                (long long)j.B, j.B == 1 ? "" : "s", (long long)j.Lq, (long long)j.Lk, o.heads,
                tq_device_name(dev));
    st = tq_attend_run(dev, &j);
    /* the inputs are no longer needed: free them before writing */
    free(cq.data), free(ck.data), free(cv.data), free(cg.data), free(ckg.data);
    tq_quant_side_free(&cq.side), tq_quant_side_free(&ck.side), tq_quant_side_free(&cv.side);
    free(clen.data), free(cmask.data), free(qg), free(kg);
    tq_writer *wr = NULL;
    if (!st)
        st = tq_tool_open_output(&t, &wr);
    if (!st)
        st = write_all(&s, wr, &o, &j, rank3);
    tq_tool_progress_done(&t);
    tq_status cst = wr ? tq_writer_close(wr, !st) : TQ_OK;
    if (!st && !cst)
        tq_tool_log(&t, TQ_LOG_INFO, "done in %.3f s", tq_tool_now() - t0);
    for (size_t i = 0; i < s.nev; i++)
        free(s.ev[i].mem);
    free(s.ev);
    free(j.out), free(j.received), free(j.weights);
    tq_attend_weights_free(&w);
    tq_tool_device_done(&t, dev);
    tq_device_close(dev);
    if (st)
        tq_tool_fail(&t, st);
    if (cst)
        tq_tool_fail(&t, cst);
    return 0;
}
