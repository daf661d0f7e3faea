/* fasttext.h: a loaded fastText model (.bin or .ftz), shared by the file reader
 * (fasttext_model.c) and the sentence-vector code (fasttext.c). */
#ifndef TQ_EMBED_FASTTEXT_H
#define TQ_EMBED_FASTTEXT_H

#include "embed.h"

#include <stddef.h>
#include <stdint.h>

enum { FT_MODEL_CBOW = 1, FT_MODEL_SG = 2, FT_MODEL_SUP = 3 };
enum { FT_WORD = 0, FT_LABEL = 1 };

typedef struct ft_model {
    tq_embedder base;
    const unsigned char *map; /* the whole file, mapped read-only */
    size_t size;
    /* args */
    int32_t dim, word_ngrams, model, bucket, minn, maxn;
    /* dictionary: entries point into the map (words are NUL-terminated there) */
    int32_t nentries, nwords, nlabels;
    const char **word;
    uint32_t *wlen;
    int8_t *wtype;
    int32_t *table; /* open addressing on the fastText hash; -1 = empty */
    uint32_t tmask;
    int64_t pruneidx_size;  /* -1: not pruned */
    int32_t *prune_from;    /* sorted, unique */
    int32_t *prune_to;
    int64_t nprune;
    /* input matrix: rows x dim, dense floats or product-quantized codes */
    int64_t rows;
    int quant;
    const unsigned char *dense;
    int qnorm;
    const unsigned char *codes, *norm_codes;
    int32_t nsubq, dsub, lastdsub;
    float *centroids;       /* dim * 256 */
    float norm_centroids[256];
} ft_model;

/* Maps and checks PATH; fills m (whose base the caller sets up). */
tq_status ft_model_load(ft_model *m, const char *path);
void ft_model_free(ft_model *m);

/* fastText's string hash: FNV-1a over bytes taken as signed chars. */
static inline uint32_t ft_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint32_t)(int32_t)(signed char)s[i];
        h *= 16777619u;
    }
    return h;
}

/* Entry index of a word, or -1. */
int32_t ft_lookup(const ft_model *m, const char *s, size_t n, uint32_t h);

#endif
