/*
 * nccllocal.c - ncclprog as PyTorch loads NCCL: its code and the fake NCCL
 * it links come from a library that this launcher dlopens with RTLD_LOCAL,
 * as Python loads an extension module. The library's calls to NCCL still
 * reach recap's preloaded hooks first (the global scope comes first), but
 * NCCL itself sits in the dlopen's local scope, where RTLD_NEXT from
 * librecap cannot find it: the hooks must find it there to forward.
 *
 *   nccllocal LIBRARY [ITERATIONS]    exit status of the library's ncclprog_main
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nccllocal LIBRARY [ITERATIONS]\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 2;
    }
    int (*prog_main)(int, char **) = (int (*)(int, char **))dlsym(lib, "ncclprog_main");
    if (prog_main == NULL) {
        fprintf(stderr, "dlsym ncclprog_main: %s\n", dlerror());
        return 2;
    }
    return prog_main(argc - 1, argv + 1);
}
