/* selftest_kernels.c: the stand-in runs CUDA C as a GPU would, and catches
 * what it is for: a planted missing barrier (for some seed among a few), a
 * 32-lane warp assumption (right with 32-lane warps, wrong with 64), an
 * out-of-bounds write (ASan, under SAN=1), barriers at different places.
 * Inputs are small integers, so every right answer is exact in f32 whatever
 * the order of the sums, and any difference is a real one. */
#include "selftest.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *api_name(int api) { return api == ST_CUDA ? "cuda" : "hip"; }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-block sums of x (512 values, blocks of 256) by `kernel`; 1 when both
 * match the exact sums. */
static int block_sums_right(int api, const char *kernel)
{
    float x[512], out[2], ref[2] = {0, 0};
    int n = 512;
    for (int i = 0; i < n; i++) {
        x[i] = (float)(i % 7 - 3) + (float)(i % 5);
        ref[i / 256] += x[i];
    }
    float *dx = st_alloc(sizeof x), *dout = st_alloc(sizeof out);
    st_upload(dx, x, sizeof x);
    void *p[] = {&dx, &dout, &n};
    int r = st_launch(api, kernel, 2, 1, 256, 1, 0, p);
    r = r ? r : st_sync(api);
    st_download(out, dout, sizeof out);
    st_free(dx);
    st_free(dout);
    return !r && out[0] == ref[0] && out[1] == ref[1];
}

static void block_reduction(void)
{
    char name[64];
    for (int api = ST_CUDA; api <= ST_HIP; api++) {
        int right = 1, caught = 0;
        for (unsigned long long seed = 1; seed <= 4; seed++) {
            st_setseed(seed);
            right &= block_sums_right(api, "tq_k_st_block_sum");
            caught |= !block_sums_right(api, "tq_k_st_block_sum_nosync");
        }
        snprintf(name, sizeof name, "%s block reduction exact for seeds 1-4", api_name(api));
        st_check(right, name, "a correct kernel gave a wrong sum");
        snprintf(name, sizeof name, "%s missing __syncthreads caught", api_name(api));
        st_check(caught, name, "the kernel without its barrier was right for seeds 1-4");
    }
    unsetenv("TQ_STANDIN_SEED");
}

static float warp_total(int api, const char *kernel)
{
    float x[256], out = 0;
    int n = 256;
    for (int i = 0; i < n; i++)
        x[i] = (float)(i % 9);
    float *dx = st_alloc(sizeof x), *dout = st_alloc(sizeof out);
    st_upload(dx, x, sizeof x);
    st_upload(dout, &out, sizeof out);
    void *p[] = {&dx, &dout, &n};
    int r = st_launch(api, kernel, 2, 1, 128, 1, 0, p);
    r = r ? r : st_sync(api);
    st_download(&out, dout, sizeof out);
    st_free(dx);
    st_free(dout);
    return r ? -1 : out;
}

static void warp_width(void)
{
    float ref = 0;
    for (int i = 0; i < 256; i++)
        ref += (float)(i % 9);
    st_check(warp_total(ST_CUDA, "tq_k_st_warp_sum") == ref, "cuda warpSize reduction exact",
             "sum %g, expected %g", warp_total(ST_CUDA, "tq_k_st_warp_sum"), ref);
    st_check(warp_total(ST_HIP, "tq_k_st_warp_sum") == ref, "hip warpSize reduction exact",
             "sum %g, expected %g", warp_total(ST_HIP, "tq_k_st_warp_sum"), ref);
    st_check(warp_total(ST_CUDA, "tq_k_st_warp_sum32") == ref,
             "cuda 32-lane reduction right with 32-lane warps", "sum %g, expected %g",
             warp_total(ST_CUDA, "tq_k_st_warp_sum32"), ref);
    float h = warp_total(ST_HIP, "tq_k_st_warp_sum32");
    st_check(h != ref, "hip 32-lane reduction caught with 64-lane warps",
             "sum %g is right: the warp-size assumption went unnoticed", h);
}

static void matmul(void)
{
    enum { M = 37, N = 29, K = 45 };
    static float A[M * K], B[K * N], C[M * N];
    static double ref[M * N];
    int m = M, n = N, k = K;
    for (int i = 0; i < M * K; i++)
        A[i] = (float)((i * 7) % 9 - 4);
    for (int i = 0; i < K * N; i++)
        B[i] = (float)((i * 5) % 7 - 3);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++)
                s += (double)A[i * K + p] * B[p * N + j];
            ref[i * N + j] = s;
        }
    for (int api = ST_CUDA; api <= ST_HIP; api++) {
        float *dA = st_alloc(sizeof A), *dB = st_alloc(sizeof B), *dC = st_alloc(sizeof C);
        st_upload(dA, A, sizeof A);
        st_upload(dB, B, sizeof B);
        void *p[] = {&dA, &dB, &dC, &m, &n, &k};
        int r = st_launch(api, "tq_k_st_matmul", (N + 15) / 16, (M + 15) / 16, 16, 16,
                          2 * 16 * 16 * sizeof(float), p);
        r = r ? r : st_sync(api);
        st_download(C, dC, sizeof C);
        int bad = -1;
        for (int i = 0; i < M * N && bad < 0 && !r; i++)
            if (C[i] != ref[i])
                bad = i;
        char name[64];
        snprintf(name, sizeof name, "%s tiled matmul in dynamic shared memory exact",
                 api_name(api));
        st_check(!r && bad < 0, name, "code %d, C[%d] = %g, expected %g", r, bad < 0 ? 0 : bad,
                 bad < 0 ? 0.0 : C[bad], bad < 0 ? 0.0 : ref[bad]);
        st_free(dA);
        st_free(dB);
        st_free(dC);
    }
}

static void atomics(void)
{
    enum { NX = 1000 };
    int x[NX], bins[17] = {0}, ref[16] = {0}, n = NX, minv = INT_MAX, refmin = INT_MAX;
    unsigned maxv = 0, refmax = 0;
    float fsum = 0;
    unsigned long long count = 0;
    for (int i = 0; i < NX; i++) {
        x[i] = (i * 37) % 101 + 3;
        ref[x[i] & 15]++;
        refmax = (unsigned)x[i] > refmax ? (unsigned)x[i] : refmax;
        refmin = x[i] < refmin ? x[i] : refmin;
    }
    int *dx = st_alloc(sizeof x), *db = st_alloc(sizeof bins), *dmin = st_alloc(sizeof minv);
    unsigned *dmax = st_alloc(sizeof maxv);
    float *dsum = st_alloc(sizeof fsum);
    unsigned long long *dcount = st_alloc(sizeof count);
    st_upload(dx, x, sizeof x);
    st_upload(db, bins, sizeof bins);
    st_upload(dmin, &minv, sizeof minv);
    st_upload(dmax, &maxv, sizeof maxv);
    st_upload(dsum, &fsum, sizeof fsum);
    st_upload(dcount, &count, sizeof count);
    void *p[] = {&dx, &n, &db, &dmax, &dmin, &dsum, &dcount};
    int r = st_launch(ST_CUDA, "tq_k_st_atomics", (NX + 127) / 128, 1, 128, 1, 0, p);
    r = r ? r : st_sync(ST_CUDA);
    st_download(bins, db, sizeof bins);
    st_download(&minv, dmin, sizeof minv);
    st_download(&maxv, dmax, sizeof maxv);
    st_download(&fsum, dsum, sizeof fsum);
    st_download(&count, dcount, sizeof count);
    st_check(!r && !memcmp(bins, ref, sizeof ref) && bins[16] > 0 && maxv == refmax &&
                 minv == refmin && fsum == NX * 0.5f && count == NX,
             "atomics (add int/float/u64, max, min, CAS) exact",
             "code %d max %u/%u min %d/%d fsum %g count %llu", r, maxv, refmax, minv, refmin,
             fsum, count);
    st_free(dx), st_free(db), st_free(dmin), st_free(dmax), st_free(dsum), st_free(dcount);
}

/* Every lane's result of each warp op against the host's model of it. */
static void warp_ops(void)
{
    for (int api = ST_CUDA; api <= ST_HIP; api++) {
        int ws = api == ST_CUDA ? 32 : 64, nt = 2 * ws, bad = -1;
        int out[128 * 8];
        int *dout = st_alloc(sizeof out);
        void *p[] = {&dout};
        int r = st_launch(api, "tq_k_st_warp_ops", 1, 1, (unsigned)nt, 1, 0, p);
        r = r ? r : st_sync(api);
        st_download(out, dout, sizeof out);
        unsigned long long ballot = 0;
        for (int l = 0; l < ws; l++)
            ballot |= (unsigned long long)(l % 3 == 0) << l;
        for (int t = 0; t < nt && bad < 0 && !r; t++) {
            int lane = t % ws, base = t - lane;
            int want[8] = {base + (lane ^ 1), lane + 3 < ws ? t + 3 : t, lane >= 5 ? t - 5 : t,
                           base + 7, (int)(ballot & 0xffffffffu), (int)(ballot >> 32),
                           40 >= base && 40 < base + ws, 1};
            for (int j = 0; j < 8; j++)
                if (out[t * 8 + j] != want[j])
                    bad = t * 8 + j;
        }
        char name[64];
        snprintf(name, sizeof name, "%s warp ops (%d lanes) per lane", api_name(api), ws);
        st_check(!r && bad < 0, name, "code %d, thread %d op %d: %d", r, bad / 8, bad % 8,
                 bad < 0 ? 0 : out[bad]);
        st_free(dout);
    }
}

static void diverging_barriers(void)
{
    float *d = st_alloc(64 * 8 * sizeof(float));
    void *p[] = {&d};
    int r = st_launch(ST_CUDA, "tq_k_st_diverge", 1, 1, 64, 1, 0, p);
    int s = st_sync(ST_CUDA);
    st_check(r == CUDA_SUCCESS && s == CUDA_ERROR_LAUNCH_FAILED,
             "barriers at different places fail the launch", "launch %d, sync %d", r, s);
    /* a kernel that failed leaves the context unusable, as on a GPU: the
     * next allocation and sync say the same error */
    CUdeviceptr more = 0;
    int again = cuMemAlloc_v2(&more, 64);
    int sync2 = st_sync(ST_CUDA);
    st_check(again == CUDA_ERROR_LAUNCH_FAILED && sync2 == CUDA_ERROR_LAUNCH_FAILED,
             "a failed kernel's error is sticky", "alloc %d, sync %d", again, sync2);
    tq_standin_clear_sticky();
    int fails[3];
    const char *const bad[] = {"tq_k_st_warp_exit", "tq_k_st_warp_mixed", "tq_k_st_warp_ops"};
    for (int i = 0; i < 3; i++) {
        /* the last: a 48-thread block reads lanes its second warp lacks */
        int rr = st_launch(ST_CUDA, bad[i], 1, 1, i == 2 ? 48 : 64, 1, 0, p);
        fails[i] = rr ? rr : st_sync(ST_CUDA);
        tq_standin_clear_sticky();
    }
    st_check(fails[0] == CUDA_ERROR_LAUNCH_FAILED && fails[1] == CUDA_ERROR_LAUNCH_FAILED &&
                 fails[2] == CUDA_ERROR_LAUNCH_FAILED,
             "warp op with an exited lane, half a warp at a barrier, a partial warp's missing "
             "lane: launch failures", "%d %d %d", fails[0], fails[1], fails[2]);
    /* and, the sticky error cleared (a new process, on a GPU), it runs again */
    st_check(block_sums_right(ST_CUDA, "tq_k_st_block_sum"), "launches run after a failed one",
             "wrong sums");
    st_free(d);
}

/* Under ASan and UBSan, a kernel writing one element past a buffer (device
 * memory, or a shared array with one thread too many) is reported. The write happens in a
 * child process: ASan ends the process that sees it. */
#ifdef __SANITIZE_ADDRESS__
static void asan_child(const char *kernel, unsigned threads, const char *report,
                       const char *or_report)
{
    int fd[2];
    char buf[8192], name[128];
    size_t got = 0;
    snprintf(name, sizeof name, "ASan catches %s", kernel);
    if (pipe(fd))
        return (void)st_check(0, name, "pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        int n = 100;
        float *d = st_alloc(n * sizeof(float));
        void *p[] = {&d, &n};
        st_launch(ST_CUDA, kernel, 1, 1, threads, 1, 0, p);
        st_sync(ST_CUDA);
        _exit(0);
    }
    close(fd[1]);
    ssize_t k;
    while ((k = read(fd[0], buf + got, sizeof buf - 1 - got)) > 0)
        got += (size_t)k;
    buf[got] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    st_check(!(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
                 (strstr(buf, report) || strstr(buf, or_report)) &&
                 (strstr(buf, kernel) || strstr(buf, "selftest/kernels.cu:")),
             name, "child status %d, stderr: %.300s", status, buf);
}
#endif

static void out_of_bounds(void)
{
#ifdef __SANITIZE_ADDRESS__
    asan_child("tq_k_st_oob", 128, "AddressSanitizer: heap-buffer-overflow", "?");
    /* UBSan's bounds check on the fixed-size array comes first, ASan's redzone
     * would catch what it cannot see */
    asan_child("tq_k_st_shared_oob", 65, "AddressSanitizer: global-buffer-overflow",
               "runtime error: index 64 out of bounds");
#else
    printf("skip ASan catches out-of-bounds kernel writes: not an ASan build (make SAN=1 "
           "check-standin)\n");
#endif
}

/* Figures, not checks: the cost of a fiber switch and of a launch. */
static void costs(void)
{
    int rounds = 200, *d = st_alloc(sizeof(int));
    void *p[] = {&rounds, &d};
    double t0 = now();
    int r = st_launch(ST_CUDA, "tq_k_st_barriers", 4, 1, 1024, 1, 0, p);
    r = r ? r : st_sync(ST_CUDA);
    double t1 = now();
    /* each thread waits at each barrier: one switch, plus the scheduler's
     * bookkeeping of the round */
    double waits = 4.0 * 1024 * (rounds + 1);
    printf("info: a thread's wait at a barrier %.1f ns (4 blocks x 1024 threads x %d "
           "barriers, %.3f s)%s\n", (t1 - t0) / waits * 1e9, rounds, t1 - t0, r ? " FAILED" : "");
    int n = 32;
    float a = 1.0f, *x = st_alloc(32 * sizeof(float));
    void *q[] = {&x, &a, &n};
    void *f = st_func(ST_CUDA, "tq_k_st_scale");
    t0 = now();
    for (int i = 0; i < 2000; i++)
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, q, NULL);
    st_sync(ST_CUDA);
    t1 = now();
    printf("info: launch of 1 block x 32 threads, queued and run: %.2f us\n",
           (t1 - t0) / 2000 * 1e6);
    st_free(x);
    int big = 1 << 20;
    x = st_alloc((size_t)big * sizeof(float));
    void *q2[] = {&x, &a, &big};
    t0 = now();
    cuLaunchKernel(f, (unsigned)big / 256, 1, 1, 256, 1, 1, 0, NULL, q2, NULL);
    st_sync(ST_CUDA);
    t1 = now();
    printf("info: elementwise kernel over 2^20 threads: %.3f s (%.1f ns a thread)\n", t1 - t0,
           (t1 - t0) / big * 1e9);
    st_free(x);
    st_free(d);
}

void st_kernels(void)
{
    block_reduction();
    warp_width();
    matmul();
    atomics();
    warp_ops();
    diverging_barriers();
    out_of_bounds();
    costs();
}
