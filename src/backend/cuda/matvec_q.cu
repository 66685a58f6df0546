// Decode matvecs. Quantized weights: the activation row is quantized on the GPU to Q8_1 blocks (32 int8 values,
// f32 scale d = amax/127 and the f32 sum of the inputs), then each weight row is dotted block by block with
// __dp4a integer products (docs/formats.md §3.7-§3.8). One warp per output row; lane l takes the 32-value chunks
// l, l+32, ... of the row (a chunk is one block of a 32-value type or one 32-value slice of a 256-value
// super-block), or for Q4_K, Q5_K, Q6_K, MXFP4 and IQ4_XS its 64-value groups (vec_dot_q8_1.cuh, matvec_row.cuh).
// Float weights (F32/F16/BF16) are dotted in f32 with the f32 activations.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_row.cuh"

namespace zinc::backend::cuda {

bool has_dp4a_matvec(int type) {
#define ZINC_CASE(T) case T:
    switch (type) {
        ZINC_DP4A_TYPES(ZINC_CASE)
        return true;
    default: return false;
    }
#undef ZINC_CASE
}

namespace {

constexpr int kRowsPerBlock = kStageWarps;  // warps per block, one output row each

// ---- activation quantization: one warp per 32-value block ----
__global__ void quantize_q8_1_kernel(const float* x, int64_t n_blocks, BlockQ8_1f* dst, float2* scales) {
    begin_kernel();
    const int64_t b = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (b >= n_blocks) return;  // whole warps leave together
    quantize_q8_1_warp(x[b * 32 + lane], dst[b], lane);
    if (scales && lane == 0)  // lane 0 wrote the block's header
        scales[b] = make_float2(dst[b].d, __fmul_rn(dst[b].d, float(int(dst[b].sum_lo) + int(dst[b].sum_hi))));
}

// One warp per kRows consecutive output rows o, o + 1, ... of the weights (kRows = 2 where paired_rows allows it:
// the two rows' dot products then share their activation loads); blockIdx.y is the activation row p. With ids (MoE
// experts) row p reads expert ids[p], whose matrix starts expert_bytes * ids[p] into w, and activation row p / x_div
// (x_div = slots per token when every slot of a token reads the same input row); without, p reads w itself and
// activation row p. Without ids the rows are known before the kernels before this one have ended, and their first
// weights are asked for at once. xq is the Q8_1 activations for the quantized types, x the f32 ones for the float
// types (the other is null). Each row's value is the same whatever kRows (lane_rows_dot, lane_row_pair_q6_k). With
// act_shared (act_shared_bytes of the rows), the block's warps read their activations from its copy in shared memory.
template <int T, int kRows>
__global__ void __launch_bounds__(kRowsPerBlock * 32, kRows == 1 ? kMinBlocksPerSm : kMinBlocksPerSm - 2)
    matvec_kernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes, const int32_t* ids, int64_t n_out,
                  int64_t cols, const BlockQ8_1f* xq, const float* x, int x_div, float* out, int64_t out_stride,
                  bool act_shared) {
    const int64_t o = (blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32) * kRows;
    const int64_t p = blockIdx.y;
    const int lane = threadIdx.x % 32;
    const int64_t a = p / x_div;
    const ActShared shared{xq + (act_shared ? a * (cols / 32) : 0), act_shared_memory(), int(cols / 64)};
    constexpr bool kQ6Pairs = T == kQ6_K && kRows == 2;
    if (o >= n_out && !kQ6Pairs) {  // whole warps leave together, after their part of the block's copy
        if (act_shared) shared.ready();
        return;
    }
    // A warp past the last row of Q6_K pairs computes the first row of w again and stores nothing
    // (lane_row_pair_q6_k).
    const int count = o >= n_out ? 0 : n_out - o < kRows ? int(n_out - o) : kRows;
    if (ids) begin_kernel();  // before the ids are read
    const uint8_t* first = count == 0 ? w : w + (ids ? size_t(ids[p]) * expert_bytes : 0) + o * row_bytes;
    const auto row_of = [&](int k) { return first + k * row_bytes; };
    const auto done = [&](int k, float sum) {
        sum = warp_sum(sum);
        if (lane == 0 && k < count) out[p * out_stride + o + k] = sum;
    };
    if constexpr (kGroupsInPlace<T>) {
        if (act_shared) {
            if (count == kRows)
                lane_k_groups_dot<T>(row_of, kRows, shared, int(cols / 64), lane, !ids, done);
            else
                lane_k_groups_dot<T>(row_of, 1, shared, int(cols / 64), lane, !ids, done);
            return;
        }
    }
    if constexpr (is_float_weight(T)) {
        lane_rows_dot<T>(row_of, 1, nullptr, x + a * cols, cols, lane, !ids, done);
    } else if constexpr (kQ6Pairs) {
        // A last odd row is computed twice, its second sum dropped.
        lane_row_pair_q6_k([&](int k) { return row_of(k < count ? k : 0); }, xq + a * (cols / 32), cols / 32, lane,
                           !ids, done);
    } else if (count == kRows) {  // the row count as a constant, so that the kernel holds registers for it only
        lane_rows_dot<T>(row_of, kRows, xq + a * (cols / 32), nullptr, cols, lane, !ids, done);
    } else {
        lane_rows_dot<T>(row_of, 1, xq + a * (cols / 32), nullptr, cols, lane, !ids, done);
    }
}

// The expert matvecs of pairs sorted by expert (moe_group_pairs): blockIdx.y is a group of up to kPairsPerGroup pairs
// of one expert, each warp one output row of that expert's matrix, dotted with every pair of the group in turn, so
// the row is read from memory once per group and from L1 after. The sums are those of matvec_kernel, bit for bit.
template <int T>
__global__ void __launch_bounds__(kRowsPerBlock * 32, kMinBlocksPerSm)
    matvec_grouped_kernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes, const PairGroups g, int64_t n_out,
                          int64_t cols, const BlockQ8_1f* xq, int x_div, float* out, int64_t out_stride) {
    const int64_t o = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (o >= n_out) return;
    begin_kernel();  // before the groups are read
    if (int(blockIdx.y) >= *g.n_groups) return;
    const PairGroup grp = g.groups[blockIdx.y];
    const uint8_t* row = w + size_t(grp.expert) * expert_bytes + o * row_bytes;
    for (int j = 0; j < grp.count; ++j) {
        const int32_t p = g.pairs[grp.first + j];
        const float sum = warp_row_dot<T>(row, xq + int64_t(p / x_div) * (cols / 32), nullptr, cols, lane, false);
        if (lane == 0) out[int64_t(p) * out_stride + o] = sum;
    }
}

// The launch shared by the plain and the expert matvecs: n_rows activation rows (grid y, at most 65535).
template <int kSet>
cudaError_t launch_matvec(int type, const void* w, size_t row_bytes, size_t expert_bytes, const int32_t* ids,
                          int64_t n_out, int64_t cols, const BlockQ8_1f* xq, const float* x, int x_div, int64_t n_rows,
                          float* out, int64_t out_stride, cudaStream_t s) {
    if (n_out <= 0 || n_rows <= 0) return cudaGetLastError();
    if (n_rows > 65535 || x_div <= 0) return cudaErrorInvalidValue;
    const auto* wb = static_cast<const uint8_t*>(w);
    const bool experts_aligned = !ids || expert_bytes % 16 == 0;  // every expert's rows aligned as the first's
    const bool pairs = experts_aligned && paired_rows(type, wb, row_bytes, cols);
    const int act_bytes = experts_aligned ? act_shared_bytes(type, wb, row_bytes, cols) : 0;
    return for_weight_type<kSet>(type, [&](auto t) {
        constexpr int T = decltype(t)::value;
        const auto run = [&](auto kernel, int rows) {
            const int64_t warps = (n_out + rows - 1) / rows;
            return launch(kernel, dim3(unsigned((warps + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(n_rows)),
                          kRowsPerBlock * 32, size_t(act_bytes), s, wb, row_bytes, expert_bytes, ids, n_out, cols, xq,
                          x, x_div, out, out_stride, act_bytes > 0);
        };
        if constexpr (kPairedTypes<T>)
            if (pairs) return run(matvec_kernel<T, 2>, 2);
        return run(matvec_kernel<T, 1>, 1);
    });
}

}  // namespace

cudaError_t quantize_q8_1(const float* x, int64_t rows, int64_t cols, BlockQ8_1f* dst, cudaStream_t s,
                          float2* scales) {
    const int64_t n_blocks = rows * (cols / 32);
    if (n_blocks > 0) {
        const int64_t threads = n_blocks * 32;
        launch(quantize_q8_1_kernel, unsigned((threads + 255) / 256), 256, 0, s, x, n_blocks, dst, scales);
    }
    return cudaGetLastError();
}

cudaError_t matvec_q(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                     int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    return launch_matvec<kQuantTypes>(type, w, row_bytes, 0, nullptr, n_out, cols, xq, nullptr, 1, n_act, out,
                                      out_stride, s);
}

cudaError_t matvec_f(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const float* x,
                     int64_t n_act, float* out, int64_t out_stride, cudaStream_t s) {
    return launch_matvec<kFloatTypes>(type, w, row_bytes, 0, nullptr, n_out, cols, nullptr, x, 1, n_act, out,
                                      out_stride, s);
}

cudaError_t matvec_q_ids(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* xq, int x_div, const int32_t* ids, int64_t n_pairs, float* out,
                         int64_t out_stride, cudaStream_t s) {
    return launch_matvec<kQuantTypes>(type, w, row_bytes, expert_bytes, ids, n_out, cols, xq, nullptr, x_div, n_pairs,
                                      out, out_stride, s);
}

cudaError_t matvec_f_ids(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const float* x, int x_div, const int32_t* ids, int64_t n_pairs, float* out,
                         int64_t out_stride, cudaStream_t s) {
    return launch_matvec<kFloatTypes>(type, w, row_bytes, expert_bytes, ids, n_out, cols, nullptr, x, x_div, n_pairs,
                                      out, out_stride, s);
}

cudaError_t matvec_q_grouped(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out,
                             int64_t cols, const BlockQ8_1f* xq, int x_div, const PairGroups& groups, float* out,
                             int64_t out_stride, cudaStream_t s) {
    if (n_out <= 0 || groups.max_groups <= 0) return cudaGetLastError();
    if (groups.max_groups > 65535 || x_div <= 0) return cudaErrorInvalidValue;
    const dim3 grid(unsigned((n_out + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(groups.max_groups));
    const auto* wb = static_cast<const uint8_t*>(w);
    return for_weight_type<kQuantTypes>(type, [&](auto t) {
        return launch(matvec_grouped_kernel<decltype(t)::value>, grid, kRowsPerBlock * 32, 0, s, wb, row_bytes,
                      expert_bytes, groups, n_out, cols, xq, x_div, out, out_stride);
    });
}

}  // namespace zinc::backend::cuda
