/* counts.c: counters of the work the product asks of the device (kernel
 * launches, BLAS products, the host's waits for the device, bytes copied
 * each way, allocations), so that tests can hold a tool's run to the shape
 * its design promises without a GPU (tests/bats/gpu-shape.bats). With
 * TQ_STANDIN_COUNTS=FILE, at the process's end (or the library's unload) one
 * line "KIND COUNT" per fault kind (fault.c) and then one line
 *   launches=N blas=N syncs=N h2d=N d2h=N d2d=N allocs=N pinned=N graphs=N
 * are appended to FILE. A kernel, product or copy counts when it is queued to
 * run on a stream, a graph's replay included (capturing it counts nothing);
 * a synchronous copy when it is made. */

#include "standin.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const names[TQ_SD_WORK_KINDS] = {
    [TQ_SD_WORK_LAUNCHES] = "launches", [TQ_SD_WORK_BLAS] = "blas",
    [TQ_SD_WORK_SYNCS] = "syncs",       [TQ_SD_WORK_H2D] = "h2d",
    [TQ_SD_WORK_D2H] = "d2h",           [TQ_SD_WORK_D2D] = "d2d",
    [TQ_SD_WORK_ALLOCS] = "allocs",     [TQ_SD_WORK_PINNED] = "pinned",
    [TQ_SD_WORK_GRAPHS] = "graphs",
};

/* Most calls come under the stand-in's lock, but not all (hipEventCreate,
 * the frees of pinned memory...): relaxed atomics cost as little and need
 * no rule about which. */
static _Atomic unsigned long long work[TQ_SD_WORK_KINDS];

void tq_sd_count(int kind, unsigned long long n)
{
    atomic_fetch_add_explicit(&work[kind], n, memory_order_relaxed);
}

void tq_sd_count_op(const struct tq_sd_op *op)
{
    static const int dirs[4] = {0, TQ_SD_WORK_H2D, TQ_SD_WORK_D2H, TQ_SD_WORK_D2D};
    switch (op->kind) {
    case TQ_SD_OP_LAUNCH: tq_sd_count(TQ_SD_WORK_LAUNCHES, 1); break;
    case TQ_SD_OP_GEMM: tq_sd_count(TQ_SD_WORK_BLAS, 1); break;
    case TQ_SD_OP_COPY:
        if (op->u.copy.dir >= 1 && op->u.copy.dir <= 3)
            tq_sd_count(dirs[op->u.copy.dir], op->u.copy.n);
        break;
    default: break;
    }
}

__attribute__((destructor)) static void write_counts(void)
{
    const char *path = getenv("TQ_STANDIN_COUNTS");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "a");
    if (!f) {
        tq_sd_log("TQ_STANDIN_COUNTS=%s: cannot open it", path);
        return;
    }
    tq_sd_fault_write(f);
    for (int k = 0; k < TQ_SD_WORK_KINDS; k++)
        fprintf(f, "%s%s=%llu", k ? " " : "", names[k],
                atomic_load_explicit(&work[k], memory_order_relaxed));
    fputc('\n', f);
    fclose(f);
}

/* The self-tests' way to read the counters (not part of any driver API): the
 * first n of them, in the order of the line. */
TQ_SD_API void tq_standin_counts(unsigned long long *out, int n)
{
    for (int k = 0; k < n && k < TQ_SD_WORK_KINDS; k++)
        out[k] = atomic_load_explicit(&work[k], memory_order_relaxed);
}
