/* bert_relpos.c: MPNet's relative position bias, as transformers'
 * MPNetEncoder computes it: key j's offset from query i, j - i, falls in one
 * of 32 buckets (half for keys before the query, half after; exact up to 8
 * apart, then logarithmic up to 128), and each head adds its learned value
 * for the bucket to the scaled scores of every layer. */
#include "bert.h"

#include <math.h>

/* MPNetEncoder.relative_position_bucket with its defaults: it calls it with
 * num_buckets = 32 whatever relative_attention_num_buckets says, and
 * max_distance 128. The logarithm runs in f32, as torch's on a float
 * tensor does, and is truncated toward zero as .to(torch.long) does. */
static int64_t bucket(int64_t rel)
{
    const int64_t half = 16, exact = 8;
    int64_t n = -rel, b = n < 0 ? half : 0;
    n = n < 0 ? -n : n;
    if (n < exact)
        return b + n;
    float lg = logf((float)n / (float)exact) / (float)log(128.0 / 8.0) * (float)(half - exact);
    int64_t large = exact + (int64_t)lg;
    return b + (large < half - 1 ? large : half - 1);
}

void tq_bert_rel_bias(const bert_model *m, int64_t len, float *bias)
{
    int64_t H = m->cfg.heads, nb = m->cfg.rel_buckets;
    /* one row of buckets per offset, -(len - 1) .. len - 1 */
    for (int64_t i = 0; i < len; i++)
        for (int64_t j = 0; j < len; j++) {
            int64_t k = bucket(j - i);
            for (int64_t h = 0; h < H; h++) /* a bucket past the table: no bias */
                bias[(h * len + i) * len + j] = k < nb ? m->rel_table[k * H + h] : 0.0f;
        }
}
