/*
 * dlsym_hook.S - the exported dlsym and dlvsym.
 *
 * glibc resolves dlsym(RTLD_NEXT, ...) relative to its caller's return
 * address, and RTLD_DEFAULT in its caller's scope. A C wrapper that
 * forwarded such a call would make librecap the caller, and a library
 * asking for "the next definition after me" would be handed its own symbol
 * (trap 3 of INTERPOSITION.md). So these two pseudo-handles leave through a
 * true tail jump to glibc's function, with the original return address
 * still on the stack (in the global scope recap's exports come first
 * anyway); lookups in a real handle go to the C hook in interpose.c. Must never: touch the stack frame on the RTLD_NEXT path
 * beyond the one-time resolution of glibc's pointers.
 */
#if defined(__x86_64__)

    .text

/* void *dlsym(void *handle, const char *name) */
    .globl dlsym
    .type dlsym, @function
dlsym:
    .cfi_startproc
    testq   %rdi, %rdi                  /* RTLD_DEFAULT is ((void *) 0) */
    jz      1f
    cmpq    $-1, %rdi                   /* RTLD_NEXT is ((void *) -1l) */
    jne     recap_dlsym_hook
1:  movq    libc_dlsym_fn(%rip), %rax
    testq   %rax, %rax
    jz      2f
    jmp     *%rax
2:  pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    subq    $8, %rsp                    /* keep the call 16-byte aligned */
    .cfi_adjust_cfa_offset 8
    call    libc_dl_resolve
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testl   %eax, %eax
    jz      1b
    xorl    %eax, %eax                  /* glibc not found: no symbol */
    ret
    .cfi_endproc
    .size dlsym, .-dlsym

/* void *dlvsym(void *handle, const char *name, const char *version) */
    .globl dlvsym
    .type dlvsym, @function
dlvsym:
    .cfi_startproc
    testq   %rdi, %rdi
    jz      1f
    cmpq    $-1, %rdi
    jne     recap_dlvsym_hook
1:  movq    libc_dlvsym_fn(%rip), %rax
    testq   %rax, %rax
    jz      2f
    jmp     *%rax
2:  pushq   %rdi
    .cfi_adjust_cfa_offset 8
    pushq   %rsi
    .cfi_adjust_cfa_offset 8
    pushq   %rdx
    .cfi_adjust_cfa_offset 8
    call    libc_dl_resolve
    popq    %rdx
    .cfi_adjust_cfa_offset -8
    popq    %rsi
    .cfi_adjust_cfa_offset -8
    popq    %rdi
    .cfi_adjust_cfa_offset -8
    testl   %eax, %eax
    jz      1b
    xorl    %eax, %eax
    ret
    .cfi_endproc
    .size dlvsym, .-dlvsym

#elif defined(__aarch64__)

    .text

    .globl dlsym
    .type dlsym, %function
dlsym:
    cbz     x0, 1f                      /* RTLD_DEFAULT */
    cmn     x0, #1                      /* RTLD_NEXT */
    b.ne    recap_dlsym_hook
1:  adrp    x9, libc_dlsym_fn
    ldr     x9, [x9, :lo12:libc_dlsym_fn]
    cbz     x9, 2f
    br      x9
2:  stp     x29, x30, [sp, #-32]!
    stp     x0, x1, [sp, #16]
    bl      libc_dl_resolve
    mov     w9, w0
    ldp     x0, x1, [sp, #16]
    ldp     x29, x30, [sp], #32
    cbz     w9, 1b
    mov     x0, #0
    ret
    .size dlsym, .-dlsym

    .globl dlvsym
    .type dlvsym, %function
dlvsym:
    cbz     x0, 1f
    cmn     x0, #1
    b.ne    recap_dlvsym_hook
1:  adrp    x9, libc_dlvsym_fn
    ldr     x9, [x9, :lo12:libc_dlvsym_fn]
    cbz     x9, 2f
    br      x9
2:  stp     x29, x30, [sp, #-48]!
    stp     x0, x1, [sp, #16]
    str     x2, [sp, #32]
    bl      libc_dl_resolve
    mov     w9, w0
    ldp     x0, x1, [sp, #16]
    ldr     x2, [sp, #32]
    ldp     x29, x30, [sp], #48
    cbz     w9, 1b
    mov     x0, #0
    ret
    .size dlvsym, .-dlvsym

#else
#error "recap: dlsym_hook.S has no tail jump for this architecture"
#endif

    .section .note.GNU-stack,"",%progbits
