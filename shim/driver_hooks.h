/*
 * driver_hooks.h - what the generated wrappers call: the hook of each role
 * (see driver_api.def), and the lifecycle's start. Only driver_wrappers.c
 * includes it: it is the top of the module graph with lifecycle.c.
 */
#ifndef RECAP_DRIVER_HOOKS_H
#define RECAP_DRIVER_HOOKS_H

#include "shim/cache.h"
#include "shim/capture.h"
#include "shim/capture_guard.h"
#include "shim/capture_holds.h"
#include "shim/driver.h"
#include "shim/exec_reuse.h"
#include "shim/interpose.h"
#include "shim/kept_memory.h"
#include "shim/observed.h"
#include "shim/lifecycle.h"
#include "shim/runtime.h"
#include "shim/self_record.h"
#include "shim/step_time.h"
#include "shim/user_objects.h"

#endif
