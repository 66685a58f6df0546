// Host-side launchers of the CUDA backend's kernels that read weights: the embedding gather (get_rows.cu), the
// decode matvecs (matvec_q.cu) and the prefill matmul (matmul.cu), and the weight types they understand. Plain C++17
// with no backend.h, so nvcc never sees C++20 headers. Each launcher enqueues on `s` and returns cudaGetLastError();
// the caller (matmul_ops.cpp, moe_ops.cpp) turns a failure into an exception naming the op and tensor.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace zinc::backend::cuda {

// ggml type ids (gguf::TensorType) that the kernels understand.
enum QType : int {
    kF32 = 0,
    kF16 = 1,
    kQ4_0 = 2,
    kQ4_1 = 3,
    kQ5_0 = 6,
    kQ5_1 = 7,
    kQ8_0 = 8,
    kQ2_K = 10,
    kQ3_K = 11,
    kQ4_K = 12,
    kQ5_K = 13,
    kQ6_K = 14,
    kIQ4_NL = 20,
    kIQ4_XS = 23,
    kBF16 = 30,
    kMXFP4 = 39,
};

// True for the types get_rows and the tiled matmul can dequantize: every type of the enum, each bit-exact with
// the CPU's dequantize_row.
bool can_dequantize(int type);
// True for the types with an integer (dp4a) matvec against Q8_1 activations: every quantized type of the enum
// (not F32/F16/BF16, which use the float matvec).
bool has_dp4a_matvec(int type);

// The GPU's Q8_1 activation block: 32 int8 values with f32 d and f32 s (sum of the unquantized inputs), f32 rather
// than ggml's half2 so no extra rounding enters through the scale, and the integer sums of the first and the last 16
// values, which the dot products of the offset formats need (vec_dot_q8_1.cuh) and would otherwise add up again for
// every weight row. 48 bytes, 16-byte aligned, so that a lane reads a block in three 16-byte loads.
struct alignas(16) BlockQ8_1f {
    int8_t qs[32];
    float d, s;
    int16_t sum_lo, sum_hi;  // qs[0] + ... + qs[15], qs[16] + ... + qs[31]
    int32_t unused;          // 0
};
static_assert(sizeof(BlockQ8_1f) == 48, "BlockQ8_1f layout");

// Bytes load_weight allocates past the end of every weight (zeros), so that kernels may read whole aligned words
// around a block of a row whose blocks are not word-aligned (moe_mma.cu).
constexpr size_t kWeightSlack = 16;

// get_rows.cu: out[t] = dequantized row ids[t] of table (ids in device memory).
cudaError_t get_rows(int type, const void* table, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n,
                     float* out, cudaStream_t s);

// matvec_q.cu: quantizes `rows` rows of `cols` values (cols % 32 == 0) to BlockQ8_1f (cols/32 blocks per row); with
// scales, also each block's (d, d (sum_lo + sum_hi)) there, for matmul_step_mma.
cudaError_t quantize_q8_1(const float* x, int64_t rows, int64_t cols, BlockQ8_1f* dst, cudaStream_t s,
                          float2* scales = nullptr);
// out[t][o] = W[o] . x[t] for t < n_act with dp4a dot products against the Q8_1 activation rows xq.
cudaError_t matvec_q(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const BlockQ8_1f* xq,
                     int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);
// matvec_acts.cu: the same for a few activation rows (a decode step of several sequences), each weight row read once
// for all of them; every value is matvec_q's bit for bit.
cudaError_t matvec_q_acts(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols,
                          const BlockQ8_1f* xq, int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);
// matmul_step_mma.cu: the same on int8 tensor cores, for weights of has_step_mma (Q4_K rows 16-byte aligned, Q6_K,
// both of whole 256-value super-blocks; Q8_0 and MXFP4 of any whole 32-value blocks), xs the blocks' scales that
// quantize_q8_1 (or q8_1_scales) wrote beside xq; every block's integer product is exact and its scales are the
// matvec's, their f32 products are grouped otherwise and the blocks are added in another order.
// A weight of few rows gives few blocks of 64 or 128 rows: its rows' values are then split in `splits` ranges, one block
// each, whose sums go to `part` (splits * n_act * n_out floats) and are added up in order by a second kernel.
// step_mma_splits: the splits that make at least target_blocks blocks (each split 2 or more steps of 256 values).
bool has_step_mma(int type, const void* w, size_t row_bytes, int64_t cols);
int step_mma_splits(int64_t n_out, int64_t cols, int64_t n_act, int64_t target_blocks);
// The blocks' scales of Q8_1 blocks quantized without them (moe_activate's): xs[b] = (d, d (sum_lo + sum_hi)).
cudaError_t q8_1_scales(const BlockQ8_1f* xq, int64_t n_blocks, float2* xs, cudaStream_t s);
cudaError_t matmul_step_mma(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols,
                            const BlockQ8_1f* xq, const float2* xs, int64_t n_act, float* out, int64_t out_stride,
                            int splits, float* part, cudaStream_t s);
// The same for F32/F16/BF16 weights against f32 activations, in float.
cudaError_t matvec_f(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const float* x,
                     int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);

// Expert matvecs of MoE layers. For each pair p < n_pairs: e = ids[p] (device), x row a = p / x_div
// (x_div = slots per token when every slot of a token reads the same input row, 1 when each pair has its own),
// n_pairs <= 65535,
// out[p * out_stride + o] = W_e[o] . x[a] for o < n_out, where W_e starts expert_bytes after W_{e-1}.
cudaError_t matvec_q_ids(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* xq, int x_div, const int32_t* ids, int64_t n_pairs, float* out,
                         int64_t out_stride, cudaStream_t s);
cudaError_t matvec_f_ids(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const float* x, int x_div, const int32_t* ids, int64_t n_pairs, float* out,
                         int64_t out_stride, cudaStream_t s);

// The (token, slot) pairs of a batch sorted by expert (moe.cu's moe_group_pairs): pairs[first .. first + count) of
// each group are pairs of one expert, at most a group size of them (kPairsPerGroup for the matvecs below); *n_groups
// (device) groups are filled, of at most max_groups = n_pairs / group size + n_expert.
constexpr int kPairsPerGroup = 8;
struct PairGroup {
    int32_t expert, first, count;
};
struct PairGroups {
    const int32_t* pairs = nullptr;
    const PairGroup* groups = nullptr;
    const int32_t* n_groups = nullptr;
    int64_t max_groups = 0;
};
// Which way a MoE batch of quantized experts takes (moe_ops.cpp), by its (token, expert) pairs per expert, measured on
// the H200 on the MoE models' layers: from `mma` on, products on tensor cores reading the quantized
// experts (moe_kernels.h' moe_mma), in groups of 64 pairs of an expert from `wide` on, else 32; below, the dp4a
// matvecs (once a batch has as many pairs as experts, per group of kPairsPerGroup pairs of one expert). The 35B-A3B's
// layer at 64 tokens (2 pairs an expert): 760 us on the matvecs, 531 on the tensor cores; at 512 tokens, 4798 and 701
// (32-pair groups; 881 with 64); gpt-oss's at 512 (64 pairs an expert): 1798 with 32-pair groups, 1411 with 64.
struct MoeWays {
    int64_t mma = 2;
    int64_t wide = 32;
    // Below `step` pairs per expert (and from one on), where every projection has_moe_step_mma: the products on int8
    // tensor cores (moe_step_mma), in groups of 8, 16 or 32 pairs by the pairs per expert, before the two ways above.
    // 0: never.
    int64_t step = 16;
};

// moe_step_mma (matmul_step_mma.cu): matvec_q_grouped's products on int8 tensor cores, as matmul_step_mma's, for
// groups of up to group_size (<= 64) pairs: out[p * out_stride + o] = W_e[o] . x[p / x_div], x the Q8_1 rows xq with
// their scales xs. Each group's expert is read once; every block's integer product is exact, its scales are the
// matvec's, and the blocks are added in another order, so a value is within a few f32 roundings of the matvec's.
bool has_moe_step_mma(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t cols);
cudaError_t moe_step_mma(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out, int64_t cols,
                         const BlockQ8_1f* xq, const float2* xs, int x_div, const PairGroups& groups, int group_size,
                         float* out, int64_t out_stride, cudaStream_t s);

// matvec_q_ids for pairs in groups: out[p * out_stride + o] = W_e[o] . x[p / x_div] for every pair p of each group
// (e its expert), each weight row read once per group; the same values as matvec_q_ids. max_groups <= 65535.
cudaError_t matvec_q_grouped(int type, const void* w, size_t row_bytes, size_t expert_bytes, int64_t n_out,
                             int64_t cols, const BlockQ8_1f* xq, int x_div, const PairGroups& groups, float* out,
                             int64_t out_stride, cudaStream_t s);

// Prefill of quantized weights (has_mma_matmul) is on tensor cores, with f16 operands and f32 accumulation, in two
// ways: the weights dequantized to f16 a few thousand rows at a time and handed to cuBLAS (matmul_gemm.cu, cublas.h),
// and zinc's own kernel (matmul_mma.cu) where cuBLAS cannot be opened. Both start from the same f16 activation rows,
// so each value is within about 2^-10 sum_i |w_i x_i| of the exact.
bool has_mma_matmul(int type);

// matmul_gemm.cu: the activation rows in f16, row t divided by its scale s_t = max |x_t| / 256 so no row can overflow
// f16's range and each keeps f16's relative precision (2^-11); the scales follow the f16 values, 16-byte aligned.
inline size_t f16_rows_scale_offset(int64_t n_act, int64_t cols) {
    return (size_t(n_act) * size_t(cols) * 2 + 15) / 16 * 16;
}
size_t f16_rows_bytes(int64_t n_act, int64_t cols);
cudaError_t to_f16_rows(const float* x, int64_t n_act, int64_t cols, void* rows, cudaStream_t s);
// w16 (n_rows x cols f16, row-major) = the rows of a quantized weight, dequantized as get_rows does; cols % 32 == 0.
cudaError_t dequant_f16_rows(int type, const void* w, size_t row_bytes, int64_t n_rows, int64_t cols, void* w16,
                             cudaStream_t s);
// out[t][o] *= s_t for t < n_act, o < n_out, the scales those of the f16 rows `rows` made by to_f16_rows.
cudaError_t scale_rows(float* out, int64_t out_stride, int64_t n_act, int64_t n_out, const void* rows, int64_t cols,
                       cudaStream_t s);
// Which way a batch of activation rows takes: up to kStepMaxRows rows (a decode step of several sequences), Q8_1
// activations and each weight row read once for all of them: up to kMatvecMaxRows rows the matvec of several rows,
// beyond it int8 tensor cores for the types of has_step_mma (Qwen3-8B Q4_K_M decoding B sequences on the H100, tok/s
// by the matvec against the tensor cores: B = 2 315 against 254, 4 450 against 498, 8 547 against 974, 16 630 against
// 1896, 64 674 against 3990). Beyond kStepMaxRows, measured on the H200 with the kernel
// benchmark's prefill shapes, the dequantize-and-cuBLAS way, each step of which dequantizes at most kGemmChunkBytes of
// f16 weights, small enough to stay in L2 between its dequantization and its GEMM (Q4_K 4096 x 12288 with 512 rows:
// 197 us, against 1697 us for zinc's own kernel, which serves where cuBLAS cannot be opened).
constexpr int64_t kMatvecMaxRows = 3;
constexpr int64_t kStepMaxRows = 64;
// Float weights of at most this many rows (the MoE routers, the shared experts' gates) take the matvec for each
// activation row in prefill too: the tiled f32 kernel has a block per 64 x 64 outputs, so its grid for such a weight is
// a handful of blocks (gpt-oss's router, 32 rows, at 512 tokens: 170 us a layer).
constexpr int64_t kFloatMatvecMaxOut = 256;
constexpr size_t kGemmChunkBytes = size_t(16) << 20;

// matmul_mma.cu: out[t][o] = W[o] . x[t], the f16 rows made by to_f16_rows; weight tiles dequantized to f16 in shared
// memory; cols a multiple of 32.
cudaError_t matmul_mma(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const void* rows,
                       int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);

// matmul.cu: out[t][o] = W[o] . x[t], weight tiles dequantized to f32 in shared memory (prefill of float weights).
cudaError_t matmul_tiled(int type, const void* w, size_t row_bytes, int64_t n_out, int64_t cols, const float* x,
                         int64_t n_act, float* out, int64_t out_stride, cudaStream_t s);

}  // namespace zinc::backend::cuda
