/* ceilings.c: what each device can do at best, measured on it, not assumed:
 * on the CPU the peak FMA rate (fma.c), the STREAM triad (triad.c) and the
 * sgemm rate of the best engine through tq_op_matmul; on a GPU the peak FMA
 * rate by a kernel of our own (the backend's fma_peak probe), the sgemm rate,
 * the f16-operand GEMM rate (tensor cores) and the copy bandwidth, the last
 * three through the op API. Then each op's rate against the ceiling that
 * bounds it, chosen by its arithmetic intensity (the roofline). */
#include "bench.h"
#include "../cpu/cpu.h"
#include "../cpu/gemm.h"
#include "../internal.h"

#include <string.h>

typedef struct copy_run {
    tq_tensor *x, *y;
    int scale;
} copy_run;

/* A copy: convert f32 to f32 (a plain copy on the device), or a scale by 1
 * (the same traffic; some devices run it faster than their copy). */
static tq_status copy_call(void *ctx)
{
    copy_run *c = ctx;
    return c->scale ? tq_op_scale(c->x, 1.0f, c->y) : tq_op_convert(c->x, c->y);
}

static tq_status device_copy(tq_device *dev, int64_t n, double min_time, double *gbs)
{
    copy_run c = {NULL, NULL, 0};
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &n, &c.x);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &n, &c.y);
    *gbs = 0;
    for (c.scale = 0; c.scale < 2 && !st; c.scale++) {
        tqb_timing t;
        if ((st = tqb_time(copy_call, &c, dev, 5, min_time, &t)))
            break;
        if (8.0 * (double)n / t.min / 1e9 > *gbs)
            *gbs = 8.0 * (double)n / t.min / 1e9;
        tqb_timing_free(&t);
    }
    tq_tensor_free(c.x);
    tq_tensor_free(c.y);
    return st;
}

/* The GPU's FMA peak: threads x iters rounds of the probe's chains a launch.
 * At full size 2^22 threads (some 16 waves of a GPU's resident threads, so
 * that the last wave's idle SMs cost little) of 2048 rounds: ~10^11 flops, a
 * few ms on a large GPU. Small (CPU-type devices and TQ_BENCH_SMALL=1): 2^12
 * threads of 64 rounds, 4 Mflop, so that the stand-in driver, which runs
 * each thread as a fiber on the CPU with fmaf a libm call, takes a few ms. */
typedef struct peak_run {
    tq_device *dev;
    tq_tensor *out;
    int64_t iters;
    double flops;
} peak_run;

static tq_status peak_call(void *ctx)
{
    peak_run *p = ctx;
    return tq_device_fma_peak(p->dev, p->out, p->iters, &p->flops);
}

static tq_status device_fma_peak(tq_device *dev, int small, double min_time, tqb_ceiling *c)
{
    c->fma_threads = (int64_t)1 << (small ? 12 : 22);
    c->fma_iters = small ? 64 : 2048;
    peak_run p = {dev, NULL, c->fma_iters, 0};
    tq_status st = tq_tensor_new(dev, TQ_DTYPE_F32, 1, &c->fma_threads, &p.out);
    tqb_timing t;
    if (!st && !(st = tqb_time(peak_call, &p, dev, 5, min_time, &t))) {
        c->fma_gflops = p.flops / t.min / 1e9; /* the peak: the best repetition */
        tqb_timing_free(&t);
    }
    tq_tensor_free(p.out);
    return st;
}

static tq_status matmul_call(void *ctx) { return tqb_inst_run(ctx); }

/* The rate of tq-bench's op `op` (matmul, matmul_f16) at n^3. */
static tq_status gemm_rate(tq_device *dev, const char *op, int64_t n, double min_time,
                           double *gflops)
{
    tqb_inst *in = NULL;
    tq_status st = tqb_inst_new(tqb_op_find(op), dev, n, 1, &in);
    tqb_timing t;
    if (!st && !(st = tqb_time(matmul_call, in, dev, 5, min_time, &t))) {
        *gflops = in->flops / t.min / 1e9;
        tqb_timing_free(&t);
    }
    tqb_inst_free(in);
    return st;
}

tq_status tqb_ceiling_measure(tq_device *dev, double min_time, tqb_ceiling *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->device, sizeof c->device, "%s", tq_device_name(dev));
    tq_status st;
    if (tq_device_backend(dev) != TQ_BACKEND_CPU) {
        int small = tqb_device_small(dev);
        c->gpu = 1;
        c->sgemm_n = small ? 256 : 2048;
        snprintf(c->sgemm_engine, sizeof c->sgemm_engine, "%s", tq_device_name(dev));
        /* f16 at 4096^3: a tensor-core GEMM needs the size to near its peak */
        c->f16_n = small ? 256 : 4096;
        if ((st = gemm_rate(dev, "matmul", c->sgemm_n, min_time, &c->sgemm_gflops)) ||
            (st = gemm_rate(dev, "matmul_f16", c->f16_n, min_time, &c->f16_gflops)) ||
            (st = device_copy(dev, (int64_t)1 << (small ? 20 : 26), min_time, &c->mem_gbs)))
            return st;
        c->mem_what = "copy";
        /* the FMA peak bounds the f32 compute as on the CPU; a backend
         * without the probe keeps its sgemm rate as the ceiling */
        if (tq_device_has_fma_peak(dev)) {
            if ((st = device_fma_peak(dev, small, min_time, c)))
                return st;
            snprintf(c->fma_isa, sizeof c->fma_isa, "kernel");
            c->compute_gflops = c->fma_gflops;
            c->compute_what = "fma";
        } else {
            c->compute_gflops = c->sgemm_gflops;
            c->compute_what = "sgemm";
        }
        return TQ_OK;
    }
    const char *isa;
    if ((st = tqb_fma_peak(min_time, &c->fma_gflops, &isa)) || (st = tqb_triad(min_time, &c->mem_gbs)))
        return st;
    snprintf(c->fma_isa, sizeof c->fma_isa, "%s", isa);
    if ((st = tqb_amx_peak(TQ_AMX_BF16, min_time, &c->amx_bf16_gflops)) ||
        (st = tqb_amx_peak(TQ_AMX_INT8, min_time, &c->amx_int8_gops)))
        return st;
    c->mem_what = "triad";
    c->compute_gflops = c->fma_gflops;
    c->compute_what = "fma";
    /* the engines matmul can use: OpenBLAS when it loaded, the built-in one */
    c->sgemm_n = 1024;
    for (int builtin = 0; builtin < 2; builtin++) {
        tq_cpu_blas_force_builtin(builtin);
        const char *name;
        tq_cpu_sgemm_current(&name);
        double r = 0;
        st = gemm_rate(dev, "matmul", c->sgemm_n, min_time, &r);
        if (st)
            break;
        if (r > c->sgemm_gflops) {
            c->sgemm_gflops = r;
            snprintf(c->sgemm_engine, sizeof c->sgemm_engine, "%s", name);
        }
        if (!builtin && !strcmp(name, "built-in"))
            break; /* no OpenBLAS: the one engine */
    }
    tq_cpu_blas_force_builtin(0);
    return st;
}

void tqb_result_rate(tqb_result *r, const tqb_ceiling *c)
{
    double t = r->t.median;
    /* f16 products on a GPU run on its tensor cores: their own ceiling */
    int f16 = c && c->f16_gflops > 0 && !strcmp(r->op, "matmul_f16");
    /* on a CPU with AMX, the bf16 and int8 products' ceilings are its tiles' */
    int amx16 = c && c->amx_bf16_gflops > 0 && !strcmp(r->op, "matmul_bf16");
    int amx8 = c && c->amx_int8_gops > 0 && !strncmp(r->op, "matmul_i8", 9);
    double peak = f16     ? c->f16_gflops
                  : amx16 ? c->amx_bf16_gflops
                  : amx8  ? c->amx_int8_gops
                  : c     ? c->compute_gflops
                          : 0;
    /* compute bound when the flops take longer at peak than the bytes at
     * full bandwidth; ops with no flops counted are bandwidth bound */
    r->compute_bound = r->flops > 0 && c && c->mem_gbs > 0 && peak > 0
                           ? r->flops / peak > r->bytes / c->mem_gbs
                           : r->flops > 0;
    if (r->compute_bound) {
        r->unit = "GFLOP/s";
        r->rate = t > 0 ? r->flops / t / 1e9 : 0;
        r->frac = peak > 0 ? r->rate / peak : 0;
        r->bound = c ? (f16 ? "f16gemm" : amx16 ? "amx_bf16" : amx8 ? "amx_int8" : c->compute_what)
                     : NULL;
    } else {
        r->unit = "GB/s";
        r->rate = t > 0 ? r->bytes / t / 1e9 : 0;
        r->frac = c && c->mem_gbs > 0 ? r->rate / c->mem_gbs : 0;
        r->bound = c ? c->mem_what : NULL;
    }
}

void tqb_ceiling_line(const tqb_ceiling *c, char *out, size_t n)
{
    if (c->gpu) {
        char fma[96] = "";
        if (c->fma_gflops > 0)
            snprintf(fma, sizeof fma, "FMA peak %.1f GFLOP/s (%lld threads x %lld rounds), ",
                     c->fma_gflops, (long long)c->fma_threads, (long long)c->fma_iters);
        snprintf(out, n,
                 "%s: %ssgemm %.1f GFLOP/s (%lld^3 through tq_op_matmul), f16 GEMM %.1f GFLOP/s "
                 "(%lld^3, f16 operands), copy %.1f GB/s",
                 c->device, fma, c->sgemm_gflops, (long long)c->sgemm_n, c->f16_gflops,
                 (long long)c->f16_n, c->mem_gbs);
    } else {
        char amx[96] = "";
        if (c->amx_bf16_gflops > 0 || c->amx_int8_gops > 0)
            snprintf(amx, sizeof amx, ", AMX peak bf16 %.1f GFLOP/s, int8 %.1f GOP/s",
                     c->amx_bf16_gflops, c->amx_int8_gops);
        snprintf(out, n,
                 "%s: FMA peak %.1f GFLOP/s (%s, %d threads), sgemm %.1f GFLOP/s (%s, %lld^3), "
                 "STREAM triad %.1f GB/s%s",
                 c->device, c->fma_gflops, c->fma_isa, tq_threads_get(), c->sgemm_gflops,
                 c->sgemm_engine, (long long)c->sgemm_n, c->mem_gbs, amx);
    }
}
