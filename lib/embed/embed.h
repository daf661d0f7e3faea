/* embed.h: text embedders behind one interface: tq-embed opens one by model spec
 * and feeds it batches of documents; each embedder turns text into f32 rows. */
#ifndef TQ_EMBED_H
#define TQ_EMBED_H

#include "tq.h"

typedef struct tq_embedder tq_embedder;

typedef struct tq_embedder_ops {
    /* Embeds n documents (UTF-8, not NUL-terminated) into out, n x dim f32. */
    tq_status (*run)(tq_embedder *e, int64_t n, const char *const *text, const size_t *len,
                     float *out);
    void (*close)(tq_embedder *e);
} tq_embedder_ops;

/* Every embedder starts with this struct (the ggml/BLIS table style). */
struct tq_embedder {
    const tq_embedder_ops *ops;
    int64_t dim;
    char describe[256]; /* "hash:384", "fasttext:model.bin": goes into frame metadata */
    /* for -v, embedders with a window of tokens (BERT): its size, the texts
     * longer than it (cut, or embedded in windows) and the windows run */
    int window;
    int64_t texts_long, windows;
    /* for -v: the file the tokenizer came from ("tokenizer.json",
     * "vocab.txt"), or "" for embedders without one */
    char tokenizer[32];
    /* for -v: what the embedder chose at open that the tool should say
     * (an int8 folder's products loaded, not calibrated), or "" */
    char note[256];
};

/* How tq-embed opens a model beyond its spec. */
enum { TQ_LONG_TRUNCATE, TQ_LONG_CHUNK };
typedef struct tq_embed_opts {
    tq_dtype prec;           /* the products' operands (tq_embedder_open_prec) */
    const char *prompt;      /* put before every text, or NULL */
    const char *prompt_name; /* a prompt the model's folder names, or NULL: its default */
    int on_long;             /* texts past the window: TQ_LONG_* */
    /* prec was not chosen (no --precision): a model folder's own, int8 for a
     * folder of tq-quantize --model, else f32 */
    int prec_default;
    tq_dtype prec_asked;     /* set by tq_embedder_open_opts: prec before any fallback */
} tq_embed_opts;

/* Opens an embedder by spec: "hash:DIM"; a fastText model file (.bin, .ftz);
 * word vectors in text form (.vec); or a sentence-transformers model folder.
 * dev is where numeric work runs (may be NULL for embedders without any). */
tq_status tq_embedder_open(const char *spec, tq_device *dev, tq_embedder **e);
/* A model name of the Hugging Face hub ("ORG/NAME" or "NAME") as a folder of
 * its local cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
 * ~/.cache/huggingface/hub): models--ORG--NAME/snapshots/REV, REV from
 * refs/main or the one snapshot there. 1 with the folder in out, 0 when the
 * cache has none, -1 when name is no hub name (a path). */
int tq_embed_hub_folder(const char *name, char *out, size_t n);
/* The same with the precision of the products' operands (f32, bf16, f16),
 * for the embedders that have products (BERT): taken where the device's GEMM
 * multiplies that dtype itself (a CUDA or HIP device: its tensor cores),
 * else f32, with why in note (for -v; "" when taken). */
tq_status tq_embedder_open_prec(const char *spec, tq_device *dev, tq_dtype prec, char *note,
                                size_t note_n, tq_embedder **e);
/* The same with every option: a prompt and a rule for long texts apply to
 * model folders (BERT's kind); for the other embedders a prompt is a usage
 * error, and they have no window. */
tq_status tq_embedder_open_opts(const char *spec, tq_device *dev, const tq_embed_opts *o,
                                char *note, size_t note_n, tq_embedder **e);
static inline int64_t tq_embedder_dim(const tq_embedder *e) { return e->dim; }
static inline tq_status tq_embedder_run(tq_embedder *e, int64_t n, const char *const *text,
                                        const size_t *len, float *out)
{
    return e->ops->run(e, n, text, len, out);
}
void tq_embedder_close(tq_embedder *e);

/* tq-quantize --model: the sentence-transformers folder src as a folder dst
 * whose encoder runs in int8 without calibrating (bert_quantize.c): src
 * loaded on dev (the CPU) and calibrated as --precision int8 does, the
 * result written to DST/<Transformer module>/model.int8.safetensors, every
 * other file the model needs copied, the f32 weights not; dst is made
 * atomically (a temporary folder beside it, renamed), and must not exist or
 * be an empty folder (else TQ_ERR_CANTCREATE). */
typedef struct tq_embed_quant_info {
    const char *arch;           /* "bert", "roberta", "mpnet" (static) */
    int64_t layers, hidden;
    uint64_t f32_bytes;         /* the Transformer's model.safetensors */
    uint64_t int8_bytes;        /* model.int8.safetensors */
    uint64_t int8_tensor_bytes; /* of which the tensors' data */
    int files;                  /* other files copied */
    tq_dtype ffn2;              /* the second feed-forward product's dtype */
    double calib_s;             /* load and calibration, seconds */
} tq_embed_quant_info;
tq_status tq_embed_quantize_folder(const char *src, const char *dst, tq_device *dev,
                                   tq_embed_quant_info *info);

/* The embedders; tq_embedder_open picks one. */
tq_status tq_embed_hash_open(const char *args, tq_embedder **e);
tq_status tq_embed_fasttext_open(const char *path, tq_embedder **e);
tq_status tq_embed_vec_open(const char *path, tq_embedder **e);
tq_status tq_embed_bert_open(const char *path, tq_device *dev, const tq_embed_opts *o,
                             tq_embedder **e);

#endif
