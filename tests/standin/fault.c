/* fault.c: injected faults, sticky errors and call counts, so that the tests
 * can make any driver call of the product fail the way a GPU's would.
 *   TQ_STANDIN_FAIL=KIND:N[:CODE]  the Nth call of KIND (counted from 1 in the
 *                                  process) fails with the error the driver
 *                                  gives there, or with CODE
 *   TQ_STANDIN_COUNTS=FILE         at exit, one line "KIND COUNT" a kind,
 *                                  appended to FILE (counts.c writes them,
 *                                  with the counters of the work)
 * A code the CUDA documentation calls sticky (an illegal address, a failed
 * launch...: "the context cannot be used") poisons the process's contexts, as
 * on a GPU: every later call that uses one returns it, work still queued is
 * dropped, and only the process's end clears it. A sticky code given to a
 * launch is the kernel faulting: the launch itself returns success (it is
 * asynchronous) and the error meets the next call. */

#include "standin.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[TQ_SD_FAULT_KINDS] = {
    [TQ_SD_FAULT_LAUNCH] = "launch", [TQ_SD_FAULT_ALLOC] = "alloc",
    [TQ_SD_FAULT_COPY] = "copy",     [TQ_SD_FAULT_SYNC] = "sync",
    [TQ_SD_FAULT_EVENT] = "event",   [TQ_SD_FAULT_MODULE] = "module",
    [TQ_SD_FAULT_BLAS] = "blas",     [TQ_SD_FAULT_GRAPH] = "graph",
    [TQ_SD_FAULT_CONTEXT] = "context",
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned long long counts[TQ_SD_FAULT_KINDS];
static int fail_kind = -1;
static unsigned long long fail_n;
static int fail_code = -1; /* -1: the call's own */
static int poison;         /* the sticky error, once there is one */

void tq_sd_fault_write(FILE *f)
{
    pthread_mutex_lock(&lock);
    for (int k = 0; k < TQ_SD_FAULT_KINDS; k++)
        fprintf(f, "%s %llu\n", kind_names[k], counts[k]);
    pthread_mutex_unlock(&lock);
}

static void read_env(void)
{
    const char *s = getenv("TQ_STANDIN_FAIL");
    if (s && *s) {
        size_t len = strcspn(s, ":");
        char *end = NULL;
        for (int k = 0; k < TQ_SD_FAULT_KINDS; k++)
            if (strlen(kind_names[k]) == len && !strncmp(s, kind_names[k], len))
                fail_kind = k;
        if (fail_kind >= 0 && s[len] == ':') {
            fail_n = strtoull(s + len + 1, &end, 10);
            if (*end == ':')
                fail_code = (int)strtol(end + 1, &end, 0);
        }
        if (fail_kind < 0 || !fail_n || !end || *end) {
            tq_sd_log("TQ_STANDIN_FAIL=%s: not KIND:N[:CODE] (KIND launch, alloc, copy, sync, "
                      "event, module, blas, graph or context; N from 1); no fault injected", s);
            fail_kind = -1;
        }
    }
}

int tq_sd_sticky(int code)
{
    /* cuda.h's text for each: "the context cannot be used, so it must be
     * destroyed (and a new one should be created)" */
    switch (code) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED: return 1;
    default: return 0;
    }
}

CUresult tq_sd_fault(int kind, int code)
{
    pthread_once(&once, read_env);
    pthread_mutex_lock(&lock);
    int r = poison;
    if (!r && ++counts[kind] == fail_n && kind == fail_kind) {
        r = fail_code >= 0 ? fail_code : code;
        tq_sd_log("injected: %s call %llu fails with %d%s", kind_names[kind], fail_n, r,
                  tq_sd_sticky(r) ? " (sticky)" : "");
        if (tq_sd_sticky(r)) {
            poison = r;
            if (kind == TQ_SD_FAULT_LAUNCH)
                r = CUDA_SUCCESS; /* the kernel faults later, on the device */
        }
    }
    pthread_mutex_unlock(&lock);
    return (CUresult)r;
}

CUresult tq_sd_poisoned(void)
{
    pthread_mutex_lock(&lock);
    int r = poison;
    pthread_mutex_unlock(&lock);
    return (CUresult)r;
}

void tq_sd_poison(CUresult code)
{
    if (!tq_sd_sticky(code))
        return;
    pthread_mutex_lock(&lock);
    if (!poison)
        poison = code;
    pthread_mutex_unlock(&lock);
}

/* The self-tests' way past a sticky error they caused on purpose (a GPU
 * process would have to end): not part of any driver API. */
TQ_SD_API void tq_standin_clear_sticky(void)
{
    pthread_mutex_lock(&lock);
    poison = 0;
    pthread_mutex_unlock(&lock);
}
