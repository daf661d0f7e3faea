/* fiber.c: stacks and switches of the stand-in's fibers (see fiber.h). */

#include "fiber.h"

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define TQ_ASAN 1
#endif

#ifndef TQ_FIBER_UCONTEXT
void tq_fiber_swap(void **save_sp, void *new_sp);
void tq_fiber_trampoline(void);
#endif

/* The fiber a switch left, so the one it entered can tell ASan where that
 * stack was (the OS thread's own stack is learnt this way). */
static __thread struct tq_fiber *switching_from;

static void after_switch(struct tq_fiber *self)
{
#ifdef TQ_ASAN
    struct tq_fiber *prev = switching_from;
    __sanitizer_finish_switch_fiber(self->asan_fake, &prev->asan_bottom, &prev->asan_size);
#else
    (void)self;
#endif
}

static void fiber_start(struct tq_fiber *f)
{
    after_switch(f);
    f->entry(f->arg);
}

#ifdef TQ_FIBER_UCONTEXT
static __thread struct tq_fiber *starting;
static void uc_start(void) { fiber_start(starting); }
#endif

static void prepare(struct tq_fiber *f)
{
    f->asan_fake = NULL;
#ifdef TQ_ASAN
    /* a fiber abandoned mid-kernel leaves its frames' redzones poisoned */
    __asan_unpoison_memory_region(f->stack, f->size);
#endif
#ifdef TQ_FIBER_UCONTEXT
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = f->size;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, uc_start, 0);
#else
    /* the frame tq_fiber_swap pops: fp control, r15 r14 r13 r12 rbx rbp, ret */
    uintptr_t top = ((uintptr_t)f->stack + f->size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 80);
    uint32_t fpctl[2] = {0x1F80, 0x037F}; /* mxcsr and x87 control word at reset */
    memcpy(&sp[0], fpctl, sizeof fpctl);
    sp[1] = 0;                          /* r15 */
    sp[2] = 0;                          /* r14 */
    sp[3] = (uint64_t)(uintptr_t)f;     /* r13: the argument */
    sp[4] = (uint64_t)(uintptr_t)fiber_start; /* r12: what the trampoline calls */
    sp[5] = 0;                          /* rbx */
    sp[6] = 0;                          /* rbp */
    sp[7] = (uint64_t)(uintptr_t)tq_fiber_trampoline;
    f->sp = sp;
#endif
}

int tq_fiber_create(struct tq_fiber *f, size_t size, void (*entry)(void *), void *arg)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size = (size + page - 1) / page * page;
    memset(f, 0, sizeof *f);
    /* one guard page below the stack: an overflow faults instead of
     * overwriting the neighbour's stack */
    char *m = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    mprotect(m, page, PROT_NONE);
    f->stack = m + page;
    f->size = size;
    f->asan_bottom = f->stack;
    f->asan_size = size;
    f->entry = entry;
    f->arg = arg;
    prepare(f);
    return 0;
}

void tq_fiber_restart(struct tq_fiber *f) { prepare(f); }

void tq_fiber_destroy(struct tq_fiber *f)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (f->stack)
        munmap((char *)f->stack - page, f->size + page);
    f->stack = NULL;
}

void tq_fiber_switch(struct tq_fiber *from, struct tq_fiber *to)
{
#ifdef TQ_ASAN
    __sanitizer_start_switch_fiber(&from->asan_fake, to->asan_bottom, to->asan_size);
#endif
    switching_from = from;
#ifdef TQ_FIBER_UCONTEXT
    starting = to;
    swapcontext(&from->uc, &to->uc);
#else
    tq_fiber_swap(&from->sp, to->sp);
#endif
    after_switch(from);
}
