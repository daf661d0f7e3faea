/* tq-score: ranks candidate vectors within groups by a weighted sum of
 * features (cosine to a query, consensus, a trained model, input columns).
 * Options and files here; the scoring and the stream handling in lib/score. */
#include "tool/tool.h"
#include "score/score.h"
#include "embed/cross.h"
#include "embed/text_input.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_QUERY = TQ_OPT_TOOL_BASE,
    OPT_CONSENSUS,
    OPT_FEATURE,
    OPT_WEIGHTS,
    OPT_TOP,
    OPT_SORT,
    OPT_EMB,
    OPT_GROUP,
    OPT_BATCH,
    OPT_CROSS,
    OPT_LABEL,
    OPT_TEXTS,
    OPT_QUERY_TEXTS,
    OPT_PRECISION,
};

static void help(void)
{
    fputs(
        "Usage: tq-score [OPTION]... [FILE]...\n"
        "Score candidate vectors (frame \"emb\" [n, d]) by a weighted sum of features and\n"
        "rank them within groups (frame \"group\", integer ids in contiguous runs; without\n"
        "it, all rows are one group). Adds \"score\" (f32) and \"rank\" (i64, 1 = best)\n"
        "to the rows; frames with the rows of \"emb\" (key, ...) stay aligned with them.\n\n"
        "Features (at least one; summed in this order, whatever the order given):\n"
        "      --query FILE      cosine similarity to the \"emb\" row of FILE: one row for\n"
        "                        all, or one per group with a \"group\" frame in FILE\n"
        "      --consensus       mean cosine similarity to the other rows of the group\n"
        "                        (0 for a group of one)\n"
        "  -m, --model FILE      the output of a model written by tq-train (linear,\n"
        "                        logistic, softmax or mlp; see tq-score(1) for the format)\n"
        "      --feature NAME    the input frame NAME, one number a row (repeatable)\n"
        "      --weights LIST    one weight per feature, comma-separated (default: all 1)\n"
        "      --precision P     a model of i8 weights (tq-quantize): auto (int8 products\n"
        "                        where the CPU has int8 instructions, else the weights\n"
        "                        decoded to f32; the default), int8 or f32\n\n"
        "Reranking text pairs (instead of the features and of streams):\n"
        "      --cross-encoder DIR  score each line QID<TAB>QUERY<TAB>DOCID<TAB>TEXT of\n"
        "                        FILE by a cross-encoder model folder (BERT, RoBERTa,\n"
        "                        XLM-RoBERTa or MPNet ...ForSequenceClassification) and\n"
        "                        rank each run of one QID: frames \"group\", \"key\" (str),\n"
        "                        \"score\", \"rank\"\n"
        "      --texts FILE      instead, read tq-simmat --topk lists (with keys): each\n"
        "                        query a group of its candidates, their texts the lines\n"
        "                        ID<TAB>TEXT of FILE by db_key\n"
        "      --query-texts FILE  with --texts: the queries' texts by their key\n"
        "      --label N         the model's output to rank by (default: 0; needed\n"
        "                        when it has more than one)\n\n"
        "Output:\n"
        "      --top N           keep the N best rows of each group (default: all)\n"
        "      --sort            rows by rank within each group (default: input order)\n"
        "      --batch N         rows per output frame at most (default: 4096)\n"
        "      --emb NAME        the candidates' frame (default: emb, else the one rank 2\n"
        "                        float frame; in --query FILE likewise; see tq(7))\n"
        "      --group NAME      the group ids' frame (default: group)\n\n" TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-score --query ref.tq --consensus --weights 0.7,0.3 --top 1 hyps.tq | tq-cat -t tsv\n"
        "  tq-embed --tsv cands.tsv | tq-score -m scorer.tq --sort -o ranked.tq\n"
        "  tq-score --consensus --feature logprob --weights 1,0.1 --top 5 < nbest.tq > best.tq\n"
        "  tq-score --cross-encoder ms-marco-MiniLM-L-6-v2 --top 3 --sort pairs.tsv | tq-cat -t tsv\n",
        stdout);
}

static int parse_weights(tq_tool *t, const char *arg, double *w)
{
    int n = 0;
    const char *p = arg;
    for (;;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (errno || end == p || !isfinite(v) || (*end && *end != ','))
            tq_tool_usage(t, "--weights wants finite numbers separated by commas, not '%s'", arg);
        if (n == TQ_SCORE_MAX_FEATURES)
            tq_tool_usage(t, "--weights: more than %d values", TQ_SCORE_MAX_FEATURES);
        w[n++] = v;
        if (!*end)
            return n;
        p = end + 1;
    }
}

/* The weights of a model file: the elements of its w frames (codes hold
 * several a byte); its bytes / 4 when it cannot be read here. */
static double model_weights(const char *path, double dflt)
{
    tq_reader *r;
    if (tq_reader_open_path(&r, path))
        return dflt;
    double n = 0;
    tq_frame *f;
    while (tq_reader_next(r, &f) == TQ_OK)
        if (f->name[0] == 'w' && !strchr(f->name, '_')) {
            double e = 1;
            for (int i = 0; i < f->rank; i++)
                e *= (double)f->dims[i];
            n += e;
        }
    tq_reader_close(r);
    return n > 0 ? n : dflt;
}

/* The work, for auto (tq(7)): the candidates' values, and a model's weights
 * (the elements of its w frames) for each row; -1 when not known, huge for a long pipe. */
static double score_work(tq_tool *t, char **files, int n, const char *model)
{
    double elems = 0, d = 0, weights = 0;
    struct stat sb;
    for (int i = 0; i < (n ? n : 1); i++) {
        tq_census c;
        int k = tq_tool_census(t, n ? files[i] : "-", &c);
        if (k)
            return k > 0 ? TQ_WORK_LARGE : -1;
        elems += c.elems;
        d = d ? d : c.cols;
    }
    if (model && !stat(model, &sb))
        /* a regular file only: a pipe read here would be gone for the load */
        weights = S_ISREG(sb.st_mode) ? model_weights(model, (double)sb.st_size / 4)
                                      : (double)sb.st_size / 4;
    return tq_work_score(elems, d, weights);
}

/* Opens the inputs into one reader, every file before any output. */
static tq_status open_inputs(char **files, int n, tq_reader **r)
{
    tq_status st = tq_reader_open_path(r, n ? files[0] : "-");
    for (int i = 1; i < n && !st; i++) {
        int fd = strcmp(files[i], "-") ? open(files[i], O_RDONLY | O_CLOEXEC) : 0;
        if (fd < 0)
            st = tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", files[i], strerror(errno));
        else
            st = tq_reader_chain_fd(*r, fd, files[i]);
    }
    return st;
}

/* What the command line asks for: the features, their weights, the run's options. */
struct args {
    const char *query_path, *model_path, *cross_path, *texts, *query_texts;
    tq_score_prec prec;
    int64_t label;
    int label_given;
    const char *extra[TQ_SCORE_MAX_FEATURES];
    double weights[TQ_SCORE_MAX_FEATURES];
    int nweights;
    char meta[4096];
    tq_score_run_opts o;
};

/* The getopt loop and the usage checks right after it. */
static void parse_args(tq_tool *t, int argc, char **argv, struct args *a)
{
    a->query_path = NULL;
    a->model_path = NULL;
    a->cross_path = a->texts = a->query_texts = NULL;
    a->label = 0;
    a->label_given = 0;
    a->prec = TQ_SCORE_PREC_AUTO;
    a->nweights = -1;
    a->o = (tq_score_run_opts){.emb = NULL, .group = "group", .extra = a->extra, .batch = 4096};
    tq_score_run_opts *o = &a->o;
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"model", required_argument, NULL, 'm'},
        {"query", required_argument, NULL, OPT_QUERY},
        {"consensus", no_argument, NULL, OPT_CONSENSUS},
        {"feature", required_argument, NULL, OPT_FEATURE},
        {"weights", required_argument, NULL, OPT_WEIGHTS},
        {"top", required_argument, NULL, OPT_TOP},
        {"sort", no_argument, NULL, OPT_SORT},
        {"emb", required_argument, NULL, OPT_EMB},
        {"group", required_argument, NULL, OPT_GROUP},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"cross-encoder", required_argument, NULL, OPT_CROSS},
        {"label", required_argument, NULL, OPT_LABEL},
        {"texts", required_argument, NULL, OPT_TEXTS},
        {"query-texts", required_argument, NULL, OPT_QUERY_TEXTS},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS "m:", longopts)) != -1) {
        if (tq_tool_option(t, opt, optarg, help))
            continue;
        switch (opt) {
        case 'm':
            a->model_path = optarg;
            break;
        case OPT_QUERY:
            a->query_path = optarg;
            break;
        case OPT_CONSENSUS:
            o->cfg.consensus = 1;
            break;
        case OPT_FEATURE:
            if (o->cfg.nextra == TQ_SCORE_MAX_FEATURES - 3)
                tq_tool_usage(t, "--feature: at most %d", TQ_SCORE_MAX_FEATURES - 3);
            if (!*optarg)
                tq_tool_usage(t, "--feature wants a frame name");
            a->extra[o->cfg.nextra++] = optarg;
            break;
        case OPT_WEIGHTS:
            a->nweights = parse_weights(t, optarg, a->weights);
            break;
        case OPT_TOP:
            o->top = tq_tool_int_arg(t, "--top", optarg, 1, INT64_MAX);
            break;
        case OPT_SORT:
            o->sort = 1;
            break;
        case OPT_EMB:
            o->emb = optarg;
            break;
        case OPT_GROUP:
            o->group = optarg;
            break;
        case OPT_BATCH:
            o->batch = tq_tool_int_arg(t, "--batch", optarg, 1, 1 << 24);
            break;
        case OPT_CROSS:
            a->cross_path = optarg;
            break;
        case OPT_TEXTS:
            a->texts = optarg;
            break;
        case OPT_QUERY_TEXTS:
            a->query_texts = optarg;
            break;
        case OPT_LABEL:
            a->label = tq_tool_int_arg(t, "--label", optarg, 0, 100000);
            a->label_given = 1;
            break;
        case OPT_PRECISION:
            if (!strcmp(optarg, "auto"))
                a->prec = TQ_SCORE_PREC_AUTO;
            else if (!strcmp(optarg, "f32"))
                a->prec = TQ_SCORE_PREC_F32;
            else if (!strcmp(optarg, "int8"))
                a->prec = TQ_SCORE_PREC_INT8;
            else
                tq_tool_usage(t, "--precision wants auto, f32 or int8, not '%s'", optarg);
            break;
        default:
            tq_tool_usage(t, "unknown option");
        }
    }
    tq_tool_ready(t); /* --list-devices needs no feature */
    if ((o->emb && !*o->emb) || !*o->group)
        tq_tool_usage(t, "--emb and --group want a frame name");
    if (a->cross_path && (a->query_path || a->model_path || o->cfg.consensus || o->cfg.nextra ||
                          a->nweights >= 0))
        tq_tool_usage(t, "--cross-encoder scores text pairs by itself: no --query, "
                         "--consensus, -m, --feature or --weights with it");
    if (a->prec != TQ_SCORE_PREC_AUTO && !a->model_path)
        tq_tool_usage(t, "--precision goes with -m");
    if ((a->label_given || a->texts || a->query_texts) && !a->cross_path)
        tq_tool_usage(t, "--label, --texts and --query-texts go with --cross-encoder");
    if (!a->texts != !a->query_texts)
        tq_tool_usage(t, "--texts and --query-texts go together");
}

/* The features and their weights into the run's config and its "features=...\0weights=..." meta. */
static void set_features(tq_tool *t, struct args *a)
{
    tq_score_run_opts *o = &a->o;
    /* the features in the order the weights take them */
    const char *names[TQ_SCORE_MAX_FEATURES];
    int nf = 0;
    if (a->query_path)
        names[nf++] = "query";
    if (o->cfg.consensus)
        names[nf++] = "consensus";
    if (a->model_path)
        names[nf++] = "model";
    for (int j = 0; j < o->cfg.nextra; j++)
        names[nf++] = a->extra[j];
    if (!nf)
        tq_tool_usage(t, "nothing to score by: give --query, --consensus, -m or --feature");
    int nweights = a->nweights;
    if (nweights >= 0 && nweights != nf)
        tq_tool_usage(t, "--weights has %d value%s for %d feature%s (query, consensus, model, "
                         "then each --feature, as given)",
                      nweights, nweights == 1 ? "" : "s", nf, nf == 1 ? "" : "s");
    o->cfg.nweights = nf;
    for (int j = 0; j < nf; j++)
        o->cfg.weights[j] = nweights >= 0 ? a->weights[j] : 1.0;

    char *meta = a->meta;
    int ml = snprintf(meta, sizeof a->meta, "features=");
    for (int j = 0; j < nf && ml < (int)sizeof a->meta; j++)
        ml += snprintf(meta + ml, sizeof a->meta - (size_t)ml, "%s%s", j ? "," : "", names[j]);
    if (ml < (int)sizeof a->meta)
        ml += 1 + snprintf(meta + ml + 1, sizeof a->meta - (size_t)ml - 1, "weights=");
    for (int j = 0; j < nf && ml < (int)sizeof a->meta; j++)
        ml += snprintf(meta + ml, sizeof a->meta - (size_t)ml, "%s%.17g", j ? "," : "",
                       o->cfg.weights[j]);
    if (ml >= (int)sizeof a->meta)
        tq_tool_usage(t, "too many --feature names");
    o->meta = meta;
    o->meta_len = (size_t)ml + 1;
}

/* --cross-encoder: text pairs in, the model's scores and ranks out */
static int rerank(tq_tool *t, struct args *a, char **files, int nfiles)
{
    static char *stdin_only[] = {"-"};
    if (!nfiles)
        files = stdin_only, nfiles = 1;
    const char *texts[2] = {a->texts, a->query_texts};
    for (int i = 0; i < nfiles + 2; i++) { /* every input must open before any output */
        const char *p = i < nfiles ? files[i] : texts[i - nfiles];
        tq_lines *r;
        tq_status ost = p && strcmp(p, "-") ? tq_lines_open(&r, p, 1) : TQ_OK;
        if (ost)
            tq_tool_fail(t, ost);
        if (p && strcmp(p, "-"))
            tq_lines_close(r);
    }
    tq_reader *rd = NULL;
    tq_status rst = a->texts ? open_inputs(files, nfiles, &rd) : TQ_OK;
    if (rst)
        tq_tool_fail(t, rst);
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/model.safetensors", a->cross_path);
    double weights = stat(path, &sb) ? 0 : (double)sb.st_size / 4, bytes = 0;
    for (int i = 0; i < nfiles && bytes >= 0; i++) {
        double f = tq_tool_bytes(t, files[i]);
        bytes = f < 0 ? f : bytes + f;
    }
    tq_device *dev = NULL;
    tq_cross *ce = NULL;
    tq_writer *w = NULL;
    tq_status st = tq_tool_device_open(t, bytes < 0 ? bytes : tq_work_embed(weights, 2 * bytes),
                                       &dev);
    if (!st)
        st = tq_cross_open(a->cross_path, dev, &ce);
    if (!st && a->label >= tq_cross_labels(ce))
        st = tq_fail(TQ_ERR_USAGE, "--label %lld: the model has %lld output%s", (long long)a->label,
                     (long long)tq_cross_labels(ce), tq_cross_labels(ce) == 1 ? "" : "s");
    if (!st && !a->label_given && tq_cross_labels(ce) > 1)
        st = tq_fail(TQ_ERR_USAGE, "%s has %lld outputs: say which one ranks with --label",
                     a->cross_path, (long long)tq_cross_labels(ce));
    if (st) {
        tq_cross_close(ce);
        tq_tool_fail(t, st);
    }
    tq_tool_log(t, TQ_LOG_INFO, "model %s, window %d tokens, device %s, threads %d",
                tq_cross_describe(ce), tq_cross_window(ce), tq_device_name(dev),
                tq_threads_get());
    snprintf(a->meta, sizeof a->meta, "features=cross-encoder");
    tq_score_pairs_opts po = {ce, a->label, a->o.top, a->o.sort, a->o.batch, 1 << 20, a->meta,
                              strlen(a->meta) + 1};
    tq_score_pairs_stats s;
    double t0 = tq_tool_now();
    if (!(st = tq_tool_open_output(t, &w)))
        st = rd ? tq_score_lists(&po, rd, a->query_texts, a->texts, w, &s)
                : tq_score_pairs(&po, (const char *const *)files, nfiles, w, &s);
    tq_status cst = w ? tq_writer_close(w, !st) : TQ_OK;
    st = st ? st : cst;
    if (!st)
        tq_tool_log(t, TQ_LOG_INFO,
                    "%lld pairs in %lld groups, %lld rows out, %lld pairs longer than the "
                    "window cut to it, %.3f s",
                    (long long)s.rows_in, (long long)s.groups, (long long)s.rows_out,
                    (long long)s.cut, tq_tool_now() - t0);
    tq_cross_close(ce);
    tq_reader_close(rd);
    tq_tool_device_done(t, dev);
    tq_device_close(dev);
    if (st)
        tq_tool_fail(t, st);
    return 0;
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-score");
    struct args a;
    parse_args(&t, argc, argv, &a);
    if (a.cross_path)
        return rerank(&t, &a, argv + optind, argc - optind);
    set_features(&t, &a);
    tq_score_run_opts o = a.o;
    const char *query_path = a.query_path, *model_path = a.model_path;
    const char *meta = a.meta;

    tq_device *dev = NULL;
    tq_score_query *query = NULL;
    tq_score_model *model = NULL;
    tq_reader *r = NULL;
    tq_writer *w = NULL;
    tq_status st = tq_tool_device_open(&t, score_work(&t, argv + optind, argc - optind, model_path),
                                       &dev);
    if (!st)
        st = open_inputs(argv + optind, argc - optind, &r);
    if (st)
        tq_tool_fail(&t, st);
    /* which frames: tq(7)'s one rule, in the input and in --query FILE */
#define EMB_PICK(WHAT, DEF)                                                                   \
    {.what = WHAT, .option = "--emb", .given = emb_given, .def = DEF, .rank_lo = 2,           \
     .rank_hi = 2,                                                                            \
     .kind = tq_dtype_is_float, .codes = 1, .fits = "rank 2 float or code"}
    const char *emb_given = o.emb;
    tq_pick pe = EMB_PICK("candidates", "emb");
    tq_tool_pick(&t, r, NULL, NULL, &pe);
    o.emb = pe.name[0] ? pe.name : "emb";
    /* each input's frames from that input: the candidates from the input,
     * the query from --query FILE, whatever their names */
    char in_label[512];
    int nin = argc - optind;
    snprintf(in_label, sizeof in_label, "%s", tq_took_label(nin ? argv[optind] : "-"));
    for (int i = 1; i < nin; i++) { /* the chained inputs, as one */
        size_t len = strlen(in_label);
        snprintf(in_label + len, sizeof in_label - len, " + %s", tq_took_label(argv[optind + i]));
    }
    o.in_label = in_label;
    tq_pick pqe = EMB_PICK("query", o.emb);
    if (query_path) {
        tq_tool_pick(&t, NULL, query_path, query_path, &pqe);
        o.query_emb = pqe.name[0] ? pqe.name : o.emb;
        st = tq_score_query_load(query_path, o.query_emb, o.group, dev, &query);
    }
    if (!st && model_path)
        st = tq_score_model_load_prec(model_path, dev, a.prec, &model);
    if (st)
        tq_tool_fail(&t, st);
    o.cfg.dev = dev;
    o.cfg.query = query;
    o.cfg.model = model;
    o.query_path = query_path;
    o.model_path = model_path;
    tq_tool_log(&t, TQ_LOG_INFO, "features %s; weights %s; device %s, threads %d", meta + 9,
                meta + strlen(meta) + 1 + 8, tq_device_name(dev), tq_threads_get());
    if (model)
        tq_tool_log(&t, TQ_LOG_INFO, "model %s", tq_score_model_describe(model));
    double t0 = tq_tool_now();
    char frames[200];
    size_t nframes;
    if ((st = tq_tool_frame_names(r, frames, sizeof frames, &nframes)))
        tq_tool_fail(&t, st);
    if ((st = tq_tool_open_output(&t, &w)))
        tq_tool_fail(&t, st);
    tq_score_stats stats;
    st = tq_score_run(&o, r, w, &stats);
    /* as tq-simmat: an empty stream has nothing to score (exit 0), frames
     * without candidates are an error, never the input passed back */
    if (!st && !stats.d && nframes && emb_given)
        st = tq_fail(TQ_ERR_DATA, "no candidates in %s: no frame \"%s\" among its frames (%s): "
                                  "give vectors (tq-embed, tq-quantize) or name their frame with "
                                  "--emb", in_label, o.emb, frames);
    else if (!st && !stats.d && nframes)
        st = tq_fail(TQ_ERR_DATA, "no candidates in %s: none of its frames (%s) is a rank 2 "
                                  "float or code frame (as tq-embed or tq-quantize writes them)",
                     in_label, frames);
    tq_status cst = tq_writer_close(w, !st);
    if (!st)
        st = cst;
    if (!st) {
        tq_took took[2] = {
            {.what = "candidates", .name = o.emb, .from = in_label, .rank = stats.d ? 2 : 0,
             .dims = {stats.rows_in, stats.d}},
            {.what = "query", .name = o.query_emb, .from = query_path, .rank = query ? 2 : 0,
             .dims = {query ? tq_score_query_rows(query) : 0, query ? tq_score_query_dim(query) : 0}},
        };
        tq_tool_took(&t, took, 2);
    }
    if (!st)
        tq_tool_log(&t, TQ_LOG_INFO, "%lld rows in %lld groups, %lld rows out, %.3f s",
                    (long long)stats.rows_in, (long long)stats.groups, (long long)stats.rows_out,
                    tq_tool_now() - t0);
    tq_reader_close(r);
    tq_score_query_free(query);
    tq_score_model_free(model);
    tq_tool_device_done(&t, dev);
    tq_device_close(dev);
    if (st)
        tq_tool_fail(&t, st);
    return 0;
}
