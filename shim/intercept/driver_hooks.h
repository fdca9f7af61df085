/*
 * driver_hooks.h - what the generated wrappers call: the hook of each role
 * (see driver_api.def), and the lifecycle's start. Only driver_wrappers.c
 * includes it: it is the top of the module graph with lifecycle.c.
 */
#ifndef RECAP_DRIVER_HOOKS_H
#define RECAP_DRIVER_HOOKS_H

#include "shim/state/cache.h"
#include "shim/repeat/capture.h"
#include "shim/repeat/capture_guard.h"
#include "shim/repeat/capture_holds.h"
#include "shim/base/driver.h"
#include "shim/repeat/exec_reuse.h"
#include "shim/intercept/interpose.h"
#include "shim/state/kept_host.h"
#include "shim/state/kept_memory.h"
#include "shim/state/observed.h"
#include "shim/intercept/lifecycle.h"
#include "shim/base/runtime.h"
#include "shim/repeat/self_record.h"
#include "shim/base/step_time.h"
#include "shim/state/user_objects.h"

#endif
