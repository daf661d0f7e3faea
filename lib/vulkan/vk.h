/* vk.h: what the files of the Vulkan backend share. libvulkan is never linked:
 * every entry point comes through vkGetInstanceProcAddr / vkGetDeviceProcAddr
 * into the tables below, after dlopen of the loader. */
#ifndef TQ_VK_H
#define TQ_VK_H

#define VK_NO_PROTOTYPES 1
#include <vulkan/vulkan.h>

#include "../backend.h"
#include "../internal.h"

/* ---- entry points (loader.c fills them) ---- */

#define TQ_VK_INSTANCE_FNS(X)                                                      \
    X(vkDestroyInstance)                                                           \
    X(vkEnumeratePhysicalDevices)                                                  \
    X(vkGetPhysicalDeviceProperties)                                               \
    X(vkGetPhysicalDeviceProperties2)                                              \
    X(vkGetPhysicalDeviceFeatures2)                                                \
    X(vkGetPhysicalDeviceMemoryProperties)                                         \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                    \
    X(vkCreateDevice)                                                              \
    X(vkGetDeviceProcAddr)

#define TQ_VK_DEVICE_FNS(X)                                                        \
    X(vkDestroyDevice)                                                             \
    X(vkGetDeviceQueue)                                                            \
    X(vkCreateBuffer)                                                              \
    X(vkDestroyBuffer)                                                             \
    X(vkGetBufferMemoryRequirements)                                               \
    X(vkAllocateMemory)                                                            \
    X(vkFreeMemory)                                                                \
    X(vkBindBufferMemory)                                                          \
    X(vkMapMemory)                                                                 \
    X(vkUnmapMemory)                                                               \
    X(vkCreateShaderModule)                                                        \
    X(vkDestroyShaderModule)                                                       \
    X(vkCreateDescriptorSetLayout)                                                 \
    X(vkDestroyDescriptorSetLayout)                                                \
    X(vkCreatePipelineLayout)                                                      \
    X(vkDestroyPipelineLayout)                                                     \
    X(vkCreateComputePipelines)                                                    \
    X(vkDestroyPipeline)                                                           \
    X(vkCreatePipelineCache)                                                       \
    X(vkDestroyPipelineCache)                                                      \
    X(vkCreateDescriptorPool)                                                      \
    X(vkDestroyDescriptorPool)                                                     \
    X(vkResetDescriptorPool)                                                       \
    X(vkAllocateDescriptorSets)                                                    \
    X(vkUpdateDescriptorSets)                                                      \
    X(vkCreateCommandPool)                                                         \
    X(vkDestroyCommandPool)                                                        \
    X(vkAllocateCommandBuffers)                                                    \
    X(vkBeginCommandBuffer)                                                        \
    X(vkEndCommandBuffer)                                                          \
    X(vkResetCommandBuffer)                                                        \
    X(vkCmdBindPipeline)                                                           \
    X(vkCmdBindDescriptorSets)                                                     \
    X(vkCmdPushConstants)                                                          \
    X(vkCmdDispatch)                                                               \
    X(vkCmdPipelineBarrier)                                                        \
    X(vkCmdCopyBuffer)                                                             \
    X(vkCreateQueryPool)                                                           \
    X(vkDestroyQueryPool)                                                          \
    X(vkCmdResetQueryPool)                                                         \
    X(vkCmdWriteTimestamp)                                                         \
    X(vkGetQueryPoolResults)                                                       \
    X(vkQueueSubmit)                                                               \
    X(vkCreateFence)                                                               \
    X(vkDestroyFence)                                                              \
    X(vkWaitForFences)                                                             \
    X(vkResetFences)                                                               \
    X(vkDeviceWaitIdle)

#define TQ_VK_DECL(f) PFN_##f f;
typedef struct tq_vk_ifn {
    TQ_VK_INSTANCE_FNS(TQ_VK_DECL)
} tq_vk_ifn;
typedef struct tq_vk_dfn {
    TQ_VK_DEVICE_FNS(TQ_VK_DECL)
} tq_vk_dfn;
#undef TQ_VK_DECL

/* An instance with its entry points. */
typedef struct tq_vk_instance {
    VkInstance inst;
    tq_vk_ifn fn;
} tq_vk_instance;

/* loader.c: dlopen the loader (once), hand out the process's one instance
 * (made on first use, kept to exit; destroy only lets go of the copy); on
 * failure the message says which of: no loader, no driver, other. */
tq_status tq_vk_instance_create(tq_vk_instance *vi);
void tq_vk_instance_destroy(tq_vk_instance *vi);
const char *tq_vk_result_name(VkResult r);
/* gpu_nodes.c: whether a GPU device node exists (auto's cheap first test) */
int tq_vk_may_have_gpu(void);
/* A failed Vulkan call as a runtime error naming the call. */
tq_status tq_vk_fail(VkResult r, const char *what);

/* ---- capabilities (probe.c) ---- */

typedef struct tq_vk_caps {
    uint32_t api_version;
    VkPhysicalDeviceType type;
    uint32_t subgroup_size;    /* 0 when unknown */
    int subgroup_arith;        /* subgroupAdd/Max in compute shaders */
    int fp16_storage;          /* 16-bit storage buffer access */
    int fp16_arith;            /* shaderFloat16 */
    int float64;               /* shaderFloat64 */
    uint32_t shared_bytes;     /* maxComputeSharedMemorySize */
    uint32_t max_invocations;  /* maxComputeWorkGroupInvocations */
    uint32_t max_groups[3];    /* maxComputeWorkGroupCount */
    uint64_t max_range;        /* maxStorageBufferRange */
    uint32_t max_buffers;      /* maxPerStageDescriptorStorageBuffers */
    float timestamp_period;    /* nanoseconds a timestamp tick */
    char driver[96];           /* "llvmpipe", "NVIDIA 550.54" ... */
} tq_vk_caps;

/* Fills caps for a physical device (needs Vulkan 1.1 for the properties2
 * chain; older devices report plain capabilities). */
void tq_vk_caps_probe(const tq_vk_instance *vi, VkPhysicalDevice pd, tq_vk_caps *caps);

/* The process-wide device list, in our order (discrete GPUs first). */
tq_status tq_vk_probe_count(int *count);
tq_status tq_vk_probe_info(int index, tq_device_info *info);
uint32_t tq_vk_probe_phys(int index);

/* ---- buffers (memory.c) ---- */

typedef struct tq_vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    size_t size;         /* bytes the tensor asked for */
    size_t cap;          /* bytes of the pool class it came from */
    /* A host copy of the buffer while its contents are known on the host
     * (small buffers filled by upload and not written since by a shader):
     * gather reads its indices from it instead of waiting for the device. */
    unsigned char *shadow;
    int shadow_valid;
    struct tq_vk_buf *next; /* in the pool's free list */
} tq_vk_buf;

/* A batch of recorded work: one command buffer, its descriptor sets and its
 * staging memory, submitted with a fence. Frames rotate so that recording
 * continues while earlier frames run. */
enum { TQ_VK_FRAMES = 3, TQ_VK_SETS_PER_FRAME = 512 };
typedef struct tq_vk_frame {
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool dpool;
    int recording, submitted;
    uint32_t sets;      /* descriptor sets taken from dpool */
    uint32_t dispatches;
    VkBuffer stage;     /* host-visible staging for uploads and downloads */
    VkDeviceMemory stage_mem;
    unsigned char *stage_ptr;
    size_t stage_cap, stage_used; /* staging stays readable until the frame is reused */
} tq_vk_frame;

/* One compiled shader variant: built on first use, kept for the device's life. */
typedef struct tq_vk_pipe {
    VkPipeline pipe;
    VkPipelineLayout layout;
    VkDescriptorSetLayout dsl;
    int bindings;
} tq_vk_pipe;

enum { TQ_VK_MAX_SHADERS = 64, TQ_VK_POOL_CLASSES = 160 };
/* the most buffers a shader binds (the attention with a score bias: 9; the
 * rest 8 at most, which every device tq has met allows) */
enum { TQ_VK_MAX_BINDINGS = 9 };

typedef struct tq_vk_ctx {
    tq_vk_instance vi;
    VkPhysicalDevice pd;
    VkDevice dev;
    tq_vk_dfn fn;
    VkQueue queue;
    uint32_t qfamily;
    uint32_t timestamp_bits;       /* the queue's valid timestamp bits, 0: none */
    VkQueryPool timer;             /* tq_device_timer's two timestamps, made on first use */
    VkCommandPool cpool;
    VkPipelineCache pcache;
    tq_vk_caps caps;
    uint32_t mem_device, mem_host; /* memory type indices */
    tq_vk_frame frames[TQ_VK_FRAMES];
    int cur;                       /* the frame being recorded */
    tq_vk_pipe pipes[TQ_VK_MAX_SHADERS];
    tq_vk_buf *free_list[TQ_VK_POOL_CLASSES];
    size_t pooled_bytes;           /* bytes held in free lists */
    tq_device *host;               /* the CPU device, for host fallbacks */
    int wg;                        /* workgroup size of 1-D shaders */
} tq_vk_ctx;

/* memory.c */
tq_status tq_vk_alloc(void *ctx, size_t nbytes, void **buf);
void tq_vk_free(void *ctx, void *buf);
void tq_vk_pool_release(tq_vk_ctx *c);
tq_status tq_vk_upload(void *ctx, void *buf, size_t off, const void *src, size_t n);
tq_status tq_vk_download(void *ctx, const void *buf, size_t off, void *dst, size_t n);
/* Downloads rows rows[0..n) (ascending, no repeats) of row_bytes each from
 * the buffer at byte off, packed into dst: one copy command per run of
 * neighbours and one wait per staging load, for the scattered rows that
 * simtopk rescores. */
tq_status tq_vk_download_rows(tq_vk_ctx *c, const void *buf, size_t off, size_t row_bytes,
                              const int64_t *rows, size_t n, void *dst);
tq_status tq_vk_find_memory(tq_vk_ctx *c, uint32_t bits, VkMemoryPropertyFlags want,
                            VkMemoryPropertyFlags avoid, uint32_t *type);

tq_status tq_vk_stage_grow(tq_vk_ctx *c, tq_vk_frame *f, size_t n);
void tq_vk_stage_free(tq_vk_ctx *c, tq_vk_frame *f);

/* submit.c: recording, submission and waiting */
tq_status tq_vk_frames_init(tq_vk_ctx *c);
void tq_vk_frames_destroy(tq_vk_ctx *c);
/* The frame being recorded, begun if need be. */
tq_status tq_vk_record(tq_vk_ctx *c, tq_vk_frame **f);
/* Room for n bytes of staging in the current frame (submitting it first when
 * full); *off is where they go. */
tq_status tq_vk_stage(tq_vk_ctx *c, size_t n, tq_vk_frame **f, size_t *off);
/* Submits the frame being recorded (no wait) and moves to the next one. */
tq_status tq_vk_submit(tq_vk_ctx *c);
/* Submits and waits for everything; runs the pending downloads. */
tq_status tq_vk_sync(void *ctx);
/* Counts a recorded dispatch; submits the frame when it is full. */
tq_status tq_vk_frame_dispatched(tq_vk_ctx *c);
/* A full memory barrier between recorded commands. */
void tq_vk_barrier(tq_vk_ctx *c, VkCommandBuffer cmd);
/* The device's timer (tq_device_timer_*): timestamps around recorded work. */
tq_status tq_vk_timer_begin(void *ctx);
tq_status tq_vk_timer_end(void *ctx, double *seconds);

/* pipeline.c: shader variants and dispatch */
typedef struct tq_vk_arg {
    const void *buf;   /* tq_vk_buf */
    int written;       /* the shader writes it (drops its host shadow) */
} tq_vk_arg;
/* Records one dispatch of shader `name` over groups, with buffers bound in
 * order and push constants pc (at most 128 bytes). */
tq_status tq_vk_dispatch(tq_vk_ctx *c, const char *name, const tq_vk_arg *args, int nargs,
                         const void *pc, uint32_t pc_size, uint32_t gx, uint32_t gy, uint32_t gz);
void tq_vk_pipes_destroy(tq_vk_ctx *c);
/* shaders.c (generated at build time from kernels/vulkan/) */
typedef struct tq_vk_spirv {
    const char *name;
    const uint32_t *code;
    size_t words;
} tq_vk_spirv;
extern const tq_vk_spirv tq_vk_spirv_table[];
extern const size_t tq_vk_spirv_count;

/* The op entries (ops_*.c). */
tq_status tq_vk_matmul(void *ctx, const tq_tensor *a, int ta, const tq_tensor *b, int tb,
                       float alpha, float beta, tq_tensor *c);
tq_status tq_vk_rownorm(void *ctx, const tq_tensor *x, tq_tensor *norms);
tq_status tq_vk_normalize(void *ctx, const tq_tensor *x, float eps, tq_tensor *y);
tq_status tq_vk_topk(void *ctx, const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx);
tq_status tq_vk_softmax(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status tq_vk_layernorm(void *ctx, const tq_tensor *x, const tq_tensor *gamma,
                          const tq_tensor *beta, float eps, tq_tensor *y);
tq_status tq_vk_gelu(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status tq_vk_activate(void *ctx, const tq_tensor *x, tq_activation act, tq_tensor *y);
tq_status tq_vk_add(void *ctx, const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
tq_status tq_vk_scale(void *ctx, const tq_tensor *x, float alpha, tq_tensor *y);
/* ops_peak.c: tq-bench's FMA peak probe (not an op) */
tq_status tq_vk_fma_peak(void *ctx, tq_tensor *out, int64_t iters, double *flops);
tq_status tq_vk_gather(void *ctx, const tq_tensor *x, const tq_tensor *idx, tq_tensor *y);
tq_status tq_vk_convert(void *ctx, const tq_tensor *x, tq_tensor *y);
tq_status tq_vk_attention(void *ctx, const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                          const tq_attention_args *args, tq_tensor *out);
tq_status tq_vk_simtopk(void *ctx, const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                        int64_t idx_base, tq_tensor *vals, tq_tensor *idx);
tq_status tq_vk_rowprod(void *ctx, void *state, const tq_tensor *db, const tq_tensor *q,
                        float alpha, tq_tensor *out);

/* Helpers for the op files. */
static inline int64_t tq_vk_cols(const tq_tensor *t) { return t->rank ? t->dims[t->rank - 1] : 1; }
static inline int64_t tq_vk_rows(const tq_tensor *t)
{
    int64_t d = tq_vk_cols(t);
    return d ? tq_tensor_numel(t) / d : 0;
}
/* Offset of a tensor in 32-bit words (views start at multiples of 16 bytes). */
static inline uint32_t tq_vk_word(const tq_tensor *t) { return (uint32_t)(t->offset / 4); }
/* Groups of `per` items covering n, spread over x and y when x would exceed
 * the device's limit; the shader rebuilds the flat group id. */
void tq_vk_groups(const tq_vk_ctx *c, uint64_t n, uint32_t per, uint32_t *gx, uint32_t *gy);

#endif
