/* backend.c: the CPU backend's table: host memory, and the ops of lib/cpu/. */
#include "../backend.h"
#include "../internal.h"
#include "cpu.h"
#include "gemm.h"

#include <unistd.h>

static tq_status cpu_probe(int *count)
{
    *count = 1;
    return TQ_OK;
}

static void cpu_model(char *out, size_t n)
{
    snprintf(out, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10))
            continue;
        char *v = strchr(line, ':');
        if (v) {
            v += 1 + (v[1] == ' ');
            v[strcspn(v, "\n")] = 0;
            snprintf(out, n, "%s", v);
        }
        break;
    }
    fclose(f);
}

/* -v's line on the CPU's start: where the CPU has AMX tiles, whether its
 * products use them (the permission asked here) or why not */
static void cpu_startup(void *ctx, char *out, size_t n)
{
    (void)ctx;
    out[0] = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("amx-tile"))
        tq_cpu_amx_describe(out, n);
#endif
}

static tq_status cpu_info(int index, tq_device_info *info)
{
    (void)index;
    cpu_model(info->name, sizeof info->name);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    info->memory = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
    char blas[256], amx[200] = "";
    tq_cpu_blas_describe(blas, sizeof blas);
    cpu_startup(NULL, amx, sizeof amx); /* AMX's line, where the CPU has the tiles */
    snprintf(info->detail, sizeof info->detail, "%d thread%s, %.140s%s%.80s", tq_threads_get(),
             tq_threads_get() == 1 ? "" : "s", blas, *amx ? "; " : "", amx);
    return TQ_OK;
}

static tq_status cpu_open(int index, void **ctx)
{
    (void)index;
    *ctx = NULL;
    return TQ_OK;
}

static void cpu_close(void *ctx) { (void)ctx; }

static tq_status cpu_alloc(void *ctx, size_t nbytes, void **buf)
{
    (void)ctx;
    /* 64-byte aligned for vector loads; a zero-size tensor still gets a pointer */
    size_t n = (nbytes + 63) & ~(size_t)63;
    *buf = aligned_alloc(64, n ? n : 64);
    if (!*buf)
        return tq_fail(TQ_ERR_NOMEM, "cpu: out of memory for %zu bytes", nbytes);
    return TQ_OK;
}

static void cpu_free(void *ctx, void *buf)
{
    (void)ctx;
    free(buf);
}

static tq_status cpu_upload(void *ctx, void *buf, size_t off, const void *src, size_t n)
{
    (void)ctx;
    if (n)
        memcpy((char *)buf + off, src, n);
    return TQ_OK;
}

static tq_status cpu_download(void *ctx, const void *buf, size_t off, void *dst, size_t n)
{
    (void)ctx;
    if (n)
        memcpy(dst, (const char *)buf + off, n);
    return TQ_OK;
}

/* bf16 x bf16 on AVX512-BF16 (gemm_bf16.c); f16 products are widened. */
static int cpu_native_product(tq_dtype dt)
{
    return (dt == TQ_DTYPE_BF16 && tq_cpu_gemm_bf16_use()) ||
           (dt == TQ_DTYPE_I8 && tq_cpu_gemm_i8_use());
}

const tq_backend tq_backend_cpu = {
    .kind = TQ_BACKEND_CPU,
    .name = "cpu",
    .probe = cpu_probe,
    .info = cpu_info,
    .startup = cpu_startup,
    .open = cpu_open,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .derived_free = tq_cpu_derived_free,
    .native_product = cpu_native_product,
    .upload = cpu_upload,
    .download = cpu_download,
    .sync = NULL,
    .ops =
        {
            .matmul = tq_cpu_matmul,
            .matmul_then = tq_cpu_matmul_then,
            .quantize_rows = tq_cpu_quantize_rows,
            .matmul_i8 = tq_cpu_matmul_i8,
            .rownorm = tq_cpu_rownorm,
            .normalize = tq_cpu_normalize,
            .topk = tq_cpu_topk,
            .above = tq_cpu_above,
            .softmax = tq_cpu_softmax,
            .layernorm = tq_cpu_layernorm,
            .layernorm_low = tq_cpu_layernorm_low,
            .gelu = tq_cpu_gelu,
            .activate = tq_cpu_activate,
            .add = tq_cpu_add,
            .scale = tq_cpu_scale,
            .gather = tq_cpu_gather,
            .convert = tq_cpu_convert,
            .simtopk = tq_cpu_simtopk,
            .codetopk = tq_cpu_codetopk,
            .codematrix = tq_cpu_codematrix,
            .codescreen = tq_cpu_codescreen,
            .rowprod_prepare = tq_cpu_rowprod_prepare,
            .rowprod = tq_cpu_rowprod,
            .rowprod_release = tq_cpu_rowprod_release,
            .attention = tq_cpu_attention,
            .activate_grad = tq_cpu_activate_grad,
            .gelu_grad = tq_cpu_gelu_grad,
        },
};
