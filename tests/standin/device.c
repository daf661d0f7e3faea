/* device.c: the stand-in's configuration (environment), its lock and its one
 * line of error output, and the devices with their primary contexts and
 * attributes as a CUDA sm_90 / HIP gfx90a device reports them. */

#include "standin.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 16
#define CTX_STACK 8

const char tq_sd_device_name[] = "tq stand-in (CPU fibers)";
/* what a real MI210 reports: the target plus its feature settings */
const char tq_sd_gcn_arch[] = "gfx90a:sramecc+:xnack-";

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static struct tq_sd_config cfg;
static struct tq_sd_ctx *primary[MAX_DEVICES];

static long long env_ll(const char *name, long long def, long long lo, long long hi)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s)
        return def;
    long long v = strtoll(s, &end, 0);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "tq-standin: %s=%s is not a number in [%lld, %lld]; using %lld\n", name,
                s, lo, hi, def);
        return def;
    }
    return v;
}

static void read_cfg(void)
{
    cfg.quiet = (int)env_ll("TQ_STANDIN_QUIET", 0, 0, 1);
    cfg.devices = (int)env_ll("TQ_STANDIN_DEVICES", 1, 0, MAX_DEVICES);
    cfg.memory = (size_t)env_ll("TQ_STANDIN_MEMORY", 8LL << 30, 0, 1LL << 50);
#ifdef __SANITIZE_ADDRESS__
    long long def_stack = 256 << 10; /* ASan's redzones triple a frame */
#else
    long long def_stack = 64 << 10;
#endif
    cfg.stack = (size_t)env_ll("TQ_STANDIN_STACK", def_stack, 16 << 10, 64 << 20);
}

const struct tq_sd_config *tq_sd_cfg(void)
{
    pthread_once(&cfg_once, read_cfg);
    return &cfg;
}

void tq_sd_lock(void) { pthread_mutex_lock(&lock); }

CUresult tq_sd_unlock(CUresult r)
{
    pthread_mutex_unlock(&lock);
    return r;
}

void tq_sd_log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (tq_sd_cfg()->quiet)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tq-standin: %s\n", line);
}

uint64_t tq_sd_seed(void)
{
    return (uint64_t)env_ll("TQ_STANDIN_SEED", 12345, 0, 0x7fffffffffffffffLL);
}

int tq_sd_driver_version(void)
{
    return (int)env_ll("TQ_STANDIN_DRIVER_VERSION", 13000, 0, 1000000);
}

int tq_sd_hidden(const char *symbol)
{
    const char *list = getenv("TQ_STANDIN_HIDE");
    size_t n = strlen(symbol);
    for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',')
        if (strcspn(p, ",") == n && !strncmp(p, symbol, n))
            return 1;
    return 0;
}

/* How many of n devices a list of visible devices leaves (NULL: all), read
 * as the drivers read it (CUDA C++ Programming Guide, "CUDA Environment
 * Variables"): a comma list of indices; only those are visible, numbered
 * from 0 in the list's order; an invalid index (or one repeated) hides
 * itself and every index after it; set but empty, none. */
static int visible_of(const char *list, int n)
{
    int seen[MAX_DEVICES] = {0}, m = 0;
    if (!list)
        return n;
    for (const char *p = list; *p; p += *p == ',') {
        char *end;
        long i = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || i < 0 || i >= n || seen[i])
            break;
        seen[i] = 1;
        m++;
        p = end;
    }
    return m;
}

/* The devices an API shows. CUDA: CUDA_VISIBLE_DEVICES. HIP (ROCm's "HIP
 * environment variables", GPU isolation): ROCR_VISIBLE_DEVICES first, then
 * HIP_VISIBLE_DEVICES or else CUDA_VISIBLE_DEVICES among those left. The
 * stand-in's devices being alike, visible device i is the i-th: only the
 * count is modelled. */
int tq_sd_visible(int api)
{
    int n = tq_sd_cfg()->devices;
    if (api != TQ_SD_HIP)
        return visible_of(getenv("CUDA_VISIBLE_DEVICES"), n);
    const char *hip = getenv("HIP_VISIBLE_DEVICES");
    n = visible_of(getenv("ROCR_VISIBLE_DEVICES"), n);
    return visible_of(hip ? hip : getenv("CUDA_VISIBLE_DEVICES"), n);
}

CUresult tq_sd_check_hip(int dev)
{
    return dev >= 0 && dev < tq_sd_visible(TQ_SD_HIP) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult tq_sd_check_device(int dev)
{
    return dev >= 0 && dev < tq_sd_cfg()->devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

struct tq_sd_ctx *tq_sd_primary(int dev)
{
    if (tq_sd_check_device(dev) != CUDA_SUCCESS)
        return NULL;
    if (!primary[dev]) {
        struct tq_sd_ctx *c = calloc(1, sizeof *c);
        if (!c)
            return NULL;
        c->device = dev;
        primary[dev] = c;
        if (!tq_sd_stream_new(c)) { /* the null stream */
            free(c);
            primary[dev] = NULL;
            return NULL;
        }
    }
    return primary[dev];
}

/* CUDA: a per-thread context stack; HIP: a per-thread current device. */
static __thread struct tq_sd_ctx *ctx_stack[CTX_STACK];
static __thread int ctx_depth;
static __thread int hip_device;

struct tq_sd_ctx *tq_sd_current(int api)
{
    if (api == TQ_SD_HIP)
        return tq_sd_primary(hip_device);
    return ctx_depth ? ctx_stack[ctx_depth - 1] : NULL;
}

CUresult tq_sd_set_current(struct tq_sd_ctx *ctx)
{
    if (!ctx) {
        if (ctx_depth)
            ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_depth)
        ctx_depth = 1;
    ctx_stack[ctx_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult tq_sd_push_current(struct tq_sd_ctx *ctx)
{
    if (!ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == CTX_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = ctx;
    return CUDA_SUCCESS;
}

CUresult tq_sd_pop_current(struct tq_sd_ctx **ctx)
{
    if (!ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_depth--;
    if (ctx)
        *ctx = ctx_stack[ctx_depth];
    return CUDA_SUCCESS;
}

int tq_sd_hip_device(void) { return hip_device; }

CUresult tq_sd_hip_set_device(int dev)
{
    CUresult r = tq_sd_check_hip(dev);
    if (r == CUDA_SUCCESS)
        hip_device = dev;
    return r;
}

/* One table for both APIs: {CUDA attribute, HIP attribute, CUDA value, HIP
 * value}; 0 where an API has no such attribute. */
static const struct { int cu, hip; int cu_val, hip_val; } attrs[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, hipDeviceAttributeMaxThreadsPerBlock, 1024, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, hipDeviceAttributeMaxBlockDimX, 1024, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, hipDeviceAttributeMaxBlockDimY, 1024, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, hipDeviceAttributeMaxBlockDimZ, 64, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, hipDeviceAttributeMaxGridDimX, 2147483647, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, hipDeviceAttributeMaxGridDimY, 65535, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, hipDeviceAttributeMaxGridDimZ, 65535, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, hipDeviceAttributeMaxSharedMemoryPerBlock,
     48 << 10, 64 << 10},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, hipDeviceAttributeTotalConstantMemory, 65536,
     65536},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, hipDeviceAttributeWarpSize, 32, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, hipDeviceAttributeMaxRegistersPerBlock, 65536,
     65536},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, hipDeviceAttributeClockRate, 1980000, 1700000},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, hipDeviceAttributeMultiprocessorCount, 132, 132},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 0, 1, 0},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 0, 2619000, 0},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 0, 5120, 0},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, hipDeviceAttributeL2CacheSize, 50 << 20, 8 << 20},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
     hipDeviceAttributeMaxThreadsPerMultiProcessor, 2048, 2048},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 0, 1, 0},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, hipDeviceAttributeComputeCapabilityMajor, 9, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, hipDeviceAttributeComputeCapabilityMinor, 0, 0},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
     hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, 228 << 10, 64 << 10},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, hipDeviceAttributeSharedMemPerBlockOptin,
     227 << 10, 64 << 10},
};

int tq_sd_attribute(int api, int attr, int *value)
{
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        if (api == TQ_SD_CUDA && attrs[i].cu == attr) {
            *value = attrs[i].cu_val;
            return 0;
        }
        if (api == TQ_SD_HIP && attrs[i].hip == attr && attr) {
            *value = attrs[i].hip_val;
            return 0;
        }
    }
    if (api == TQ_SD_HIP && attr == hipDeviceAttributeTotalGlobalMem) {
        size_t m = tq_sd_cfg()->memory;
        *value = m > 0x7fffffff ? 0x7fffffff : (int)m;
        return 0;
    }
    /* any other valid attribute: 0, as a device without that feature says */
    if ((api == TQ_SD_CUDA && attr > 0 && attr < CU_DEVICE_ATTRIBUTE_MAX) ||
        (api == TQ_SD_HIP && ((attr >= 0 && attr < hipDeviceAttributeCudaCompatibleEnd) ||
                              (attr >= hipDeviceAttributeAmdSpecificBegin &&
                               attr < hipDeviceAttributeAmdSpecificEnd)))) {
        *value = 0;
        return 0;
    }
    return -1;
}
