/* graph.c: recording ops once and replaying them (tq.h, Graphs), over the
 * backend's graph entries; devices without them run the ops as called. */
#include "backend.h"
#include "internal.h"

struct tq_graph {
    tq_device *dev;
    void *g; /* the backend's */
};

/* TQ_GRAPHS=0 turns recording off: the same ops run one by one (to compare,
 * or to measure what graphs save). */
static int graphs_wanted(void)
{
    const char *e = getenv("TQ_GRAPHS");
    return !(e && !strcmp(e, "0"));
}

int tq_device_has_graphs(const tq_device *dev)
{
    return dev->backend->graph_begin && graphs_wanted();
}

tq_status tq_graph_begin(tq_device *dev, int *recording)
{
    *recording = 0;
    if (dev->recording)
        return tq_fail(TQ_ERR_USAGE, "%s: a graph is already being recorded", dev->name);
    if (!tq_device_has_graphs(dev))
        return TQ_OK;
    tq_status st = dev->backend->graph_begin(dev->ctx);
    if (!st)
        *recording = dev->recording = 1;
    return st;
}

tq_status tq_graph_end(tq_device *dev, int commit, tq_graph **out)
{
    *out = NULL;
    if (!dev->recording)
        return TQ_OK;
    dev->recording = 0;
    void *g = NULL;
    tq_status st = dev->backend->graph_end(dev->ctx, commit, &g);
    if (st || !g)
        return st;
    tq_graph *t = malloc(sizeof *t);
    if (!t) {
        dev->backend->graph_free(dev->ctx, g);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    t->dev = dev;
    t->g = g;
    dev->graphs++;
    *out = t;
    return TQ_OK;
}

tq_status tq_graph_launch(tq_graph *g)
{
    if (g->dev->recording)
        return tq_fail(TQ_ERR_USAGE, "%s: a graph cannot be launched while one is recorded",
                       g->dev->name);
    g->dev->replays++;
    return g->dev->backend->graph_launch(g->dev->ctx, g->g);
}

void tq_graph_free(tq_graph *g)
{
    if (!g)
        return;
    g->dev->backend->graph_free(g->dev->ctx, g->g);
    free(g);
}

void tq_device_graph_counts(const tq_device *dev, long *recorded, long *replays)
{
    *recorded = dev->graphs;
    *replays = dev->replays;
}
