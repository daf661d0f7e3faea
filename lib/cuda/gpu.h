/* gpu.h: what the files of the CUDA and HIP backend share. lib/cuda/ is one
 * source built twice: with TQ_GPU_HIP it is the HIP backend (libamdhip64,
 * rocBLAS), without it the CUDA one (libcuda, cuBLAS). The runtimes are
 * reached only through the table below, which api_cuda.c or api_hip.c fills
 * from the library it dlopens; everything else is the same code. */
#ifndef TQ_GPU_H
#define TQ_GPU_H

#include "../backend.h"
#include "../internal.h"

#include <pthread.h>

#ifdef TQ_GPU_HIP
#define TQ_GPU_NAME "hip"
#define TQ_GPU(name) tq_hip_##name
#define TQ_GPU_BACKEND tq_backend_hip
#else
#define TQ_GPU_NAME "cuda"
#define TQ_GPU(name) tq_cuda_##name
#define TQ_GPU_BACKEND tq_backend_cuda
#endif

typedef int gpu_res;                /* CUresult, hipError_t: 0 is success */
typedef unsigned long long gpu_ptr; /* CUdeviceptr; a hipDeviceptr_t is a pointer of that size */
typedef void *gpu_handle;           /* contexts, streams, modules, functions, events, BLAS handles */

/* Device attributes we ask for, in our numbering (each API maps them). */
enum { GPU_ATTR_MAX_THREADS, GPU_ATTR_SHARED, GPU_ATTR_WARP, GPU_ATTR_SMS, GPU_ATTR_CC_MAJOR,
       GPU_ATTR_CC_MINOR, GPU_ATTR_COUNT };

/* BLAS operand types, in our numbering. */
enum { GPU_BLAS_F32, GPU_BLAS_F16, GPU_BLAS_BF16 };

typedef struct tq_gpu_api {
    char why[256];          /* why the runtime is unavailable, when it is */
    int driver_version;     /* as the runtime reports it */
    char blas_name[96];     /* "cuBLAS 13.0.2" / "rocBLAS 2.45" / "" when none */
    int has_blas;
    double load_s, blas_load_s; /* seconds to load and start the runtime, the BLAS library */
    gpu_res (*device_count)(int *n);
    gpu_res (*device_name)(char *name, int len, int dev);
    gpu_res (*device_attr)(int *v, int attr, int dev); /* attr: GPU_ATTR_* */
    gpu_res (*device_memory)(size_t *bytes, int dev);
    void (*device_arch)(int dev, char *out, size_t n); /* "sm_90", "gfx90a" */
    gpu_res (*enter)(int dev, gpu_handle *ctx);        /* make dev current (retain its context) */
    gpu_res (*set_current)(int dev, gpu_handle ctx);
    void (*leave)(int dev, gpu_handle ctx);
    gpu_res (*stream_create)(gpu_handle *s);
    gpu_res (*stream_sync)(gpu_handle s);
    gpu_res (*stream_destroy)(gpu_handle s);
    gpu_res (*module_load)(gpu_handle *m, const void *image);
    gpu_res (*module_unload)(gpu_handle m);
    gpu_res (*module_function)(gpu_handle *f, gpu_handle m, const char *name);
    gpu_res (*launch)(gpu_handle f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                      unsigned bz, unsigned shared, gpu_handle s, void **params, void **extra);
    gpu_res (*mem_alloc)(gpu_ptr *p, size_t n);
    gpu_res (*mem_free)(gpu_ptr p);
    gpu_res (*host_alloc)(void **p, size_t n);
    gpu_res (*host_free)(void *p);
    gpu_res (*htod)(gpu_ptr dst, const void *src, size_t n, gpu_handle s);
    gpu_res (*dtoh)(void *dst, gpu_ptr src, size_t n, gpu_handle s);
    gpu_res (*dtod)(gpu_ptr dst, gpu_ptr src, size_t n, gpu_handle s);
    gpu_res (*memset8)(gpu_ptr dst, unsigned char v, size_t n, gpu_handle s);
    gpu_res (*event_create)(gpu_handle *e);
    gpu_res (*event_record)(gpu_handle e, gpu_handle s);
    gpu_res (*event_sync)(gpu_handle e);
    gpu_res (*event_destroy)(gpu_handle e);
    /* Events that keep a time, and the milliseconds between two of them
     * once both are reached: NULL where the runtime lacks them (the device
     * is then timed with the host's clock). */
    gpu_res (*timed_event_create)(gpu_handle *e);
    gpu_res (*event_elapsed)(float *ms, gpu_handle start, gpu_handle end);
    gpu_res (*capture_begin)(gpu_handle s);              /* relaxed mode */
    gpu_res (*capture_end)(gpu_handle s, gpu_handle *graph);
    gpu_res (*graph_instantiate)(gpu_handle *exec, gpu_handle graph);
    gpu_res (*graph_launch)(gpu_handle exec, gpu_handle s);
    gpu_res (*graph_exec_destroy)(gpu_handle exec);
    gpu_res (*graph_destroy)(gpu_handle graph);
    const char *(*error_name)(gpu_res r);
    const char *(*blas_error_name)(int status); /* "CUBLAS_STATUS_EXECUTION_FAILED" */
    void *launch_end;       /* the `extra` list's end marker: CU 0x0, HIP 0x3 */
    /* BLAS, column-major as the libraries are; NULL when none was found.
     * blas_create and blas_gemm return the library's status, 0 = done. */
    int (*blas_create)(gpu_handle *h, gpu_handle stream);
    void (*blas_destroy)(gpu_handle h);
    /* C = alpha op(A) op(B) + beta C for `batch` matrices at the strides
     * given (elements); types GPU_BLAS_*; f32 compute, no TF32. 0 = done. */
    int (*blas_gemm)(gpu_handle h, int ta, int tb, int m, int n, int k, float alpha,
                     gpu_ptr a, int atype, int lda, long long sa, gpu_ptr b, int btype, int ldb,
                     long long sb, float beta, gpu_ptr c, int ldc, long long sc, int batch);
} tq_gpu_api;

/* Loads the runtime (once per process); 0 with api->why filled when absent. */
const tq_gpu_api *TQ_GPU(api)(void);
/* dl.c: dlopen of the file the environment variable env names when it is set
 * (that file only), else of the first of names[0..n) that loads. NULL when
 * none did; why is then dlerror's reason for a library that was there but
 * failed to load, or empty when none was found. */
void *TQ_GPU(dlopen_first)(const char *env, const char *const *names, size_t n, char *why,
                           size_t why_n);

/* The kernels of kernels/cuda/, as built for this runtime (fatbin / code
 * object bundle), embedded at build time. */
extern const unsigned char TQ_GPU(image)[];
extern const size_t TQ_GPU(image_size);

/* Device memory blocks kept for reuse (pool.c): freed blocks wait in lists
 * by size class until a tensor of that class needs one. */
typedef struct gpu_block {
    gpu_ptr ptr;
    size_t size;
    struct gpu_block *next;
} gpu_block;

#define GPU_POOL_CLASSES 48
#define GPU_STAGE_BYTES ((size_t)8 << 20)

/* The kernels we launch, looked up once per device. */
enum {
    K_ADD, K_ADD_ROW, K_SCALE, K_GELU, K_RELU, K_TANH, K_SIGMOID, K_ROWNORM, K_NORMALIZE,
    K_SOFTMAX, K_LAYERNORM, K_GATHER, K_CONVERT, K_MATMUL, K_TOPK, K_ATTENTION,
    K_ATTENTION_WEIGHTS, K_ATTENTION_RECEIVED, K_ATTENTION_FLASH, K_SELECT, K_ABOVE, K_RESCORE,
    K_FMA_PEAK, K_COUNT
};

typedef struct tq_gpu_ctx {
    const tq_gpu_api *api;
    int dev;
    gpu_handle ctx, stream, module, blas;
    gpu_handle fn[K_COUNT];
    int warp, max_threads, shared, sms;
    pthread_mutex_t lock;       /* the pool and the staging buffer */
    gpu_block *free_list[GPU_POOL_CLASSES];
    size_t pooled;              /* bytes held in the free lists */
    void *stage;                /* pinned host staging buffer */
    gpu_handle stage_done;      /* recorded after the last upload from the stage */
    int stage_busy;
    gpu_block *flag;            /* 4 bytes for kernels that report (gather's bad index) */
    int recording;              /* the stream is being captured into a graph */
    gpu_block *graph_owned;     /* blocks freed while recording: the graph's */
    gpu_handle timer[2];        /* tq_device_timer's start and end events, made on first use */
    double ctx_s, module_s, blas_s; /* seconds its open took for each (monotonic clock) */
} tq_gpu_ctx;

/* The monotonic clock in seconds, for the start-up's parts. */
double TQ_GPU(clock)(void);

/* The driver's name of a call, in the API this build speaks. */
#ifdef TQ_GPU_HIP
#define GPU_CALL(cu, hip) hip
#else
#define GPU_CALL(cu, hip) cu
#endif

/* A failure of the runtime as one line that names the device, the call, the
 * driver's error and what we were doing: "cuda:0: cuMemcpyHtoDAsync:
 * CUDA_ERROR_ILLEGAL_ADDRESS (copying to the device)". */
tq_status TQ_GPU(fail)(const struct tq_gpu_ctx *c, gpu_res r, const char *call, const char *doing);

/* pool.c */
tq_status TQ_GPU(pool_alloc)(tq_gpu_ctx *c, size_t n, gpu_block **b);
void TQ_GPU(pool_free)(tq_gpu_ctx *c, gpu_block *b);
void TQ_GPU(pool_drain)(tq_gpu_ctx *c);

/* launch.c: kernel arguments packed for the `extra` form of a launch (the
 * driver checks the size against the kernel's parameters). */
typedef struct gpu_args {
    unsigned char buf[128];
    size_t size;
} gpu_args;
void TQ_GPU(arg)(gpu_args *a, const void *v, size_t n);
#define ARG(a, v) TQ_GPU(arg)(a, &(v), sizeof(v))
tq_status TQ_GPU(launch)(tq_gpu_ctx *c, int kernel, unsigned gx, unsigned gy, unsigned gz,
                         unsigned block, unsigned shared, gpu_args *a);
/* A device pointer to a tensor's first byte: a tensor's buf is its block. */
/* The grid-stride kernels of kernels/cuda/ (elementwise ops, the FMA probe):
 * GPU_BLOCK threads a block, a block per GPU_BLOCK elements up to GPU_GRID_CAP
 * blocks (enough to fill any GPU; the threads then stride). */
#define GPU_BLOCK 256u
#define GPU_GRID_CAP (1u << 20)
static inline unsigned gpu_stride_grid(uint64_t n)
{
    uint64_t g = (n + GPU_BLOCK - 1) / GPU_BLOCK;
    return (unsigned)(g < 1 ? 1 : g > GPU_GRID_CAP ? GPU_GRID_CAP : g);
}
static inline gpu_ptr gpu_tensor_ptr(const tq_tensor *t) { return ((const gpu_block *)t->buf)->ptr + t->offset; }

/* graph.c: recording the stream into a graph and replaying it. */
tq_status TQ_GPU(graph_begin)(void *ctx);
tq_status TQ_GPU(graph_end)(void *ctx, int commit, void **graph);
tq_status TQ_GPU(graph_launch)(void *ctx, void *graph);
void TQ_GPU(graph_free)(void *ctx, void *graph);

/* ops.c, blas.c: the entries of the backend table. */
tq_status TQ_GPU(add)(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
tq_status TQ_GPU(scale)(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y);
tq_status TQ_GPU(gelu)(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status TQ_GPU(activate)(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y);
tq_status TQ_GPU(rownorm)(void *ctx, const tq_tensor *x, tq_tensor *norms);
tq_status TQ_GPU(normalize)(void *ctx, const tq_tensor *x, float eps, tq_tensor *y);
tq_status TQ_GPU(softmax)(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status TQ_GPU(layernorm)(void *ctx, const tq_tensor *x, const tq_tensor *g, const tq_tensor *b,
                            float eps, tq_tensor *y);
tq_status TQ_GPU(gather)(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y);
tq_status TQ_GPU(convert)(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status TQ_GPU(topk)(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx);
tq_status TQ_GPU(above)(void *ctx, const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt,
                        tq_tensor *lst);
tq_status TQ_GPU(attention)(void *ctx, const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                            const tq_attention_args *a, tq_tensor *out);
tq_status TQ_GPU(simtopk)(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                          int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
tq_status TQ_GPU(rowprod)(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                          float alpha, tq_tensor *out);
tq_status TQ_GPU(matmul)(void *ctx, const tq_tensor *a, int trans_a, const tq_tensor *b,
                         int trans_b, float alpha, float beta, tq_tensor *c);
/* peak.c: tq-bench's FMA peak probe (backend.h's fma_peak): one launch of
 * kernels/cuda/peak.cu, TQ_PEAK_CHAINS chains a thread. */
#define TQ_PEAK_CHAINS 8
tq_status TQ_GPU(fma_peak)(void *ctx, tq_tensor *out, int64_t iters, double *flops);
tq_status TQ_GPU(matmul_kernel)(tq_gpu_ctx *c, const tq_tensor *a, int trans_a, const tq_tensor *b,
                                int trans_b, float alpha, float beta, tq_tensor *out);

#endif
