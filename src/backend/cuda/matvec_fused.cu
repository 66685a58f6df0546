// Fused decode matvecs: the kernels behind the fused ops (fused_ops.cpp) for one activation row, where a token's
// time goes to many small launches. Both are built on matvec_row.cuh's warp dot products (one warp per output row,
// or two where paired_rows allows; four warps per block of 128 threads, as matvec_q.cu), so each row's value equals
// the separate matvec's bit for bit.
//
// matvec_multi: several weights of one type, or of the two types of a pair that K-quant mixes put side by side (a
// Q6_K V beside Q4_K or Q5_K Q and K), read the same activation row (Q/K/V; the residual projections) in one launch;
// a pair's kernel has both types' dot products, and each block takes its weight's. The grid's blocks are dealt to the
// weights in order, ceil(n_out / 4) each (ceil(n_out / 8) with two rows a warp); a block finds its weight by
// comparing its index with the first block of each (at most kMaxMatvecJobs, passed by value in the kernel's
// parameters, so nothing is copied to the device and a captured launch holds its whole description). The epilogue
// adds the weight's bias to the row's value when it has one (add_bias), then either stores it or adds it to what out
// holds (out[o] += W[o] . x + bias[o]: the residual add of matmul_add), one f32 add each, in the separate ops' order.
//
// matvec_gated: the gate and up rows o of a gated FFN in one warp, one after the other, and the activation
// applied to the two sums by lane 0 with the element-wise kernels' expressions (silu_times, gelu_tanh_times): the
// gate and up outputs never go to memory. (Quantizing its output for the down projection in the same launch, each
// Q8_1 block by the last of the grid's blocks to store one of its rows, counted with atomics, was measured slower: the
// fences and counts took 24.3 µs for Qwen3-8B's shape against 18.5 without, more than the quantization's launch.)
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/elementwise_kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matvec_fused_kernels.h"
#include "backend/cuda/matvec_row.cuh"

namespace zinc::backend::cuda {
namespace {

constexpr int kRowsPerBlock = kStageWarps;  // warps per block, one output row each

// A launch's weights, by value in the kernel parameters.
struct Job {
    int type;
    const uint8_t* w;
    size_t row_bytes;
    int64_t n_out;
    float* out;
    const float* bias;     // null: none
    unsigned first_block;  // the first block of the grid that computes this weight's rows
};
struct JobTable {
    Job job[kMaxMatvecJobs];
    int n;
};

// Weights of type T, or of T and T2 (T2 = T: of T only; else T is Q4_K or Q5_K and T2 Q6_K). Each warp computes
// kRows consecutive rows of its weight (kRows = 2 where paired_rows allows it: the two rows' groups read together,
// sharing their activation loads, as the gated FFN's gate and up rows do; more registers, so fewer blocks per
// multiprocessor). With act_shared (act_shared_bytes of the launch's rows of type T), the blocks of T's weights read
// their activations from their copy in shared memory (ActShared), or with kQuantize (T2 = T, Q4_K or Q5_K, act_shared)
// quantize x into it themselves (ActSharedF32).
template <int T, int T2, int kRows, bool kQuantize = false>
__global__ void __launch_bounds__(kRowsPerBlock * 32, kRows == 1 ? kMinBlocksPerSm : kMinBlocksPerSm - 2)
    matvec_multi_kernel(const JobTable t, int64_t cols, const BlockQ8_1f* xq, const float* x, bool accumulate,
                        bool act_shared) {
    // This block's weight: the last one that starts at or before it. Constant indices keep the table in the parameter
    // space (a computed index would copy it to local memory).
    Job job = t.job[0];
#pragma unroll
    for (int k = 1; k < kMaxMatvecJobs; ++k)
        if (k < t.n && blockIdx.x >= t.job[k].first_block) job = t.job[k];
    const int64_t o = (int64_t(blockIdx.x - job.first_block) * kRowsPerBlock + threadIdx.x / 32) * kRows;
    const int lane = int(threadIdx.x % 32);
    const auto act = [&] {
        if constexpr (kQuantize)
            return ActSharedF32{x, act_shared_memory(), int(cols / 64)};
        else
            return ActShared{xq, act_shared_memory(), int(cols / 64)};
    }();
    const bool shared = kGroupsInPlace<T> && act_shared && job.type == T;  // the same in the whole block
    const bool q6_pairs = T2 == kQ6_K && kRows == 2 && job.type == kQ6_K;  // the same in the whole block
    if (o >= job.n_out && !q6_pairs) {  // whole warps leave together, after their part of the block's copy
        if (shared) act.ready();
        return;
    }
    // A warp past the last row of Q6_K pairs computes row 0 again and stores nothing (lane_row_pair_q6_k).
    const int count = o >= job.n_out ? 0 : job.n_out - o < kRows ? int(job.n_out - o) : kRows;
    const auto row_of = [&](int k) { return job.w + (count > 0 ? o + k : 0) * job.row_bytes; };
    const auto done = [&](int k, float sum) {
        sum = warp_sum(sum);
        if (lane == 0 && k < count) {
            // add_bias's x + b, then add's a + b with a = out: the separate ops' adds, which __fadd_rn keeps as they
            // are.
            const float v = job.bias ? __fadd_rn(sum, job.bias[o + k]) : sum;
            job.out[o + k] = accumulate ? __fadd_rn(job.out[o + k], v) : v;
        }
    };
    if constexpr (T2 == kQ6_K && kRows == 2) {
        if (q6_pairs) {  // a last odd row is computed twice, its second sum dropped
            lane_row_pair_q6_k([&](int k) { return row_of(k < count ? k : 0); }, xq, cols / 32, lane, true, done);
            return;
        }
    }
    if constexpr (T != kQ6_K || kRows == 1) {
        // The row count as a constant, so that the kernel holds registers for kRows rows and no other count.
        const auto rows_dot = [&](auto n) {
            constexpr int N = decltype(n)::value;
            if constexpr (kGroupsInPlace<T>) {
                if (shared) {
                    lane_k_groups_dot<T>(row_of, N, act, int(cols / 64), lane, true, done);
                    return;
                }
            }
            if constexpr (T == T2)
                lane_rows_dot<T>(row_of, N, xq, x, cols, lane, true, done);
            else if (job.type == T)  // a pair's kernel stages the Q6_K rows (T2) only: its shared memory is one type's
                lane_rows_dot<T, false>(row_of, N, xq, x, cols, lane, true, done);
            else if constexpr (kRows == 1)
                lane_rows_dot<T2>(row_of, N, xq, x, cols, lane, true, done);
        };
        if (count == kRows)
            rows_dot(std::integral_constant<int, kRows>{});
        else
            rows_dot(std::integral_constant<int, 1>{});
    }
}

template <int T>
__global__ void __launch_bounds__(kRowsPerBlock * 32, kMinBlocksPerSm - 2)  // two rows: more registers
    matvec_gated_kernel(const uint8_t* gate, const uint8_t* up, size_t row_bytes, int64_t n_out, int64_t cols,
                        const BlockQ8_1f* xq, const float* x, int act, float* out, bool act_shared) {
    const int64_t o = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    const int lane = int(threadIdx.x % 32);
    const ActShared shared{xq, act_shared_memory(), int(cols / 64)};
    if (o >= n_out) {  // whole warps leave together, after their part of the block's copy
        if (act_shared) shared.ready();
        return;
    }
    // Row 0 is the gate's row o, row 1 the up's, whose copies run ahead while the gate's row is computed.
    float g = 0.0f;
    const auto row_of = [&](int k) { return (k == 0 ? gate : up) + o * row_bytes; };
    const auto done = [&](int k, float s) {
        s = warp_sum(s);
        if (k == 0)
            g = s;
        else if (lane == 0)
            out[o] = act == 0 ? silu_times(g, s) : gelu_tanh_times(g, s);
    };
    if constexpr (kGroupsInPlace<T>) {
        if (act_shared) {
            lane_k_groups_dot<T>(row_of, 2, shared, int(cols / 64), lane, true, done);
            return;
        }
    }
    lane_rows_dot<T>(row_of, 2, xq, x, cols, lane, true, done);
}

// Whether `type` reads the f32 row (float types) or the Q8_1 blocks, and that the one it reads is there.
bool has_input(int type, const BlockQ8_1f* xq, const float* x) {
    return is_float_weight(type) ? x != nullptr : xq != nullptr;
}

}  // namespace

bool matvec_multi_quantizes(const MatvecJob* jobs, int n_jobs, int64_t cols, const float* x) {
    if (n_jobs < 1 || n_jobs > kMaxMatvecJobs || reinterpret_cast<uintptr_t>(x) % 16 != 0) return false;
    if (jobs[0].type != kQ4_K && jobs[0].type != kQ5_K) return false;  // the kernels with kQuantize
    for (int i = 0; i < n_jobs; ++i)
        if (jobs[i].type != jobs[0].type || act_shared_bytes(jobs[i].type, jobs[i].w, jobs[i].row_bytes, cols) == 0)
            return false;
    return true;
}

bool matvec_multi_pair(int a, int b) {
    if (a > b) return matvec_multi_pair(b, a);
    return (a == kQ4_K || a == kQ5_K) && b == kQ6_K;
}

cudaError_t matvec_multi(const MatvecJob* jobs, int n_jobs, int64_t cols, const BlockQ8_1f* xq, const float* x,
                         bool accumulate, cudaStream_t s) {
    if (n_jobs < 1 || n_jobs > kMaxMatvecJobs || cols <= 0) return cudaErrorInvalidValue;
    const bool quantizes = !xq && x && matvec_multi_quantizes(jobs, n_jobs, cols, x);
    const int type = jobs[0].type;
    int type2 = type;
    for (int i = 0; i < n_jobs; ++i) {
        if (jobs[i].n_out < 0 || (!quantizes && !has_input(jobs[i].type, xq, x))) return cudaErrorInvalidValue;
        if (jobs[i].type != type) {
            if (type2 != type && jobs[i].type != type2) return cudaErrorInvalidValue;  // a third type
            type2 = jobs[i].type;
        }
    }
    if (type2 != type && !matvec_multi_pair(type, type2)) return cudaErrorInvalidValue;
    const int k_type = type == kQ6_K ? type2 : type;  // a pair's K-quant beside Q6_K (or Q6_K alone)
    bool pairs = true;
    for (int i = 0; i < n_jobs; ++i) pairs = pairs && paired_rows(jobs[i].type, jobs[i].w, jobs[i].row_bytes, cols);
    // The rows of k_type read their activations from the block's copy (ActShared) where all of them are read in place.
    int act_bytes = INT_MAX;
    for (int i = 0; i < n_jobs; ++i)
        if (jobs[i].type == k_type)
            act_bytes = std::min(act_bytes, act_shared_bytes(k_type, jobs[i].w, jobs[i].row_bytes, cols, quantizes));
    JobTable t{};
    int64_t blocks = 0;
    for (int i = 0; i < n_jobs; ++i) {
        t.job[i] = {jobs[i].type, static_cast<const uint8_t*>(jobs[i].w), jobs[i].row_bytes, jobs[i].n_out,
                    jobs[i].out, jobs[i].bias, unsigned(blocks)};
        const int64_t warps = pairs ? (jobs[i].n_out + 1) / 2 : jobs[i].n_out;
        blocks += (warps + kRowsPerBlock - 1) / kRowsPerBlock;
        if (blocks > INT_MAX) return cudaErrorInvalidValue;
    }
    t.n = n_jobs;
    if (blocks == 0) return cudaGetLastError();
    auto run = [&](auto kernel) {
        return launch(kernel, unsigned(blocks), kRowsPerBlock * 32, size_t(act_bytes), s, t, cols, xq, x, accumulate,
                      act_bytes > 0);
    };
    if (quantizes) {
        if (type == kQ4_K)
            return pairs ? run(matvec_multi_kernel<kQ4_K, kQ4_K, 2, true>)
                         : run(matvec_multi_kernel<kQ4_K, kQ4_K, 1, true>);
        return run(matvec_multi_kernel<kQ5_K, kQ5_K, 1, true>);  // Q5_K rows are never paired
    }
    if (type2 != type) {
        if (k_type == kQ4_K)
            return pairs ? run(matvec_multi_kernel<kQ4_K, kQ6_K, 2>) : run(matvec_multi_kernel<kQ4_K, kQ6_K, 1>);
        return run(matvec_multi_kernel<kQ5_K, kQ6_K, 1>);  // Q5_K rows are never paired
    }
    return for_weight_type<kAllTypes>(type, [&](auto w) {
        constexpr int T = decltype(w)::value;
        if constexpr (kPairedTypes<T>)
            if (pairs) return run(matvec_multi_kernel<T, T, 2>);
        return run(matvec_multi_kernel<T, T, 1>);
    });
}

cudaError_t matvec_gated(int type, const void* gate, const void* up, size_t row_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* xq, const float* x, int act, float* out, cudaStream_t s) {
    if (n_out < 0 || cols <= 0 || (act != 0 && act != 1) || !has_input(type, xq, x)) return cudaErrorInvalidValue;
    const int64_t blocks = (n_out + kRowsPerBlock - 1) / kRowsPerBlock;
    if (blocks > INT_MAX) return cudaErrorInvalidValue;
    if (blocks == 0) return cudaGetLastError();
    const auto* g = static_cast<const uint8_t*>(gate);
    const auto* u = static_cast<const uint8_t*>(up);
    // The gate and up rows, of one width and alignment, both read in place or neither.
    const int act_bytes =
        std::min(act_shared_bytes(type, g, row_bytes, cols), act_shared_bytes(type, u, row_bytes, cols));
    return for_weight_type<kAllTypes>(type, [&](auto w) {
        return launch(matvec_gated_kernel<decltype(w)::value>, unsigned(blocks), kRowsPerBlock * 32, size_t(act_bytes),
                      s, g, u, row_bytes, n_out, cols, xq, x, act, out, act_bytes > 0);
    });
}

}  // namespace zinc::backend::cuda
