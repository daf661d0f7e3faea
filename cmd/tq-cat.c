/* tq-cat: see and convert TQ streams: pass-through and concatenation, a table of
 * frames, text (TSV, CSV, JSON lines), (de)compression, import of .npy and
 * numeric text, export to .npy and safetensors. Options here; work in lib/io. */
#include "tool/tool.h"
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_HEAD = TQ_OPT_TOOL_BASE,
    OPT_TAIL,
    OPT_NO_HEADER,
    OPT_NAME,
    OPT_FROM,
    OPT_AS,
    OPT_BATCH,
    OPT_DTYPE,
    OPT_TO,
};

enum mode { MODE_STREAM, MODE_INFO, MODE_TEXT, MODE_NPY, MODE_SAFETENSORS };
enum from { FROM_TQ, FROM_NPY, FROM_TSV, FROM_CSV, FROM_JSONL };

static void help(void)
{
    fputs(
        "Usage: tq-cat [OPTION]... [FILE]...\n"
        "Concatenate TQ streams (FILE, or - for standard input; none: standard input),\n"
        "show what they hold, convert them, import and export arrays.\n\n"
        "Output (default: the TQ stream, frames passed through unchanged):\n"
        "  -i, --info            print a table of frames instead of the stream\n"
        "  -t, --text FMT        print as text: tsv, csv or jsonl (default: off)\n"
        "      --head N          text: only the first N rows of each table (default: all)\n"
        "      --tail N          text: only the last N rows of each table (default: all)\n"
        "      --no-header       text: no header line naming the columns (default: header)\n"
        "      --to FMT          write tq (default), npy (one tensor) or safetensors\n"
        "  -z, --compress[=N]    (re)compress every payload with zlib (level N, default 6)\n"
        "  -Z, --decompress      store every payload uncompressed\n"
        "      --name LIST       keep only frames with these names (comma list, repeatable;\n"
        "                        default: all)\n\n"
        "Input (default: TQ streams):\n"
        "      --from FMT        read FILEs as tq (default), npy, tsv, csv or jsonl\n"
        "      --as NAME         name of the imported frames (default: x); once for all\n"
        "                        FILEs, or once per FILE, in order\n"
        "      --batch N         rows per imported frame (default: up to 65536, ~16 MiB)\n"
        "      --dtype DT        dtype of numbers read from text (default: f32)\n\n" TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-cat -t tsv --head 5 emb.tq\n"
        "  tq-cat --from npy --as k --as v k.npy v.npy | tq-cat -z -o kv.tq\n"
        "  tq-cat --from npy --as emb emb.npy | tq-cat --to safetensors -o emb.safetensors\n",
        stdout);
}

static void note(void *ctx, const char *msg) { tq_tool_log(ctx, TQ_LOG_WARN, "%s", msg); }

static int64_t count_arg(tq_tool *t, const char *opt, const char *arg, int64_t lo)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < lo)
        tq_tool_usage(t, "%s wants a count of at least %lld, not '%s'", opt, (long long)lo, arg);
    return v;
}

static int pick(tq_tool *t, const char *opt, const char *arg, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(arg, names[i]))
            return i;
    tq_tool_usage(t, "%s does not know '%s'", opt, arg);
}

/* --name a,b --name c: every name, checked. */
static void add_names(tq_tool *t, const char *arg, char ***names, size_t *n)
{
    char *copy = strdup(arg), *save = NULL;
    if (!copy)
        tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (tq_io_name_check(p))
            tq_tool_usage(t, "--name '%s': %s", p, tq_errmsg());
        char **nn = realloc(*names, (*n + 1) * sizeof *nn);
        if (!nn || !(nn[*n] = strdup(p)))
            tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
        *names = nn;
        (*n)++;
    }
    free(copy);
}

/* Opens the TQ inputs into one reader, every file before any output. */
static tq_status open_streams(char **files, int n, tq_reader **r, int *fds)
{
    const char *first = n ? files[0] : "-";
    tq_status st = tq_reader_open_path(r, first);
    for (int i = 1; i < n && !st; i++) {
        fds[i] = strcmp(files[i], "-") ? open(files[i], O_RDONLY | O_CLOEXEC) : 0;
        if (fds[i] < 0)
            st = tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", files[i], strerror(errno));
        else
            st = tq_reader_chain_fd(*r, fds[i], files[i]);
    }
    return st;
}

static tq_status run_streams(tq_tool *t, tq_reader *r, tq_sink *sink)
{
    tq_frame *f;
    tq_status st;
    uint64_t frames = 0, bytes = 0;
    double t0 = tq_tool_now();
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        frames++;
        bytes += f->stored_size;
        if ((st = sink->put(sink, f)) == TQ_EOF)
            break; /* the sink wants nothing more (--head): stop reading */
        if (st)
            return st;
        tq_tool_progress(t, "%llu frames, %.1f MB", (unsigned long long)frames, bytes / 1e6);
    }
    tq_tool_progress_done(t);
    if (st == TQ_EOF)
        tq_tool_log(t, TQ_LOG_INFO, "%llu frames, %llu payload bytes, %.3f s",
                    (unsigned long long)frames, (unsigned long long)bytes, tq_tool_now() - t0);
    return st == TQ_EOF ? TQ_OK : st;
}

static tq_status run_imports(tq_tool *t, enum from from, char **files, int n, char **as,
                             int nas, const tq_import_opts *base, tq_sink *sink)
{
    char *stdin_only[] = {"-"};
    if (n == 0)
        files = stdin_only, n = 1;
    if (nas > 1 && nas != n)
        tq_tool_usage(t, "%d --as names for %d files: give one, or one per file", nas, n);
    for (int i = 0; i < n; i++) { /* every input must open before any output */
        int fd = strcmp(files[i], "-") ? open(files[i], O_RDONLY | O_CLOEXEC) : 0;
        if (fd < 0)
            return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open: %s", files[i], strerror(errno));
        if (fd > 0)
            close(fd);
    }
    tq_status st = TQ_OK;
    for (int i = 0; i < n && !st; i++) {
        tq_import_opts o = *base;
        o.name = nas ? as[nas > 1 ? i : 0] : "x";
        double t0 = tq_tool_now();
        if (from == FROM_NPY)
            st = tq_import_npy(files[i], &o, sink);
        else if (from == FROM_JSONL)
            st = tq_import_jsonl(files[i], &o, sink);
        else
            st = tq_import_delim(files[i], from == FROM_TSV ? TQ_TEXT_TSV : TQ_TEXT_CSV, &o,
                                 sink);
        tq_tool_log(t, TQ_LOG_INFO, "%s: imported as \"%s\" in %.3f s", files[i], o.name,
                    tq_tool_now() - t0);
    }
    return st;
}

/* What the command line asks for. */
struct opts {
    enum mode mode;
    enum from from;
    int level, header;
    int64_t head, tail;
    tq_text_format fmt;
    char **names, **as;
    size_t nnames;
    int nas;
    tq_import_opts io;
};

/* The getopt loop and the usage checks after it. */
static void parse_args(tq_tool *t, int argc, char **argv, struct opts *o)
{
    static const char *from_names[] = {"tq", "npy", "tsv", "csv", "jsonl", NULL};
    static const char *to_names[] = {"tq", "npy", "safetensors", NULL};
    *o = (struct opts){.mode = MODE_STREAM, .from = FROM_TQ, .level = -1, .header = 1,
                       .head = -1, .tail = -1, .fmt = TQ_TEXT_TSV,
                       .io = {.dtype = TQ_DTYPE_F32}};
    int modes = 0, dtype_set = 0, batch_set = 0;
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"info", no_argument, NULL, 'i'},
        {"text", required_argument, NULL, 't'},
        {"head", required_argument, NULL, OPT_HEAD},
        {"tail", required_argument, NULL, OPT_TAIL},
        {"no-header", no_argument, NULL, OPT_NO_HEADER},
        {"to", required_argument, NULL, OPT_TO},
        {"compress", optional_argument, NULL, 'z'},
        {"decompress", no_argument, NULL, 'Z'},
        {"name", required_argument, NULL, OPT_NAME},
        {"from", required_argument, NULL, OPT_FROM},
        {"as", required_argument, NULL, OPT_AS},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int c;
    while ((c = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS "it:z::Z", longopts)) != -1) {
        if (tq_tool_option(t, c, optarg, help))
            continue;
        switch (c) {
        case 'i':
            o->mode = MODE_INFO, modes++;
            break;
        case 't':
            if (tq_text_format_from_name(optarg, &o->fmt))
                tq_tool_usage(t, "--text wants tsv, csv or jsonl, not '%s'", optarg);
            o->mode = MODE_TEXT, modes++;
            break;
        case OPT_TO: {
            int k = pick(t, "--to", optarg, to_names);
            o->mode = k == 0 ? MODE_STREAM : k == 1 ? MODE_NPY : MODE_SAFETENSORS;
            modes++;
            break;
        }
        case OPT_HEAD:
            o->head = count_arg(t, "--head", optarg, 0);
            break;
        case OPT_TAIL:
            o->tail = count_arg(t, "--tail", optarg, 0);
            break;
        case OPT_NO_HEADER:
            o->header = 0;
            break;
        case 'z':
            o->level = optarg ? (int)count_arg(t, "--compress", optarg, 1) : 6;
            if (o->level > 9)
                tq_tool_usage(t, "--compress level must be 1..9");
            break;
        case 'Z':
            o->level = 0;
            break;
        case OPT_NAME:
            add_names(t, optarg, &o->names, &o->nnames);
            break;
        case OPT_FROM:
            o->from = (enum from)pick(t, "--from", optarg, from_names);
            break;
        case OPT_AS:
            if (tq_io_name_check(optarg))
                tq_tool_usage(t, "--as '%s': %s", optarg, tq_errmsg());
            o->as = realloc(o->as, (size_t)(o->nas + 1) * sizeof *o->as);
            if (!o->as)
                tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
            o->as[o->nas++] = optarg;
            break;
        case OPT_BATCH:
            o->io.batch = count_arg(t, "--batch", optarg, 1);
            batch_set = 1;
            break;
        case OPT_DTYPE:
            o->io.dtype = tq_dtype_from_name(optarg);
            if (!tq_dtype_size(o->io.dtype))
                tq_tool_usage(t, "--dtype wants f32 f64 f16 bf16 i8 u8 i16 i32 i64, not '%s'",
                              optarg);
            dtype_set = 1;
            break;
        default:
            tq_tool_usage(t, "unknown option");
        }
    }
    if (modes > 1)
        tq_tool_usage(t, "--info, --text and --to exclude each other");
    if ((o->head >= 0 || o->tail >= 0 || !o->header) && o->mode != MODE_TEXT)
        tq_tool_usage(t, "--head, --tail and --no-header apply to text output (-t)");
    if (o->head >= 0 && o->tail >= 0)
        tq_tool_usage(t, "--head and --tail exclude each other");
    if (o->level >= 0 && o->mode != MODE_STREAM)
        tq_tool_usage(t, "-z and -Z apply to stream output");
    if (o->from == FROM_TQ && (o->nas || batch_set || dtype_set))
        tq_tool_usage(t, "--as, --batch and --dtype apply to imports (--from)");
    if (dtype_set && (o->from == FROM_TQ || o->from == FROM_NPY))
        tq_tool_usage(t, "--dtype applies to text imports (--from tsv|csv|jsonl)");
    tq_tool_ready(t);
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-cat");
    struct opts o;
    parse_args(&t, argc, argv, &o);
    enum mode mode = o.mode;
    enum from from = o.from;
    int level = o.level, header = o.header;
    int64_t head = o.head, tail = o.tail;
    tq_text_format fmt = o.fmt;
    char **names = o.names, **as = o.as;
    size_t nnames = o.nnames;
    int nas = o.nas;
    tq_import_opts io = o.io;

    char **files = argv + optind;
    int nfiles = argc - optind;
    tq_reader *r = NULL;
    int *fds = calloc((size_t)nfiles + 1, sizeof *fds);
    tq_status st = TQ_OK;
    if (!fds)
        tq_tool_fail(&t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    if (from == FROM_TQ && (st = open_streams(files, nfiles, &r, fds)))
        tq_tool_fail(&t, st);

    FILE *text = NULL;
    char *tmp = NULL;
    tq_sink *sink = NULL;
    if (mode == MODE_INFO || mode == MODE_TEXT) {
        tq_text_opts to = {.format = fmt, .head = head, .tail = tail, .header = header,
                           .only = names, .nonly = from == FROM_TQ ? nnames : 0};
        if (!(st = tq_tool_open_text(&t, &text, &tmp)))
            st = mode == MODE_INFO ? tq_sink_info(&sink, text) : tq_sink_text(&sink, text, &to);
    } else if (mode == MODE_STREAM) {
        tq_writer *w = NULL;
        if (!(st = tq_tool_open_output(&t, &w)) && (st = tq_sink_stream(&sink, w, level)))
            tq_writer_close(w, 0);
    } else if ((!t.output || !strcmp(t.output, "-")) && isatty(1) && !t.force) {
        st = tq_fail(TQ_ERR_USAGE, "refusing to write a binary file to a terminal; use -o "
                                   "FILE or redirect it");
    } else if (mode == MODE_NPY) {
        st = tq_sink_npy(&sink, t.output);
    } else {
        st = tq_sink_safetensors(&sink, t.output, note, &t);
    }
    if (!st && from == FROM_TQ && mode == MODE_NPY && !nnames) {
        /* .npy holds one tensor: tq(7)'s one rule, with no default name */
        tq_pick p = {.what = "tensor to write", .option = "--name", .rank_lo = 0,
                     .rank_hi = TQ_MAX_RANK, .fits = "tensor"};
        tq_tool_pick(&t, r, NULL, NULL, &p);
        if (p.name[0])
            add_names(&t, p.name, &names, &nnames);
    }
    if (!st && nnames)
        st = tq_sink_select(&sink, sink, names, nnames);
    if (!st)
        st = from == FROM_TQ ? run_streams(&t, r, sink)
                             : run_imports(&t, from, files, nfiles, as, nas, &io, sink);

    tq_status cst = sink ? sink->close(sink, !st) : TQ_OK;
    if (text) {
        tq_status tst = tq_tool_close_text(&t, text, tmp, !st && !cst);
        if (!cst)
            cst = tst;
    }
    tq_reader_close(r);
    for (int i = 1; i < nfiles; i++)
        if (fds[i] > 0)
            close(fds[i]);
    free(fds);
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    free(as);
    if (st)
        tq_tool_fail(&t, st);
    if (cst)
        tq_tool_fail(&t, cst);
    return 0;
}
