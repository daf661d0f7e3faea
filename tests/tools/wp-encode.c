/* wp-encode VOCAB [MAX_LEN [LOWER]]: prints the WordPiece ids of each stdin line,
 * space-separated, for the tests to compare with the reference tokenizer. */
#include "embed/wordpiece.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int c, char **v)
{
    if (c < 2) {
        fprintf(stderr, "usage: wp-encode VOCAB [MAX_LEN [LOWER]]\n");
        return 2;
    }
    tq_wordpiece_opts o = {c > 3 ? atoi(v[3]) : 1, -1, 1};
    tq_wordpiece *wp;
    if (tq_wordpiece_load(v[1], &o, &wp)) {
        fprintf(stderr, "wp-encode: %s\n", tq_errmsg());
        return 1;
    }
    int maxlen = c > 2 ? atoi(v[2]) : 512;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)maxlen);
    while (ids && (n = getline(&line, &cap, stdin)) > 0) {
        if (line[n - 1] == '\n')
            n--;
        int k;
        if (tq_wordpiece_encode(wp, line, (size_t)n, ids, maxlen, &k)) {
            fprintf(stderr, "wp-encode: %s\n", tq_errmsg());
            return 1;
        }
        for (int i = 0; i < k; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    free(ids);
    free(line);
    tq_wordpiece_free(wp);
    return 0;
}
