/* internal.h: what the files of libtq share and the public API does not show. */
#ifndef TQ_INTERNAL_H
#define TQ_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* the Makefile sets it; for files built alone */
#endif
#include "tq.h"

#include <stdio.h>
#include <sys/types.h>
#include <stdlib.h>
#include <string.h>

/* ---- frame header layout (tq-format.5 is the specification) ---- */

#define TQ_MAGIC "\x89TQF"
#define TQ_FORMAT_VERSION 1
#define TQ_FIXED_HEADER 48
/* The largest header: fixed part, dims, name and metadata, padded. */
#define TQ_MAX_HEADER \
    (TQ_FIXED_HEADER + 8 * TQ_MAX_RANK + TQ_MAX_NAME + TQ_MAX_META + TQ_ALIGN)

static inline uint64_t tq_align_up(uint64_t n) { return (n + TQ_ALIGN - 1) & ~(uint64_t)(TQ_ALIGN - 1); }

/* Little-endian field access, independent of the host's byte order. */
static inline uint16_t tq_le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t tq_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t tq_le64(const unsigned char *p) { return tq_le32(p) | (uint64_t)tq_le32(p + 4) << 32; }
static inline void tq_put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static inline void tq_put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline void tq_put64(unsigned char *p, uint64_t v)
{
    tq_put32(p, (uint32_t)v);
    tq_put32(p + 4, (uint32_t)(v >> 32));
}

/* CRC-32C by one path, for the tests: 0 table, 1 SSE4.2 crc32 instruction,
 * 2 (what tq_crc32c uses) carry-less folding for large buffers; a path the CPU
 * lacks falls back to the one below it. */
uint32_t tq_crc32c_path(int path, uint32_t crc, const void *data, size_t n);

/* Hands the caller the mapping behind the current frame's stored payload
 * (the caller munmaps base, len), so that it outlives the next frame; 0 when
 * the payload is not mapped. */
int tq_reader_take_map(tq_reader *r, void **base, size_t *len);

/* CRC of a header: every byte of it but the header_crc field itself (44..47). */
uint32_t tq_header_crc(const unsigned char *hdr, size_t header_len);

/* Encodes a frame header into hdr (at least TQ_MAX_HEADER bytes); returns its
 * length (a multiple of 64). The frame's fields must already be valid. */
size_t tq_header_encode(unsigned char *hdr, const tq_frame *f, uint32_t payload_crc);

/* Checks the offsets of a str payload of n rows and raw bytes; 0 if fine, else
 * fills the error message (without context). */
tq_status tq_str_check(const void *raw, uint64_t raw_size, int64_t n);

/* Inflates a zlib payload and checks it (one zlib stream, exactly raw_size
 * bytes, str offsets and UTF-8); keep=1 keeps the result as the frame's data,
 * keep=0 only checks, in bounded memory. Message without context. */
tq_status tq_frame_inflate(tq_frame *f, int keep);

/* Checks a frame name and a metadata block; fills the message on failure. */
tq_status tq_name_check(const char *name, size_t len);
tq_status tq_meta_check(const char *meta, size_t len);

/* ---- devices ---- */

/* For the tests: 1 makes devices opened from then on use only their plainest
 * shader variants, as on hardware without subgroup operations, 16-bit types
 * or large workgroups (a GPU backend chooses variants by those capabilities,
 * and the test machines have them all); 0 restores the normal choice. Not a
 * user setting: users never need it, results agree either way. */
void tq_device_force_plain(int on);
int tq_device_plain_forced(void);
/* For the tests: 1 makes every op of a device other than the CPU take the
 * host path (hostpath.h), so that the cross-backend suite checks that path on
 * every op; 0 restores native kernels. Not a user setting. */
void tq_device_force_host(int on);
/* lib/op/autopick.c: auto's rule by the size of the work (1: the CPU, with
 * why), and this process's local rank under a launcher (-1: none) */
int tq_autopick_cpu(double flops, char *why, size_t n);
int tq_local_rank(const char **var);
int tq_device_host_forced(void);

/* ---- device timers (timer.c), for tq-bench ---- */

/* The timer that times dev's work on its own clock: "device events" (CUDA,
 * HIP), "timestamp queries" (Vulkan); NULL where there is none: the CPU, or
 * a device whose timer failed to start (tq_device_timer_why says why, ""
 * where it has none at all). Its callers then time it with the host's clock. */
const char *tq_device_timer_name(const tq_device *dev);
const char *tq_device_timer_why(const tq_device *dev);
/* Marks where timing starts among the work queued on dev. A failure to start
 * leaves the device without a timer from then on (so that one run does not
 * mix clocks), except while a graph is recorded. */
tq_status tq_device_timer_begin(tq_device *dev);
/* Marks where it ends, waits for the device to get there (a sync) and gives
 * the seconds the device took from one mark to the other. */
tq_status tq_device_timer_end(tq_device *dev, double *seconds);

/* ---- the FMA peak probe (peak.c), for tq-bench ---- */

/* Whether dev has an FMA peak kernel (CUDA, HIP, Vulkan when their
 * kernels have it; not the CPU, whose peak lib/bench/fma.c measures on the
 * host). */
int tq_device_has_fma_peak(tq_device *dev);
/* Queues one launch (no wait) of that kernel: a thread per f32 element of
 * out, each running independent chains of `iters` fused multiply-adds in
 * registers and writing their sum there; *flops is the launch's exact flop
 * count (2 a multiply-add). Fails where the build's kernels lack it. */
tq_status tq_device_fma_peak(tq_device *dev, tq_tensor *out, int64_t iters, double *flops);

/* ---- output files written atomically ---- */

/* Registers a temporary path to remove if the process is interrupted. */
void tq_tempfile_add(const char *path);
void tq_tempfile_remove(const char *path);
/* Async-signal-safe: unlinks every registered temporary file. */
void tq_tempfile_cleanup_all(void);
/* Creates the temporary file for an atomic write of path: *fd open for
 * writing, *tmp its malloc'd name, registered for removal on interruption.
 * A path that exists and is not a regular file (a device, a FIFO) is opened
 * for writing in place instead, with *tmp = NULL. */
tq_status tq_atomic_open(const char *path, int *fd, char **tmp);
/* Ends an atomic write whose fd is closed: renames tmp to path when commit and
 * st is TQ_OK, else removes it; frees tmp. Returns st, or the rename failure. */
tq_status tq_atomic_finish(char *tmp, const char *path, int commit, tq_status st);

/* Makes a pipe's buffer large (1 MiB) when fd is a pipe; ignores failure. */
void tq_pipe_grow(int fd);

/* Opens an input file for reading ("-" is standard input, fd 0): a path that
 * cannot be opened, or is a directory, is TQ_ERR_NOINPUT (exit 66) with
 * "PATH: cannot open: WHY", the one message every input gets. */
tq_status tq_input_open(const char *path, int *fd);
/* The same as a stdio stream ("-" is stdin): fclose it unless it is stdin. */
tq_status tq_input_fopen(const char *path, FILE **f);

/* Reads exactly n bytes unless EOF comes first; returns bytes read or -1. */
ssize_t tq_read_full(int fd, void *buf, size_t n);

#endif
