/* embed.c: picks the embedder a model spec names: hash:DIM, a fastText binary
 * (by its magic number), text word vectors (.vec), or a model folder. */
#include "embed.h"
#include "../internal.h"

#include <errno.h>
#include <sys/stat.h>

#define FASTTEXT_MAGIC 793712314 /* first int32 of fastText .bin and .ftz files */

tq_status tq_embedder_open(const char *spec, tq_device *dev, tq_embedder **e)
{
    return tq_embedder_open_prec(spec, dev, TQ_DTYPE_F32, NULL, 0, e);
}

/* Where bf16/f16 operands are multiplied as such: the CUDA and HIP backends
 * hand them to cuBLAS/rocBLAS's tensor-core GEMM. The CPU and Vulkan would
 * widen them to f32 first (no AVX512-BF16, AMX or 16-bit shader product in
 * this version): slower than f32 for the same numbers, so f32 there. */
static int native_low_precision(const tq_device *dev)
{
    tq_backend_kind k = dev ? tq_device_backend(dev) : TQ_BACKEND_CPU;
    return k == TQ_BACKEND_CUDA || k == TQ_BACKEND_HIP;
}

tq_status tq_embedder_open_prec(const char *spec, tq_device *dev, tq_dtype prec, char *note,
                                size_t note_n, tq_embedder **e)
{
    if (note && note_n)
        note[0] = 0;
    struct stat sb;
    int folder = spec && *spec && !stat(spec, &sb) && S_ISDIR(sb.st_mode);
    if (prec != TQ_DTYPE_F32 && !native_low_precision(dev)) {
        int cpu = !dev || tq_device_backend(dev) == TQ_BACKEND_CPU;
        if (note && note_n && folder) /* the other embedders have no products */
            snprintf(note, note_n,
                     "--precision %s: f32 products on %s (bf16 and f16 products run on CUDA "
                     "and HIP devices' tensor cores; this version has no %s)",
                     tq_dtype_name(prec), dev ? tq_device_name(dev) : "cpu",
                     cpu ? "AVX512-BF16 or AMX kernel" : "16-bit shader product");
        prec = TQ_DTYPE_F32;
    }
    if (!spec || !*spec)
        spec = "hash:384";
    if (!strncmp(spec, "hash:", 5) || !strcmp(spec, "hash"))
        return tq_embed_hash_open(spec[4] == ':' ? spec + 5 : "", e);
    if (stat(spec, &sb))
        return tq_fail(TQ_ERR_NOINPUT, "%s: cannot open model: %s", spec, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return tq_embed_bert_open(spec, dev, prec, e);
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
