/*
 * site_helper.c - a program whose capture sites test_site inspects from
 * outside: it prints the ids of known call sites, so that two runs (two
 * load addresses) can be compared. Built with -O0 and without sibling-call
 * optimisation, so every call below leaves its frame on the stack.
 *
 * Usage: site_helper ids | frames | noself
 */
#include <stdio.h>
#include <string.h>

#include "tests/unit/site_probe.h"

/* Exported (with -rdynamic) so that frames can name them. */
uint64_t wrapper(int depth);
uint64_t caller_a(int depth);
uint64_t caller_b(int depth);
int frames_inner(char *out, size_t len);
int frames_outer(char *out, size_t len);

uint64_t wrapper(int depth)
{
    uint64_t id = probe_id(depth);
    return id;
}

uint64_t caller_a(int depth)
{
    uint64_t id = wrapper(depth);
    return id;
}

uint64_t caller_b(int depth)
{
    uint64_t id = wrapper(depth);
    return id;
}

int frames_inner(char *out, size_t len)
{
    int n = probe_frames(3, out, len);
    return n;
}

int frames_outer(char *out, size_t len)
{
    int n = frames_inner(out, len);
    return n;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "ids";
    char frames[4096];
    if (strcmp(mode, "ids") == 0) {
        probe_set_self(1);
        printf("a8 %016llx\n", (unsigned long long)caller_a(8));
        printf("b8 %016llx\n", (unsigned long long)caller_b(8));
        printf("a2 %016llx\n", (unsigned long long)caller_a(2));
        printf("b2 %016llx\n", (unsigned long long)caller_b(2));
        printf("a1 %016llx\n", (unsigned long long)caller_a(1));
        printf("b1 %016llx\n", (unsigned long long)caller_b(1));
        uint64_t x = probe_id(8);
        uint64_t y = probe_id(8);
        printf("direct_x %016llx\ndirect_y %016llx\n", (unsigned long long)x,
               (unsigned long long)y);
        uint64_t loop[3];
        for (int i = 0; i < 3; i++)
            loop[i] = caller_a(8);
        printf("loop_same %d\n", loop[0] == loop[1] && loop[1] == loop[2]);
        /* One call site, librecap-side chains of 0, 30 and 3 extra frames:
         * all skipped, so one id (30 also exceeds the learnt skip count). */
        static const int extra[3] = { 0, 30, 3 };
        uint64_t nested[3];
        for (int i = 0; i < 3; i++)
            nested[i] = probe_id_nested(8, extra[i]);
        printf("nested_same %d\n", nested[0] == nested[1] && nested[1] == nested[2]);
        printf("main_addr %p\n", (void *)main);
        return 0;
    }
    if (strcmp(mode, "frames") == 0) {
        probe_set_self(1);
        int n = frames_outer(frames, sizeof frames);
        printf("%d\n%s", n, frames);
        return 0;
    }
    if (strcmp(mode, "noself") == 0) {
        probe_set_self(0);
        int n = probe_frames(2, frames, sizeof frames);
        printf("%d\n%s", n, frames);
        return 0;
    }
    fprintf(stderr, "usage: site_helper ids|frames|noself\n");
    return 2;
}
