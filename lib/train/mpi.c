/* mpi.c: tq-train's way into an MPI job (mpirun, srun): Open MPI's libmpi
 * loaded with dlopen, only when a launcher started the process. Linked,
 * libmpi and the six libraries it needs cost every run of tq-train 0.6 ms of
 * start-up (their loading and relocations: as long as a small model's whole
 * solve), and a binary built with MPI would not start where Open MPI is
 * missing; loaded, they cost only the runs that join a job, as the GPU
 * runtimes are loaded (ARCHITECTURE). mpi.h gives the types at build time;
 * the functions and the predefined handles, which in Open MPI are addresses
 * of its globals (MPI_COMM_WORLD is &ompi_mpi_comm_world), come from dlsym,
 * so nothing here links to libmpi. */
#include "../internal.h"
#include "train.h"

#include <stdlib.h>

#ifdef TQ_HAVE_MPI
#include <dlfcn.h>
#include <mpi.h>

#ifndef OPEN_MPI
#error "lib/train/mpi.c loads Open MPI's libmpi (its handles are its globals' addresses)"
#endif

static struct {
    int (*init)(int *, char ***);
    int (*comm_rank)(MPI_Comm, int *);
    int (*comm_size)(MPI_Comm, int *);
    int (*allreduce)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
    int (*abort)(MPI_Comm, int);
    int (*finalize)(void);
    MPI_Comm world;
    MPI_Datatype flt;
    MPI_Op sum;
    int on;
} mpi;

static tq_status mpi_sum(void *ctx, float *v, size_t n)
{
    (void)ctx;
    for (size_t at = 0; at < n;) { /* counts are ints */
        int k = n - at > (1u << 30) ? 1 << 30 : (int)(n - at);
        int rc = mpi.allreduce(MPI_IN_PLACE, v + at, k, mpi.flt, mpi.sum, mpi.world);
        if (rc != MPI_SUCCESS)
            return tq_fail(TQ_ERR_RUNTIME, "MPI_Allreduce failed (error %d)", rc);
        at += (size_t)k;
    }
    return TQ_OK;
}

/* TQ_MPI_LIB names another file (an Open MPI in an odd place, or a path that
 * does not exist to see how tq-train behaves without); else the soname the
 * build linked against, then that file in the build's library folder. Global:
 * Open MPI's components, which it dlopens in turn, resolve names in libmpi. */
static void *mpi_open(const char **name, char *why, size_t cap)
{
    const char *env = getenv("TQ_MPI_LIB");
    const char *names[] = {TQ_MPI_SONAME, TQ_MPI_DIR "/" TQ_MPI_SONAME};
    int n = env && *env ? 1 : 2;
    void *lib = NULL;
    for (int i = 0; !lib && i < n; i++)
        lib = dlopen(*name = n == 1 ? env : names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : "not found");
    }
    return lib;
}

tq_status tq_train_mpi_join(int *argc, char ***argv, tq_train_comm *comm)
{
    memset(comm, 0, sizeof *comm);
    comm->size = 1;
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK"))
        return TQ_OK;
    const char *name;
    char why[512];
    void *lib = mpi_open(&name, why, sizeof why);
    if (!lib)
        return tq_fail(TQ_ERR_RUNTIME, "MPI: started by a launcher, but %s", why);
    static const char *const names[] = {"MPI_Init",      "MPI_Comm_rank",       "MPI_Comm_size",
                                        "MPI_Allreduce", "MPI_Abort",           "MPI_Finalize",
                                        "ompi_mpi_comm_world", "ompi_mpi_float", "ompi_mpi_op_sum"};
    void *p[sizeof names / sizeof *names];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!(p[i] = dlsym(lib, names[i])))
            return tq_fail(TQ_ERR_RUNTIME, "MPI: %s has no %s (not Open MPI's libmpi?)", name,
                           names[i]);
    /* POSIX: a dlsym result converts to the function it names */
    mpi.init = (int (*)(int *, char ***))(uintptr_t)p[0];
    mpi.comm_rank = (int (*)(MPI_Comm, int *))(uintptr_t)p[1];
    mpi.comm_size = (int (*)(MPI_Comm, int *))(uintptr_t)p[2];
    mpi.allreduce = (int (*)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))(uintptr_t)p[3];
    mpi.abort = (int (*)(MPI_Comm, int))(uintptr_t)p[4];
    mpi.finalize = (int (*)(void))(uintptr_t)p[5];
    mpi.world = (MPI_Comm)p[6], mpi.flt = (MPI_Datatype)p[7], mpi.sum = (MPI_Op)p[8];
    int rc = mpi.init(argc, argv);
    if (rc != MPI_SUCCESS)
        return tq_fail(TQ_ERR_RUNTIME, "MPI_Init failed (error %d)", rc);
    mpi.on = 1;
    mpi.comm_rank(mpi.world, &comm->rank);
    mpi.comm_size(mpi.world, &comm->size);
    comm->sum = mpi_sum;
    return TQ_OK;
}

int tq_train_mpi_on(void) { return mpi.on; }

void tq_train_mpi_abort(int code)
{
    if (mpi.on)
        mpi.abort(mpi.world, code);
}

void tq_train_mpi_finish(void)
{
    if (mpi.on)
        mpi.finalize();
    mpi.on = 0;
}

const char *tq_train_mpi_library(void) { return TQ_MPI_SONAME; }

#else /* built without mpicc: every run is one process */

tq_status tq_train_mpi_join(int *argc, char ***argv, tq_train_comm *comm)
{
    (void)argc, (void)argv;
    memset(comm, 0, sizeof *comm);
    comm->size = 1;
    return TQ_OK;
}
int tq_train_mpi_on(void) { return 0; }
void tq_train_mpi_abort(int code) { (void)code; }
void tq_train_mpi_finish(void) {}
const char *tq_train_mpi_library(void) { return NULL; }

#endif
