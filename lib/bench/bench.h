/* bench.h: what the files of tq-bench's library share: the op table, the
 * timing loop, the measured ceilings, the results and their writers, the
 * cross-device check and the comparison of two runs. cmd/tq-bench.c parses
 * the options and calls these; nothing here prints except into the FILE the
 * caller hands over, and nothing exits. */
#ifndef TQ_BENCH_H
#define TQ_BENCH_H

#include "tq.h"

#include <stdio.h>

#define TQB_MAX_SIZES 64
#define TQB_MAX_T 8 /* tensors of one op instance */

/* ---------------------------------------------------------------- sizes */

/* Parses "1024,4096", "1024-16384*2" (geometric), "100-500+100" (arithmetic)
 * and k/M suffixes (x1024, x1048576) into sizes[] (at most TQB_MAX_SIZES). */
tq_status tqb_sizes_parse(const char *arg, int64_t *sizes, int *n);

/* ---------------------------------------------------------------- ops */

typedef enum { TQB_CMP_NMSE = 0, TQB_CMP_BITS } tqb_cmp;

/* One op at one size on one device: its tensors, filled with seeded data. */
typedef struct tqb_inst {
    const struct tqb_opdef *op;
    tq_device *dev;
    int64_t n;
    tq_tensor *t[TQB_MAX_T];
    int nout;                 /* outputs: the first nout entries of out[] */
    int out[3];               /* indices into t[] of the outputs */
    tq_rowprod *rp;
    int64_t k;                /* topk's k */
    char shape[96];           /* "[1024,1024]x[1024,1024]" */
    const char *dtype;
    double flops, bytes;      /* per call: useful work and least traffic */
} tqb_inst;

typedef struct tqb_opdef {
    const char *name;
    const char *what;         /* one line: what n means */
    int64_t sizes[2];         /* default sizes, CPU and GPU devices */
    int64_t small[2];         /* default sizes, CPU-type GPU devices (lavapipe) */
    tqb_cmp cmp;              /* how --check compares with the CPU */
    double tol;               /* NMSE tolerance when cmp is TQB_CMP_NMSE */
} tqb_opdef;

extern const tqb_opdef tqb_ops[];
extern const int tqb_nops;
const tqb_opdef *tqb_op_find(const char *name);

/* Makes the tensors of op at size n on dev (inputs from seed). */
tq_status tqb_inst_new(const tqb_opdef *op, tq_device *dev, int64_t n, uint64_t seed,
                       tqb_inst **out);
/* One call of the op (no sync). */
tq_status tqb_inst_run(tqb_inst *in);
void tqb_inst_free(tqb_inst *in);

/* Whether dev is a CPU-type device of a GPU backend (lavapipe, SwiftShader). */
int tqb_device_cpu_type(const tq_device *dev);
/* Whether dev is measured at the smaller sizes (default sizes and ceilings):
 * a CPU-type device, or any GPU device under TQ_BENCH_SMALL=1 (quick runs,
 * and the tests on the stand-in driver, which runs GPU code on the CPU). */
int tqb_device_small(const tq_device *dev);

/* ---------------------------------------------------------------- timing */

typedef struct tqb_timing {
    int reps;
    int64_t iters;            /* calls per repetition */
    double *times;            /* seconds per call, one per repetition */
    double median, min, max;
    double mad_pct;           /* median absolute deviation, % of the median */
} tqb_timing;

typedef tq_status (*tqb_call_fn)(void *ctx);

/* A warm-up call, then reps repetitions, each of enough calls to last at least
 * min_time seconds; dev (may be NULL) is synced at the end of each. Where dev
 * has a timer of its own (tq_device_timer_begin), the repetitions are timed
 * on the device's clock; else, or under TQ_BENCH_TIMER=host, on the host's. */
tq_status tqb_time(tqb_call_fn fn, void *ctx, tq_device *dev, int reps, double min_time,
                   tqb_timing *out);
void tqb_timing_free(tqb_timing *t);
/* What times dev's repetitions (NULL: the host's loops): "device events",
 * "timestamp queries", or "host clock" with why in brackets when a device
 * timer was refused or failed. */
void tqb_timer_name(const tq_device *dev, char *out, size_t n);
/* Median of n values (sorts a copy). */
double tqb_median(const double *v, int n);

/* ---------------------------------------------------------------- ceilings */

typedef struct tqb_ceiling {
    char device[32];
    int gpu;                  /* 1: a GPU (its FMA peak by the backend's probe kernel) */
    double fma_gflops;        /* peak f32 FMA rate: every core, every SM; 0: unmeasured */
    char fma_isa[16];         /* "avx512", "avx2+fma", "sse", "portable"; GPU "kernel" */
    int64_t fma_threads, fma_iters; /* GPU: the probe's launch (threads x rounds) */
    double sgemm_gflops;      /* the best engine through tq_op_matmul */
    char sgemm_engine[64];
    int64_t sgemm_n;
    double mem_gbs;           /* CPU: STREAM triad; GPU: device copy */
    const char *mem_what;
    double compute_gflops;    /* the compute ceiling of fractions */
    const char *compute_what;
    double f16_gflops;        /* GPU: f16-operand GEMM (tensor cores), the ceiling of */
    int64_t f16_n;            /* matmul_f16 rows; 0 on the CPU, whose f16 runs on f32 FMAs */
    /* CPU: the AMX tiles' peaks (bf16 GFLOP/s, int8 GOP/s; 0: no AMX), the
     * ceilings of matmul_bf16 and of matmul_i8 */
    double amx_bf16_gflops, amx_int8_gops;
} tqb_ceiling;

/* The CPU's peak f32 FMA rate on every worker thread (fma.c) and the STREAM
 * triad bandwidth (triad.c), each the best of three timings. */
tq_status tqb_fma_peak(double min_time, double *gflops, const char **isa);
tq_status tqb_triad(double min_time, double *gbs);
/* The AMX tiles' peak of kind (TQ_AMX_BF16 or TQ_AMX_INT8) on every worker
 * thread, 0 where the CPU has none (or TQ_AMX=0). */
tq_status tqb_amx_peak(int kind, double min_time, double *gflops);

/* Measures the ceilings of dev (about a second on a CPU); min_time as in
 * tqb_time. */
tq_status tqb_ceiling_measure(tq_device *dev, double min_time, tqb_ceiling *c);

/* ---------------------------------------------------------------- results */

typedef struct tqb_result {
    char device[32];
    char op[32];
    char shape[96];
    char dtype[16];
    int64_t n;
    double flops, bytes;
    tqb_timing t;
    int compute_bound;        /* by arithmetic intensity against the ceilings */
    double rate;              /* GFLOP/s when compute bound, else GB/s */
    double frac;              /* rate / the bounding ceiling (0: unknown) */
    const char *unit;
    const char *bound;        /* that ceiling's name: "fma", "sgemm", "f16gemm", "triad"... */
} tqb_result;

/* Rate, unit and fraction of the result from its times and the ceiling. */
void tqb_result_rate(tqb_result *r, const tqb_ceiling *c);

/* Spread (MAD %) above which a timing is flagged as too noisy to trust. */
#define TQB_NOISY_PCT 5.0

/* ---------------------------------------------------------------- report */

typedef enum { TQB_FMT_MD = 0, TQB_FMT_CSV, TQB_FMT_JSON, TQB_FMT_JSONL } tqb_format;

typedef struct tqb_context {
    int ndev;
    tq_device **devs;
    int threads;
} tqb_context;

typedef struct tqb_report {
    tqb_context ctx;
    tqb_ceiling *ceil;        /* one per device, in ctx.devs order */
    tqb_result *rows;
    int nrows;
    const char **notes;       /* lines said under the table */
    int nnotes;
} tqb_report;

tq_status tqb_report_write(FILE *f, tqb_format fmt, const tqb_report *r);
/* The context of a run, as key and value pairs for every format's header:
 * tq, commit, compiler, flags, date, host, cpu, cores, threads, then one
 * "device" per device (its describe line), one "timer" per device ("NAME:
 * what timed it", tqb_timer_name) and one "env" per environment variable
 * that changes results ("NAME=VALUE"). */
typedef struct tqb_kv {
    char key[16];
    char *val;
} tqb_kv;
tq_status tqb_context_get(const tqb_context *c, tqb_kv **kv, int *n);
void tqb_context_free(tqb_kv *kv, int n);
/* Writes s as a JSON string, quotes included. */
void tqb_json_str(FILE *f, const char *s);
/* The markdown lines of the ceilings of one device. */
void tqb_ceiling_line(const tqb_ceiling *c, char *out, size_t n);

/* ---------------------------------------------------------------- run */

typedef struct tqb_plan {
    const tqb_opdef **ops;
    int nops;
    const int64_t *sizes;     /* NULL: each op's defaults for the device */
    int nsizes;
    int reps;
    double min_time;
    uint64_t seed;
    /* called before each measurement (progress) and on each failure (a
     * message; the run goes on without the row) */
    void (*progress)(void *ctx, const char *device, const char *op, int64_t n);
    void (*failed)(void *ctx, const char *msg);
    void *cb;
} tqb_plan;

/* Times every op of the plan at each size on each device of r->ctx into
 * r->rows (rates against r->ceil); *nfailed counts rows that failed. */
tq_status tqb_run(const tqb_plan *p, tqb_report *r, int *nfailed);
void tqb_report_free_rows(tqb_report *r);

/* ---------------------------------------------------------------- svg */

tq_status tqb_svg_write(FILE *f, const tqb_report *r);

/* ---------------------------------------------------------------- check */

/* Runs each op at size n on dev and on cpu (the same inputs) and compares;
 * one line to f. *bad is incremented on a mismatch. TQ_BENCH_PERTURB=op:device
 * (test only) perturbs that op's output on that device before the compare. */
tq_status tqb_check(FILE *f, const tqb_opdef *op, tq_device *dev, tq_device *cpu, int64_t n,
                    uint64_t seed, int *bad);

/* ---------------------------------------------------------------- compare */

/* Compares two JSON reports (the new one may be in memory: new_r non-NULL,
 * new_path NULL): a table to f, *slower the rows significantly slower by more
 * than fail_pct percent (fail_pct < 0: any significant slowdown counts). */
tq_status tqb_compare(FILE *f, const char *old_path, const char *new_path,
                      const tqb_report *new_r, double fail_pct, int *slower);

/* ---------------------------------------------------------------- tools */

/* Times the tools beside tq-bench (in bindir) as whole processes on
 * generated inputs in a scratch folder (TQ_BENCH_TOOLS_ROWS lines, default
 * 20000); appends rows (device "process", rate in rows/s) to *rows; a tool
 * that is missing is said on log and skipped, one that fails is said on log
 * and counted in *nfailed. */
tq_status tqb_tools_run(const char *bindir, int reps, tqb_result **rows, int *nrows, int *nfailed,
                        FILE *log);

#endif
