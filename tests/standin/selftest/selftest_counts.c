/* selftest_counts.c: the counters of the work asked of the device
 * (counts.c): a known sequence of calls through the CUDA, HIP and cuBLAS
 * entry points moves each counter by what it should, and TQ_STANDIN_COUNTS
 * gets the line at the process's end. */
#include "selftest.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { LAUNCHES, BLAS, SYNCS, H2D, D2H, D2D, ALLOCS, PINNED, GRAPHS, KINDS };
static const char *const names[KINDS] = {"launches", "blas", "syncs", "h2d", "d2h",
                                         "d2d", "allocs", "pinned", "graphs"};

#define DEV(p) ((CUdeviceptr)(uintptr_t)(p))

/* Runs the sequence; want[] gets what each counter must have moved by. */
static void sequence(unsigned long long want[KINDS])
{
    static char host[1024];
    float one = 1, zero = 0, a = 2;
    int n = 32;
    memset(want, 0, KINDS * sizeof *want);
    char *d = st_alloc(1024); /* allocs */
    want[ALLOCS]++;
    st_upload(d, host, 1000); /* synchronous: a wait, 1000 bytes */
    want[SYNCS]++, want[H2D] += 1000;
    CUstream s;
    cuStreamCreate(&s, 0);
    cuMemcpyHtoDAsync_v2(DEV(d), host, 100, s); /* staged, no wait */
    want[H2D] += 100;
    void *p[] = {&d, &a, &n};
    cuLaunchKernel(st_func(ST_CUDA, "tq_k_st_scale"), 1, 1, 1, 32, 1, 1, 0, s, p, NULL);
    want[LAUNCHES]++;
    cuMemcpyDtoDAsync_v2(DEV(d + 512), DEV(d), 64, s);
    want[D2D] += 64;
    cuMemcpyDtoHAsync_v2(host, DEV(d), 100, s); /* to pageable memory: a wait */
    want[SYNCS]++, want[D2H] += 100;
    char *pin;
    cuMemAllocHost_v2((void **)&pin, 256);
    want[PINNED]++;
    cuMemcpyDtoHAsync_v2(pin, DEV(d), 256, s); /* to pinned memory: no wait */
    want[D2H] += 256;
    CUevent ev;
    cuEventCreate(&ev, 0);
    cuEventRecord(ev, s);
    cuEventSynchronize(ev);
    cuStreamSynchronize(s);
    cuCtxSynchronize();
    want[SYNCS] += 3;
    cublasHandle_t h;
    cublasCreate_v2(&h);
    cublasSetStream_v2(h, s);
    cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, (float *)d, 1, (float *)d, 1,
                   &zero, (float *)(d + 4), 1);
    want[BLAS]++;
    /* a graph: capturing counts nothing, each replay its work */
    CUgraph g = NULL;
    CUgraphExec e = NULL;
    cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cuLaunchKernel(st_func(ST_CUDA, "tq_k_st_scale"), 1, 1, 1, 32, 1, 1, 0, s, p, NULL);
    cuMemcpyHtoDAsync_v2(DEV(d), pin, 8, s);
    cuStreamEndCapture(s, &g);
    cuGraphInstantiateWithFlags(&e, g, 0);
    cuGraphLaunch(e, s);
    cuGraphLaunch(e, s);
    want[GRAPHS] += 2, want[LAUNCHES] += 2, want[H2D] += 16;
    cuStreamSynchronize(s);
    want[SYNCS]++;
    cuGraphExecDestroy(e);
    cuGraphDestroy(g);
    cublasDestroy_v2(h);
    cuEventDestroy_v2(ev);
    cuStreamDestroy_v2(s); /* returns at once on a GPU: no wait counted */
    cuMemFreeHost(pin);    /* frees wait */
    st_free(d);
    want[SYNCS] += 2;
    /* HIP */
    void *hd = NULL;
    hipMalloc(&hd, 64);
    hipMemcpyHtoD(hd, host, 8);
    hipMemcpyDtoH(host, hd, 16);
    hipDeviceSynchronize();
    hipFree(hd);
    hipFree(NULL); /* nothing to wait for */
    want[ALLOCS]++, want[H2D] += 8, want[D2H] += 16, want[SYNCS] += 4;
}

void st_counts(void)
{
    unsigned long long before[KINDS], after[KINDS], want[KINDS];
    char why[512] = "";
    tq_standin_counts(before, KINDS);
    sequence(want);
    tq_standin_counts(after, KINDS);
    int ok = 1;
    for (int k = 0; k < KINDS; k++)
        if (after[k] - before[k] != want[k]) {
            ok = 0;
            snprintf(why + strlen(why), sizeof why - strlen(why), "%s %llu (want %llu) ",
                     names[k], after[k] - before[k], want[k]);
        }
    st_check(ok, "the work's counters move by what each call asked", "%s", why);

    /* at a process's end, the line after the fault kinds' */
    char path[] = "/tmp/tq-standin-counts-XXXXXX", line[512] = "", last[512] = "";
    int fd = mkstemp(path);
    if (fd < 0)
        return (void)st_check(0, "TQ_STANDIN_COUNTS gets the counters at exit", "mkstemp");
    close(fd);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TQ_STANDIN_COUNTS", path, 1);
        exit(0);
    }
    int status = 0, kinds = 0;
    waitpid(pid, &status, 0);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) {
        kinds += strchr(line, '=') == NULL;
        snprintf(last, sizeof last, "%s", line);
    }
    if (f)
        fclose(f);
    unlink(path);
    char want_line[512];
    int at = 0;
    for (int k = 0; k < KINDS; k++)
        at += snprintf(want_line + at, sizeof want_line - (size_t)at, "%s%s=%llu", k ? " " : "",
                       names[k], after[k]);
    snprintf(want_line + at, sizeof want_line - (size_t)at, "\n");
    st_check(WIFEXITED(status) && !WEXITSTATUS(status) && kinds == 9 && !strcmp(last, want_line),
             "TQ_STANDIN_COUNTS gets the counters at exit", "status %d, %d kind lines, last %s",
             status, kinds, last);
}
