/* train.h: tq-train's capability: gradient training of the scorers that
 * tq-score reads (linear, logistic, softmax, MLP), reproducible to the bit.
 * data.c loads the examples, net.c runs forward and backward with the op API,
 * loss.c holds the losses and metrics, optim.c the optimizers, schedules and
 * the seeded generator, train.c the loop, save.c the model file. */
#ifndef TQ_TRAIN_H
#define TQ_TRAIN_H

#include "tq.h"

#define TQ_TRAIN_MAX_LAYERS 16
/* An MLP's defaults, scikit-learn's MLPClassifier's: one hidden layer of 100,
 * and its L2 penalty alpha (tq-train's --l2 alpha / batch: MLPClassifier
 * divides it by the rows of the batch) */
#define TQ_TRAIN_MLP_HIDDEN 100
#define TQ_TRAIN_MLP_ALPHA 1e-4

enum { TQ_TRAIN_LINEAR, TQ_TRAIN_LOGISTIC, TQ_TRAIN_SOFTMAX, TQ_TRAIN_MLP };
enum { TQ_LOSS_MSE, TQ_LOSS_LOGISTIC, TQ_LOSS_SOFTMAX, TQ_LOSS_LISTWISE };
enum { TQ_OPTIM_SGD, TQ_OPTIM_ADAM, TQ_OPTIM_ADAMW, TQ_OPTIM_LBFGS };
/* How an L-BFGS run stands: running, converged (max |gradient| <= tol, or
 * the objective's relative fall below 64 eps), at its iteration limit, or
 * stopped where no step satisfied the line search. */
enum { TQ_LBFGS_RUNNING, TQ_LBFGS_GTOL, TQ_LBFGS_FTOL, TQ_LBFGS_MAXITER, TQ_LBFGS_LINESEARCH };
enum { TQ_SCHED_CONSTANT, TQ_SCHED_LINEAR, TQ_SCHED_COSINE };
/* hidden activations: the tq_activation values, and gelu */
#define TQ_TRAIN_GELU 3

extern const char *const tq_train_kind_names[];  /* "linear", ... NULL */
extern const char *const tq_train_loss_names[];  /* "mse", "logistic", "softmax", "listwise" */
extern const char *const tq_train_optim_names[]; /* "sgd", "adam", "adamw", "lbfgs" */
extern const char *const tq_train_sched_names[]; /* "constant", "linear", "cosine" */
extern const char *const tq_train_act_names[];   /* "relu", "tanh", "sigmoid", "gelu" */
/* Index of s in a NULL-ended list, or -1. */
int tq_train_pick(const char *s, const char *const *names);

/* ---- examples (data.c) ---- */

typedef struct tq_train_names {
    const char *x;      /* NULL: "emb" if present, else the one rank 2 float frame */
    const char *y;      /* the targets (default "y") */
    const char *group;  /* NULL: "group" if present; "" never */
    const char *weight; /* NULL: none */
    const char *x_def;  /* with x NULL, the default name of the features (NULL:
                           "emb"): the validation set's is the training set's */
} tq_train_names;

typedef struct tq_train_data {
    int64_t n, d;
    float *x;          /* [n, d] */
    double *y;         /* [n] */
    int y_int;         /* the targets came as integers (class ids) */
    float *w;          /* [n] row weights, or NULL */
    int64_t ngroups;   /* contiguous runs of one group id (1 without groups) */
    int64_t *gstart;   /* [ngroups + 1] first row of each group, then n */
    int64_t *gid;      /* [ngroups] the ids, or NULL without a group frame */
    char xname[TQ_MAX_NAME + 1];
    const char *from;  /* the input, for messages: "standard input", FILE */
} tq_train_data;

/* Reads a stream file ("-": stdin). Errors (TQ_ERR_DATA, "LABEL: ..."): no
 * such frame, rows of x and y that disagree, a non-finite feature (naming the
 * row), a negative or non-finite weight, a group id that comes back after
 * other ids. */
tq_status tq_train_data_load(const char *path, const tq_train_names *names, tq_train_data *d);
void tq_train_data_free(tq_train_data *d);

/* ---- the trainer (train.c) ---- */

/* Data-parallel training (MPI: libtq does not link it, mpi.c loads it). Under a
 * comm, every batch is cut into chunks of TQ_TRAIN_CHUNK examples (groups for
 * listwise), fixed by the batch alone; rank r computes the gradients of
 * chunks r, r + size, ...; sum adds the ranks' vectors element-wise (each
 * chunk's slot is filled by one rank, zeros elsewhere, so the sum is exact)
 * and every rank adds the chunks up in chunk order: the same bytes for any
 * number of ranks. */
#define TQ_TRAIN_CHUNK 16
/* L-BFGS's sums, over the whole data, in chunks of this many rows (groups)
 * instead (lbfgs.c), whatever the threads and ranks */
#define TQ_TRAIN_LBFGS_CHUNK 256
typedef struct tq_train_comm {
    int rank, size;
    void *ctx;
    tq_status (*sum)(void *ctx, float *v, size_t n); /* in place, on every rank */
} tq_train_comm;

/* mpi.c: the comm of an MPI job, libmpi loaded (dlopen) only under a
 * launcher's environment (Open MPI's mpirun, PMI or PMIx: srun). Outside one,
 * or in a build without MPI, *comm is one process (rank 0 of 1, no sum) and
 * TQ_OK; under one, a libmpi that does not load is TQ_ERR_RUNTIME saying why. */
tq_status tq_train_mpi_join(int *argc, char ***argv, tq_train_comm *comm);
int tq_train_mpi_on(void); /* joined */
void tq_train_mpi_abort(int code); /* ends every rank (MPI_Abort); returns if not joined */
void tq_train_mpi_finish(void);
/* The libmpi this build loads (its soname), or NULL for a build without MPI. */
const char *tq_train_mpi_library(void);

typedef struct tq_train_cfg {
    tq_device *dev;
    int kind, loss;                 /* loss -1: the kind's default */
    int nhidden;
    int64_t hidden[TQ_TRAIN_MAX_LAYERS - 1];
    int act;                        /* hidden activation, TQ_ACT_* or TQ_TRAIN_GELU */
    int64_t classes;                /* 0: from the labels */
    int standardize;
    int optim, sched;
    double lr, momentum, beta1, beta2, eps, wd;
    double l2;                      /* < 0: the default (1 / (C W) under lbfgs but for mse, else 0) */
    double C;                       /* > 0: l2 = 1 / (C W), W the examples' weight (scikit-learn's C) */
    int64_t max_iter;               /* lbfgs: iterations at most */
    double tol;                     /* lbfgs: converged when max |gradient| <= tol; with
                                       no_change, the improvement that counts */
    int64_t no_change;              /* > 0 (without patience): stop after no_change epochs
                                       whose training loss (with a validation set: metric)
                                       did not improve by tol (scikit-learn's MLP rule) */
    int64_t warmup, batch, epochs, patience; /* patience 0: no early stopping */
    uint64_t seed;
    tq_dtype precision;             /* F32 (or 0), BF16 or F16: the products' operands */
    const tq_train_comm *comm;      /* NULL: one process, the batch in one pass */
} tq_train_cfg;

typedef struct tq_trainer tq_trainer;

/* Checks the data against the configuration (labels in range, groups with a
 * positive row...) and sets up the model. valid may be NULL. Bad data is
 * TQ_ERR_DATA naming the row; a bad combination of options TQ_ERR_USAGE. */
tq_status tq_trainer_new(const tq_train_cfg *cfg, const tq_train_data *train,
                         const tq_train_data *valid, tq_trainer **t);
void tq_trainer_free(tq_trainer *t);

/* What one step did. */
typedef struct tq_train_event {
    int64_t epoch;          /* 1-based epoch of the step */
    int64_t step;           /* steps done so far */
    int64_t examples;       /* examples (rows, or groups for listwise) seen */
    double loss;            /* the step's batch loss */
    double lr;
    int epoch_end;          /* the step ended an epoch: the fields below are set */
    double train_loss;      /* mean batch loss over the epoch */
    int has_valid;
    double valid_loss, valid_metric; /* metric: accuracy, AUC, MRR, or -loss for mse */
    int improved;           /* the best valid metric so far */
    int skipped;            /* f16: the gradients overflowed; no update, the loss scale halved */
    double loss_scale;      /* f16's dynamic loss scale after the step (1 otherwise) */
    int done;               /* no more steps: epochs done or stopped early */
    int stopped;            /* early stopping ended the run */
    int lbfgs;              /* an L-BFGS iteration (epoch = step = iteration; loss = the objective) */
    double gmax;            /* lbfgs: max |gradient| of the objective after the step */
    double step_len;        /* lbfgs: |x' - x| */
    int64_t fevals;         /* lbfgs: evaluations of the objective so far */
    int solver_state;       /* lbfgs: TQ_LBFGS_* */
} tq_train_event;

/* Runs one step. After done, further calls return TQ_EOF. */
tq_status tq_trainer_step(tq_trainer *t, tq_train_event *ev);
int64_t tq_trainer_steps_per_epoch(const tq_trainer *t);
const char *tq_trainer_metric_name(const tq_trainer *t); /* "accuracy", "AUC", "MRR", "-loss" */
const char *tq_trainer_describe(const tq_trainer *t);
int tq_trainer_loss(const tq_trainer *t);                /* the loss in use, TQ_LOSS_* */   /* "mlp 64-128-10 relu, softmax" */

/* Writes the model file (man/tq-score.1, MODEL FILES): the best weights under
 * early stopping, else the last; the standardization folded into layer 1. */
tq_status tq_trainer_write_model(const tq_trainer *t, tq_writer *w);

/* ---- checkpoints (checkpoint.c) ---- */

/* Saves everything a run needs to go on exactly as if uninterrupted (weights,
 * optimizer moments, generator, epoch, step, position in the epoch's order,
 * the best model so far), with the options and a fingerprint of the data, to
 * PATH crash-safely: a temporary file, fsync, rename, fsync of the folder.
 * hook, if not NULL, is called midway through the write (tests kill the
 * process there). */
tq_status tq_trainer_checkpoint(const tq_trainer *t, const char *path, void (*hook)(void));
/* Restores a checkpoint into a trainer made with the same options and data;
 * TQ_ERR_DATA naming the first option that differs ("--lr 0.01 there, 0.001
 * here"), or the data, otherwise. */
tq_status tq_trainer_resume(tq_trainer *t, const char *path);
int64_t tq_trainer_step_count(const tq_trainer *t);
/* The solver's state as an event (lbfgs: where a run stands before any
 * step, e.g. converged at the start or after a resume). */
void tq_trainer_solver(const tq_trainer *t, tq_train_event *ev);
double tq_trainer_l2(const tq_trainer *t); /* the penalty in use */

/* ---- the learning curve (curve.c, plot.c) ---- */

typedef struct tq_train_curve {
    int64_t ns, ne, cap_s, cap_e;
    int64_t *s_step;                    /* every step: its number and batch loss */
    double *s_loss;
    int64_t *e_epoch, *e_step, *e_examples; /* every epoch's end */
    double *e_train, *e_valid, *e_metric, *e_lr, *e_sec;
    int has_valid, loss;
    char metric[16];
    char title[256];
} tq_train_curve;

/* Adds a step (and, at an epoch's end, the epoch's row) to the curve. */
tq_status tq_train_curve_add(tq_train_curve *c, const tq_train_event *ev, double seconds);
void tq_train_curve_free(tq_train_curve *c);
/* The curve as a TQ stream at PATH (atomically): one frame per column, epoch
 * rows (epoch, step, examples, train_loss, valid_loss, metric, lr, seconds)
 * then step rows (batch_step, batch_loss). */
tq_status tq_train_curve_write(const tq_train_curve *c, const char *path);
/* The curve as a standalone SVG at PATH (atomically): train loss (each
 * step's, and each epoch's mean) and validation loss against steps, with a
 * title, axes with units and a legend. */
tq_status tq_train_curve_plot(const tq_train_curve *c, const char *path);

#endif
