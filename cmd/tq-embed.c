/* tq-embed: text in, embedding vectors out: documents one a line (plain, TSV
 * with ids, or JSON lines), batches of "key" and "emb" frames. The policies for
 * empty, invalid and over-long lines live here; the embedders in lib/embed. */
#include "tool/tool.h"
#include "embed/embed.h"
#include "embed/text_input.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
    OPT_TSV = TQ_OPT_TOOL_BASE,
    OPT_JSONL,
    OPT_FIELD,
    OPT_ID_FIELD,
    OPT_BATCH,
    OPT_DTYPE,
    OPT_PRECISION,
    OPT_MAX_LINE,
    OPT_ON_EMPTY,
    OPT_ON_INVALID,
    OPT_ON_LONG,
    OPT_LONG,
    OPT_PROMPT,
    OPT_PROMPT_NAME,
};

enum input { IN_PLAIN, IN_TSV, IN_JSONL };
enum { EMPTY_SKIP, EMPTY_KEEP, EMPTY_ERROR };
enum { INVALID_REPLACE, INVALID_SKIP, INVALID_ERROR };
enum { LONG_TRUNCATE, LONG_SKIP, LONG_ERROR };

static void help(void)
{
    fputs(
        "Usage: tq-embed [OPTION]... [FILE]...\n"
        "Embed UTF-8 text, one document a line (FILE, or - for standard input; none:\n"
        "standard input), into a TQ stream of batches of \"key\" and \"emb\" [n, dim].\n\n"
        "Model:\n"
        "  -m, --model SPEC      hash:DIM (feature hashing, DIM 1..65536), a fastText\n"
        "                        .bin/.ftz file, a .vec text file, or a model folder of\n"
        "                        sentence-transformers (modules.json, config.json,\n"
        "                        vocab.txt, model.safetensors...), or ORG/NAME in the\n"
        "                        Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub or\n"
        "                        ~/.cache/huggingface/hub) (default: hash:384)\n"
        "      --precision P     a model folder's products: f32, bf16, f16 or int8\n"
        "                        (bf16/f16 on CUDA and HIP devices and bf16 on AVX512-BF16\n"
        "                        CPUs, int8 on AVX512-VNNI CPUs; elsewhere f32, said\n"
        "                        under -v; default f32, or int8 for a folder of\n"
        "                        tq-quantize --model, which has no f32 weights)\n\n"
        "Input (default: plain lines; keys are the line numbers from 0, as i64; a TQ\n"
        "stream or binary data, a NUL byte, is refused: exit 65):\n"
        "      --tsv             lines are ID<TAB>TEXT; keys are the IDs (str)\n"
        "      --jsonl           lines are JSON objects; the text is member --field\n"
        "      --field NAME      JSON member holding the text (default: text)\n"
        "      --id-field NAME   JSON member holding the key, string or integer\n"
        "                        (default: none: keys are line numbers)\n"
        "      --max-line BYTES  longest line read whole (default: 1048576)\n"
        "      --on-empty P      empty document: skip, keep (zero vector) or error\n"
        "                        (default: skip)\n"
        "      --on-invalid P    invalid UTF-8: replace (each bad byte by U+FFFD), skip\n"
        "                        or error (default: replace)\n"
        "      --on-long P       line over --max-line: truncate, skip or error\n"
        "                        (default: truncate)\n"
        "      --long P          a text over the model's window of tokens: truncate (cut\n"
        "                        to it, counted under -v) or chunk (windows that overlap\n"
        "                        by a quarter, their pooled vectors averaged) (default:\n"
        "                        truncate)\n"
        "      --prompt TEXT     put TEXT before every text (\"query: \"), as\n"
        "                        sentence-transformers' encode(prompt=TEXT)\n"
        "      --prompt-name N   the model folder's prompt N (its\n"
        "                        config_sentence_transformers.json \"prompts\"; default:\n"
        "                        its default_prompt_name, if any)\n\n"
        "Output:\n"
        "      --batch N         rows per batch (default: 1024)\n"
        "      --dtype DT        f32, f16 or bf16 (default: f32)\n\n" TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-embed docs.txt | tq-simmat --topk 10 | tq-cat -t tsv\n"
        "  tq-embed -m hash:1024 --tsv -o emb.tq corpus.tsv\n"
        "  tq-embed --jsonl --field body --id-field id -v posts.jsonl > emb.tq\n",
        stdout);
}

static int pick(tq_tool *t, const char *opt, const char *arg, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(arg, names[i]))
            return i;
    tq_tool_usage(t, "%s does not know '%s'", opt, arg);
}

typedef struct cfg {
    enum input in;
    const char *field, *id_field;
    size_t max_line;
    int on_empty, on_invalid, on_long;
    int64_t batch;
    tq_dtype dtype;
} cfg;

/* The documents of one batch, and the totals of the run. */
typedef struct state {
    tq_tool *t;
    const cfg *c;
    tq_embedder *e;
    tq_writer *w;
    tq_buf text, ids;             /* the batch's bytes, documents back to back */
    size_t *toff, *ioff;          /* n+1 offsets into text and ids */
    int64_t *lines;               /* input line numbers (keys without ids) */
    int64_t n;
    const char **tp, **ip;
    size_t *tl, *il;
    float *emb;
    void *conv;
    char meta[300];
    size_t meta_len;
    int64_t line;                 /* input lines seen, over all files */
    int64_t rows, empty, invalid_skip, invalid_fixed, long_skip, long_cut;
    uint64_t bytes;
} state;

static tq_status flush(state *s)
{
    if (!s->n)
        return TQ_OK;
    int64_t dim = tq_embedder_dim(s->e), n = s->n;
    for (int64_t i = 0; i < n; i++) {
        s->tp[i] = s->text.p + s->toff[i];
        s->tl[i] = s->toff[i + 1] - s->toff[i];
        if (s->c->in != IN_PLAIN && s->ids.p) {
            s->ip[i] = s->ids.p + s->ioff[i];
            s->il[i] = s->ioff[i + 1] - s->ioff[i];
        }
    }
    tq_status st = tq_embedder_run(s->e, n, s->tp, s->tl, s->emb);
    if (st)
        return st;
    int has_ids = s->c->in == IN_TSV || (s->c->in == IN_JSONL && s->c->id_field);
    if (has_ids)
        st = tq_writer_write_str(s->w, "key", n, s->ip, s->il);
    else
        st = tq_writer_write(s->w, "key", TQ_DTYPE_I64, 1, &n, NULL, 0, s->lines,
                             (uint64_t)n * 8);
    if (st)
        return st;
    int64_t dims[2] = {n, dim};
    const void *data = s->emb;
    uint64_t nb = (uint64_t)n * (uint64_t)dim * 4;
    if (s->c->dtype != TQ_DTYPE_F32) {
        if ((st = tq_convert(s->c->dtype, s->conv, TQ_DTYPE_F32, s->emb, (size_t)(n * dim), 0)))
            return st;
        data = s->conv, nb /= 2;
    }
    if ((st = tq_writer_write(s->w, "emb", s->c->dtype, 2, dims, s->meta, s->meta_len, data, nb)))
        return st;
    s->rows += n;
    s->n = 0;
    s->text.len = s->ids.len = 0;
    tq_tool_progress(s->t, "%lld rows, %.1f MB", (long long)s->rows, s->bytes / 1e6);
    return TQ_OK;
}

static tq_status add_doc(state *s, const char *id, size_t idl, const char *t, size_t tl)
{
    tq_status st;
    if ((st = tq_buf_add(&s->text, t, tl)) || (id && (st = tq_buf_add(&s->ids, id, idl))))
        return st;
    s->lines[s->n] = s->line;
    s->n++;
    s->toff[s->n] = s->text.len;
    s->ioff[s->n] = s->ids.len;
    return s->n == s->c->batch ? flush(s) : TQ_OK;
}

static tq_status line_fail(state *s, const char *file, const char *why)
{
    return tq_fail(TQ_ERR_DATA, "%s: line %lld: %s", file, (long long)s->line + 1, why);
}

/* One input line through the policies, into the batch. */
static tq_status take_line(state *s, const char *file, const char *l, size_t n, int too_long,
                           tq_buf *fix, tq_buf *jt, tq_buf *jid)
{
    const cfg *c = s->c;
    tq_status st;
    if (too_long) {
        if (c->on_long == LONG_ERROR || (c->on_long == LONG_TRUNCATE && c->in == IN_JSONL))
            return line_fail(s, file, c->on_long == LONG_ERROR
                                          ? "longer than --max-line"
                                          : "longer than --max-line (a JSON line cannot be "
                                            "truncated)");
        if (c->on_long == LONG_SKIP) {
            s->long_skip++;
            return TQ_OK;
        }
        /* cut back to the start of a code point, so truncation adds no bad byte */
        size_t k = n;
        while (k > 0 && n - k < 3 && ((unsigned char)l[k] & 0xC0) == 0x80)
            k--;
        n = k ? k : n;
        s->long_cut++;
    }
    if (tq_utf8_valid(l, n) != n) {
        if (c->on_invalid == INVALID_ERROR)
            return line_fail(s, file, "invalid UTF-8");
        if (c->on_invalid == INVALID_SKIP) {
            s->invalid_skip++;
            return TQ_OK;
        }
        fix->len = 0;
        if (tq_utf8_repair(l, n, fix) < 0)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        l = fix->p, n = fix->len;
        s->invalid_fixed++;
    }
    const char *id = NULL, *t = l;
    size_t idl = 0, tl = n;
    if (n && c->in == IN_TSV) {
        const char *tab = memchr(l, '\t', n);
        if (!tab)
            return line_fail(s, file, "no TAB between the id and the text (--tsv)");
        id = l, idl = (size_t)(tab - l);
        t = tab + 1, tl = n - idl - 1;
    } else if (n && c->in == IN_JSONL) {
        if ((st = tq_json_fields(l, n, c->field, c->id_field, jt, c->id_field ? jid : NULL)))
            return tq_fail_context(st == TQ_ERR_NOMEM ? st : TQ_ERR_DATA, "%s: line %lld", file,
                                   (long long)s->line + 1);
        t = jt->p, tl = jt->len;
        if (c->id_field)
            id = jid->p, idl = jid->len;
    }
    if (c->in != IN_PLAIN && !id)
        id = "", idl = 0;
    if (!tl) {
        if (c->on_empty == EMPTY_ERROR)
            return line_fail(s, file, "empty document");
        s->empty++;
        if (c->on_empty == EMPTY_SKIP)
            return TQ_OK;
    }
    return add_doc(s, id, idl, t, tl);
}

static tq_status run_file(state *s, const char *file)
{
    tq_lines *r;
    tq_status st = tq_lines_open(&r, file, s->c->max_line);
    if (st)
        return st;
    const char *label = strcmp(file, "-") ? file : "stdin";
    tq_buf fix = {0}, jt = {0}, jid = {0};
    const char *l;
    size_t n;
    int too_long;
    for (int first = 1; (st = tq_lines_next(r, &l, &n, &too_long)) == TQ_OK; first = 0) {
        /* binary input is refused whole, never embedded as repaired text */
        const char *nul = memchr(l, 0, n);
        if (first && n >= 4 && !memcmp(l, "\x89TQF", 4)) {
            st = tq_fail(TQ_ERR_DATA, "%s: this is a TQ stream, not text", label);
            break;
        }
        if (nul) {
            st = tq_fail(TQ_ERR_DATA, "%s: binary data (a NUL byte at byte %llu), not text",
                         label, (unsigned long long)(tq_lines_offset(r) + (uint64_t)(nul - l)));
            break;
        }
        s->bytes += n + 1;
        if ((st = take_line(s, label, l, n, too_long, &fix, &jt, &jid)))
            break;
        s->line++;
    }
    tq_buf_free(&fix), tq_buf_free(&jt), tq_buf_free(&jid);
    tq_lines_close(r);
    return st == TQ_EOF ? TQ_OK : st;
}

/* The model -m names: a path as given; a name that is no path, from the
 * Hugging Face cache; else one line saying what -m takes (exit 66). */
static const char *model_path(tq_tool *t, const char *model, char *hub, size_t n)
{
    struct stat sb;
    if (!strncmp(model, "hash:", 5) || !strcmp(model, "hash") || !*model ||
        !stat(model, &sb) || (errno != ENOENT && errno != ENOTDIR))
        return model;
    int in_hub = tq_embed_hub_folder(model, hub, n);
    if (in_hub > 0) {
        tq_tool_log(t, TQ_LOG_INFO, "model %s: %s (the Hugging Face cache)", model, hub);
        return hub;
    }
    size_t len = strlen(model);
    int file = len > 4 && (!strcmp(model + len - 4, ".bin") || !strcmp(model + len - 4, ".ftz") ||
                           !strcmp(model + len - 4, ".vec"));
    const char *takes = "-m takes a model folder (modules.json, config.json, vocab.txt, "
                        "model.safetensors...), a fastText .bin/.ftz or .vec file, or hash:DIM";
    if (file)
        tq_tool_fail(t, tq_fail(TQ_ERR_NOINPUT, "-m %s: no such file; %s", model, takes));
    tq_tool_fail(t, tq_fail(TQ_ERR_NOINPUT, "-m %s: no such folder%s; %s", model,
                            in_hub == 0 ? " (nor in the Hugging Face cache)" : "", takes));
}

/* The getopt loop and the usage checks after it: the config, the model and its precision. */
static void parse_args(tq_tool *t, int argc, char **argv, cfg *c, const char **model,
                       tq_embed_opts *eo)
{
    static const char *window_names[] = {"truncate", "chunk", NULL};
    static const char *empty_names[] = {"skip", "keep", "error", NULL};
    static const char *invalid_names[] = {"replace", "skip", "error", NULL};
    static const char *long_names[] = {"truncate", "skip", "error", NULL};
    static const char *dtype_names[] = {"f32", "f16", "bf16", NULL};
    static const tq_dtype dtypes[] = {TQ_DTYPE_F32, TQ_DTYPE_F16, TQ_DTYPE_BF16};
    static const char *prec_names[] = {"f32", "f16", "bf16", "int8", NULL};
    static const tq_dtype precs[] = {TQ_DTYPE_F32, TQ_DTYPE_F16, TQ_DTYPE_BF16, TQ_DTYPE_I8};
    *c = (cfg){IN_PLAIN, "text", NULL, 1048576, EMPTY_SKIP, INVALID_REPLACE, LONG_TRUNCATE,
               1024, TQ_DTYPE_F32};
    *model = "hash:384";
    int field_set = 0;
    *eo = (tq_embed_opts){.prec = TQ_DTYPE_F32, .on_long = TQ_LONG_TRUNCATE, .prec_default = 1};
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"model", required_argument, NULL, 'm'},
        {"tsv", no_argument, NULL, OPT_TSV},
        {"jsonl", no_argument, NULL, OPT_JSONL},
        {"field", required_argument, NULL, OPT_FIELD},
        {"id-field", required_argument, NULL, OPT_ID_FIELD},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"dtype", required_argument, NULL, OPT_DTYPE},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"max-line", required_argument, NULL, OPT_MAX_LINE},
        {"on-empty", required_argument, NULL, OPT_ON_EMPTY},
        {"on-invalid", required_argument, NULL, OPT_ON_INVALID},
        {"on-long", required_argument, NULL, OPT_ON_LONG},
        {"long", required_argument, NULL, OPT_LONG},
        {"prompt", required_argument, NULL, OPT_PROMPT},
        {"prompt-name", required_argument, NULL, OPT_PROMPT_NAME},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int o, modes = 0;
    while ((o = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS "m:", longopts)) != -1) {
        if (tq_tool_option(t, o, optarg, help))
            continue;
        switch (o) {
        case 'm':
            *model = optarg;
            break;
        case OPT_TSV:
            c->in = IN_TSV, modes++;
            break;
        case OPT_JSONL:
            c->in = IN_JSONL, modes++;
            break;
        case OPT_FIELD:
            c->field = optarg, field_set = 1;
            break;
        case OPT_ID_FIELD:
            c->id_field = optarg, field_set = 1;
            break;
        case OPT_BATCH:
            c->batch = tq_tool_int_arg(t, "--batch", optarg, 1, 1 << 24);
            break;
        case OPT_DTYPE:
            c->dtype = dtypes[pick(t, "--dtype", optarg, dtype_names)];
            break;
        case OPT_PRECISION:
            eo->prec = precs[pick(t, "--precision", optarg, prec_names)];
            eo->prec_default = 0;
            break;
        case OPT_MAX_LINE:
            c->max_line = (size_t)tq_tool_int_arg(t, "--max-line", optarg, 1, (int64_t)1 << 30);
            break;
        case OPT_ON_EMPTY:
            c->on_empty = pick(t, "--on-empty", optarg, empty_names);
            break;
        case OPT_ON_INVALID:
            c->on_invalid = pick(t, "--on-invalid", optarg, invalid_names);
            break;
        case OPT_ON_LONG:
            c->on_long = pick(t, "--on-long", optarg, long_names);
            break;
        case OPT_LONG:
            eo->on_long = pick(t, "--long", optarg, window_names);
            break;
        case OPT_PROMPT:
            eo->prompt = optarg;
            break;
        case OPT_PROMPT_NAME:
            eo->prompt_name = optarg;
            break;
        default:
            tq_tool_usage(t, "unknown option");
        }
    }
    if (modes > 1)
        tq_tool_usage(t, "--tsv and --jsonl exclude each other");
    if (field_set && c->in != IN_JSONL)
        tq_tool_usage(t, "--field and --id-field apply to --jsonl");
    if (eo->prompt && eo->prompt_name)
        tq_tool_usage(t, "--prompt and --prompt-name exclude each other");
    tq_tool_ready(t);
}

/* The work, for auto (tq(7)): a BERT folder's weights (model.safetensors's
 * bytes / 4) for each token of the texts; 0 for the other embedders, which
 * run on the CPU whatever the device; -1 when the texts' size is not known. */
static double embed_work(tq_tool *t, const char *model, char **files, int nfiles)
{
    struct stat sb;
    char path[4096];
    if (!model || (size_t)snprintf(path, sizeof path, "%s/model.safetensors", model) >= sizeof path ||
        stat(model, &sb) || !S_ISDIR(sb.st_mode) || stat(path, &sb))
        return 0;
    double bytes = 0;
    for (int i = 0; i < nfiles; i++) {
        double b = tq_tool_bytes(t, files[i]);
        if (b < 0 || b >= TQ_WORK_LARGE)
            return b;
        bytes += b;
    }
    return tq_work_embed((double)sb.st_size / 4, bytes);
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-embed");
    cfg c;
    const char *model;
    tq_embed_opts eo;
    parse_args(&t, argc, argv, &c, &model, &eo);

    char *stdin_only[] = {"-"};
    char **files = argv + optind;
    int nfiles = argc - optind;
    if (!nfiles)
        files = stdin_only, nfiles = 1;
    state s = {.t = &t, .c = &c};
#ifdef __GLIBC__
    /* A BERT model's encoder allocates its batch's tensors (a few MB each)
     * and frees them after every batch: glibc handed each back to the kernel
     * and faulted it in again (0.4 s of system time in a 2.3 s bf16 run of
     * 2,000 sentences; median wall of five 2.77 -> 2.45 s). Blocks up to 32 MB
     * stay in the heap; the peak is the batch's, as before. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    /* The device runs the BERT encoder's products; the other embedders are
     * plain CPU code and ignore it. */
    char hub[4096];
    model = model_path(&t, model, hub, sizeof hub);
    tq_device *dev = NULL;
    tq_status st = tq_tool_device_open(&t, embed_work(&t, model, files, nfiles), &dev);
    char note[256];
    if (!st)
        st = tq_embedder_open_opts(model, dev, &eo, note, sizeof note, &s.e);
    if (st)
        tq_tool_fail(&t, st);
    if (note[0])
        tq_tool_log(&t, TQ_LOG_INFO, "%s", note);
    for (int i = 0; i < nfiles; i++) { /* every input must open before any output */
        tq_lines *r;
        if (strcmp(files[i], "-") && (st = tq_lines_open(&r, files[i], 1)))
            tq_tool_fail(&t, st);
        if (strcmp(files[i], "-"))
            tq_lines_close(r);
    }
    int64_t dim = tq_embedder_dim(s.e), b = c.batch;
    s.meta_len = (size_t)snprintf(s.meta, sizeof s.meta, "model=%s", s.e->describe) + 1;
    s.toff = calloc((size_t)b + 1, sizeof *s.toff);
    s.ioff = calloc((size_t)b + 1, sizeof *s.ioff);
    s.lines = malloc((size_t)b * sizeof *s.lines);
    s.tp = malloc((size_t)b * sizeof *s.tp);
    s.ip = malloc((size_t)b * sizeof *s.ip);
    s.tl = malloc((size_t)b * sizeof *s.tl);
    s.il = malloc((size_t)b * sizeof *s.il);
    s.emb = malloc((size_t)(b * dim) * sizeof *s.emb);
    s.conv = c.dtype != TQ_DTYPE_F32 ? malloc((size_t)(b * dim) * 2) : NULL;
    if (!s.toff || !s.ioff || !s.lines || !s.tp || !s.ip || !s.tl || !s.il || !s.emb ||
        (c.dtype != TQ_DTYPE_F32 && !s.conv))
        tq_tool_fail(&t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    tq_tool_log(&t, TQ_LOG_INFO, "model %s, dim %lld, batch %lld, device %s, threads %d",
                s.e->describe, (long long)dim, (long long)b, tq_device_name(dev),
                tq_threads_get());
    if (s.e->tokenizer[0]) /* tokenizer.json when the folder has one, else vocab.txt */
        tq_tool_log(&t, TQ_LOG_INFO, "tokenizer: the model folder's %s", s.e->tokenizer);
    double t0 = tq_tool_now();
    if ((st = tq_tool_open_output(&t, &s.w)))
        tq_tool_fail(&t, st);
    for (int i = 0; i < nfiles && !st; i++)
        st = run_file(&s, files[i]);
    if (!st)
        st = flush(&s);
    tq_tool_progress_done(&t);
    tq_status cst = tq_writer_close(s.w, !st);
    double dt = tq_tool_now() - t0;
    if (!st && !cst) {
        tq_tool_log(&t, TQ_LOG_INFO,
                    "%lld lines: %lld rows embedded, %lld empty %s, %lld invalid UTF-8 "
                    "skipped, %lld repaired, %lld over-long skipped, %lld truncated",
                    (long long)s.line, (long long)s.rows, (long long)s.empty,
                    c.on_empty == EMPTY_SKIP ? "skipped" : "kept", (long long)s.invalid_skip,
                    (long long)s.invalid_fixed, (long long)s.long_skip, (long long)s.long_cut);
        tq_tool_log(&t, TQ_LOG_INFO, "%.1f MB of text in %.3f s: %.1f MB/s", s.bytes / 1e6, dt,
                    dt > 0 ? s.bytes / 1e6 / dt : 0.0);
        if (s.e->window && eo.on_long == TQ_LONG_CHUNK)
            tq_tool_log(&t, TQ_LOG_INFO,
                        "%lld texts longer than the model's window of %d tokens, embedded in "
                        "%lld windows (--long chunk)",
                        (long long)s.e->texts_long, s.e->window, (long long)s.e->windows);
        else if (s.e->window)
            tq_tool_log(&t, TQ_LOG_INFO,
                        "%lld texts longer than the model's window of %d tokens, cut to it "
                        "(--long chunk embeds them whole)",
                        (long long)s.e->texts_long, s.e->window);
        if (s.invalid_skip + s.invalid_fixed + s.long_skip + s.long_cut)
            tq_tool_log(&t, TQ_LOG_WARN,
                        "warning: %lld lines with invalid UTF-8 (%lld skipped), %lld over "
                        "--max-line (%lld skipped); -v for all counts",
                        (long long)(s.invalid_skip + s.invalid_fixed),
                        (long long)s.invalid_skip, (long long)(s.long_skip + s.long_cut),
                        (long long)s.long_skip);
    }
    tq_embedder_close(s.e);
    tq_tool_device_done(&t, dev);
    tq_device_close(dev);
    tq_buf_free(&s.text), tq_buf_free(&s.ids);
    free(s.toff), free(s.ioff), free(s.lines), free(s.tp), free(s.ip), free(s.tl), free(s.il);
    free(s.emb), free(s.conv);
    if (st)
        tq_tool_fail(&t, st);
    if (cst)
        tq_tool_fail(&t, cst);
    return 0;
}
