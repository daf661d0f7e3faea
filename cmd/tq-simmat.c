/* tq-simmat: similarity of query vectors with a database of vectors: the full
 * matrix, exact top-k search (sharded, and the merge of the shards), pairs
 * above a threshold, and near-duplicate removal. Options here; the modes in
 * lib/simmat. */
#include "tool/tool.h"
#include "simmat/simmat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    OPT_DB = TQ_OPT_TOOL_BASE,
    OPT_METRIC,
    OPT_TOPK,
    OPT_THRESHOLD,
    OPT_DEDUP,
    OPT_SHARD,
    OPT_MERGE,
    OPT_NAME,
    OPT_RESCORE,
    OPT_RESCORE_K,
    OPT_PRECISION,
};

static void help(void)
{
    fputs(
        "Usage: tq-simmat [OPTION]... [QUERIES]\n"
        "       tq-simmat --merge SHARD_FILE...\n"
        "Similarities of the query vectors in QUERIES (a TQ stream file; default or -:\n"
        "standard input) with the rows of --db (without --db: with themselves), as a\n"
        "TQ stream.\n\n"
        "Modes (default: the full matrix, frames \"sim\" f32 [batch, ndb]):\n"
        "  -k, --topk K          the K best database rows of each query: \"idx\" (i64),\n"
        "                        \"score\" (f32) and \"db_key\" when the database has keys\n"
        "      --threshold T     every pair with score >= T: \"i\", \"j\" (i64), \"score\"\n"
        "                        (without --db: only i < j)\n"
        "      --dedup T         a filter: drop each row whose score with an earlier kept\n"
        "                        row (or a --db row) is >= T; keys and frames follow\n"
        "      --merge           merge the --topk outputs of the shards named as files\n\n"
        "Options:\n"
        "      --db FILE         the database, a TQ stream file (default: the input)\n"
        "      --metric M        cosine, dot or l2 (negative squared distance)\n"
        "                        (default: cosine); hamming for sign bits\n"
        "      --shard I/N       with --topk: only the I-th of N slices of the database\n"
        "                        (indices stay global; default: 0/1)\n"
        "      --name NAME       the vector frame (default: emb, else the one rank 2\n"
        "                        float frame; the queries: the database's name, else the\n"
        "                        one rank 2 float frame; see tq(7))\n"
        "      --rescore FILE    --topk in codes: rank the best M x K candidates again\n"
        "                        by the f32 dot product with FILE's rows (float queries)\n"
        "      --rescore-k M     candidates a query for --rescore, M x K (default: 4)\n"
        "      --precision P     f32 or bf16: the products that rank --topk's candidates\n"
        "                        (the output is the same: see tq-simmat(1))\n\n"
        TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-embed docs.txt > db.tq; tq-embed q.txt | tq-simmat --db db.tq -k 10 | tq-cat -t tsv\n"
        "  tq-embed docs.txt | tq-simmat --dedup 0.95 | tq-cat -t tsv --name key\n"
        "  tq-simmat --db db.tq -k 10 --shard 3/8 < q.tq > s3.tq; tq-simmat --merge s*.tq\n",
        stdout);
}

static double num_arg(tq_tool *t, const char *opt, const char *arg)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || v != v)
        tq_tool_usage(t, "%s wants a number, not '%s'", opt, arg);
    return v;
}

/* Spools the input (standard input, or the file IN) to a temporary file when
 * it is a pipe or a device, so that the input can be the database and
 * the queries both. */
static tq_status self_path(const char *in, char *path, size_t n, int *tmp)
{
    struct stat sb;
    *tmp = 0;
    /* a missing file or a folder: the reader says what it is */
    if (in && (stat(in, &sb) || !(S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode) ||
                                  S_ISSOCK(sb.st_mode)))) {
        snprintf(path, n, "%s", in);
        return TQ_OK;
    }
    if (!in && !fstat(0, &sb) && S_ISREG(sb.st_mode) && lseek(0, 0, SEEK_CUR) == 0) {
        snprintf(path, n, "/proc/self/fd/0");
        return TQ_OK;
    }
    int from = 0;
    if (in && (from = open(in, O_RDONLY)) < 0)
        return tq_fail(TQ_ERR_NOINPUT, "%s: %s", in, strerror(errno));
    const char *dir = getenv("TMPDIR");
    snprintf(path, n, "%s/tq-simmat.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0 && from)
        close(from);
    if (fd < 0)
        return tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create a temporary file: %s", path,
                       strerror(errno));
    *tmp = 1;
    tq_tool_tempfile(path, 1); /* removed however the tool ends */
    char buf[1 << 16];
    ssize_t got;
    while ((got = read(from, buf, sizeof buf)) > 0)
        for (ssize_t at = 0; at < got;) {
            ssize_t put = write(fd, buf + at, (size_t)(got - at));
            if (put < 0) {
                close(fd);
                if (from)
                    close(from);
                return tq_fail(TQ_ERR_IO, "%s: %s", path, strerror(errno));
            }
            at += put;
        }
    int err = got < 0 ? errno : 0;
    if (from)
        close(from);
    if (got < 0 || close(fd))
        return tq_fail(TQ_ERR_IO, "%s: %s", in ? in : "stdin", strerror(err ? err : errno));
    return TQ_OK;
}

static const char *metrics[] = {"cosine", "dot", "l2", "hamming", NULL};

/* The options that are not the similarity's own (those go into s). */
typedef struct opts {
    const char *db, *rescore;
    int modes, merge, shard_set;
    int bf16; /* --precision bf16 */
} opts;

/* The getopt loop, and the usage checks of the options together. */
static void parse_args(tq_tool *t, int argc, char **argv, tq_sim *s, opts *o)
{
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"db", required_argument, NULL, OPT_DB},
        {"metric", required_argument, NULL, OPT_METRIC},
        {"topk", required_argument, NULL, 'k'},
        {"threshold", required_argument, NULL, OPT_THRESHOLD},
        {"dedup", required_argument, NULL, OPT_DEDUP},
        {"shard", required_argument, NULL, OPT_SHARD},
        {"merge", no_argument, NULL, OPT_MERGE},
        {"name", required_argument, NULL, OPT_NAME},
        {"rescore", required_argument, NULL, OPT_RESCORE},
        {"rescore-k", required_argument, NULL, OPT_RESCORE_K},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int c;
    while ((c = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS "k:", longopts)) != -1) {
        if (tq_tool_option(t, c, optarg, help))
            continue;
        switch (c) {
        case OPT_DB:
            o->db = optarg;
            break;
        case OPT_METRIC: {
            int m = -1;
            for (int i = 0; metrics[i]; i++)
                if (!strcmp(optarg, metrics[i]))
                    m = i;
            if (m < 0)
                tq_tool_usage(t, "--metric wants cosine, dot, l2 or hamming, not '%s'", optarg);
            s->metric = (tq_sim_metric)m;
            break;
        }
        case 'k': {
            char *end;
            errno = 0;
            long long k = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end || k < 1 || k > (1 << 20))
                tq_tool_usage(t, "--topk wants a count 1..1048576, not '%s'", optarg);
            s->mode = TQ_SIM_TOPK, s->k = k, o->modes++;
            break;
        }
        case OPT_THRESHOLD:
            s->mode = TQ_SIM_THRESHOLD, s->threshold = num_arg(t, "--threshold", optarg), o->modes++;
            break;
        case OPT_DEDUP:
            s->mode = TQ_SIM_DEDUP, s->threshold = num_arg(t, "--dedup", optarg), o->modes++;
            break;
        case OPT_SHARD: {
            int i, n, used = 0;
            if (sscanf(optarg, "%d/%d%n", &i, &n, &used) != 2 || optarg[used] || n < 1 ||
                i < 0 || i >= n)
                tq_tool_usage(t, "--shard wants I/N with 0 <= I < N, not '%s'", optarg);
            s->shard_i = i, s->shard_n = n, o->shard_set = 1;
            break;
        }
        case OPT_MERGE:
            o->merge = 1, o->modes++;
            break;
        case OPT_NAME:
            s->vec_name = optarg;
            break;
        case OPT_RESCORE:
            o->rescore = optarg;
            break;
        case OPT_RESCORE_K: {
            char *end;
            errno = 0;
            long long m = strtoll(optarg, &end, 10);
            if (errno || end == optarg || *end || m < 1 || m > 1024)
                tq_tool_usage(t, "--rescore-k wants a count 1..1024, not '%s'", optarg);
            s->rescore_m = m;
            break;
        }
        case OPT_PRECISION:
            if (strcmp(optarg, "f32") && strcmp(optarg, "bf16"))
                tq_tool_usage(t, "--precision wants f32 or bf16, not '%s'", optarg);
            o->bf16 = !strcmp(optarg, "bf16");
            break;
        default:
            tq_tool_usage(t, "unknown option");
        }
    }
    if (o->modes > 1)
        tq_tool_usage(t, "--topk, --threshold, --dedup and --merge exclude each other");
    if (o->shard_set && s->mode != TQ_SIM_TOPK)
        tq_tool_usage(t, "--shard applies to --topk");
    if (o->merge && (o->db || o->shard_set))
        tq_tool_usage(t, "--merge takes the shards' files only");
    if (!o->merge && argc - optind > 1)
        tq_tool_usage(t, "one input at most, not %d (the database: --db)", argc - optind);
    if (o->merge && optind == argc)
        tq_tool_usage(t, "--merge wants the shards' output files");
    if (o->bf16 && s->mode != TQ_SIM_TOPK)
        tq_tool_usage(t, "--precision bf16 ranks the candidates of --topk (the full matrix is "
                         "f32, and --threshold and --dedup screen with int8 codes)");
}

/* --merge: the shards' --topk outputs named as files, merged. */
static int run_merge(tq_tool *t, int argc, char **argv)
{
    tq_status st = TQ_OK;
    tq_writer *w = NULL;
    int n = argc - optind;
    tq_reader **in = calloc((size_t)n, sizeof *in);
    if (!in)
        tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    for (int i = 0; i < n && !st; i++)
        st = tq_reader_open_path(&in[i], argv[optind + i]);
    if (!st)
        st = tq_tool_open_output(t, &w);
    if (!st)
        st = tq_sim_merge(in, n, w);
    tq_status cst = w ? tq_writer_close(w, !st) : TQ_OK;
    for (int i = 0; i < n; i++)
        if (in[i])
            tq_reader_close(in[i]);
    free(in);
    if (st || cst)
        tq_tool_fail(t, st ? st : cst);
    return 0;
}

/* The database: its kind (floats or codes) probed, the checks that kind asks,
 * then its rows loaded (and --rescore's), and prepared. */
static tq_status load_db(tq_tool *t, tq_sim *s, const char *db, const char *dblabel,
                         const char *rescore, tq_pick *pdb, tq_dtype *code)
{
    tq_status st = TQ_OK;
    if (db && (st = tq_sim_codes_probe(db, dblabel, s->vec_name, code)))
        tq_tool_fail(t, st);
    if (*code && *code != TQ_DTYPE_Q2 && tq_device_rank_precision(s->dev) == TQ_DTYPE_BF16)
        tq_tool_log(t, TQ_LOG_INFO, "--precision bf16: %s codes are searched in their own "
                    "arithmetic", tq_dtype_name(*code));
    if (rescore && s->mode != TQ_SIM_TOPK)
        tq_tool_usage(t, "--rescore goes with --topk");
    if ((*code == TQ_DTYPE_I8 || *code == TQ_DTYPE_Q8_0 || *code == TQ_DTYPE_Q4_0) &&
        s->metric != TQ_SIM_DOT)
        tq_tool_usage(t, "%s codes are searched with --metric dot (quantize normalized "
                         "vectors for the cosine)", tq_dtype_name(*code));
    if (*code == TQ_DTYPE_Q4_0 && s->mode == TQ_SIM_DEDUP)
        tq_tool_usage(t, "--dedup against q4_0 rows: ggml pairs q4_0 rows with q8_0 queries "
                         "only (dedup q8_0 codes, or floats)");
    if (*code == TQ_DTYPE_BIT && s->metric != TQ_SIM_HAMMING)
        tq_tool_usage(t, "bit codes are searched with --metric hamming");
    if (!*code && s->metric == TQ_SIM_HAMMING && db)
        tq_tool_usage(t, "--metric hamming wants a database of bit codes (tq-quantize --to bit)");
    if (rescore && !*code && s->metric == TQ_SIM_L2)
        tq_tool_usage(t, "--rescore goes with a database of codes (tq-quantize --to bit or int8)");
    if (rescore && s->k * s->rescore_m > (1 << 20))
        tq_tool_usage(t, "--rescore-k %lld x --topk %lld: over 2^20 candidates a query",
                      (long long)s->rescore_m, (long long)s->k);
    if (*code)
        st = tq_sim_codes_load(s, db, dblabel, s->vec_name);
    else if (db) {
        tq_tool_pick(t, NULL, db, dblabel, pdb);
        st = tq_sim_rows_load(&s->db, db, dblabel, pdb->name[0] ? pdb->name : NULL,
                              s->metric == TQ_SIM_COSINE);
    }
    if (!st && rescore && !*code && !s->db.decoded)
        tq_tool_usage(t, "--rescore goes with a database of codes (tq-quantize --to bit, int8 or "
                         "q2)");
    if (!st && rescore) {
        /* q2 rows are searched as floats, by the cosine too: the f32 rows
         * then normalized as the decoded ones are */
        st = tq_sim_rows_load(&s->rescore, rescore, rescore, s->vec_name ? s->vec_name : s->db.name,
                              !*code && s->metric == TQ_SIM_COSINE);
        if (!st && (s->rescore.n != s->db.n || s->rescore.d != s->db.d))
            st = tq_fail(TQ_ERR_DATA, "--rescore %s: %lld x %lld rows for a database of %lld x %lld "
                         "from %s", rescore, (long long)s->rescore.n, (long long)s->rescore.d,
                         (long long)s->db.n, (long long)s->db.d, s->db_label);
    }
    if (!st && db && !*code && (s->mode != TQ_SIM_DEDUP || s->db.n))
        st = tq_sim_prepare(s);
    return st;
}

/* The log of a run that went well: what came from where, and the counts. */
static void report(tq_tool *t, tq_sim *s, tq_dtype code, double t0)
{
    /* what came from where: the rows each input gave, and their width */
    const char *qn = tq_sim_query_name(s);
    tq_took took[2] = {
        {.what = s->self ? "vectors" : "query vectors", .name = qn ? qn : "", .from = s->q_label,
         .rank = 2, .dims = {s->q_seen, s->db.d}},
        {.what = "database vectors", .name = s->db.name, .from = s->db_label,
         .rank = s->self ? 0 : 2, .dims = {s->db.n, s->db.d}},
    };
    tq_tool_took(t, took, 2);
    tq_tool_log(t, TQ_LOG_INFO, "%lld query rows in %.3f s%s", (long long)s->q_seen,
                tq_tool_now() - t0, "");
    if (s->mode == TQ_SIM_THRESHOLD && !code && s->screen_dh)
        tq_tool_log(t, TQ_LOG_INFO, "%lld pairs; an int8 screen of the first %lld values let "
                    "%lld through to the exact score", (long long)s->pairs, (long long)s->screen_dh,
                    (long long)s->screened);
    else if (s->mode == TQ_SIM_THRESHOLD && !code)
        tq_tool_log(t, TQ_LOG_INFO, "%lld pairs; the matrix product screened them", (long long)s->pairs);
    if (s->mode == TQ_SIM_DEDUP)
        tq_tool_log(t, TQ_LOG_INFO, "%lld rows kept, %lld dropped", (long long)s->kept,
                    (long long)s->dropped);
    if (s->mode == TQ_SIM_TOPK && (!code || code == TQ_DTYPE_Q2) &&
        tq_device_backend(s->dev) == TQ_BACKEND_CPU)
        tq_tool_log(t, TQ_LOG_INFO, "%lld rows scored exactly, the candidates of %s products",
                    tq_device_rescored(s->dev),
                    tq_device_rank_precision(s->dev) == TQ_DTYPE_BF16 ? "bf16" : "f32");
    if (s->mode == TQ_SIM_DEDUP && s->screen_dh)
        tq_tool_log(t, TQ_LOG_INFO, "an int8 screen of the first %lld values let %lld pairs "
                    "through to the exact score", (long long)s->screen_dh, (long long)s->screened);
}

/* The work, for auto (tq(7)): every query row against every database row
 * (the input against itself without --db); -1 when not known. */
static double simmat_work(tq_tool *t, const char *qpath, const char *db)
{
    tq_census q, d;
    int a = tq_tool_census(t, qpath, &q), b = db ? tq_tool_census(t, db, &d) : a;
    if (a > 0 || b > 0)
        return TQ_WORK_LARGE;
    if (a || b)
        return -1;
    return db ? tq_work_simmat(q.elems, d.elems, d.cols) : tq_work_simmat(q.elems, q.elems, q.cols);
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-simmat");
    tq_sim s;
    memset(&s, 0, sizeof s);
    s.shard_n = 1;
    s.rescore_m = 4;
    opts o = {NULL, NULL, 0, 0, 0, 0};
    parse_args(&t, argc, argv, &s, &o);
    const char *db = o.db, *rescore = o.rescore;
    tq_tool_ready(&t);

    if (o.merge)
        return run_merge(&t, argc, argv);

    tq_status st = TQ_OK;
    tq_writer *w = NULL;
    char tmp[4096] = "";
    int is_tmp = 0;
    /* the queries: the file argument, else standard input */
    const char *qfile = optind < argc && strcmp(argv[optind], "-") ? argv[optind] : NULL;
    const char *qpath = qfile ? qfile : "-";
    s.self = !db;
    /* each input's frames from that input: the queries from QUERIES, the
     * database from --db FILE (or from QUERIES too, without it) */
    s.q_label = tq_took_label(qpath);
    s.db_label = db ? tq_took_label(db) : s.mode == TQ_SIM_DEDUP ? NULL : s.q_label;
    if ((st = tq_tool_device_open(&t, simmat_work(&t, qpath, db), &s.dev)))
        tq_tool_fail(&t, st);
    if (o.bf16 && !(st = tq_device_set_rank_precision(s.dev, TQ_DTYPE_BF16)) &&
        tq_device_rank_precision(s.dev) != TQ_DTYPE_BF16)
        tq_tool_log(&t, TQ_LOG_INFO, "--precision bf16: f32 products on %s (it has no bf16 "
                    "ranking products; the output is the same)", tq_device_name(s.dev));
    double t0 = tq_tool_now();
    if (!db && s.mode != TQ_SIM_DEDUP) { /* the input is the database too */
        if ((st = self_path(qfile, tmp, sizeof tmp, &is_tmp)))
            tq_tool_fail(&t, st);
        db = qpath = tmp;
    }
    /* which frames: tq(7)'s one rule, for the database and for the queries */
#define VEC_PICK(WHAT, DEF)                                                                   \
    {.what = WHAT, .option = "--name", .given = s.vec_name, .def = DEF, .rank_lo = 2,         \
     .rank_hi = 2, .kind = tq_dtype_is_float, .codes = 1, .fits = "rank 2 float or code"}
    tq_pick pdb = VEC_PICK(s.self ? "vectors" : "database vectors", "emb");
    const char *dblabel = db == tmp ? qfile ? qfile : "stdin" : db;
    /* a database of tq-quantize's codes: int8 (with scales) by dot, bits by
     * hamming, in every mode (--dedup without --db learns the kind from its
     * input) */
    tq_dtype code = TQ_DTYPE_INVALID;
    st = load_db(&t, &s, db, dblabel, rescore, &pdb, &code);
    tq_reader *in = NULL;
    if (!st)
        st = tq_reader_open_path_as(&in, qpath, qpath == tmp ? qfile ? qfile : "stdin" : qpath);
    tq_pick pq = VEC_PICK(db ? "query vectors" : "vectors", db ? s.db.name : "emb");
    if (!st && !(db && s.self)) { /* the input against itself: the database's frame */
        tq_tool_pick(&t, in, NULL, NULL, &pq);
        if (db)
            s.q_name = pq.name[0] ? pq.name : NULL;
        else
            s.vec_name = pq.name[0] ? pq.name : NULL;
    }
    if (!st)
        st = tq_tool_open_output(&t, &w);
    if (!st) {
        tq_tool_log(&t, TQ_LOG_INFO, "database %lld x %lld (rows %lld..%lld, %s), metric %s, device %s, threads %d",
                    (long long)s.db.n, (long long)s.db.d, (long long)s.s0, (long long)s.s1,
                    s.db.map ? "mapped in place" : "read into memory", metrics[s.metric],
                    tq_device_name(s.dev), tq_threads_get());
        st = code && s.mode != TQ_SIM_DEDUP ? tq_sim_codes_run(&s, in, w) : tq_sim_run(&s, in, w);
        if (!st) /* never exit 0 having answered nothing */
            st = tq_sim_check_queries(&s);
    }
    tq_status cst = w ? tq_writer_close(w, !st) : TQ_OK;
    if (!st && !cst)
        report(&t, &s, code, t0);
    tq_reader_close(in);
    tq_sim_free(&s);
    tq_tool_device_done(&t, s.dev);
    tq_device_close(s.dev);
    if (is_tmp) {
        unlink(tmp);
        tq_tool_tempfile(tmp, 0);
    }
    if (st || cst)
        tq_tool_fail(&t, st ? st : cst);
    return 0;
}
