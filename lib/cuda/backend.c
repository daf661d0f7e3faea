/* backend.c: the CUDA (or, built with TQ_GPU_HIP, the HIP) backend's table:
 * probe, describe, open (the device's primary context, one stream, the
 * embedded kernels, a BLAS handle), memory from the pool, and copies through
 * a pinned staging buffer. Work is queued on the stream; only a download (and
 * sync) waits for it, never an op. */
#include "gpu.h"

#include <time.h>
#include <unistd.h>

tq_status TQ_GPU(fail)(const tq_gpu_ctx *c, gpu_res r, const char *call, const char *doing)
{
    return tq_fail(TQ_ERR_RUNTIME, "%s:%d: %s: %s (%s)", TQ_GPU_NAME, c->dev, call,
                   c->api->error_name(r), doing);
}

static tq_status probe(int *count)
{
    const tq_gpu_api *api = TQ_GPU(api)();
    *count = 0;
    if (api->why[0])
        return tq_fail(TQ_ERR_RUNTIME, "%s", api->why);
    gpu_res r = api->device_count(count);
    if (r == 100 /* no device, in both APIs */) {
        *count = 0;
        return TQ_OK;
    }
    return r ? tq_fail(TQ_ERR_RUNTIME, "%s: %s: %s (counting devices)", TQ_GPU_NAME,
                       GPU_CALL("cuDeviceGetCount", "hipGetDeviceCount"), api->error_name(r))
             : TQ_OK;
}

/* For auto: without the device node the kernel driver makes, there is no GPU
 * of this kind, and loading the runtime (ROCm's pulls in LLVM) only costs
 * every tool's start. A runtime named by the environment is always tried. */
static int may_have_gpu(void)
{
#ifdef __linux__
#ifdef TQ_GPU_HIP
    const char *env = getenv("TQ_HIP_RUNTIME");
    return (env && *env) || access("/dev/kfd", F_OK) == 0;
#else
    const char *env = getenv("TQ_CUDA_DRIVER");
    return (env && *env) || access("/dev/nvidiactl", F_OK) == 0 ||
           access("/dev/nvidia0", F_OK) == 0 || access("/dev/dxg", F_OK) == 0;
#endif
#else
    return 1;
#endif
}

static tq_status info(int index, tq_device_info *out)
{
    const tq_gpu_api *api = TQ_GPU(api)();
    if (api->why[0])
        return tq_fail(TQ_ERR_RUNTIME, "%s", api->why);
    char arch[64];
    int sms = 0, warp = 0;
    size_t mem = 0;
    if (api->device_name(out->name, sizeof out->name, index))
        snprintf(out->name, sizeof out->name, "%s device %d", TQ_GPU_NAME, index);
    api->device_arch(index, arch, sizeof arch);
    api->device_attr(&sms, GPU_ATTR_SMS, index);
    api->device_attr(&warp, GPU_ATTR_WARP, index);
    api->device_memory(&mem, index);
    out->memory = mem;
    int v = api->driver_version;
#ifdef TQ_GPU_HIP
    snprintf(out->detail, sizeof out->detail, "%s, %d CUs, wavefront %d, HIP driver %d.%d, %s",
             arch, sms, warp, v / 10000000, v / 100000 % 100, api->blas_name);
#else
    snprintf(out->detail, sizeof out->detail, "%s, %d SMs, warp %d, driver CUDA %d.%d, %s", arch,
             sms, warp, v / 1000, v % 1000 / 10, api->blas_name);
#endif
    return TQ_OK;
}

double TQ_GPU(clock)(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void ctx_close(tq_gpu_ctx *c)
{
    const tq_gpu_api *api = c->api;
    if (c->stream)
        api->stream_sync(c->stream);
    if (c->flag)
        TQ_GPU(pool_free)(c, c->flag);
    TQ_GPU(pool_drain)(c);
    if (c->blas)
        api->blas_destroy(c->blas);
    if (c->stage_done)
        api->event_destroy(c->stage_done);
    for (int i = 0; i < 2; i++)
        if (c->timer[i])
            api->event_destroy(c->timer[i]);
    if (c->stage)
        api->host_free(c->stage);
    if (c->module)
        api->module_unload(c->module);
    if (c->stream)
        api->stream_destroy(c->stream);
    api->leave(c->dev, c->ctx);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

const char *TQ_GPU(kernel_name)(int k);

static tq_status gpu_open(int index, void **out)
{
    const tq_gpu_api *api = TQ_GPU(api)();
    if (api->why[0])
        return tq_fail(TQ_ERR_RUNTIME, "%s", api->why);
    tq_gpu_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    c->api = api;
    c->dev = index;
    pthread_mutex_init(&c->lock, NULL);
    gpu_res r;
    tq_status st;
    char looking[64];
    const char *call = GPU_CALL("cuDevicePrimaryCtxRetain", "hipSetDevice"),
               *doing = "opening the device";
    double t0 = TQ_GPU(clock)(), t1;
    if ((r = api->enter(index, &c->ctx)))
        goto fail;
    api->device_attr(&c->warp, GPU_ATTR_WARP, index);
    api->device_attr(&c->max_threads, GPU_ATTR_MAX_THREADS, index);
    api->device_attr(&c->shared, GPU_ATTR_SHARED, index);
    api->device_attr(&c->sms, GPU_ATTR_SMS, index);
    call = GPU_CALL("cuStreamCreate", "hipStreamCreate"), doing = "creating a stream";
    if ((r = api->stream_create(&c->stream)))
        goto fail;
    c->ctx_s = (t1 = TQ_GPU(clock)()) - t0;
    /* A driver too old for this build's code, or a device no image fits,
     * fails here: say so rather than name the error code alone. */
    call = GPU_CALL("cuModuleLoadData", "hipModuleLoadData");
    doing = "loading the kernels: a driver too old for this build, or no code for this device";
    if ((r = api->module_load(&c->module, TQ_GPU(image))))
        goto fail;
    /* Every kernel is in the image we built: one the driver cannot find is
     * a broken image or driver, said as such. */
    call = GPU_CALL("cuModuleGetFunction", "hipModuleGetFunction");
    for (int k = 0; k < K_COUNT; k++)
        if ((r = api->module_function(&c->fn[k], c->module, TQ_GPU(kernel_name)(k)))) {
            c->fn[k] = NULL;
            snprintf(looking, sizeof looking, "looking up %s", TQ_GPU(kernel_name)(k));
            doing = looking;
            goto fail;
        }
    c->module_s = (t0 = TQ_GPU(clock)()) - t1;
    call = GPU_CALL("cuMemAllocHost", "hipHostMalloc"), doing = "allocating pinned memory";
    if ((r = api->host_alloc(&c->stage, GPU_STAGE_BYTES)))
        goto fail;
    call = GPU_CALL("cuEventCreate", "hipEventCreate"), doing = "creating an event";
    if ((r = api->event_create(&c->stage_done)))
        goto fail;
    /* A BLAS library that is there but will not start is a broken
     * installation or a device out of memory: said, not hidden behind
     * slower kernels. */
    int b = api->has_blas ? api->blas_create(&c->blas, c->stream) : 0;
    c->blas_s = TQ_GPU(clock)() - t0;
    if (b) {
        c->blas = NULL;
        st = tq_fail(TQ_ERR_RUNTIME, "%s: %s (starting %s)",
                     GPU_CALL("cublasCreate", "rocblas_create_handle"), api->blas_error_name(b),
                     api->blas_name);
        ctx_close(c);
        return st;
    }
    st = TQ_GPU(pool_alloc)(c, 4, &c->flag);
    if (st) {
        ctx_close(c);
        return st;
    }
    *out = c;
    return TQ_OK;
fail: /* device_make puts the device's name before the message */
    st = tq_fail(TQ_ERR_RUNTIME, "%s: %s (%s)", call, api->error_name(r), doing);
    ctx_close(c);
    return st;
}

static void gpu_close(void *ctx) { ctx_close(ctx); }

/* What the start took, each part on the monotonic clock: the runtime's
 * load (dlopen, entry points, cuInit / hipInit), the context (and stream),
 * the kernels (module load and lookups), the BLAS library (load, handle). */
static void gpu_startup(void *ctx, char *out, size_t n)
{
    const tq_gpu_ctx *c = ctx;
    const tq_gpu_api *api = c->api;
    double blas = api->has_blas ? api->blas_load_s + c->blas_s : 0;
    snprintf(out, n, "start %.3f s: driver %.3f s, context %.3f s, kernels %.3f s, %s %.3f s",
             api->load_s + c->ctx_s + c->module_s + blas, api->load_s, c->ctx_s, c->module_s,
             GPU_CALL("cuBLAS", "rocBLAS"), blas);
}

static tq_status gpu_alloc(void *ctx, size_t n, void **buf)
{
    tq_gpu_ctx *c = ctx;
    c->api->set_current(c->dev, c->ctx);
    return TQ_GPU(pool_alloc)(c, n, (gpu_block **)buf);
}

static void gpu_free(void *ctx, void *buf) { TQ_GPU(pool_free)(ctx, buf); }

/* Uploads go through the pinned stage: the caller's memory is free to go as
 * soon as we return, and the copy to the device runs while the host goes on.
 * The stage is reused only once the copy out of it has finished. */
static tq_status gpu_upload(void *ctx, void *buf, size_t offset, const void *src, size_t n)
{
    tq_gpu_ctx *c = ctx;
    const tq_gpu_api *api = c->api;
    gpu_ptr dst = ((gpu_block *)buf)->ptr + offset;
    gpu_res r = 0;
    const char *call = "";
    if (c->recording) /* a replay would copy the staging buffer's later contents */
        return tq_fail(TQ_ERR_USAGE, "%s: no upload while a graph is recorded", TQ_GPU_NAME);
    api->set_current(c->dev, c->ctx);
    pthread_mutex_lock(&c->lock);
    for (size_t done = 0; !r && done < n;) {
        size_t part = n - done < GPU_STAGE_BYTES ? n - done : GPU_STAGE_BYTES;
        call = GPU_CALL("cuEventSynchronize", "hipEventSynchronize");
        if (c->stage_busy && (r = api->event_sync(c->stage_done)))
            break;
        c->stage_busy = 0;
        memcpy(c->stage, (const char *)src + done, part);
        call = GPU_CALL("cuMemcpyHtoDAsync", "hipMemcpyHtoDAsync");
        if (!(r = api->htod(dst + done, c->stage, part, c->stream))) {
            call = GPU_CALL("cuEventRecord", "hipEventRecord");
            if (!(r = api->event_record(c->stage_done, c->stream)))
                c->stage_busy = 1;
        }
        done += part;
    }
    pthread_mutex_unlock(&c->lock);
    return r ? TQ_GPU(fail)(c, r, call, "copying to the device") : TQ_OK;
}

/* A download waits for everything queued before it: it is where results
 * reach the host, the one place an op's caller synchronizes. */
static tq_status gpu_download(void *ctx, const void *buf, size_t offset, void *dst, size_t n)
{
    tq_gpu_ctx *c = ctx;
    const tq_gpu_api *api = c->api;
    gpu_ptr src = ((const gpu_block *)buf)->ptr + offset;
    gpu_res r = 0;
    const char *call = "";
    if (c->recording) /* nothing has run yet: there is nothing to read */
        return tq_fail(TQ_ERR_USAGE, "%s: no download while a graph is recorded", TQ_GPU_NAME);
    api->set_current(c->dev, c->ctx);
    pthread_mutex_lock(&c->lock);
    for (size_t done = 0; !r && done < n;) {
        size_t part = n - done < GPU_STAGE_BYTES ? n - done : GPU_STAGE_BYTES;
        call = GPU_CALL("cuMemcpyDtoHAsync", "hipMemcpyDtoHAsync");
        if (!(r = api->dtoh(c->stage, src + done, part, c->stream))) {
            call = GPU_CALL("cuStreamSynchronize", "hipStreamSynchronize");
            if (!(r = api->stream_sync(c->stream)))
                memcpy((char *)dst + done, c->stage, part);
        }
        c->stage_busy = 0; /* the sync finished any upload from the stage too */
        done += part;
    }
    pthread_mutex_unlock(&c->lock);
    return r ? TQ_GPU(fail)(c, r, call, "copying from the device") : TQ_OK;
}

static tq_status gpu_sync(void *ctx)
{
    tq_gpu_ctx *c = ctx;
    c->api->set_current(c->dev, c->ctx);
    gpu_res r = c->api->stream_sync(c->stream);
    return r ? TQ_GPU(fail)(c, r, GPU_CALL("cuStreamSynchronize", "hipStreamSynchronize"),
                            "waiting for the device")
             : TQ_OK;
}

/* The device's timer: two events that keep a time, recorded on the one
 * stream the ops run on, so that they bracket exactly the work queued
 * between them; the device stamps each when it reaches it. */
static tq_status gpu_timer_begin(void *ctx)
{
    tq_gpu_ctx *c = ctx;
    const tq_gpu_api *api = c->api;
    if (!api->timed_event_create || !api->event_elapsed)
        return tq_fail(TQ_ERR_RUNTIME, "%s: the runtime has no timing events", TQ_GPU_NAME);
    api->set_current(c->dev, c->ctx);
    gpu_res r = 0;
    const char *call = GPU_CALL("cuEventCreate", "hipEventCreate");
    for (int i = 0; i < 2 && !r; i++)
        if (!c->timer[i])
            r = api->timed_event_create(&c->timer[i]);
    if (!r) {
        call = GPU_CALL("cuEventRecord", "hipEventRecord");
        r = api->event_record(c->timer[0], c->stream);
    }
    return r ? TQ_GPU(fail)(c, r, call, "starting the timer") : TQ_OK;
}

static tq_status gpu_timer_end(void *ctx, double *seconds)
{
    tq_gpu_ctx *c = ctx;
    const tq_gpu_api *api = c->api;
    float ms = 0;
    api->set_current(c->dev, c->ctx);
    const char *call = GPU_CALL("cuEventRecord", "hipEventRecord");
    gpu_res r = api->event_record(c->timer[1], c->stream);
    if (!r) {
        call = GPU_CALL("cuEventSynchronize", "hipEventSynchronize");
        r = api->event_sync(c->timer[1]); /* everything before it has run */
    }
    if (!r) {
        call = GPU_CALL("cuEventElapsedTime", "hipEventElapsedTime");
        r = api->event_elapsed(&ms, c->timer[0], c->timer[1]);
    }
    *seconds = r ? 0 : 1e-3 * (double)ms;
    return r ? TQ_GPU(fail)(c, r, call, "reading the timer") : TQ_OK;
}

/* bf16 and f16 products go to cuBLAS/rocBLAS's tensor-core GEMM (without
 * the library, tq's kernels widen them: slower, the same numbers). */
static int native_product(tq_dtype dt) { return dt == TQ_DTYPE_BF16 || dt == TQ_DTYPE_F16; }

const tq_backend TQ_GPU_BACKEND = {
#ifdef TQ_GPU_HIP
    .kind = TQ_BACKEND_HIP,
#else
    .kind = TQ_BACKEND_CUDA,
#endif
    .name = TQ_GPU_NAME,
    .probe = probe,
    .may_have_gpu = may_have_gpu,
    .info = info,
    .open = gpu_open,
    .startup = gpu_startup,
    .close = gpu_close,
    .alloc = gpu_alloc,
    .free = gpu_free,
    .upload = gpu_upload,
    .download = gpu_download,
    .sync = gpu_sync,
    .graph_begin = TQ_GPU(graph_begin),
    .graph_end = TQ_GPU(graph_end),
    .graph_launch = TQ_GPU(graph_launch),
    .graph_free = TQ_GPU(graph_free),
    .timer_name = "device events",
    .timer_begin = gpu_timer_begin,
    .timer_end = gpu_timer_end,
    .fma_peak = TQ_GPU(fma_peak),
    .native_product = native_product,
    .ops =
        {
            .matmul = TQ_GPU(matmul),
            .rownorm = TQ_GPU(rownorm),
            .normalize = TQ_GPU(normalize),
            .topk = TQ_GPU(topk),
            .above = TQ_GPU(above),
            .softmax = TQ_GPU(softmax),
            .layernorm = TQ_GPU(layernorm),
            .gelu = TQ_GPU(gelu),
            .activate = TQ_GPU(activate),
            .add = TQ_GPU(add),
            .scale = TQ_GPU(scale),
            .gather = TQ_GPU(gather),
            .convert = TQ_GPU(convert),
            .attention = TQ_GPU(attention),
            .simtopk = TQ_GPU(simtopk),
            .rowprod = TQ_GPU(rowprod),
        },
};
