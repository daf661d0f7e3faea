/* sched.c: runs a launch's blocks one after another on the calling OS thread,
 * each GPU thread of a block as a fiber. Between two synchronization points
 * (__syncthreads, warp ops) the runnable threads run in a seeded random order,
 * each until it waits or exits, so a missing barrier or a race changes the
 * result; a barrier or warp op completes when every thread it concerns has
 * reached it. A fiber starts threads one after another, in that order, until
 * one of them waits: then another fiber takes over the starting. A block
 * without barriers thus runs on one fiber with two switches in all, and a
 * fiber (stack and all) is kept for the next blocks and launches. A thread
 * that waits switches straight to the next one due, not through the
 * scheduler: one switch per thread and barrier. Mismatched waits fail the
 * launch with one line. */

#include "fiber.h"
#include "standin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread struct tq_emu_thread *tq_emu_cur TQ_EMU_TLS;
__thread struct tq_emu_block tq_emu_blk TQ_EMU_TLS;

enum { T_NEW, T_RUN, T_BAR, T_WARP, T_DONE };

struct tq_sd_worker {
    struct tq_fiber fiber;
    struct tq_emu_thread *thr;   /* the GPU thread it runs, NULL when free */
    struct tq_sd_worker *next_free;
};

/* Per OS thread: the scheduler's own context, the workers (kept from launch
 * to launch: mapping stacks is the expensive part) and the block's threads. */
struct sched {
    struct tq_fiber main;
    struct tq_sd_worker **workers;
    size_t nworkers, cap_workers;
    struct tq_sd_worker *free;
    struct tq_emu_thread thr[1024];
    unsigned run[1024];          /* indices of runnable threads, in run order */
    unsigned nrun;               /* how many */
    unsigned next;               /* the next of them to run this round */
    int no_stack;                /* a fiber stack could not be mapped */
    const struct tq_sd_launch *launch;
};
static __thread struct sched *S __attribute__((tls_model("initial-exec")));

static struct tq_sd_worker *get_worker(void);

/* Leaves `from` for what is due next this round: a fiber to start the next
 * threads, the fiber of the next waiting thread, or the scheduler at the end
 * of the round. */
static void dispatch(struct tq_fiber *from)
{
    struct sched *s = S;
    struct tq_fiber *to = &s->main;
    if (s->next < s->nrun) {
        struct tq_emu_thread *t = &s->thr[s->run[s->next]];
        if (t->state == T_NEW) {
            struct tq_sd_worker *w = get_worker();
            if (w)
                to = &w->fiber;
            else
                s->no_stack = 1;
        } else {
            s->next++;
            t->state = T_RUN;
            tq_emu_cur = t;
            to = &t->worker->fiber;
        }
    }
    if (to != from) /* the scheduler itself, when no stack could be mapped */
        tq_fiber_switch(from, to);
}

/* A fiber starts the threads due next that have not started yet, each to its
 * end, until one waits (it then stays that thread's) or none is left. */
static void worker_main(void *arg)
{
    struct tq_sd_worker *w = arg;
    for (;;) {
        struct sched *s = S;
        const struct tq_emu_kernel *k = s->launch->k;
        while (s->next < s->nrun && s->thr[s->run[s->next]].state == T_NEW) {
            struct tq_emu_thread *t = &s->thr[s->run[s->next++]];
            t->worker = w;
            w->thr = t;
            t->state = T_RUN;
            tq_emu_cur = t;
            k->invoke(k->fn, s->launch->args);
            t->state = T_DONE;
            t->worker = NULL;
        }
        /* the next due has started, or there is none: this fiber is free */
        w->thr = NULL;
        w->next_free = s->free;
        s->free = w;
        dispatch(&w->fiber);
    }
}

static struct tq_sd_worker *get_worker(void)
{
    struct tq_sd_worker *w = S->free;
    if (w) {
        S->free = w->next_free;
        return w;
    }
    if (S->nworkers == S->cap_workers) {
        size_t cap = S->cap_workers ? 2 * S->cap_workers : 64;
        struct tq_sd_worker **a = realloc(S->workers, cap * sizeof *a);
        if (!a)
            return NULL;
        S->workers = a;
        S->cap_workers = cap;
    }
    w = calloc(1, sizeof *w);
    if (!w || tq_fiber_create(&w->fiber, tq_sd_cfg()->stack, worker_main, w)) {
        free(w);
        return NULL;
    }
    S->workers[S->nworkers++] = w;
    return w;
}

unsigned long long tq_emu_wait(int op, unsigned long long val, int arg, const char *site)
{
    struct tq_emu_thread *t = tq_emu_cur;
    t->state = op ? T_WARP : T_BAR;
    t->op = op;
    t->val = val;
    t->arg = arg;
    t->site = site;
    dispatch(&t->worker->fiber);
    return t->result;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const char *op_name(int op)
{
    static const char *const names[] = {"__syncthreads", "tq_shfl_xor", "tq_shfl_down",
                                        "tq_shfl_up", "tq_shfl", "tq_ballot", "tq_any",
                                        "tq_all", "tq_syncwarp"};
    return op >= 0 && op <= TQ_EMU_SYNCWARP ? names[op] : "?";
}

static int fail(const struct tq_emu_thread *t, const char *fmt, const char *a, const char *b)
{
    char why[512];
    snprintf(why, sizeof why, fmt, a, b);
    const tq_emu_uint3 *bi = &tq_emu_blk.block_idx;
    tq_sd_log("kernel %s, block (%u,%u,%u), thread (%u,%u,%u): %s", S->launch->k->name, bi->x,
              bi->y, bi->z, t->idx.x, t->idx.y, t->idx.z, why);
    return -1;
}

/* Completes the warp op all live lanes of warp `w` wait at; -1 on a mismatch. */
static int warp_op(unsigned w, unsigned nthreads)
{
    int ws = tq_emu_blk.warp_size;
    unsigned first = w * (unsigned)ws;
    unsigned lanes = nthreads - first < (unsigned)ws ? nthreads - first : (unsigned)ws;
    struct tq_emu_thread *t = &S->thr[first];
    unsigned long long ballot = 0;
    for (unsigned l = 0; l < lanes; l++) {
        struct tq_emu_thread *u = &t[l];
        if (u->state == T_DONE)
            return fail(u, "%s at %s reached while this lane of the warp has exited",
                        op_name(t[0].state == T_WARP ? t[0].op : t[lanes - 1].op),
                        t[0].state == T_WARP ? t[0].site : t[lanes - 1].site);
        if (u->state != T_WARP)
            return fail(u, "this lane waits at __syncthreads (%s) while its warp waits at a "
                           "warp op (%s)", u->site, t[0].state == T_WARP ? t[0].site : "?");
        if (u->op != t[0].op || (u->site != t[0].site && strcmp(u->site, t[0].site)))
            return fail(u, "lanes of one warp wait at different warp ops: %s and %s", u->site,
                        t[0].site);
        ballot |= (unsigned long long)(u->val != 0) << l;
    }
    for (unsigned l = 0; l < lanes; l++) {
        struct tq_emu_thread *u = &t[l];
        int src = -1;
        switch (u->op) {
        case TQ_EMU_SHFL_XOR: src = (int)l ^ u->arg; break;
        case TQ_EMU_SHFL_DOWN: src = (int)l + u->arg; break;
        case TQ_EMU_SHFL_UP: src = (int)l - u->arg; break;
        case TQ_EMU_SHFL: src = ((u->arg % ws) + ws) % ws; break;
        case TQ_EMU_BALLOT: u->result = ballot; break;
        case TQ_EMU_ANY: u->result = ballot != 0; break;
        case TQ_EMU_ALL: u->result = ballot == (lanes == 64 ? ~0ull : (1ull << lanes) - 1); break;
        default: u->result = 0; break;
        }
        if (u->op >= TQ_EMU_SHFL_XOR && u->op <= TQ_EMU_SHFL) {
            /* a source outside the warp hands back the caller's own value */
            if (src < 0 || src >= ws)
                u->result = u->val;
            else if ((unsigned)src >= lanes)
                return fail(u, "%s at %s reads a lane the block does not have (partial warp)",
                            op_name(u->op), u->site);
            else
                u->result = t[src].val;
        }
    }
    for (unsigned l = 0; l < lanes; l++) {
        t[l].state = T_RUN;
        S->run[S->nrun++] = first + l;
    }
    return 0;
}

/* All runnable threads ran: release what can go on. 1: the block is done,
 * 0: threads are runnable again, -1: the launch fails. */
static int release(unsigned n)
{
    unsigned ndone = 0, nwarps = (n + (unsigned)tq_emu_blk.warp_size - 1) /
                                 (unsigned)tq_emu_blk.warp_size;
    const struct tq_emu_thread *bar = NULL;
    for (unsigned w = 0; w < nwarps; w++) {
        unsigned first = w * (unsigned)tq_emu_blk.warp_size, at_warp = 0;
        for (unsigned i = first; i < n && i < first + (unsigned)tq_emu_blk.warp_size; i++)
            at_warp += S->thr[i].state == T_WARP;
        if (at_warp && warp_op(w, n))
            return -1;
    }
    if (S->nrun)
        return 0;
    for (unsigned i = 0; i < n; i++) {
        struct tq_emu_thread *t = &S->thr[i];
        if (t->state == T_DONE) {
            ndone++;
        } else if (!bar) {
            bar = t;
        } else if (t->site != bar->site && strcmp(t->site, bar->site)) {
            return fail(t, "threads wait at different __syncthreads: %s and %s", t->site,
                        bar->site);
        }
    }
    if (ndone == n)
        return 1;
    /* exited threads count as arrived (as on Volta and later) */
    for (unsigned i = 0; i < n; i++)
        if (S->thr[i].state == T_BAR) {
            S->thr[i].state = T_RUN;
            S->run[S->nrun++] = i;
        }
    return 0;
}

static void abandon(unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct tq_sd_worker *w = S->thr[i].worker;
        if (w) {
            tq_fiber_restart(&w->fiber);
            w->thr = NULL;
            w->next_free = S->free;
            S->free = w;
        }
    }
}

static int run_block(unsigned n, uint64_t rng)
{
    const unsigned *bd = S->launch->block;
    unsigned x = 0, y = 0, z = 0;
    for (unsigned i = 0; i < n; i++) {
        struct tq_emu_thread *t = &S->thr[i];
        t->idx = (tq_emu_uint3){x, y, z};
        if (++x == bd[0]) { /* counting, not dividing: this runs per thread */
            x = 0;
            if (++y == bd[1])
                y = 0, z++;
        }
        t->linear = i;
        t->state = T_NEW;
        t->worker = NULL;
        S->run[i] = i;
    }
    S->nrun = n;
    for (;;) {
        unsigned nrun = S->nrun;
        for (unsigned i = nrun - 1; i > 0; i--) {
            /* a multiply, not a division, maps the draw to [0, i] */
            unsigned j = (unsigned)(((unsigned __int128)splitmix(&rng) * (i + 1)) >> 64);
            unsigned x = S->run[i];
            S->run[i] = S->run[j];
            S->run[j] = x;
        }
        S->next = 0;
        dispatch(&S->main); /* back here when the round is over */
        if (S->no_stack) {
            S->no_stack = 0;
            tq_sd_log("kernel %s: cannot map a fiber stack", S->launch->k->name);
            abandon(n);
            return -1;
        }
        S->nrun = 0;
        int r = release(n);
        if (r) {
            if (r < 0)
                abandon(n);
            return r < 0 ? -1 : 0;
        }
    }
}

CUresult tq_sd_run(const struct tq_sd_launch *l)
{
    if (!S && !(S = calloc(1, sizeof *S)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    const unsigned *g = l->grid, *b = l->block;
    unsigned n = b[0] * b[1] * b[2];
    void *shared = NULL;
    /* exactly the launch's size: ASan reports a kernel reading past it */
    if (posix_memalign(&shared, 16, l->shared ? l->shared : 16))
        return CUDA_ERROR_OUT_OF_MEMORY;
    S->launch = l;
    tq_emu_blk.block_dim = (tq_emu_uint3){b[0], b[1], b[2]};
    tq_emu_blk.grid_dim = (tq_emu_uint3){g[0], g[1], g[2]};
    tq_emu_blk.warp_size = l->warp_size;
    tq_emu_blk.dyn_shared = shared;
    CUresult r = CUDA_SUCCESS;
    uint64_t nblock = 0;
    for (unsigned z = 0; z < g[2] && r == CUDA_SUCCESS; z++)
        for (unsigned y = 0; y < g[1] && r == CUDA_SUCCESS; y++)
            for (unsigned x = 0; x < g[0]; x++) {
                uint64_t seed = l->seed ^ (0x9E3779B97F4A7C15ull * ++nblock);
                tq_emu_blk.block_idx = (tq_emu_uint3){x, y, z};
                /* shared memory starts as garbage on a GPU: NaNs here */
                memset(shared, 0xff, l->shared);
                if (run_block(n, splitmix(&seed))) {
                    r = CUDA_ERROR_LAUNCH_FAILED;
                    break;
                }
            }
    tq_emu_cur = NULL;
    free(shared);
    return r;
}
