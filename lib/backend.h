/* backend.h: the table a backend fills to plug into libtq (the way ggml and BLIS
 * do it). Adding a backend = filling this table; adding an op = one entry here,
 * its checks in op.c, a CPU implementation and a case in the cross-backend suite. */
#ifndef TQ_BACKEND_H
#define TQ_BACKEND_H

#include "tq.h"

typedef struct tq_device_info {
    char name[128];       /* "AMD EPYC 9R14", "NVIDIA H100", "llvmpipe (LLVM 15)" */
    int cpu_type;         /* a CPU-type device: `auto` never picks it */
    uint64_t memory;      /* bytes of device memory, 0 if unknown */
    char detail[256];     /* driver, kernel, threads...: one line */
} tq_device_info;

/* The op entries get tensors already checked by op.c (shapes, dtypes, device):
 * a backend only computes. Each entry may be NULL: the op then fails with
 * "not available on this backend". */
typedef struct tq_backend_ops {
    tq_status (*matmul)(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                        int trans_b, float alpha, float beta, tq_tensor *c);
    /* NULL: op.c runs matmul, add, gelu and convert one by one */
    tq_status (*matmul_then)(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                             int trans_b, float alpha, float beta, const tq_matmul_then *then,
                             tq_tensor *c);
    tq_status (*quantize_rows)(void *ctx, const tq_tensor *x, const tq_tensor *colscale,
                               tq_tensor *q, tq_tensor *scale);
    tq_status (*matmul_i8)(void *ctx, const tq_tensor *a, const tq_tensor *ascale,
                           const tq_tensor *b, const tq_tensor *bscale, const tq_i8_rest *rest,
                           float beta, const tq_matmul_then *then, tq_tensor *c);
    tq_status (*rownorm)(void *ctx, const tq_tensor *x, tq_tensor *norms);
    tq_status (*normalize)(void *ctx, const tq_tensor *x, float eps, tq_tensor *y);
    tq_status (*topk)(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals,
                      tq_tensor *idx);
    tq_status (*above)(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                       tq_tensor *lst);
    tq_status (*softmax)(void *ctx, const tq_tensor *x, tq_tensor *y);
    tq_status (*layernorm)(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                           const tq_tensor *beta, float eps, tq_tensor *y);
    /* NULL: op.c runs layernorm and convert one after the other */
    tq_status (*layernorm_low)(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                               const tq_tensor *beta, float eps, tq_tensor *y, tq_tensor *low);
    tq_status (*gelu)(void *ctx, const tq_tensor *x, tq_tensor *y);
    tq_status (*activate)(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y);
    tq_status (*add)(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
    tq_status (*scale)(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y);
    tq_status (*gather)(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y);
    tq_status (*convert)(void *ctx, const tq_tensor *x, tq_tensor *y);
    tq_status (*attention)(void *ctx, const tq_tensor *q, const tq_tensor *k,
                           const tq_tensor *v, const tq_attention_args *args, tq_tensor *out);
    tq_status (*simtopk)(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                         int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
    tq_status (*codetopk)(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                          const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
    tq_status (*codematrix)(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *db, const tq_tensor *dbscale, tq_metric metric,
                            tq_tensor *out);
    tq_status (*codescreen)(void *ctx, const tq_tensor *q, const tq_tensor *qscale,
                            const tq_tensor *qterms, const tq_tensor *db,
                            const tq_tensor *dbscale, const tq_tensor *dbterms, tq_tensor *out);
    /* rowprod: what prepare leaves in *state (may be NULL) comes back to
     * rowprod and release; a backend without prepare gets state NULL. */
    tq_status (*rowprod_prepare)(void *ctx, const tq_tensor *db, void **state);
    tq_status (*rowprod)(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                         float alpha, tq_tensor *out);
    void (*rowprod_release)(void *ctx, void *state);
    /* training (lib/train): the backward of activate and gelu */
    tq_status (*activate_grad)(void *ctx, const tq_tensor *x, tq_activation act,
                               const tq_tensor *dy, tq_tensor *dx);
    tq_status (*gelu_grad)(void *ctx, const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx);
} tq_backend_ops;

typedef struct tq_backend {
    tq_backend_kind kind;
    const char *name; /* "cpu", "vulkan", "cuda", "hip": the --device word */
    /* How many devices there are; on 0 or failure, the message says why
     * (runtime library not found, no driver, no device). */
    tq_status (*probe)(int *count);
    /* For auto, before probe: 0 when this machine cannot have a device auto
     * would take, known without loading the runtime; NULL means it may. */
    int (*may_have_gpu)(void);
    tq_status (*info)(int index, tq_device_info *info);
    tq_status (*open)(int index, void **ctx);
    /* What starting the device took, one line ("" or NULL: nothing to say):
     * loading the runtime, making the context, loading the kernels; on the
     * CPU, whether its AMX tiles are used. */
    void (*startup)(void *ctx, char *out, size_t n);
    void (*close)(void *ctx);
    tq_status (*alloc)(void *ctx, size_t nbytes, void **buf);
    void (*free)(void *ctx, void *buf);
    /* Frees what the backend's ops keep in a constant tensor's derived (NULL
     * where they keep nothing). */
    void (*derived_free)(void *derived);
    tq_status (*upload)(void *ctx, void *buf, size_t offset, const void *src, size_t n);
    tq_status (*download)(void *ctx, const void *buf, size_t offset, void *dst, size_t n);
    tq_status (*sync)(void *ctx);
    /* Graphs (NULL where the device has none): ops queued between
     * graph_begin and graph_end are recorded, not run; graph_launch replays
     * them; graph_free waits for the last replay and frees the graph. */
    tq_status (*graph_begin)(void *ctx);
    tq_status (*graph_end)(void *ctx, int commit, void **graph);
    tq_status (*graph_launch)(void *ctx, void *graph);
    void (*graph_free)(void *ctx, void *graph);
    /* A timer on the device's own clock (NULL where it has none, as the CPU:
     * its callers time it with the host's): timer_begin marks where timing
     * starts in the device's queue of work, timer_end where it ends, waits
     * for the device to pass that mark and gives the seconds between the two.
     * timer_begin fails where this device cannot time (a driver without the
     * entry points, a queue without timestamps), saying why. */
    const char *timer_name; /* "device events", "timestamp queries" */
    tq_status (*timer_begin)(void *ctx);
    tq_status (*timer_end)(void *ctx, double *seconds);
    /* tq-bench's FMA peak probe (NULL where the backend has no kernel for
     * it, as the CPU: lib/bench/fma.c measures that one on the host): queues
     * one launch, no wait, of a kernel where each of out's f32 elements is a
     * thread that runs independent chains of `iters` fused multiply-adds in
     * registers and writes their sum there; *flops is that launch's exact
     * flop count (2 a multiply-add). Not an op: out is only a sink. With
     * out NULL it only says whether this device's kernels have it (TQ_OK)
     * or why not. */
    tq_status (*fma_peak)(void *ctx, tq_tensor *out, int64_t iters, double *flops);
    /* Whether matmul multiplies two operands of dtype dt (bf16, f16) as
     * such, rather than widening them to f32 first (NULL: never). */
    int (*native_product)(tq_dtype dt);
    tq_backend_ops ops;
} tq_backend;

struct tq_device {
    const tq_backend *backend;
    int index;
    void *ctx;
    char name[32];
    char describe[512];
    char host_ops[192]; /* ops that ran through the host path: "topk, convert" */
    int recording;      /* between tq_graph_begin and tq_graph_end */
    long graphs, replays; /* graphs recorded, and launched, on this device */
    char timer_why[192];  /* why its timer failed to start; "" while it has not */
    char why[320];        /* how it was chosen: "auto: cpu (work ... < ...)" */
    char startup[192];    /* what its start took, "" when nothing to say */
    tq_dtype rank_dtype;  /* products that only rank candidates: f32 or bf16 */
    long long rescored;   /* rows scored exactly by simtopk (atomic) */
};

/* The backends compiled into this build; the CPU one always is. */
extern const tq_backend tq_backend_cpu;
#ifdef TQ_HAVE_VULKAN
extern const tq_backend tq_backend_vulkan;
#endif
#ifdef TQ_HAVE_CUDA
extern const tq_backend tq_backend_cuda;
#endif
#ifdef TQ_HAVE_HIP
extern const tq_backend tq_backend_hip;
#endif

#endif
