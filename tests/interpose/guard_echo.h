/*
 * guard_echo.h - what the echo driver (generated guard_echo_driver.c, a
 * libcuda.so.1 holding only the guarded calls of driver_api.def) shows the
 * program that calls it (generated guardprog.c). The prototypes are recap's
 * generated ones: the exact symbols, with cuda.h's renaming macros undone.
 */
#ifndef GUARD_ECHO_H
#define GUARD_ECHO_H

#include "shim/base/driver_api.h"

#define ECHO_MAX_ARGS 16

extern const char *echo_last_name;      /* the guarded symbol last called */
extern int echo_last_nargs;
extern unsigned long long echo_last_args[ECHO_MAX_ARGS];   /* each argument's bits */
extern CUresult echo_result;            /* what the next guarded call returns */

#endif
