/*
 * test_kparams.c - shim/base/kparams.c alone, against a fake
 * cuFuncGetParamInfo: a layout is asked once per function; after a module
 * unload (kparams_code_unloaded) a handle that came back as another kernel
 * gets the new kernel's layout, one that did not keeps its layout (the
 * same pointer, asked once more), and the old layout stays readable for
 * the journals that point at it.
 */
#include <criterion/criterion.h>

#include "shim/base/driver.h"
#include "shim/base/kparams.h"

/* What kparams.c links against, in place of driver_api.c. */
void *drv_real_fn[DRV_COUNT];

/* The fake driver: function 1 has `params_of_1` 8-byte parameters. */
static unsigned params_of_1 = 2;
static int queries;

static CUresult CUDAAPI fake_func_param_info(CUfunction f, size_t i, size_t *offset, size_t *size)
{
    queries++;
    unsigned n = (uintptr_t)f == 1 ? params_of_1 : 1;
    if (i >= n)
        return CUDA_ERROR_INVALID_VALUE;
    *offset = i * 8;
    *size = 8;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_kernel_param_info(CUkernel k, size_t i, size_t *offset, size_t *size)
{
    (void)k, (void)i, (void)offset, (void)size;
    return CUDA_ERROR_INVALID_VALUE;
}

static void fake_driver(void)
{
    drv_real_fn[DRV_cuFuncGetParamInfo] = (void *)fake_func_param_info;
    drv_real_fn[DRV_cuKernelGetParamInfo] = (void *)fake_kernel_param_info;
}

TestSuite(kparams, .init = fake_driver);

Test(kparams, asked_once_per_function)
{
    const struct kparams_layout *a = kparams_of((CUfunction)1);
    int after_first = queries;
    cr_assert(a->known);
    cr_assert_eq(a->count, 2);
    cr_assert_eq(kparams_of((CUfunction)1), a);
    cr_assert_eq(queries, after_first, "asked the driver again without an unload");
}

Test(kparams, a_handle_reused_after_an_unload_gets_the_new_layout)
{
    const struct kparams_layout *before = kparams_of((CUfunction)1);
    const struct kparams_layout *other = kparams_of((CUfunction)2);
    cr_assert_eq(before->count, 2);

    params_of_1 = 5;                 /* unloaded; the handle came back as another kernel */
    kparams_code_unloaded();
    const struct kparams_layout *after = kparams_of((CUfunction)1);
    cr_assert_eq(after->count, 5, "the unloaded kernel's layout was kept: %u parameters",
                 after->count);
    cr_assert_neq(after, before);
    cr_assert_eq(before->count, 2, "the old layout changed under the journals naming it");
    cr_assert_eq(before->size[1], 8);

    /* Unchanged by the unload: the same layout, asked once more only. */
    int asked = queries;
    cr_assert_eq(kparams_of((CUfunction)2), other);
    cr_assert_gt(queries, asked);
    asked = queries;
    cr_assert_eq(kparams_of((CUfunction)2), other);
    cr_assert_eq(kparams_of((CUfunction)1), after);
    cr_assert_eq(queries, asked, "asked again without a new unload");
}
