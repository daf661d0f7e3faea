/* tok-encode FOLDER [MAX_LEN [pair]]: prints the tokenizer's ids of each
 * stdin line (the folder's tokenizer.json, else its vocab.txt), space-
 * separated, then " | 1" when the text was cut; with "pair", lines go two by
 * two (a text and its pair) and a second line gives the token type ids. For
 * the tests to compare with the tokenizers library. */
#include "embed/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_line(char **line, size_t *cap, size_t *len)
{
    ssize_t n = getline(line, cap, stdin);
    if (n < 0)
        return NULL;
    if (n > 0 && (*line)[n - 1] == '\n')
        n--;
    *len = (size_t)n;
    char *s = malloc((size_t)n + 1);
    if (s) {
        memcpy(s, *line, (size_t)n);
        s[n] = 0;
    }
    return s;
}

int main(int c, char **v)
{
    if (c < 2) {
        fprintf(stderr, "usage: tok-encode FOLDER [MAX_LEN [pair]]\n");
        return 2;
    }
    tq_wordpiece_opts o = {1, -1, 1};
    tq_tokenizer *t;
    tq_status st = tq_tokenizer_open(v[1], &o, &t);
    if (st) {
        fprintf(stderr, "tok-encode: %s\n", tq_errmsg());
        return tq_status_exit_code(st);
    }
    int maxlen = c > 2 ? atoi(v[2]) : 512, pair = c > 3 && !strcmp(v[3], "pair");
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(maxlen + 1));
    int32_t *types = malloc(sizeof(int32_t) * (size_t)(maxlen + 1));
    char *line = NULL, *a, *b = NULL;
    size_t cap = 0, alen, blen = 0;
    while (!st && ids && types && (a = read_line(&line, &cap, &alen))) {
        if (pair && !(b = read_line(&line, &cap, &blen))) {
            free(a);
            break;
        }
        int k, cut;
        st = pair ? tq_tokenizer_encode_pair(t, a, alen, b, blen, ids, types, maxlen, &k, &cut)
                  : tq_tokenizer_encode(t, a, alen, ids, maxlen, &k, &cut);
        free(a);
        free(b);
        b = NULL;
        if (st)
            break;
        for (int i = 0; i < k; i++)
            printf("%s%d", i ? " " : "", ids[i]);
        printf("%s\n", cut ? " | 1" : "");
        for (int i = 0; pair && i < k; i++)
            printf("%d%s", types[i], i + 1 < k ? " " : "");
        if (pair)
            printf("\n");
    }
    if (st)
        fprintf(stderr, "tok-encode: %s\n", tq_errmsg());
    free(ids);
    free(types);
    free(line);
    tq_tokenizer_free(t);
    return st ? tq_status_exit_code(st) : 0;
}
