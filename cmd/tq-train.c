/* tq-train: trains the scorers tq-score reads (linear, logistic, softmax,
 * MLP) from a stream of examples, reproducibly to the bit. Options, files and
 * messages here; the training in lib/train. */
#include "tool/tool.h"
#include "train/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_X = TQ_OPT_TOOL_BASE,
    OPT_Y,
    OPT_GROUP,
    OPT_WEIGHT,
    OPT_VALID,
    OPT_MODEL,
    OPT_HIDDEN,
    OPT_ACTIVATION,
    OPT_LOSS,
    OPT_CLASSES,
    OPT_STANDARDIZE,
    OPT_OPTIMIZER,
    OPT_LR,
    OPT_MOMENTUM,
    OPT_BETA1,
    OPT_BETA2,
    OPT_EPS,
    OPT_L2,
    OPT_WD,
    OPT_SCHEDULE,
    OPT_WARMUP,
    OPT_BATCH,
    OPT_EPOCHS,
    OPT_PATIENCE,
    OPT_CHECKPOINT,
    OPT_CHECKPOINT_EVERY,
    OPT_RESUME,
    OPT_LOG,
    OPT_PLOT,
    OPT_PRECISION,
    OPT_MAX_ITER,
    OPT_TOL,
    OPT_C,
    OPT_NO_CHANGE,
};

static void help(void)
{
    fputs(
        "Usage: tq-train [OPTION]... [FILE]\n"
        "Train a scorer for tq-score from a TQ stream of examples (FILE, or standard\n"
        "input): features (a rank 2 float frame), targets (\"y\": class ids, values or\n"
        "0/1), optional group ids and row weights. Writes the model file (-o).\n"
        "The same data, options and seed give the same model bytes, whatever --threads.\n"
        "Under mpirun or srun, data parallel over the ranks, the same bytes for any\n"
        "number of ranks; rank 0 writes.\n",
        stdout);
    const char *lib = tq_train_mpi_library();
    printf("MPI: %s%s.\n\n", lib ? lib : "not in this build (mpicc was not found)",
           lib ? ", loaded when a launcher starts tq-train" : "");
    fputs(
        "Input:\n"
        "      --x NAME          the features (default: \"emb\", else the one rank 2 float frame)\n"
        "      --y NAME          the targets (default: y)\n"
        "      --group NAME      group ids, for the listwise loss (default: group, if present)\n"
        "      --weight NAME     row weights (default: none, all 1)\n"
        "      --valid FILE      a validation stream: loss and metric each epoch\n\n"
        "Model:\n"
        "      --model KIND      linear, logistic, softmax or mlp (default: logistic)\n"
        "      --hidden LIST     mlp hidden layer sizes, e.g. 128,64 (default: 100)\n"
        "      --activation A    relu, tanh, sigmoid or gelu (default: relu)\n"
        "      --loss L          mse, logistic, softmax or listwise (default: the model's;\n"
        "                        mlp: softmax for integer targets, else mse)\n"
        "      --classes N       softmax classes (default: the largest label + 1)\n"
        "      --standardize     learn the inputs' mean and scale (folded into the model)\n"
        "      --precision P     f32, bf16 or f16: the products' operands (f32 master\n"
        "                        weights; f16 with dynamic loss scaling; default: f32)\n\n"
        "Optimization:\n"
        "      --optimizer O     lbfgs, sgd, adam or adamw (default: lbfgs for linear,\n"
        "                        logistic and softmax, solved to convergence as\n"
        "                        scikit-learn does; adam for mlp, or where an option\n"
        "                        below only the stochastic ones take is given)\n"
        "      --max-iter N      lbfgs: iterations at most (default: 100); a warning\n"
        "                        if it stops there unconverged\n"
        "      --tol X           lbfgs: converged at max |gradient| <= X; with\n"
        "                        --n-iter-no-change, the improvement that counts\n"
        "                        (default: 1e-4)\n"
        "      --lr X            learning rate (default: 0.001; sgd 0.01)\n"
        "      --momentum X      sgd momentum (default: 0.9)\n"
        "      --beta1 X, --beta2 X, --eps X   Adam's (default: 0.9, 0.999, 1e-8)\n"
        "      --l2 X            L2 penalty X/2 |w|^2 on the weights beside the mean loss\n"
        "                        (default: lbfgs, but for mse, 1/n: scikit-learn's C = 1;\n"
        "                        mlp 1e-4/batch: MLPClassifier's alpha; else 0)\n"
        "      --C X             the penalty as scikit-learn's C: --l2 1/(X n)\n"
        "      --weight-decay X  adamw's decoupled decay (default: 0.01)\n"
        "      --schedule S      constant, linear or cosine (default: constant)\n"
        "      --warmup N        steps of linear warm-up (default: 0)\n"
        "      --batch N         examples a step (groups for listwise; default: mlp\n"
        "                        min(200, n), else 64)\n"
        "      --epochs N        passes over the data (default: mlp 200, else 10)\n"
        "      --n-iter-no-change N  stop after N epochs whose training loss (with\n"
        "                        --valid: metric) did not improve by --tol; with\n"
        "                        --valid the best epoch's model is kept (default: mlp\n"
        "                        10, as scikit-learn's MLPClassifier; else 0, never)\n"
        "      --patience N      stop after N epochs without a better validation metric,\n"
        "                        keeping the best model (default: 0, never)\n\n"
        "Checkpoints:\n"
        "      --checkpoint FILE write the whole state to FILE (crash-safe) each epoch\n"
        "      --checkpoint-every N  and every N steps (default: each epoch only)\n"
        "      --resume FILE     go on from a checkpoint of the same options and data: the\n"
        "                        model is the same bytes as an uninterrupted run's\n\n"
        "Reports (-v: a table of each epoch on standard error):\n"
        "      --log FILE        the learning curve as a TQ stream (epochs, then steps)\n"
        "      --plot FILE.svg   train and validation loss against steps, as an SVG\n\n" TQ_COMMON_HELP
        "\nExamples:\n"
        "  tq-train -v --model softmax --standardize -o digits.tq train.tq\n"
        "  tq-train --model mlp --hidden 128 --valid valid.tq --patience 5 -o m.tq train.tq\n"
        "  tq-train --model linear --loss listwise --group question -o scorer.tq hyps.tq &&\n"
        "    tq-score -m scorer.tq --top 1 new.tq | tq-cat -t tsv\n",
        stdout);
}

static double real_arg(tq_tool *t, const char *opt, const char *arg, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || end == arg || *end || !isfinite(v) || v < lo || v > hi)
        tq_tool_usage(t, "%s wants a number in %g..%g, not '%s'", opt, lo, hi, arg);
    return v;
}

static int name_arg(tq_tool *t, const char *opt, const char *arg, const char *const *names)
{
    int v = tq_train_pick(arg, names);
    if (v < 0) {
        char list[128];
        int n = 0;
        for (int i = 0; names[i]; i++)
            n += snprintf(list + n, sizeof list - (size_t)n, "%s%s", i ? ", " : "", names[i]);
        tq_tool_usage(t, "%s wants one of %s, not '%s'", opt, list, arg);
    }
    return v;
}

static void crash_now(void) { raise(SIGKILL); }

/* ---- MPI: data parallel over the ranks of mpirun or srun (lib/train/mpi.c
 * loads libmpi only then); libtq hands the trainer a sum function ---- */
static tq_train_comm comm;
static int mpi_on;

/* Ends the run: under MPI an error on any rank ends every rank (one message:
 * rank 0's, or another rank's own failure of the machine, I/O or memory). */
static _Noreturn void fail(tq_tool *t, tq_status st)
{
    if (mpi_on) {
        /* bad data or options fail every rank alike: rank 0 says it and
         * aborts the job; another rank waits for that first, and speaks only
         * if rank 0 did not (its own failure) */
        int own = st == TQ_ERR_RUNTIME || st == TQ_ERR_NOMEM || st == TQ_ERR_IO;
        if (comm.rank && !own)
            sleep(2);
        fprintf(stderr, "%s: error: %s%s\n", t->name, comm.rank ? "(a rank) " : "", tq_errmsg());
        fflush(stderr);
        tq_train_mpi_abort(tq_status_exit_code(st));
    }
    tq_tool_fail(t, st);
}

/* 3.2e-3, not 3.2e-03 */
static const char *sci(char *buf, size_t cap, double v)
{
    char m[32];
    snprintf(m, sizeof m, "%.2g", v);
    if (!strchr(m, 'e') && (v >= 1e-2 || v == 0)) {
        snprintf(buf, cap, "%s", m);
        return buf;
    }
    snprintf(m, sizeof m, "%.1e", v);
    char *e = strchr(m, 'e');
    int ex = atoi(e + 1);
    *e = 0;
    size_t l = strlen(m);
    if (l > 2 && !strcmp(m + l - 2, ".0"))
        m[l - 2] = 0;
    snprintf(buf, cap, "%se%d", m, ex);
    return buf;
}

/* How L-BFGS ended: a line under -v; one warning where it did not converge
 * (as scikit-learn's ConvergenceWarning). */
static void report_solver(tq_tool *t, const tq_trainer *tr, const tq_train_cfg *c)
{
    tq_train_event ev;
    tq_trainer_solver(tr, &ev);
    char g[32], tol[32];
    sci(g, sizeof g, ev.gmax);
    sci(tol, sizeof tol, c->tol);
    long long it = (long long)ev.epoch;
    const char *its = it == 1 ? "iteration" : "iterations";
    switch (ev.solver_state) {
    case TQ_LBFGS_GTOL:
        tq_tool_log(t, TQ_LOG_INFO, "L-BFGS converged in %lld %s (gradient %s <= tol %s), "
                    "objective %.9g, %lld evaluations", it, its, g, tol, ev.loss, (long long)ev.fevals);
        break;
    case TQ_LBFGS_FTOL:
        tq_tool_log(t, TQ_LOG_INFO, "L-BFGS converged in %lld %s (the objective %.9g fell by less "
                    "than 64 eps of itself; gradient %s)", it, its, ev.loss, g);
        break;
    case TQ_LBFGS_MAXITER:
        tq_tool_log(t, TQ_LOG_WARN, "warning: L-BFGS did not converge in %lld %s (gradient %s > tol "
                    "%s); raise --max-iter", it, its, g, tol);
        break;
    default:
        tq_tool_log(t, TQ_LOG_WARN, "warning: L-BFGS stopped after %lld %s: the line search found "
                    "no step (gradient %s > tol %s); try --standardize", it, its, g, tol);
        break;
    }
}

static int parse_hidden(tq_tool *t, const char *arg, int64_t *h)
{
    int n = 0;
    const char *p = arg;
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 1 || v > 65536 || (*end && *end != ','))
            tq_tool_usage(t, "--hidden wants sizes 1..65536 separated by commas, not '%s'", arg);
        if (n == TQ_TRAIN_MAX_LAYERS - 1)
            tq_tool_usage(t, "--hidden: at most %d layers", TQ_TRAIN_MAX_LAYERS - 1);
        h[n++] = v;
        if (!*end)
            return n;
        p = end + 1;
    }
}

/* What the command line asks for: the frames, the files and the training config. */
struct opts {
    tq_train_names nm;
    const char *valid_path, *ckpt, *resume, *log_path, *plot_path;
    int64_t ckpt_every;
    tq_train_cfg c;
    int tol_given;
    /* the first option given that only the stochastic optimizers take, and
     * the first that only lbfgs takes */
    const char *stoch, *solver;
};

/* Notes an option that only some optimizers take (name: its long name), and --tol. */
static void note_optimizer_option(int opt, const char *name, struct opts *o)
{
    switch (opt) {
    case OPT_LR: case OPT_MOMENTUM: case OPT_BETA1: case OPT_BETA2: case OPT_EPS:
    case OPT_SCHEDULE: case OPT_WARMUP: case OPT_BATCH: case OPT_EPOCHS: case OPT_PATIENCE:
    case OPT_NO_CHANGE:
        if (!o->stoch)
            o->stoch = name;
        break;
    case OPT_PRECISION:
        if (!o->stoch && strcmp(optarg, "f32"))
            o->stoch = name;
        break;
    case OPT_MAX_ITER:
        if (!o->solver)
            o->solver = name;
        break;
    case OPT_TOL:
        o->tol_given = 1;
        break;
    }
}

/* The getopt loop, up to tq_tool_ready (the usage checks wait for MPI). */
static void parse_args(tq_tool *t, int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.c = {.kind = TQ_TRAIN_LOGISTIC, .loss = -1, .act = TQ_ACT_RELU,
                             .optim = -1, .lr = -1, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.999,
                             .eps = 1e-8, .l2 = -1, .wd = -1, .max_iter = 100, .tol = 1e-4,
                             .no_change = -1}};
    tq_train_cfg *c = &o->c;
    static const struct option longopts[] = {
        TQ_COMMON_LONGOPTS,
        {"x", required_argument, NULL, OPT_X},
        {"y", required_argument, NULL, OPT_Y},
        {"group", required_argument, NULL, OPT_GROUP},
        {"weight", required_argument, NULL, OPT_WEIGHT},
        {"valid", required_argument, NULL, OPT_VALID},
        {"model", required_argument, NULL, OPT_MODEL},
        {"hidden", required_argument, NULL, OPT_HIDDEN},
        {"activation", required_argument, NULL, OPT_ACTIVATION},
        {"loss", required_argument, NULL, OPT_LOSS},
        {"classes", required_argument, NULL, OPT_CLASSES},
        {"standardize", no_argument, NULL, OPT_STANDARDIZE},
        {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
        {"lr", required_argument, NULL, OPT_LR},
        {"momentum", required_argument, NULL, OPT_MOMENTUM},
        {"beta1", required_argument, NULL, OPT_BETA1},
        {"beta2", required_argument, NULL, OPT_BETA2},
        {"eps", required_argument, NULL, OPT_EPS},
        {"l2", required_argument, NULL, OPT_L2},
        {"weight-decay", required_argument, NULL, OPT_WD},
        {"schedule", required_argument, NULL, OPT_SCHEDULE},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"epochs", required_argument, NULL, OPT_EPOCHS},
        {"patience", required_argument, NULL, OPT_PATIENCE},
        {"checkpoint", required_argument, NULL, OPT_CHECKPOINT},
        {"checkpoint-every", required_argument, NULL, OPT_CHECKPOINT_EVERY},
        {"resume", required_argument, NULL, OPT_RESUME},
        {"log", required_argument, NULL, OPT_LOG},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"precision", required_argument, NULL, OPT_PRECISION},
        {"max-iter", required_argument, NULL, OPT_MAX_ITER},
        {"tol", required_argument, NULL, OPT_TOL},
        {"C", required_argument, NULL, OPT_C},
        {"n-iter-no-change", required_argument, NULL, OPT_NO_CHANGE},
        {0, 0, 0, 0},
    };
    opterr = 0;
    int opt;
    while ((opt = tq_tool_getopt(t, argc, argv, TQ_COMMON_SHORTOPTS, longopts)) != -1) {
        if (tq_tool_option(t, opt, optarg, help))
            continue;
        /* the long option's index, for messages naming it */
        int li = 0;
        while (longopts[li].name && longopts[li].val != opt)
            li++;
        note_optimizer_option(opt, longopts[li].name, o);
        switch (opt) {
        case OPT_X: o->nm.x = optarg; break;
        case OPT_Y: o->nm.y = optarg; break;
        case OPT_GROUP: o->nm.group = optarg; break;
        case OPT_WEIGHT: o->nm.weight = optarg; break;
        case OPT_VALID: o->valid_path = optarg; break;
        case OPT_MODEL: c->kind = name_arg(t, "--model", optarg, tq_train_kind_names); break;
        case OPT_HIDDEN: c->nhidden = parse_hidden(t, optarg, c->hidden); break;
        case OPT_ACTIVATION: c->act = name_arg(t, "--activation", optarg, tq_train_act_names); break;
        case OPT_LOSS: c->loss = name_arg(t, "--loss", optarg, tq_train_loss_names); break;
        case OPT_CLASSES: c->classes = tq_tool_int_arg(t, "--classes", optarg, 2, 1 << 24); break;
        case OPT_STANDARDIZE: c->standardize = 1; break;
        case OPT_OPTIMIZER: c->optim = name_arg(t, "--optimizer", optarg, tq_train_optim_names); break;
        case OPT_LR: c->lr = real_arg(t, "--lr", optarg, 0, 1e6); break;
        case OPT_MOMENTUM: c->momentum = real_arg(t, "--momentum", optarg, 0, 1); break;
        case OPT_BETA1: c->beta1 = real_arg(t, "--beta1", optarg, 0, 0.999999999); break;
        case OPT_BETA2: c->beta2 = real_arg(t, "--beta2", optarg, 0, 0.999999999); break;
        case OPT_EPS: c->eps = real_arg(t, "--eps", optarg, 1e-30, 1); break;
        case OPT_L2: c->l2 = real_arg(t, "--l2", optarg, 0, 1e6); break;
        case OPT_WD: c->wd = real_arg(t, "--weight-decay", optarg, 0, 1e6); break;
        case OPT_SCHEDULE: c->sched = name_arg(t, "--schedule", optarg, tq_train_sched_names); break;
        case OPT_WARMUP: c->warmup = tq_tool_int_arg(t, "--warmup", optarg, 0, INT64_MAX / 2); break;
        case OPT_BATCH: c->batch = tq_tool_int_arg(t, "--batch", optarg, 1, 1 << 24); break;
        case OPT_EPOCHS: c->epochs = tq_tool_int_arg(t, "--epochs", optarg, 1, 1 << 30); break;
        case OPT_PATIENCE: c->patience = tq_tool_int_arg(t, "--patience", optarg, 1, 1 << 30); break;
        case OPT_CHECKPOINT: o->ckpt = optarg; break;
        case OPT_CHECKPOINT_EVERY: o->ckpt_every = tq_tool_int_arg(t, "--checkpoint-every", optarg, 1, INT64_MAX); break;
        case OPT_RESUME: o->resume = optarg; break;
        case OPT_LOG: o->log_path = optarg; break;
        case OPT_PLOT: o->plot_path = optarg; break;
        case OPT_MAX_ITER: c->max_iter = tq_tool_int_arg(t, "--max-iter", optarg, 1, 1 << 30); break;
        case OPT_TOL: c->tol = real_arg(t, "--tol", optarg, 0, 1e6); break;
        case OPT_NO_CHANGE: c->no_change = tq_tool_int_arg(t, "--n-iter-no-change", optarg, 0, 1 << 30); break;
        case OPT_C: c->C = real_arg(t, "--C", optarg, 1e-300, 1e300); break;
        case OPT_PRECISION: {
            static const char *const precs[] = {"f32", "bf16", "f16", NULL};
            static const tq_dtype dts[] = {TQ_DTYPE_F32, TQ_DTYPE_BF16, TQ_DTYPE_F16};
            c->precision = dts[name_arg(t, "--precision", optarg, precs)];
            break;
        }
        default: tq_tool_usage(t, "unknown option");
        }
    }
    tq_tool_ready(t);
}

/* The usage checks after the loop and the defaults that hang on the optimizer. */
static void settle_args(tq_tool *t, int argc, struct opts *o)
{
    tq_train_cfg *c = &o->c;
    if (argc - optind > 1)
        tq_tool_usage(t, "one input file at most (concatenate streams with tq-cat)");
    if ((o->nm.x && !*o->nm.x) || (o->nm.y && !*o->nm.y) || (o->nm.weight && !*o->nm.weight))
        tq_tool_usage(t, "--x, --y and --weight want a frame name");
    if (o->ckpt_every && !o->ckpt)
        tq_tool_usage(t, "--checkpoint-every needs --checkpoint FILE");
    /* the optimizer: lbfgs for the convex models, to convergence; adam for
     * an mlp, and where an option only the stochastic optimizers take says
     * that is what the command wants (as it did before lbfgs) */
    int chosen = c->optim >= 0;
    if (!chosen)
        c->optim = c->kind != TQ_TRAIN_MLP && !o->stoch ? TQ_OPTIM_LBFGS : TQ_OPTIM_ADAM;
    if (c->optim == TQ_OPTIM_LBFGS && o->stoch)
        tq_tool_usage(t, "--%s is for sgd, adam and adamw; lbfgs runs to convergence (--tol, "
                         "--max-iter)", o->stoch);
    if (c->optim != TQ_OPTIM_LBFGS && o->solver)
        tq_tool_usage(t, "--%s is lbfgs's (--optimizer lbfgs, the default for linear, logistic "
                         "and softmax models)", o->solver);
    /* an MLP's defaults are scikit-learn's MLPClassifier's: batches of
     * min(200, n), up to 200 epochs, stopping after 10 epochs without an
     * improvement by 1e-4; the convex models under sgd, adam and adamw keep
     * tq-train's earlier ones (64, 10 epochs, no such rule) */
    int mlp = c->kind == TQ_TRAIN_MLP;
    if (!c->batch)
        c->batch = mlp ? 200 : 64;
    if (!c->epochs)
        c->epochs = mlp ? 200 : 10;
    if (c->no_change < 0)
        c->no_change = mlp && c->optim != TQ_OPTIM_LBFGS ? 10 : 0;
    if (c->patience && c->no_change)
        c->no_change = 0; /* --patience: the earlier rule, on the validation metric */
    if (o->tol_given && c->optim != TQ_OPTIM_LBFGS && !c->no_change)
        tq_tool_usage(t, "--tol is lbfgs's, or with --n-iter-no-change N the improvement that "
                         "counts");
    if (c->C > 0 && c->l2 >= 0)
        tq_tool_usage(t, "--C and --l2 set one penalty: give one");
    if (c->wd >= 0 && c->optim != TQ_OPTIM_ADAMW)
        tq_tool_usage(t, "--weight-decay is adamw's (for the others, --l2)");
    if (c->wd < 0)
        c->wd = c->optim == TQ_OPTIM_ADAMW ? 0.01 : 0;
    if (c->lr < 0)
        c->lr = c->optim == TQ_OPTIM_SGD ? 0.01 : 0.001;
    c->seed = t->seed;
}

/* The training run's device, data and trainer. */
struct run {
    tq_device *dev;
    tq_train_data train, valid;
    int have_valid;
    tq_trainer *tr;
};

/* The model's weights for d features: an MLP's layers, else one layer. */
static double train_weights(const tq_train_cfg *c, int64_t d)
{
    double w = 0, in = (double)d;
    if (c->kind == TQ_TRAIN_MLP && !c->nhidden) /* the default: one layer */
        w += in * TQ_TRAIN_MLP_HIDDEN, in = TQ_TRAIN_MLP_HIDDEN;
    for (int i = 0; c->kind == TQ_TRAIN_MLP && i < c->nhidden; i++)
        w += in * (double)c->hidden[i], in = (double)c->hidden[i];
    return w + in * (double)(c->classes > 1 ? c->classes : 1);
}

/* Loads the training (and validation) data, opens the device, makes the trainer. */
static void load(tq_tool *t, struct opts *o, const char *in, struct run *r)
{
    r->dev = NULL;
    r->have_valid = 0;
    tq_status st = tq_train_data_load(in, &o->nm, &r->train);
    if (!st) /* the device for the work: rows x weights x epochs (tq(7)) */
        st = tq_tool_device_open(t, tq_work_train((double)r->train.n,
                                                  train_weights(&o->c, r->train.d),
                                                  (double)o->c.epochs), &r->dev);
    if (st)
        fail(t, st);
    if (o->valid_path) {
        tq_train_names vn = o->nm;
        /* each set's frames from its own input; without --x, the validation
         * features default to the name the training set's had */
        if (!o->nm.x)
            vn.x_def = r->train.xname;
        if ((st = tq_train_data_load(o->valid_path, &vn, &r->valid)))
            fail(t, st);
        r->have_valid = 1;
    }
    o->c.dev = r->dev;
    if (mpi_on)
        o->c.comm = &comm;
    if ((st = tq_trainer_new(&o->c, &r->train, r->have_valid ? &r->valid : NULL, &r->tr))) {
        if (st == TQ_ERR_USAGE)
            tq_tool_usage(t, "%s", tq_errmsg());
        fail(t, st);
    }
}

/* Says what the run took and how it will train (-v). */
static void announce(tq_tool *t, const struct run *r, const tq_train_cfg *c)
{
    if (mpi_on && c->optim == TQ_OPTIM_LBFGS)
        tq_tool_log(t, TQ_LOG_INFO, "MPI: %d rank%s, the data's sums in chunks of %d rows", comm.size,
                    comm.size == 1 ? "" : "s", TQ_TRAIN_LBFGS_CHUNK);
    else if (mpi_on)
        tq_tool_log(t, TQ_LOG_INFO, "MPI: %d rank%s, each batch in chunks of %d examples", comm.size,
                    comm.size == 1 ? "" : "s", TQ_TRAIN_CHUNK);
    tq_took took[2] = {{.what = "training features", .name = r->train.xname, .from = r->train.from,
                        .rank = 2, .dims = {r->train.n, r->train.d}}};
    if (r->have_valid)
        took[1] = (tq_took){.what = "validation features", .name = r->valid.xname,
                            .from = r->valid.from, .rank = 2, .dims = {r->valid.n, r->valid.d}};
    tq_tool_took(t, took, r->have_valid ? 2 : 1);
    tq_tool_log(t, TQ_LOG_INFO, "%lld examples of %lld features (\"%s\")%s; %s; device %s, threads %d",
                (long long)r->train.n, (long long)r->train.d, r->train.xname,
                r->have_valid ? ", with validation" : "", tq_trainer_describe(r->tr),
                tq_device_name(r->dev), tq_threads_get());
}

/* The solver's stopping rule and the head of the table of epochs (-v). */
static void log_header(tq_tool *t, const tq_train_cfg *c, const struct run *r)
{
    const tq_trainer *tr = r->tr;
    int have_valid = r->have_valid;
    int lbfgs = c->optim == TQ_OPTIM_LBFGS;
    if (lbfgs)
        tq_tool_log(t, TQ_LOG_INFO, "L-BFGS (memory 10, strong Wolfe line search) to max |gradient| "
                    "<= %g, at most %lld iterations; l2 %.6g%s", c->tol, (long long)c->max_iter,
                    tq_trainer_l2(tr), c->C > 0 ? " (--C)" : c->l2 < 0 && tq_trainer_l2(tr) > 0
                    ? " (scikit-learn's C = 1)" : "");
    if (!lbfgs && c->no_change)
        tq_tool_log(t, TQ_LOG_INFO, "batches of %lld, up to %lld epochs, stopping after %lld "
                    "without the %s improving by %g", (long long)c->batch, (long long)c->epochs,
                    (long long)c->no_change, have_valid ? tq_trainer_metric_name(tr) : "training loss",
                    c->tol);
    if (lbfgs && have_valid)
        tq_tool_log(t, TQ_LOG_INFO, "%6s %7s %14s %10s %10s %12s %10s %8s", "iter", "f-evals",
                    "objective", "gradient", "step", "valid loss", tq_trainer_metric_name(tr),
                    "seconds");
    else if (lbfgs)
        tq_tool_log(t, TQ_LOG_INFO, "%6s %7s %14s %10s %10s %8s", "iter", "f-evals", "objective",
                    "gradient", "step", "seconds");
    else if (have_valid)
        tq_tool_log(t, TQ_LOG_INFO, "%6s %9s %10s %12s %12s %10s %10s %8s", "epoch", "step",
                    "examples", "train loss", "valid loss", tq_trainer_metric_name(tr), "lr", "seconds");
    else
        tq_tool_log(t, TQ_LOG_INFO, "%6s %9s %10s %12s %10s %8s", "epoch", "step", "examples",
                    "train loss", "lr", "seconds");
}

/* One row of the table at an epoch's end (-v), and why the run stopped early. */
static void log_epoch(tq_tool *t, const tq_train_cfg *c, const struct run *r,
                      const tq_train_event *e, double t0)
{
    const tq_train_event ev = *e;
    const tq_trainer *tr = r->tr;
    int have_valid = r->have_valid;
    int lbfgs = c->optim == TQ_OPTIM_LBFGS;
    if (lbfgs && ev.has_valid)
        tq_tool_log(t, TQ_LOG_INFO, "%6lld %7lld %14.9g %10.3g %10.3g %12.6g %10.6g %8.3f",
                    (long long)ev.step, (long long)ev.fevals, ev.loss, ev.gmax, ev.step_len,
                    ev.valid_loss, ev.valid_metric, tq_tool_now() - t0);
    else if (lbfgs)
        tq_tool_log(t, TQ_LOG_INFO, "%6lld %7lld %14.9g %10.3g %10.3g %8.3f", (long long)ev.step,
                    (long long)ev.fevals, ev.loss, ev.gmax, ev.step_len, tq_tool_now() - t0);
    else if (ev.has_valid)
        tq_tool_log(t, TQ_LOG_INFO, "%6lld %9lld %10lld %12.6g %12.6g %10.6g %10.4g %8.3f%s",
                    (long long)ev.epoch, (long long)ev.step, (long long)ev.examples,
                    ev.train_loss, ev.valid_loss, ev.valid_metric, ev.lr, tq_tool_now() - t0,
                    ev.improved ? " *" : "");
    else
        tq_tool_log(t, TQ_LOG_INFO, "%6lld %9lld %10lld %12.6g %10.4g %8.3f", (long long)ev.epoch,
                    (long long)ev.step, (long long)ev.examples, ev.train_loss, ev.lr,
                    tq_tool_now() - t0);
    if (ev.stopped && c->patience)
        tq_tool_log(t, TQ_LOG_INFO, "stopped early: no better %s for %lld epochs",
                    tq_trainer_metric_name(tr), (long long)c->patience);
    else if (ev.stopped)
        tq_tool_log(t, TQ_LOG_INFO, "stopped early: the %s did not improve by %g for %lld "
                    "epochs%s", have_valid ? tq_trainer_metric_name(tr) : "training loss",
                    c->tol, (long long)c->no_change,
                    have_valid ? "; the best epoch's model kept" : "");
}

int main(int argc, char **argv)
{
    tq_tool t;
    tq_tool_init(&t, "tq-train");
    struct opts o;
    parse_args(&t, argc, argv, &o);
    tq_status mst = tq_train_mpi_join(&argc, &argv, &comm);
    if (mst)
        tq_tool_fail(&t, mst);
    mpi_on = tq_train_mpi_on();
    int writer = comm.rank == 0; /* rank 0 writes the model, checkpoints and curves */
    if (!writer)
        t.log_level = TQ_LOG_ERROR, t.progress = 0;
    settle_args(&t, argc, &o);
    tq_train_cfg *c = &o.c;
    const char *ckpt = o.ckpt, *resume = o.resume, *log_path = o.log_path, *plot_path = o.plot_path;
    int64_t ckpt_every = o.ckpt_every;
    const char *in = argc > optind ? argv[optind] : "-";
    /* every file written after training must be creatable before it starts */
    const char *outs[] = {t.output, ckpt, log_path, plot_path};
    for (int i = 0; i < 4 && writer; i++) {
        tq_status ost = tq_tool_output_creatable(outs[i]);
        if (ost)
            fail(&t, ost);
    }

    struct run run;
    load(&t, &o, in, &run);
    tq_trainer *tr = run.tr;
    announce(&t, &run, &o.c);
    tq_status st;
    if (resume) {
        if ((st = tq_trainer_resume(tr, resume)))
            fail(&t, st);
        tq_tool_log(&t, TQ_LOG_INFO, "resumed from %s at step %lld", resume,
                    (long long)tq_trainer_step_count(tr));
    }
    tq_writer *w = NULL;
    if (writer && (st = tq_tool_open_output(&t, &w)))
        fail(&t, st);
    double t0 = tq_tool_now();
    int64_t per_epoch = tq_trainer_steps_per_epoch(tr);
    int lbfgs = c->optim == TQ_OPTIM_LBFGS;
    log_header(&t, c, &run);
    /* a test hook: TQ_TRAIN_TEST_CRASH=N kills the process (SIGKILL) in the
     * middle of writing the N-th checkpoint of this run */
    const char *crash = getenv("TQ_TRAIN_TEST_CRASH");
    int64_t crash_at = crash ? atoll(crash) : 0, ckpts = 0;
    int64_t skipped = 0;
    double scale = 1;
    tq_train_event ev;
    tq_train_curve curve = {.loss = -1};
    snprintf(curve.metric, sizeof curve.metric, "%s", tq_trainer_metric_name(tr));
    snprintf(curve.title, sizeof curve.title, "tq-train: %s", tq_trainer_describe(tr));
    while ((st = tq_trainer_step(tr, &ev)) == TQ_OK) {
        if ((log_path || plot_path) && (st = tq_train_curve_add(&curve, &ev, tq_tool_now() - t0)))
            break;
        skipped += ev.skipped;
        scale = ev.loss_scale;
        if (lbfgs)
            tq_tool_progress(&t, "iteration %lld/%lld, objective %.6g, gradient %.2g",
                             (long long)ev.step, (long long)c->max_iter, ev.loss, ev.gmax);
        else
            tq_tool_progress(&t, "epoch %lld/%lld, step %lld, loss %.5g", (long long)ev.epoch,
                         (long long)c->epochs, (long long)(ev.step - (ev.epoch - 1) * per_epoch),
                         ev.loss);
        if (writer && ckpt && (ev.epoch_end || (ckpt_every && ev.step % ckpt_every == 0))) {
            if (crash_at && ++ckpts == crash_at)
                st = tq_trainer_checkpoint(tr, ckpt, crash_now);
            else
                st = tq_trainer_checkpoint(tr, ckpt, NULL);
            if (st)
                break;
        }
        if (!ev.epoch_end)
            continue;
        log_epoch(&t, c, &run, &ev, t0);
    }
    tq_tool_progress_done(&t);
    if (st == TQ_EOF && lbfgs)
        report_solver(&t, tr, c);
    if (st == TQ_EOF)
        st = writer ? tq_trainer_write_model(tr, w) : TQ_OK;
    curve.loss = tq_trainer_loss(tr);
    if (!st && writer && log_path)
        st = tq_train_curve_write(&curve, log_path);
    if (!st && writer && plot_path)
        st = tq_train_curve_plot(&curve, plot_path);
    tq_train_curve_free(&curve);
    tq_status cst = tq_writer_close(w, !st);
    if (!st)
        st = cst;
    if (!st && c->precision == TQ_DTYPE_F16)
        tq_tool_log(&t, TQ_LOG_INFO, "f16 loss scale %g at the end, %lld step%s skipped on overflow",
                    scale, (long long)skipped, skipped == 1 ? "" : "s");
    if (!st)
        tq_tool_log(&t, TQ_LOG_INFO, "trained in %.4f s", tq_tool_now() - t0);
    tq_trainer_free(tr);
    tq_train_data_free(&run.train);
    if (run.have_valid)
        tq_train_data_free(&run.valid);
    tq_device_close(run.dev);
    if (st)
        fail(&t, st);
    tq_train_mpi_finish();
    return 0;
}
