/* tools.c: tq-bench --tools: the main pipelines timed as whole processes, as
 * a user runs them, on inputs generated in a scratch folder: text lines (a
 * tenth of them repeats of earlier ones, for dedup and threshold to find),
 * their hash embeddings, then similarity search, the full matrix, threshold,
 * dedup and attention on those. Each tool is run once to warm up (page
 * cache, first loads), then timed as tqb_time times an op. */
#include "bench.h"
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct proc {
    char *argv[16];
    const char *in, *out, *err; /* paths for standard input, output, error */
} proc;

/* Runs the process to its end: TQ_OK when it exits 0. */
static tq_status run_proc(void *ctx)
{
    proc *p = ctx;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, p->in ? p->in : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, p->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, p->argv[0], &fa, NULL, p->argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc)
        return tq_fail(TQ_ERR_RUNTIME, "%s: cannot run: %s", p->argv[0], strerror(rc));
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return tq_fail(TQ_ERR_RUNTIME, "%s: wait failed: %s", p->argv[0], strerror(errno));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return TQ_OK;
    char line[256] = "";
    FILE *e = fopen(p->err, "r");
    if (e) {
        if (!fgets(line, sizeof line, e))
            line[0] = 0;
        line[strcspn(line, "\n")] = 0;
        fclose(e);
    }
    return tq_fail(TQ_ERR_RUNTIME, "%s failed (status %d)%s%s", p->argv[0],
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                   line[0] ? ": " : "", line);
}

/* n lines of words from a vocabulary of 3000; every tenth line repeats an
 * earlier one. */
static tq_status write_text(const char *path, int64_t n, int64_t *bytes)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return tq_fail(TQ_ERR_CANTCREATE, "%s: cannot create: %s", path, strerror(errno));
    uint64_t s = 0x2545f4914f6cdd1du;
    uint64_t *seeds = malloc((size_t)(n ? n : 1) * sizeof *seeds);
    if (!seeds) {
        fclose(f);
        return tq_fail(TQ_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        seeds[i] = i % 10 == 9 ? seeds[(int64_t)(s % (uint64_t)i)] : s;
        uint64_t w = seeds[i];
        int words = 8 + (int)(w % 13);
        for (int k = 0; k < words; k++) {
            w ^= w << 13, w ^= w >> 7, w ^= w << 17;
            fprintf(f, "%sw%u", k ? " " : "", (unsigned)(w % 3000));
        }
        fputc('\n', f);
    }
    free(seeds);
    *bytes = ftell(f);
    if (fclose(f) || *bytes < 0)
        return tq_fail(TQ_ERR_IO, "%s: write failed", path);
    return TQ_OK;
}

typedef struct step {
    const char *label;   /* the row's op */
    const char *tool;
    const char *args[10];
    const char *in;      /* file name in the scratch folder */
    const char *out;
    int small;           /* on the smaller input */
} step;

/* TQ_BENCH_TOOLS_ROWS: rows of the generated text (for the tests; the
 * default is the stated size of the man page). */
static int64_t rows_wanted(void)
{
    const char *e = getenv("TQ_BENCH_TOOLS_ROWS");
    long long v = e ? atoll(e) : 0;
    return v >= 100 && v <= 100000000 ? v : 20000;
}

tq_status tqb_tools_run(const char *bindir, int reps, tqb_result **rows, int *nrows, int *nfailed,
                        FILE *log)
{
    int64_t n = rows_wanted(), n_small = n / 5 > 100 ? n / 5 : 100;
    static const step steps[] = {
        {"tq-embed hash:384", "tq-embed", {"-m", "hash:384", "--progress", "never"}, "docs.txt",
         "emb.tq", 0},
        {"tq-embed hash:384", "tq-embed", {"-m", "hash:384", "--progress", "never"}, "small.txt",
         "small.tq", 1},
        {"tq-simmat top-10", "tq-simmat", {"-k", "10", "--progress", "never"}, "emb.tq", "topk.tq", 0},
        {"tq-simmat threshold 0.9", "tq-simmat", {"--threshold", "0.9", "--progress", "never"},
         "emb.tq", "pairs.tq", 0},
        {"tq-simmat dedup 0.95", "tq-simmat", {"--dedup", "0.95", "--progress", "never"}, "emb.tq",
         "dedup.tq", 0},
        {"tq-simmat full matrix", "tq-simmat", {"--progress", "never"}, "small.tq", "full.tq", 1},
        {"tq-attend 8 heads", "tq-attend", {"--self", "--heads", "8", "--progress", "never"},
         "small.tq", "att.tq", 1},
        /* once they exist beside tq-bench (their options as their --help gives
         * them): int8 codes of the embeddings; a linear model of 2 epochs on
         * them, the line numbers as targets */
        {"tq-quantize int8", "tq-quantize", {"--to", "int8", "--progress", "never"}, "emb.tq",
         "q8.tq", 0},
        {"tq-train linear 2 epochs", "tq-train",
         {"--model", "linear", "--y", "key", "--epochs", "2", "--progress", "never"}, "emb.tq",
         "model.tq", 0},
    };
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/tq-bench-tools.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return tq_fail(TQ_ERR_CANTCREATE, "cannot make a scratch folder: %s", strerror(errno));
    char path[4200], in[4200], out[4200], err[4200], exe[4200];
    int64_t bytes, small_bytes;
    snprintf(path, sizeof path, "%s/docs.txt", dir);
    tq_status st = write_text(path, n, &bytes);
    snprintf(path, sizeof path, "%s/small.txt", dir);
    if (!st)
        st = write_text(path, n_small, &small_bytes);
    snprintf(err, sizeof err, "%s/stderr", dir);
    for (size_t i = 0; !st && i < sizeof steps / sizeof steps[0]; i++) {
        const step *s = &steps[i];
        snprintf(exe, sizeof exe, "%s/%s", bindir, s->tool);
        if (access(exe, X_OK)) {
            if (log)
                fprintf(log, "tq-bench: warning: --tools: %s is not beside tq-bench: not timed\n",
                        s->tool);
            continue;
        }
        snprintf(in, sizeof in, "%s/%s", dir, s->in);
        snprintf(out, sizeof out, "%s/%s", dir, s->out);
        proc p = {{exe}, in, out, err};
        for (int a = 0; a < 10 && s->args[a]; a++)
            p.argv[a + 1] = (char *)s->args[a];
        tqb_result *nr = realloc(*rows, (size_t)(*nrows + 1) * sizeof *nr);
        if (!nr) {
            st = tq_fail(TQ_ERR_NOMEM, "out of memory");
            break;
        }
        *rows = nr;
        tqb_result *r = &nr[*nrows];
        memset(r, 0, sizeof *r);
        if ((st = tqb_time(run_proc, &p, NULL, reps, 0, &r->t))) {
            /* a tool that fails costs its row, not the others */
            if (log)
                fprintf(log, "tq-bench: warning: --tools: %s\n", tq_errmsg());
            st = TQ_OK;
            ++*nfailed;
            continue;
        }
        int64_t rows_in = s->small ? n_small : n;
        snprintf(r->device, sizeof r->device, "process");
        snprintf(r->op, sizeof r->op, "%s", s->label);
        snprintf(r->shape, sizeof r->shape, "%lld lines", (long long)rows_in);
        snprintf(r->dtype, sizeof r->dtype, "f32");
        r->n = rows_in;
        r->bytes = (double)(s->small ? small_bytes : bytes);
        r->unit = "rows/s";
        r->rate = (double)rows_in / r->t.median;
        ++*nrows;
    }
    /* the scratch files; the folder */
    static const char *const files[] = {"docs.txt", "small.txt", "emb.tq", "small.tq", "topk.tq",
                                        "pairs.tq", "dedup.tq", "full.tq", "att.tq", "q8.tq",
                                        "model.tq", "stderr"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    return st;
}
