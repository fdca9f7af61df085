/*
 * interpose.c - dlsym, dlvsym and cuGetProcAddress answers.
 *
 * RTLD_DEFAULT and RTLD_NEXT never get here: dlsym_hook.S sends them to
 * glibc with the caller's own return address, and for interposed names the
 * global scope finds recap's exports first anyway. For a real handle (the
 * libcuda handle a runtime or framework opened), glibc answers and recap
 * swaps in its wrapper when the answer is the real driver's function of a
 * name it interposes. The thread that is loading the driver gets plain
 * answers, which keeps a driver that looks up its own names at load time
 * from recursing into drv_load().
 */
#include <string.h>

#include "shim/base/driver.h"
#include "shim/intercept/interpose.h"
#include "shim/base/libc_dl.h"
#include "shim/intercept/lifecycle.h"


/* Cheap filter before the table lookup: every interposed name is "cu"
 * followed by an upper-case letter (cudnn*, cublas*, cuda* are not). */
static int may_be_interposed(const char *name)
{
    return name && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

static void *wrap_symbol(void *found, const char *name)
{
    if (!found || !may_be_interposed(name) || drv_loading_on_this_thread())
        return found;
    int id = drv_find_symbol(name);
    if (id < 0 || !drv_wrapper_fn[id])
        return found;
    LIFECYCLE_ENSURE_STARTED();
    if (drv_real_fn[id] != found)
        return found;                     /* someone else's function of that name */
    drv_count_lookup(DRV_LOOKUP_DLSYM);
    return drv_wrapper_fn[id];
}

void *recap_dlsym_hook(void *handle, const char *name)
{
    if (libc_dl_resolve() != 0)
        return NULL;
    return wrap_symbol(libc_dlsym_fn(handle, name), name);
}

void *recap_dlvsym_hook(void *handle, const char *name, const char *version)
{
    if (libc_dl_resolve() != 0)
        return NULL;
    return wrap_symbol(libc_dlvsym_fn(handle, name, version), name);
}

void *interpose_wrap_proc(void *real, const char *symbol, int cuda_version, cuuint64_t flags)
{
    drv_count_lookup(DRV_LOOKUP_PROCADDR);
    if (drv_loading_on_this_thread())
        return real;
    int id = drv_find_pointer(real, symbol, cuda_version,
                              (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0);
    if (id < 0 || !drv_wrapper_fn[id])
        return real;
    return drv_wrapper_fn[id];
}
