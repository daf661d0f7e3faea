/* names.c: the names of models, losses, optimizers, schedules and
 * activations, as the options, the model files and the checkpoints spell
 * them: one table for the loop (train.c), the writers (save.c,
 * checkpoint.c) and the tool, so the writers need not call the loop. */
#include "../internal.h"
#include "train.h"

const char *const tq_train_kind_names[] = {"linear", "logistic", "softmax", "mlp", NULL};
const char *const tq_train_loss_names[] = {"mse", "logistic", "softmax", "listwise", NULL};
const char *const tq_train_optim_names[] = {"sgd", "adam", "adamw", "lbfgs", NULL};
const char *const tq_train_sched_names[] = {"constant", "linear", "cosine", NULL};
const char *const tq_train_act_names[] = {"relu", "tanh", "sigmoid", "gelu", NULL};

int tq_train_pick(const char *s, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}
