/* cuda_api.c: the CUDA driver API entry points, under their real symbol
 * names (the _v2 ABI where there is one) and through cuGetProcAddress. Each is
 * a thin shell over the shared core: lock, check the handles, call. */

#include "standin.h"

#include <stdlib.h>
#include <string.h>

static int initialized;

#define LOCKED(expr)                                                                       \
    do {                                                                                   \
        tq_sd_lock();                                                                      \
        return tq_sd_unlock(initialized ? (expr) : CUDA_ERROR_NOT_INITIALIZED);            \
    } while (0)

static struct tq_sd_ctx *cur(void) { return tq_sd_current(TQ_SD_CUDA); }

/* The stream an async call names, or NULL without a current context. */
static struct tq_sd_stream *stream(CUstream s) { return tq_sd_stream_resolve(TQ_SD_CUDA, s); }

TQ_SD_API CUresult cuInit(unsigned flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    TQ_SD_FAULT(CONTEXT, CUDA_ERROR_NO_DEVICE);
    tq_sd_lock();
    initialized = 1;
    return tq_sd_unlock(tq_sd_visible(TQ_SD_CUDA) ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE);
}

TQ_SD_API CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = tq_sd_driver_version();
    return CUDA_SUCCESS;
}

static const struct { int code; const char *name, *text; } errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "no kernel image is available for execution on the device"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION",
     "an illegal instruction was encountered"},
    {CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     "operation not supported on global/shared address space"},
    {CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not initiated in this stream"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(int code)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code)
            return (int)i;
    return -1;
}

TQ_SD_API CUresult cuGetErrorName(CUresult err, const char **str)
{
    int i = error_index(err);
    if (!str || i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *str = errors[i].name;
    return CUDA_SUCCESS;
}

TQ_SD_API CUresult cuGetErrorString(CUresult err, const char **str)
{
    int i = error_index(err);
    if (!str || i < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *str = errors[i].text;
    return CUDA_SUCCESS;
}

TQ_SD_API CUresult cuDeviceGetCount(int *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED((*count = tq_sd_visible(TQ_SD_CUDA), CUDA_SUCCESS));
}

TQ_SD_API CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(ordinal < 0 || ordinal >= tq_sd_visible(TQ_SD_CUDA) ? CUDA_ERROR_INVALID_DEVICE
                                       : (*dev = ordinal, CUDA_SUCCESS));
}

TQ_SD_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (tq_sd_check_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    strncpy(name, tq_sd_device_name, (size_t)len - 1);
    name[len - 1] = 0;
    return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

TQ_SD_API CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (tq_sd_check_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    return tq_sd_attribute(TQ_SD_CUDA, attrib, value) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

TQ_SD_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED(tq_sd_check_device(dev) ? CUDA_ERROR_INVALID_DEVICE
                                   : (*bytes = tq_sd_cfg()->memory, CUDA_SUCCESS));
}

static CUresult retain(CUcontext *ctx, CUdevice dev)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (tq_sd_check_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct tq_sd_ctx *c = tq_sd_primary(dev);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->refs++;
    *ctx = c;
    return CUDA_SUCCESS;
}

TQ_SD_API CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
    TQ_SD_FAULT(CONTEXT, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(retain(ctx, dev));
}

static CUresult release(CUdevice dev)
{
    if (tq_sd_check_device(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct tq_sd_ctx *c = tq_sd_primary(dev);
    if (!c || c->refs <= 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    /* the primary context (and its memory) outlives its last release here;
     * a GPU would reset it, which only matters to leak checks */
    c->refs--;
    return tq_sd_ctx_sync(c);
}

TQ_SD_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { LOCKED(release(dev)); }
TQ_SD_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { LOCKED(release(dev)); }
TQ_SD_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    TQ_SD_STICKY();
    LOCKED(tq_sd_set_current(ctx));
}

TQ_SD_API CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    LOCKED((*ctx = cur(), CUDA_SUCCESS));
}

TQ_SD_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) { LOCKED(tq_sd_push_current(ctx)); }
TQ_SD_API CUresult cuCtxPopCurrent_v2(CUcontext *ctx) { LOCKED(tq_sd_pop_current(ctx)); }
TQ_SD_API CUresult cuCtxSynchronize(void)
{
    TQ_SD_FAULT(SYNC, CUDA_ERROR_ILLEGAL_ADDRESS);
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    LOCKED(cur() ? tq_sd_device_sync(cur()) : CUDA_ERROR_INVALID_CONTEXT);
}

static CUresult stream_create(CUstream *s)
{
    if (!s)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cur())
        return CUDA_ERROR_INVALID_CONTEXT;
    return (*s = tq_sd_stream_new(cur())) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

TQ_SD_API CUresult cuStreamCreate(CUstream *s, unsigned flags)
{
    (void)flags;
    TQ_SD_FAULT(CONTEXT, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(stream_create(s));
}

TQ_SD_API CUresult cuStreamDestroy_v2(CUstream s) { LOCKED(tq_sd_stream_destroy(s)); }
TQ_SD_API CUresult cuStreamDestroy(CUstream s) { LOCKED(tq_sd_stream_destroy(s)); }

TQ_SD_API CUresult cuStreamSynchronize(CUstream s)
{
    TQ_SD_FAULT(SYNC, CUDA_ERROR_ILLEGAL_ADDRESS);
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    LOCKED(stream(s) ? tq_sd_stream_sync(stream(s)) : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuModuleLoadData(CUmodule *mod, const void *image)
{
    TQ_SD_FAULT(MODULE, CUDA_ERROR_NO_BINARY_FOR_GPU);
    LOCKED(cur() ? tq_sd_module_load(TQ_SD_CUDA, image, mod) : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuModuleUnload(CUmodule mod)
{
    if (!mod)
        return CUDA_ERROR_INVALID_HANDLE;
    free(mod);
    return tq_sd_poisoned();
}

TQ_SD_API CUresult cuModuleGetFunction(CUfunction *fn, CUmodule mod, const char *name)
{
    TQ_SD_FAULT(MODULE, CUDA_ERROR_NOT_FOUND);
    LOCKED(tq_sd_module_function(mod, name, fn));
}

static CUresult func_attr(CUfunction fn, int attrib, int value)
{
    if (!fn)
        return CUDA_ERROR_INVALID_HANDLE;
    if (attrib != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
        return CUDA_SUCCESS; /* the others change nothing on a CPU */
    if (value < 0 || value > (227 << 10)) {
        tq_sd_log("cuFuncSetAttribute(%s): %d bytes of dynamic shared memory, the opt-in limit "
                  "is %d", fn->k->name, value, 227 << 10);
        return CUDA_ERROR_INVALID_VALUE;
    }
    fn->max_dyn_shared = value;
    return CUDA_SUCCESS;
}

TQ_SD_API CUresult cuFuncSetAttribute(CUfunction fn, int attrib, int value)
{
    TQ_SD_FAULT(MODULE, CUDA_ERROR_INVALID_VALUE);
    LOCKED(func_attr(fn, attrib, value));
}

TQ_SD_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                  unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                  CUstream s, void **params, void **extra)
{
    const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    TQ_SD_FAULT(LAUNCH, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    LOCKED(stream(s) ? tq_sd_launch(TQ_SD_CUDA, f, g, b, shared, stream(s), params, extra)
                     : CUDA_ERROR_INVALID_CONTEXT);
}

static CUresult mem_alloc(CUdeviceptr *p, size_t bytes)
{
    void *m;
    if (!p || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cur())
        return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = tq_sd_capture_guard(cur(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                                     "cuMemAlloc");
    if (!r)
        r = tq_sd_mem_alloc(cur()->device, bytes, &m);
    if (!r)
        *p = (CUdeviceptr)(uintptr_t)m;
    return r;
}

TQ_SD_API CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
    TQ_SD_FAULT(ALLOC, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(mem_alloc(p, bytes));
}

static CUresult mem_free(CUdeviceptr p)
{
    if (!cur())
        return CUDA_ERROR_INVALID_CONTEXT;
    /* freeing waits for the work that may still use the memory */
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    CUresult r = tq_sd_ctx_sync(cur());
    CUresult f = tq_sd_mem_free((void *)(uintptr_t)p); /* even after a sticky error */
    return r ? r : f;
}

TQ_SD_API CUresult cuMemFree_v2(CUdeviceptr p) { LOCKED(mem_free(p)); }

static CUresult mem_info(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total)
        return CUDA_ERROR_INVALID_VALUE;
    if (!cur())
        return CUDA_ERROR_INVALID_CONTEXT;
    *total = tq_sd_cfg()->memory;
    *free_bytes = *total - tq_sd_mem_used(cur()->device);
    return CUDA_SUCCESS;
}

TQ_SD_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    LOCKED(mem_info(free_bytes, total));
}

TQ_SD_API CUresult cuMemAllocHost_v2(void **p, size_t bytes)
{
    TQ_SD_FAULT(ALLOC, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(!p ? CUDA_ERROR_INVALID_VALUE
              : cur() ? tq_sd_host_alloc(bytes, p) : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuMemFreeHost(void *p)
{
    CUresult r;
    /* counted as a free: a driver may wait for the device here as in
     * cuMemFree (the stand-in needs not: nothing runs at this call) */
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    tq_sd_lock();
    r = tq_sd_host_free(p); /* even after a sticky error */
    return tq_sd_unlock(tq_sd_poisoned() ? tq_sd_poisoned() : r);
}

#define DEV(p) ((void *)(uintptr_t)(p))
#define COPY(dst, src, n, s, async, dir)                                                   \
    TQ_SD_FAULT(COPY, CUDA_ERROR_INVALID_VALUE);                                           \
    LOCKED(stream(s) ? tq_sd_copy(TQ_SD_CUDA, dst, src, n, stream(s), async, dir)          \
                     : CUDA_ERROR_INVALID_CONTEXT)

TQ_SD_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    COPY(DEV(dst), src, n, NULL, 0, 1);
}
TQ_SD_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    COPY(dst, DEV(src), n, NULL, 0, 2);
}
TQ_SD_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    COPY(DEV(dst), src, n, s, 1, 1);
}
TQ_SD_API CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY(dst, DEV(src), n, s, 1, 2);
}
TQ_SD_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    COPY(DEV(dst), DEV(src), n, s, 1, 3);
}

TQ_SD_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s)
{
    TQ_SD_FAULT(COPY, CUDA_ERROR_INVALID_VALUE);
    LOCKED(stream(s) ? tq_sd_memset(TQ_SD_CUDA, DEV(dst), v, n, 1, stream(s))
                     : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream s)
{
    TQ_SD_FAULT(COPY, CUDA_ERROR_INVALID_VALUE);
    LOCKED(stream(s) ? tq_sd_memset(TQ_SD_CUDA, DEV(dst), v, n, 4, stream(s))
                     : CUDA_ERROR_INVALID_CONTEXT);
}

static CUresult event_create(CUevent *ev, unsigned flags)
{
    if (!ev)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(*ev = calloc(1, sizeof **ev)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*ev)->no_timing = (flags & CU_EVENT_DISABLE_TIMING) != 0;
    return CUDA_SUCCESS;
}

TQ_SD_API CUresult cuEventCreate(CUevent *ev, unsigned flags)
{
    TQ_SD_FAULT(EVENT, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(event_create(ev, flags));
}

TQ_SD_API CUresult cuEventRecord(CUevent ev, CUstream s)
{
    TQ_SD_FAULT(EVENT, CUDA_ERROR_INVALID_HANDLE);
    LOCKED(stream(s) ? tq_sd_event_record(ev, stream(s)) : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuEventSynchronize(CUevent ev)
{
    TQ_SD_FAULT(EVENT, CUDA_ERROR_ILLEGAL_ADDRESS);
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    LOCKED(tq_sd_event_sync(ev));
}
TQ_SD_API CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    TQ_SD_FAULT(EVENT, CUDA_ERROR_NOT_READY);
    LOCKED(tq_sd_event_elapsed(ms, a, b));
}
TQ_SD_API CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b)
{
    return cuEventElapsedTime(ms, a, b);
}

static CUresult event_destroy(CUevent ev)
{
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    /* a pending record still happens on a GPU; here it would touch freed memory */
    CUresult r = ev->pending ? tq_sd_stream_sync(ev->stream) : CUDA_SUCCESS;
    free(ev);
    return tq_sd_poisoned() ? tq_sd_poisoned() : r;
}

TQ_SD_API CUresult cuEventDestroy_v2(CUevent ev) { LOCKED(event_destroy(ev)); }
TQ_SD_API CUresult cuEventDestroy(CUevent ev) { LOCKED(event_destroy(ev)); }

TQ_SD_API CUresult cuStreamBeginCapture_v2(CUstream s, int mode)
{
    TQ_SD_FAULT(GRAPH, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    LOCKED(stream(s) ? tq_sd_capture_begin(stream(s), mode) : CUDA_ERROR_INVALID_CONTEXT);
}
/* the CUDA 10.0 form, without a mode: global */
TQ_SD_API CUresult cuStreamBeginCapture(CUstream s)
{
    TQ_SD_FAULT(GRAPH, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    LOCKED(stream(s) ? tq_sd_capture_begin(stream(s), CU_STREAM_CAPTURE_MODE_GLOBAL)
                     : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuStreamEndCapture(CUstream s, CUgraph *g)
{
    TQ_SD_FAULT(GRAPH, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    LOCKED(stream(s) ? tq_sd_capture_end(stream(s), g) : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g,
                                               unsigned long long flags)
{
    (void)flags;
    TQ_SD_FAULT(GRAPH, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(tq_sd_graph_instantiate(g, exec));
}
/* the CUDA 11 form (cuGraphInstantiate / _v2 with an error node and a log) */
TQ_SD_API CUresult cuGraphInstantiate_v2(CUgraphExec *exec, CUgraph g, CUgraphNode *err,
                                         char *log, size_t log_size)
{
    (void)err;
    if (log && log_size)
        log[0] = 0;
    TQ_SD_FAULT(GRAPH, CUDA_ERROR_OUT_OF_MEMORY);
    LOCKED(tq_sd_graph_instantiate(g, exec));
}
TQ_SD_API CUresult cuGraphInstantiate(CUgraphExec *exec, CUgraph g, CUgraphNode *err, char *log,
                                      size_t log_size)
{
    return cuGraphInstantiate_v2(exec, g, err, log, log_size);
}

TQ_SD_API CUresult cuGraphLaunch(CUgraphExec exec, CUstream s)
{
    TQ_SD_FAULT(GRAPH, CUDA_ERROR_INVALID_VALUE);
    LOCKED(stream(s) ? tq_sd_graph_launch(exec, stream(s)) : CUDA_ERROR_INVALID_CONTEXT);
}

TQ_SD_API CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    LOCKED((tq_sd_graph_free(exec), CUDA_SUCCESS));
}
TQ_SD_API CUresult cuGraphDestroy(CUgraph g) { LOCKED((tq_sd_graph_free(g), CUDA_SUCCESS)); }

/* cuGetProcAddress: base name -> the newest ABI (what CUDA 12 and later
 * return for cudaVersion >= 12000). */
#define P(name, fn) {name, (void *)(fn)}
static const struct { const char *name; void *fn; } procs[] = {
    P("cuInit", cuInit), P("cuDriverGetVersion", cuDriverGetVersion),
    P("cuGetErrorName", cuGetErrorName), P("cuGetErrorString", cuGetErrorString),
    P("cuGetProcAddress", cuGetProcAddress_v2), P("cuDeviceGetCount", cuDeviceGetCount),
    P("cuDeviceGet", cuDeviceGet), P("cuDeviceGetName", cuDeviceGetName),
    P("cuDeviceGetAttribute", cuDeviceGetAttribute), P("cuDeviceTotalMem", cuDeviceTotalMem_v2),
    P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2),
    P("cuCtxSetCurrent", cuCtxSetCurrent), P("cuCtxGetCurrent", cuCtxGetCurrent),
    P("cuCtxPushCurrent", cuCtxPushCurrent_v2), P("cuCtxPopCurrent", cuCtxPopCurrent_v2),
    P("cuCtxSynchronize", cuCtxSynchronize), P("cuStreamCreate", cuStreamCreate),
    P("cuStreamDestroy", cuStreamDestroy_v2), P("cuStreamSynchronize", cuStreamSynchronize),
    P("cuModuleLoadData", cuModuleLoadData), P("cuModuleUnload", cuModuleUnload),
    P("cuModuleGetFunction", cuModuleGetFunction), P("cuFuncSetAttribute", cuFuncSetAttribute),
    P("cuLaunchKernel", cuLaunchKernel), P("cuMemAlloc", cuMemAlloc_v2),
    P("cuMemFree", cuMemFree_v2), P("cuMemGetInfo", cuMemGetInfo_v2),
    P("cuMemAllocHost", cuMemAllocHost_v2), P("cuMemFreeHost", cuMemFreeHost),
    P("cuMemcpyHtoD", cuMemcpyHtoD_v2), P("cuMemcpyDtoH", cuMemcpyDtoH_v2),
    P("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2), P("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2),
    P("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2), P("cuMemsetD8Async", cuMemsetD8Async),
    P("cuMemsetD32Async", cuMemsetD32Async), P("cuEventCreate", cuEventCreate),
    P("cuEventRecord", cuEventRecord), P("cuEventSynchronize", cuEventSynchronize),
    P("cuEventElapsedTime", cuEventElapsedTime_v2), P("cuEventDestroy", cuEventDestroy_v2),
    P("cuStreamBeginCapture", cuStreamBeginCapture_v2),
    P("cuStreamEndCapture", cuStreamEndCapture),
    P("cuGraphInstantiate", cuGraphInstantiateWithFlags),
    P("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags),
    P("cuGraphLaunch", cuGraphLaunch), P("cuGraphExecDestroy", cuGraphExecDestroy),
    P("cuGraphDestroy", cuGraphDestroy),
};

TQ_SD_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       uint64_t flags, int *symbolStatus)
{
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    for (size_t i = 0; i < sizeof procs / sizeof procs[0] && !tq_sd_hidden(symbol); i++)
        if (!strcmp(procs[i].name, symbol)) {
            *pfn = procs[i].fn;
            /* the one ABI of this list that changed with CUDA 12 */
            if (cudaVersion < 12000 && !strcmp(symbol, "cuGraphInstantiate"))
                *pfn = (void *)cuGraphInstantiate_v2;
            if (symbolStatus)
                *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
            return CUDA_SUCCESS;
        }
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

TQ_SD_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    uint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
