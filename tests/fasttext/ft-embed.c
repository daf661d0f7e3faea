/* ft-embed.c: test driver: opens an embedder by spec (argv[1]) through the
 * library and prints one vector per stdin line, "%.9g" space-separated.
 * Exit status follows tq_status_exit_code; the error goes to stderr on one line.
 * FT_EMBED_QUIET=1 skips the printing (to time the embedding alone). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embed/embed.h"

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: ft-embed MODEL [THREADS] < lines\n");
        return 2;
    }
    if (argc == 3)
        tq_threads_set(atoi(argv[2]));
    tq_embedder *e;
    tq_status st = tq_embedder_open(argv[1], NULL, &e);
    if (st) {
        fprintf(stderr, "ft-embed: error: %s\n", tq_errmsg());
        return tq_status_exit_code(st);
    }
    int64_t dim = tq_embedder_dim(e), cap = 4096, n = 0;
    char **text = malloc(cap * sizeof *text);
    size_t *len = malloc(cap * sizeof *len);
    char *line = NULL;
    size_t lcap = 0;
    ssize_t got;
    int rc = 0, quiet = getenv("FT_EMBED_QUIET") && !strcmp(getenv("FT_EMBED_QUIET"), "1");
    for (;;) {
        got = getline(&line, &lcap, stdin);
        if (got >= 0) {
            if (got && line[got - 1] == '\n')
                got--;
            text[n] = malloc((size_t)got + 1);
            memcpy(text[n], line, (size_t)got);
            len[n++] = (size_t)got;
        }
        if (n == cap || (got < 0 && n)) {
            float *out = malloc((size_t)(n * dim) * sizeof *out);
            st = tq_embedder_run(e, n, (const char *const *)text, len, out);
            if (st) {
                fprintf(stderr, "ft-embed: error: %s\n", tq_errmsg());
                rc = tq_status_exit_code(st);
            }
            for (int64_t r = 0; r < n && !rc && !quiet; r++)
                for (int64_t j = 0; j < dim; j++)
                    printf("%.9g%c", out[r * dim + j], j + 1 == dim ? '\n' : ' ');
            for (int64_t r = 0; r < n; r++)
                free(text[r]);
            free(out);
            n = 0;
        }
        if (got < 0 || rc)
            break;
    }
    free(line);
    free(text);
    free(len);
    tq_embedder_close(e);
    return rc;
}
