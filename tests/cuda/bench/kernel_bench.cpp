// Micro-benchmarks of the CUDA kernels on real model shapes, beside the kernel tests: each kernel timed alone, in
// µs per call, GB/s of the bytes it must move, and that rate as a share of the measured device-to-device copy
// bandwidth. A regression or a slow kernel shows here without a whole model run. The decode matvecs also show the
// time a kernel that only reads their weights takes (read_kernel.cu), and their speed as a share of its: a few
// megabytes cannot be read at the bandwidth of a gigabyte's copy, and this says how far a matvec is from what its
// size allows.
//
//   zinc_cuda_kernel_bench [--filter SUBSTRING] [--reps N] [--splits N,N,...]
//
// --filter keeps the runs whose name contains SUBSTRING: "decode <type> <shape>" for the one-row matvecs (types as
// ggml names them: "decode q4_K ffn_gate"), "decode gated <type> gate+up 4096x12288" for the gated FFN's fused matvec,
// "prefill matmul (<rows>[, way]) <type> <shape>" for the batched matmuls,
// "moe <model> <tokens> tokens, <way>" for the MoE layers' expert FFN, "decode moe <model> 1 token" for a decode
// token's, "prefill attention <shape>, <n> tokens" for a prompt's attention, "prefill delta-net <shape>, <n> tokens"
// for the chunked recurrence, "decode delta-net delta_net_step <shape>" and "decode delta-net its 5 ops <shape>" for a
// delta-net layer's decode step, fused and as the ops it replaces, "rms_norm 1x<cols>", and the decode attention runs
// by cache type and depth.
// --splits times the decode attention kernels at the given key-split counts as well as at the planned one (for
// tuning plan_attention).
//
// Calls are replayed from a recorded step (Backend::run_step, a CUDA graph) so launch gaps do not count, and each
// call reads its own copy of the weights among enough copies to exceed the L2 cache, so the bytes come from memory.
// The MoE layers of a prompt, whose experts exceed the L2 cache alone, run eagerly; a decode token's is replayed.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_backend.h"
#include "../cuda_test_util.h"
#include "read_kernel.h"
#include "gguf/tensor_type.h"

namespace {

using zinc::backend::Act;
using zinc::backend::CudaBackend;
using zinc::backend::KvLayer;
using zinc::backend::Weight;
using zinc::gguf::TensorType;

constexpr size_t kColdBytes = size_t(512) << 20;  // weight copies per shape: at least this many bytes (L2: 50 MB)
// The tensor cores' dense f16/bf16 product rate measured on the H200, against which the products' TFLOP/s are given.
constexpr double kPeakTflops = 790.0;

struct Options {
    std::string filter;
    int reps = 50;
    std::vector<int> splits;
};

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

// The median time per call over `rounds` rounds of reps calls each, the first `skip` rounds not counted; `round()`
// queues one round on the backend's stream.
double median_round_us(CudaBackend& be, int rounds, int skip, int reps, const std::function<void()>& round) {
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "event");
    check(cudaEventCreate(&t1), "event");
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
        check(cudaEventRecord(t0, be.stream()), "record");
        round();
        check(cudaEventRecord(t1, be.stream()), "record");
        be.synchronize();
        float ms = 0;
        check(cudaEventElapsedTime(&ms, t0, t1), "elapsed");
        if (r >= skip) times.push_back(double(ms) * 1e3 / reps);
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// The median over rounds of the time per call of `call(i)` (i = 0 .. reps-1), replayed from a recorded step: round 0
// runs eagerly, round 1 records, the rest replay.
double time_us(CudaBackend& be, int reps, const std::function<void(int)>& call) {
    static uint64_t shape = 1;
    const uint64_t key = shape++;
    const int32_t id = 0;
    auto step = [&] {
        for (int i = 0; i < reps; ++i) call(i);
        return Act{};
    };
    return median_round_us(be, 7, 2, reps, [&] { be.run_step(nullptr, key, {&id, 1}, {&id, 1}, step); });
}

double copy_gbps(CudaBackend& be) {
    const size_t n = size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    check(cudaMalloc(&a, n), "malloc");
    check(cudaMalloc(&b, n), "malloc");
    check(cudaMemset(a, 1, n), "memset");
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    double best = 0;
    for (int r = 0; r < 5; ++r) {
        cudaEventRecord(t0, be.stream());
        cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, be.stream());
        cudaEventRecord(t1, be.stream());
        check(cudaEventSynchronize(t1), "copy");
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        if (r > 0) best = std::max(best, 2.0 * double(n) / (double(ms) * 1e-3) / 1e9);  // read + write
    }
    cudaFree(a);
    cudaFree(b);
    return best;
}

// A row of the table; read_us > 0 adds the time of a read of the same bytes and the kernel's speed as a share of it.
void report(const char* kernel, const std::string& what, double us, double bytes, double copy, double read_us = 0) {
    const double gbps = bytes / (us * 1e-6) / 1e9;
    std::printf("| %-14s | %-34s | %9.2f | %8.1f | %5.1f%% |", kernel, what.c_str(), us, gbps, 100.0 * gbps / copy);
    if (read_us > 0)
        std::printf(" %7.2f | %5.1f%% |\n", read_us, 100.0 * read_us / us);
    else
        std::printf(" %7s | %6s |\n", "", "");
}

// The time per call of a kernel that only reads the bytes of weights a and b (each call those of copy i % copies,
// as the matvecs read them), replayed as the matvecs are.
double read_us(CudaBackend& be, int reps, const std::vector<Weight>& a, const std::vector<Weight>& b, size_t bytes_a,
               size_t bytes_b) {
    unsigned* sink = nullptr;
    check(cudaMalloc(&sink, sizeof(unsigned)), "malloc");
    const double us = time_us(be, reps, [&](int i) {
        const size_t c = size_t(i) % a.size();
        check(zinc::cuda_bench::read_bytes(a[c].data, bytes_a, b.empty() ? nullptr : b[c].data, b.empty() ? 0 : bytes_b,
                                           sink, be.stream()),
              "read");
    });
    check(cudaFree(sink), "free");
    return us;
}

// A row for a product-bound kernel: its TFLOP/s for `flops` in `us`, and their share of kPeakTflops.
void report_tflops(const std::string& kernel, const std::string& what, double us, double flops) {
    const double tflops = flops / (us * 1e-6) / 1e12;
    std::printf("| %-22s | %-34s | %9.2f | %6.1f TFLOP/s | %5.1f%% |\n", kernel.c_str(), what.c_str(), us, tflops,
                100.0 * tflops / kPeakTflops);
}

struct Shape {
    const char* name;
    int64_t cols, rows;
};

// Qwen3-8B's decode matvecs (and its LM head), and the wider FFN of the MoE models' shared parts; Qwen3.6's LM head
// and router.
const Shape kShapes[] = {
    {"attn_k/v 4096x1024", 4096, 1024},    {"attn_q/o 4096x4096", 4096, 4096},
    {"ffn_gate/up 4096x12288", 4096, 12288}, {"ffn_down 12288x4096", 12288, 4096},
    {"output 4096x151936", 4096, 151936}, {"output 2048x248320", 2048, 248320},
    {"ffn_gate_inp 2048x256", 2048, 256},
};

void bench_matvecs(CudaBackend& be, const Options& o, double copy) {
    const TensorType types[] = {TensorType::Q4_K, TensorType::Q5_K,   TensorType::Q6_K, TensorType::Q8_0,
                                TensorType::MXFP4, TensorType::IQ4_XS, TensorType::F16,  TensorType::BF16,
                                TensorType::F32};
    for (TensorType t : types)
        for (const Shape& s : kShapes) {
            const std::string what = std::string(zinc::gguf::type_name(t)) + " " + s.name;
            if (("decode " + what).find(o.filter) == std::string::npos) continue;
            auto host = zinc::cuda_test::random_tensor(t, s.cols, s.rows, "w");
            const double bytes = double(host->info.nbytes);
            const int copies = int(std::max<size_t>(1, (kColdBytes + host->info.nbytes - 1) / host->info.nbytes));
            std::vector<Weight> w;  // device copies, freed with the backend
            for (int c = 0; c < copies; ++c) w.push_back(be.load_weight(host->info));
            Act x = be.alloc(1, s.cols), y = be.alloc(1, s.rows);
            be.upload(x, zinc::cuda_test::random_floats(size_t(s.cols)));
            const double us = time_us(be, o.reps, [&](int i) { be.matmul(w[size_t(i % copies)], x, y); });
            report("matmul (1 row)", what, us, bytes, copy, read_us(be, o.reps, w, {}, host->info.nbytes, 0));
            be.free(x);
            be.free(y);
        }
}

// The gated FFN's fused matvec (ffn_gated: gate and up rows of one output in one warp, SwiGLU applied) on Qwen3-8B's
// shape, the largest op of a decode step: µs per call and the rate of both weights' bytes.
void bench_gated(CudaBackend& be, const Options& o, double copy) {
    const TensorType types[] = {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_0,
                                TensorType::MXFP4, TensorType::BF16};
    const Shape s = {"gate+up 4096x12288", 4096, 12288};
    for (TensorType t : types) {
        const std::string what = std::string(zinc::gguf::type_name(t)) + " " + s.name;
        if (("decode gated " + what).find(o.filter) == std::string::npos) continue;
        auto gate = zinc::cuda_test::random_tensor(t, s.cols, s.rows, "blk.0.ffn_gate.weight");
        auto up = zinc::cuda_test::random_tensor(t, s.cols, s.rows, "blk.0.ffn_up.weight");
        const double bytes = 2.0 * double(gate->info.nbytes);
        const int copies = int(std::max<size_t>(1, (kColdBytes + 2 * gate->info.nbytes - 1) / (2 * gate->info.nbytes)));
        std::vector<Weight> wg, wu;
        for (int c = 0; c < copies; ++c) {
            wg.push_back(be.load_weight(gate->info));
            wu.push_back(be.load_weight(up->info));
        }
        Act x = be.alloc(1, s.cols), tmp = be.alloc(1, s.rows), y = be.alloc(1, s.rows);
        be.upload(x, zinc::cuda_test::random_floats(size_t(s.cols)));
        const double us = time_us(be, o.reps, [&](int i) {
            const size_t c = size_t(i % copies);
            be.ffn_gated(wg[c], wu[c], x, zinc::backend::GatedActivation::swiglu, tmp, y);
        });
        report("ffn_gated", what, us, bytes, copy, read_us(be, o.reps, wg, wu, gate->info.nbytes, up->info.nbytes));
        be.free(x);
        be.free(tmp);
        be.free(y);
    }
}

// Products of several rows at several batch sizes, for quantized weights each way the backend has (the matvec of
// several rows up to 16 rows, a step's int8 tensor cores up to kStepMaxRows; beyond, zinc's tensor-core kernel and
// the weights dequantized to f16 for cuBLAS; matmul_kernels.h says which it takes), for float weights the tiled f32
// kernel; in TFLOP/s and as a share of 790 TFLOP/s, the bf16 matrix
// product rate measured on the H200.
void bench_prefill(CudaBackend& be, const Options& o) {
    enum Way { kMatvec, kStep, kKernel, kCublas };
    const TensorType types[] = {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::MXFP4,
                                TensorType::F16};
    struct Run {
        int64_t rows;
        Way way;
        std::string kernel;
    };
    for (TensorType t : types)
        for (const Shape& s : kShapes) {
            if (s.rows > 12288) continue;  // the LM head takes the last row only in prefill
            const bool quantized = zinc::backend::cuda::has_mma_matmul(int(t));
            const std::string what = std::string(zinc::gguf::type_name(t)) + " " + s.name;
            // The runs the filter keeps, before any weight is made for them.
            std::vector<Run> runs;
            for (int64_t rows : {2, 4, 8, 16, 32, 64, 128, 256, 512})
                for (Way way : {kMatvec, kStep, kKernel, kCublas}) {
                    const bool step = rows <= zinc::backend::cuda::kStepMaxRows;
                    if (way != kKernel && !quantized) continue;
                    if ((way == kMatvec && rows > 16) || (way == kStep && !step) ||
                        ((way == kKernel || way == kCublas) && step && quantized))
                        continue;
                    std::string kernel = "matmul (" + std::to_string(rows) +
                                         (way == kMatvec ? ", matvec)"
                                          : way == kStep ? ", step)"
                                          : way == kCublas ? ", cuBLAS)"
                                                           : ")");
                    if (("prefill " + kernel + " " + what).find(o.filter) != std::string::npos)
                        runs.push_back({rows, way, std::move(kernel)});
                }
            if (runs.empty()) continue;
            auto host = zinc::cuda_test::random_tensor(t, s.cols, s.rows, "w");
            // Copies as for the matvecs, so a few rows do not find the weights in L2 as no model's layer would.
            const int copies = int(std::max<size_t>(1, (kColdBytes + host->info.nbytes - 1) / host->info.nbytes));
            std::vector<Weight> w;
            for (int c = 0; c < copies; ++c) w.push_back(be.load_weight(host->info));
            for (const Run& r : runs) {
                be.set_matmul_ways(r.way == kMatvec ? r.rows : 1, r.way == kCublas);
                Act x = be.alloc(r.rows, s.cols), y = be.alloc(r.rows, s.rows);
                be.upload(x, zinc::cuda_test::random_floats(size_t(r.rows * s.cols)));
                const double us = time_us(be, std::max(copies, o.reps / 10),
                                          [&](int i) { be.matmul(w[size_t(i % copies)], x, y); });
                report_tflops(r.kernel, what, us, 2.0 * double(r.rows) * double(s.cols) * double(s.rows));
                be.free(x);
                be.free(y);
            }
            be.set_matmul_ways();
        }
}

// The median time per call of `call()` run eagerly, reps calls a round.
double time_eager_us(CudaBackend& be, int reps, const std::function<void()>& call) {
    return median_round_us(be, 6, 1, reps, [&] {
        for (int i = 0; i < reps; ++i) call();
    });
}

// The MoE layers of the MoE models, with the weight types of their Q4_K_M / MXFP4 files.
struct MoeShape {
    const char* name;
    int64_t n_exp, k, in, n_ff;
    TensorType gate, down;
    bool merged;
};
const MoeShape kMoeShapes[] = {
    {"qwen3.6-35b-a3b", 256, 8, 2048, 512, TensorType::Q4_K, TensorType::Q4_K, false},
    {"gemma-4-26b-a4b", 128, 8, 2816, 704, TensorType::Q4_K, TensorType::Q8_0, true},
    {"gpt-oss-20b", 32, 4, 2880, 2880, TensorType::MXFP4, TensorType::MXFP4, false},
};

// A layer's expert weights of random values on the GPU (freed with the backend), and moe_ffn's view of them.
struct MoeLayer {
    std::unique_ptr<zinc::cuda_test::HostTensor> first, up, down;  // gate or merged gate_up; up (or null); down
    Weight wf, wu, wd;
    zinc::backend::MoeWeights mw;
    MoeLayer(CudaBackend& be, const MoeShape& m) {
        namespace cu = zinc::cuda_test;
        first = cu::random_tensor(m.gate, m.in, (m.merged ? 2 : 1) * m.n_ff * m.n_exp, m.merged ? "gate_up" : "gate",
                                  m.n_exp);
        if (!m.merged) up = cu::random_tensor(m.gate, m.in, m.n_ff * m.n_exp, "up", m.n_exp);
        down = cu::random_tensor(m.down, m.n_ff, m.in * m.n_exp, "down", m.n_exp);
        wf = be.load_weight(first->info);
        wd = be.load_weight(down->info);
        if (up) wu = be.load_weight(up->info);
        (m.merged ? mw.gate_up : mw.gate) = &wf;
        if (up) mw.up = &wu;
        mw.down = &wd;
    }
    MoeLayer(const MoeLayer&) = delete;  // mw points into it
    MoeLayer& operator=(const MoeLayer&) = delete;
    // The bytes of one expert's gate, up and down rows.
    size_t expert_bytes(const MoeShape& m) const {
        return (first->info.nbytes + (up ? up->info.nbytes : 0) + down->info.nbytes) / size_t(m.n_exp);
    }
};

// One MoE layer's expert FFN (moe_ffn) of each MoE model at several prompt lengths and each way a batch sorted by
// expert can take (MoeWays); TFLOP/s of the pairs' products and their share of kPeakTflops.
void bench_moe(CudaBackend& be, const Options& o) {
    constexpr int64_t kNever = int64_t(1) << 40;
    const std::pair<const char*, zinc::backend::cuda::MoeWays> ways[] = {
        {"dp4a matvecs", {kNever, kNever}}, {"tensor cores 32", {1, kNever}}, {"tensor cores 64", {1, 1}}};
    for (const MoeShape& m : kMoeShapes) {
        std::vector<std::pair<int64_t, int>> runs;  // tokens, way
        for (int64_t tokens : {64, 512, 2048, 8192})
            for (int w = 0; w < 3; ++w)
                if ((std::string("moe ") + m.name + " " + std::to_string(tokens) + " tokens, " + ways[w].first)
                        .find(o.filter) != std::string::npos)
                    runs.push_back({tokens, w});
        if (runs.empty()) continue;
        namespace cu = zinc::cuda_test;
        const MoeLayer layer(be, m);
        for (const auto& [tokens, w] : runs) {
            Act x = be.alloc(tokens, m.in), out = be.alloc(tokens, m.in), logits = be.alloc(tokens, m.n_exp);
            Act rw = be.alloc(tokens, m.k);
            zinc::backend::IdAct ids = be.alloc_ids(tokens, m.k);
            be.upload(x, cu::random_floats(size_t(tokens * m.in)));
            be.upload(logits, cu::random_floats(size_t(tokens * m.n_exp), -3.0f, 3.0f));
            be.moe_route(logits, int(m.k), true, ids, rw);
            be.set_moe_ways(ways[w].second);
            const double us = time_eager_us(be, 3, [&] { be.moe_ffn(x, ids, rw, layer.mw, out); });
            be.set_moe_ways();
            const double flops = 2.0 * double(tokens * m.k) * 3.0 * double(m.in) * double(m.n_ff);
            const std::string what = std::string(m.name) + " " + std::to_string(tokens) + " tokens";
            report_tflops(std::string("moe, ") + ways[w].first, what, us, flops);
            be.free(x);
            be.free(out);
            be.free(logits);
            be.free(rw);
            be.free(ids);
        }
    }
}

// One decode token's expert FFN (moe_ffn: its k experts' gate, up and down rows, the activation and the weighted sum)
// of each MoE model, replayed as a decode step runs it: µs per token and the rate of the selected experts' bytes,
// beside a read of as many bytes. Call i routes to the experts k (i % sets) .. k (i % sets) + k - 1, so that the calls
// go through every expert and the bytes come from memory, not from the L2 cache.
void bench_moe_decode(CudaBackend& be, const Options& o, double copy) {
    namespace cu = zinc::cuda_test;
    for (const MoeShape& m : kMoeShapes) {
        const std::string what = std::string(m.name) + " 1 token";
        if (("decode moe " + what).find(o.filter) == std::string::npos) continue;
        const MoeLayer layer(be, m);
        const size_t bytes = layer.expert_bytes(m) * size_t(m.k);
        const int sets = int(m.n_exp / m.k);
        std::vector<zinc::backend::IdAct> ids(static_cast<size_t>(sets));
        std::vector<Act> rw(static_cast<size_t>(sets));
        Act logits = be.alloc(1, m.n_exp);
        for (int s = 0; s < sets; ++s) {
            std::vector<float> l(size_t(m.n_exp), 0.0f);
            for (int64_t e = 0; e < m.k; ++e) l[size_t(s * m.k + e)] = 1.0f + float(e);
            be.upload(logits, l);
            ids[size_t(s)] = be.alloc_ids(1, m.k);
            rw[size_t(s)] = be.alloc(1, m.k);
            be.moe_route(logits, int(m.k), true, ids[size_t(s)], rw[size_t(s)]);
        }
        Act x = be.alloc(1, m.in), out = be.alloc(1, m.in);
        be.upload(x, cu::random_floats(size_t(m.in)));
        const double us = time_us(be, o.reps, [&](int i) {
            const size_t s = size_t(i % sets);
            be.moe_ffn(x, ids[s], rw[s], layer.mw, out);
        });
        // The read: as many bytes (rounded down to 16), from slices of a buffer larger than the L2 cache.
        const size_t read = bytes / 16 * 16, slices = std::max<size_t>(2, (kColdBytes + read - 1) / read);
        void* buf = nullptr;
        unsigned* sink = nullptr;
        check(cudaMalloc(&buf, read * slices), "malloc");
        check(cudaMemset(buf, 1, read * slices), "memset");
        check(cudaMalloc(&sink, sizeof(unsigned)), "malloc");
        const double read_time = time_us(be, o.reps, [&](int i) {
            const auto* a = static_cast<const uint8_t*>(buf) + read * (size_t(i) % slices);
            check(zinc::cuda_bench::read_bytes(a, read, nullptr, 0, sink, be.stream()), "read");
        });
        check(cudaFree(buf), "free");
        check(cudaFree(sink), "free");
        report("moe_ffn", what, us, double(bytes), copy, read_time);
        be.free(x);
        be.free(out);
        be.free(logits);
        for (int s = 0; s < sets; ++s) {
            be.free(ids[size_t(s)]);
            be.free(rw[size_t(s)]);
        }
    }
}

void bench_norm(CudaBackend& be, const Options& o, double copy) {
    for (int64_t cols : {4096, 5120}) {
        const std::string what = "rms_norm 1x" + std::to_string(cols);
        if (what.find(o.filter) == std::string::npos) continue;
        Act x = be.alloc(1, cols), y = be.alloc(1, cols);
        be.upload(x, zinc::cuda_test::random_floats(size_t(cols)));
        const double us = time_us(be, o.reps, [&](int) { be.rms_norm(x, nullptr, 1e-6f, cols, y); });
        report("rms_norm", what, us, 2.0 * 4.0 * double(cols), copy);
        be.free(x);
        be.free(y);
    }
}

// The kernels of one decode attention call launched directly at each of o.splits key splits.
void bench_attention_splits(CudaBackend& be, const Options& o, double copy, const std::string& what, const Act& q,
                            const KvLayer& kv, const zinc::backend::AttentionParams& ap, Act& out, int64_t depth,
                            double bytes) {
    namespace kern = zinc::backend::cuda;
    int32_t* pos = nullptr;
    float* partials = nullptr;
    const int32_t last = int32_t(depth - 1);
    check(cudaMalloc(&pos, sizeof(int32_t)), "malloc");
    check(cudaMemcpy(pos, &last, sizeof(int32_t), cudaMemcpyHostToDevice), "copy");
    kern::AttentionArgs a;
    a.q = q.data;
    a.k = {kv.k, kv.type_k};
    a.v = {kv.v, kv.type_v};
    a.capacity = kv.capacity;
    a.out = out.data;
    a.pos = pos;
    a.n_q = 1;
    a.kv_width = kv.width;
    a.n_head = ap.n_head;
    a.n_head_kv = ap.n_head_kv;
    a.head_dim = ap.head_dim;
    a.scale = ap.scale;
    kern::AttentionPlan plan = kern::plan_attention(1, ap.n_head, ap.n_head_kv, ap.head_dim, depth - 1, 0,
                                                       kv.type_k, kv.type_v);
    for (int n : o.splits) {
        plan.n_split = std::clamp(n, 1, kern::kMaxSplits);
        const size_t floats = kern::attention_partial_floats(plan, 1, ap.n_head, ap.head_dim);
        if (floats > 0) check(cudaMalloc(&partials, floats * sizeof(float)), "malloc");
        const double us = time_us(be, o.reps, [&](int) {
            check(kern::attention(a, plan, partials, be.stream()), "attention");
        });
        report("attention", what + ", " + std::to_string(plan.n_split) + " splits", us, bytes, copy);
        check(cudaFree(partials), "free");
        partials = nullptr;
    }
    check(cudaFree(pos), "free");
}

// One decode query of Qwen3-8B's attention (32 heads, 8 KV heads of 128) at several cache lengths and types.
void bench_attention(CudaBackend& be, const Options& o, double copy) {
    const int n_head = 32, n_head_kv = 8, head_dim = 128;
    for (const zinc::backend::KvType type : {zinc::backend::KvType::f32, zinc::backend::KvType::f16,
                                             zinc::backend::KvType::q8_0})
    for (int64_t depth : {128, 4096, 16384, 32768}) {
        const std::string what = std::string(zinc::backend::kv_type_name(type)) + " decode at " + std::to_string(depth);
        if (what.find(o.filter) == std::string::npos) continue;
        KvLayer kv = be.alloc_kv(KvLayer{nullptr, nullptr, int64_t(n_head_kv) * head_dim, depth, type, type});
        Act k = be.alloc(1, kv.width), v = be.alloc(1, kv.width);
        Act q = be.alloc(1, int64_t(n_head) * head_dim), out = be.alloc(1, q.cols);
        be.upload(q, zinc::cuda_test::random_floats(size_t(q.cols)));
        for (int64_t p = 0; p < depth; p += 1) {
            if (p % 1024 != 0 && p != depth - 1) continue;  // a few rows are enough to give the cache values
            be.upload(k, zinc::cuda_test::random_floats(size_t(kv.width)));
            be.kv_write(kv, k, k, p);
        }
        zinc::backend::AttentionParams ap{n_head, n_head_kv, head_dim, 0.088f};
        const double bytes = double(2 * zinc::backend::kv_plane_bytes(type, kv.width, depth));
        const double us = time_us(be, o.reps, [&](int) { be.attention(q, kv, depth - 1, ap, out); });
        report("attention", what, us, bytes, copy);
        if (!o.splits.empty()) bench_attention_splits(be, o, copy, what, q, kv, ap, out, depth, bytes);
        be.free(kv);
        be.free(k);
        be.free(v);
        be.free(q);
        be.free(out);
    }
}

// A prompt's attention over an f16 cache (the flash kernel) on the attention layers' shapes, at several prompt
// lengths: the whole prompt in one call, its K/V rows cached first. TFLOP/s of the causal products (2 n_head head_dim
// flops for each of Q K^T and P V per visible (query, key) pair), as a share of the 790 TFLOP/s f16 product rate; the
// kernel does each product twice (the hi and lo halves of its f16 inputs).
void bench_prefill_attention(CudaBackend& be, const Options& o) {
    struct AttnShape {
        const char* name;
        int n_head, n_head_kv, head_dim;
        int64_t window;
    };
    const AttnShape shapes[] = {
        {"qwen3-8b 32/8x128", 32, 8, 128, 0},
        {"qwen3.6 16/2x256", 16, 2, 256, 0},
        {"gpt-oss 64/8x64", 64, 8, 64, 0},
        {"gpt-oss sliding 64/8x64 w128", 64, 8, 64, 128},
        {"gemma4 global 16/2x512", 16, 2, 512, 0},
        {"gemma4 sliding 16/8x256 w1024", 16, 8, 256, 1024},
    };
    for (const AttnShape& a : shapes)
        for (int64_t n : {512, 2048, 8192}) {
            const std::string what = std::string(a.name) + ", " + std::to_string(n) + " tokens";
            if (("prefill attention " + what).find(o.filter) == std::string::npos) continue;
            const zinc::backend::KvType f16 = zinc::backend::KvType::f16;
            KvLayer kv = be.alloc_kv(KvLayer{nullptr, nullptr, int64_t(a.n_head_kv) * a.head_dim, n, f16, f16});
            Act k = be.alloc(n, kv.width), v = be.alloc(n, kv.width);
            Act q = be.alloc(n, int64_t(a.n_head) * a.head_dim), out = be.alloc(n, q.cols);
            be.upload(k, zinc::cuda_test::random_floats(size_t(n * kv.width)));
            be.upload(v, zinc::cuda_test::random_floats(size_t(n * kv.width)));
            be.upload(q, zinc::cuda_test::random_floats(size_t(q.rows * q.cols)));
            be.kv_write(kv, k, v, 0);
            zinc::backend::AttentionParams ap{a.n_head, a.n_head_kv, a.head_dim, 1.0f / std::sqrt(float(a.head_dim))};
            ap.window = a.window;
            const double us = time_eager_us(be, 3, [&] { be.attention(q, kv, 0, ap, out); });
            double pairs = 0;  // visible (query, key) pairs
            for (int64_t t = 0; t < n; ++t) pairs += double(a.window > 0 ? std::min(t + 1, a.window) : t + 1);
            report_tflops("prefill attention", what, us, 4.0 * double(a.n_head) * double(a.head_dim) * pairs);
            be.free(kv);
            be.free(k);
            be.free(v);
            be.free(q);
            be.free(out);
        }
}

// A prompt's gated delta-net recurrence in its chunked form (chunks of 64) on the Qwen3.5 / Qwen3.6 shapes. TFLOP/s of
// the form's products (per chunk and value head: S0^T k and S0^T q, T r, B delta, the state update; per chunk and
// key head the two Gram matrices), each counted once, as a share of the f16 product rate; the kernels run them in
// tf32, each product three times (the hi and lo parts of both operands).
void bench_delta_net(CudaBackend& be, const Options& o) {
    struct DnShape {
        const char* name;
        int n_k, n_v, d_k, d_v;
    };
    const DnShape shapes[] = {{"16/32x128", 16, 32, 128, 128}, {"16/48x128", 16, 48, 128, 128}};
    constexpr int kChunk = 64;
    for (const DnShape& d : shapes)
        for (int64_t n : {512, 8192}) {
            const std::string what = std::string(d.name) + ", " + std::to_string(n) + " tokens";
            if (("prefill delta-net " + what).find(o.filter) == std::string::npos) continue;
            const int64_t kw = int64_t(d.n_k) * d.d_k, vw = int64_t(d.n_v) * d.d_v;
            const auto up = [&](int64_t rows, int64_t cols, float lo, float hi) {
                Act a = be.alloc(rows, cols);
                be.upload(a, zinc::cuda_test::random_floats(size_t(rows * cols), lo, hi));
                return a;
            };
            // Keys and queries of about unit length, decays exp(g) near 0.9, as the model's are.
            const float unit = 1.0f / std::sqrt(float(d.d_k)) * 1.7f;
            Act q = up(n, kw, -unit, unit), k = up(n, kw, -unit, unit), v = up(n, vw, -1.0f, 1.0f);
            Act g = up(n, d.n_v, -0.2f, -0.01f), beta = up(n, d.n_v, 0.1f, 0.9f);
            Act state = up(d.n_v, int64_t(d.d_k) * d.d_v, -0.1f, 0.1f), out = be.alloc(n, vw);
            zinc::backend::DeltaNetParams p;
            p.n_k = d.n_k;
            p.n_v = d.n_v;
            p.d_k = d.d_k;
            p.d_v = d.d_v;
            p.scale = 1.0f / std::sqrt(float(d.d_k));
            const double us =
                time_eager_us(be, 3, [&] { be.delta_net_chunked(q, k, v, g, beta, state, p, kChunk, out); });
            const double per_token = double(d.n_v) * (6.0 * d.d_k * d.d_v + 4.0 * kChunk * d.d_v) +
                                     double(d.n_k) * 4.0 * kChunk * d.d_k;
            report_tflops("prefill delta-net", what, us, per_token * double(n));
            for (Act* a : {&q, &k, &v, &g, &beta, &state, &out}) be.free(*a);
        }
}

// A delta-net layer's decode step (delta_net_step, three kernels) against the five ops it replaces, on the Qwen3.5 /
// Qwen3.6 shapes, replayed from a recorded step as a model's step is: µs per call, and the rate of the recurrent
// state's bytes (read and written), each call on its own copy of the states among enough to exceed the L2 cache.
void bench_delta_net_step(CudaBackend& be, const Options& o, double copy) {
    struct DnShape {
        const char* name;
        int n_k, n_v, d_k, d_v;
    };
    const DnShape shapes[] = {{"16/32x128", 16, 32, 128, 128}, {"16/48x128", 16, 48, 128, 128}};
    constexpr int K = 4;
    namespace zb = zinc::backend;
    for (const DnShape& d : shapes)
        for (bool fused : {true, false}) {
            const std::string kernel = fused ? "delta_net_step" : "its 5 ops";
            if (("decode delta-net " + kernel + " " + d.name).find(o.filter) == std::string::npos) continue;
            zb::DeltaNetParams p;
            p.n_k = d.n_k;
            p.n_v = d.n_v;
            p.d_k = d.d_k;
            p.d_v = d.d_v;
            p.scale = 1.0f / std::sqrt(float(d.d_k));
            const int64_t kd = int64_t(d.n_k) * d.d_k, vd = int64_t(d.n_v) * d.d_v, C = 2 * kd + vd;
            const int64_t state_floats = int64_t(d.n_v) * d.d_k * d.d_v;
            const double bytes = 2.0 * 4.0 * double(state_floats);
            const int copies = int(std::max<size_t>(1, kColdBytes / size_t(bytes / 2)));
            const auto up = [&](int64_t rows, int64_t cols, float lo, float hi) {
                Act a = be.alloc(rows, cols);
                be.upload(a, zinc::cuda_test::random_floats(size_t(rows * cols), lo, hi));
                return a;
            };
            const auto weight = [&](int64_t ne0, int64_t ne1, float lo, float hi, const char* name) {
                auto t = zinc::cuda_test::random_tensor(TensorType::F32, ne0, ne1, name);
                const auto v = zinc::cuda_test::random_floats(size_t(ne0 * ne1), lo, hi);
                std::memcpy(t->bytes.data(), v.data(), v.size() * sizeof(float));
                return be.load_weight(t->info);
            };
            const Weight conv_w = weight(K, C, -0.5f, 0.5f, "ssm_conv1d.weight");
            const Weight dt = weight(d.n_v, 1, -1.0f, 4.0f, "ssm_dt.bias");
            const Weight ssm_a = weight(d.n_v, 1, -8.0f, -0.01f, "ssm_a");
            const Weight norm = weight(d.d_v, 1, 0.5f, 1.5f, "ssm_norm.weight");
            const zb::DeltaNetWeights dw{&conv_w, &dt, &ssm_a, &norm};
            Act qkv = up(1, C, -2, 2), z = up(1, vd, -5, 5), a = up(1, d.n_v, -6, 6), b = up(1, d.n_v, -6, 6);
            Act conv = be.alloc(1, C), g = be.alloc(1, d.n_v), beta = be.alloc(1, d.n_v), out = be.alloc(1, vd);
            Act states = up(int64_t(copies) * d.n_v, int64_t(d.d_k) * d.d_v, -0.1f, 0.1f);
            Act conv_states = up(int64_t(copies) * (K - 1), C, -2, 2);
            const double us = time_us(be, o.reps, [&](int i) {
                const int c = i % copies;
                Act state = zb::Backend::rows_of(states, int64_t(c) * d.n_v, d.n_v);
                Act conv_state = zb::Backend::rows_of(conv_states, int64_t(c) * (K - 1), K - 1);
                if (fused) {
                    be.delta_net_step(qkv, z, a, b, dw, 1e-6f, conv_state, state, p, conv, g, beta, out);
                    return;
                }
                be.delta_net_gates(a, b, dt, ssm_a, g, beta);
                be.conv1d_causal(qkv, conv_state, conv_w, true, conv);
                Act qk{conv.data, 1, 2 * kd};
                be.l2_norm(qk, 1e-6f, d.d_k, qk);
                const Act q{conv.data, 1, kd}, k{conv.data + kd, 1, kd}, v{conv.data + 2 * kd, 1, vd};
                be.delta_net(q, k, v, g, beta, state, p, out);
                be.gated_rms_norm(out, norm, z, 1e-6f, d.d_v, out);
            });
            report(fused ? "delta_net_step" : "its 5 ops", std::string("decode delta-net ") + d.name, us, bytes, copy);
            for (Act* x : {&qkv, &z, &a, &b, &conv, &g, &beta, &out, &states, &conv_states}) be.free(*x);
        }
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
            o.filter = argv[++i];
        } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
            o.reps = std::max(1, std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--splits") && i + 1 < argc) {
            for (const char* p = argv[++i]; *p;) {
                char* end = nullptr;
                o.splits.push_back(int(std::strtol(p, &end, 10)));
                p = *end == ',' ? end + 1 : end;
                if (end == p && *p) break;
            }
        } else {
            std::fprintf(stderr, "usage: %s [--filter SUBSTRING] [--reps N] [--splits N,N,...]\n", argv[0]);
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        std::fprintf(stderr, "no CUDA device\n");
        return 1;
    }
    auto owned = zinc::backend::make_cuda_backend(0);
    auto& be = dynamic_cast<CudaBackend&>(*owned);
    const double copy = copy_gbps(be);
    std::printf("%s; device-to-device copy %.0f GB/s (read + write)\n\n", be.where().c_str(), copy);
    std::printf("| %-14s | %-34s | %9s | %8s | %6s | %7s | %6s |\n", "kernel", "shape", "us", "GB/s", "% copy",
                "read us", "% read");
    std::printf("|%s|%s|%s|%s|%s|%s|%s|\n", std::string(16, '-').c_str(), std::string(36, '-').c_str(),
                std::string(11, '-').c_str(), std::string(10, '-').c_str(), std::string(8, '-').c_str(),
                std::string(9, '-').c_str(), std::string(8, '-').c_str());
    bench_matvecs(be, o, copy);
    bench_gated(be, o, copy);
    bench_prefill(be, o);
    bench_moe(be, o);
    bench_moe_decode(be, o, copy);
    bench_prefill_attention(be, o);
    bench_delta_net(be, o);
    bench_delta_net_step(be, o, copy);
    bench_norm(be, o, copy);
    bench_attention(be, o, copy);
    return 0;
}
