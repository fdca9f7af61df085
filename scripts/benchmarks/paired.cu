/*
 * paired.cu - recap's own cost on a capture loop, measured inside one
 * process. Every iteration runs twice: once through the driver functions
 * the program links (recap's wrappers, when recap is preloaded) and once
 * through the real driver's own functions, looked up in libcuda's symbol
 * table so that no interposer stands in between. The two alternate (AB,
 * BA, AB, ...), so clock speed, caches and the GPU are in the same state
 * for both; the process-to-process spread, larger on a shared machine than
 * the 2 % margins measured here, does not enter the ratio.
 *
 * Two loops, each over N launches of a kernel whose arguments change every
 * iteration (as in instantiate.cu), driver API throughout:
 *   plain (0): capture, instantiate, launch, destroy the executable graph
 *     and the graph - a program without graph-update code;
 *   hand (1): capture, cuGraphExecUpdate into the executable graph kept
 *     from the previous iteration (instantiate the first time or when the
 *     update fails), launch, destroy the graph - the programming guide's cure.
 * --recap-way picks the loop run through the linked functions, --direct-way
 * the one run through the real driver. Each way writes its own buffer with
 * the same values; the program checks that the two buffers end equal.
 *
 * Per pair the host time (begin capture to after the launch call) and the
 * wall time (the same, up to the end of the stream synchronisation) of each
 * way are taken; pairs are grouped in blocks of --block, and each block's
 * ratio is the median of its recap-way times over the median of its
 * direct-way times. Printed: the median and quartiles of the block ratios.
 *
 * Usage: paired --info
 *        paired --nodes N --pairs P --warmup W --block B
 *                     --recap-way 0|1 --direct-way 0|1
 * Prints: result nodes=N pairs=P recap_way=plain|hand direct_way=..
 *         interposed=0|1 host_ratio=.. host_q25=.. host_q75=.. wall_ratio=..
 *         wall_q25=.. wall_q75=.. recap_host_us=.. direct_host_us=..
 *         recap_wall_us=.. direct_wall_us=.. recap_instantiations=..
 *         same_results=1
 *         phases begin_us=<recap way>/<direct way> launches_us=.. end_us=..
 *         instantiate_us=.. launch_us=.. destroy_us=.. (medians per phase)
 *         units graph_get_nodes_ns=.. ctx_get_current_ns=.. clock_ns=..
 *         mutex_pair_ns=.. rdtsc_ns=.. (x86-64) (native prices, for reading
 *         the phases)
 * interposed=1: the linked functions are not the driver's own (recap, or
 * another interposer, is in between). Exit 0; 1 on a CUDA error or when the
 * two buffers differ; 2 on bad arguments or when the real driver's
 * functions cannot be found.
 */
#include <cuda.h>

#include "bench_common.h"
#include "bench_direct.h"

#include <pthread.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {

__global__ void bump(float *data, float value, int index)
{
    data[index] = data[index] * 0.5f + value;
}

float value_for(long iteration, long node)
{
    return (float)((iteration * 7 + node) % 13) * 0.25f;
}

/* --- the real driver's functions (bench_direct.h) ---------------------------------- */

void *real_driver_function(const char *name)
{
    int found_library = 0;
    void *address = bench_real_driver_function(name, &found_library);
    if (!address) {
        fprintf(stderr, "bench paired: %s not found in %s\n", name,
                found_library ? "libcuda's dynamic symbol table" : "the process (no libcuda.so loaded)");
        exit(2);
    }
    return address;
}

/* --- one way of calling the driver ----------------------------------------------- */

struct driver_calls {
    decltype(&cuStreamBeginCapture) begin_capture;
    decltype(&cuLaunchKernel) launch_kernel;
    decltype(&cuStreamEndCapture) end_capture;
    decltype(&cuGraphInstantiateWithFlags) instantiate;
    decltype(&cuGraphExecUpdate) exec_update;
    decltype(&cuGraphLaunch) graph_launch;
    decltype(&cuStreamSynchronize) synchronize;
    decltype(&cuGraphExecDestroy) exec_destroy;
    decltype(&cuGraphDestroy) graph_destroy;
};

/* What the program links: recap's exports when it is preloaded. */
const driver_calls linked_calls = {cuStreamBeginCapture, cuLaunchKernel, cuStreamEndCapture,
                                   cuGraphInstantiateWithFlags, cuGraphExecUpdate,
                                   cuGraphLaunch, cuStreamSynchronize, cuGraphExecDestroy,
                                   cuGraphDestroy};

/* The exported names behind cuda.h's macros (cuStreamBeginCapture is
 * cuStreamBeginCapture_v2, cuGraphExecUpdate is cuGraphExecUpdate_v2). */
driver_calls real_calls()
{
    driver_calls d;
    d.begin_capture = (decltype(d.begin_capture))real_driver_function("cuStreamBeginCapture_v2");
    d.launch_kernel = (decltype(d.launch_kernel))real_driver_function("cuLaunchKernel");
    d.end_capture = (decltype(d.end_capture))real_driver_function("cuStreamEndCapture");
    d.instantiate = (decltype(d.instantiate))real_driver_function("cuGraphInstantiateWithFlags");
    d.exec_update = (decltype(d.exec_update))real_driver_function("cuGraphExecUpdate_v2");
    d.graph_launch = (decltype(d.graph_launch))real_driver_function("cuGraphLaunch");
    d.synchronize = (decltype(d.synchronize))real_driver_function("cuStreamSynchronize");
    d.exec_destroy = (decltype(d.exec_destroy))real_driver_function("cuGraphExecDestroy");
    d.graph_destroy = (decltype(d.graph_destroy))real_driver_function("cuGraphDestroy");
    return d;
}

struct capture_loop {
    const driver_calls *calls;
    bool handwritten;
    CUstream stream;
    CUfunction kernel;
    float *data;
    long nodes;
    CUgraphExec kept;
    long instantiations;
};

/* Where an iteration's host time goes: the begin, the launches into the
 * capture, the end, the instantiation or update, the graph launch, and the
 * destroys (each from the end of the one before). */
enum phase { PH_BEGIN, PH_LAUNCHES, PH_END, PH_INSTANTIATE, PH_LAUNCH, PH_DESTROY, NPHASES };
const char *const phase_names[NPHASES] = {"begin", "launches", "end", "instantiate", "launch",
                                          "destroy"};

struct iteration_times {
    double host_us, wall_us;
    double phase_us[NPHASES];
};

void iterate(capture_loop &l, long iteration, iteration_times *t)
{
    const driver_calls &d = *l.calls;
    double mark[NPHASES + 1];
    mark[0] = bench_now_us();
    CU_CHECK(d.begin_capture(l.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    mark[1] = bench_now_us();
    for (long node = 0; node < l.nodes; node++) {
        float value = value_for(iteration, node);
        int index = (int)node;
        void *args[] = {&l.data, &value, &index};
        CU_CHECK(d.launch_kernel(l.kernel, 1, 1, 1, 1, 1, 1, 0, l.stream, args, nullptr));
    }
    mark[2] = bench_now_us();
    CUgraph graph;
    CU_CHECK(d.end_capture(l.stream, &graph));
    mark[3] = bench_now_us();
    if (!l.handwritten) {
        CUgraphExec exec;
        CU_CHECK(d.instantiate(&exec, graph, 0));
        l.instantiations++;
        mark[4] = bench_now_us();
        CU_CHECK(d.graph_launch(exec, l.stream));
        mark[5] = bench_now_us();
        CU_CHECK(d.exec_destroy(exec)); /* released when the launch completes */
    } else {
        CUgraphExecUpdateResultInfo info;
        if (l.kept && d.exec_update(l.kept, graph, &info) != CUDA_SUCCESS) {
            CU_CHECK(d.exec_destroy(l.kept));
            l.kept = nullptr;
        }
        if (!l.kept) {
            CU_CHECK(d.instantiate(&l.kept, graph, 0));
            l.instantiations++;
        }
        mark[4] = bench_now_us();
        CU_CHECK(d.graph_launch(l.kept, l.stream));
        mark[5] = bench_now_us();
    }
    CU_CHECK(d.graph_destroy(graph));
    mark[6] = bench_now_us();
    CU_CHECK(d.synchronize(l.stream));
    t->host_us = mark[NPHASES] - mark[0];
    t->wall_us = bench_now_us() - mark[0];
    for (int p = 0; p < NPHASES; p++)
        t->phase_us[p] = mark[p + 1] - mark[p];
}

capture_loop make_loop(const driver_calls *calls, bool handwritten, CUfunction kernel, long nodes)
{
    capture_loop l = {calls, handwritten, nullptr, kernel, nullptr, nodes, nullptr, 0};
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    l.stream = (CUstream)stream;
    CUDA_CHECK(cudaMalloc(&l.data, sizeof(float) * nodes));
    CUDA_CHECK(cudaMemset(l.data, 0, sizeof(float) * nodes));
    return l;
}

/* Per block of pairs, median(recap way) / median(direct way). */
std::vector<double> block_ratios(const std::vector<double> &recap, const std::vector<double> &direct,
                                 size_t block)
{
    std::vector<double> ratios;
    for (size_t at = 0; at + block <= recap.size(); at += block) {
        std::vector<double> r(recap.begin() + at, recap.begin() + at + block);
        std::vector<double> d(direct.begin() + at, direct.begin() + at + block);
        ratios.push_back(bench_quantile(r, 0.5) / bench_quantile(d, 0.5));
    }
    return ratios;
}

/* The native price of the units recap's own work is made of, for reading
 * the phase table: a node count of an N-node graph, a context query, a
 * clock reading, an uncontended mutex pair. ns per call, median of 50
 * batches of 1000. */
template <typename F> double ns_per_call(F call)
{
    std::vector<double> batches;
    for (int b = 0; b < 50; b++) {
        const double start = bench_now_us();
        for (int i = 0; i < 1000; i++)
            call();
        batches.push_back((bench_now_us() - start) /* us per 1000 = ns per call */);
    }
    return bench_quantile(batches, 0.5);
}

void print_unit_costs(const capture_loop &l)
{
    const driver_calls &d = *l.calls;
    CUgraph graph;
    CU_CHECK(d.begin_capture(l.stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (long node = 0; node < l.nodes; node++) {
        float value = 0;
        int index = (int)node;
        float *data = l.data;
        void *args[] = {&data, &value, &index};
        CU_CHECK(d.launch_kernel(l.kernel, 1, 1, 1, 1, 1, 1, 0, l.stream, args, nullptr));
    }
    CU_CHECK(d.end_capture(l.stream, &graph));
    auto get_nodes = (decltype(&cuGraphGetNodes))real_driver_function("cuGraphGetNodes");
    auto ctx_current = (decltype(&cuCtxGetCurrent))real_driver_function("cuCtxGetCurrent");
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    printf("units graph_get_nodes_ns=%.1f ctx_get_current_ns=%.1f clock_ns=%.1f mutex_pair_ns=%.1f",
           ns_per_call([&] { size_t n = 0; (void)get_nodes(graph, nullptr, &n); }),
           ns_per_call([&] { CUcontext c; (void)ctx_current(&c); }),
           ns_per_call([] { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); }),
           ns_per_call([&] { pthread_mutex_lock(&lock); pthread_mutex_unlock(&lock); }));
#if defined(__x86_64__)
    volatile unsigned long long sink = 0;
    printf(" rdtsc_ns=%.1f", ns_per_call([&] { sink = sink + __rdtsc(); }));
#endif
    printf("\n");
    CU_CHECK(d.graph_destroy(graph));
}

} // namespace

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        bench_print_info();
        return 0;
    }
    long nodes = 10, pairs = 4000, warmup = 100, block = 64, recap_way = 1, direct_way = 1;
    bench_arg args[] = {{"--nodes", &nodes}, {"--pairs", &pairs}, {"--warmup", &warmup},
                        {"--block", &block}, {"--recap-way", &recap_way},
                        {"--direct-way", &direct_way}};
    const char *usage = "paired --info | --nodes N --pairs P --warmup W --block B "
                        "--recap-way 0|1 --direct-way 0|1";
    bench_parse_args(argc, argv, args, sizeof args / sizeof args[0], usage);
    if (nodes < 1 || block < 1 || pairs < block || warmup < 0 || (recap_way & ~1L) ||
        (direct_way & ~1L)) {
        fprintf(stderr, "bench paired: need nodes >= 1, pairs >= block >= 1, warmup >= 0, "
                        "ways 0 (plain) or 1 (hand)\nusage: %s\n", usage);
        return 2;
    }

    CUDA_CHECK(cudaFree(nullptr)); /* the runtime's context, current from here on */
    cudaFunction_t kernel;
    CUDA_CHECK(cudaGetFuncBySymbol(&kernel, (const void *)bump));
    const driver_calls direct_calls = real_calls();
    const bool interposed = (void *)linked_calls.launch_kernel != (void *)direct_calls.launch_kernel;

    capture_loop recap = make_loop(&linked_calls, recap_way, (CUfunction)kernel, nodes);
    capture_loop direct = make_loop(&direct_calls, direct_way, (CUfunction)kernel, nodes);
    std::vector<double> recap_host, direct_host, recap_wall, direct_wall;
    std::vector<double> recap_phase[NPHASES], direct_phase[NPHASES];
    for (long pair = 0; pair < warmup + pairs; pair++) {
        iteration_times r, d;
        /* One call site for both ways: recap names a capture site by its
         * stack, and the program has one loop. */
        for (int turn = 0; turn < 2; turn++) {
            const bool recap_turn = turn == (int)(pair & 1);
            iterate(recap_turn ? recap : direct, pair, recap_turn ? &r : &d);
        }
        if (pair >= warmup) {
            recap_host.push_back(r.host_us), recap_wall.push_back(r.wall_us);
            direct_host.push_back(d.host_us), direct_wall.push_back(d.wall_us);
            for (int p = 0; p < NPHASES; p++) {
                recap_phase[p].push_back(r.phase_us[p]);
                direct_phase[p].push_back(d.phase_us[p]);
            }
        }
    }

    std::vector<float> a(nodes), b(nodes);
    CUDA_CHECK(cudaMemcpy(a.data(), recap.data, sizeof(float) * nodes, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(b.data(), direct.data, sizeof(float) * nodes, cudaMemcpyDeviceToHost));
    const bool same = memcmp(a.data(), b.data(), sizeof(float) * nodes) == 0;
    for (capture_loop *l : {&recap, &direct})
        if (l->kept)
            CU_CHECK(l->calls->exec_destroy(l->kept));
    print_unit_costs(direct);

    const std::vector<double> host = block_ratios(recap_host, direct_host, (size_t)block);
    const std::vector<double> wall = block_ratios(recap_wall, direct_wall, (size_t)block);
    const char *way_names[] = {"plain", "hand"};
    printf("result nodes=%ld pairs=%ld recap_way=%s direct_way=%s interposed=%d "
           "host_ratio=%.4f host_q25=%.4f host_q75=%.4f wall_ratio=%.4f wall_q25=%.4f "
           "wall_q75=%.4f recap_host_us=%.3f direct_host_us=%.3f recap_wall_us=%.3f "
           "direct_wall_us=%.3f recap_instantiations=%ld same_results=%d\n",
           nodes, pairs, way_names[recap_way], way_names[direct_way], (int)interposed,
           bench_quantile(host, 0.5), bench_quantile(host, 0.25), bench_quantile(host, 0.75),
           bench_quantile(wall, 0.5), bench_quantile(wall, 0.25), bench_quantile(wall, 0.75),
           bench_quantile(recap_host, 0.5), bench_quantile(direct_host, 0.5),
           bench_quantile(recap_wall, 0.5), bench_quantile(direct_wall, 0.5),
           recap.instantiations, (int)same);
    /* The median of each phase, recap way then direct way: where the
     * difference lies. */
    printf("phases");
    for (int p = 0; p < NPHASES; p++)
        printf(" %s_us=%.3f/%.3f", phase_names[p], bench_quantile(recap_phase[p], 0.5),
               bench_quantile(direct_phase[p], 0.5));
    printf("\n");
    if (!same) {
        fprintf(stderr, "bench paired: the two ways' buffers differ\n");
        return 1;
    }
    return 0;
}
