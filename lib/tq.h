/* tq.h: the public API of libtq, the core library under every tq tool.
 * One error convention everywhere: functions return a tq_status (0 = TQ_OK) and
 * leave a one-line message for the caller in tq_errmsg(); the library never prints
 * and never exits. */
#ifndef TQ_H
#define TQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_VERSION "0.1.0"

/* ---------------------------------------------------------------- errors */

typedef enum tq_status {
    TQ_OK = 0,
    TQ_EOF = 1,          /* clean end of stream at a frame boundary: not an error */
    TQ_ERR_USAGE,        /* bad option, argument or API use            -> exit 2  */
    TQ_ERR_DATA,         /* corrupt, truncated or inconsistent input   -> exit 65 */
    TQ_ERR_NOINPUT,      /* an input file cannot be opened             -> exit 66 */
    TQ_ERR_CANTCREATE,   /* an output file cannot be created           -> exit 73 */
    TQ_ERR_IO,           /* read or write failure                      -> exit 74 */
    TQ_ERR_RUNTIME,      /* device failure or other runtime failure    -> exit 1  */
    TQ_ERR_NOMEM,        /* out of memory                              -> exit 1  */
    TQ_ERR_PIPE          /* the reader downstream went away: quiet stop -> exit 0 */
} tq_status;

/* The message of the last error set on this thread ("" when none). */
const char *tq_errmsg(void);
/* Sets the thread's message (printf format) and returns st, so that error paths
 * read `return tq_fail(TQ_ERR_DATA, "...", ...);`. */
tq_status tq_fail(tq_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prefixes the current message with "CONTEXT: " and returns st. */
tq_status tq_fail_context(tq_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The process exit status (sysexits) for a status. */
int tq_status_exit_code(tq_status st);

/* ---------------------------------------------------------------- dtypes */

/* The numeric codes are part of the stream format (tq-format.5): never renumber. */
typedef enum tq_dtype {
    TQ_DTYPE_INVALID = 0,
    TQ_DTYPE_F32 = 1,
    TQ_DTYPE_F64 = 2,
    TQ_DTYPE_F16 = 3,
    TQ_DTYPE_BF16 = 4,
    TQ_DTYPE_I8 = 5,
    TQ_DTYPE_U8 = 6,
    TQ_DTYPE_I16 = 7,
    TQ_DTYPE_I32 = 8,
    TQ_DTYPE_I64 = 9,
    TQ_DTYPE_STR = 10,   /* rank 1: u64 offsets[n+1] then the UTF-8 bytes      */
    TQ_DTYPE_Q8_0 = 11,  /* ggml block_q8_0: f16 d, i8 q[32]      (34 bytes)   */
    TQ_DTYPE_Q4_0 = 12,  /* ggml block_q4_0: f16 d, u8 q[16]      (18 bytes)   */
    TQ_DTYPE_BIT = 13,   /* sign bits, MSB first, each row padded to a byte    */
    TQ_DTYPE_Q2 = 14,    /* blocks of 32: f16 d, f16 m, u8 q[8], 2 bits a value
                            (12 bytes); value j = q * d + m (tq-quantize(1)) */
    TQ_DTYPE_COUNT
} tq_dtype;

#define TQ_QK 32 /* elements per q8_0 / q4_0 block */

const char *tq_dtype_name(tq_dtype dt);        /* "f32", ..., NULL if invalid */
tq_dtype tq_dtype_from_name(const char *name); /* TQ_DTYPE_INVALID if unknown */
/* Bytes per element for plain dtypes; 0 for str and the block/bit codes. */
size_t tq_dtype_size(tq_dtype dt);
int tq_dtype_is_float(tq_dtype dt);            /* f32 f64 f16 bf16 */
int tq_dtype_is_int(tq_dtype dt);              /* i8 u8 i16 i32 i64 */

/* Bytes of a payload for dims of a fixed-size dtype (all but str); fails on a
 * shape the dtype cannot hold (block codes need the last dim % 32 == 0), on
 * overflow, or above TQ_MAX_FRAME_BYTES. */
tq_status tq_dtype_payload_bytes(tq_dtype dt, int rank, const int64_t *dims,
                                 uint64_t *bytes);

/* Scalar conversions, round to nearest even, NaN kept quiet, as IEEE 754 says. */
uint16_t tq_f32_to_f16(float x);
float tq_f16_to_f32(uint16_t h);
uint16_t tq_f32_to_bf16(float x);
float tq_bf16_to_f32(uint16_t h);

/* Converts n elements between plain dtypes and the block/bit codes.
 * Float -> integer rounds to nearest even and saturates; NaN -> 0.
 * To q8_0/q4_0/bit from a float type quantizes as ggml does; n must then be a
 * multiple of the block (or, for bit, of the row length given in bit_row). */
tq_status tq_convert(tq_dtype to, void *dst, tq_dtype from, const void *src,
                     size_t n, int64_t bit_row);

/* ---------------------------------------------------------------- format */

#define TQ_MAX_RANK 8
#define TQ_MAX_NAME 255               /* bytes of a frame name          */
#define TQ_MAX_META 65536             /* bytes of a frame's metadata    */
#define TQ_MAX_FRAME_BYTES (1ull << 36) /* 64 GiB of raw payload a frame */
#define TQ_ALIGN 64

#define TQ_FLAG_ZLIB 0x1u

/* A frame as read from or about to be written to a stream. Owned by its reader
 * (valid until the next tq_reader_next) or by whoever made it. */
typedef struct tq_frame {
    char name[TQ_MAX_NAME + 1];
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];
    uint32_t flags;           /* TQ_FLAG_* as stored                      */
    const char *meta;         /* "k=v\0k=v\0", meta_len bytes, may be NULL */
    size_t meta_len;
    const void *stored;       /* the payload bytes as stored (maybe zlib) */
    uint64_t stored_size;
    uint64_t raw_size;        /* payload bytes once decompressed          */
    uint64_t index;           /* position in the stream, from 0           */
    uint64_t offset;          /* byte offset of the frame in the stream   */
    /* private */
    const unsigned char *priv_hdr; /* the header bytes as read (pass-through) */
    size_t priv_hdr_len;
    void *priv_raw;           /* decompressed payload, owned              */
    void *priv_buf;           /* owned storage behind stored/meta         */
    size_t priv_cap;
} tq_frame;

/* Rows of a frame: dims[0], or 1 for rank 0. */
int64_t tq_frame_rows(const tq_frame *f);
/* The payload decompressed (decompresses once, on first use). */
tq_status tq_frame_data(tq_frame *f, const void **data);
/* Value of metadata KEY, or NULL. */
const char *tq_frame_meta_get(const tq_frame *f, const char *key);
/* For str frames: string i (not NUL-terminated) and its length. */
tq_status tq_frame_str(tq_frame *f, int64_t i, const char **s, size_t *len);
/* Frees what a frame owns (not the struct itself). */
void tq_frame_release(tq_frame *f);

/* Reader. LABEL names the input in messages ("-" reads as "stdin"). */
typedef struct tq_reader tq_reader;
tq_status tq_reader_open_fd(tq_reader **r, int fd, const char *label);
tq_status tq_reader_open_path(tq_reader **r, const char *path); /* "-" = stdin */
/* As tq_reader_open_path, with LABEL naming the input in messages instead of
 * PATH (a spool file of standard input is "stdin" to the user). */
tq_status tq_reader_open_path_as(tq_reader **r, const char *path, const char *label);
/* Next frame, verified (magic, version, dtype, dims, CRCs, batch consistency).
 * TQ_EOF at a clean end. The frame is valid until the next call. */
tq_status tq_reader_next(tq_reader *r, tq_frame **f);
void tq_reader_close(tq_reader *r);
/* Reads ahead the first batch of every tensor: the frames up to the first
 * whose name comes again, or to the end. tq_reader_next hands them out
 * afterwards, in order, as if nothing had been read. *n: how many, from the
 * start of the stream (call it before tq_reader_next); tq_reader_ahead(r, i)
 * is the i-th of them (header fields only: what a tool picks a frame by),
 * valid until tq_reader_next hands it out. Memory: those frames (at most
 * 1024 of them). */
tq_status tq_reader_lookahead(tq_reader *r, size_t *n);
const tq_frame *tq_reader_ahead(const tq_reader *r, size_t i);
/* Adds another input to the same consistency check (concatenation of streams):
 * frames keep their indices counting up across inputs. */
tq_status tq_reader_chain_fd(tq_reader *r, int fd, const char *label);

/* Writer. Output is buffered; tq_writer_close flushes. For a path, the file is
 * written atomically (temporary file, then rename) and removed on failure. */
typedef struct tq_writer tq_writer;
tq_status tq_writer_open_fd(tq_writer **w, int fd, const char *label);
tq_status tq_writer_open_path(tq_writer **w, const char *path);
/* 0 store payloads raw, 1..9 zlib level for frames written from data. */
void tq_writer_set_compress(tq_writer *w, int level);
/* Writes a frame exactly as read (pass-through: bytes unchanged). */
tq_status tq_writer_put(tq_writer *w, const tq_frame *f);
/* Writes a new frame from raw (uncompressed) data; compresses if asked. */
tq_status tq_writer_write(tq_writer *w, const char *name, tq_dtype dt, int rank,
                          const int64_t *dims, const char *meta, size_t meta_len,
                          const void *data, uint64_t nbytes);
/* Writes a str frame of n strings. */
tq_status tq_writer_write_str(tq_writer *w, const char *name, int64_t n,
                              const char *const *s, const size_t *len);
/* Rewrites a read frame with a different compression: level 0 decompresses. */
tq_status tq_writer_recompress(tq_writer *w, tq_frame *f, int level);
tq_status tq_writer_flush(tq_writer *w);
/* Flushes and closes; commit=0 abandons (removes a path's temporary file). */
tq_status tq_writer_close(tq_writer *w, int commit);

/* CRC-32C (Castagnoli), as the format uses; crc starts at 0. */
uint32_t tq_crc32c(uint32_t crc, const void *data, size_t n);

/* ---------------------------------------------------------------- threads */

/* Worker threads for the CPU paths: 0 = all cores (the default). */
void tq_threads_set(int n);
int tq_threads_get(void);
/* Runs fn(ctx, begin, end) over [0, n) split into contiguous chunks of at least
 * min_chunk items, on the pool; returns when all chunks are done. The split
 * depends on n only, never on timing, so results stay deterministic. */
typedef void (*tq_range_fn)(void *ctx, int64_t begin, int64_t end);
void tq_parallel_for(int64_t n, int64_t min_chunk, tq_range_fn fn, void *ctx);

/* ---------------------------------------------------------------- devices */

typedef enum tq_backend_kind {
    TQ_BACKEND_CPU = 0,
    TQ_BACKEND_VULKAN,
    TQ_BACKEND_CUDA,
    TQ_BACKEND_HIP,
    TQ_BACKEND_COUNT
} tq_backend_kind;

typedef struct tq_device tq_device;

/* Opens a device by spec: "auto", "cpu", "vulkan", "cuda", "hip", optionally
 * ":N". NULL or "" means TQ_DEVICE from the environment, else "auto". auto
 * prefers CUDA, then HIP, then a Vulkan GPU (never a CPU-type Vulkan device),
 * then the CPU. A named device that is unavailable fails with the reason. */
tq_status tq_device_open(const char *spec, tq_device **dev);
/* As tq_device_open, for work of about FLOPS (< 0: not known). auto takes the
 * CPU, without loading a GPU runtime, for work under tq_auto_min_flops() (a
 * GPU's start would cost more), and otherwise a GPU as above; under mpirun or
 * srun, auto and a bare "cuda" or "hip" take the device numbered by the
 * process's local rank modulo the devices there are (tq(7) "DEVICES"). */
tq_status tq_device_open_for(const char *spec, double flops, tq_device **dev);
/* How the device was chosen, one line: "auto: cpu (work 3.1e+07 flop < ...)" */
const char *tq_device_why(const tq_device *dev);
/* What its start took, one line ("" for the CPU): on CUDA and HIP, loading
 * the runtime, the context, the kernels and the BLAS library. */
const char *tq_device_startup(const tq_device *dev);
/* Whether SPEC (NULL: TQ_DEVICE, else auto) is auto on a machine where it
 * might take a GPU, and so weighs the work: a tool then estimates it. */
int tq_device_auto_weighs(const char *spec);
/* The work below which auto keeps to the CPU, in flop: TQ_AUTO_MIN_FLOPS,
 * else 1e10 a thread; *from (may be NULL) says which. */
double tq_auto_min_flops(const char **from);
/* Each tool's work in flop (lib/op/autopick.c), from what it knows before
 * it opens a device; < 0 when that is not enough; TQ_WORK_LARGE for an input
 * on a pipe longer than a tool reads ahead. */
#define TQ_WORK_LARGE 1e300
double tq_work_simmat(double q_elems, double db_elems, double d);
double tq_work_attend(double q_elems, double lk);
double tq_work_embed(double params, double text_bytes);
double tq_work_score(double elems, double d, double model_params);
double tq_work_train(double rows, double params, double epochs);
/* Checks a spec as tq_device_open would, without opening the device: TQ_ERR_USAGE
 * for a malformed spec, TQ_ERR_RUNTIME (with the reason) for a named device
 * that is not available. */
tq_status tq_device_check(const char *spec);
void tq_device_close(tq_device *dev);
tq_backend_kind tq_device_backend(const tq_device *dev);
const char *tq_device_name(const tq_device *dev);   /* "cpu", "vulkan:0" ... */
const char *tq_device_describe(const tq_device *dev); /* one line of detail */
/* The ops that ran on the host so far because the device has no kernel for
 * them (or not for those arguments), as "topk, convert"; "" when none. */
const char *tq_device_host_ops(const tq_device *dev);
/* The products of tq_op_simtopk only rank candidates: every row whose
 * product value, widened by that product's proven error bound, could still
 * reach a list is scored exactly, and only exact scores rank. So they may
 * be low precision with the same results, bit for bit. dt: TQ_DTYPE_F32 (the
 * default) or TQ_DTYPE_BF16, which the CPU takes where it has AVX512-BF16,
 * and CUDA and HIP (their BLAS's bf16 GEMM: tensor cores), with wider
 * bounds (more rows scored exactly); Vulkan's products stay f32. tq_device_rank_precision says which a
 * device uses; tq_device_rescored how many rows its simtopk scored exactly
 * so far (-v's count). */
tq_status tq_device_set_rank_precision(tq_device *dev, tq_dtype dt);
tq_dtype tq_device_rank_precision(const tq_device *dev);
long long tq_device_rescored(const tq_device *dev);
/* Graphs: on a device that has them (cuda, hip), the ops called between
 * tq_graph_begin and tq_graph_end are recorded instead of run, and
 * tq_graph_launch replays them, all at once, as often as wanted: the same
 * kernels on the same tensors, whose contents may change between replays
 * (upload new inputs before a launch, download after it). Between begin and
 * end only ops may be called: no upload, download, tensor_new or _free, and no
 * op that runs on the host (it fails, saying so). On other devices *recording
 * is 0, the ops run as they are called, and end gives *g = NULL. A failed op
 * leaves the recording to tq_graph_end(dev, 0, ...), which drops it. */
typedef struct tq_graph tq_graph;
tq_status tq_graph_begin(tq_device *dev, int *recording);
/* commit = 0 abandons the recording (after a failed op); *g is then NULL. */
tq_status tq_graph_end(tq_device *dev, int commit, tq_graph **g);
tq_status tq_graph_launch(tq_graph *g);
void tq_graph_free(tq_graph *g);
/* Whether tq_graph_begin would record on dev (a device with graphs, and
 * TQ_GRAPHS not 0). */
int tq_device_has_graphs(const tq_device *dev);
/* How many graphs were recorded on dev, and replayed (for -v). */
void tq_device_graph_counts(const tq_device *dev, long *recorded, long *replays);
/* Whether tq_op_matmul on dev (NULL: the CPU) multiplies two bf16 or two f16
 * operands as such (CUDA/HIP tensor cores, AVX512-BF16 on the CPU) rather than
 * widening them to f32 first, which gives the same numbers more slowly; for
 * dt i8, whether tq_op_matmul_i8 runs on int8 instructions (AVX512-VNNI)
 * rather than a portable loop (the same numbers, slower than f32). */
int tq_device_native_product(const tq_device *dev, tq_dtype dt);
/* Waits for queued work on the device. */
tq_status tq_device_sync(tq_device *dev);

/* Writes the --list-devices report (every backend, its devices, or why it is
 * missing) into a malloc'd string. */
tq_status tq_device_list(char **report);

/* ---------------------------------------------------------------- tensors */

/* A dense tensor in a device's memory. Plain dtypes and the block codes. */
typedef struct tq_tensor {
    tq_dtype dtype;
    int rank;
    int64_t dims[TQ_MAX_RANK];
    tq_device *dev;
    void *buf;          /* backend buffer handle (host pointer on the CPU) */
    size_t offset;      /* bytes into buf where this tensor starts (views) */
    size_t nbytes;
    int owns;           /* 1: frees buf; 0: a view into another tensor */
    int constant;       /* tq_tensor_set_constant was called */
    void *derived;      /* the backend's forms of a constant tensor (packed operands) */
} tq_tensor;

tq_status tq_tensor_new(tq_device *dev, tq_dtype dt, int rank, const int64_t *dims,
                        tq_tensor **t);
/* A tensor over bytes [offset, offset + its size) of parent's buffer, sharing
 * it (no copy); free it before the parent. offset must be a multiple of 16. */
tq_status tq_tensor_view(const tq_tensor *parent, size_t offset, tq_dtype dt, int rank,
                         const int64_t *dims, tq_tensor **t);
/* A tensor over host memory the caller keeps (no copy), on a device that
 * works in host memory (the CPU): *t is NULL on any other device, where the
 * caller makes a tensor and uploads instead. host: 16-byte aligned, not freed
 * by tq_tensor_free; it must outlive the tensor. */
tq_status tq_tensor_wrap_host(tq_device *dev, tq_dtype dt, int rank, const int64_t *dims,
                              void *host, tq_tensor **t);
void tq_tensor_free(tq_tensor *t);
/* Declares that t will not change again until it is freed (model weights):
 * the backend may then keep forms of it made for its kernels, as the CPU
 * keeps a matmul B operand packed in its micro-kernel's layout, made once
 * instead of at every product. An upload into it fails from then on; writing
 * it as an op's output is a usage error the ops cannot all detect, so don't. */
void tq_tensor_set_constant(tq_tensor *t);
int64_t tq_tensor_numel(const tq_tensor *t);
/* Host pointer of a CPU tensor (buf + offset); NULL on other devices. */
void *tq_tensor_host(const tq_tensor *t);
tq_status tq_tensor_upload(tq_tensor *t, const void *src, size_t nbytes);
tq_status tq_tensor_download(const tq_tensor *t, void *dst, size_t nbytes);

/* ---------------------------------------------------------------- ops */
/* Every op checks shapes and dtypes here, then runs on the tensors' device.
 * Unless an op says otherwise, tensors are f32 and all on one device. */

/* C = alpha * op(A) op(B) + beta * C, op = transpose when trans_* is set.
 * Rank 2, or rank 3 for a batch (A or B may be rank 2 and shared by the batch).
 * A and B may be f16 or bf16 (storage only: each value is widened to f32,
 * exactly, and the products and sums are f32 as for f32 operands; on a GPU
 * with a BLAS library, f16 and bf16 pairs go to its tensor-core GEMM, whose
 * products of such values are exact in f32 too); C is f32. */
tq_status tq_op_matmul(const tq_tensor *a, int trans_a, const tq_tensor *b,
                       int trans_b, float alpha, float beta, tq_tensor *c);
/* What a layer does to a product's C next, done by tq_op_matmul_then: add
 * bias (f32, a row of C's n columns, broadcast over its rows; NULL: none),
 * then GELU (gelu set), then round C into low (a bf16 or f16 tensor of C's
 * shape, NULL: none) for the next product to take.
 * low_only (with low): low is all the caller wants. C's contents are then
 * unspecified afterwards, and the GELU of values rounded into a bf16 low may
 * be an approximation within 1.5e-7 |x| + 1e-7 |GELU(x)| of the exact one
 * (under a thousandth of bf16's half unit; subnormal results may flush to
 * zero). The CPU's bf16 products use it (C never goes to memory, GELU and
 * the rounding run on each tile of C as the kernel stores it), and its int8
 * ones for GELU into bf16 (on each block of C); a device that does not
 * computes C and low exactly as without it. */
typedef struct tq_matmul_then {
    const tq_tensor *bias;
    int gelu;
    tq_tensor *low;
    int low_only;
} tq_matmul_then;
/* tq_op_matmul, then what `then` asks, in that order: the values of
 * tq_op_matmul, tq_op_add, tq_op_gelu and tq_op_convert run one after
 * another (bit for bit on the CPU, which applies them to each block of C as
 * it finishes it; other devices run those ops). */
tq_status tq_op_matmul_then(const tq_tensor *a, int trans_a, const tq_tensor *b,
                            int trans_b, float alpha, float beta,
                            const tq_matmul_then *then, tq_tensor *c);
/* int8 products (tq-embed --precision int8): rows quantized as they come,
 * then multiplied by int8 weights, exactly in integers.
 * quantize_rows: x f32 viewed as rows of its last dim k; colscale f32 [k]
 * (NULL: ones) scales each column first, y = x[i,j] * colscale[j] (f32), so
 * that a few columns of large values (what layer norms put out) can be
 * scaled down and the weights' rows up by as much; then each row as
 * tq-quantize's int8: scale[i] = max_j |y| / 127, q = y / scale[i] rounded
 * to nearest even (0 for a row of zeros). q is i8 of x's shape, scale f32
 * with one value per row. A row with a NaN or an infinity gets codes 0 and
 * scale NaN, which the products carry on. */
tq_status tq_op_quantize_rows(const tq_tensor *x, const tq_tensor *colscale, tq_tensor *q,
                              tq_tensor *scale);
/* C = beta * C + the dequantized product, then what `then` asks (as
 * tq_op_matmul_then): a i8 viewed as m rows of k (rank 2 or 3, C of the same
 * rows), ascale f32 [m]; b i8 [n, k], a weight matrix as Linear stores it
 * (row j gives C's column j; codes in [-127, 127]), bscale f32 [n]. Each
 * element is dot = the exact integer sum of a[i,p] b[j,p], then
 * ((float)dot * bscale[j]) * ascale[i] in f32, then fmaf(beta, C, that) when
 * beta is not 0: the same bits on every CPU and thread count. k <= 2^16. */
tq_status tq_op_matmul_i8(const tq_tensor *a, const tq_tensor *ascale, const tq_tensor *b,
                          const tq_tensor *bscale, float beta, const tq_matmul_then *then,
                          tq_tensor *c);
/* A few columns of a product's input kept out of its codes and multiplied
 * in f32 (LLM.int8()'s mixed decomposition): the columns where a layer norm
 * puts values tens of times the rest, which would otherwise set every row's
 * scale and leave the other columns few levels. Their colscale is 0 in
 * tq_op_quantize_rows (codes 0, out of the row's largest |value|), and
 * their weights' columns 0 in b. x: the product's input in f32, a's shape;
 * cols i64 [r] (r <= 16), distinct columns of x; w f32 [n, r]: column p is
 * the weights' column cols[p], unscaled. */
typedef struct tq_i8_rest {
    const tq_tensor *x, *cols, *w;
} tq_i8_rest;
/* tq_op_matmul_i8 with rest (NULL: none): each element's
 * ((float)dot * bscale[j]) * ascale[i] then takes, for p = 0 .. r-1 in
 * order, v = fmaf(x[i, cols[p]], w[j, p], v), before beta's C and `then`. */
tq_status tq_op_matmul_i8_rest(const tq_tensor *a, const tq_tensor *ascale, const tq_tensor *b,
                               const tq_tensor *bscale, const tq_i8_rest *rest, float beta,
                               const tq_matmul_then *then, tq_tensor *c);
/* norms[i] = ||x[i,:]||_2 over the last dim (x viewed as rows). */
tq_status tq_op_rownorm(const tq_tensor *x, tq_tensor *norms);
/* y[i,:] = x[i,:] / max(||x[i,:]||, eps); y may be x. */
tq_status tq_op_normalize(const tq_tensor *x, float eps, tq_tensor *y);
/* The k largest of each row of x [n, m]: vals f32 [n, k] descending, idx i64
 * [n, k]. Ties go to the lower index; NaN ranks below every number. k <= m. */
tq_status tq_op_topk(const tq_tensor *x, int64_t k, tq_tensor *vals, tq_tensor *idx);
/* The columns of each row of x [rows, m] (f32) not below the row's
 * threshold: for row r, every j with !(x[r,j] < thr[r]) (thr f32 [rows]: a
 * NaN value is listed, and a NaN threshold lists the whole row: neither
 * proves the column out) goes to lst[r, :] (i32 [rows, cap]), in any order,
 * and cnt[r] (i32 [rows]) counts them; past cap the count goes on and the
 * list holds cap of them. A GPU's way to find the few pairs of a score tile
 * worth an exact score without the tile leaving the device. */
tq_status tq_op_above(const tq_tensor *x, const tq_tensor *thr, tq_tensor *cnt, tq_tensor *lst);
/* Softmax over the last dim, max-subtracted; y may be x. */
tq_status tq_op_softmax(const tq_tensor *x, tq_tensor *y);
/* Layer norm over the last dim d: (x - mean) / sqrt(var + eps) * gamma + beta,
 * gamma and beta [d] (either may be NULL: 1 and 0). y may be x. */
tq_status tq_op_layernorm(const tq_tensor *x, const tq_tensor *gamma,
                          const tq_tensor *beta, float eps, tq_tensor *y);
/* tq_op_layernorm, then y rounded into low (a bf16 or f16 tensor of y's
 * shape) for the next product to take: the values of tq_op_layernorm and
 * tq_op_convert one after the other (bit for bit on the CPU, which rounds
 * each row as it leaves the norm, from L1, rather than in a pass of its
 * own; other devices run those two ops). */
tq_status tq_op_layernorm_low(const tq_tensor *x, const tq_tensor *gamma, const tq_tensor *beta,
                              float eps, tq_tensor *y, tq_tensor *low);
/* GELU, the exact erf form BERT uses; y may be x. */
tq_status tq_op_gelu(const tq_tensor *x, tq_tensor *y);
/* Elementwise activations for small networks (scorers, trainers); y may be x.
 * relu(x) = max(x, 0) (NaN stays NaN), tanh, sigmoid(x) = 1 / (1 + e^-x). */
typedef enum tq_activation {
    TQ_ACT_RELU = 0,
    TQ_ACT_TANH,
    TQ_ACT_SIGMOID,
    TQ_ACT_COUNT
} tq_activation;
tq_status tq_op_activate(const tq_tensor *x, tq_activation act, tq_tensor *y);
/* y = a + b, b the same shape as a or a row [d] broadcast over a's rows. */
tq_status tq_op_add(const tq_tensor *a, const tq_tensor *b, tq_tensor *y);
/* y = alpha * x; y may be x. */
tq_status tq_op_scale(const tq_tensor *x, float alpha, tq_tensor *y);
/* y[i,:] = x[idx[i],:], idx i64 [n]; any plain dtype. Out-of-range idx fails. */
tq_status tq_op_gather(const tq_tensor *x, const tq_tensor *idx, tq_tensor *y);
/* y = x converted to y's dtype (same shape); any pair tq_convert handles. */
tq_status tq_op_convert(const tq_tensor *x, tq_tensor *y);

/* Backward of tq_op_activate and tq_op_gelu, for training: dx = dy * f'(x),
 * x the activation's input (what the forward op read), computed in double and
 * rounded once. relu'(x) is 1 for x > 0, else 0 (NaN x gives NaN); dx may be
 * dy. All three tensors have one shape. */
tq_status tq_op_activate_grad(const tq_tensor *x, tq_activation act, const tq_tensor *dy,
                              tq_tensor *dx);
tq_status tq_op_gelu_grad(const tq_tensor *x, const tq_tensor *dy, tq_tensor *dx);

/* Fused multi-head scaled dot-product attention (online softmax over tiles of
 * K and V, never an n x n score matrix unless weights is asked for):
 *   out[b,i,h] = sum_j softmax_j(scale * q[b,i,h] . k[b,j,h] + mask) v[b,j,h]
 * q f32 [B, Lq, H*Dk], k f32 [B, Lk, H*Dk], v f32 [B, Lk, H*Dv], out f32
 * [B, Lq, H*Dv] (rank 2 tensors are one batch, B = 1); head h is the h-th slice
 * of Dk (Dv) columns. Key j is masked for query i when any of: causal and
 * j > i; key_len given and j >= key_len[b]; groups given and qgroup[b,i] !=
 * kgroup[b,j]. A query whose keys are all masked gets out = 0 (defined, not
 * NaN). Optional outputs: received f32 [B, Lk], the attention key j receives
 * from queries i != j, summed over i and averaged over heads (the consensus
 * score); weights f32 [B, H, Lq, Lk], the softmax itself (O(n^2) memory). */
typedef struct tq_attention_args {
    int heads;                 /* H >= 1, dividing both last dims */
    float scale;               /* 0 means 1 / sqrt(Dk) */
    int causal;
    const tq_tensor *key_len;  /* i64 [B], or NULL */
    const tq_tensor *qgroup;   /* i64 [B, Lq] and kgroup i64 [B, Lk], both or */
    const tq_tensor *kgroup;   /* neither */
    tq_tensor *received;       /* f32 [B, Lk], or NULL */
    tq_tensor *weights;        /* f32 [B, H, Lq, Lk], or NULL */
    /* nonzero: the score and P V products may take q, k, v and the
     * probabilities rounded to bf16 (sums in f32), where the device has
     * bf16 products (the CPU with AVX512-BF16, on items of more than 64
     * keys); ignored with causal, received or weights. Errors then are
     * bf16's: ~2^-9 relative of each operand. */
    int bf16;
    /* out rounded into low as well (bf16 or f16, out's shape), for the next
     * product to take; NULL: none. The values of tq_op_attention then
     * tq_op_convert (the CPU rounds each block of out as it finishes it,
     * from L1; other devices run the two ops). */
    tq_tensor *low;
    /* f32 [H, Lq, Lk], added to every batch item's scaled scores before the
     * softmax: scale * q . k + bias[h, i, j] (a relative position bias, as
     * MPNet's and T5's); NULL: none. Masked keys stay masked. With it the
     * CPU takes f32 products (bf16 is ignored); CUDA, HIP and Vulkan add it
     * in their kernels. */
    const tq_tensor *bias;
} tq_attention_args;
tq_status tq_op_attention(const tq_tensor *q, const tq_tensor *k, const tq_tensor *v,
                          const tq_attention_args *args, tq_tensor *out);

/* Similarity search step, fused (no [nq, ndb] matrix): folds the rows of db
 * [ndb, d] into the running top-k lists of the queries q [nq, d]. vals f32
 * [nq, k] (descending) and idx i64 [nq, k] are read and updated in place; the
 * caller starts them at -inf and -1. Database row j enters as index
 * idx_base + j, so blocks and shards of one database stream through in turn.
 * metric TQ_METRIC_DOT: score = q . db (cosine when both sides are
 * normalized); TQ_METRIC_L2: score = -||q - db||^2. Ties go to the lower
 * index; the result does not depend on threads or block size. */
typedef enum { TQ_METRIC_DOT = 0, TQ_METRIC_L2 = 1, TQ_METRIC_HAMMING = 2 } tq_metric;
tq_status tq_op_simtopk(const tq_tensor *q, const tq_tensor *db, tq_metric metric,
                        int64_t idx_base, tq_tensor *vals, tq_tensor *idx);

/* simtopk over quantized rows (tq-quantize's codes), exactly: q [nq, d] and db
 * [ndb, d] both i8 with their scales qscale f32 [nq] and dbscale f32 [ndb],
 * metric TQ_METRIC_DOT: score = the integer dot product of the codes times
 * qscale[i] times dbscale[j], rounded once to f32; or both bit (scales NULL),
 * metric TQ_METRIC_HAMMING: score = -(the number of differing bits), an
 * integer; or db q8_0 or q4_0 and q q8_0 (scales NULL, d a multiple of 32),
 * metric TQ_METRIC_DOT: score = ggml's reference vec_dot of the row with the
 * query (each block's integer sum, then sumf += sumi * (dx * dq) in f32 for
 * q8_0, sumf += sumi * dx * dq for q4_0, block after block). vals, idx and idx_base as tq_op_simtopk; ties to the lower index;
 * the same results whatever the threads and the blocks. d <= 2^17 for i8. */
tq_status tq_op_codetopk(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                         const tq_tensor *dbscale, tq_metric metric, int64_t idx_base,
                         tq_tensor *vals, tq_tensor *idx);

/* Every score of codetopk (same codes, scales, metric and scores): out f32
 * [nq, ndb], out[i][j] the score of query i and row j, bit for bit the value
 * codetopk ranks. */
tq_status tq_op_codematrix(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *db,
                           const tq_tensor *dbscale, tq_metric metric, tq_tensor *out);

/* A screen for pairs above a threshold, from int8 codes: q and db i8 [nq, d]
 * and [ndb, d] (d <= 2^17) with scales qscale f32 [nq] and dbscale f32
 * [ndb], and terms qterms f32 [nq, m] and dbterms f32 [ndb, m] (m <= 8). The
 * value of query i and row r is
 *     qscale[i] dbscale[r] (q_i . x_r) + sum_k qterms[i, k] dbterms[r, k]
 * (the integer dot product of the codes); out i32 [nq, ceil(ndb / 32)] gets
 * bit r % 32 of word r / 32 of row i set for every pair whose exact value is
 * >= 0 (the caller makes that mean "may score at or above the threshold"),
 * clear for every pair whose value is below -2^-30 M_i (M_i: |qscale[i]|
 * max|dbscale| 2^14 d + sum_k |qterms[i, k]| max|dbterms[., k]|), and any
 * value in between for the rest; padding bits 0. A value that is NaN leaves
 * its bit clear. */
tq_status tq_op_codescreen(const tq_tensor *q, const tq_tensor *qscale, const tq_tensor *qterms,
                           const tq_tensor *db, const tq_tensor *dbscale, const tq_tensor *dbterms,
                           tq_tensor *out);
/* Whether dev runs codescreen itself (1), or on the host (0): a capability
 * picks the screen where it pays, the device's matrix product elsewhere. */
int tq_op_codescreen_native(const tq_device *dev);

/* Products with one database many times (the full similarity matrix):
 * tq_rowprod_new prepares db f32 [n, d] once (the CPU packs it for its
 * micro-kernel), then each tq_op_rowprod writes out f32 [m, n] = alpha * q .
 * db^T for q f32 [m, d] on db's device. Every element is computed by the same
 * operations whatever m, the element's place and the threads, so a product
 * cut into any row batches is the same bytes as one call. db must stay
 * unchanged, and alive, until tq_rowprod_free. */
typedef struct tq_rowprod tq_rowprod;
tq_status tq_rowprod_new(const tq_tensor *db, tq_rowprod **out);
tq_status tq_op_rowprod(tq_rowprod *p, const tq_tensor *q, float alpha, tq_tensor *out);
void tq_rowprod_free(tq_rowprod *p);

#ifdef __cplusplus
}
#endif
#endif
