/* fiber_x86_64.S: the context switch of fiber.c. tq_fiber_swap(&save_sp, new_sp)
 * pushes the callee-saved registers and the floating-point control state on
 * the current stack, stores rsp, loads the other fiber's rsp and pops its
 * state. A new fiber's stack is prepared (fiber.c) so that the final `ret`
 * lands in tq_fiber_trampoline, which calls entry(arg) from r12 and r13. */
#if defined(__x86_64__) && !defined(TQ_FIBER_UCONTEXT)
    .text
    .globl tq_fiber_swap
    .hidden tq_fiber_swap
    .type tq_fiber_swap, @function
tq_fiber_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tq_fiber_swap, .-tq_fiber_swap

    .globl tq_fiber_trampoline
    .hidden tq_fiber_trampoline
    .type tq_fiber_trampoline, @function
tq_fiber_trampoline:
    movq %r13, %rdi
    callq *%r12
    ud2
    .size tq_fiber_trampoline, .-tq_fiber_trampoline
#endif
    .section .note.GNU-stack,"",@progbits
