/* embed.c: picks the embedder a model spec names: hash:DIM, a fastText binary
 * (by its magic number), text word vectors (.vec), or a model folder. */
#include "embed.h"
#include "../internal.h"

#include <errno.h>
#include <sys/stat.h>

#define FASTTEXT_MAGIC 793712314 /* first int32 of fastText .bin and .ftz files */

tq_status tq_embedder_open(const char *spec, tq_device *dev, tq_embedder **e)
{
    if (!spec || !*spec)
        spec = "hash:384";
    if (!strncmp(spec, "hash:", 5) || !strcmp(spec, "hash"))
        return tq_embed_hash_open(spec[4] == ':' ? spec + 5 : "", e);
    struct stat sb;
    if (stat(spec, &sb))
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open model: %s", spec, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return tq_embed_bert_open(spec, dev, e);
    FILE *f = fopen(spec, "rb");
    if (!f)
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open model: %s", spec, strerror(errno));
    unsigned char m[4] = {0};
    size_t got = fread(m, 1, 4, f);
    fclose(f);
    if (got == 4 && (int32_t)tq_le32(m) == FASTTEXT_MAGIC)
        return tq_embed_fasttext_open(spec, e);
    return tq_embed_vec_open(spec, e);
}

void tq_embedder_close(tq_embedder *e)
{
    if (e)
        e->ops->close(e);
}
