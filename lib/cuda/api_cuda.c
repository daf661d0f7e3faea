/* api_cuda.c: the CUDA runtime pieces behind gpu.h's table: libcuda.so.1 by
 * dlopen, every entry through cuGetProcAddress (which hands out the _v2 ABI
 * of cuMemAlloc and friends for the version we ask), and cuBLAS by dlopen.
 * TQ_CUDA_DRIVER and TQ_CUBLAS name other files (the tests' stand-in). */
#ifndef TQ_GPU_HIP
#include "gpu.h"

#include <dlfcn.h>

#define CUDA_API_VERSION 12000 /* the ABI our prototypes below follow */

/* Driver entries, as their prototypes read in cuda.h for that version. */
static gpu_res (*cuInit)(unsigned);
static gpu_res (*cuDriverGetVersion)(int *);
static gpu_res (*cuDeviceGetCount)(int *);
static gpu_res (*cuDeviceGet)(int *, int);
static gpu_res (*cuDeviceGetName)(char *, int, int);
static gpu_res (*cuDeviceGetAttribute)(int *, int, int);
static gpu_res (*cuDeviceTotalMem)(size_t *, int);
static gpu_res (*cuDevicePrimaryCtxRetain)(gpu_handle *, int);
static gpu_res (*cuDevicePrimaryCtxRelease)(int);
static gpu_res (*cuCtxSetCurrent)(gpu_handle);
static gpu_res (*cuStreamCreate)(gpu_handle *, unsigned);
static gpu_res (*cuStreamSynchronize)(gpu_handle);
static gpu_res (*cuStreamDestroy)(gpu_handle);
static gpu_res (*cuModuleLoadData)(gpu_handle *, const void *);
static gpu_res (*cuModuleUnload)(gpu_handle);
static gpu_res (*cuModuleGetFunction)(gpu_handle *, gpu_handle, const char *);
static gpu_res (*cuLaunchKernel)(gpu_handle, unsigned, unsigned, unsigned, unsigned, unsigned,
                                 unsigned, unsigned, gpu_handle, void **, void **);
static gpu_res (*cuMemAlloc)(gpu_ptr *, size_t);
static gpu_res (*cuMemFree)(gpu_ptr);
static gpu_res (*cuMemAllocHost)(void **, size_t);
static gpu_res (*cuMemFreeHost)(void *);
static gpu_res (*cuMemcpyHtoDAsync)(gpu_ptr, const void *, size_t, gpu_handle);
static gpu_res (*cuMemcpyDtoHAsync)(void *, gpu_ptr, size_t, gpu_handle);
static gpu_res (*cuMemcpyDtoDAsync)(gpu_ptr, gpu_ptr, size_t, gpu_handle);
static gpu_res (*cuMemsetD8Async)(gpu_ptr, unsigned char, size_t, gpu_handle);
static gpu_res (*cuEventCreate)(gpu_handle *, unsigned);
static gpu_res (*cuEventRecord)(gpu_handle, gpu_handle);
static gpu_res (*cuEventSynchronize)(gpu_handle);
static gpu_res (*cuEventDestroy)(gpu_handle);
static gpu_res (*cuEventElapsedTime)(float *, gpu_handle, gpu_handle);
static gpu_res (*cuGetErrorName)(gpu_res, const char **);
static gpu_res (*cuStreamBeginCapture)(gpu_handle, int);
static gpu_res (*cuStreamEndCapture)(gpu_handle, gpu_handle *);
static gpu_res (*cuGraphInstantiateWithFlags)(gpu_handle *, gpu_handle, unsigned long long);
static gpu_res (*cuGraphLaunch)(gpu_handle, gpu_handle);
static gpu_res (*cuGraphExecDestroy)(gpu_handle);
static gpu_res (*cuGraphDestroy)(gpu_handle);

/* cuBLAS */
static int (*cublasCreate)(gpu_handle *);
static int (*cublasDestroy)(gpu_handle);
static int (*cublasSetStream)(gpu_handle, gpu_handle);
static int (*cublasGetVersion)(gpu_handle, int *);
static int (*cublasGemmStridedBatchedEx)(gpu_handle, int, int, int, int, int, const void *,
                                         const void *, int, int, long long, const void *, int, int,
                                         long long, const void *, void *, int, int, long long, int,
                                         int, int);

static const int cu_attr[GPU_ATTR_COUNT] = {
    [GPU_ATTR_MAX_THREADS] = 1, [GPU_ATTR_SHARED] = 8, [GPU_ATTR_WARP] = 10,
    [GPU_ATTR_SMS] = 16, [GPU_ATTR_CC_MAJOR] = 75, [GPU_ATTR_CC_MINOR] = 76};

static gpu_res dev_get(int i, int *d) { return cuDeviceGet(d, i); }

static gpu_res device_name(char *name, int len, int i)
{
    int d;
    gpu_res r = dev_get(i, &d);
    return r ? r : cuDeviceGetName(name, len, d);
}

static gpu_res device_attr(int *v, int attr, int i)
{
    int d;
    gpu_res r = dev_get(i, &d);
    return r ? r : cuDeviceGetAttribute(v, cu_attr[attr], d);
}

static gpu_res device_memory(size_t *bytes, int i)
{
    int d;
    gpu_res r = dev_get(i, &d);
    return r ? r : cuDeviceTotalMem(bytes, d);
}

static void device_arch(int i, char *out, size_t n)
{
    int ma = 0, mi = 0;
    device_attr(&ma, GPU_ATTR_CC_MAJOR, i);
    device_attr(&mi, GPU_ATTR_CC_MINOR, i);
    snprintf(out, n, "sm_%d%d", ma, mi);
}

/* The device's primary context, the one the CUDA runtime would use too. */
static gpu_res enter(int i, gpu_handle *ctx)
{
    int d;
    gpu_res r = dev_get(i, &d);
    if (!r)
        r = cuDevicePrimaryCtxRetain(ctx, d);
    return r ? r : cuCtxSetCurrent(*ctx);
}

static gpu_res set_current(int i, gpu_handle ctx)
{
    (void)i;
    return cuCtxSetCurrent(ctx);
}

static void leave(int i, gpu_handle ctx)
{
    int d;
    (void)ctx;
    if (!dev_get(i, &d))
        cuDevicePrimaryCtxRelease(d);
}

static gpu_res stream_create(gpu_handle *s) { return cuStreamCreate(s, 1 /* non-blocking */); }
/* CU_STREAM_CAPTURE_MODE_RELAXED: the pool may take memory from the driver
 * while a graph is recorded */
static gpu_res capture_begin(gpu_handle s) { return cuStreamBeginCapture(s, 2); }
static gpu_res graph_instantiate(gpu_handle *e, gpu_handle g) { return cuGraphInstantiateWithFlags(e, g, 0); }
static gpu_res event_create(gpu_handle *e) { return cuEventCreate(e, 2 /* no timing */); }
/* CU_EVENT_DEFAULT: a time is kept (timing costs a little at each record) */
static gpu_res timed_event_create(gpu_handle *e) { return cuEventCreate(e, 0); }

static const char *error_name(gpu_res r)
{
    const char *s = NULL;
    return cuGetErrorName && !cuGetErrorName(r, &s) && s ? s : "unknown CUDA error";
}

static int blas_create(gpu_handle *h, gpu_handle stream)
{
    int r = cublasCreate(h);
    if (r)
        return r;
    if ((r = cublasSetStream(*h, stream)))
        cublasDestroy(*h);
    return r;
}

/* cublasStatus_t (cublas_api.h) */
static const char *blas_error_name(int status)
{
    switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
    }
}

static void blas_destroy(gpu_handle h) { cublasDestroy(h); }

/* cudaDataType: CUDA_R_32F 0, CUDA_R_16F 2, CUDA_R_16BF 14 (A and B f16 or
 * bf16 with C f32: tensor cores, f32 sums); CUBLAS_COMPUTE_32F 68 (true f32:
 * no TF32, whose 10-bit products the tolerances of the tests would refuse);
 * CUBLAS_GEMM_DEFAULT -1. */
static int blas_gemm(gpu_handle h, int ta, int tb, int m, int n, int k, float alpha, gpu_ptr a,
                     int atype, int lda, long long sa, gpu_ptr b, int btype, int ldb, long long sb,
                     float beta, gpu_ptr c, int ldc, long long sc, int batch)
{
    static const int dt[] = {[GPU_BLAS_F32] = 0, [GPU_BLAS_F16] = 2, [GPU_BLAS_BF16] = 14};
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, (const void *)(uintptr_t)a,
                                      dt[atype], lda, sa, (const void *)(uintptr_t)b, dt[btype],
                                      ldb, sb, &beta, (void *)(uintptr_t)c, 0, ldc, sc, batch, 68,
                                      -1);
}

static tq_gpu_api api;

static void load_blas(void)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12"};
    const char *env = getenv("TQ_CUBLAS");
    char why[sizeof api.blas_name - 20]; /* room for "own kernels (no ...)" */
    void *lib = tq_cuda_dlopen_first("TQ_CUBLAS", names, 2, why, sizeof why);
    if (!lib) {
        snprintf(api.blas_name, sizeof api.blas_name, "own kernels (%s%s)", *why ? "" : "no ",
                 *why ? why : env && *env ? env : "libcublas.so.13 or .12");
        return;
    }
    *(void **)&cublasCreate = dlsym(lib, "cublasCreate_v2");
    *(void **)&cublasDestroy = dlsym(lib, "cublasDestroy_v2");
    *(void **)&cublasSetStream = dlsym(lib, "cublasSetStream_v2");
    *(void **)&cublasGetVersion = dlsym(lib, "cublasGetVersion_v2");
    *(void **)&cublasGemmStridedBatchedEx = dlsym(lib, "cublasGemmStridedBatchedEx");
    if (!cublasCreate || !cublasDestroy || !cublasSetStream || !cublasGemmStridedBatchedEx) {
        snprintf(api.blas_name, sizeof api.blas_name, "own kernels (cuBLAS lacks an entry we use)");
        dlclose(lib);
        return;
    }
    api.has_blas = 1;
    api.blas_create = blas_create;
    api.blas_destroy = blas_destroy;
    api.blas_gemm = blas_gemm;
    int v = 0;
    gpu_handle h;
    if (cublasGetVersion && !cublasCreate(&h)) {
        cublasGetVersion(h, &v);
        cublasDestroy(h);
    }
    snprintf(api.blas_name, sizeof api.blas_name, "cuBLAS %d.%d.%d", v / 10000, v % 10000 / 100,
             v % 100);
}

/* Fills *pfn through cuGetProcAddress; 0 when found. */
typedef gpu_res (*get_proc_v2_fn)(const char *, void **, int, unsigned long long, int *);
typedef gpu_res (*get_proc_fn)(const char *, void **, int, unsigned long long);
static get_proc_v2_fn get_proc_v2;
static get_proc_fn get_proc;

static int proc(const char *name, void *pfn)
{
    void **p = pfn;
    *p = NULL;
    int status = 0;
    gpu_res r = get_proc_v2 ? get_proc_v2(name, p, CUDA_API_VERSION, 0, &status)
                            : get_proc(name, p, CUDA_API_VERSION, 0);
    return r || !*p ? -1 : 0;
}

static void load(void)
{
    static const char *const names[] = {"libcuda.so.1"};
    const char *env = getenv("TQ_CUDA_DRIVER");
    const char *path = env && *env ? env : names[0];
    void *lib = tq_cuda_dlopen_first("TQ_CUDA_DRIVER", names, 1, api.why, sizeof api.why);
    if (!lib) {
        if (!*api.why)
            snprintf(api.why, sizeof api.why, "%s not found (no NVIDIA driver)", path);
        return;
    }
    *(void **)&get_proc_v2 = dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc_v2)
        *(void **)&get_proc = dlsym(lib, "cuGetProcAddress");
    if (!get_proc_v2 && !get_proc) {
        snprintf(api.why, sizeof api.why, "%s has no cuGetProcAddress: driver too old (CUDA 11.3 or later needed)", path);
        return;
    }
    struct { const char *name; void *fn; } t[] = {
        {"cuInit", &cuInit}, {"cuDriverGetVersion", &cuDriverGetVersion},
        {"cuDeviceGetCount", &cuDeviceGetCount}, {"cuDeviceGet", &cuDeviceGet},
        {"cuDeviceGetName", &cuDeviceGetName}, {"cuDeviceGetAttribute", &cuDeviceGetAttribute},
        {"cuDeviceTotalMem", &cuDeviceTotalMem}, {"cuDevicePrimaryCtxRetain", &cuDevicePrimaryCtxRetain},
        {"cuDevicePrimaryCtxRelease", &cuDevicePrimaryCtxRelease}, {"cuCtxSetCurrent", &cuCtxSetCurrent},
        {"cuStreamCreate", &cuStreamCreate}, {"cuStreamSynchronize", &cuStreamSynchronize},
        {"cuStreamDestroy", &cuStreamDestroy}, {"cuModuleLoadData", &cuModuleLoadData},
        {"cuModuleUnload", &cuModuleUnload}, {"cuModuleGetFunction", &cuModuleGetFunction},
        {"cuLaunchKernel", &cuLaunchKernel}, {"cuMemAlloc", &cuMemAlloc}, {"cuMemFree", &cuMemFree},
        {"cuMemAllocHost", &cuMemAllocHost}, {"cuMemFreeHost", &cuMemFreeHost},
        {"cuMemcpyHtoDAsync", &cuMemcpyHtoDAsync}, {"cuMemcpyDtoHAsync", &cuMemcpyDtoHAsync},
        {"cuMemcpyDtoDAsync", &cuMemcpyDtoDAsync}, {"cuMemsetD8Async", &cuMemsetD8Async},
        {"cuEventCreate", &cuEventCreate}, {"cuEventRecord", &cuEventRecord},
        {"cuEventSynchronize", &cuEventSynchronize}, {"cuEventDestroy", &cuEventDestroy},
        {"cuGetErrorName", &cuGetErrorName}, {"cuStreamBeginCapture", &cuStreamBeginCapture},
        {"cuStreamEndCapture", &cuStreamEndCapture},
        {"cuGraphInstantiateWithFlags", &cuGraphInstantiateWithFlags},
        {"cuGraphLaunch", &cuGraphLaunch}, {"cuGraphExecDestroy", &cuGraphExecDestroy},
        {"cuGraphDestroy", &cuGraphDestroy},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (proc(t[i].name, t[i].fn)) {
            snprintf(api.why, sizeof api.why, "%s: no %s: driver too old for this build", path,
                     t[i].name);
            return;
        }
    gpu_res r = cuInit(0);
    if (r) {
        snprintf(api.why, sizeof api.why, "cuInit: %s (no usable NVIDIA GPU)", error_name(r));
        return;
    }
    cuDriverGetVersion(&api.driver_version);
    api.device_count = cuDeviceGetCount;
    api.device_name = device_name;
    api.device_attr = device_attr;
    api.device_memory = device_memory;
    api.device_arch = device_arch;
    api.enter = enter;
    api.set_current = set_current;
    api.leave = leave;
    api.stream_create = stream_create;
    api.stream_sync = cuStreamSynchronize;
    api.stream_destroy = cuStreamDestroy;
    api.module_load = cuModuleLoadData;
    api.module_unload = cuModuleUnload;
    api.module_function = cuModuleGetFunction;
    api.launch = cuLaunchKernel;
    api.mem_alloc = cuMemAlloc;
    api.mem_free = cuMemFree;
    api.host_alloc = cuMemAllocHost;
    api.host_free = cuMemFreeHost;
    api.htod = cuMemcpyHtoDAsync;
    api.dtoh = cuMemcpyDtoHAsync;
    api.dtod = cuMemcpyDtoDAsync;
    api.memset8 = cuMemsetD8Async;
    api.event_create = event_create;
    api.event_record = cuEventRecord;
    api.event_sync = cuEventSynchronize;
    api.event_destroy = cuEventDestroy;
    /* not needed to compute: without it, tq-bench times with the host's clock */
    if (!proc("cuEventElapsedTime", &cuEventElapsedTime)) {
        api.timed_event_create = timed_event_create;
        api.event_elapsed = cuEventElapsedTime;
    }
    api.capture_begin = capture_begin;
    api.capture_end = cuStreamEndCapture;
    api.graph_instantiate = graph_instantiate;
    api.graph_launch = cuGraphLaunch;
    api.graph_exec_destroy = cuGraphExecDestroy;
    api.graph_destroy = cuGraphDestroy;
    api.error_name = error_name;
    api.blas_error_name = blas_error_name;
    api.launch_end = (void *)0;
    double t0 = TQ_GPU(clock)();
    load_blas();
    api.blas_load_s = TQ_GPU(clock)() - t0;
}

/* The runtime's load and start, timed (tq_device_startup reports it). */
static void load_timed(void)
{
    double t0 = TQ_GPU(clock)();
    load();
    api.load_s = TQ_GPU(clock)() - t0 - api.blas_load_s;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

const tq_gpu_api *TQ_GPU(api)(void)
{
    pthread_once(&once, load_timed);
    return &api;
}
#endif
