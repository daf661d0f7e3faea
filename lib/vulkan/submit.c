/* submit.c: ops are recorded into the command buffer of the current frame and
 * submitted in batches, each with a fence; nothing waits per op. A wait comes
 * only with a download, tq_device_sync, or when a frame must be reused while
 * the device still runs it (TQ_VK_FRAMES batches in flight). */
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
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, TQ_VK_SETS_PER_FRAME * 8};
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
