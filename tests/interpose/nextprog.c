/*
 * nextprog.c - uses libnext.so (linked before the driver) and checks that
 * its RTLD_NEXT lookups find the next definitions, never themselves.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>

void next_report(void);

int main(void)
{
    int version = 0;
    cuDriverGetVersion(&version);     /* the program does use the driver */
    next_report();
    printf("getenv works=%d\n", getenv("PATH") != NULL);
    return 0;
}
