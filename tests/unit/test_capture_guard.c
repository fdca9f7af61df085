/*
 * test_capture_guard.c - shim/repeat/capture_guard.c alone, against a fake driver
 * table: each thread's capture mode follows its successful
 * cuThreadExchangeStreamCaptureMode calls (and only those), the hook hands
 * the driver's result and the previous mode back unchanged, and
 * capture_on_guard makes the call it was given unless the capture engine
 * answers it (then the driver is not called), and retries a device
 * allocation once after the cache let go of its memory; a free marked
 * +hold goes, past the guard, to the release hook instead of the driver,
 * and asks the engine only while recap records a capture itself.
 */
#include <criterion/criterion.h>
#include <pthread.h>

#include "shim/state/cache.h"
#include "shim/repeat/capture.h"
#include "shim/repeat/capture_guard.h"
#include "shim/repeat/capture_holds.h"

/* What capture_guard.c links against, in place of driver_api.c. */
void *drv_real_fn[DRV_COUNT];

const struct drv_entry drv_table[DRV_COUNT] = {
    [DRV_cuMemAlloc_v2] = { .oom_retry = 1 },
    [DRV_cuMemFree_v2] = { .hold_kind = DRV_HOLD_DEVICE },
};

/* Captures recap records itself: the engine is asked only while some runs. */
int ctab_self_recorded = 1;

static int releases;
static const union drv_args *released_args;

CUresult capture_on_release(enum drv_id id, union drv_args *args)
{
    (void)id;
    releases++;
    released_args = args;
    return (CUresult)777;
}

static enum drv_id invoked_id;
static const union drv_args *invoked_args;
static int invocations;
static CUresult invoke_results[2] = { (CUresult)4242, (CUresult)4242 };

CUresult drv_invoke(enum drv_id id, const union drv_args *a)
{
    invoked_id = id;
    invoked_args = a;
    return invoke_results[invocations++ % 2];
}

/* The capture engine's answer and the cache, as capture_guard.c sees them. */
static CUresult engine_answer = CUDA_SUCCESS;
static CUstreamCaptureMode engine_saw_mode;

CUresult capture_on_guarded_call(enum drv_id id, union drv_args *args,
                                 CUstreamCaptureMode thread_mode)
{
    (void)id, (void)args;
    engine_saw_mode = thread_mode;
    return engine_answer;
}

static int cache_releases;

int cache_release_for_oom(void)
{
    cache_releases++;
    return 1;
}

/* The driver's semantics, with a result the test chooses. */
static __thread CUstreamCaptureMode driver_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static CUresult driver_result = CUDA_SUCCESS;
static int driver_calls;

static CUresult CUDAAPI fake_exchange(CUstreamCaptureMode *mode)
{
    driver_calls++;
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    if (driver_result != CUDA_SUCCESS)
        return driver_result;
    CUstreamCaptureMode old = driver_mode;
    driver_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static void install(void)
{
    drv_real_fn[DRV_cuThreadExchangeStreamCaptureMode] = (void *)fake_exchange;
}

TestSuite(capture_guard, .init = install);

Test(capture_guard, a_thread_starts_in_global_mode)
{
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
}

Test(capture_guard, the_mode_follows_each_exchange)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cr_assert_eq(capture_on_exchange_mode(&m), CUDA_SUCCESS);
    cr_expect_eq(m, CU_STREAM_CAPTURE_MODE_GLOBAL, "the previous mode comes back");
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_RELAXED);

    m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    cr_assert_eq(capture_on_exchange_mode(&m), CUDA_SUCCESS);
    cr_expect_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);

    /* The usual save/restore pair. */
    cr_assert_eq(capture_on_exchange_mode(&m), CUDA_SUCCESS);
    cr_expect_eq(m, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
    cr_expect_eq(driver_calls, 3);
}

Test(capture_guard, a_failed_exchange_changes_nothing)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    driver_result = CUDA_ERROR_NOT_INITIALIZED;
    cr_expect_eq(capture_on_exchange_mode(&m), CUDA_ERROR_NOT_INITIALIZED);
    cr_expect_eq(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
    driver_result = CUDA_SUCCESS;
    /* NULL goes to the driver as it is, which answers the error. */
    cr_expect_eq(capture_on_exchange_mode(NULL), CUDA_ERROR_INVALID_VALUE);
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_expect_eq(driver_calls, 2);
}

static void *other_thread(void *arg)
{
    CUstreamCaptureMode *seen = arg;
    seen[0] = capture_thread_mode();
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    capture_on_exchange_mode(&m);
    seen[1] = capture_thread_mode();
    return NULL;
}

Test(capture_guard, each_thread_has_its_own_mode)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cr_assert_eq(capture_on_exchange_mode(&m), CUDA_SUCCESS);
    CUstreamCaptureMode seen[2] = { -1, -1 };
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, seen), 0);
    pthread_join(t, NULL);
    cr_expect_eq(seen[0], CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_expect_eq(seen[1], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    cr_expect_eq(capture_thread_mode(), CU_STREAM_CAPTURE_MODE_RELAXED);
}

Test(capture_guard, the_guard_hook_makes_the_call_it_was_given)
{
    union drv_args a = { .cuStreamSynchronize = { (CUstream)0x1234 } };
    cr_expect_eq(capture_on_guard(DRV_cuStreamSynchronize, &a), (CUresult)4242);
    cr_expect_eq(invoked_id, DRV_cuStreamSynchronize);
    cr_expect_eq(invoked_args, &a);
    cr_expect_eq(invoked_args->cuStreamSynchronize.hStream, (CUstream)0x1234);
}

Test(capture_guard, a_call_the_engine_answers_is_not_made)
{
    union drv_args a = { .cuStreamSynchronize = { (CUstream)0x1234 } };
    engine_answer = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    invocations = 0;
    cr_expect_eq(capture_on_guard(DRV_cuStreamSynchronize, &a),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_expect_eq(invocations, 0);
    cr_expect_eq(engine_saw_mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

Test(capture_guard, a_device_allocation_is_retried_once_after_the_cache_let_go)
{
    union drv_args a = { .cuMemAlloc_v2 = { NULL, 64 } };
    invoke_results[0] = CUDA_ERROR_OUT_OF_MEMORY;
    invoke_results[1] = CUDA_SUCCESS;
    cr_expect_eq(capture_on_guard(DRV_cuMemAlloc_v2, &a), CUDA_SUCCESS);
    cr_expect_eq(invocations, 2);
    cr_expect_eq(cache_releases, 1);
    /* A call that is no allocation is not retried. */
    invocations = 0;
    cr_expect_eq(capture_on_guard(DRV_cuStreamSynchronize, &a), CUDA_ERROR_OUT_OF_MEMORY);
    cr_expect_eq(invocations, 1);
    cr_expect_eq(cache_releases, 1);
}

Test(capture_guard, a_held_free_goes_to_the_release_hook_after_the_guard)
{
    union drv_args a = { .cuMemFree_v2 = { (CUdeviceptr)0x5000 } };
    invocations = 0;
    engine_saw_mode = (CUstreamCaptureMode)-1;
    cr_expect_eq(capture_on_guard(DRV_cuMemFree_v2, &a), (CUresult)777);
    cr_expect_eq(releases, 1);
    cr_expect_eq(released_args, &a);
    cr_expect_eq(invocations, 0, "the driver is not called: the release hook decides");
    cr_expect_eq(engine_saw_mode, CU_STREAM_CAPTURE_MODE_GLOBAL, "the guard was asked first");

    /* The engine refuses it: the release is not made at all. */
    engine_answer = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    cr_expect_eq(capture_on_guard(DRV_cuMemFree_v2, &a), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_expect_eq(releases, 1);
    engine_answer = CUDA_SUCCESS;

    /* With only driver captures journaled, the engine is not asked. */
    ctab_self_recorded = 0;
    engine_saw_mode = (CUstreamCaptureMode)-1;
    cr_expect_eq(capture_on_guard(DRV_cuMemFree_v2, &a), (CUresult)777);
    cr_expect_eq(releases, 2);
    cr_expect_eq(engine_saw_mode, (CUstreamCaptureMode)-1);
}
