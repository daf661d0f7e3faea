/* fasttext.c: placeholder until the fastText reader lands. */
#include "embed.h"

tq_status tq_embed_fasttext_open(const char *path, tq_embedder **e)
{
    (void)e;
    return tq_fail(TQ_ERR_DATA, "%s: fastText models are not supported yet", path);
}

tq_status tq_embed_vec_open(const char *path, tq_embedder **e)
{
    (void)e;
    return tq_fail(TQ_ERR_DATA, "%s: .vec word vectors are not supported yet", path);
}
