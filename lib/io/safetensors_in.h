/* safetensors_in.h: reads tensors out of a .safetensors file (the Hugging Face
 * weight format), mapped read-only, converted to f32 on request. */
#ifndef TQ_SAFETENSORS_IN_H
#define TQ_SAFETENSORS_IN_H

#include "tq.h"

typedef struct tq_st_file tq_st_file;

/* Maps PATH and checks its header: every tensor's dtype, shape and byte range
 * against the file. Missing file: TQ_ERR_NOINPUT; anything inconsistent:
 * TQ_ERR_DATA "PATH: WHAT". */
tq_status tq_st_open(const char *path, tq_st_file **f);
void tq_st_close(tq_st_file *f);
/* 1 if the file holds a tensor of that name. */
int tq_st_has(const tq_st_file *f, const char *name);
/* Tensor NAME as f32 in a malloc'd array (the caller frees it); its shape must
 * be exactly dims[0..rank). F32, F16 and BF16 tensors are accepted. */
tq_status tq_st_read_f32(const tq_st_file *f, const char *name, int rank,
                         const int64_t *dims, float **out);
/* The same into w, room for the shape's elements (a CPU tensor's own memory:
 * no copy of the weights in between). */
tq_status tq_st_read_f32_to(const tq_st_file *f, const char *name, int rank,
                            const int64_t *dims, float *w);
/* The same as dtype `to` (f32, f16 or bf16, converted as tq_convert does:
 * to nearest even), into w, room for the shape's elements in that dtype. */
tq_status tq_st_read_to(const tq_st_file *f, const char *name, int rank, const int64_t *dims,
                        tq_dtype to, void *w);
/* The dtype of tensor NAME (TQ_DTYPE_INVALID: none of that name). */
tq_dtype tq_st_dtype(const tq_st_file *f, const char *name);
/* Tensor NAME's bytes as they are into w: its dtype must be dt and its shape
 * exactly dims[0..rank) (for the int8 codes, scales and column indices that
 * tq-quantize --model stores: no conversion may touch them). */
tq_status tq_st_read_raw(const tq_st_file *f, const char *name, tq_dtype dt, int rank,
                         const int64_t *dims, void *w);
/* The string value of KEY in the header's __metadata__, or NULL. */
const char *tq_st_meta(const tq_st_file *f, const char *key);

#endif
