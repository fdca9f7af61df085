/*
 * libc_dl.h - glibc's own dlsym and dlvsym (module prefix libc_dl_).
 *
 * librecap exports dlsym and dlvsym, so every ordinary reference to them,
 * its own included, binds to recap's hooks. This module finds glibc's
 * definitions by reading the dynamic symbol table of the object that holds
 * dlopen (libc.so.6 since glibc 2.34, libdl.so.2 before), which involves no
 * symbol lookup that recap's exports could shadow. Must never: call dlsym,
 * allocate, or take a lock (it runs inside the first dlsym of the process).
 */
#ifndef RECAP_LIBC_DL_H
#define RECAP_LIBC_DL_H

typedef void *(*libc_dlsym_t)(void *handle, const char *name);
typedef void *(*libc_dlvsym_t)(void *handle, const char *name, const char *version);

/* Set once resolved; read by the RTLD_NEXT tail jumps in dlsym_hook.S. */
extern libc_dlsym_t libc_dlsym_fn;
extern libc_dlvsym_t libc_dlvsym_fn;

/* Resolves both pointers if not yet done. Returns 0, or -1 if glibc's
 * definitions cannot be found (then recap's dlsym hooks answer NULL). */
int libc_dl_resolve(void);

#endif
