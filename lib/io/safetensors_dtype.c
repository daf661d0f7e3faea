/* safetensors_dtype.c: the dtype names of a safetensors header, one table
 * for the stream sink (safetensors.c) and the encoder folders' writer
 * (safetensors_out.c); a file of its own so that either links alone. */
#include "io.h"

const char *tq_safetensors_dtype_name(tq_dtype dt)
{
    switch (dt) {
    case TQ_DTYPE_F32: return "F32";
    case TQ_DTYPE_F64: return "F64";
    case TQ_DTYPE_F16: return "F16";
    case TQ_DTYPE_BF16: return "BF16";
    case TQ_DTYPE_I8: return "I8";
    case TQ_DTYPE_U8: return "U8";
    case TQ_DTYPE_I16: return "I16";
    case TQ_DTYPE_I32: return "I32";
    case TQ_DTYPE_I64: return "I64";
    default: return NULL;
    }
}
