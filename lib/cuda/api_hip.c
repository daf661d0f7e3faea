/* api_hip.c: the ROCm runtime pieces behind gpu.h's table: libamdhip64 (.6,
 * .5, unversioned) by dlopen, and rocBLAS. TQ_HIP_RUNTIME and TQ_ROCBLAS name
 * other files (the tests' stand-in). Our own prototypes: Debian ships no
 * rocBLAS headers, and the product must build without ROCm's. */
#ifdef TQ_GPU_HIP
#include "gpu.h"

#include <dlfcn.h>

static gpu_res (*hipInit)(unsigned);
static gpu_res (*hipDriverGetVersion)(int *);
static gpu_res (*hipGetDeviceCount)(int *);
static gpu_res (*hipDeviceGetName)(char *, int, int);
static gpu_res (*hipDeviceGetAttribute)(int *, int, int);
static gpu_res (*hipDeviceTotalMem)(size_t *, int);
static gpu_res (*hipGetDeviceProperties)(void *, int);
static gpu_res (*hipSetDevice)(int);
static gpu_res (*hipStreamCreate)(gpu_handle *);
static gpu_res (*hipStreamSynchronize)(gpu_handle);
static gpu_res (*hipStreamDestroy)(gpu_handle);
static gpu_res (*hipModuleLoadData)(gpu_handle *, const void *);
static gpu_res (*hipModuleUnload)(gpu_handle);
static gpu_res (*hipModuleGetFunction)(gpu_handle *, gpu_handle, const char *);
static gpu_res (*hipModuleLaunchKernel)(gpu_handle, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, gpu_handle, void **,
                                        void **);
static gpu_res (*hipMalloc)(void **, size_t);
static gpu_res (*hipFree)(void *);
static gpu_res (*hipHostMalloc)(void **, size_t, unsigned);
static gpu_res (*hipHostFree)(void *);
static gpu_res (*hipMemcpyHtoDAsync)(void *, const void *, size_t, gpu_handle);
static gpu_res (*hipMemcpyDtoHAsync)(void *, void *, size_t, gpu_handle);
static gpu_res (*hipMemcpyDtoDAsync)(void *, void *, size_t, gpu_handle);
static gpu_res (*hipMemsetAsync)(void *, int, size_t, gpu_handle);
static gpu_res (*hipEventCreate)(gpu_handle *);
static gpu_res (*hipEventRecord)(gpu_handle, gpu_handle);
static gpu_res (*hipEventSynchronize)(gpu_handle);
static gpu_res (*hipEventDestroy)(gpu_handle);
static gpu_res (*hipEventElapsedTime)(float *, gpu_handle, gpu_handle);
static const char *(*hipGetErrorName)(gpu_res);
static gpu_res (*hipStreamBeginCapture)(gpu_handle, int);
static gpu_res (*hipStreamEndCapture)(gpu_handle, gpu_handle *);
static gpu_res (*hipGraphInstantiate)(gpu_handle *, gpu_handle, void *, char *, size_t);
static gpu_res (*hipGraphLaunch)(gpu_handle, gpu_handle);
static gpu_res (*hipGraphExecDestroy)(gpu_handle);
static gpu_res (*hipGraphDestroy)(gpu_handle);

/* rocBLAS */
static int (*rocblas_create_handle)(gpu_handle *);
static int (*rocblas_destroy_handle)(gpu_handle);
static int (*rocblas_set_stream)(gpu_handle, gpu_handle);
static int (*rocblas_get_version_string)(char *, size_t);
static int (*rocblas_gemm_strided_batched_ex)(gpu_handle, int, int, int, int, int, const void *,
                                              const void *, int, int, long long, const void *, int,
                                              int, long long, const void *, const void *, int, int,
                                              long long, void *, int, int, long long, int, int, int,
                                              int, unsigned);

/* hipDeviceAttribute_t values (hip_runtime_api.h, ROCm 5 and 6). */
static const int hip_attr[GPU_ATTR_COUNT] = {
    [GPU_ATTR_MAX_THREADS] = 56, [GPU_ATTR_SHARED] = 74, [GPU_ATTR_WARP] = 87,
    [GPU_ATTR_SMS] = 63, [GPU_ATTR_CC_MAJOR] = 23, [GPU_ATTR_CC_MINOR] = 61};

static gpu_res device_attr(int *v, int attr, int dev) { return hipDeviceGetAttribute(v, hip_attr[attr], dev); }

/* The gfx target from hipDeviceProp_t's gcnArchName ("gfx90a:sramecc+:xnack-").
 * The unversioned hipGetDeviceProperties keeps ROCm 5's layout in ROCm 6 too
 * (6 added hipGetDevicePropertiesR0600 for its new one): name at 0,
 * gcnArchName at 396, 792 bytes in all; the buffer is larger for safety. */
#define HIP_PROPS_ARCH_OFFSET 396
static void device_arch(int dev, char *out, size_t n)
{
    static char props[4096];
    snprintf(out, n, "gfx?");
    if (!hipGetDeviceProperties || hipGetDeviceProperties(props, dev))
        return;
    const char *arch = props + HIP_PROPS_ARCH_OFFSET;
    size_t l = strcspn(arch, ":");
    if (l && l < 64 && !strncmp(arch, "gfx", 3))
        snprintf(out, n, "%.*s", (int)l, arch);
}

static gpu_res enter(int dev, gpu_handle *ctx)
{
    *ctx = NULL;
    return hipSetDevice(dev);
}
static gpu_res set_current(int dev, gpu_handle ctx)
{
    (void)ctx;
    return hipSetDevice(dev);
}
static void leave(int dev, gpu_handle ctx) { (void)dev, (void)ctx; }

static gpu_res mem_alloc(gpu_ptr *p, size_t n)
{
    void *v = NULL;
    gpu_res r = hipMalloc(&v, n);
    *p = (gpu_ptr)(uintptr_t)v;
    return r;
}
static gpu_res mem_free(gpu_ptr p) { return hipFree((void *)(uintptr_t)p); }
static gpu_res host_alloc(void **p, size_t n) { return hipHostMalloc(p, n, 0); }
static gpu_res htod(gpu_ptr d, const void *s, size_t n, gpu_handle st) { return hipMemcpyHtoDAsync((void *)(uintptr_t)d, s, n, st); }
static gpu_res dtoh(void *d, gpu_ptr s, size_t n, gpu_handle st) { return hipMemcpyDtoHAsync(d, (void *)(uintptr_t)s, n, st); }
static gpu_res dtod(gpu_ptr d, gpu_ptr s, size_t n, gpu_handle st)
{
    return hipMemcpyDtoDAsync((void *)(uintptr_t)d, (void *)(uintptr_t)s, n, st);
}
static gpu_res memset8(gpu_ptr d, unsigned char v, size_t n, gpu_handle st) { return hipMemsetAsync((void *)(uintptr_t)d, v, n, st); }

/* hipStreamCaptureModeRelaxed: the pool may allocate while a graph is recorded */
static gpu_res capture_begin(gpu_handle s) { return hipStreamBeginCapture(s, 2); }
static gpu_res graph_instantiate(gpu_handle *e, gpu_handle g) { return hipGraphInstantiate(e, g, NULL, NULL, 0); }

static const char *error_name(gpu_res r)
{
    const char *s = hipGetErrorName ? hipGetErrorName(r) : NULL;
    return s ? s : "unknown HIP error";
}

static int blas_create(gpu_handle *h, gpu_handle stream)
{
    int r = rocblas_create_handle(h);
    if (r)
        return r;
    if ((r = rocblas_set_stream(*h, stream)))
        rocblas_destroy_handle(*h);
    return r;
}

/* rocblas_status (rocblas-types.h) */
static const char *blas_error_name(int status)
{
    static const char *const names[] = {
        "rocblas_status_success", "rocblas_status_invalid_handle",
        "rocblas_status_not_implemented", "rocblas_status_invalid_pointer",
        "rocblas_status_invalid_size", "rocblas_status_memory_error",
        "rocblas_status_internal_error", "rocblas_status_perf_degraded",
        "rocblas_status_size_query_mismatch", "rocblas_status_size_increased",
        "rocblas_status_size_unchanged", "rocblas_status_invalid_value",
        "rocblas_status_continue", "rocblas_status_check_numerics_fail",
        "rocblas_status_excluded_from_build", "rocblas_status_arch_mismatch"};
    return status >= 0 && status < (int)(sizeof names / sizeof *names) ? names[status]
                                                                       : "unknown rocBLAS status";
}
static void blas_destroy(gpu_handle h) { rocblas_destroy_handle(h); }

/* rocblas_operation: none 111, transpose 112; rocblas_datatype: f16_r 150,
 * f32_r 151, bf16_r 168 (f16 or bf16 A and B with f32 C, D and compute: a
 * supported mix); rocblas_gemm_algo_standard 0. D = C in place (ldd = ldc). */
static int blas_gemm(gpu_handle h, int ta, int tb, int m, int n, int k, float alpha, gpu_ptr a,
                     int atype, int lda, long long sa, gpu_ptr b, int btype, int ldb, long long sb,
                     float beta, gpu_ptr c, int ldc, long long sc, int batch)
{
    static const int dt[] = {[GPU_BLAS_F32] = 151, [GPU_BLAS_F16] = 150, [GPU_BLAS_BF16] = 168};
    void *cp = (void *)(uintptr_t)c;
    return rocblas_gemm_strided_batched_ex(h, ta ? 112 : 111, tb ? 112 : 111, m, n, k, &alpha,
                                           (const void *)(uintptr_t)a, dt[atype], lda, sa,
                                           (const void *)(uintptr_t)b, dt[btype], ldb, sb, &beta,
                                           cp, 151, ldc, sc, cp, 151, ldc, sc, batch, 151, 0, 0, 0);
}

static tq_gpu_api api;

static void load_blas(void)
{
    static const char *const names[] = {"librocblas.so.4", "librocblas.so.3", "librocblas.so"};
    const char *env = getenv("TQ_ROCBLAS");
    char why[sizeof api.blas_name - 20]; /* room for "own kernels (no ...)" */
    void *lib = tq_hip_dlopen_first("TQ_ROCBLAS", names, 3, why, sizeof why);
    if (!lib) {
        snprintf(api.blas_name, sizeof api.blas_name, "own kernels (%s%s)", *why ? "" : "no ",
                 *why ? why : env && *env ? env : "librocblas.so.4, .3 or .so");
        return;
    }
    *(void **)&rocblas_create_handle = dlsym(lib, "rocblas_create_handle");
    *(void **)&rocblas_destroy_handle = dlsym(lib, "rocblas_destroy_handle");
    *(void **)&rocblas_set_stream = dlsym(lib, "rocblas_set_stream");
    *(void **)&rocblas_get_version_string = dlsym(lib, "rocblas_get_version_string");
    *(void **)&rocblas_gemm_strided_batched_ex = dlsym(lib, "rocblas_gemm_strided_batched_ex");
    if (!rocblas_create_handle || !rocblas_destroy_handle || !rocblas_set_stream ||
        !rocblas_gemm_strided_batched_ex) {
        snprintf(api.blas_name, sizeof api.blas_name, "own kernels (rocBLAS lacks an entry we use)");
        dlclose(lib);
        return;
    }
    api.has_blas = 1;
    api.blas_create = blas_create;
    api.blas_destroy = blas_destroy;
    api.blas_gemm = blas_gemm;
    char v[64] = "?";
    if (rocblas_get_version_string)
        rocblas_get_version_string(v, sizeof v);
    snprintf(api.blas_name, sizeof api.blas_name, "rocBLAS %s", v);
}

static void load(void)
{
    static const char *const names[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
    const char *env = getenv("TQ_HIP_RUNTIME");
    const char *path = env && *env ? env : "libamdhip64.so (.6, .5)";
    void *lib = tq_hip_dlopen_first("TQ_HIP_RUNTIME", names, 3, api.why, sizeof api.why);
    if (!lib) {
        if (!*api.why)
            snprintf(api.why, sizeof api.why, "%s not found (no ROCm runtime)", path);
        return;
    }
    struct { const char *name; void *fn; } t[] = {
        {"hipInit", &hipInit}, {"hipDriverGetVersion", &hipDriverGetVersion},
        {"hipGetDeviceCount", &hipGetDeviceCount}, {"hipDeviceGetName", &hipDeviceGetName},
        {"hipDeviceGetAttribute", &hipDeviceGetAttribute}, {"hipDeviceTotalMem", &hipDeviceTotalMem},
        {"hipSetDevice", &hipSetDevice}, {"hipStreamCreate", &hipStreamCreate},
        {"hipStreamSynchronize", &hipStreamSynchronize}, {"hipStreamDestroy", &hipStreamDestroy},
        {"hipModuleLoadData", &hipModuleLoadData}, {"hipModuleUnload", &hipModuleUnload},
        {"hipModuleGetFunction", &hipModuleGetFunction},
        {"hipModuleLaunchKernel", &hipModuleLaunchKernel}, {"hipMalloc", &hipMalloc},
        {"hipFree", &hipFree}, {"hipHostMalloc", &hipHostMalloc}, {"hipHostFree", &hipHostFree},
        {"hipMemcpyHtoDAsync", &hipMemcpyHtoDAsync}, {"hipMemcpyDtoHAsync", &hipMemcpyDtoHAsync},
        {"hipMemcpyDtoDAsync", &hipMemcpyDtoDAsync}, {"hipMemsetAsync", &hipMemsetAsync},
        {"hipEventCreate", &hipEventCreate}, {"hipEventRecord", &hipEventRecord},
        {"hipEventSynchronize", &hipEventSynchronize}, {"hipEventDestroy", &hipEventDestroy},
        {"hipGetErrorName", &hipGetErrorName}, {"hipStreamBeginCapture", &hipStreamBeginCapture},
        {"hipStreamEndCapture", &hipStreamEndCapture}, {"hipGraphInstantiate", &hipGraphInstantiate},
        {"hipGraphLaunch", &hipGraphLaunch}, {"hipGraphExecDestroy", &hipGraphExecDestroy},
        {"hipGraphDestroy", &hipGraphDestroy},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!(*(void **)t[i].fn = dlsym(lib, t[i].name))) {
            snprintf(api.why, sizeof api.why, "%s: no %s: runtime too old for this build", path,
                     t[i].name);
            return;
        }
    *(void **)&hipGetDeviceProperties = dlsym(lib, "hipGetDeviceProperties");
    /* not needed to compute: without it, tq-bench times with the host's clock */
    *(void **)&hipEventElapsedTime = dlsym(lib, "hipEventElapsedTime");
    gpu_res r = hipInit(0);
    if (r) {
        snprintf(api.why, sizeof api.why, "hipInit: %s (no AMD GPU, or no access to /dev/kfd)",
                 error_name(r));
        return;
    }
    hipDriverGetVersion(&api.driver_version);
    api.device_count = hipGetDeviceCount;
    api.device_name = hipDeviceGetName;
    api.device_attr = device_attr;
    api.device_memory = hipDeviceTotalMem;
    api.device_arch = device_arch;
    api.enter = enter;
    api.set_current = set_current;
    api.leave = leave;
    api.stream_create = hipStreamCreate;
    api.stream_sync = hipStreamSynchronize;
    api.stream_destroy = hipStreamDestroy;
    api.module_load = hipModuleLoadData;
    api.module_unload = hipModuleUnload;
    api.module_function = hipModuleGetFunction;
    api.launch = hipModuleLaunchKernel;
    api.mem_alloc = mem_alloc;
    api.mem_free = mem_free;
    api.host_alloc = host_alloc;
    api.host_free = hipHostFree;
    api.htod = htod;
    api.dtoh = dtoh;
    api.dtod = dtod;
    api.memset8 = memset8;
    api.event_create = hipEventCreate;
    api.event_record = hipEventRecord;
    api.event_sync = hipEventSynchronize;
    api.event_destroy = hipEventDestroy;
    if (hipEventElapsedTime) { /* hipEventCreate's events keep a time */
        api.timed_event_create = hipEventCreate;
        api.event_elapsed = hipEventElapsedTime;
    }
    api.capture_begin = capture_begin;
    api.capture_end = hipStreamEndCapture;
    api.graph_instantiate = graph_instantiate;
    api.graph_launch = hipGraphLaunch;
    api.graph_exec_destroy = hipGraphExecDestroy;
    api.graph_destroy = hipGraphDestroy;
    api.error_name = error_name;
    api.blas_error_name = blas_error_name;
    api.launch_end = (void *)3;
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
