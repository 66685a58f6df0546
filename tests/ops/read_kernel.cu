// The yardstick of an op that reads weights or caches: a kernel that only reads the same bytes from memory and does
// nothing with them. A matvec of a few megabytes cannot reach the copy bandwidth measured on a gigabyte, since filling
// the multiprocessors and waiting for the first and last loads take a few microseconds of any kernel; the time a
// plain read of its bytes takes, launched the same way, is what it can reach at its size.
#include "read_kernel.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cuda/launch.cuh"

namespace zinc::ops {
namespace {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;  // 16-byte loads in flight per thread

// Reads the 16-byte words [0, n0) of a and [0, n1) of b, kInFlight of a thread's at a time; the first ones before the
// kernel waits for the one before it, as a matvec asks for its first weights (no kernel writes these bytes).
__global__ void __launch_bounds__(kThreads) read_kernel(const uint4* a, int64_t n0, const uint4* b, int64_t n1,
                                                        unsigned* sink) {
    const int64_t n = n0 + n1, stride = int64_t(gridDim.x) * kThreads;
    unsigned acc = 0;
    bool waiting = true;
    for (int64_t i0 = int64_t(blockIdx.x) * kThreads + threadIdx.x; i0 < n; i0 += kInFlight * stride) {
        uint4 v[kInFlight];
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) {
            const int64_t i = i0 + u * stride;
            v[u] = i < n0 ? __ldcs(a + i) : i < n ? __ldcs(b + (i - n0)) : make_uint4(0, 0, 0, 0);
        }
        if (waiting) zinc::backend::cuda::begin_kernel(), waiting = false;
#pragma unroll
        for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    if (waiting) zinc::backend::cuda::begin_kernel();
    if (acc == 0x9e3779b9u) *sink = acc;  // almost never true, but the compiler cannot drop the loads
}

}  // namespace

cudaError_t read_bytes(const void* a, size_t bytes, unsigned* sink, cudaStream_t s) {
    int dev = 0, sms = 0;
    if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
    const int64_t n = int64_t(bytes / 16);
    // One round of kInFlight loads per thread where the bytes allow it, at most 8 blocks per multiprocessor.
    const int64_t per_block = int64_t(kThreads) * kInFlight;
    const int64_t blocks = std::clamp<int64_t>((n + per_block - 1) / per_block, 1, int64_t(8) * sms);
    return zinc::backend::cuda::launch(read_kernel, dim3(unsigned(blocks)), dim3(kThreads), 0, s,
                                       static_cast<const uint4*>(a), n, static_cast<const uint4*>(nullptr),
                                       int64_t{0}, sink);
}

double read_us(size_t bytes, int copies, int reps) {
    const size_t each = (bytes + 15) / 16 * 16;
    uint8_t* buf = nullptr;
    unsigned* sink = nullptr;
    cudaStream_t s = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaEvent_t t0 = nullptr, t1 = nullptr;
    const auto ok = [](cudaError_t e) { return e == cudaSuccess; };
    double result = -1;
    if (ok(cudaMalloc(&buf, each * size_t(copies))) && ok(cudaMemset(buf, 1, each * size_t(copies))) &&
        ok(cudaMalloc(&sink, sizeof(unsigned))) && ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) &&
        ok(cudaEventCreate(&t0)) && ok(cudaEventCreate(&t1)) &&
        ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal))) {
        bool queued = true;
        for (int i = 0; i < reps && queued; ++i)
            queued = ok(read_bytes(buf + each * size_t(i % copies), each, sink, s));
        const bool captured = ok(cudaStreamEndCapture(s, &graph)) && queued;
        if (captured && ok(cudaGraphInstantiate(&exec, graph, 0))) {
            std::vector<double> us;
            for (int r = 0; r < 6; ++r) {  // the first replay uploads the graph
                float ms = 0;
                if (!ok(cudaEventRecord(t0, s)) || !ok(cudaGraphLaunch(exec, s)) || !ok(cudaEventRecord(t1, s)) ||
                    !ok(cudaEventSynchronize(t1)) || !ok(cudaEventElapsedTime(&ms, t0, t1)))
                    break;
                if (r > 0) us.push_back(double(ms) * 1e3 / reps);
            }
            if (us.size() == 5) {
                std::sort(us.begin(), us.end());
                result = us[2];
            }
        }
    }
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (t0) cudaEventDestroy(t0);
    if (t1) cudaEventDestroy(t1);
    if (s) cudaStreamDestroy(s);
    cudaFree(sink);
    cudaFree(buf);
    cudaGetLastError();  // a failure above is reported by the result, not left for the next call
    return result;
}

}  // namespace zinc::ops
