/* tool.h: what every tq tool shares: the common options, messages and exit
 * status of CONVENTIONS.md, output that refuses a terminal, and progress. The
 * tools in cmd/ parse their own options, call libtq, and report through this. */
#ifndef TQ_TOOL_H
#define TQ_TOOL_H

#include "pick.h"
#include "tq.h"

#include <getopt.h>
#include <stdio.h>

enum tq_log_level { TQ_LOG_ERROR = 0, TQ_LOG_WARN, TQ_LOG_INFO, TQ_LOG_DEBUG };

typedef struct tq_tool {
    const char *name;        /* "tq-cat" */
    const char *output;      /* -o FILE, or NULL for stdout */
    int force;               /* -f: binary output to a terminal */
    int log_level;           /* -q: error, default warn, -v info, -vv debug */
    const char *device;      /* --device, or NULL for TQ_DEVICE / auto */
    int threads;             /* --threads (0: TQ_THREADS or all cores) */
    uint64_t seed;           /* --seed */
    int seed_set;
    int progress;            /* resolved --progress: 1 show, 0 not */
    int list_devices;        /* --list-devices was given */
} tq_tool;

/* Long options every tool accepts; a tool lists TQ_COMMON_LONGOPTS in its own
 * table and TQ_COMMON_SHORTOPTS in its short option string. */
enum {
    TQ_OPT_DEVICE = 0x1000,
    TQ_OPT_LIST_DEVICES,
    TQ_OPT_THREADS,
    TQ_OPT_SEED,
    TQ_OPT_PROGRESS,
    TQ_OPT_TOOL_BASE = 0x1100 /* first code free for a tool's own long options */
};
#define TQ_COMMON_SHORTOPTS "o:qvhVf"
#define TQ_COMMON_LONGOPTS                                                         \
    {"output", required_argument, NULL, 'o'}, {"quiet", no_argument, NULL, 'q'},   \
        {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'},     \
        {"version", no_argument, NULL, 'V'}, {"force", no_argument, NULL, 'f'},    \
        {"device", required_argument, NULL, TQ_OPT_DEVICE},                        \
        {"list-devices", no_argument, NULL, TQ_OPT_LIST_DEVICES},                  \
        {"threads", required_argument, NULL, TQ_OPT_THREADS},                      \
        {"seed", required_argument, NULL, TQ_OPT_SEED},                            \
        {"progress", required_argument, NULL, TQ_OPT_PROGRESS}

/* The lines of --help that describe the common options. */
#define TQ_COMMON_HELP                                                                 \
    "Common options:\n"                                                                \
    "  -o, --output FILE     write to FILE atomically (default: standard output)\n"  \
    "  -f, --force           write binary output even to a terminal\n"              \
    "  -q, --quiet           print errors only\n"                                    \
    "  -v, --verbose         say what was chosen and totals (-vv: debug)\n"          \
    "      --device DEV      auto|cpu|vulkan|cuda|hip[:N] (default: $TQ_DEVICE or auto)\n" \
    "      --list-devices    list every backend and device, or why it is missing\n" \
    "      --threads N       CPU threads (default: $TQ_THREADS or all cores)\n"      \
    "      --seed N          seed for anything random (default: 0)\n"                \
    "      --progress WHEN   auto|always|never (default: auto, when stderr is a terminal)\n" \
    "  -h, --help            this help;  -V, --version: the version\n"

/* Sets the tool's name, signal handling (quiet SIGPIPE, temporary files removed
 * on SIGINT/SIGTERM/SIGHUP) and the defaults from the environment. */
void tq_tool_init(tq_tool *t, const char *name);

/* Handles a common option; returns 1 if it was one (and exits for -h/-V via the
 * callbacks given), 0 if the tool must handle opt itself. Bad values exit 2. */
int tq_tool_option(tq_tool *t, int opt, const char *arg, void (*help)(void));

/* getopt_long for the tools (opterr off): a bad option is a usage error named
 * as coreutils names it ("unrecognized option '--top-k'", "invalid option --
 * 'z'", "option '--db' requires an argument"), exit 2; else getopt_long's
 * value. */
int tq_tool_getopt(tq_tool *t, int argc, char **argv, const char *shortopts,
                   const struct option *longopts);

/* After option parsing: applies --threads, prints --list-devices and exits if
 * it was asked, resolves --progress. */
void tq_tool_ready(tq_tool *t);

/* Prints "tq-X: error: MESSAGE" and exits with the status's code; a PIPE status
 * exits 0 quietly. */
_Noreturn void tq_tool_fail(tq_tool *t, tq_status st);
/* A usage error: "tq-X: error: ...; see 'tq-X --help'", exit 2. */
_Noreturn void tq_tool_usage(tq_tool *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Messages at a level (shown when the level is enabled): "tq-X: ...". */
void tq_tool_log(tq_tool *t, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* What a tool knows of its work before it opens a device (lib/tool/workload.c),
 * asked only when auto weighs it (tq_device_auto_weighs): an input's
 * elements in tensors of rank 2 and more, from the frame headers (a pipe on
 * standard input is read ahead, up to 16 MiB, and made a file), with the
 * last two dims of the first such tensor. 0 counted, 1 a pipe longer than
 * the read-ahead (large work), -1 not known. */
typedef struct tq_census {
    double elems, rows, cols, bytes;
} tq_census;
int tq_tool_census(tq_tool *t, const char *path, tq_census *c);
/* The bytes of a text input the same way: -1 not known, TQ_WORK_LARGE a pipe
 * past the read-ahead. */
double tq_tool_bytes(tq_tool *t, const char *path);
/* Opens the device for work of about flops (< 0: not known), saying under -v
 * which device and why, and what its start took. */
tq_status tq_tool_device_open(tq_tool *t, double flops, tq_device **dev);

/* Under -v, names the ops that ran on the host because dev has no kernel for
 * them (tq_device_host_ops), and the graphs recorded and launched; call it
 * before closing the device. */
void tq_tool_device_done(tq_tool *t, const tq_device *dev);

/* Before any work, that an output FILE the tool will write later (a report, a
 * chart, a log: every path but "-") can be created where it is named: exits
 * 73 with "FILE: cannot create: WHY" when not, so that a run never fails at
 * its end having written its other outputs. Creates and removes a temporary
 * file beside FILE; a device or FIFO that exists is left to the write. */
void tq_tool_check_output(tq_tool *t, const char *path);
/* The same check, returning the status (TQ_ERR_CANTCREATE) instead of exiting. */
tq_status tq_tool_output_creatable(const char *path);

/* Opens the binary output (-o FILE or stdout), refusing a terminal without -f. */
tq_status tq_tool_open_output(tq_tool *t, tq_writer **w);
/* Opens the text output (-o FILE atomically, or stdout): a FILE* to fclose via
 * tq_tool_close_text. */
tq_status tq_tool_open_text(tq_tool *t, FILE **out, char **tmp_path);
tq_status tq_tool_close_text(tq_tool *t, FILE *out, char *tmp_path, int commit);

/* Progress on stderr, at most 4 updates a second, erased by progress_done. */
void tq_tool_progress(tq_tool *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tq_tool_progress_done(tq_tool *t);

/* The frame the tool reads (pick.h: the one rule of tq(7)), from the reader
 * r or, with r NULL, the file path (label in messages): says under -v which
 * frame and why; exits with the error (2, naming the candidates) when several
 * fit. p->name is "" when none fits. */
void tq_tool_pick(tq_tool *t, tq_reader *r, const char *path, const char *label, tq_pick *p);

/* Under -v, one line of what the tool took from each input (pick.h's
 * tq_took; those of rank 0 are left out): "queries: frame "emb" [1 x 384]
 * from standard input; keys and values: frame "emb" [2 x 384] from kv.tq". */
void tq_tool_took(tq_tool *t, const tq_took *took, int n);

/* The names of the frames of r's first batch ("\"key\", \"x\""), for a
 * message that says what an input held, and their count in *count (0: an
 * empty stream). Call it before reading r; a bad stream fails here. */
tq_status tq_tool_frame_names(tq_reader *r, char *buf, size_t n, size_t *count);

/* A temporary file of the tool (add 1; 0 when it is gone): removed when the
 * tool fails or is interrupted. PATH must outlive its registration. */
void tq_tool_tempfile(const char *path, int add);

/* An option's integer in lo..hi, or a usage error (exit 2) naming it. */
int64_t tq_tool_int_arg(tq_tool *t, const char *opt, const char *arg, int64_t lo, int64_t hi);

/* Seconds since an arbitrary start, monotonic. */
double tq_tool_now(void);

#endif
