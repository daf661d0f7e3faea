/* fiber.h: user-space context switching for the stand-in's GPU threads. On
 * x86-64 a switch saves only what the ABI says survives a call (rbx rbp
 * r12-r15, rsp, mxcsr, the x87 control word): about ten times cheaper than
 * swapcontext, which also makes a sigprocmask system call. Elsewhere (or with
 * -DTQ_FIBER_UCONTEXT) it is ucontext. Every switch is announced to
 * AddressSanitizer, which otherwise takes a fiber's stack for a stack overflow
 * of the OS thread. */
#ifndef TQ_SD_FIBER_H
#define TQ_SD_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__) && !defined(TQ_FIBER_UCONTEXT)
#define TQ_FIBER_UCONTEXT 1
#endif
#ifdef TQ_FIBER_UCONTEXT
#include <ucontext.h>
#endif

struct tq_fiber {
#ifdef TQ_FIBER_UCONTEXT
    ucontext_t uc;
#else
    void *sp;            /* saved stack pointer while switched out */
#endif
    void *stack;         /* usable stack (NULL: the OS thread's own) */
    size_t size;
    const void *asan_bottom; /* the stack as ASan is told of it */
    size_t asan_size;
    void *asan_fake;     /* ASan's fake-stack handle while switched out */
    void (*entry)(void *);
    void *arg;
};

/* Maps a stack of `size` bytes (plus a guard page) and prepares the fiber to
 * run entry(arg) on its first switch in; entry must never return. 0 or -1. */
int tq_fiber_create(struct tq_fiber *f, size_t size, void (*entry)(void *), void *arg);
/* Makes the fiber start afresh at entry(arg) on the same stack: for a fiber
 * abandoned in the middle of its work (a failed launch). */
void tq_fiber_restart(struct tq_fiber *f);
void tq_fiber_destroy(struct tq_fiber *f);
/* Saves the running context into `from` and resumes `to`. */
void tq_fiber_switch(struct tq_fiber *from, struct tq_fiber *to);

#endif
