/* submit.c: ops are recorded into the command buffer of the current frame and
 * submitted in batches, each with a fence; nothing waits per op. A wait comes
 * only with a download, tq_device_sync, or when a frame must be reused while
 * the device still runs it (TQ_VK_FRAMES batches in flight). The device's
 * timer writes its timestamps among the recorded commands.
 * One unit with memory.c, split for size (a frame's staging memory lives
 * there). */
#include "vk.h"

/* A frame is submitted once it holds this many dispatches, so that the
 * device starts while the host records more. */
enum { DISPATCHES_PER_SUBMIT = 256 };

tq_status tq_vk_frames_init(tq_vk_ctx *c)
{
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = c->cpool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, TQ_VK_SETS_PER_FRAME * TQ_VK_MAX_BINDINGS};
    VkDescriptorPoolCreateInfo pi = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = TQ_VK_SETS_PER_FRAME,
        .poolSizeCount = 1,
        .pPoolSizes = &ps,
    };
    for (int i = 0; i < TQ_VK_FRAMES; i++) {
        tq_vk_frame *f = &c->frames[i];
        VkResult r;
        if ((r = c->fn.vkAllocateCommandBuffers(c->dev, &ai, &f->cmd)) != VK_SUCCESS ||
            (r = c->fn.vkCreateFence(c->dev, &fi, NULL, &f->fence)) != VK_SUCCESS ||
            (r = c->fn.vkCreateDescriptorPool(c->dev, &pi, NULL, &f->dpool)) != VK_SUCCESS)
            return tq_vk_fail(r, "frame set-up");
    }
    return TQ_OK;
}

void tq_vk_frames_destroy(tq_vk_ctx *c)
{
    for (int i = 0; i < TQ_VK_FRAMES; i++) {
        tq_vk_frame *f = &c->frames[i];
        if (f->recording)
            c->fn.vkEndCommandBuffer(f->cmd);
        if (f->fence)
            c->fn.vkDestroyFence(c->dev, f->fence, NULL);
        if (f->dpool)
            c->fn.vkDestroyDescriptorPool(c->dev, f->dpool, NULL);
        tq_vk_stage_free(c, f);
        /* command buffers go with the pool */
    }
}

static tq_status frame_wait(tq_vk_ctx *c, tq_vk_frame *f)
{
    if (!f->submitted)
        return TQ_OK;
    VkResult r = c->fn.vkWaitForFences(c->dev, 1, &f->fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, "vkWaitForFences");
    c->fn.vkResetFences(c->dev, 1, &f->fence);
    f->submitted = 0;
    return TQ_OK;
}

tq_status tq_vk_record(tq_vk_ctx *c, tq_vk_frame **out)
{
    tq_vk_frame *f = &c->frames[c->cur];
    if (!f->recording) {
        tq_status st = frame_wait(c, f);
        if (st)
            return st;
        c->fn.vkResetCommandBuffer(f->cmd, 0);
        c->fn.vkResetDescriptorPool(c->dev, f->dpool, 0);
        f->sets = f->dispatches = 0;
        f->stage_used = 0;
        VkCommandBufferBeginInfo bi = {
            .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
        };
        VkResult r = c->fn.vkBeginCommandBuffer(f->cmd, &bi);
        if (r != VK_SUCCESS)
            return tq_vk_fail(r, "vkBeginCommandBuffer");
        f->recording = 1;
    }
    *out = f;
    return TQ_OK;
}

tq_status tq_vk_submit(tq_vk_ctx *c)
{
    tq_vk_frame *f = &c->frames[c->cur];
    if (!f->recording)
        return TQ_OK;
    f->recording = 0;
    VkResult r = c->fn.vkEndCommandBuffer(f->cmd);
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, "vkEndCommandBuffer");
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &f->cmd,
    };
    if ((r = c->fn.vkQueueSubmit(c->queue, 1, &si, f->fence)) != VK_SUCCESS)
        return tq_vk_fail(r, "vkQueueSubmit");
    f->submitted = 1;
    c->cur = (c->cur + 1) % TQ_VK_FRAMES;
    return TQ_OK;
}

tq_status tq_vk_sync(void *ctx)
{
    tq_vk_ctx *c = ctx;
    tq_status st = tq_vk_submit(c);
    for (int i = 0; i < TQ_VK_FRAMES && !st; i++)
        st = frame_wait(c, &c->frames[i]);
    return st;
}

tq_status tq_vk_stage(tq_vk_ctx *c, size_t n, tq_vk_frame **out, size_t *off)
{
    tq_vk_frame *f;
    tq_status st = tq_vk_record(c, &f);
    if (st)
        return st;
    if (f->stage_used + n > f->stage_cap && f->stage_used) {
        if ((st = tq_vk_submit(c)) || (st = tq_vk_record(c, &f)))
            return st;
    }
    if (n > f->stage_cap && (st = tq_vk_stage_grow(c, f, n)))
        return st;
    *off = f->stage_used;
    f->stage_used += (n + 15) & ~(size_t)15;
    *out = f;
    return TQ_OK;
}

/* Every command waits for all earlier ones to finish writing: simple, and
 * cheap next to the dispatches it separates. */
void tq_vk_barrier(tq_vk_ctx *c, VkCommandBuffer cmd)
{
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    c->fn.vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
}

tq_status tq_vk_frame_dispatched(tq_vk_ctx *c)
{
    tq_vk_frame *f = &c->frames[c->cur];
    if (++f->dispatches >= DISPATCHES_PER_SUBMIT)
        return tq_vk_submit(c);
    return TQ_OK;
}

/* The device's timer. Both timestamps go into the frame being recorded,
 * among the ops' own commands, not into submissions of their own: frames
 * reach the one queue in the order they are recorded, so the pair brackets
 * exactly the work recorded between the two calls however many frames it
 * fills, and no extra submission (whose cost a tiny op would carry) lies
 * between them. Each is written at the bottom of the pipe, once every
 * earlier command has finished: the first leaves out work queued before the
 * timer started, the last takes in all the work after it. */
static tq_status timer_mark(tq_vk_ctx *c, uint32_t query)
{
    tq_vk_frame *f;
    tq_status st = tq_vk_record(c, &f);
    if (st)
        return st;
    if (query == 0) /* a query is written once between resets */
        c->fn.vkCmdResetQueryPool(f->cmd, c->timer, 0, 2);
    c->fn.vkCmdWriteTimestamp(f->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->timer, query);
    return TQ_OK;
}

tq_status tq_vk_timer_begin(void *ctx)
{
    tq_vk_ctx *c = ctx;
    if (!c->timestamp_bits || !(c->caps.timestamp_period > 0))
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: the compute queue keeps no timestamps");
    if (!c->timer) {
        VkQueryPoolCreateInfo qi = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = 2,
        };
        VkResult r = c->fn.vkCreateQueryPool(c->dev, &qi, NULL, &c->timer);
        if (r != VK_SUCCESS) {
            c->timer = VK_NULL_HANDLE;
            return tq_vk_fail(r, "vkCreateQueryPool");
        }
    }
    return timer_mark(c, 0);
}

tq_status tq_vk_timer_end(void *ctx, double *seconds)
{
    tq_vk_ctx *c = ctx;
    uint64_t ts[2];
    *seconds = 0;
    tq_status st = timer_mark(c, 1);
    if (!st)
        st = tq_vk_sync(c);
    if (st)
        return st;
    VkResult r = c->fn.vkGetQueryPoolResults(c->dev, c->timer, 0, 2, sizeof ts, ts, sizeof ts[0],
                                             VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, "vkGetQueryPoolResults");
    /* only the valid bits tick: their difference survives a wrap */
    uint64_t mask = c->timestamp_bits >= 64 ? ~(uint64_t)0
                                            : ((uint64_t)1 << c->timestamp_bits) - 1;
    *seconds = (double)((ts[1] - ts[0]) & mask) * (double)c->caps.timestamp_period * 1e-9;
    return TQ_OK;
}
