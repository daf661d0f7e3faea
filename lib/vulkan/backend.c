/* backend.c: the Vulkan backend's table, and opening a device: a logical
 * device with one compute queue, its memory types, a pipeline cache and the
 * recording frames. */
#include "vk.h"

static tq_status find_queue(tq_vk_ctx *c)
{
    uint32_t n = 0;
    c->vi.fn.vkGetPhysicalDeviceQueueFamilyProperties(c->pd, &n, NULL);
    VkQueueFamilyProperties *q = calloc(n ? n : 1, sizeof *q);
    if (!q)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    c->vi.fn.vkGetPhysicalDeviceQueueFamilyProperties(c->pd, &n, q);
    /* a compute family without graphics first: on discrete GPUs it is the
     * asynchronous compute engine, free of the display's work */
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || !q[i].queueCount)
            continue;
        if (best < 0 || ((q[best].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                         !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            best = (int)i;
    }
    if (best >= 0)
        c->timestamp_bits = q[best].timestampValidBits;
    free(q);
    if (best < 0)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: the device has no compute queue");
    c->qfamily = (uint32_t)best;
    return TQ_OK;
}

static void vk_close(void *ctx);

static tq_status vk_open(int index, void **out)
{
    int n;
    tq_status st = tq_vk_probe_count(&n);
    if (st)
        return st;
    if (index < 0 || index >= n)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: no device %d", index);
    tq_vk_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    if ((st = tq_vk_instance_create(&c->vi))) {
        free(c);
        return st;
    }
    uint32_t np = 0, want = tq_vk_probe_phys(index);
    VkPhysicalDevice pds[16];
    VkResult r = c->vi.fn.vkEnumeratePhysicalDevices(c->vi.inst, &np, NULL);
    if (np > 16)
        np = 16;
    if (r == VK_SUCCESS || r == VK_INCOMPLETE)
        r = c->vi.fn.vkEnumeratePhysicalDevices(c->vi.inst, &np, pds);
    if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || want >= np) {
        vk_close(c);
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: device %d went away", index);
    }
    c->pd = pds[want];
    tq_vk_caps_probe(&c->vi, c->pd, &c->caps);
    if (tq_device_plain_forced()) {
        /* the least a device may have: every choice of variant that reads
         * these takes its plain branch (the tests run the suite so) */
        c->caps.subgroup_size = 0;
        c->caps.subgroup_arith = 0;
        c->caps.fp16_storage = 0;
        c->caps.fp16_arith = 0;
        c->caps.max_invocations = 128;
    }
    if ((st = find_queue(c))) {
        vk_close(c);
        return st;
    }
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = c->qfamily,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    /* 16-bit storage for the f16 operands of matmul (Vulkan 1.1 core; caps
     * has it only on such devices) */
    VkPhysicalDevice16BitStorageFeatures s16 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
        .storageBuffer16BitAccess = VK_TRUE,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = c->caps.fp16_storage ? &s16 : NULL,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
    };
    if ((r = c->vi.fn.vkCreateDevice(c->pd, &dci, NULL, &c->dev)) != VK_SUCCESS) {
        vk_close(c);
        return tq_vk_fail(r, "vkCreateDevice");
    }
#define TQ_VK_LOAD(f)                                                              \
    if (!(c->fn.f = (PFN_##f)c->vi.fn.vkGetDeviceProcAddr(c->dev, #f))) {          \
        vk_close(c);                                                               \
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: the driver lacks %s", #f);        \
    }
    TQ_VK_DEVICE_FNS(TQ_VK_LOAD)
#undef TQ_VK_LOAD
    c->fn.vkGetDeviceQueue(c->dev, c->qfamily, 0, &c->queue);
    /* 256 threads for 1-D shaders where allowed (128 is the guaranteed least) */
    c->wg = c->caps.max_invocations >= 256 ? 256 : 128;
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = c->qfamily,
    };
    VkPipelineCacheCreateInfo cci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    if ((r = c->fn.vkCreateCommandPool(c->dev, &pci, NULL, &c->cpool)) != VK_SUCCESS ||
        (r = c->fn.vkCreatePipelineCache(c->dev, &cci, NULL, &c->pcache)) != VK_SUCCESS) {
        vk_close(c);
        return tq_vk_fail(r, "device set-up");
    }
    if ((st = tq_vk_frames_init(c)) || (st = tq_device_open("cpu", &c->host))) {
        vk_close(c);
        return st;
    }
    *out = c;
    return TQ_OK;
}

static void vk_close(void *ctx)
{
    tq_vk_ctx *c = ctx;
    if (!c)
        return;
    if (c->dev) {
        if (c->fn.vkDeviceWaitIdle)
            c->fn.vkDeviceWaitIdle(c->dev);
        tq_vk_frames_destroy(c);
        if (c->timer)
            c->fn.vkDestroyQueryPool(c->dev, c->timer, NULL);
        tq_vk_pipes_destroy(c);
        tq_vk_pool_release(c);
        if (c->pcache)
            c->fn.vkDestroyPipelineCache(c->dev, c->pcache, NULL);
        if (c->cpool)
            c->fn.vkDestroyCommandPool(c->dev, c->cpool, NULL);
        if (c->fn.vkDestroyDevice)
            c->fn.vkDestroyDevice(c->dev, NULL);
    }
    tq_device_close(c->host);
    tq_vk_instance_destroy(&c->vi);
    free(c);
}

const tq_backend tq_backend_vulkan = {
    .kind = TQ_BACKEND_VULKAN,
    .name = "vulkan",
    .probe = tq_vk_probe_count,
    .may_have_gpu = tq_vk_may_have_gpu,
    .info = tq_vk_probe_info,
    .open = vk_open,
    .close = vk_close,
    .alloc = tq_vk_alloc,
    .free = tq_vk_free,
    .upload = tq_vk_upload,
    .download = tq_vk_download,
    .sync = tq_vk_sync,
    .timer_name = "timestamp queries",
    .timer_begin = tq_vk_timer_begin,
    .timer_end = tq_vk_timer_end,
    .fma_peak = tq_vk_fma_peak,
    .ops =
        {
            .matmul = tq_vk_matmul,
            .rownorm = tq_vk_rownorm,
            .normalize = tq_vk_normalize,
            .topk = tq_vk_topk,
            .softmax = tq_vk_softmax,
            .layernorm = tq_vk_layernorm,
            .gelu = tq_vk_gelu,
            .activate = tq_vk_activate,
            .add = tq_vk_add,
            .scale = tq_vk_scale,
            .gather = tq_vk_gather,
            .convert = tq_vk_convert,
            .attention = tq_vk_attention,
            .simtopk = tq_vk_simtopk,
            .rowprod = tq_vk_rowprod,
        },
};
