/*
 * driver_api_kernels.cu - the kernels of driver_api.c, built by run_all.sh
 * into a fatbin (nvcc -fatbin) that driver_api.c embeds with .incbin and
 * loads with cuModuleLoadData. Nothing here but the shared kernels.
 */
#include "affine_kernels.cuh"
