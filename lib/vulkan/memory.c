/* memory.c: device buffers from a pool of size classes reused from batch to
 * batch (no allocation per op once a batch has run), and uploads and
 * downloads through the frames' staging memory, ordered with the recorded ops
 * so that neither waits for the device except a download.
 * One unit with submit.c, split for size: a copy is recorded among the ops of
 * the frame submit.c keeps, and a frame's staging memory is grown and freed
 * here. */
#include "vk.h"

/* Transfers go in pieces of at most this many bytes: staging stays bounded
 * whatever the tensor size. */
#define STAGE_MAX ((size_t)32 << 20)
/* Freed buffers kept for reuse, at most this many bytes; beyond, the device
 * is waited for and the pool emptied. */
#define POOL_KEEP ((size_t)1 << 30)
/* Buffers up to this size keep a host copy of what was uploaded. */
#define SHADOW_MAX ((size_t)64 << 10)

tq_status tq_vk_find_memory(tq_vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want,
                            VkMemoryPropertyFlags avoid, uint32_t *type)
{
    VkPhysicalDeviceMemoryProperties mp;
    c->vi.fn.vkGetPhysicalDeviceMemoryProperties(c->pd, &mp);
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < mp.memoryTypeCount; i++) {
            VkMemoryPropertyFlags f = mp.memoryTypes[i].propertyFlags;
            if ((bits >> i & 1) && (f & want) == want && (pass || !(f & avoid))) {
                *type = i;
                return TQ_OK;
            }
        }
    return tq_fail(TQ_ERR_RUNTIME, "vulkan: no suitable memory type");
}

/* Size classes: four a power of two, from 256 bytes. */
static int size_class(size_t n, size_t *cap)
{
    if (n < 256)
        n = 256;
    int e = 63 - __builtin_clzll((unsigned long long)n); /* 2^e <= n */
    size_t base = (size_t)1 << e, step = base / 4;
    int q = (int)((n - base + step - 1) / step); /* 0..4 */
    if (q == 4) {
        e++;
        q = 0;
        base <<= 1;
        step <<= 1;
    }
    *cap = base + (size_t)q * step;
    return (e - 8) * 4 + q;
}

/* A buffer with its own memory; usage covers every op and transfer. */
static tq_status buffer_make(tq_vk_ctx *c, size_t size, VkBufferUsageFlags usage,
                             VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer,
                             VkBuffer *buf, VkDeviceMemory *mem)
{
    VkBufferCreateInfo bi = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = c->fn.vkCreateBuffer(c->dev, &bi, NULL, buf);
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, "vkCreateBuffer");
    VkMemoryRequirements req;
    c->fn.vkGetBufferMemoryRequirements(c->dev, *buf, &req);
    uint32_t type;
    tq_status st = tq_vk_find_memory(c, req.memoryTypeBits, want | prefer, 0, &type);
    if (st && prefer)
        st = tq_vk_find_memory(c, req.memoryTypeBits, want, 0, &type);
    if (st) {
        c->fn.vkDestroyBuffer(c->dev, *buf, NULL);
        return st;
    }
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = type,
    };
    if ((r = c->fn.vkAllocateMemory(c->dev, &ai, NULL, mem)) != VK_SUCCESS) {
        c->fn.vkDestroyBuffer(c->dev, *buf, NULL);
        return tq_vk_fail(r, "vkAllocateMemory");
    }
    if ((r = c->fn.vkBindBufferMemory(c->dev, *buf, *mem, 0)) != VK_SUCCESS) {
        c->fn.vkFreeMemory(c->dev, *mem, NULL);
        c->fn.vkDestroyBuffer(c->dev, *buf, NULL);
        return tq_vk_fail(r, "vkBindBufferMemory");
    }
    return TQ_OK;
}

static void buf_destroy(tq_vk_ctx *c, tq_vk_buf *b)
{
    c->fn.vkDestroyBuffer(c->dev, b->buf, NULL);
    c->fn.vkFreeMemory(c->dev, b->mem, NULL);
    free(b->shadow);
    free(b);
}

/* Destroys every pooled buffer; they may be in use by submitted work, so
 * the device is waited for first. */
void tq_vk_pool_release(tq_vk_ctx *c)
{
    if (c->pooled_bytes)
        c->fn.vkDeviceWaitIdle(c->dev);
    for (int i = 0; i < TQ_VK_POOL_CLASSES; i++)
        while (c->free_list[i]) {
            tq_vk_buf *b = c->free_list[i];
            c->free_list[i] = b->next;
            buf_destroy(c, b);
        }
    c->pooled_bytes = 0;
}

tq_status tq_vk_alloc(void *ctx, size_t nbytes, void **out)
{
    tq_vk_ctx *c = ctx;
    size_t cap;
    int cls = size_class(nbytes, &cap);
    if (cls < 0 || cls >= TQ_VK_POOL_CLASSES || cap > c->caps.max_range)
        return tq_fail(TQ_ERR_NOMEM, "vulkan: a tensor of %zu bytes is over the device's "
                       "storage buffer limit (%llu bytes)", nbytes,
                       (unsigned long long)c->caps.max_range);
    tq_vk_buf *b = c->free_list[cls];
    if (b) {
        c->free_list[cls] = b->next;
        c->pooled_bytes -= b->cap;
    } else {
        b = calloc(1, sizeof *b);
        if (!b)
            return tq_fail(TQ_ERR_NOMEM, "out of memory");
        VkBufferUsageFlags use = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
        tq_status st = buffer_make(c, cap, use, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &b->buf, &b->mem);
        if (st == TQ_ERR_NOMEM && c->pooled_bytes) { /* the pool's buffers may make room */
            tq_vk_pool_release(c);
            st = buffer_make(c, cap, use, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, &b->buf, &b->mem);
        }
        if (st) {
            free(b);
            return st;
        }
        b->cap = cap;
    }
    b->size = nbytes;
    b->shadow_valid = 0;
    b->next = NULL;
    *out = b;
    return TQ_OK;
}

void tq_vk_free(void *ctx, void *buf)
{
    tq_vk_ctx *c = ctx;
    tq_vk_buf *b = buf;
    if (!b)
        return;
    size_t cap;
    int cls = size_class(b->cap, &cap);
    /* commands recorded earlier may still use it: reuse is ordered after them
     * by the barriers, destruction waits for the device */
    b->next = c->free_list[cls];
    c->free_list[cls] = b;
    c->pooled_bytes += b->cap;
    if (c->pooled_bytes > POOL_KEEP) {
        tq_vk_sync(c);
        tq_vk_pool_release(c);
    }
}

static void shadow_update(tq_vk_buf *b, size_t off, const void *src, size_t n)
{
    if (b->cap > SHADOW_MAX)
        return;
    if (!b->shadow && !(b->shadow = malloc(b->cap)))
        return;
    if (!b->shadow_valid && !(off == 0 && n >= b->size))
        return; /* part of the buffer is only on the device */
    memcpy(b->shadow + off, src, n);
    b->shadow_valid = 1;
}

tq_status tq_vk_upload(void *ctx, void *buf, size_t off, const void *src, size_t n)
{
    tq_vk_ctx *c = ctx;
    tq_vk_buf *b = buf;
    shadow_update(b, off, src, n);
    for (size_t done = 0; done < n;) {
        size_t piece = n - done < STAGE_MAX ? n - done : STAGE_MAX, soff;
        tq_vk_frame *f;
        tq_status st = tq_vk_stage(c, piece, &f, &soff);
        if (st)
            return st;
        memcpy(f->stage_ptr + soff, (const char *)src + done, piece);
        VkBufferCopy region = {soff, off + done, piece};
        tq_vk_barrier(c, f->cmd);
        c->fn.vkCmdCopyBuffer(f->cmd, f->stage, b->buf, 1, &region);
        done += piece;
    }
    return TQ_OK;
}

/* Copies the regions of b into frame f's staging, then waits until the host
 * can read them there. */
static tq_status copy_to_stage(tq_vk_ctx *c, tq_vk_frame *f, const tq_vk_buf *b,
                               const VkBufferCopy *regions, uint32_t n)
{
    tq_vk_barrier(c, f->cmd);
    c->fn.vkCmdCopyBuffer(f->cmd, b->buf, f->stage, n, regions);
    VkMemoryBarrier to_host = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    c->fn.vkCmdPipelineBarrier(f->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                               0, 1, &to_host, 0, NULL, 0, NULL);
    return tq_vk_sync(c);
}

tq_status tq_vk_download(void *ctx, const void *buf, size_t off, void *dst, size_t n)
{
    tq_vk_ctx *c = ctx;
    const tq_vk_buf *b = buf;
    if (b->shadow_valid) { /* what was uploaded, unchanged since */
        memcpy(dst, b->shadow + off, n);
        return TQ_OK;
    }
    for (size_t done = 0; done < n;) {
        size_t piece = n - done < STAGE_MAX ? n - done : STAGE_MAX, soff;
        tq_vk_frame *f;
        tq_status st = tq_vk_stage(c, piece, &f, &soff);
        if (st)
            return st;
        VkBufferCopy region = {off + done, soff, piece};
        /* the frame's staging stays as it is until the frame is recorded
         * again, which is after this wait */
        if ((st = copy_to_stage(c, f, b, &region, 1)))
            return st;
        memcpy((char *)dst + done, f->stage_ptr + soff, piece);
        done += piece;
    }
    return TQ_OK;
}

/* Staging for frame f of at least n bytes (f is fresh: nothing uses it). */
tq_status tq_vk_stage_grow(tq_vk_ctx *c, tq_vk_frame *f, size_t n)
{
    size_t cap = f->stage_cap ? f->stage_cap : (size_t)1 << 20;
    while (cap < n)
        cap *= 2;
    if (cap > STAGE_MAX && n <= STAGE_MAX)
        cap = STAGE_MAX;
    tq_vk_stage_free(c, f);
    tq_status st = buffer_make(c, cap, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                               VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                               VK_MEMORY_PROPERTY_HOST_CACHED_BIT, &f->stage, &f->stage_mem);
    if (st)
        return st;
    void *p;
    VkResult r = c->fn.vkMapMemory(c->dev, f->stage_mem, 0, VK_WHOLE_SIZE, 0, &p);
    if (r != VK_SUCCESS) {
        c->fn.vkDestroyBuffer(c->dev, f->stage, NULL);
        c->fn.vkFreeMemory(c->dev, f->stage_mem, NULL);
        f->stage = VK_NULL_HANDLE;
        return tq_vk_fail(r, "vkMapMemory");
    }
    f->stage_ptr = p;
    f->stage_cap = cap;
    return TQ_OK;
}

void tq_vk_stage_free(tq_vk_ctx *c, tq_vk_frame *f)
{
    if (!f->stage)
        return;
    c->fn.vkUnmapMemory(c->dev, f->stage_mem);
    c->fn.vkDestroyBuffer(c->dev, f->stage, NULL);
    c->fn.vkFreeMemory(c->dev, f->stage_mem, NULL);
    f->stage = VK_NULL_HANDLE;
    f->stage_cap = 0;
}

tq_status tq_vk_download_rows(tq_vk_ctx *c, const void *buf, size_t off, size_t row_bytes,
                              const int64_t *rows, size_t n, void *dst)
{
    const tq_vk_buf *b = buf;
    unsigned char *out = dst;
    if (b->shadow_valid || row_bytes > STAGE_MAX / 2) { /* no staging to save */
        for (size_t i = 0; i < n; i++) {
            tq_status st = tq_vk_download(c, buf, off + (size_t)rows[i] * row_bytes,
                                          out + i * row_bytes, row_bytes);
            if (st)
                return st;
        }
        return TQ_OK;
    }
    VkBufferCopy *reg = malloc((n ? n : 1) * sizeof *reg);
    if (!reg)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    tq_status st = TQ_OK;
    for (size_t i = 0; i < n && !st;) {
        /* as many rows as one staging load holds, in runs of neighbours */
        size_t fit = STAGE_MAX / row_bytes, take = n - i < fit ? n - i : fit, nreg = 0, soff;
        tq_vk_frame *f;
        if ((st = tq_vk_stage(c, take * row_bytes, &f, &soff)))
            break;
        for (size_t r = 0; r < take; r++) {
            size_t src = off + (size_t)rows[i + r] * row_bytes, at = soff + r * row_bytes;
            if (nreg && reg[nreg - 1].srcOffset + reg[nreg - 1].size == src)
                reg[nreg - 1].size += row_bytes;
            else
                reg[nreg++] = (VkBufferCopy){src, at, row_bytes};
        }
        if ((st = copy_to_stage(c, f, b, reg, (uint32_t)nreg)))
            break;
        memcpy(out + i * row_bytes, f->stage_ptr + soff, take * row_bytes);
        i += take;
    }
    free(reg);
    return st;
}
