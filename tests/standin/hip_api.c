/* hip_api.c: the HIP runtime entry points (ROCm 5.2/6 ABI), thin shells over
 * the shared core as in cuda_api.c. HIP has no explicit context: the current
 * device's primary context serves, created on first use. Launches through
 * here run with 64-lane warps, as on CDNA. */

#include "standin.h"

#include <stdlib.h>
#include <string.h>

#define LOCKED(expr)                                                                       \
    do {                                                                                   \
        tq_sd_lock();                                                                      \
        return tq_sd_unlock(expr);                                                         \
    } while (0)

static struct tq_sd_ctx *cur(void) { return tq_sd_current(TQ_SD_HIP); }
static struct tq_sd_stream *stream(hipStream_t s) { return tq_sd_stream_resolve(TQ_SD_HIP, s); }

TQ_SD_API hipError_t hipInit(unsigned flags)
{
    TQ_SD_FAULT(CONTEXT, hipErrorNoDevice);
    return flags ? hipErrorInvalidValue : tq_sd_visible(TQ_SD_HIP) ? hipSuccess : hipErrorNoDevice;
}

/* ROCm 6.2-like numbers: major*10^7 + minor*10^5 + patch */
TQ_SD_API hipError_t hipDriverGetVersion(int *v)
{
    return v ? (*v = 60200000, hipSuccess) : hipErrorInvalidValue;
}
TQ_SD_API hipError_t hipRuntimeGetVersion(int *v)
{
    return v ? (*v = 60200000, hipSuccess) : hipErrorInvalidValue;
}

static const struct { int code; const char *name; } names[] = {
    {hipSuccess, "hipSuccess"}, {hipErrorInvalidValue, "hipErrorInvalidValue"},
    {hipErrorOutOfMemory, "hipErrorOutOfMemory"}, {hipErrorNotInitialized, "hipErrorNotInitialized"},
    {hipErrorNoDevice, "hipErrorNoDevice"}, {hipErrorInvalidDevice, "hipErrorInvalidDevice"},
    {hipErrorInvalidImage, "hipErrorInvalidImage"}, {201, "hipErrorInvalidContext"},
    {209, "hipErrorNoBinaryForGpu"}, {700, "hipErrorIllegalAddress"},
    {702, "hipErrorLaunchTimeOut"}, {715, "hipErrorIllegalInstruction"},
    {716, "hipErrorMisalignedAddress"}, {717, "hipErrorInvalidAddressSpace"},
    {718, "hipErrorInvalidPc"}, {714, "hipErrorHardwareStackError"},
    {hipErrorInvalidHandle, "hipErrorInvalidHandle"}, {hipErrorNotFound, "hipErrorNotFound"},
    {hipErrorNotReady, "hipErrorNotReady"}, {701, "hipErrorLaunchOutOfResources"},
    {hipErrorLaunchFailure, "hipErrorLaunchFailure"}, {hipErrorNotSupported, "hipErrorNotSupported"},
    {900, "hipErrorStreamCaptureUnsupported"}, {901, "hipErrorStreamCaptureInvalidated"},
    {903, "hipErrorStreamCaptureUnmatched"}, {906, "hipErrorStreamCaptureImplicit"}, {999, "hipErrorUnknown"},
};

TQ_SD_API const char *hipGetErrorName(hipError_t e)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == e)
            return names[i].name;
    return "hipErrorUnknown";
}

TQ_SD_API const char *hipGetErrorString(hipError_t e)
{
    const char *s;
    /* the same words as CUDA's for the same numbers */
    return cuGetErrorString(e, &s) ? "unknown error" : s;
}

TQ_SD_API hipError_t hipGetDeviceCount(int *n)
{
    if (!n)
        return hipErrorInvalidValue;
    *n = tq_sd_visible(TQ_SD_HIP);
    return *n ? hipSuccess : hipErrorNoDevice;
}

TQ_SD_API hipError_t hipDeviceGet(hipDevice_t *dev, int ordinal)
{
    if (!dev)
        return hipErrorInvalidValue;
    return tq_sd_check_hip(ordinal) ? hipErrorInvalidDevice : (*dev = ordinal, hipSuccess);
}

TQ_SD_API hipError_t hipDeviceGetName(char *name, int len, hipDevice_t dev)
{
    if (!name || len <= 0)
        return hipErrorInvalidValue;
    if (tq_sd_check_hip(dev))
        return hipErrorInvalidDevice;
    strncpy(name, tq_sd_device_name, (size_t)len - 1);
    name[len - 1] = 0;
    return hipSuccess;
}

TQ_SD_API hipError_t hipDeviceGetAttribute(int *v, int attr, int dev)
{
    if (!v)
        return hipErrorInvalidValue;
    if (tq_sd_check_hip(dev))
        return hipErrorInvalidDevice;
    return tq_sd_attribute(TQ_SD_HIP, attr, v) ? hipErrorInvalidValue : hipSuccess;
}

TQ_SD_API hipError_t hipDeviceTotalMem(size_t *bytes, hipDevice_t dev)
{
    if (!bytes)
        return hipErrorInvalidValue;
    if (tq_sd_check_hip(dev))
        return hipErrorInvalidDevice;
    *bytes = tq_sd_cfg()->memory;
    return hipSuccess;
}

/* Fills the few fields the product reads, at the layout's offsets (abi.h). */
static hipError_t props(void *prop, int dev, size_t size, size_t name, size_t mem, size_t warp,
                        size_t mps, size_t arch)
{
    if (!prop)
        return hipErrorInvalidValue;
    if (tq_sd_check_hip(dev))
        return hipErrorInvalidDevice;
    char *p = prop;
    int ws = 64, n = 132;
    size_t total = tq_sd_cfg()->memory;
    memset(p, 0, size);
    memcpy(p + name, tq_sd_device_name, strlen(tq_sd_device_name) + 1);
    memcpy(p + mem, &total, sizeof total);
    memcpy(p + warp, &ws, sizeof ws);
    memcpy(p + mps, &n, sizeof n);
    memcpy(p + arch, tq_sd_gcn_arch, strlen(tq_sd_gcn_arch) + 1);
    return hipSuccess;
}

TQ_SD_API hipError_t hipGetDeviceProperties(void *prop, int dev)
{
    return props(prop, dev, TQ_HIP_PROP_R0000_SIZE, TQ_HIP_PROP_R0000_NAME,
                 TQ_HIP_PROP_R0000_TOTALGLOBALMEM, TQ_HIP_PROP_R0000_WARPSIZE,
                 TQ_HIP_PROP_R0000_MULTIPROCESSORCOUNT, TQ_HIP_PROP_R0000_GCNARCHNAME);
}

TQ_SD_API hipError_t hipGetDevicePropertiesR0600(void *prop, int dev)
{
    return props(prop, dev, TQ_HIP_PROP_R0600_SIZE, TQ_HIP_PROP_R0600_NAME,
                 TQ_HIP_PROP_R0600_TOTALGLOBALMEM, TQ_HIP_PROP_R0600_WARPSIZE,
                 TQ_HIP_PROP_R0600_MULTIPROCESSORCOUNT, TQ_HIP_PROP_R0600_GCNARCHNAME);
}

TQ_SD_API hipError_t hipSetDevice(int dev)
{
    TQ_SD_STICKY();
    LOCKED(tq_sd_hip_set_device(dev));
}

TQ_SD_API hipError_t hipGetDevice(int *dev)
{
    return dev ? (*dev = tq_sd_hip_device(), hipSuccess) : hipErrorInvalidValue;
}

TQ_SD_API hipError_t hipDeviceSynchronize(void)
{
    TQ_SD_FAULT(SYNC, 700 /* hipErrorIllegalAddress */);
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    LOCKED(cur() ? tq_sd_device_sync(cur()) : hipErrorOutOfMemory);
}

static hipError_t stream_create(hipStream_t *s)
{
    if (!s)
        return hipErrorInvalidValue;
    if (!cur())
        return hipErrorOutOfMemory;
    return (*s = tq_sd_stream_new(cur())) ? hipSuccess : hipErrorOutOfMemory;
}

TQ_SD_API hipError_t hipStreamCreate(hipStream_t *s)
{
    TQ_SD_FAULT(CONTEXT, hipErrorOutOfMemory);
    LOCKED(stream_create(s));
}
TQ_SD_API hipError_t hipStreamDestroy(hipStream_t s) { LOCKED(tq_sd_stream_destroy(s)); }

TQ_SD_API hipError_t hipStreamSynchronize(hipStream_t s)
{
    TQ_SD_FAULT(SYNC, 700 /* hipErrorIllegalAddress */);
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    LOCKED(stream(s) ? tq_sd_stream_sync(stream(s)) : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipModuleLoadData(hipModule_t *m, const void *image)
{
    TQ_SD_FAULT(MODULE, 209 /* hipErrorNoBinaryForGpu */);
    LOCKED(tq_sd_module_load(TQ_SD_HIP, image, m));
}

TQ_SD_API hipError_t hipModuleUnload(hipModule_t m)
{
    if (!m)
        return hipErrorInvalidHandle;
    free(m);
    return tq_sd_poisoned();
}

TQ_SD_API hipError_t hipModuleGetFunction(hipFunction_t *f, hipModule_t m, const char *name)
{
    TQ_SD_FAULT(MODULE, hipErrorNotFound);
    LOCKED(tq_sd_module_function(m, name, f));
}

TQ_SD_API hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned gx, unsigned gy,
                                           unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                           unsigned shared, hipStream_t s, void **params,
                                           void **extra)
{
    const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    TQ_SD_FAULT(LAUNCH, 701 /* hipErrorLaunchOutOfResources */);
    LOCKED(stream(s) ? tq_sd_launch(TQ_SD_HIP, f, g, b, shared, stream(s), params, extra)
                     : hipErrorOutOfMemory);
}

static hipError_t mem_alloc(void **p, size_t bytes)
{
    if (!p)
        return hipErrorInvalidValue;
    if (!bytes) { /* HIP: a zero-size allocation is NULL and a success */
        *p = NULL;
        return hipSuccess;
    }
    if (!cur())
        return hipErrorOutOfMemory;
    hipError_t r = tq_sd_capture_guard(cur(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "hipMalloc");
    return r ? r : tq_sd_mem_alloc(cur()->device, bytes, p);
}

TQ_SD_API hipError_t hipMalloc(void **p, size_t bytes)
{
    TQ_SD_FAULT(ALLOC, hipErrorOutOfMemory);
    LOCKED(mem_alloc(p, bytes));
}

static hipError_t mem_free(void *p)
{
    if (!p)
        return hipSuccess;
    tq_sd_count(TQ_SD_WORK_SYNCS, 1); /* freeing waits for the work that may use it */
    hipError_t r = cur() ? tq_sd_ctx_sync(cur()) : hipSuccess;
    hipError_t f = tq_sd_mem_free(p);
    return r ? r : f;
}

TQ_SD_API hipError_t hipFree(void *p) { LOCKED(mem_free(p)); }

static hipError_t mem_info(size_t *free_bytes, size_t *total)
{
    if (!free_bytes || !total)
        return hipErrorInvalidValue;
    *total = tq_sd_cfg()->memory;
    *free_bytes = *total - tq_sd_mem_used(tq_sd_hip_device());
    return hipSuccess;
}

TQ_SD_API hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total)
{
    LOCKED(mem_info(free_bytes, total));
}

TQ_SD_API hipError_t hipHostMalloc(void **p, size_t bytes, unsigned flags)
{
    (void)flags;
    TQ_SD_FAULT(ALLOC, hipErrorOutOfMemory);
    LOCKED(p ? tq_sd_host_alloc(bytes, p) : hipErrorInvalidValue);
}

TQ_SD_API hipError_t hipHostFree(void *p)
{
    if (p) /* counted as a free: a driver may wait here, as in hipFree */
        tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    tq_sd_lock();
    hipError_t r = p ? tq_sd_host_free(p) : hipSuccess; /* even after a sticky error */
    return tq_sd_unlock(tq_sd_poisoned() ? tq_sd_poisoned() : r);
}

#define COPY(dst, src, n, s, async, dir)                                                   \
    TQ_SD_FAULT(COPY, hipErrorInvalidValue);                                               \
    LOCKED(stream(s) ? tq_sd_copy(TQ_SD_HIP, dst, src, n, stream(s), async, dir)           \
                     : hipErrorOutOfMemory)

TQ_SD_API hipError_t hipMemcpyHtoD(hipDeviceptr_t dst, void *src, size_t n)
{
    COPY(dst, src, n, NULL, 0, 1);
}
TQ_SD_API hipError_t hipMemcpyDtoH(void *dst, hipDeviceptr_t src, size_t n)
{
    COPY(dst, src, n, NULL, 0, 2);
}
TQ_SD_API hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t dst, void *src, size_t n, hipStream_t s)
{
    COPY(dst, src, n, s, 1, 1);
}
TQ_SD_API hipError_t hipMemcpyDtoHAsync(void *dst, hipDeviceptr_t src, size_t n, hipStream_t s)
{
    COPY(dst, src, n, s, 1, 2);
}
TQ_SD_API hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t dst, hipDeviceptr_t src, size_t n,
                                        hipStream_t s)
{
    COPY(dst, src, n, s, 1, 3);
}

TQ_SD_API hipError_t hipMemsetAsync(void *dst, int v, size_t n, hipStream_t s)
{
    TQ_SD_FAULT(COPY, hipErrorInvalidValue);
    LOCKED(stream(s) ? tq_sd_memset(TQ_SD_HIP, dst, (uint8_t)v, n, 1, stream(s))
                     : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipMemsetD32Async(hipDeviceptr_t dst, int v, size_t n, hipStream_t s)
{
    TQ_SD_FAULT(COPY, hipErrorInvalidValue);
    LOCKED(stream(s) ? tq_sd_memset(TQ_SD_HIP, dst, (uint32_t)v, n, 4, stream(s))
                     : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipEventCreate(hipEvent_t *ev)
{
    if (!ev)
        return hipErrorInvalidValue;
    TQ_SD_FAULT(EVENT, hipErrorOutOfMemory);
    return (*ev = calloc(1, sizeof **ev)) ? hipSuccess : hipErrorOutOfMemory;
}

TQ_SD_API hipError_t hipEventRecord(hipEvent_t ev, hipStream_t s)
{
    TQ_SD_FAULT(EVENT, hipErrorInvalidHandle);
    LOCKED(stream(s) ? tq_sd_event_record(ev, stream(s)) : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipEventSynchronize(hipEvent_t ev)
{
    TQ_SD_FAULT(EVENT, 700 /* hipErrorIllegalAddress */);
    tq_sd_count(TQ_SD_WORK_SYNCS, 1);
    LOCKED(tq_sd_event_sync(ev));
}

TQ_SD_API hipError_t hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b)
{
    TQ_SD_FAULT(EVENT, hipErrorNotReady);
    LOCKED(tq_sd_event_elapsed(ms, a, b));
}

TQ_SD_API hipError_t hipEventDestroy(hipEvent_t ev)
{
    if (!ev)
        return hipErrorInvalidHandle;
    tq_sd_lock();
    hipError_t r = ev->pending ? tq_sd_stream_sync(ev->stream) : hipSuccess;
    free(ev);
    return tq_sd_unlock(tq_sd_poisoned() ? tq_sd_poisoned() : r);
}

TQ_SD_API hipError_t hipStreamBeginCapture(hipStream_t s, int mode)
{
    TQ_SD_FAULT(GRAPH, 900 /* hipErrorStreamCaptureUnsupported */);
    LOCKED(stream(s) ? tq_sd_capture_begin(stream(s), mode) : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipStreamEndCapture(hipStream_t s, hipGraph_t *g)
{
    TQ_SD_FAULT(GRAPH, 901 /* hipErrorStreamCaptureInvalidated */);
    LOCKED(stream(s) ? tq_sd_capture_end(stream(s), g) : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t g,
                                         hipGraphNode_t *err_node, char *log, size_t log_size)
{
    (void)err_node;
    if (log && log_size)
        log[0] = 0;
    TQ_SD_FAULT(GRAPH, hipErrorOutOfMemory);
    LOCKED(tq_sd_graph_instantiate(g, exec));
}

TQ_SD_API hipError_t hipGraphInstantiateWithFlags(hipGraphExec_t *exec, hipGraph_t g,
                                                  unsigned long long flags)
{
    (void)flags;
    TQ_SD_FAULT(GRAPH, hipErrorOutOfMemory);
    LOCKED(tq_sd_graph_instantiate(g, exec));
}

TQ_SD_API hipError_t hipGraphLaunch(hipGraphExec_t exec, hipStream_t s)
{
    TQ_SD_FAULT(GRAPH, hipErrorInvalidValue);
    LOCKED(stream(s) ? tq_sd_graph_launch(exec, stream(s)) : hipErrorOutOfMemory);
}

TQ_SD_API hipError_t hipGraphExecDestroy(hipGraphExec_t exec)
{
    LOCKED((tq_sd_graph_free(exec), hipSuccess));
}

TQ_SD_API hipError_t hipGraphDestroy(hipGraph_t g) { LOCKED((tq_sd_graph_free(g), hipSuccess)); }
