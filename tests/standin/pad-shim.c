/* pad-shim.c: a CUDA driver between the product and the stand-in that plants
 * the bug an H200 found: every launch's argument buffer size rounded up to 8
 * bytes, as lib/cuda/launch.c once passed it. Everything else goes to the
 * stand-in (TQ_PAD_SHIM_TARGET) untouched. The test of the stand-in's rule:
 * through this shim the op suite must fail, as it did on the real driver. */

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int (*get_proc_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                         unsigned, void *, void **, void **);

static get_proc_fn target_get_proc;
static launch_fn target_launch;

static int load(void)
{
    if (target_get_proc)
        return 0;
    const char *path = getenv("TQ_PAD_SHIM_TARGET");
    void *lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lib) {
        fprintf(stderr, "tq-pad-shim: TQ_PAD_SHIM_TARGET=%s does not load\n", path ? path : "");
        return -1;
    }
    *(void **)&target_get_proc = dlsym(lib, "cuGetProcAddress_v2");
    return target_get_proc ? 0 : -1;
}

static int padded_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned shared, void *s, void **params, void **extra)
{
    size_t padded;
    void *copy[16];
    size_t n = 0;
    for (; extra && n + 1 < 16 && extra[n] != (void *)0; n += 2) {
        copy[n] = extra[n];
        copy[n + 1] = extra[n + 1];
        if (extra[n] == (void *)2) { /* CU_LAUNCH_PARAM_BUFFER_SIZE */
            padded = (*(size_t *)extra[n + 1] + 7) & ~(size_t)7;
            copy[n + 1] = &padded;
        }
    }
    copy[n] = (void *)0; /* CU_LAUNCH_PARAM_END */
    return target_launch(f, gx, gy, gz, bx, by, bz, shared, s, params, extra ? copy : NULL);
}

API int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                            int *status)
{
    if (load())
        return 999; /* CUDA_ERROR_UNKNOWN */
    int r = target_get_proc(symbol, pfn, version, flags, status);
    if (!r && !strcmp(symbol, "cuLaunchKernel")) {
        target_launch = (launch_fn)*pfn;
        *pfn = (void *)padded_launch;
    }
    return r;
}
