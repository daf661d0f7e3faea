/* bert-embed FOLDER [BATCH [DEVICE]]: embeds each stdin line with the model
 * folder's embedder, BATCH lines per call (default 32), and prints one vector
 * a line ("%.9g", space-separated), for the tests to compare with a reference.
 * Errors: "bert-embed: MESSAGE" and the exit status of the tq_status. */
#include "embed/embed.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(void)
{
    fprintf(stderr, "bert-embed: %s\n", tq_errmsg());
    return 0;
}

static tq_status flush(tq_embedder *e, int64_t n, char **lines, size_t *lens, float *out)
{
    tq_status st = tq_embedder_run(e, n, (const char *const *)lines, lens, out);
    int64_t dim = tq_embedder_dim(e);
    for (int64_t i = 0; !st && i < n; i++)
        for (int64_t d = 0; d < dim; d++)
            printf("%.9g%c", out[i * dim + d], d + 1 < dim ? ' ' : '\n');
    for (int64_t i = 0; i < n; i++)
        free(lines[i]);
    return st;
}

int main(int c, char **v)
{
    if (c < 2) {
        fprintf(stderr, "usage: bert-embed FOLDER [BATCH [DEVICE]]\n");
        return 2;
    }
    int batch = c > 2 ? atoi(v[2]) : 32;
    if (batch < 1)
        batch = 1;
    tq_device *dev = NULL;
    tq_embedder *e = NULL;
    tq_status st = tq_device_open(c > 3 ? v[3] : "cpu", &dev);
    if (!st)
        st = tq_embedder_open(v[1], dev, &e);
    if (st) {
        fail();
        tq_device_close(dev);
        return tq_status_exit_code(st);
    }
    char **lines = calloc((size_t)batch, sizeof *lines);
    size_t *lens = calloc((size_t)batch, sizeof *lens);
    float *out = malloc((size_t)batch * (size_t)tq_embedder_dim(e) * sizeof *out);
    int64_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    while (!st && (got = getline(&line, &cap, stdin)) >= 0) {
        if (got > 0 && line[got - 1] == '\n')
            got--;
        lines[n] = malloc((size_t)got + 1);
        memcpy(lines[n], line, (size_t)got);
        lens[n++] = (size_t)got;
        if (n == batch) {
            st = flush(e, n, lines, lens, out);
            n = 0;
        }
    }
    if (!st && n)
        st = flush(e, n, lines, lens, out);
    if (st)
        fail();
    free(line);
    free(lines);
    free(lens);
    free(out);
    tq_embedder_close(e);
    tq_device_close(dev);
    return tq_status_exit_code(st);
}
