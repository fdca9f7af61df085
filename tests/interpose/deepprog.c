/*
 * deepprog.c - loads libdeep.so with RTLD_DEEPBIND and runs its captures.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "../scenario/scenario.h"

int main(int argc, char **argv)
{
    struct sc_context c;
    sc_setup(&c);
    void *h = dlopen(argc > 1 ? argv[1] : "libdeep.so", RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    int (*loop)(struct sc_context *) = (int (*)(struct sc_context *))dlsym(h, "deep_capture_loop");
    return loop ? loop(&c) : 1;
}
