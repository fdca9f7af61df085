/*
 * cuda_compat.h - the CUDA 13.3 driver additions that recap relies on.
 *
 * Owns: the declarations of cuStreamBeginRecaptureToGraph, its callback type,
 * its status enum and error 918, for builds against a cuda.h older than 13.3.
 * Must never: redefine anything the installed header already declares, or be
 * used as evidence that the running driver has the API (recap asks the driver
 * through cuGetProcAddress at the driver's own version).
 */
#ifndef RECAP_CUDA_COMPAT_H
#define RECAP_CUDA_COMPAT_H

#include <cuda.h>

#if CUDA_VERSION < 13030

typedef enum CUgraphRecaptureStatus_enum {
    CU_GRAPH_RECAPTURE_ELIGIBLE_FOR_UPDATE = 0,
    CU_GRAPH_RECAPTURE_INELIGIBLE_FOR_UPDATE = 1,
    CU_GRAPH_RECAPTURE_ERROR = 2
} CUgraphRecaptureStatus;

typedef CUresult (CUDAAPI *CUgraphRecaptureCallback)(
    void *data, CUgraphNode node, const CUgraphNodeParams *originalParams,
    const CUgraphNodeParams *recaptureParams, CUgraphRecaptureStatus status);

/* Not a member of the 13.0 CUresult enum, hence a cast constant. */
#define CUDA_ERROR_GRAPH_RECAPTURE_FAILURE ((CUresult)918)

CUresult CUDAAPI cuStreamBeginRecaptureToGraph(CUstream hStream,
                                               CUstreamCaptureMode mode,
                                               CUgraph hGraph,
                                               CUgraphRecaptureCallback callbackFunc,
                                               void *userData);

#endif /* CUDA_VERSION < 13030 */

/* The first driver version that has the recapture API. */
#define RECAP_RECAPTURE_MIN_DRIVER 13030

#endif /* RECAP_CUDA_COMPAT_H */
