/* autopick.c: the two rules by which a device is chosen beyond its name: the
 * size of the work below which `auto` keeps to the CPU (a GPU's start costs
 * more than such work takes there), each tool's estimate of its work, and
 * the local rank of a process under mpirun or srun, which picks its GPU.
 * Kept in one place, as tq(7) "DEVICES" documents them. */
#include "backend.h"
#include "internal.h"

#include <errno.h>

/* The CPU work worth a GPU's start, 1e10 flop a thread the run uses. On the
 * H200 machine (16 cores, 2026-11): a GPU's start took 0.60 s (loading
 * libcuda and cuInit 0.23 s, the context 0.12 s, the kernels 0.002 s, cuBLAS
 * 0.26 s), and tq-simmat's search of n x 1024 vectors against themselves
 * (2 n^2 1024 flop) took, CPU against GPU: n = 4000 (3.4e10 flop) 0.21 s
 * against 0.61 s; 8000 (1.3e11) 0.69 against 0.64; 16000 (5.2e11) 2.62
 * against 0.79: the two meet near 1.2e11 flop, 0.75e10 a thread. Near that
 * point either device costs about the same, so the rule needs no finer
 * figure; TQ_AUTO_MIN_FLOPS sets another. */
#define FLOPS_PER_THREAD 1e10

double tq_auto_min_flops(const char **from)
{
    const char *s = getenv("TQ_AUTO_MIN_FLOPS");
    if (s && *s) {
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (!errno && !*end && v >= 0) {
            if (from)
                *from = "TQ_AUTO_MIN_FLOPS";
            return v;
        }
    }
    if (from)
        *from = "threads x 1e10";
    return FLOPS_PER_THREAD * (double)tq_threads_get();
}

/* flops < 0: not known before the device opens; auto then takes a GPU. */
int tq_autopick_cpu(double flops, char *why, size_t n)
{
    const char *from;
    double min = tq_auto_min_flops(&from);
    if (min <= 0) {
        snprintf(why, n, "any work: %s=0", from);
        return 0;
    }
    if (flops < 0) {
        snprintf(why, n, "work not known before it starts");
        return 0;
    }
    if (flops >= TQ_WORK_LARGE) {
        snprintf(why, n, "work large: a pipe longer than the read-ahead");
        return 0;
    }
    if (flops < min) {
        snprintf(why, n, "work %.3g flop < %.3g (%s): a GPU's start-up costs more", flops, min,
                 from);
        return 1;
    }
    snprintf(why, n, "work %.3g flop >= %.3g (%s)", flops, min, from);
    return 0;
}

/* The rank of this process among those its launcher started on this node:
 * Open MPI's mpirun (OMPI_COMM_WORLD_LOCAL_RANK), MPICH's and Intel MPI's
 * Hydra (MPI_LOCALRANKID), MVAPICH2 (MV2_COMM_WORLD_LOCAL_RANK), then
 * Slurm's srun (SLURM_LOCALID), last because an mpirun inside a Slurm job
 * inherits the batch step's SLURM_LOCALID. -1 when none is set. */
int tq_local_rank(const char **var)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                       "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *s = getenv(vars[i]);
        char *end;
        if (!s || !*s)
            continue;
        long v = strtol(s, &end, 10);
        if (*end || v < 0 || v > 1 << 20)
            continue;
        if (var)
            *var = vars[i];
        return (int)v;
    }
    return -1;
}

/* Each tool's work, in flop, from the sizes it knows before it opens a
 * device (tq(7) lists them). Elements are those of the inputs' rank-2 and
 * higher tensors; a multiply-add is 2 flop. */

/* tq-simmat: nq x ndb products of d values; q_elems = nq d, db_elems = ndb d */
double tq_work_simmat(double q_elems, double db_elems, double d)
{
    return d > 0 ? 2 * q_elems * db_elems / d : -1;
}

/* tq-attend: Q K^T and the weights times V: 4 B H Lq Lk Dh = 4 q_elems Lk */
double tq_work_attend(double q_elems, double lk) { return 4 * q_elems * lk; }

/* tq-embed: a BERT encoder's 2 flop a weight a token (params 0 for the
 * embedders that run on the CPU whatever the device); a token for every 4
 * bytes of text, as WordPiece gives on English */
double tq_work_embed(double params, double text_bytes)
{
    return params > 0 ? 2 * params * (text_bytes / 4 + 2) : 0;
}

/* tq-score: the features' products (a few flop a value) and a model's 2
 * flop a weight a row */
double tq_work_score(double elems, double d, double model_params)
{
    return d > 0 ? 6 * elems + 2 * (elems / d) * model_params : -1;
}

/* tq-train: forward and backward, 6 flop a weight a row, each epoch */
double tq_work_train(double rows, double params, double epochs)
{
    return 6 * rows * params * epochs;
}
