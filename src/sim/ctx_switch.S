/*
 * ctx_switch.S — process context switch for x86-64 (SysV) and aarch64.
 *
 * void kb__ctx_switch(void **save_sp, void *to_sp)
 *   Pushes the callee-saved registers and the FP control words on the
 *   current stack, stores the stack pointer in *save_sp, loads to_sp and pops
 *   the same frame from there. Caller-saved registers need no saving: to the
 *   C caller this is an ordinary function call.
 *
 * kb__ctx_entry: first return address of a new context (see kb__ctx_make in
 *   stack.c): calls entry(arg) with the two values kb__ctx_make stored in
 *   callee-saved slots. entry never returns.
 *
 * Frame layouts (must match kb__ctx_make):
 *   x86-64, 64 bytes from sp: mxcsr(4) fpcw(2) zero(2), r15, r14, r13, r12,
 *     rbx, rbp, return address. entry = r13, arg = r12.
 *   aarch64, 176 bytes from sp: x19..x30 (96), d8..d15 (64), fpcr (8),
 *     pad (8). entry = x19, arg = x20, x30 = return address.
 *
 * Elsewhere (or with KB_SIM_FORCE_UCONTEXT) the file is empty and stack.c
 * uses ucontext.
 */
#if defined(__ELF__) && !defined(KB_SIM_FORCE_UCONTEXT)

#if defined(__x86_64__)
    .text
    .globl kb__ctx_switch
    .hidden kb__ctx_switch
    .type kb__ctx_switch, @function
    .p2align 4
kb__ctx_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    movq $0, (%rsp)
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsp, %rcx
    movq %rsi, %rsp
    /* Reload the FP control words only when their control bits differ
     * (rare): the loads, fldcw above all, cost more than the rest of the
     * switch. MXCSR bits 0-5 are sticky status flags, not preserved by the
     * ABI, so they are left out of the comparison. */
    movq (%rsp), %rax
    xorq (%rcx), %rax
    movabsq $0x0000ffffffffffc0, %rdx
    testq %rdx, %rax
    jnz 1f
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
1:
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
    .cfi_endproc
    .size kb__ctx_switch, .-kb__ctx_switch

    .globl kb__ctx_entry
    .hidden kb__ctx_entry
    .type kb__ctx_entry, @function
    .p2align 4
kb__ctx_entry:
    .cfi_startproc
    .cfi_undefined rip
    movq %r12, %rdi
    callq *%r13
    ud2
    .cfi_endproc
    .size kb__ctx_entry, .-kb__ctx_entry

#elif defined(__aarch64__)
    .text
    .globl kb__ctx_switch
    .hidden kb__ctx_switch
    .type kb__ctx_switch, %function
    .p2align 4
kb__ctx_switch:
    .cfi_startproc
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mrs x9, fpcr
    str x9, [sp, #160]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    ldr x9, [sp, #160]
    msr fpcr, x9
    add sp, sp, #176
    ret
    .cfi_endproc
    .size kb__ctx_switch, .-kb__ctx_switch

    .globl kb__ctx_entry
    .hidden kb__ctx_entry
    .type kb__ctx_entry, %function
    .p2align 4
kb__ctx_entry:
    .cfi_startproc
    .cfi_undefined x30
    mov x0, x20
    blr x19
    brk #0
    .cfi_endproc
    .size kb__ctx_entry, .-kb__ctx_entry
#endif

#endif

#if defined(__ELF__)
    .section .note.GNU-stack, "", %progbits
#endif
