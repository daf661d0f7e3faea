/* graph.c: CUDA and HIP graphs. The stream is captured between graph_begin
 * and graph_end (the ops only launch kernels and BLAS calls on it), the graph
 * is instantiated once, and each launch replays it as one submission: for a
 * model's forward pass, a hundred launches cost one. Device memory an op
 * takes and frees while recording (attention's scratch) stays the graph's
 * until the graph is freed, since every replay writes it again. */
#include "gpu.h"

typedef struct gpu_graph {
    gpu_handle graph, exec;
    gpu_block *owned;
} gpu_graph;

tq_status TQ_GPU(graph_begin)(void *ctx)
{
    tq_gpu_ctx *c = ctx;
    c->api->set_current(c->dev, c->ctx);
    gpu_res r = c->api->capture_begin(c->stream);
    if (r)
        return TQ_GPU(fail)(c, r, GPU_CALL("cuStreamBeginCapture", "hipStreamBeginCapture"),
                            "starting a graph");
    c->recording = 1;
    return TQ_OK;
}

static void release_owned(tq_gpu_ctx *c, gpu_block *b)
{
    while (b) {
        gpu_block *next = b->next;
        TQ_GPU(pool_free)(c, b);
        b = next;
    }
}

tq_status TQ_GPU(graph_end)(void *ctx, int commit, void **out)
{
    tq_gpu_ctx *c = ctx;
    const tq_gpu_api *api = c->api;
    *out = NULL;
    gpu_handle graph = NULL;
    api->set_current(c->dev, c->ctx);
    const char *call = GPU_CALL("cuStreamEndCapture", "hipStreamEndCapture");
    gpu_res r = api->capture_end(c->stream, &graph);
    pthread_mutex_lock(&c->lock);
    c->recording = 0;
    gpu_block *owned = c->graph_owned;
    c->graph_owned = NULL;
    pthread_mutex_unlock(&c->lock);
    gpu_graph *g = NULL;
    if (!r && commit && !(g = calloc(1, sizeof *g)))
        r = 2; /* out of memory, in both APIs */
    if (!r && commit) {
        call = GPU_CALL("cuGraphInstantiateWithFlags", "hipGraphInstantiate");
        r = api->graph_instantiate(&g->exec, graph);
    }
    if (r || !commit) {
        if (graph)
            api->graph_destroy(graph);
        free(g);
        api->stream_sync(c->stream); /* nothing recorded may still run */
        release_owned(c, owned);
        return r ? TQ_GPU(fail)(c, r, call, "recording a graph") : TQ_OK;
    }
    g->graph = graph;
    g->owned = owned;
    *out = g;
    return TQ_OK;
}

tq_status TQ_GPU(graph_launch)(void *ctx, void *graph)
{
    tq_gpu_ctx *c = ctx;
    gpu_graph *g = graph;
    c->api->set_current(c->dev, c->ctx);
    gpu_res r = c->api->graph_launch(g->exec, c->stream);
    return r ? TQ_GPU(fail)(c, r, GPU_CALL("cuGraphLaunch", "hipGraphLaunch"), "launching a graph")
             : TQ_OK;
}

void TQ_GPU(graph_free)(void *ctx, void *graph)
{
    tq_gpu_ctx *c = ctx;
    gpu_graph *g = graph;
    if (!g)
        return;
    c->api->set_current(c->dev, c->ctx);
    c->api->stream_sync(c->stream); /* a replay may still use its memory */
    c->api->graph_exec_destroy(g->exec);
    c->api->graph_destroy(g->graph);
    release_owned(c, g->owned);
    free(g);
}
