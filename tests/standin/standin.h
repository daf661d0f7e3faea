/* standin.h: the stand-in driver's own objects (devices, contexts, streams,
 * queued work, graphs, modules) and the core functions the CUDA, HIP, cuBLAS
 * and rocBLAS entry points share. The core speaks CUresult; HIP's codes have
 * the same numbers for everything the stand-in returns. */
#ifndef TQ_SD_STANDIN_H
#define TQ_SD_STANDIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "abi.h"
#include "emu_state.h"

#define TQ_SD_API __attribute__((visibility("default")))

enum { TQ_SD_CUDA = 0, TQ_SD_HIP = 1 }; /* which API a call came through */

/* ---- configuration (environment, read once) and the global lock ---- */
struct tq_sd_config {
    int devices;          /* TQ_STANDIN_DEVICES, default 1 */
    size_t memory;        /* TQ_STANDIN_MEMORY bytes per device, default 8 GiB */
    size_t stack;         /* TQ_STANDIN_STACK bytes per fiber */
    int quiet;            /* TQ_STANDIN_QUIET=1: no tq-standin: lines */
};
const struct tq_sd_config *tq_sd_cfg(void);
/* One lock around every entry point: the stand-in is not a performance
 * vehicle, and a kernel runs while holding it. */
void tq_sd_lock(void);
CUresult tq_sd_unlock(CUresult r);
/* Prints one line `tq-standin: ...` on stderr (not under TQ_STANDIN_QUIET). */
void tq_sd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* TQ_STANDIN_SEED and TQ_STANDIN_DRIVER_VERSION, read at each use so that a
 * test can vary them. */
uint64_t tq_sd_seed(void);
int tq_sd_driver_version(void);
/* Whether TQ_STANDIN_HIDE (a comma list) names symbol: cuGetProcAddress then
 * answers as a driver that lacks it. */
int tq_sd_hidden(const char *symbol);

/* ---- injected faults, sticky errors, call counts (fault.c) ---- */
enum { TQ_SD_FAULT_LAUNCH, TQ_SD_FAULT_ALLOC, TQ_SD_FAULT_COPY, TQ_SD_FAULT_SYNC,
       TQ_SD_FAULT_EVENT, TQ_SD_FAULT_MODULE, TQ_SD_FAULT_BLAS, TQ_SD_FAULT_GRAPH,
       TQ_SD_FAULT_CONTEXT, TQ_SD_FAULT_KINDS };
/* Counts a call of `kind`: 0 to go on, else what the call returns: the
 * sticky error once there is one, or `code` (the driver's error for this
 * call) when TQ_STANDIN_FAIL names this call. */
CUresult tq_sd_fault(int kind, int code);
/* The sticky error, or CUDA_SUCCESS; tq_sd_poison makes `code` the sticky
 * error when it is one of those (a kernel that failed as it ran). */
CUresult tq_sd_poisoned(void);
void tq_sd_poison(CUresult code);
int tq_sd_sticky(int code);
/* The "KIND COUNT" lines of the calls counted so far, into f (counts.c
 * writes them at exit, with the work's counters). */
void tq_sd_fault_write(FILE *f);
/* The entry points' first line: `return` the fault when there is one. */
#define TQ_SD_FAULT(kind, code)                                                            \
    do {                                                                                   \
        CUresult f_ = tq_sd_fault(TQ_SD_FAULT_##kind, code);                               \
        if (f_)                                                                            \
            return f_;                                                                     \
    } while (0)
#define TQ_SD_STICKY()                                                                     \
    do {                                                                                   \
        CUresult f_ = tq_sd_poisoned();                                                    \
        if (f_)                                                                            \
            return f_;                                                                     \
    } while (0)

/* ---- counters of the work asked of the device (counts.c) ---- */
enum { TQ_SD_WORK_LAUNCHES, TQ_SD_WORK_BLAS, TQ_SD_WORK_SYNCS, TQ_SD_WORK_H2D, TQ_SD_WORK_D2H,
       TQ_SD_WORK_D2D, TQ_SD_WORK_ALLOCS, TQ_SD_WORK_PINNED, TQ_SD_WORK_GRAPHS,
       TQ_SD_WORK_KINDS };
/* Adds n to a counter (thread-safe, with or without the lock). syncs: each
 * call that makes the host wait for the device's work on a GPU. */
void tq_sd_count(int kind, unsigned long long n);
/* Counts an op that is queued to run on a stream (not one captured into a
 * graph: its replays count): a launch, a BLAS product, a copy's bytes. */
struct tq_sd_op;
void tq_sd_count_op(const struct tq_sd_op *op);

/* ---- devices and contexts (device.c) ---- */
struct tq_sd_ctx {
    int device;
    int refs;                     /* primary-context retains */
    struct tq_sd_stream *null_stream;
    struct tq_sd_stream **streams; /* every stream of the context, null one first */
    int nstreams, cap_streams;
};
CUresult tq_sd_check_device(int dev);
/* devices the API shows under CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES */
int tq_sd_visible(int api);
CUresult tq_sd_check_hip(int dev); /* a HIP ordinal among those visible */
struct tq_sd_ctx *tq_sd_primary(int dev); /* created on first use */
/* The calling thread's current context for `api` (CUDA: the context stack;
 * HIP: the current device's primary context). */
struct tq_sd_ctx *tq_sd_current(int api);
CUresult tq_sd_set_current(struct tq_sd_ctx *ctx);
CUresult tq_sd_push_current(struct tq_sd_ctx *ctx);
CUresult tq_sd_pop_current(struct tq_sd_ctx **ctx);
int tq_sd_hip_device(void);
CUresult tq_sd_hip_set_device(int dev);
int tq_sd_attribute(int api, int attr, int *value); /* 0 or -1: unknown attribute */
extern const char tq_sd_device_name[];
extern const char tq_sd_gcn_arch[];

/* ---- device and pinned memory (mem.c) ---- */
CUresult tq_sd_mem_alloc(int dev, size_t bytes, void **p);
CUresult tq_sd_mem_free(void *p);
/* CUDA_SUCCESS when [p, p+n) lies inside one live allocation, else
 * CUDA_ERROR_INVALID_VALUE with a line naming `what`. */
CUresult tq_sd_mem_check(const void *p, size_t n, const char *what);
size_t tq_sd_mem_used(int dev);
CUresult tq_sd_host_alloc(size_t bytes, void **p);
CUresult tq_sd_host_free(void *p);
int tq_sd_host_pinned(const void *p, size_t n);

/* ---- kernels and launches (launch.c, sched.c) ---- */
struct tq_sd_module { int api; };
struct tq_sd_func {
    const struct tq_emu_kernel *k;
    int max_dyn_shared;    /* raised by cuFuncSetAttribute */
    struct tq_sd_func *next;
};
struct tq_sd_launch {
    const struct tq_emu_kernel *k;
    unsigned grid[3], block[3];
    unsigned shared;
    int warp_size;
    uint64_t seed;         /* TQ_STANDIN_SEED mixed with the launch's number */
    unsigned char *args;   /* k->args_size bytes, packed */
};
CUresult tq_sd_module_load(int api, const void *image, struct tq_sd_module **mod);
CUresult tq_sd_module_function(struct tq_sd_module *mod, const char *name,
                               struct tq_sd_func **fn);
/* Checks a launch as the driver does and queues it on `s` (or the graph it
 * captures into). */
CUresult tq_sd_launch(int api, struct tq_sd_func *f, const unsigned grid[3],
                      const unsigned block[3], unsigned shared, struct tq_sd_stream *s,
                      void **params, void **extra);
/* Runs every block of a launch (sched.c): CUDA_SUCCESS or
 * CUDA_ERROR_LAUNCH_FAILED after one line saying why. */
CUresult tq_sd_run(const struct tq_sd_launch *l);

/* ---- BLAS (blas.c) ---- */
struct tq_sd_blas {
    int api;
    struct tq_sd_stream *stream; /* NULL: the null stream of the current context */
};
struct tq_sd_gemm {
    int ta, tb;                /* 0: op(X) = X, 1: its transpose */
    int m, n, k, batch;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
    int Atype, Btype, Ctype;   /* CUDA_R_* */
    int lda, ldb, ldc, ldd;
    long long sA, sB, sC, sD;  /* batch strides in elements */
};
void tq_sd_gemm_run(const struct tq_sd_gemm *g);

/* ---- streams, events and graphs (stream.c) ---- */
enum { TQ_SD_OP_LAUNCH, TQ_SD_OP_COPY, TQ_SD_OP_MEMSET, TQ_SD_OP_EVENT, TQ_SD_OP_GEMM };
struct tq_sd_op {
    int kind;
    union {
        struct tq_sd_launch *launch;
        struct { void *dst; const void *src; size_t n; void *staged; int dir; } copy;
        struct { void *dst; uint32_t value; size_t n; int width; } set;
        struct tq_sd_event *event;
        struct tq_sd_gemm *gemm;
    } u;
};
struct tq_sd_graph {
    struct tq_sd_op *ops;
    size_t n, cap;
};
struct tq_sd_stream {
    struct tq_sd_ctx *ctx;
    struct tq_sd_op *ops;      /* queued, not yet run */
    size_t n, cap;
    struct tq_sd_graph *capture; /* non-NULL while capturing */
    int capture_mode;
    int capture_broken;        /* a synchronizing call happened during capture */
};
struct tq_sd_event {
    struct tq_sd_stream *stream; /* where it was last recorded */
    int pending;               /* recorded, not yet reached */
    int recorded;
    int no_timing;             /* CU_EVENT_DISABLE_TIMING: no time to tell */
    double t;                  /* seconds, when reached */
};
struct tq_sd_stream *tq_sd_stream_new(struct tq_sd_ctx *ctx);
CUresult tq_sd_stream_destroy(struct tq_sd_stream *s);
/* NULL and the legacy / per-thread handles are the current context's null
 * stream; NULL result: no current context. */
struct tq_sd_stream *tq_sd_stream_resolve(int api, struct tq_sd_stream *s);
/* Queues an op (taking ownership of what it points to), or records it into
 * the graph being captured. */
CUresult tq_sd_enqueue(struct tq_sd_stream *s, struct tq_sd_op *op);
/* Runs what is queued on one stream / every stream of a context. A
 * synchronizing call during a capture breaks it. */
CUresult tq_sd_stream_sync(struct tq_sd_stream *s);
CUresult tq_sd_ctx_sync(struct tq_sd_ctx *ctx);
/* cuCtxSynchronize, hipDeviceSynchronize: refused (900, the capture
 * invalidated) while any stream of the context captures, in any mode. */
CUresult tq_sd_device_sync(struct tq_sd_ctx *ctx);
/* `code` (and the capture invalidated) when a stream of the context captures
 * in global or thread-local mode: what a GPU answers to a call that would
 * synchronize with it or is unsafe during it (an allocation, a free). */
CUresult tq_sd_capture_guard(struct tq_sd_ctx *ctx, CUresult code, const char *what);
CUresult tq_sd_copy(int api, void *dst, const void *src, size_t n, struct tq_sd_stream *s,
                    int async, int dir); /* dir: 1 HtoD, 2 DtoH, 3 DtoD */
CUresult tq_sd_memset(int api, void *dst, uint32_t value, size_t n, int width,
                      struct tq_sd_stream *s);
CUresult tq_sd_event_record(struct tq_sd_event *ev, struct tq_sd_stream *s);
CUresult tq_sd_event_sync(struct tq_sd_event *ev);
CUresult tq_sd_event_elapsed(float *ms, struct tq_sd_event *a, struct tq_sd_event *b);
CUresult tq_sd_capture_begin(struct tq_sd_stream *s, int mode);
CUresult tq_sd_capture_end(struct tq_sd_stream *s, struct tq_sd_graph **g);
CUresult tq_sd_graph_instantiate(struct tq_sd_graph *g, struct tq_sd_graph **exec);
CUresult tq_sd_graph_launch(struct tq_sd_graph *exec, struct tq_sd_stream *s);
void tq_sd_graph_free(struct tq_sd_graph *g);
void tq_sd_op_free(struct tq_sd_op *op);

#endif
