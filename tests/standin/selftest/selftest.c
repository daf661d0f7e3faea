/* selftest.c: the stand-in's self-tests (make check-standin): the harness,
 * and main, which runs the kernel, API and BLAS groups. The library under test
 * is build/standin/libtqstandin-selftest.so: the stand-in with the kernels of
 * this folder in its registry. */
#include "selftest.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int st_pass, st_fail;

int st_check(int cond, const char *name, const char *fmt, ...)
{
    if (cond) {
        st_pass++;
        printf("ok %s\n", name);
    } else {
        va_list ap;
        st_fail++;
        printf("not ok %s: ", name);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
    }
    fflush(stdout);
    return cond;
}

static CUmodule cu_mod;
static hipModule_t hip_mod;

static void die(const char *what, int r)
{
    printf("not ok setup: %s returned %d\n0 passed, 1 failed\n", what, r);
    exit(1);
}

void st_setup(void)
{
    /* what a fatbin and a clang offload bundle start with */
    static const unsigned char fatbin[16] = {0x50, 0xED, 0x55, 0xBA, 1, 0, 16, 0};
    static const char bundle[] = "__CLANG_OFFLOAD_BUNDLE__\x02";
    CUcontext ctx;
    int r;
    if ((r = cuInit(0)))
        die("cuInit", r);
    if ((r = cuDevicePrimaryCtxRetain(&ctx, 0)))
        die("cuDevicePrimaryCtxRetain", r);
    if ((r = cuCtxSetCurrent(ctx)))
        die("cuCtxSetCurrent", r);
    if ((r = cuModuleLoadData(&cu_mod, fatbin)))
        die("cuModuleLoadData", r);
    if ((r = hipModuleLoadData(&hip_mod, bundle)))
        die("hipModuleLoadData", r);
}

void *st_func(int api, const char *name)
{
    void *f = NULL;
    int r = api == ST_CUDA ? cuModuleGetFunction((CUfunction *)&f, cu_mod, name)
                           : hipModuleGetFunction((hipFunction_t *)&f, hip_mod, name);
    return r ? NULL : f;
}

int st_launch(int api, const char *name, unsigned gx, unsigned gy, unsigned bx, unsigned by,
              unsigned shared, void **params)
{
    void *f = st_func(api, name);
    if (!f)
        return CUDA_ERROR_NOT_FOUND;
    return api == ST_CUDA ? cuLaunchKernel(f, gx, gy, 1, bx, by, 1, shared, NULL, params, NULL)
                          : hipModuleLaunchKernel(f, gx, gy, 1, bx, by, 1, shared, NULL, params,
                                                  NULL);
}

int st_sync(int api) { return api == ST_CUDA ? cuCtxSynchronize() : hipDeviceSynchronize(); }

void *st_alloc(size_t bytes)
{
    CUdeviceptr p = 0;
    if (cuMemAlloc_v2(&p, bytes))
        die("cuMemAlloc", 0);
    return (void *)(uintptr_t)p;
}

void st_free(void *p) { cuMemFree_v2((CUdeviceptr)(uintptr_t)p); }

void st_upload(void *dst, const void *src, size_t n)
{
    if (cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)dst, src, n))
        die("cuMemcpyHtoD", 0);
}

void st_download(void *dst, const void *src, size_t n)
{
    if (cuMemcpyDtoH_v2(dst, (CUdeviceptr)(uintptr_t)src, n))
        die("cuMemcpyDtoH", 0);
}

void st_setseed(unsigned long long seed)
{
    char s[32];
    snprintf(s, sizeof s, "%llu", seed);
    setenv("TQ_STANDIN_SEED", s, 1);
}

int main(void)
{
    /* the planted failures print their tq-standin: lines; that is the point,
     * but only the count matters here (TQ_STANDIN_QUIET=0 shows them) */
    setenv("TQ_STANDIN_QUIET", "1", 0);
    st_setup();
    st_kernels();
    st_api();
    st_blas();
    st_counts();
    printf("%d passed, %d failed\n", st_pass, st_fail);
    return st_fail ? 1 : 0;
}
