/* probe.c: which Vulkan devices there are and what each can do (subgroups,
 * 16-bit and 64-bit types, shared memory, workgroup limits), found once per
 * process and kept for --list-devices, `auto` and the choice of shader
 * variants. */
#include "vk.h"

#include <pthread.h>

void tq_vk_caps_probe(const tq_vk_instance *vi, VkPhysicalDevice pd, tq_vk_caps *caps)
{
    memset(caps, 0, sizeof *caps);
    VkPhysicalDeviceProperties p;
    vi->fn.vkGetPhysicalDeviceProperties(pd, &p);
    caps->api_version = p.apiVersion;
    caps->type = p.deviceType;
    caps->shared_bytes = p.limits.maxComputeSharedMemorySize;
    caps->max_invocations = p.limits.maxComputeWorkGroupInvocations;
    memcpy(caps->max_groups, p.limits.maxComputeWorkGroupCount, sizeof caps->max_groups);
    caps->max_range = p.limits.maxStorageBufferRange;
    caps->max_buffers = p.limits.maxPerStageDescriptorStorageBuffers;
    caps->timestamp_period = p.limits.timestampPeriod;
    snprintf(caps->driver, sizeof caps->driver, "driver %u.%u.%u", VK_VERSION_MAJOR(p.driverVersion),
             VK_VERSION_MINOR(p.driverVersion), VK_VERSION_PATCH(p.driverVersion));
    if (!vi->fn.vkGetPhysicalDeviceProperties2 || p.apiVersion < VK_API_VERSION_1_1)
        return; /* a 1.0 device: plain variants everywhere */

    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    if (p.apiVersion >= VK_API_VERSION_1_2)
        sg.pNext = &drv;
    vi->fn.vkGetPhysicalDeviceProperties2(pd, &p2);
    caps->subgroup_size = sg.subgroupSize;
    caps->subgroup_arith = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                           (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                           (sg.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT);
    if (p.apiVersion >= VK_API_VERSION_1_2 && drv.driverName[0])
        snprintf(caps->driver, sizeof caps->driver, "%.40s %.48s", drv.driverName, drv.driverInfo);

    VkPhysicalDevice16BitStorageFeatures s16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
    VkPhysicalDeviceShaderFloat16Int8Features f16 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &s16};
    if (p.apiVersion >= VK_API_VERSION_1_2)
        s16.pNext = &f16;
    vi->fn.vkGetPhysicalDeviceFeatures2(pd, &f2);
    caps->fp16_storage = s16.storageBuffer16BitAccess;
    caps->fp16_arith = f16.shaderFloat16;
    caps->float64 = f2.features.shaderFloat64;
}

/* ---- the process-wide device list ---- */

enum { MAX_DEVICES = 16 };
static struct {
    tq_status st;
    char error[256];
    int count;
    tq_device_info info[MAX_DEVICES];
    uint32_t phys[MAX_DEVICES]; /* index in Vulkan's own enumeration */
} probed;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
    }
}

/* Our device order: discrete GPUs, then integrated, virtual, other and
 * CPU-type devices, each kind in Vulkan's own order. device.c's `auto` takes
 * the first device that is not CPU-type, so it gets a discrete GPU when there
 * is one; `vulkan:N` and --list-devices use the same order. */
static int type_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 4;
    default: return 3;
    }
}

static void probe_run(void)
{
    tq_vk_instance vi;
    if (tq_vk_instance_create(&vi)) {
        probed.st = TQ_ERR_RUNTIME;
        snprintf(probed.error, sizeof probed.error, "%s", tq_errmsg());
        return;
    }
    uint32_t n = 0;
    VkResult r = vi.fn.vkEnumeratePhysicalDevices(vi.inst, &n, NULL);
    VkPhysicalDevice pds[MAX_DEVICES];
    if (r == VK_SUCCESS || r == VK_INCOMPLETE) {
        if (n > MAX_DEVICES)
            n = MAX_DEVICES;
        r = vi.fn.vkEnumeratePhysicalDevices(vi.inst, &n, pds);
    }
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        tq_vk_fail(r, "vkEnumeratePhysicalDevices");
        probed.st = TQ_ERR_RUNTIME;
        snprintf(probed.error, sizeof probed.error, "%s", tq_errmsg());
        tq_vk_instance_destroy(&vi);
        return;
    }
    int at = 0;
    for (int rank = 0; rank <= 4; rank++)
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vi.fn.vkGetPhysicalDeviceProperties(pds[i], &p);
        if (type_rank(p.deviceType) != rank)
            continue;
        probed.phys[at] = i;
        tq_device_info *d = &probed.info[at++];
        tq_vk_caps caps;
        tq_vk_caps_probe(&vi, pds[i], &caps);
        snprintf(d->name, sizeof d->name, "%.127s", p.deviceName);
        d->cpu_type = p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
        VkPhysicalDeviceMemoryProperties mp;
        vi.fn.vkGetPhysicalDeviceMemoryProperties(pds[i], &mp);
        for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
            if (mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
                d->memory += mp.memoryHeaps[h].size;
        snprintf(d->detail, sizeof d->detail,
                 "%s, %s, Vulkan %u.%u, subgroup %u%s, fp16 %s, f64 %s, shared %u KiB",
                 type_name(p.deviceType), caps.driver, VK_VERSION_MAJOR(p.apiVersion),
                 VK_VERSION_MINOR(p.apiVersion), caps.subgroup_size,
                 caps.subgroup_arith ? " (arithmetic)" : "",
                 caps.fp16_arith ? "arith" : caps.fp16_storage ? "storage" : "no",
                 caps.float64 ? "yes" : "no", caps.shared_bytes / 1024);
    }
    probed.count = (int)n;
    tq_vk_instance_destroy(&vi);
}

static tq_status vk_probe(int *count)
{
    pthread_once(&probe_once, probe_run);
    *count = probed.count;
    if (probed.st)
        return tq_fail(probed.st, "%s", probed.error);
    return TQ_OK;
}

static tq_status vk_info(int index, tq_device_info *info)
{
    int n;
    tq_status st = vk_probe(&n);
    if (st)
        return st;
    if (index < 0 || index >= n)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: no device %d", index);
    *info = probed.info[index];
    return TQ_OK;
}

/* Exposed to backend.c through these two names. */
tq_status tq_vk_probe_count(int *count) { return vk_probe(count); }
tq_status tq_vk_probe_info(int index, tq_device_info *info) { return vk_info(index, info); }
/* Vulkan's enumeration index of our device `index` (valid after a probe). */
uint32_t tq_vk_probe_phys(int index) { return probed.phys[index]; }
