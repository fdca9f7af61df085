/*
 * nvtx_sites.c - capture sites named by NVTX ranges, on the stand-in driver.
 *
 * capture_once() is called from one line, so every capture has the same C
 * call path; it runs inside the range "decode", inside "prefill" nested in
 * "outer", inside a domain range whose message is a registered string
 * ("step"), and outside any range: four sites, three named by their range
 * (one site when recap cannot see the ranges). Prints one line per capture and
 * "done", the same with and without recap.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        printf("%s failed: %d\n", what, (int)r);
        exit(1);
    }
}

static CUdeviceptr buffer;

__attribute__((noinline))
static void capture_once(CUstream stream, const char *who)
{
    CUgraph graph;
    size_t nodes = 0;
    check(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    check(cuMemsetD8Async(buffer, 7, 256, stream), "cuMemsetD8Async");
    check(cuStreamEndCapture(stream, &graph), "cuStreamEndCapture");
    check(cuGraphGetNodes(graph, NULL, &nodes), "cuGraphGetNodes");
    check(cuGraphDestroy(graph), "cuGraphDestroy");
    printf("%s: %zu nodes\n", who, nodes);
}

static nvtxDomainHandle_t domain;
static nvtxStringHandle_t step;

/* Out of line, so that the capture below has one call site whatever the
 * compiler does with the branches. */
__attribute__((noinline))
static void push_phase(int phase)
{
    nvtxEventAttributes_t attr = { 0 };
    switch (phase) {
    case 0:
        nvtxRangePushA("decode");
        break;
    case 1:
        nvtxRangePushA("outer");
        nvtxRangePushA("prefill");
        break;
    case 2:
        attr.version = NVTX_VERSION;
        attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attr.message.registered = step;
        nvtxDomainRangePushEx(domain, &attr);
        break;
    default:
        break;
    }
}

__attribute__((noinline))
static void pop_phase(int phase)
{
    switch (phase) {
    case 0:
        nvtxRangePop();
        break;
    case 1:
        nvtxRangePop();
        nvtxRangePop();
        break;
    case 2:
        nvtxDomainRangePop(domain);
        break;
    default:
        break;
    }
}

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, 0), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    check(cuMemAlloc(&buffer, 256), "cuMemAlloc");

    domain = nvtxDomainCreateA("nvtx_sites");
    step = nvtxDomainRegisterStringA(domain, "step");
    static const char *const phases[] = { "decode", "prefill", "step", "unnamed" };
    for (int i = 0; i < 3 * 4; i++) {
        push_phase(i % 4);
        capture_once(stream, phases[i % 4]);      /* the one C call path */
        pop_phase(i % 4);
    }
    nvtxDomainDestroy(domain);
    check(cuMemFree(buffer), "cuMemFree");
    check(cuStreamDestroy(stream), "cuStreamDestroy");
    printf("done\n");
    return 0;
}
