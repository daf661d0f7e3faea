/* hash.c: placeholder until the feature-hashing embedder lands. */
#include "embed.h"

tq_status tq_embed_hash_open(const char *args, tq_embedder **e)
{
    (void)args;
    (void)e;
    return tq_fail(TQ_ERR_USAGE, "hash embedder not built yet");
}
