/* mem.c: device memory is host memory (so ASan sees kernels' out-of-bounds
 * accesses), allocated at 256-byte alignment as cuMemAlloc guarantees,
 * tracked so that copies and memsets outside an allocation fail as they do on
 * a GPU, and limited to TQ_STANDIN_MEMORY per device. Pinned host memory is
 * plain host memory, tracked too: asynchronous copies treat pageable and
 * pinned memory differently (stream.c). */

#include "standin.h"

#include <stdlib.h>
#include <string.h>

struct block { uintptr_t base; size_t size; int dev; };
struct table { struct block *b; size_t n, cap; };

static struct table dev_mem, host_mem;
static size_t used[16];

/* index of the first block with base > p */
static size_t upper(const struct table *t, uintptr_t p)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t->b[mid].base <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int insert(struct table *t, uintptr_t base, size_t size, int dev)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        struct block *b = realloc(t->b, cap * sizeof *b);
        if (!b)
            return -1;
        t->b = b;
        t->cap = cap;
    }
    size_t i = upper(t, base);
    memmove(&t->b[i + 1], &t->b[i], (t->n - i) * sizeof *t->b);
    t->b[i] = (struct block){base, size, dev};
    t->n++;
    return 0;
}

/* the block containing [p, p+n), or NULL */
static struct block *find(struct table *t, uintptr_t p, size_t n)
{
    size_t i = upper(t, p);
    if (!i)
        return NULL;
    struct block *b = &t->b[i - 1];
    /* a zero-size allocation still owns its address */
    if (p - b->base > b->size || n > b->size - (p - b->base))
        return NULL;
    return b;
}

static void erase(struct table *t, struct block *b)
{
    size_t i = (size_t)(b - t->b);
    memmove(&t->b[i], &t->b[i + 1], (t->n - i - 1) * sizeof *t->b);
    t->n--;
}

CUresult tq_sd_mem_alloc(int dev, size_t bytes, void **p)
{
    const struct tq_sd_config *c = tq_sd_cfg();
    void *m = NULL;
    if (bytes > c->memory - used[dev]) {
        tq_sd_log("out of device memory: %zu bytes asked, %zu of %zu in use "
                  "(TQ_STANDIN_MEMORY)", bytes, used[dev], c->memory);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* the exact size, not rounded up: ASan's redzone starts at the last byte */
    if (posix_memalign(&m, 256, bytes ? bytes : 1))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (insert(&dev_mem, (uintptr_t)m, bytes, dev)) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    used[dev] += bytes;
    *p = m;
    tq_sd_count(TQ_SD_WORK_ALLOCS, 1);
    return CUDA_SUCCESS;
}

CUresult tq_sd_mem_free(void *p)
{
    struct block *b = find(&dev_mem, (uintptr_t)p, 0);
    if (!b || b->base != (uintptr_t)p) {
        tq_sd_log("free of %p: not the start of a device allocation", p);
        return CUDA_ERROR_INVALID_VALUE;
    }
    used[b->dev] -= b->size;
    erase(&dev_mem, b);
    free(p);
    return CUDA_SUCCESS;
}

CUresult tq_sd_mem_check(const void *p, size_t n, const char *what)
{
    if (find(&dev_mem, (uintptr_t)p, n))
        return CUDA_SUCCESS;
    tq_sd_log("%s: [%p, +%zu) is not inside one device allocation", what, p, n);
    return CUDA_ERROR_INVALID_VALUE;
}

size_t tq_sd_mem_used(int dev) { return used[dev]; }

CUresult tq_sd_host_alloc(size_t bytes, void **p)
{
    void *m = NULL;
    if (posix_memalign(&m, 4096, bytes ? bytes : 1))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (insert(&host_mem, (uintptr_t)m, bytes, 0)) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *p = m;
    tq_sd_count(TQ_SD_WORK_PINNED, 1);
    return CUDA_SUCCESS;
}

CUresult tq_sd_host_free(void *p)
{
    struct block *b = find(&host_mem, (uintptr_t)p, 0);
    if (!b || b->base != (uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    erase(&host_mem, b);
    free(p);
    return CUDA_SUCCESS;
}

int tq_sd_host_pinned(const void *p, size_t n) { return find(&host_mem, (uintptr_t)p, n) != NULL; }
