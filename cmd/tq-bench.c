/* tq-bench: how fast each op of the op API runs on each device, against the
 * device's measured ceilings; --check compares every device with the CPU,
 * --compare two runs. Options and files here; the measuring, the ceilings,
 * the writers and the comparisons in lib/bench. */
#include "tool/tool.h"
#include "bench/bench.h"
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_OP = TQ_OPT_TOOL_BASE,
    OPT_FORMAT,
    OPT_MIN_TIME,
    OPT_CEILINGS,
    OPT_CHECK,
    OPT_COMPARE,
    OPT_BASELINE,
    OPT_FAIL_SLOWER,
    OPT_SVG,
    OPT_TOOLS,
};

static void help(void)
{
    fputs(
        "Usage: tq-bench [OPTION]...\n"
        "       tq-bench --check [OPTION]...\n"
        "       tq-bench --compare OLD.json NEW.json [--fail-slower PCT]\n"
        "Time every op of the op API at several sizes on every device, against the\n"
        "device's own measured ceilings (FMA peak, sgemm rate, memory bandwidth).\n\n"
        "What to run:\n"
        "      --op LIST         ops, comma-separated (default: all); 'list' lists them\n"
        "  -n, --size LIST       sizes: 1024,4096 or ranges 1024-16384*2 (x2 steps),\n"
        "                        100-500+100 (default: each op's, smaller on CPU-type\n"
        "                        GPU devices such as lavapipe)\n"
        "      --device LIST     all (default: every device that opens) or a list,\n"
        "                        cpu,vulkan:0,cuda:0\n"
        "  -r, --reps N          timed repetitions (default: 5), after a warm-up\n"
        "      --min-time MS     each repetition lasts at least MS ms (default: 10)\n"
        "      --ceilings        only measure and report the ceilings\n"
        "      --tools           also time the tools beside tq-bench as whole processes\n\n"
        "Output:\n"
        "      --format FMT      md (default), csv, json (every repetition), jsonl\n"
        "      --svg FILE        a chart of the rates against the ceilings, by size\n\n"
        "Checks and comparisons:\n"
        "      --check           every op on every device against the CPU; exit 1 on a\n"
        "                        mismatch\n"
        "      --compare OLD NEW two JSON reports, the ratio per row\n"
        "      --baseline OLD    compare this run with OLD (the table on stderr)\n"
        "      --fail-slower PCT exit 1 when a row is slower by more than PCT percent,\n"
        "                        beyond both runs' spreads\n\n" TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-bench                                   # every op, every device\n"
        "  tq-bench --op matmul,attention -n 512-2048*2 --device cpu\n"
        "  tq-bench --format json -o run.json --svg run.svg\n"
        "  tq-bench --check --device all\n"
        "  tq-bench --compare old.json new.json --fail-slower 10\n",
        stdout);
}

static long long count_arg(tq_tool *t, const char *opt, const char *arg, long long lo,
                           long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < lo || v > hi)
        tq_tool_usage(t, "%s wants a number %lld..%lld, not '%s'", opt, lo, hi, arg);
    return v;
}

static double number_arg(tq_tool *t, const char *opt, const char *arg, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !(v >= lo && v <= hi))
        tq_tool_usage(t, "%s wants a number %g..%g, not '%s'", opt, lo, hi, arg);
    return v;
}

/* --device: "all", or a comma list of specs; each opened. */
static int open_devices(tq_tool *t, const char *spec, tq_device ***out)
{
    tq_device **devs = NULL;
    int n = 0;
    char *list = strdup(spec && *spec ? spec : "all");
    if (!list)
        tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    char *save = NULL;
    for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        static const char *const all[] = {"cpu", "vulkan", "cuda", "hip"};
        int is_all = !strcmp(w, "all");
        for (int b = 0; b < (is_all ? 4 : 1); b++)
            for (int i = 0; i < (is_all && b ? 64 : 1); i++) {
                char name[64];
                if (is_all && b)
                    snprintf(name, sizeof name, "%s:%d", all[b], i);
                else
                    snprintf(name, sizeof name, "%s", is_all ? all[b] : w);
                tq_status st = tq_device_check(name);
                if (st && is_all)
                    break; /* the backend's devices end here, or it has none */
                if (st == TQ_ERR_USAGE)
                    tq_tool_usage(t, "%s", tq_errmsg());
                tq_device *d;
                if (st || (st = tq_device_open(name, &d)))
                    tq_tool_fail(t, st);
                tq_device **nd = realloc(devs, (size_t)(n + 1) * sizeof *nd);
                if (!nd)
                    tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
                devs = nd;
                devs[n++] = d;
            }
    }
    free(list);
    if (!n)
        tq_tool_usage(t, "--device wants all or a list of devices");
    *out = devs;
    return n;
}

static void on_progress(void *ctx, const char *device, const char *op, int64_t n)
{
    tq_tool_progress(ctx, "%s %s n=%lld", device, op, (long long)n);
}

static void on_failed(void *ctx, const char *msg) { tq_tool_log(ctx, TQ_LOG_WARN, "warning: %s", msg); }

/* Writes a text file through -o's atomic path (or stdout for NULL). */
static tq_status write_text(tq_tool *t, const char *path, tq_status (*fn)(FILE *, const void *),
                            const void *arg)
{
    const char *keep = t->output;
    t->output = path;
    FILE *f;
    char *tmp;
    tq_status st = tq_tool_open_text(t, &f, &tmp);
    if (!st) {
        st = fn(f, arg);
        tq_status cst = tq_tool_close_text(t, f, tmp, !st);
        st = st ? st : cst;
    }
    t->output = keep;
    return st;
}

static tqb_format report_format;
static tq_status report_fn(FILE *f, const void *r) { return tqb_report_write(f, report_format, r); }
static tq_status svg_fn(FILE *f, const void *r) { return tqb_svg_write(f, r); }

typedef struct cmp_args {
    const char *old_path, *new_path;
    const tqb_report *new_r;
    double fail_pct;
    int slower;
} cmp_args;
static tq_status compare_fn(FILE *f, const void *a)
{
    cmp_args *c = (cmp_args *)a;
    return tqb_compare(f, c->old_path, c->new_path, c->new_r, c->fail_pct, &c->slower);
}

/* The options, as parse_args leaves them. */
typedef struct opts {
    const char *op_list, *size_list, *devices, *svg;
    const char *baseline;
    int reps, ceilings_only, check, compare, tools;
    double min_ms, fail_pct;
} opts;

/* The getopt loop: the options into o (the report format into report_format). */
static void parse_args(tq_tool *t, int argc, char **argv, opts *o)
{
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"op", required_argument, NULL, OPT_OP},
        {"size", required_argument, NULL, 'n'},
        {"reps", required_argument, NULL, 'r'},
        {"min-time", required_argument, NULL, OPT_MIN_TIME},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"ceilings", no_argument, NULL, OPT_CEILINGS},
        {"check", no_argument, NULL, OPT_CHECK},
        {"compare", no_argument, NULL, OPT_COMPARE},
        {"baseline", required_argument, NULL, OPT_BASELINE},
        {"fail-slower", required_argument, NULL, OPT_FAIL_SLOWER},
        {"svg", required_argument, NULL, OPT_SVG},
        {"tools", no_argument, NULL, OPT_TOOLS},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS "n:r:", longopts)) != -1) {
        if (opt == TQ_OPT_DEVICE) { /* a list or all: checked here, not by tool.c */
            o->devices = optarg;
            continue;
        }
        if (tq_tool_option(t, opt, optarg, help))
            continue;
        switch (opt) {
        case OPT_OP:
            o->op_list = optarg;
            break;
        case 'n':
            o->size_list = optarg;
            break;
        case 'r':
            o->reps = (int)count_arg(t, "-r", optarg, 1, 1000);
            break;
        case OPT_MIN_TIME:
            o->min_ms = number_arg(t, "--min-time", optarg, 0, 60000);
            break;
        case OPT_FORMAT:
            if (!strcmp(optarg, "md") || !strcmp(optarg, "markdown"))
                report_format = TQB_FMT_MD;
            else if (!strcmp(optarg, "csv"))
                report_format = TQB_FMT_CSV;
            else if (!strcmp(optarg, "json"))
                report_format = TQB_FMT_JSON;
            else if (!strcmp(optarg, "jsonl"))
                report_format = TQB_FMT_JSONL;
            else
                tq_tool_usage(t, "--format wants md, csv, json or jsonl, not '%s'", optarg);
            break;
        case OPT_CEILINGS:
            o->ceilings_only = 1;
            break;
        case OPT_CHECK:
            o->check = 1;
            break;
        case OPT_COMPARE:
            o->compare = 1;
            break;
        case OPT_BASELINE:
            o->baseline = optarg;
            break;
        case OPT_FAIL_SLOWER:
            o->fail_pct = number_arg(t, "--fail-slower", optarg, 0, 1e6);
            break;
        case OPT_SVG:
            o->svg = optarg;
            break;
        case OPT_TOOLS:
            o->tools = 1;
            break;
        default:
            tq_tool_usage(t, "unknown option");
        }
    }
}

/* The ops of --op (a comma list, or all when none). */
static int pick_ops(tq_tool *t, const char *op_list, const tqb_opdef **ops)
{
    int nops = 0;
    if (!op_list || !strcmp(op_list, "all")) {
        for (int i = 0; i < tqb_nops; i++)
            ops[nops++] = &tqb_ops[i];
    } else {
        char *list = strdup(op_list), *save = NULL;
        if (!list)
            tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
        for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            const tqb_opdef *op = tqb_op_find(w);
            if (!op)
                tq_tool_usage(t, "unknown op '%s' (tq-bench --op list)", w);
            if (nops < 64)
                ops[nops++] = op;
        }
        free(list);
        if (!nops)
            tq_tool_usage(t, "--op wants a list of ops");
    }
    return nops;
}

/* --check: each op on each device against the CPU; the exit status. */
static int run_check(tq_tool *t, tq_device **devs, int ndev, const tqb_opdef **ops, int nops,
                     const int64_t *sizes, int nsizes)
{
    tq_status st;
    tq_device *cpu = NULL;
    /* the reference: the CPU device */
    if ((st = tq_device_open("cpu", &cpu)))
        tq_tool_fail(t, st);
    FILE *f;
    char *tmp;
    int bad = 0;
    if ((st = tq_tool_open_text(t, &f, &tmp)))
        tq_tool_fail(t, st);
    for (int d = 0; d < ndev && !st; d++)
        for (int o = 0; o < nops && !st; o++) {
            const tqb_opdef *op = ops[o];
            int64_t n = nsizes ? sizes[0] : op->small[1];
            tq_tool_progress(t, "check %s %s", tq_device_name(devs[d]), op->name);
            st = tqb_check(f, op, devs[d], cpu, n, t->seed, &bad);
        }
    tq_tool_progress_done(t);
    tq_status cst = tq_tool_close_text(t, f, tmp, !st);
    st = st ? st : cst;
    for (int d = 0; d < ndev; d++)
        tq_device_close(devs[d]);
    free(devs);
    tq_device_close(cpu);
    if (st)
        tq_tool_fail(t, st);
    if (bad)
        tq_tool_log(t, TQ_LOG_ERROR, "error: %d op%s differ%s from the CPU", bad,
                    bad == 1 ? "" : "s", bad == 1 ? "s" : "");
    return bad ? 1 : 0;
}

/* The ceilings and the runs of the ops, the report and the baseline; the exit status. */
static int run_bench(tq_tool *t, const opts *o, tq_device **devs, int ndev, const tqb_opdef **ops,
                     int nops, int64_t *sizes, int nsizes)
{
    tq_status st;
    int failed = 0;
    tqb_report r;
    memset(&r, 0, sizeof r);
    r.ctx.devs = devs;
    r.ctx.ndev = ndev;
    r.ctx.threads = tq_threads_get();
    r.ceil = calloc((size_t)ndev, sizeof *r.ceil);
    const char *notes[64];
    char note_buf[8][256];
    r.notes = notes;
    if (!r.ceil)
        tq_tool_fail(t, tq_fail(TQ_ERR_NOMEM, "out of memory"));
    for (int d = 0; d < ndev; d++) {
        tq_tool_progress(t, "ceilings of %s", tq_device_name(devs[d]));
        if ((st = tqb_ceiling_measure(devs[d], o->min_ms / 1e3, &r.ceil[d])))
            tq_tool_fail(t, st);
        if (tqb_device_small(devs[d]) && !nsizes && r.nnotes < 8) {
            snprintf(note_buf[r.nnotes], sizeof note_buf[0],
                     tqb_device_cpu_type(devs[d])
                         ? "%s is a CPU-type device: its default sizes are the smaller ones."
                         : "%s: the smaller default sizes (TQ_BENCH_SMALL=1).",
                     tq_device_name(devs[d]));
            notes[r.nnotes] = note_buf[r.nnotes];
            r.nnotes++;
        }
    }
    if (!o->ceilings_only) {
        tqb_plan plan = {ops, nops, nsizes ? sizes : NULL, nsizes, o->reps, o->min_ms / 1e3,
                         t->seed, on_progress, on_failed, t};
        if ((st = tqb_run(&plan, &r, &failed)))
            tq_tool_fail(t, st);
        if (o->tools) {
            char self[4096];
            ssize_t l = readlink("/proc/self/exe", self, sizeof self - 1);
            self[l > 0 ? l : 0] = 0;
            char *slash = strrchr(self, '/');
            if (slash)
                *slash = 0;
            if ((st = tqb_tools_run(l > 0 ? self : ".", o->reps, &r.rows, &r.nrows, &failed,
                                         t->log_level >= TQ_LOG_WARN ? stderr : NULL)))
                tq_tool_fail(t, st);
        }
    }
    tq_tool_progress_done(t);
    /* ops a device has no kernel for ran on the host: their rows time that */
    for (int d = 0; d < ndev && !o->ceilings_only; d++)
        if (tq_device_host_ops(devs[d])[0] && r.nnotes < 8) {
            snprintf(note_buf[r.nnotes], sizeof note_buf[0],
                     "%s ran these ops on the host (no kernel on this device): %s.",
                     tq_device_name(devs[d]), tq_device_host_ops(devs[d]));
            notes[r.nnotes] = note_buf[r.nnotes];
            r.nnotes++;
        }
    for (int i = 0; i < r.nrows; i++)
        if (r.rows[i].t.mad_pct > TQB_NOISY_PCT)
            tq_tool_log(t, TQ_LOG_WARN, "warning: %s %s %s: spread %.1f%% is too high to trust",
                        r.rows[i].device, r.rows[i].op, r.rows[i].shape, r.rows[i].t.mad_pct);
    if ((st = write_text(t, t->output, report_fn, &r)))
        tq_tool_fail(t, st);
    if (o->svg && (st = write_text(t, o->svg, svg_fn, &r))) {
        if (t->output && strcmp(t->output, "-"))
            unlink(t->output); /* the run failed: not half its outputs */
        tq_tool_fail(t, st);
    }
    int slower = 0;
    if (o->baseline) {
        tq_tool_progress_done(t);
        if ((st = tqb_compare(stderr, o->baseline, NULL, &r, o->fail_pct, &slower)))
            tq_tool_fail(t, st);
    }
    tqb_report_free_rows(&r);
    free(r.ceil);
    for (int d = 0; d < ndev; d++)
        tq_device_close(devs[d]);
    free(devs);
    if (failed)
        tq_tool_log(t, TQ_LOG_ERROR, "error: %d measurement%s failed", failed,
                    failed == 1 ? "" : "s");
    return failed || slower ? 1 : 0;
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-bench");
    opts o = {NULL, NULL, NULL, NULL, NULL, 5, 0, 0, 0, 0, 10, -1};
    parse_args(&t, argc, argv, &o);
    tq_tool_ready(&t);
    /* the outputs are written at the end of a long run: found unwritable now */
    tq_tool_check_output(&t, t.output);
    tq_tool_check_output(&t, o.svg);
    tq_status st;

    if (o.compare) {
        if (argc - optind != 2)
            tq_tool_usage(&t, "--compare wants two JSON reports, OLD and NEW");
        cmp_args c = {argv[optind], argv[optind + 1], NULL, o.fail_pct, 0};
        if ((st = write_text(&t, t.output, compare_fn, &c)))
            tq_tool_fail(&t, st);
        return c.slower ? 1 : 0;
    }
    if (optind < argc)
        tq_tool_usage(&t, "unexpected argument '%s'", argv[optind]);
    if (o.fail_pct >= 0 && !o.baseline)
        tq_tool_usage(&t, "--fail-slower goes with --compare or --baseline");

    /* the ops */
    if (o.op_list && !strcmp(o.op_list, "list")) {
        for (int i = 0; i < tqb_nops; i++)
            printf("%-10s %s\n", tqb_ops[i].name, tqb_ops[i].what);
        return fflush(stdout) ? 74 : 0;
    }
    const tqb_opdef *ops[64];
    int nops = pick_ops(&t, o.op_list, ops);
    int64_t sizes[TQB_MAX_SIZES];
    int nsizes = 0;
    if (o.size_list && (st = tqb_sizes_parse(o.size_list, sizes, &nsizes)))
        tq_tool_usage(&t, "%s", tq_errmsg());

    tq_device **devs;
    int ndev = open_devices(&t, o.devices, &devs);
    if (o.check)
        return run_check(&t, devs, ndev, ops, nops, sizes, nsizes);
    return run_bench(&t, &o, devs, ndev, ops, nops, sizes, nsizes);
}
