/* stream.c: lazy streams, events and graphs. Work queued on a stream runs only
 * at a synchronizing call (stream, event or context synchronize, a synchronous
 * copy, a free), in order, so a host that reads a download buffer before
 * synchronizing sees stale data, as it may on a GPU. A stream under capture
 * records its work into a graph instead (arguments copied then, host buffers
 * read at replay), and launching the instantiated graph queues that work
 * again. */

#include "standin.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int push_op(struct tq_sd_op **ops, size_t *n, size_t *cap, const struct tq_sd_op *op)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        struct tq_sd_op *a = realloc(*ops, c * sizeof *a);
        if (!a)
            return -1;
        *ops = a;
        *cap = c;
    }
    (*ops)[(*n)++] = *op;
    return 0;
}

void tq_sd_op_free(struct tq_sd_op *op)
{
    switch (op->kind) {
    case TQ_SD_OP_LAUNCH:
        free(op->u.launch->args);
        free(op->u.launch);
        break;
    case TQ_SD_OP_COPY: free(op->u.copy.staged); break;
    case TQ_SD_OP_GEMM: free(op->u.gemm); break;
    default: break;
    }
}

/* A deep copy, for instantiating and replaying graphs. */
static int op_clone(const struct tq_sd_op *src, struct tq_sd_op *dst)
{
    *dst = *src;
    if (src->kind == TQ_SD_OP_LAUNCH) {
        const struct tq_sd_launch *l = src->u.launch;
        size_t n = l->k->args_size ? l->k->args_size : 1;
        struct tq_sd_launch *c = malloc(sizeof *c);
        unsigned char *args = malloc(n);
        if (!c || !args) {
            free(c);
            free(args);
            return -1;
        }
        *c = *l;
        memcpy(args, l->args, n);
        c->args = args;
        dst->u.launch = c;
    } else if (src->kind == TQ_SD_OP_GEMM) {
        struct tq_sd_gemm *g = malloc(sizeof *g);
        if (!g)
            return -1;
        *g = *src->u.gemm;
        dst->u.gemm = g;
    } else if (src->kind == TQ_SD_OP_COPY && src->u.copy.staged) {
        void *st = malloc(src->u.copy.n);
        if (!st)
            return -1;
        memcpy(st, src->u.copy.staged, src->u.copy.n);
        dst->u.copy.staged = st;
    }
    return 0;
}

static CUresult run_op(const struct tq_sd_op *op)
{
    switch (op->kind) {
    case TQ_SD_OP_LAUNCH: return tq_sd_run(op->u.launch);
    case TQ_SD_OP_COPY:
        memmove(op->u.copy.dst, op->u.copy.staged ? op->u.copy.staged : op->u.copy.src,
                op->u.copy.n);
        return CUDA_SUCCESS;
    case TQ_SD_OP_MEMSET:
        if (op->u.set.width == 1) {
            memset(op->u.set.dst, (int)op->u.set.value, op->u.set.n);
        } else {
            uint32_t *d = op->u.set.dst;
            for (size_t i = 0; i < op->u.set.n; i++)
                d[i] = op->u.set.value;
        }
        return CUDA_SUCCESS;
    case TQ_SD_OP_EVENT:
        op->u.event->t = now();
        op->u.event->pending = 0;
        return CUDA_SUCCESS;
    case TQ_SD_OP_GEMM: tq_sd_gemm_run(op->u.gemm); return CUDA_SUCCESS;
    }
    return CUDA_ERROR_UNKNOWN;
}

struct tq_sd_stream *tq_sd_stream_new(struct tq_sd_ctx *ctx)
{
    struct tq_sd_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (ctx->nstreams == ctx->cap_streams) {
        int cap = ctx->cap_streams ? 2 * ctx->cap_streams : 8;
        struct tq_sd_stream **a = realloc(ctx->streams, (size_t)cap * sizeof *a);
        if (!a) {
            free(s);
            return NULL;
        }
        ctx->streams = a;
        ctx->cap_streams = cap;
    }
    ctx->streams[ctx->nstreams++] = s;
    s->ctx = ctx;
    if (!ctx->null_stream)
        ctx->null_stream = s;
    return s;
}

CUresult tq_sd_stream_destroy(struct tq_sd_stream *s)
{
    if (!s || s == s->ctx->null_stream)
        return CUDA_ERROR_INVALID_HANDLE;
    /* a capture still open is abandoned (its graph was never made); work
     * queued before it still completes, as on a GPU, or after a sticky error
     * is dropped, the stream going all the same and the call saying the error */
    tq_sd_graph_free(s->capture);
    s->capture = NULL;
    CUresult r = tq_sd_stream_sync(s);
    struct tq_sd_ctx *c = s->ctx;
    for (int i = 0; i < c->nstreams; i++)
        if (c->streams[i] == s) {
            memmove(&c->streams[i], &c->streams[i + 1],
                    (size_t)(c->nstreams - i - 1) * sizeof *c->streams);
            c->nstreams--;
            break;
        }
    free(s->ops);
    free(s);
    return r;
}

struct tq_sd_stream *tq_sd_stream_resolve(int api, struct tq_sd_stream *s)
{
    if (!s || s == TQ_CU_STREAM_LEGACY || s == TQ_CU_STREAM_PER_THREAD) {
        struct tq_sd_ctx *c = tq_sd_current(api);
        return c ? c->null_stream : NULL;
    }
    return s;
}

CUresult tq_sd_enqueue(struct tq_sd_stream *s, struct tq_sd_op *op)
{
    int bad;
    /* the legacy null stream waits for every other stream: for one under
     * capture, that is an implicit dependency a GPU refuses */
    CUresult r = s == s->ctx->null_stream
                     ? tq_sd_capture_guard(s->ctx, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                                           "work on the null stream")
                     : CUDA_SUCCESS;
    if (r) {
        tq_sd_op_free(op);
        return r;
    }
    if (s->capture) {
        bad = push_op(&s->capture->ops, &s->capture->n, &s->capture->cap, op);
    } else {
        if (op->kind == TQ_SD_OP_EVENT) {
            op->u.event->stream = s;
            op->u.event->pending = 1;
            op->u.event->recorded = 1;
        }
        bad = push_op(&s->ops, &s->n, &s->cap, op);
        if (!bad)
            tq_sd_count_op(&s->ops[s->n - 1]);
    }
    if (bad) {
        tq_sd_op_free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult tq_sd_stream_sync(struct tq_sd_stream *s)
{
    CUresult r = CUDA_SUCCESS;
    if (s->capture) {
        s->capture_broken = 1;
        tq_sd_log("a synchronizing call on a stream under capture: the capture is invalidated");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    /* After a sticky error nothing more runs: the queue is dropped and the
     * error returned, as every call of a context a kernel broke returns it. */
    r = tq_sd_poisoned();
    /* the queue may not grow while it runs: kernels do not call the API */
    for (size_t i = 0; i < s->n; i++) {
        if (r == CUDA_SUCCESS)
            r = run_op(&s->ops[i]);
        tq_sd_op_free(&s->ops[i]); /* after a failure, the rest is dropped */
    }
    s->n = 0;
    tq_sd_poison(r); /* a kernel that failed as it ran (719) breaks the context */
    return r;
}

CUresult tq_sd_capture_guard(struct tq_sd_ctx *ctx, CUresult code, const char *what)
{
    for (int i = 0; i < ctx->nstreams; i++) {
        struct tq_sd_stream *s = ctx->streams[i];
        if (s->capture && s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
            s->capture_broken = 1;
            tq_sd_log("%s while a stream is under capture: the capture is invalidated", what);
            return code;
        }
    }
    return CUDA_SUCCESS;
}

CUresult tq_sd_device_sync(struct tq_sd_ctx *ctx)
{
    /* the Programming Guide: synchronizing a context or device while one of
     * its streams captures is invalid whatever the capture's mode */
    for (int i = 0; i < ctx->nstreams; i++)
        if (ctx->streams[i]->capture) {
            ctx->streams[i]->capture_broken = 1;
            tq_sd_log("a context or device synchronize while a stream is under capture: the "
                      "capture is invalidated");
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    return tq_sd_ctx_sync(ctx);
}

CUresult tq_sd_ctx_sync(struct tq_sd_ctx *ctx)
{
    CUresult r = tq_sd_capture_guard(ctx, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                                     "a synchronizing call");
    if (r)
        return r;
    for (int i = 0; i < ctx->nstreams; i++) {
        if (ctx->streams[i]->capture)
            continue;
        CUresult e = tq_sd_stream_sync(ctx->streams[i]);
        if (r == CUDA_SUCCESS)
            r = e;
    }
    return r;
}

CUresult tq_sd_copy(int api, void *dst, const void *src, size_t n, struct tq_sd_stream *s,
                    int async, int dir)
{
    (void)api;
    CUresult r = CUDA_SUCCESS;
    if (!n)
        return CUDA_SUCCESS;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    if ((dir & 1) && (r = tq_sd_mem_check(dst, n, "copy destination")))
        return r;
    if ((dir & 2) && (r = tq_sd_mem_check(src, n, "copy source")))
        return r;
    if (!async || (dir == 2 && !tq_sd_host_pinned(dst, n) && !s->capture)) {
        /* synchronous; so is a download to pageable memory on a GPU */
        tq_sd_count(TQ_SD_WORK_SYNCS, 1);
        r = async ? tq_sd_stream_sync(s) : tq_sd_ctx_sync(s->ctx);
        if (r == CUDA_SUCCESS) {
            memmove(dst, src, n);
            struct tq_sd_op done = {.kind = TQ_SD_OP_COPY, .u.copy = {.n = n, .dir = dir}};
            tq_sd_count_op(&done);
        }
        return r;
    }
    struct tq_sd_op op = {.kind = TQ_SD_OP_COPY, .u.copy = {dst, src, n, NULL, dir}};
    if (dir == 1 && !tq_sd_host_pinned(src, n) && !s->capture) {
        /* an upload from pageable memory is staged before the call returns */
        if (!(op.u.copy.staged = malloc(n)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(op.u.copy.staged, src, n);
    }
    return tq_sd_enqueue(s, &op);
}

CUresult tq_sd_memset(int api, void *dst, uint32_t value, size_t n, int width,
                      struct tq_sd_stream *s)
{
    (void)api;
    if (!n)
        return CUDA_SUCCESS;
    if (width == 4 && ((uintptr_t)dst & 3)) {
        tq_sd_log("32-bit memset at %p: not 4-byte aligned", dst);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (n > SIZE_MAX / (size_t)width)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = tq_sd_mem_check(dst, n * (size_t)width, "memset");
    if (r)
        return r;
    struct tq_sd_op op = {.kind = TQ_SD_OP_MEMSET, .u.set = {dst, value, n, width}};
    return tq_sd_enqueue(s, &op);
}

CUresult tq_sd_event_record(struct tq_sd_event *ev, struct tq_sd_stream *s)
{
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    struct tq_sd_op op = {.kind = TQ_SD_OP_EVENT, .u.event = ev};
    return tq_sd_enqueue(s, &op);
}

CUresult tq_sd_event_sync(struct tq_sd_event *ev)
{
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    return ev->pending ? tq_sd_stream_sync(ev->stream) : CUDA_SUCCESS;
}

CUresult tq_sd_event_elapsed(float *ms, struct tq_sd_event *a, struct tq_sd_event *b)
{
    if (!ms || !a || !b)
        return CUDA_ERROR_INVALID_VALUE;
    /* as the driver: an event made without timing has no time to give */
    if (!a->recorded || !b->recorded || a->no_timing || b->no_timing)
        return CUDA_ERROR_INVALID_HANDLE;
    if (a->pending || b->pending)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)((b->t - a->t) * 1e3);
    return CUDA_SUCCESS;
}

CUresult tq_sd_capture_begin(struct tq_sd_stream *s, int mode)
{
    if (s == s->ctx->null_stream) {
        tq_sd_log("stream capture on the null stream is not allowed");
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (s->capture)
        return CUDA_ERROR_INVALID_VALUE;
    if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(s->capture = calloc(1, sizeof *s->capture)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->capture_mode = mode;
    s->capture_broken = 0;
    return CUDA_SUCCESS;
}

CUresult tq_sd_capture_end(struct tq_sd_stream *s, struct tq_sd_graph **g)
{
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s->capture)
        return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    struct tq_sd_graph *c = s->capture;
    s->capture = NULL;
    if (s->capture_broken) {
        tq_sd_graph_free(c);
        *g = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *g = c;
    return CUDA_SUCCESS;
}

CUresult tq_sd_graph_instantiate(struct tq_sd_graph *g, struct tq_sd_graph **exec)
{
    if (!g || !exec)
        return CUDA_ERROR_INVALID_VALUE;
    struct tq_sd_graph *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < g->n; i++) {
        struct tq_sd_op op;
        if (op_clone(&g->ops[i], &op) || push_op(&e->ops, &e->n, &e->cap, &op)) {
            tq_sd_graph_free(e);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    *exec = e;
    return CUDA_SUCCESS;
}

CUresult tq_sd_graph_launch(struct tq_sd_graph *exec, struct tq_sd_stream *s)
{
    if (!exec)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!s->capture)
        tq_sd_count(TQ_SD_WORK_GRAPHS, 1);
    for (size_t i = 0; i < exec->n; i++) {
        struct tq_sd_op op;
        if (op_clone(&exec->ops[i], &op))
            return CUDA_ERROR_OUT_OF_MEMORY;
        CUresult r = tq_sd_enqueue(s, &op);
        if (r)
            return r;
    }
    return CUDA_SUCCESS;
}

void tq_sd_graph_free(struct tq_sd_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        tq_sd_op_free(&g->ops[i]);
    free(g->ops);
    free(g);
}
