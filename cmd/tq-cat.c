/* tq-cat: see and convert TQ streams: pass-through and concatenation, a table of
 * frames, (de)compression. */
#include "tool.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>

enum { OPT_INFO = TQ_OPT_TOOL_BASE };

static void help(void)
{
    fputs("Usage: tq-cat [OPTION]... [FILE]...\n"
          "Concatenate TQ streams (FILE, or - for standard input; none: standard input),\n"
          "show what they hold, and convert them.\n\n"
          "  -i, --info            print a table of frames instead of the stream\n"
          "  -z, --compress[=N]    (re)compress every payload with zlib (level N, default 6)\n"
          "  -Z, --decompress      store every payload uncompressed\n\n" TQ_COMMON_HELP
          "\nExamples:\n"
          "  tq-cat --info emb.tq\n"
          "  tq-cat a.tq b.tq -z -o all.tq\n",
          stdout);
}

static void human(char *out, size_t n, uint64_t b)
{
    if (b >= 10u << 20)
        snprintf(out, n, "%.1fM", (double)b / (1 << 20));
    else if (b >= 10u << 10)
        snprintf(out, n, "%.1fK", (double)b / (1 << 10));
    else
        snprintf(out, n, "%llu", (unsigned long long)b);
}

static void info_row(FILE *out, const tq_frame *f)
{
    char shape[256] = "";
    size_t k = 0;
    for (int i = 0; i < f->rank && k < sizeof shape; i++)
        k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%lld", i ? "x" : "",
                              (long long)f->dims[i]);
    if (f->rank == 0)
        snprintf(shape, sizeof shape, "scalar");
    char st[32], raw[32];
    human(st, sizeof st, f->stored_size);
    human(raw, sizeof raw, f->raw_size);
    fprintf(out, "%5llu  %-16s %-5s %-20s %9s %9s  %s\n", (unsigned long long)f->index,
            f->name, tq_dtype_name(f->dtype), shape, st, raw,
            f->flags & TQ_FLAG_ZLIB ? "zlib" : "-");
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-cat");
    int info = 0, level = -1;
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"info", no_argument, NULL, 'i'},
        {"compress", optional_argument, NULL, 'z'},
        {"decompress", no_argument, NULL, 'Z'},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, TQ_COMMON_SHORTOPTS "iz::Z", longopts, NULL)) != -1) {
        if (tq_tool_option(&t, c, optarg, help))
            continue;
        switch (c) {
        case 'i':
            info = 1;
            break;
        case 'z':
            level = optarg ? atoi(optarg) : 6;
            if (level < 1 || level > 9)
                tq_tool_usage(&t, "--compress level must be 1..9");
            break;
        case 'Z':
            level = 0;
            break;
        default:
            tq_tool_usage(&t, "unknown option");
        }
    }
    tq_tool_ready(&t);

    tq_reader *r = NULL;
    tq_status st;
    const char *first = optind < argc ? argv[optind] : "-";
    if ((st = tq_reader_open_path(&r, first)))
        tq_tool_fail(&t, st);
    for (int i = optind + 1; i < argc; i++) {
        int fd = 0;
        if (strcmp(argv[i], "-")) {
            tq_reader *probe;
            /* open through the library so the error is the usual one */
            if ((st = tq_reader_open_path(&probe, argv[i])))
                tq_tool_fail(&t, st);
            tq_reader_close(probe);
            fd = open(argv[i], O_RDONLY);
        }
        if ((st = tq_reader_chain_fd(r, fd, argv[i])))
            tq_tool_fail(&t, st);
    }

    FILE *text = NULL;
    char *tmp = NULL;
    tq_writer *w = NULL;
    if (info) {
        if ((st = tq_tool_open_text(&t, &text, &tmp)))
            tq_tool_fail(&t, st);
        fprintf(text, "%5s  %-16s %-5s %-20s %9s %9s  %s\n", "frame", "name", "dtype", "shape",
                "stored", "raw", "codec");
    } else if ((st = tq_tool_open_output(&t, &w))) {
        tq_tool_fail(&t, st);
    }
    tq_frame *f;
    uint64_t frames = 0, bytes = 0;
    double t0 = tq_tool_now();
    while ((st = tq_reader_next(r, &f)) == TQ_OK) {
        frames++;
        bytes += f->stored_size;
        if (info)
            info_row(text, f);
        else if (level < 0)
            st = tq_writer_put(w, f);
        else
            st = tq_writer_recompress(w, f, level);
        if (st)
            break;
        tq_tool_progress(&t, "%llu frames, %.1f MB", (unsigned long long)frames, bytes / 1e6);
    }
    tq_tool_progress_done(&t);
    int ok = st == TQ_EOF;
    tq_status cst = info ? tq_tool_close_text(&t, text, tmp, ok) : tq_writer_close(w, ok);
    tq_reader_close(r);
    if (!ok)
        tq_tool_fail(&t, st);
    if (cst)
        tq_tool_fail(&t, cst);
    double dt = tq_tool_now() - t0;
    tq_tool_log(&t, TQ_LOG_INFO, "%llu frames, %llu payload bytes, %.3f s",
                (unsigned long long)frames, (unsigned long long)bytes, dt);
    return 0;
}
