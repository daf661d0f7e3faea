/* bert-wemb DIR8: the word-embedding rows that an int8 folder of tq-quantize
 * --model gives the encoder for the token ids on stdin (whitespace
 * separated), one row a line ("%.9g", space-separated: f32's values exactly),
 * through the lookup tq-embed runs (tq_bert_wemb_lookup), for the tests to
 * compare with their own decoding of the file. Errors: "bert-wemb: MESSAGE"
 * and the exit status of the tq_status. */
#include "embed/bert.h"

#include <stdio.h>
#include <stdlib.h>

static int fail(tq_status st)
{
    fprintf(stderr, "bert-wemb: %s\n", tq_errmsg());
    return tq_status_exit_code(st);
}

int main(int c, char **v)
{
    if (c != 2) {
        fprintf(stderr, "usage: bert-wemb DIR8 < ids\n");
        return 2;
    }
    tq_device *dev = NULL;
    bert_config cfg;
    bert_model *m = NULL;
    tq_status st = tq_device_open("cpu", &dev);
    if (st)
        return fail(st);
    if ((st = tq_bert_config_load(v[1], &cfg))) {
        tq_device_close(dev);
        return fail(st);
    }
    cfg.prec = TQ_DTYPE_I8; /* the folder's stored codes, as tq-embed loads them */
    if ((st = tq_bert_model_load(&cfg, dev, &m))) { /* takes cfg over */
        tq_device_close(dev);
        return fail(st);
    }
    int64_t n = 0, cap = 16, H = m->cfg.hidden;
    int64_t *ids = malloc((size_t)cap * sizeof *ids);
    long long id;
    while (ids && scanf("%lld", &id) == 1) {
        if (n == cap) {
            int64_t *more = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!more) {
                free(ids);
                ids = NULL;
                break;
            }
            ids = more;
        }
        ids[n++] = id;
    }
    tq_tensor *idx = NULL, *x = NULL;
    int64_t dx[2] = {n, H};
    st = ids ? TQ_OK : tq_fail(TQ_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < n; i++) /* as tq_bert_forward checks them */
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab)
            st = tq_fail(TQ_ERR_DATA, "token id %lld outside the vocabulary of %lld",
                         (long long)ids[i], (long long)m->cfg.vocab);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_I64, 1, &n, &idx);
    if (!st)
        st = tq_tensor_upload(idx, ids, (size_t)n * sizeof *ids);
    if (!st)
        st = tq_tensor_new(dev, TQ_DTYPE_F32, 2, dx, &x);
    if (!st)
        st = tq_bert_wemb_lookup(m, idx, x);
    float *y = st ? NULL : malloc((size_t)(n * H) * sizeof *y + 1);
    if (!st && !y)
        st = tq_fail(TQ_ERR_NOMEM, "out of memory");
    if (!st)
        st = tq_tensor_download(x, y, (size_t)(n * H) * sizeof *y);
    for (int64_t i = 0; !st && i < n; i++)
        for (int64_t j = 0; j < H; j++)
            printf("%.9g%c", y[i * H + j], j + 1 < H ? ' ' : '\n');
    int rc = st ? fail(st) : 0;
    free(y);
    free(ids);
    tq_tensor_free(idx);
    tq_tensor_free(x);
    tq_bert_model_free(m);
    tq_device_close(dev);
    return rc;
}
