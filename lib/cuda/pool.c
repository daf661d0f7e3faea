/* pool.c: device memory kept from batch to batch. Blocks come in size
 * classes (powers of two from 256 bytes; sizes above 1 MiB rounded to whole
 * MiB, classed by their power of two), and a freed block waits in its class's
 * list for the next tensor that fits, so a tool's loop over batches
 * allocates from the driver only in its first batch. */
#include "gpu.h"

#define MIN_BLOCK 256u

static int size_class(size_t n)
{
    int c = 0;
    for (size_t s = MIN_BLOCK; s < n && c < GPU_POOL_CLASSES - 1; s <<= 1)
        c++;
    return c;
}

/* What a request of n bytes really takes: fewer distinct sizes, more reuse. */
static size_t block_size(size_t n)
{
    if (n <= (1u << 20)) {
        size_t s = MIN_BLOCK;
        while (s < n)
            s <<= 1;
        return s;
    }
    return (n + (1u << 20) - 1) & ~(size_t)((1u << 20) - 1);
}

tq_status TQ_GPU(pool_alloc)(tq_gpu_ctx *c, size_t n, gpu_block **out)
{
    size_t want = block_size(n ? n : 1);
    int cl = size_class(want);
    pthread_mutex_lock(&c->lock);
    for (gpu_block **b = &c->free_list[cl]; *b; b = &(*b)->next) {
        if ((*b)->size < want || (*b)->size > want + want / 4)
            continue;
        gpu_block *hit = *b;
        *b = hit->next;
        c->pooled -= hit->size;
        pthread_mutex_unlock(&c->lock);
        hit->next = NULL;
        *out = hit;
        return TQ_OK;
    }
    pthread_mutex_unlock(&c->lock);
    gpu_block *b = calloc(1, sizeof *b);
    if (!b)
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    gpu_res r = c->api->mem_alloc(&b->ptr, want);
    if (r) { /* memory held for reuse may be what is missing */
        TQ_GPU(pool_drain)(c);
        r = c->api->mem_alloc(&b->ptr, want);
    }
    if (r) {
        free(b);
        const char *call = GPU_CALL("cuMemAlloc", "hipMalloc");
        return r == 2 ? tq_fail(TQ_ERR_NOMEM, "%s:%d: %s: %s (out of device memory for %zu bytes)",
                                TQ_GPU_NAME, c->dev, call, c->api->error_name(r), n)
                      : TQ_GPU(fail)(c, r, call, "allocating device memory");
    }
    b->size = want;
    *out = b;
    return TQ_OK;
}

void TQ_GPU(pool_free)(tq_gpu_ctx *c, gpu_block *b)
{
    if (!b)
        return;
    int cl = size_class(b->size);
    pthread_mutex_lock(&c->lock);
    if (c->recording) { /* the graph being recorded uses it at every replay */
        b->next = c->graph_owned;
        c->graph_owned = b;
        pthread_mutex_unlock(&c->lock);
        return;
    }
    b->next = c->free_list[cl];
    c->free_list[cl] = b;
    c->pooled += b->size;
    pthread_mutex_unlock(&c->lock);
}

void TQ_GPU(pool_drain)(tq_gpu_ctx *c)
{
    pthread_mutex_lock(&c->lock);
    c->api->stream_sync(c->stream); /* kernels queued before a free may still use it */
    for (int i = 0; i < GPU_POOL_CLASSES; i++)
        while (c->free_list[i]) {
            gpu_block *b = c->free_list[i];
            c->free_list[i] = b->next;
            c->api->mem_free(b->ptr);
            free(b);
        }
    c->pooled = 0;
    pthread_mutex_unlock(&c->lock);
}
