/* host-fault.c: an LD_PRELOAD shim that makes the Nth call of a kind of the
 * host fail, as an exhausted heap, a full disk or a failing one would, so
 * that tests/fault-sweep.sh can hold every tool to a clean failure
 * (tests/faults/README.md). Tests only; never installed.
 *   TQ_FAULT_FAIL=KIND:N[:ERRNO]  the Nth call of KIND (from 1) fails with
 *                                 ERRNO (a name, ENOSPC, or a number) or
 *                                 the kind's own: alloc and mmap ENOMEM,
 *                                 open and write ENOSPC, read EIO
 *   TQ_FAULT_COUNTS=FILE          at exit, one line "KIND COUNT" a kind,
 *                                 appended to FILE
 *   TQ_FAULT_QUIET=1              no "injected" line on stderr
 * The kinds: alloc (malloc, calloc, realloc, reallocarray, posix_memalign,
 * aligned_alloc, memalign, strdup, strndup, and the allocations inside
 * getline, getdelim, open_memstream, fdopen), mmap, open (of a file for
 * writing: open, openat, creat, fopen, mk*temp, mkdtemp), write (write,
 * pwrite, writev, pwritev, copy_file_range, fsync, fdatasync, and the
 * buffers of a stream the tool fdopen/fopen-ed for writing as they reach the
 * file; never standard error, where the tool's one line goes), read (read,
 * pread, readv), and a fortified build's __open_2, __read_chk and the like.
 *
 * What counts: a call made by the tool's own code (the main executable: the
 * tool and libtq are linked into it statically), found by the call's return
 * address, and the allocations libc makes inside the calls above on its
 * behalf. The dynamic loader's and libc's start-up allocations, and those of
 * the libraries tq loads (OpenBLAS, zlib, Open MPI, the sanitizers' runtime),
 * do not count: they are not tq's to handle, and counting them would make N
 * mean nothing from one machine to the next. With one thread the count is
 * the same in every run of the same command; with several it may vary a
 * little, and the Nth call is whichever comes Nth.
 *
 * The settings are read once, in the constructor, and taken out of the
 * environment: a process the tool starts runs without faults.
 *
 * Under AddressSanitizer this library comes before the sanitizer's runtime
 * (ASAN_OPTIONS=verify_asan_link_order=0 lets it) and forwards to its
 * allocator through dlsym(RTLD_NEXT); the allocations dlsym makes itself
 * before that is known come from a static buffer. */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define CALLER ((uintptr_t)__builtin_return_address(0))

enum { K_ALLOC, K_MMAP, K_OPEN, K_WRITE, K_READ, K_KINDS };
static const char *const kind_names[K_KINDS] = {"alloc", "mmap", "open", "write", "read"};
static const int kind_errno[K_KINDS] = {ENOMEM, ENOMEM, ENOSPC, ENOSPC, EIO};

static const struct {
    const char *name;
    int code;
} errno_names[] = {
    {"ENOMEM", ENOMEM}, {"ENOSPC", ENOSPC}, {"EIO", EIO},       {"EDQUOT", EDQUOT},
    {"EFBIG", EFBIG},   {"EROFS", EROFS},   {"EACCES", EACCES}, {"EINTR", EINTR},
};

static unsigned long long counts[K_KINDS];
static int fail_kind = -1, fail_errno;
static unsigned long long fail_n;
static int quiet;
static char counts_file[4096];
static uintptr_t exe_lo, exe_hi, exe_base; /* the main executable's code, its load address */
/* >0 while a call above runs in libc for the tool: its allocations count */
static __thread int on_behalf __attribute__((tls_model("initial-exec")));

/* ---- the real functions ---- */
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_mkostemp)(char *, int);
static int (*real_mkstemp)(char *);
static char *(*real_mkdtemp)(char *);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_copy_file_range)(int, off_t *, int, off_t *, size_t, unsigned);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static ssize_t (*real_getdelim)(char **, size_t *, int, FILE *);
static FILE *(*real_open_memstream)(char **, size_t *);
static FILE *(*real_fdopen)(int, const char *);
static FILE *(*real_fopen)(const char *, const char *);

/* dlsym's own allocations while the real allocator is not known yet */
static _Alignas(64) unsigned char boot[1 << 16];
static size_t boot_used;
static int resolving;

static int in_boot(const void *p)
{
    return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n, size_t align)
{
    /* a 16-byte header before each block holds its size, for realloc */
    if (align < 16)
        align = 16;
    size_t at = (boot_used + 16 + align - 1) & ~(align - 1);
    if (at + n > sizeof boot)
        return NULL;
    memcpy(boot + at - 16, &n, sizeof n);
    boot_used = at + n;
    return memset(boot + at, 0, n);
}

#define RESOLVE(name) (*(void **)&real_##name = dlsym(RTLD_NEXT, #name))

static void resolve(void)
{
    if (real_free || resolving)
        return;
    resolving = 1;
    RESOLVE(malloc);
    RESOLVE(calloc);
    RESOLVE(realloc);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(mmap);
    RESOLVE(open);
    RESOLVE(openat);
    RESOLVE(mkostemp);
    RESOLVE(mkstemp);
    RESOLVE(mkdtemp);
    RESOLVE(write);
    RESOLVE(pwrite);
    RESOLVE(writev);
    RESOLVE(pwritev);
    RESOLVE(copy_file_range);
    RESOLVE(fsync);
    RESOLVE(fdatasync);
    RESOLVE(read);
    RESOLVE(pread);
    RESOLVE(readv);
    RESOLVE(getdelim);
    RESOLVE(open_memstream);
    RESOLVE(fdopen);
    RESOLVE(fopen);
    RESOLVE(free); /* last: it says the others are known */
    resolving = 0;
}

/* ---- counting and failing ---- */
static void say(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1;
    if (n > 0 && real_write)
        (void)!real_write(2, line, (size_t)n);
}

static int ours(uintptr_t ra) { return on_behalf > 0 || (ra >= exe_lo && ra < exe_hi); }

/* The errno a call of the tool's from ra fails with, or 0; counts it. The
 * line says where the call was made: addr2line -e TOOL OFFSET names it. */
static int count(int kind, uintptr_t ra)
{
    unsigned long long n = __atomic_add_fetch(&counts[kind], 1, __ATOMIC_RELAXED);
    if (kind != fail_kind || n != fail_n)
        return 0;
    if (!quiet && ra >= exe_lo && ra < exe_hi)
        say("tq-host-fault: injected: %s call %llu fails with %s (called at %#lx in the "
            "executable)\n", kind_names[kind], n, strerror(fail_errno),
            (unsigned long)(ra - 1 - exe_base));
    else if (!quiet)
        say("tq-host-fault: injected: %s call %llu fails with %s\n", kind_names[kind], n,
            strerror(fail_errno));
    return fail_errno;
}

/* the same for a call from ra, which counts when it is the tool's */
static int hit(int kind, uintptr_t ra) { return ours(ra) ? count(kind, ra) : 0; }

static int exe_range(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    exe_base = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!exe_lo || lo < exe_lo)
            exe_lo = lo;
        if (hi > exe_hi)
            exe_hi = hi;
    }
    return 1; /* the first object is the main program */
}

static void write_counts(void)
{
    char text[256];
    size_t len = 0;
    for (int k = 0; k < K_KINDS; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s %llu\n", kind_names[k],
                                __atomic_load_n(&counts[k], __ATOMIC_RELAXED));
    int fd = real_open(counts_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || real_write(fd, text, len) != (ssize_t)len)
        say("tq-host-fault: TQ_FAULT_COUNTS=%s: cannot write it\n", counts_file);
    if (fd >= 0)
        close(fd);
}

__attribute__((destructor)) static void host_fault_end(void)
{
    if (counts_file[0])
        write_counts();
}

__attribute__((constructor)) static void host_fault_start(void)
{
    resolve();
    const char *q = getenv("TQ_FAULT_QUIET");
    quiet = q && *q && strcmp(q, "0");
    const char *c = getenv("TQ_FAULT_COUNTS");
    if (c && *c)
        snprintf(counts_file, sizeof counts_file, "%s", c);
    const char *s = getenv("TQ_FAULT_FAIL");
    if (s && *s) {
        size_t len = strcspn(s, ":");
        char *end = NULL;
        for (int k = 0; k < K_KINDS; k++)
            if (strlen(kind_names[k]) == len && !strncmp(s, kind_names[k], len))
                fail_kind = k;
        if (fail_kind >= 0 && s[len] == ':') {
            fail_n = strtoull(s + len + 1, &end, 10);
            fail_errno = kind_errno[fail_kind];
            if (*end == ':') {
                const char *e = end + 1;
                end = NULL;
                for (size_t i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
                    if (!strcmp(e, errno_names[i].name))
                        fail_errno = errno_names[i].code, end = (char *)e + strlen(e);
                if (!end && (fail_errno = (int)strtol(e, &end, 10)) <= 0)
                    end = NULL;
            }
        }
        if (fail_kind < 0 || !fail_n || !end || *end) {
            say("tq-host-fault: TQ_FAULT_FAIL=%s: not KIND:N[:ERRNO] (KIND alloc, mmap, open, "
                "write or read; N from 1; ERRNO a name such as EIO or a number); no fault "
                "injected\n", s);
            fail_kind = -1;
        }
    }
    /* a process the tool starts (tq-bench runs the tools) gets no fault */
    unsetenv("TQ_FAULT_FAIL");
    unsetenv("TQ_FAULT_COUNTS");
    dl_iterate_phdr(exe_range, NULL);
}

/* ---- alloc ---- */
API void *malloc(size_t n)
{
    resolve();
    if (!real_malloc)
        return boot_alloc(n, 16);
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return errno = e, NULL;
    return real_malloc(n);
}

API void *calloc(size_t m, size_t n)
{
    resolve();
    if (!real_calloc)
        return n && m > SIZE_MAX / n ? NULL : boot_alloc(m * n, 16);
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return errno = e, NULL;
    return real_calloc(m, n);
}

API void free(void *p)
{
    resolve();
    if (p && !in_boot(p) && real_free)
        real_free(p);
}

static void *realloc_at(void *p, size_t n, uintptr_t ra)
{
    resolve();
    if (p && in_boot(p)) { /* out of the start-up buffer: a copy */
        size_t old;
        memcpy(&old, (unsigned char *)p - 16, sizeof old);
        void *q = real_malloc ? real_malloc(n) : boot_alloc(n, 16);
        if (q)
            memcpy(q, p, old < n ? old : n);
        return q;
    }
    if (!real_realloc)
        return boot_alloc(n, 16);
    if (p && !n) /* a free */
        return real_realloc(p, n);
    int e = hit(K_ALLOC, ra);
    if (e)
        return errno = e, NULL;
    return real_realloc(p, n);
}

API void *realloc(void *p, size_t n) { return realloc_at(p, n, CALLER); }

API void *reallocarray(void *p, size_t m, size_t n)
{
    if (n && m > SIZE_MAX / n)
        return errno = ENOMEM, NULL;
    return realloc_at(p, m * n, CALLER);
}

API int posix_memalign(void **out, size_t align, size_t n)
{
    resolve();
    if (!real_posix_memalign)
        return (*out = boot_alloc(n, align)) ? 0 : ENOMEM;
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return e;
    return real_posix_memalign(out, align, n);
}

API void *aligned_alloc(size_t align, size_t n)
{
    resolve();
    if (!real_aligned_alloc)
        return boot_alloc(n, align);
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return errno = e, NULL;
    return real_aligned_alloc(align, n);
}

API void *memalign(size_t align, size_t n)
{
    resolve();
    if (!real_memalign)
        return boot_alloc(n, align);
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return errno = e, NULL;
    return real_memalign(align, n);
}

/* strdup and strndup here, not forwarded: a sanitizer's own allocates
 * without calling malloc, and would never fail */
API char *strdup(const char *s)
{
    resolve();
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return errno = e, NULL;
    size_t n = strlen(s) + 1;
    char *d = real_malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

API char *strndup(const char *s, size_t max)
{
    resolve();
    int e = hit(K_ALLOC, CALLER);
    if (e)
        return errno = e, NULL;
    size_t n = strnlen(s, max);
    char *d = real_malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* libc's calls that allocate for the tool: what they allocate counts */
API ssize_t getdelim(char **line, size_t *cap, int delim, FILE *f)
{
    resolve();
    int mine = ours(CALLER);
    on_behalf += mine;
    ssize_t r = real_getdelim(line, cap, delim, f);
    on_behalf -= mine;
    return r;
}

API ssize_t getline(char **line, size_t *cap, FILE *f)
{
    resolve();
    int mine = ours(CALLER);
    on_behalf += mine;
    ssize_t r = real_getdelim(line, cap, '\n', f);
    on_behalf -= mine;
    return r;
}

API FILE *open_memstream(char **buf, size_t *len)
{
    resolve();
    int mine = ours(CALLER);
    on_behalf += mine;
    FILE *f = real_open_memstream(buf, len);
    on_behalf -= mine;
    return f;
}

/* ---- mmap ---- */
API void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    resolve();
    int e = hit(K_MMAP, CALLER);
    if (e)
        return errno = e, MAP_FAILED;
    return real_mmap(addr, len, prot, flags, fd, off);
}

API void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

/* ---- open (for writing) ---- */
static int for_writing(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

static int open_at(int dir, const char *path, int flags, mode_t mode, uintptr_t ra)
{
    resolve();
    int e = for_writing(flags) ? hit(K_OPEN, ra) : 0;
    if (e)
        return errno = e, -1;
    return dir == AT_FDCWD ? real_open(path, flags, mode) : real_openat(dir, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

API int open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open_at(AT_FDCWD, path, flags, mode, CALLER);
}

API int open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open_at(AT_FDCWD, path, flags, mode, CALLER);
}

API int openat(int dir, const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    resolve();
    int e = for_writing(flags) ? hit(K_OPEN, CALLER) : 0;
    if (e)
        return errno = e, -1;
    return real_openat(dir, path, flags, mode);
}

/* what a fortified build (-D_FORTIFY_SOURCE) calls instead */
API int __open_2(const char *path, int flags) { return open_at(AT_FDCWD, path, flags, 0, CALLER); }
API int __open64_2(const char *path, int flags) __attribute__((alias("__open_2")));

API int __openat_2(int dir, const char *path, int flags)
{
    resolve();
    int e = for_writing(flags) ? hit(K_OPEN, CALLER) : 0;
    if (e)
        return errno = e, -1;
    return real_openat(dir, path, flags, 0);
}

API int creat(const char *path, mode_t mode)
{
    return open_at(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode, CALLER);
}

API int mkostemp(char *tmpl, int flags)
{
    resolve();
    int e = hit(K_OPEN, CALLER);
    if (e)
        return errno = e, -1;
    return real_mkostemp(tmpl, flags);
}

API int mkstemp(char *tmpl)
{
    resolve();
    int e = hit(K_OPEN, CALLER);
    if (e)
        return errno = e, -1;
    return real_mkstemp(tmpl);
}

API char *mkdtemp(char *tmpl)
{
    resolve();
    int e = hit(K_OPEN, CALLER);
    if (e)
        return errno = e, NULL;
    return real_mkdtemp(tmpl);
}

/* A stream the tool writes a file through: a stream over the descriptor whose
 * writes come here (libc's own reach the kernel without a call we see), so a
 * full disk meets the stream where it would: at a flush, with the stream's
 * error set. */
typedef struct {
    int fd;
} wstream;

static ssize_t ws_write(void *c, const char *buf, size_t n)
{
    int e = count(K_WRITE, 0); /* the tool's stream */
    if (e)
        return errno = e, -1;
    return real_write(((wstream *)c)->fd, buf, n);
}

static ssize_t ws_read(void *c, char *buf, size_t n)
{
    int e = count(K_READ, 0);
    if (e)
        return errno = e, -1;
    return real_read(((wstream *)c)->fd, buf, n);
}

static int ws_seek(void *c, off64_t *off, int whence)
{
    off_t r = lseek(((wstream *)c)->fd, (off_t)*off, whence);
    if (r < 0)
        return -1;
    *off = r;
    return 0;
}

static int ws_close(void *c)
{
    int r = close(((wstream *)c)->fd);
    real_free(c);
    return r;
}

static int mode_writes(const char *mode) { return strpbrk(mode, "wa+") != NULL; }

/* the stream over fd, or NULL (errno set) with fd left open; its allocations
 * count as the tool's */
static FILE *wstream_open(int fd, const char *mode)
{
    on_behalf++;
    wstream *w = malloc(sizeof *w);
    FILE *f = NULL;
    if (w) {
        w->fd = fd;
        f = fopencookie(w, mode,
                        (cookie_io_functions_t){ws_read, ws_write, ws_seek, ws_close});
        if (!f) {
            int e = errno;
            real_free(w);
            errno = e;
        }
    }
    on_behalf--;
    return f;
}

API FILE *fdopen(int fd, const char *mode)
{
    resolve();
    if (!ours(CALLER) || !mode_writes(mode))
        return real_fdopen(fd, mode);
    return wstream_open(fd, mode);
}

API FILE *fopen(const char *path, const char *mode)
{
    resolve();
    if (!ours(CALLER) || !mode_writes(mode))
        return real_fopen(path, mode);
    int e = hit(K_OPEN, CALLER);
    if (e)
        return errno = e, NULL;
    int flags = strchr(mode, '+') ? O_RDWR : O_WRONLY;
    flags |= mode[0] == 'a' ? O_CREAT | O_APPEND : mode[0] == 'w' ? O_CREAT | O_TRUNC : 0;
    flags |= strchr(mode, 'e') ? O_CLOEXEC : 0;
    flags |= strchr(mode, 'x') ? O_EXCL : 0;
    int fd = real_open(path, flags, 0666);
    if (fd < 0)
        return NULL;
    FILE *f = wstream_open(fd, mode);
    if (!f) {
        int e2 = errno;
        close(fd);
        errno = e2;
    }
    return f;
}

API FILE *fopen64(const char *path, const char *mode) __attribute__((alias("fopen")));

/* ---- write: never to standard error, where the tool's one line goes ---- */
API ssize_t write(int fd, const void *p, size_t n)
{
    resolve();
    int e = fd != 2 ? hit(K_WRITE, CALLER) : 0;
    if (e)
        return errno = e, -1;
    return real_write(fd, p, n);
}

API ssize_t pwrite(int fd, const void *p, size_t n, off_t off)
{
    resolve();
    int e = fd != 2 ? hit(K_WRITE, CALLER) : 0;
    if (e)
        return errno = e, -1;
    return real_pwrite(fd, p, n, off);
}

API ssize_t pwrite64(int fd, const void *p, size_t n, off_t off) __attribute__((alias("pwrite")));

API ssize_t writev(int fd, const struct iovec *v, int cnt)
{
    resolve();
    int e = fd != 2 ? hit(K_WRITE, CALLER) : 0;
    if (e)
        return errno = e, -1;
    return real_writev(fd, v, cnt);
}

API ssize_t pwritev(int fd, const struct iovec *v, int cnt, off_t off)
{
    resolve();
    int e = fd != 2 ? hit(K_WRITE, CALLER) : 0;
    if (e)
        return errno = e, -1;
    return real_pwritev(fd, v, cnt, off);
}

API ssize_t copy_file_range(int in, off_t *in_off, int out, off_t *out_off, size_t n,
                            unsigned flags)
{
    resolve();
    int e = hit(K_WRITE, CALLER);
    if (e)
        return errno = e, -1;
    return real_copy_file_range(in, in_off, out, out_off, n, flags);
}

API int fsync(int fd)
{
    resolve();
    int e = hit(K_WRITE, CALLER);
    if (e)
        return errno = e, -1;
    return real_fsync(fd);
}

API int fdatasync(int fd)
{
    resolve();
    int e = hit(K_WRITE, CALLER);
    if (e)
        return errno = e, -1;
    return real_fdatasync(fd);
}

/* ---- read ---- */
API ssize_t read(int fd, void *p, size_t n)
{
    resolve();
    int e = hit(K_READ, CALLER);
    if (e)
        return errno = e, -1;
    return real_read(fd, p, n);
}

API ssize_t pread(int fd, void *p, size_t n, off_t off)
{
    resolve();
    int e = hit(K_READ, CALLER);
    if (e)
        return errno = e, -1;
    return real_pread(fd, p, n, off);
}

API ssize_t pread64(int fd, void *p, size_t n, off_t off) __attribute__((alias("pread")));

extern void __chk_fail(void) __attribute__((noreturn));

API ssize_t __read_chk(int fd, void *p, size_t n, size_t room)
{
    if (n > room)
        __chk_fail();
    resolve();
    int e = hit(K_READ, CALLER);
    if (e)
        return errno = e, -1;
    return real_read(fd, p, n);
}

API ssize_t __pread_chk(int fd, void *p, size_t n, off_t off, size_t room)
{
    if (n > room)
        __chk_fail();
    resolve();
    int e = hit(K_READ, CALLER);
    if (e)
        return errno = e, -1;
    return real_pread(fd, p, n, off);
}

API ssize_t readv(int fd, const struct iovec *v, int cnt)
{
    resolve();
    int e = hit(K_READ, CALLER);
    if (e)
        return errno = e, -1;
    return real_readv(fd, v, cnt);
}
