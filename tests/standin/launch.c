/* launch.c: modules, functions and launches. A module "loads" when the image
 * starts as the real one does (so a broken embedding is caught), and its code
 * is the compiled-in registry. A launch is checked as the real driver checks
 * it (dimensions, shared memory, argument buffer size) and queued with a copy
 * of its arguments. */

#include "standin.h"

#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define CUDA_OPTIN_SHARED (227u << 10)
#define HIP_MAX_SHARED (64u << 10)

static struct tq_sd_func *funcs; /* every function handed out, never freed:
                                    handles stay valid as on a GPU while the
                                    module lives, and there are few */
static uint64_t launches;        /* numbers launches for their seeds */

static int cuda_image(const unsigned char *p)
{
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == FATBIN_MAGIC || !memcmp(p, "\177ELF", 4))
        return 1;
    /* PTX text: comments, then a .version directive */
    const char *s = (const char *)p;
    return !strncmp(s, "//", 2) || !strncmp(s, ".version", 8);
}

CUresult tq_sd_module_load(int api, const void *image, struct tq_sd_module **mod)
{
    if (!image || !mod)
        return CUDA_ERROR_INVALID_VALUE;
    if (api == TQ_SD_CUDA) {
        if (!cuda_image(image)) {
            tq_sd_log("cuModuleLoadData: the image is neither a fatbin (magic 0x%08X), an ELF "
                      "cubin nor PTX text", FATBIN_MAGIC);
            return CUDA_ERROR_INVALID_IMAGE;
        }
        int version = tq_sd_driver_version();
        if (version < 13000) {
            tq_sd_log("cuModuleLoadData: driver version %d is older than this code needs "
                      "(13000, TQ_STANDIN_DRIVER_VERSION)", version);
            return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
        }
    } else if (memcmp(image, "__CLANG_OFFLOAD_BUNDLE__", 24)) {
        tq_sd_log("hipModuleLoadData: the image is not a clang offload bundle");
        return CUDA_ERROR_INVALID_IMAGE;
    }
    struct tq_sd_module *m = calloc(1, sizeof *m);
    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m->api = api;
    *mod = m;
    return CUDA_SUCCESS;
}

CUresult tq_sd_module_function(struct tq_sd_module *mod, const char *name, struct tq_sd_func **fn)
{
    if (!mod || !name || !fn)
        return CUDA_ERROR_INVALID_VALUE;
    for (struct tq_sd_func *f = funcs; f; f = f->next)
        if (!strcmp(f->k->name, name)) {
            *fn = f;
            return CUDA_SUCCESS;
        }
    for (const struct tq_emu_kernel *const *t = tq_emu_registry; *t; t++)
        for (const struct tq_emu_kernel *k = *t; k->name; k++)
            if (!strcmp(k->name, name)) {
                struct tq_sd_func *f = calloc(1, sizeof *f);
                if (!f)
                    return CUDA_ERROR_OUT_OF_MEMORY;
                f->k = k;
                f->next = funcs;
                funcs = f;
                *fn = f;
                return CUDA_SUCCESS;
            }
    tq_sd_log("module has no kernel named \"%s\"", name);
    return CUDA_ERROR_NOT_FOUND;
}

/* The argument buffer from kernelParams (one pointer per parameter) or from
 * `extra` (a packed buffer whose size must be the kernel's). */
static CUresult pack_args(int api, const struct tq_emu_kernel *k, void **params, void **extra,
                          unsigned char *buf)
{
    void *end = api == TQ_SD_CUDA ? TQ_CU_LAUNCH_PARAM_END : TQ_HIP_LAUNCH_PARAM_END;
    if (params && extra) {
        tq_sd_log("launch of %s: both kernelParams and extra given", k->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (params) {
        for (unsigned i = 0; i < k->nparams; i++)
            memcpy(buf + k->offsets[i], params[i], k->sizes[i]);
        return CUDA_SUCCESS;
    }
    if (!extra) {
        if (!k->nparams)
            return CUDA_SUCCESS;
        tq_sd_log("launch of %s: no arguments for its %u parameters", k->name, k->nparams);
        return CUDA_ERROR_INVALID_VALUE;
    }
    const void *ptr = NULL;
    const size_t *size = NULL;
    /* HIP takes fixed slots (clr hip_module.cpp, ihipLaunchKernelCommand) */
    if (api == TQ_SD_HIP && (extra[0] != TQ_CU_LAUNCH_PARAM_BUFFER_POINTER ||
                             extra[2] != TQ_CU_LAUNCH_PARAM_BUFFER_SIZE || extra[4] != end)) {
        tq_sd_log("launch of %s: extra is not {BUFFER_POINTER, p, BUFFER_SIZE, &n, END}", k->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; extra[i] != end; i += 2) {
        if (extra[i] == TQ_CU_LAUNCH_PARAM_BUFFER_POINTER)
            ptr = extra[i + 1];
        else if (extra[i] == TQ_CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = extra[i + 1];
        else {
            tq_sd_log("launch of %s: unknown key %p in extra", k->name, extra[i]);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    if (!ptr || !size) {
        tq_sd_log("launch of %s: extra lacks the buffer pointer or its size", k->name);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* CUDA: exactly the end of the last parameter; an H200 (driver 580)
     * answered 701 to a buffer 4 bytes too long (and LLVM's offload runtime
     * met the same). HIP takes a longer buffer (6.x never reads the size, 7
     * passes the parameters past a short one as zeros): a short one, which
     * HIP would read past or zero silently, is refused here. */
    if (api == TQ_SD_CUDA ? *size != k->args_size : *size < k->args_size) {
        tq_sd_log("launch of %s: argument buffer of %zu bytes, the kernel's parameters take %zu",
                  k->name, *size, k->args_size);
        return api == TQ_SD_CUDA ? CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES : CUDA_ERROR_INVALID_VALUE;
    }
    memcpy(buf, ptr, k->args_size);
    return CUDA_SUCCESS;
}

static CUresult check_dims(int api, const struct tq_sd_func *f, const unsigned g[3],
                           const unsigned b[3], unsigned shared)
{
    const char *name = f->k->name;
    const unsigned bmax[3] = {1024, 1024, api == TQ_SD_CUDA ? 64 : 1024};
    const unsigned gmax[3] = {0x7fffffffu, 65535, 65535};
    for (int i = 0; i < 3; i++) {
        if (!b[i] || b[i] > bmax[i] || !g[i] || g[i] > gmax[i]) {
            tq_sd_log("launch of %s: grid (%u,%u,%u) x block (%u,%u,%u) outside the limits "
                      "(%u,%u,%u) x (%u,%u,%u)", name, g[0], g[1], g[2], b[0], b[1], b[2],
                      gmax[0], gmax[1], gmax[2], bmax[0], bmax[1], bmax[2]);
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    if ((unsigned long long)b[0] * b[1] * b[2] > 1024) {
        tq_sd_log("launch of %s: %llu threads per block, the limit is 1024", name,
                  (unsigned long long)b[0] * b[1] * b[2]);
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsigned limit = api == TQ_SD_CUDA ? (f->max_dyn_shared ? (unsigned)f->max_dyn_shared
                                                            : 48u << 10)
                                       : HIP_MAX_SHARED;
    if (shared > limit) {
        tq_sd_log("launch of %s: %u bytes of dynamic shared memory, the limit is %u%s", name,
                  shared, limit,
                  api == TQ_SD_CUDA ? " (raise it with cuFuncSetAttribute)" : "");
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult tq_sd_launch(int api, struct tq_sd_func *f, const unsigned grid[3],
                      const unsigned block[3], unsigned shared, struct tq_sd_stream *s,
                      void **params, void **extra)
{
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = check_dims(api, f, grid, block, shared);
    if (r)
        return r;
    struct tq_sd_launch *l = calloc(1, sizeof *l);
    unsigned char *args = malloc(f->k->args_size ? f->k->args_size : 1);
    if (!l || !args) {
        free(l);
        free(args);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    r = pack_args(api, f->k, params, extra, args);
    if (r) {
        free(l);
        free(args);
        return r;
    }
    l->k = f->k;
    memcpy(l->grid, grid, sizeof l->grid);
    memcpy(l->block, block, sizeof l->block);
    l->shared = shared;
    l->warp_size = api == TQ_SD_CUDA ? 32 : 64;
    l->seed = tq_sd_seed() * 0x9E3779B97F4A7C15ull + ++launches;
    l->args = args;
    struct tq_sd_op op = {.kind = TQ_SD_OP_LAUNCH, .u.launch = l};
    return tq_sd_enqueue(s, &op);
}
