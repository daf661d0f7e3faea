/* pipeline.c: one compute pipeline per shader variant, built on first use and
 * kept (with a pipeline cache) for the device's life; and the recording of a
 * dispatch: a descriptor set binding whole buffers (tensors' offsets travel
 * in push constants, so no offset alignment limit applies), a barrier, the
 * push constants and the dispatch. */
#include "vk.h"

static int shader_index(const char *name)
{
    for (size_t i = 0; i < tq_vk_spirv_count; i++)
        if (!strcmp(tq_vk_spirv_table[i].name, name))
            return (int)i;
    return -1;
}

static tq_status pipe_build(tq_vk_ctx *c, int si, int nargs, tq_vk_pipe *p)
{
    const tq_vk_spirv *s = &tq_vk_spirv_table[si];
    VkDescriptorSetLayoutBinding b[TQ_VK_MAX_BINDINGS];
    for (int i = 0; i < nargs; i++)
        b[i] = (VkDescriptorSetLayoutBinding){(uint32_t)i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                              VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = (uint32_t)nargs,
        .pBindings = b,
    };
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 128};
    VkPipelineLayoutCreateInfo pli = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->dsl,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &pr,
    };
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = s->words * 4,
        .pCode = s->code,
    };
    VkShaderModule mod = VK_NULL_HANDLE;
    VkResult r;
    if ((r = c->fn.vkCreateDescriptorSetLayout(c->dev, &li, NULL, &p->dsl)) != VK_SUCCESS ||
        (r = c->fn.vkCreatePipelineLayout(c->dev, &pli, NULL, &p->layout)) != VK_SUCCESS ||
        (r = c->fn.vkCreateShaderModule(c->dev, &mi, NULL, &mod)) != VK_SUCCESS)
        return tq_vk_fail(r, s->name);
    /* constant 0: the workgroup size of 1-D shaders (local_size_x_id = 0) */
    uint32_t wg = (uint32_t)c->wg;
    VkSpecializationMapEntry me = {0, 0, 4};
    VkSpecializationInfo spec = {1, &me, 4, &wg};
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
                  VK_SHADER_STAGE_COMPUTE_BIT, mod, "main", &spec},
        .layout = p->layout,
    };
    r = c->fn.vkCreateComputePipelines(c->dev, c->pcache, 1, &ci, NULL, &p->pipe);
    c->fn.vkDestroyShaderModule(c->dev, mod, NULL);
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, s->name);
    p->bindings = nargs;
    return TQ_OK;
}

void tq_vk_pipes_destroy(tq_vk_ctx *c)
{
    for (int i = 0; i < TQ_VK_MAX_SHADERS; i++) {
        tq_vk_pipe *p = &c->pipes[i];
        if (p->pipe)
            c->fn.vkDestroyPipeline(c->dev, p->pipe, NULL);
        if (p->layout)
            c->fn.vkDestroyPipelineLayout(c->dev, p->layout, NULL);
        if (p->dsl)
            c->fn.vkDestroyDescriptorSetLayout(c->dev, p->dsl, NULL);
        memset(p, 0, sizeof *p);
    }
}

tq_status tq_vk_dispatch(tq_vk_ctx *c, const char *name, const tq_vk_arg *args, int nargs,
                         const void *pc, uint32_t pc_size, uint32_t gx, uint32_t gy, uint32_t gz)
{
    int si = shader_index(name);
    if (si < 0 || si >= TQ_VK_MAX_SHADERS || nargs > TQ_VK_MAX_BINDINGS || pc_size > 128)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: no shader '%s' in this build", name);
    tq_vk_pipe *p = &c->pipes[si];
    tq_status st;
    if (!p->pipe && (st = pipe_build(c, si, nargs, p)))
        return st;
    if (p->bindings != nargs)
        return tq_fail(TQ_ERR_RUNTIME, "vulkan: shader '%s' called with %d buffers", name, nargs);
    for (int i = 0; i < nargs; i++)
        if (args[i].written)
            ((tq_vk_buf *)args[i].buf)->shadow_valid = 0;
    if (!gx || !gy || !gz)
        return TQ_OK; /* nothing to do */
    tq_vk_frame *f;
    if ((st = tq_vk_record(c, &f)))
        return st;
    if (f->sets >= TQ_VK_SETS_PER_FRAME) {
        if ((st = tq_vk_submit(c)) || (st = tq_vk_record(c, &f)))
            return st;
    }
    VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = f->dpool,
        .descriptorSetCount = 1,
        .pSetLayouts = &p->dsl,
    };
    VkDescriptorSet set;
    VkResult r = c->fn.vkAllocateDescriptorSets(c->dev, &ai, &set);
    if (r != VK_SUCCESS)
        return tq_vk_fail(r, "vkAllocateDescriptorSets");
    f->sets++;
    VkDescriptorBufferInfo bi[TQ_VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[TQ_VK_MAX_BINDINGS];
    for (int i = 0; i < nargs; i++) {
        bi[i] = (VkDescriptorBufferInfo){((const tq_vk_buf *)args[i].buf)->buf, 0, VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                      .dstSet = set,
                                      .dstBinding = (uint32_t)i,
                                      .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                      .pBufferInfo = &bi[i]};
    }
    c->fn.vkUpdateDescriptorSets(c->dev, (uint32_t)nargs, w, 0, NULL);
    tq_vk_barrier(c, f->cmd);
    c->fn.vkCmdBindPipeline(f->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
    c->fn.vkCmdBindDescriptorSets(f->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    if (pc_size) {
        unsigned char block[128] = {0};
        memcpy(block, pc, pc_size);
        c->fn.vkCmdPushConstants(f->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 128, block);
    }
    c->fn.vkCmdDispatch(f->cmd, gx, gy, gz);
    return tq_vk_frame_dispatched(c);
}

void tq_vk_groups(const tq_vk_ctx *c, uint64_t n, uint32_t per, uint32_t *gx, uint32_t *gy)
{
    uint64_t g = (n + per - 1) / per, lim = c->caps.max_groups[0] ? c->caps.max_groups[0] : 65535;
    if (g <= lim) {
        *gx = (uint32_t)g;
        *gy = 1;
    } else {
        *gx = (uint32_t)lim;
        *gy = (uint32_t)((g + lim - 1) / lim);
    }
}
