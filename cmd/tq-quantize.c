/* tq-quantize: replaces vector frames by quantized codes (f16, bf16, int8 per
 * row or over per-dimension ranges, uint8, ggml's q8_0/q4_0, sign bits), or
 * back to f32, and reports the error. Options here; the codes and the stream
 * filter in lib/quant. */
#include "tool/tool.h"
#include "quant/quant.h"
#include "score/score.h"
#include "embed/embed.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    OPT_TO = TQ_OPT_TOOL_BASE,
    OPT_RANGES,
    OPT_NAME,
    OPT_REPORT,
    OPT_MODEL,
};

static void help(void)
{
    fputs(
        "Usage: tq-quantize --to CODE [OPTION]... [FILE]\n"
        "       tq-quantize --model DIR -o DIR8 [OPTION]...\n"
        "Replace the vector frames of a TQ stream by quantized codes, batch by batch;\n"
        "every other frame passes through.\n\n"
        "Codes (--to):\n"
        "  f16, bf16             round to nearest even (16 bits a value)\n"
        "  int8                  per row: scale = max|x| / 127, q = x / scale rounded half\n"
        "                        to even; the scales in \"NAME_scale\" f32 [n] before each batch\n"
        "  int8, uint8 --ranges  per dimension, as sentence-transformers' quantize_embeddings:\n"
        "                        floor((x - min) / step), step = (max - min) / 255, clipped\n"
        "                        to 0..255 (int8: minus 128); \"NAME_ranges\" f32 [2, d]\n"
        "  q8_0, q4_0            ggml's blocks of 32 (rows of a multiple of 32 values)\n"
        "  q2                    blocks of 32: 2 bits a value, a step d and an offset m\n"
        "                        (f16), x ~ q * d + m (rows of a multiple of 32 values)\n"
        "  bit                   one bit a value, 1 where x > 0, packed as numpy.packbits\n"
        "  f32                   dequantize any of these back to f32\n"
        "A model file of tq-train (its first frame \"model\"): its weight matrices to\n"
        "int8, q8_0, q4_0, f16 or bf16, the biases as they are (see tq-score(1)).\n\n"
        "Options:\n"
        "      --to CODE         the code (required)\n"
        "      --ranges SRC      the per-dimension ranges: a TQ file holding a \"NAME_ranges\"\n"
        "                        (or \"ranges\") frame [2, d], or calibration vectors; or\n"
        "                        auto: the input itself (a file: it is read twice)\n"
        "      --name NAME       a frame to replace (repeatable; default: the first rank 2\n"
        "                        float frame, or for f32 the first rank 2 code frame)\n"
        "      --report FILE     the figures of -v as a TQ stream, one row per frame name\n"
        "      --model DIR       a sentence-transformers folder (BERT, RoBERTa, MPNet; or\n"
        "                        ORG/NAME in the Hugging Face cache, as tq-embed -m) to\n"
        "                        the folder -o DIR8 (new or empty), whose encoder tq-embed\n"
        "                        runs in int8 as --precision int8 does, its calibration\n"
        "                        done here once (model.int8.safetensors; --to int8 implied)\n\n"
        TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-embed docs.txt | tq-quantize --to int8 -v > db8.tq\n"
        "  tq-quantize --to uint8 --ranges calib.tq < emb.tq > emb-u8.tq\n"
        "  tq-quantize --to bit < emb.tq | tq-quantize --to f32 | tq-cat -t tsv\n"
        "  tq-quantize --model all-MiniLM-L6-v2 -o minilm-int8 && tq-embed -m minilm-int8 docs.txt\n",
        stdout);
}

static int code_arg(tq_tool *t, const char *arg)
{
    static const struct {
        const char *name;
        tq_quant_code code;
    } names[] = {
        {"f32", TQ_QUANT_F32},   {"f16", TQ_QUANT_F16},   {"bf16", TQ_QUANT_BF16},
        {"int8", TQ_QUANT_INT8}, {"uint8", TQ_QUANT_UINT8_RANGES},
        {"q8_0", TQ_QUANT_Q8_0}, {"q4_0", TQ_QUANT_Q4_0}, {"bit", TQ_QUANT_BIT},
        {"q2", TQ_QUANT_Q2},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(arg, names[i].name))
            return names[i].code;
    tq_tool_usage(t, "--to wants f16, bf16, int8, uint8, q8_0, q4_0, q2, bit or f32, not '%s'",
                  arg);
}

/* The ranges of --ranges SRC (a file, or the input for auto). */
static tq_status load_ranges(tq_tool *t, const char *src, const char *input,
                             const char *name, tq_quant_opts *o, float **ranges)
{
    tq_reader *r;
    int64_t rows;
    tq_status st;
    if (!strcmp(src, "auto")) {
        /* auto reads the input twice: a file, or standard input that is one */
        struct stat sb;
        if (strcmp(input, "-"))
            st = tq_reader_open_path(&r, input);
        else if (fstat(0, &sb) || !S_ISREG(sb.st_mode))
            tq_tool_usage(t, "--ranges auto reads the input twice: give it as a file, not a pipe");
        else {
            int fd = dup(0);
            st = fd < 0 ? tq_fail(TQ_ERR_IO, "stdin: %s", strerror(errno))
                        : tq_reader_open_fd(&r, fd, "stdin");
        }
    } else {
        st = tq_reader_open_path(&r, src);
    }
    if (st)
        return st;
    st = tq_quant_ranges_read(r, name, ranges, &o->ranges_d, &rows);
    tq_reader_close(r);
    if (st) { /* the file named once: "--ranges FILE: why" */
        char msg[1024];
        size_t n = strlen(src);
        snprintf(msg, sizeof msg, "%s", tq_errmsg());
        if (!strncmp(msg, src, n) && msg[n] == ':')
            return tq_fail(st, "--ranges %s", msg);
        return tq_fail_context(st, "--ranges %s", src);
    }
    if (rows)
        tq_tool_log(t, TQ_LOG_INFO, "ranges of %lld dimensions from %lld calibration rows of %s",
                    (long long)o->ranges_d, (long long)rows, src);
    else
        tq_tool_log(t, TQ_LOG_INFO, "ranges of %lld dimensions read from %s",
                    (long long)o->ranges_d, src);
    if (!strcmp(src, "auto") && !strcmp(input, "-") && lseek(0, 0, SEEK_SET) != 0)
        return tq_fail(TQ_ERR_IO, "stdin: cannot read it again: %s", strerror(errno));
    o->ranges = *ranges;
    o->ranges_from = strcmp(src, "auto") ? src : tq_took_label(input);
    o->input_from = tq_took_label(input);
    return TQ_OK;
}

static double rmse(const tq_quant_stat *s)
{
    double n = (double)s->rows * (double)s->d;
    return n > 0 ? sqrt(s->se / n) : 0;
}

static double rel_rmse(const tq_quant_stat *s)
{
    return s->sx > 0 ? sqrt(s->se / s->sx) : 0;
}

static double bits(const tq_quant_stat *s)
{
    double n = (double)s->rows * (double)s->d;
    return n > 0 ? 8.0 * (double)s->bytes_out / n : 0;
}

static tq_status write_report(const char *path, const tq_quant_stat *s, int n)
{
    tq_writer *w;
    tq_status st = tq_writer_open_path(&w, path);
    if (st)
        return st;
    const char *names[TQ_QUANT_MAX_NAMES], *from[TQ_QUANT_MAX_NAMES], *to[TQ_QUANT_MAX_NAMES];
    size_t nl[TQ_QUANT_MAX_NAMES], fl[TQ_QUANT_MAX_NAMES], tl[TQ_QUANT_MAX_NAMES];
    int64_t iv[4][TQ_QUANT_MAX_NAMES];
    double fv[6][TQ_QUANT_MAX_NAMES];
    for (int i = 0; i < n; i++) {
        names[i] = s[i].name, nl[i] = strlen(names[i]);
        from[i] = tq_dtype_name(s[i].from), fl[i] = strlen(from[i]);
        to[i] = tq_dtype_name(s[i].to), tl[i] = strlen(to[i]);
        iv[0][i] = s[i].rows, iv[1][i] = s[i].d;
        iv[2][i] = (int64_t)s[i].bytes_in, iv[3][i] = (int64_t)s[i].bytes_out;
        fv[0][i] = bits(&s[i]);
        /* dequantizing has no input to measure against: NaN */
        fv[1][i] = s[i].measured ? rmse(&s[i]) : NAN;
        fv[2][i] = s[i].measured ? rel_rmse(&s[i]) : NAN;
        fv[3][i] = s[i].measured && s[i].rows ? s[i].cos_sum / (double)s[i].rows : NAN;
        fv[4][i] = s[i].measured && s[i].rows ? s[i].cos_min : NAN;
        fv[5][i] = s[i].measured ? s[i].max_abs : NAN;
    }
    static const char *ik[] = {"rows", "dim", "bytes_in", "bytes_out"};
    static const char *fk[] = {"bits_per_value", "rmse", "rel_rmse", "cos_mean", "cos_min",
                               "max_abs_err"};
    int64_t dims[1] = {n};
    st = tq_writer_write_str(w, "name", n, names, nl);
    if (!st)
        st = tq_writer_write_str(w, "from", n, from, fl);
    if (!st)
        st = tq_writer_write_str(w, "to", n, to, tl);
    for (int k = 0; k < 4 && !st; k++)
        st = tq_writer_write(w, ik[k], TQ_DTYPE_I64, 1, dims, NULL, 0, iv[k],
                             (uint64_t)n * 8);
    for (int k = 0; k < 6 && !st; k++)
        st = tq_writer_write(w, fk[k], TQ_DTYPE_F64, 1, dims, NULL, 0, fv[k],
                             (uint64_t)n * 8);
    tq_status cst = tq_writer_close(w, !st);
    return st ? st : cst;
}

/* A model file of tq-train: its weight matrices coded (lib/score). */
static int quantize_model(tq_tool *t, const tq_quant_opts *o, tq_reader *r, tq_writer *w,
                          const char *input, int report, double t0)
{
    if (o->nnames || report || o->ranges)
        tq_tool_usage(t, "%s is a model file: --name, --ranges and --report are for vectors",
                      tq_took_label(input));
    if (o->code != TQ_QUANT_INT8 && o->code != TQ_QUANT_Q8_0 && o->code != TQ_QUANT_Q4_0 &&
        o->code != TQ_QUANT_F16 && o->code != TQ_QUANT_BF16)
        tq_tool_usage(t, "%s is a model file: its weights take --to int8, q8_0, q4_0, f16 "
                         "or bf16, not %s", tq_took_label(input), tq_quant_code_name(o->code));
    tq_score_quant_stat ms;
    tq_status st = tq_score_model_quantize(r, w, o->code, &ms);
    tq_status cst = tq_writer_close(w, !st);
    if (!st)
        st = cst;
    tq_reader_close(r);
    if (st)
        tq_tool_fail(t, st);
    tq_tool_log(t, TQ_LOG_INFO,
                "model: %lld weights to %s, %llu -> %llu bytes of payload (%.3fx), "
                "weights' rmse %.3g, relative rmse %.3g, max abs error %.3g, %.3f s",
                (long long)ms.weights, tq_quant_code_name(o->code),
                (unsigned long long)ms.bytes_in, (unsigned long long)ms.bytes_out,
                ms.bytes_in ? (double)ms.bytes_out / (double)ms.bytes_in : 0.0,
                ms.weights ? sqrt(ms.se / (double)ms.weights) : 0.0,
                ms.sx > 0 ? sqrt(ms.se / ms.sx) : 0.0, ms.max_abs, tq_tool_now() - t0);
    return 0;
}

/* --model DIR -o DIR8: an encoder folder quantized (lib/embed/bert_quantize.c) */
static int quantize_folder(tq_tool *t, const char *dir, int to_set, tq_quant_code code,
                           int other_opts, int inputs)
{
    if (to_set && code != TQ_QUANT_INT8)
        tq_tool_usage(t, "--model quantizes an encoder to int8, not %s", tq_quant_code_name(code));
    if (other_opts || inputs)
        tq_tool_usage(t, "--model takes no input file, --name, --ranges or --report");
    if (!t->output || !strcmp(t->output, "-"))
        tq_tool_usage(t, "--model writes a model folder: give it with -o DIR8");
    if (t->device && strcmp(t->device, "cpu") && strcmp(t->device, "auto"))
        tq_tool_usage(t, "--model calibrates on the CPU, whose products alone are int8 in "
                         "this version: not --device %s", t->device);
    /* a hub name as tq-embed -m takes it: the folder in the local cache */
    char hub[4096];
    struct stat sb;
    if (stat(dir, &sb) && errno == ENOENT && tq_embed_hub_folder(dir, hub, sizeof hub) > 0) {
        tq_tool_log(t, TQ_LOG_INFO, "model %s: %s (the Hugging Face cache)", dir, hub);
        dir = hub;
    }
    double t0 = tq_tool_now();
    tq_device *dev = NULL;
    tq_embed_quant_info qi;
    tq_status st = tq_device_open("cpu", &dev);
    if (!st)
        st = tq_embed_quantize_folder(dir, t->output, dev, &qi);
    tq_device_close(dev);
    if (st)
        tq_tool_fail(t, st);
    tq_tool_log(t, TQ_LOG_INFO,
                "%s: %s, %lld layers of %lld, calibrated in %.3f s on the CPU; %s written: "
                "%llu bytes (%.3fx the %llu of model.safetensors), the second feed-forward "
                "product %s; %d other files copied; %.3f s",
                dir, qi.arch, (long long)qi.layers, (long long)qi.hidden, qi.calib_s,
                t->output, (unsigned long long)qi.int8_bytes,
                qi.f32_bytes ? (double)qi.int8_bytes / (double)qi.f32_bytes : 0.0,
                (unsigned long long)qi.f32_bytes, tq_dtype_name(qi.ffn2), qi.files,
                tq_tool_now() - t0);
    return 0;
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-quantize");
    tq_quant_opts o;
    memset(&o, 0, sizeof o);
    int to_set = 0;
    const char *ranges_src = NULL, *report = NULL, *model = NULL;
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"to", required_argument, NULL, OPT_TO},
        {"ranges", required_argument, NULL, OPT_RANGES},
        {"name", required_argument, NULL, OPT_NAME},
        {"report", required_argument, NULL, OPT_REPORT},
        {"model", required_argument, NULL, OPT_MODEL},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int c;
    while ((c = tq_tool_getopt(&t, argc, argv, TQ_COMMON_SHORTOPTS, longopts)) != -1) {
        if (tq_tool_option(&t, c, optarg, help))
            continue;
        switch (c) {
        case OPT_TO:
            o.code = (tq_quant_code)code_arg(&t, optarg), to_set = 1;
            break;
        case OPT_RANGES:
            if (!*optarg)
                tq_tool_usage(&t, "--ranges wants a file or auto");
            ranges_src = optarg;
            break;
        case OPT_NAME:
            if (!*optarg)
                tq_tool_usage(&t, "--name wants a frame name");
            if (o.nnames == TQ_QUANT_MAX_NAMES)
                tq_tool_usage(&t, "--name: at most %d", TQ_QUANT_MAX_NAMES);
            o.names[o.nnames++] = optarg;
            break;
        case OPT_REPORT:
            report = optarg;
            break;
        case OPT_MODEL:
            if (!*optarg)
                tq_tool_usage(&t, "--model wants a model folder");
            model = optarg;
            break;
        default:
            tq_tool_usage(&t, "unknown option");
        }
    }
    tq_tool_ready(&t);
    if (model)
        return quantize_folder(&t, model, to_set, o.code, o.nnames || ranges_src || report,
                               argc - optind);
    if (!to_set)
        tq_tool_usage(&t, "--to CODE is required");
    if (argc - optind > 1)
        tq_tool_usage(&t, "one input at most, not %d", argc - optind);
    const char *input = optind < argc ? argv[optind] : "-";
    if (ranges_src && o.code == TQ_QUANT_INT8)
        o.code = TQ_QUANT_INT8_RANGES;
    if (ranges_src && o.code != TQ_QUANT_INT8_RANGES && o.code != TQ_QUANT_UINT8_RANGES)
        tq_tool_usage(&t, "--ranges goes with --to int8 or uint8, not %s",
                      tq_quant_code_name(o.code));
    if (o.code == TQ_QUANT_UINT8_RANGES && !ranges_src)
        tq_tool_usage(&t, "--to uint8 needs --ranges FILE or --ranges auto");
    if (o.nnames > 1 && ranges_src)
        tq_tool_usage(&t, "--ranges holds the ranges of one frame: give one --name");
    o.measure = report || t.log_level >= TQ_LOG_INFO;

    tq_tool_check_output(&t, report);

    float *ranges = NULL;
    tq_reader *r = NULL;
    tq_writer *w = NULL;
    tq_status st = TQ_OK;
    if (ranges_src)
        st = load_ranges(&t, ranges_src, input, o.nnames ? o.names[0] : NULL, &o, &ranges);
    if (!st)
        st = tq_reader_open_path(&r, input);
    if (!st)
        st = tq_tool_open_output(&t, &w);
    if (st)
        tq_tool_fail(&t, st);
    double t0 = tq_tool_now();
    char frames[200];
    size_t nframes;
    if ((st = tq_tool_frame_names(r, frames, sizeof frames, &nframes)))
        tq_tool_fail(&t, st);
    if (tq_score_is_model(r))
        return quantize_model(&t, &o, r, w, input, report != NULL, t0);
    tq_quant_stat stats[TQ_QUANT_MAX_NAMES];
    int nstats = 0;
    st = tq_quant_run(&o, r, w, stats, &nstats);
    /* as tq-simmat: an empty stream has nothing to do (exit 0), frames of
     * which none is to be replaced are an error, never the input passed back */
    int done = 0;
    for (int i = 0; i < nstats; i++)
        done += stats[i].from != TQ_DTYPE_INVALID;
    const char *verb = o.code == TQ_QUANT_F32 ? "dequantize" : "quantize";
    if (!st && !done && nframes && o.nnames)
        st = tq_fail(TQ_ERR_DATA, "no frame to %s in %s: no frame \"%s\"%s among its frames (%s)",
                     verb, tq_took_label(input), o.names[0], o.nnames > 1 ? " (nor the others of --name)" : "",
                     frames);
    else if (!st && !done && nframes)
        st = tq_fail(TQ_ERR_DATA, "no frame to %s in %s: none of its frames (%s) is %s", verb,
                     tq_took_label(input), frames,
                     o.code == TQ_QUANT_F32 ? "tq-quantize's codes"
                                            : "a float frame other than key (as tq-embed writes them)");
    tq_status cst = tq_writer_close(w, !st);
    if (!st)
        st = cst;
    tq_reader_close(r);
    /* the report is written after the stream is committed: a failure there
     * must not leave the stream behind as if the run had succeeded */
    int wrote_output = !st && t.output && strcmp(t.output, "-");
    free(ranges);
    /* a name asked for that the stream did not have: said, not reported */
    int kept = 0;
    for (int i = 0; i < nstats; i++)
        if (stats[i].from != TQ_DTYPE_INVALID)
            stats[kept++] = stats[i];
        else if (!st && nframes)
            tq_tool_log(&t, TQ_LOG_WARN, "no frame \"%s\" in the input", stats[i].name);
    nstats = kept;
    if (!st && report && (st = write_report(report, stats, nstats)) && wrote_output)
        unlink(t.output);
    if (st)
        tq_tool_fail(&t, st);
    double secs = tq_tool_now() - t0;
    for (int i = 0; i < nstats; i++) {
        const tq_quant_stat *s = &stats[i];
        char err[256] = "";
        if (s->measured && s->rows)
            snprintf(err, sizeof err,
                     ", rmse %.3g, relative rmse %.3g, row cosine mean %.6f min %.6f, "
                     "max abs error %.3g",
                     rmse(s), rel_rmse(s), s->cos_sum / (double)s->rows, s->cos_min, s->max_abs);
        tq_tool_log(&t, TQ_LOG_INFO,
                    "%s: %s -> %s, %lld x %lld, %llu -> %llu bytes, %.3g bits a value%s", s->name,
                    tq_dtype_name(s->from), tq_dtype_name(s->to), (long long)s->rows,
                    (long long)s->d, (unsigned long long)s->bytes_in,
                    (unsigned long long)s->bytes_out, bits(s), err);
    }
    tq_tool_log(&t, TQ_LOG_INFO, "%s, %d thread%s, %.3f s", tq_quant_code_name(o.code),
                tq_threads_get(), tq_threads_get() == 1 ? "" : "s", secs);
    return 0;
}
