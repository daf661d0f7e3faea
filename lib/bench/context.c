/* context.c: what a benchmark figure depends on besides the code, gathered
 * for the header of every report: tq's version and the commit and flags it
 * was built from (baked in by the Makefile), the compiler, the date, the
 * host and its CPU, each device's description (driver, kernel, OpenBLAS
 * kernel) and the clock that timed it, the threads, and the environment
 * variables that change results. */
#include "bench.h"
#include "../backend.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef TQ_BUILD_COMMIT
#define TQ_BUILD_COMMIT "unknown"
#endif
#ifndef TQ_BUILD_FLAGS
#define TQ_BUILD_FLAGS "unknown"
#endif

extern char **environ;

/* Prefixes of the variables that change what tq or its engines do. */
static const char *const env_prefixes[] = {
    "TQ_", "OPENBLAS_", "GOTO", "OMP_", "MKL_", "BLIS_", "VK_", "MESA_", "LP_",
    "CUDA_VISIBLE", "HIP_VISIBLE", "ROCR_", "GALLIUM_", NULL,
};

static tq_status add(tqb_kv **kv, int *n, int *cap, const char *key, const char *val)
{
    if (*n == *cap) {
        int nc = *cap ? 2 * *cap : 32;
        tqb_kv *k = realloc(*kv, (size_t)nc * sizeof *k);
        if (!k)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        *kv = k, *cap = nc;
    }
    char *v = strdup(val);
    if (!v)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    snprintf((*kv)[*n].key, sizeof (*kv)[*n].key, "%s", key);
    (*kv)[(*n)++].val = v;
    return TQ_OK;
}

/* The CPU's model as the CPU backend reads it (/proc/cpuinfo). */
static void cpu_model(char *out, size_t n)
{
    tq_device_info info;
    memset(&info, 0, sizeof info);
    snprintf(out, n, "%s", tq_backend_cpu.info(0, &info) == TQ_OK ? info.name : "unknown");
}

tq_status tqb_context_get(const tqb_context *c, tqb_kv **kv, int *n)
{
    int cap = 0;
    *kv = NULL;
    *n = 0;
    char buf[512];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    tq_status st = add(kv, n, &cap, "tq", TQ_VERSION);
    if (!st)
        st = add(kv, n, &cap, "commit", TQ_BUILD_COMMIT);
#if defined(__clang__)
    if (!st)
        st = add(kv, n, &cap, "compiler", "clang " __clang_version__);
#elif defined(__GNUC__)
    if (!st)
        st = add(kv, n, &cap, "compiler", "gcc " __VERSION__);
#endif
    if (!st)
        st = add(kv, n, &cap, "flags", TQ_BUILD_FLAGS);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (!st)
        st = add(kv, n, &cap, "date", buf);
    if (gethostname(buf, sizeof buf))
        snprintf(buf, sizeof buf, "unknown");
    buf[sizeof buf - 1] = 0;
    if (!st)
        st = add(kv, n, &cap, "host", buf);
    cpu_model(buf, sizeof buf);
    if (!st)
        st = add(kv, n, &cap, "cpu", buf);
    snprintf(buf, sizeof buf, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    if (!st)
        st = add(kv, n, &cap, "cores", buf);
    snprintf(buf, sizeof buf, "%d", c->threads);
    if (!st)
        st = add(kv, n, &cap, "threads", buf);
    for (int i = 0; !st && i < c->ndev; i++)
        st = add(kv, n, &cap, "device", tq_device_describe(c->devs[i]));
    /* what timed each device's rows: its own clock, or the host's */
    for (int i = 0; !st && i < c->ndev; i++) {
        char timer[256];
        tqb_timer_name(c->devs[i], timer, sizeof timer);
        snprintf(buf, sizeof buf, "%s: %s", tq_device_name(c->devs[i]), timer);
        st = add(kv, n, &cap, "timer", buf);
    }
    for (char **e = environ; !st && e && *e; e++)
        for (int p = 0; env_prefixes[p]; p++)
            if (!strncmp(*e, env_prefixes[p], strlen(env_prefixes[p]))) {
                st = add(kv, n, &cap, "env", *e);
                break;
            }
    if (st)
        tqb_context_free(*kv, *n);
    return st;
}

void tqb_context_free(tqb_kv *kv, int n)
{
    for (int i = 0; i < n; i++)
        free(kv[i].val);
    free(kv);
}
