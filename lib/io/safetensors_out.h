/* safetensors_out.h: writes tensors held in memory as one .safetensors file
 * (the Hugging Face weight format), atomically. */
#ifndef TQ_SAFETENSORS_OUT_H
#define TQ_SAFETENSORS_OUT_H

#include "tq.h"

typedef struct tq_st_out {
    const char *name;
    tq_dtype dtype; /* f32, f64, f16, bf16, i8, u8, i16, i32, i64 */
    int rank;
    int64_t dims[4];
    const void *data;
} tq_st_out;

/* Writes the n tensors t to PATH: the header (with __metadata__ from the
 * meta pairs, meta[2i] a key and meta[2i+1] its value, nmeta pairs) padded
 * to 8 bytes, then the data in order of falling element size, so that every
 * tensor starts aligned to its element (readers may map it in place).
 * TQ_ERR_CANTCREATE / TQ_ERR_IO as tq_outfile says. */
tq_status tq_st_write(const char *path, const tq_st_out *t, size_t n, const char *const *meta,
                      size_t nmeta);

#endif
