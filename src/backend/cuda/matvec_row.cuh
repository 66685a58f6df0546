// The dot product of one weight row with one activation row, computed by one warp: the core of every decode matvec
// (matvec_q.cu: one weight, MoE experts; matvec_fused.cu: several weights in one launch, gate and up with their
// activation, the residual add). Lane l takes the 32-value chunks l, l+32, ... of a quantized row (chunk_dot against
// the Q8_1 blocks of the activations) or the values l, l+32, ... of a float row (in f32 against the f32
// activations), and a butterfly of shuffles adds the lanes' partial sums. The lanes add with __fadd_rn, which nvcc
// never merges with the product before it into a fused multiply-add, so the arithmetic is fixed by this code and not by
// how a kernel around it is optimized: every kernel built on these functions gives a row the same value bit for bit,
// and a fused op equals the separate ops on the GPU too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/dequant.cuh"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/vec_dot_q8_1.cuh"

namespace zinc::backend::cuda {

// Every type with a chunk_dot, and the float types, for the launchers' switches.
#define ZINC_DP4A_TYPES(X)                                                                   \
    X(kQ8_0) X(kQ4_0) X(kQ4_1) X(kQ5_0) X(kQ5_1) X(kQ2_K) X(kQ3_K) X(kQ4_K) X(kQ5_K) X(kQ6_K) \
    X(kIQ4_NL) X(kIQ4_XS) X(kMXFP4)
#define ZINC_FLOAT_TYPES(X) X(kF32) X(kF16) X(kBF16)

__host__ __device__ constexpr bool is_float_weight(int type) { return type == kF32 || type == kF16 || type == kBF16; }

// Value i of a row of F32, F16 or BF16 weights.
template <int T>
__device__ __forceinline__ float float_weight(const uint8_t* row, int64_t i) {
    if constexpr (T == kF32)
        return reinterpret_cast<const float*>(row)[i];
    else if constexpr (T == kF16)
        return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
    else
        return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
}

// v summed over the warp, the same in every lane (a butterfly of commutative adds).
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// The bytes of n 32-value chunks of a row of type T, from a block or super-block boundary (n a multiple of 8 for the
// 256-value types, whose rows are whole super-blocks).
template <int T>
__host__ __device__ constexpr int64_t chunks_bytes(int64_t n) {
    switch (T) {
    case kQ8_0: return n * 34;
    case kQ4_0: return n * 18;
    case kQ4_1: return n * 20;
    case kQ5_0: return n * 22;
    case kQ5_1: return n * 24;
    case kIQ4_NL: return n * 18;
    case kMXFP4: return n * 17;
    // The 256-value formats; chunks_bytes<T>(1) is 0 for them, which tells them apart.
    case kQ2_K: return n / 8 * 84;
    case kQ3_K: return n / 8 * 110;
    case kQ4_K: return n / 8 * 144;
    case kQ5_K: return n / 8 * 176;
    case kQ6_K: return n / 8 * 210;
    case kIQ4_XS: return n / 8 * 136;
    default: return 0;
    }
}

// Rows of the 256-value formats pass through shared memory in segments of kStageChunks chunks: the warp first copies a
// segment with coalesced 16-byte loads, every load in flight before the first store, then each lane dots its chunks
// from shared memory, instead of reading the quant bytes where chunk_dot needs them in many narrow loads.
constexpr int kStageChunks = 64;              // a multiple of 8, so K-quant super-blocks are never cut
constexpr int kStageBytes = 210 * kStageChunks / 8;  // the most bytes a segment takes (Q6_K)
constexpr int kStageWarps = 4;                // warps per block of every kernel built on these functions
// Blocks per multiprocessor the kernels built on these functions ask registers for (__launch_bounds__): at 80
// registers only 6 fit, and the warps then spend half their cycles waiting for loads with too few others to switch to.
constexpr int kMinBlocksPerSm = 8;
constexpr int kStageVecs = (kStageBytes / 16 + 31) / 32;  // 16-byte loads per lane for a whole segment

// Copies n (<= kStageBytes) bytes from src to the warp's shared buffer dst, src and n multiples of 16; the warp's
// lanes see them on return.
__device__ __forceinline__ void warp_stage(const uint8_t* __restrict__ src, uint8_t* dst, int n, int lane) {
    const int nv = n / 16;
    int4 r[kStageVecs];
#pragma unroll
    for (int k = 0; k < kStageVecs; ++k)
        if (lane + 32 * k < nv) r[k] = __ldg(reinterpret_cast<const int4*>(src) + lane + 32 * k);
#pragma unroll
    for (int k = 0; k < kStageVecs; ++k)
        if (lane + 32 * k < nv) reinterpret_cast<int4*>(dst)[lane + 32 * k] = r[k];
    __syncwarp();
}

// Lane `lane`'s partial sum of row . x: quantized types (T with a chunk_dot) read xq, the cols / 32 Q8_1 blocks of x;
// float types read x. Every lane adds its chunks (values) in ascending order.
template <int T>
__device__ __forceinline__ float lane_row_dot(const uint8_t* row, const BlockQ8_1f* xq, const float* x, int64_t cols,
                                              int lane) {
    float sum = 0.0f;
    if constexpr (is_float_weight(T)) {
        // Consecutive lanes read consecutive values: already coalesced. Unrolled so several loads are in flight.
#pragma unroll 8
        for (int64_t i = lane; i < cols; i += 32) sum = __fadd_rn(sum, float_weight<T>(row, i) * x[i]);
    } else {
        const int64_t n_chunks = cols / 32;
        // Staging pays for the 256-value formats, whose chunks each lane reads in many narrow loads (Q6_K's matvecs
        // ran 15% faster); the 32-value formats read well enough in place, and rows that are not 16-byte aligned
        // (gpt-oss's 2880-wide MXFP4 and Q8_0 rows) would stage in narrow loads, which is slower than reading in place.
        constexpr bool kSuperBlocks = chunks_bytes<T>(1) == 0;
        if (kSuperBlocks && (reinterpret_cast<uintptr_t>(row) | uintptr_t(chunks_bytes<T>(n_chunks))) % 16 == 0) {
            __shared__ __align__(16) uint8_t stage[kStageWarps][kStageBytes];
            uint8_t* buf = stage[(threadIdx.x / 32) % kStageWarps];
            for (int64_t c0 = 0; c0 < n_chunks; c0 += kStageChunks) {
                const int seg = int(n_chunks - c0 < kStageChunks ? n_chunks - c0 : kStageChunks);
                __syncwarp();  // the previous segment is no longer read
                warp_stage(row + chunks_bytes<T>(c0), buf, int(chunks_bytes<T>(seg)), lane);
#pragma unroll 4
                for (int c = lane; c < seg; c += 32) sum = __fadd_rn(sum, chunk_dot<T>(buf, c, xq[c0 + c]));
            }
        } else {
#pragma unroll 4
            for (int64_t c = lane; c < n_chunks; c += 32) sum = __fadd_rn(sum, chunk_dot<T>(row, c, xq[c]));
        }
    }
    return sum;
}

// row . x in every lane of the warp.
template <int T>
__device__ __forceinline__ float warp_row_dot(const uint8_t* row, const BlockQ8_1f* xq, const float* x, int64_t cols,
                                              int lane) {
    return warp_sum(lane_row_dot<T>(row, xq, x, cols, lane));
}

// row_a . x and row_b . x in every lane, each summed exactly as warp_row_dot sums it.
template <int T>
__device__ __forceinline__ void warp_row_dot2(const uint8_t* row_a, const uint8_t* row_b, const BlockQ8_1f* xq,
                                              const float* x, int64_t cols, int lane, float& a, float& b) {
    a = warp_row_dot<T>(row_a, xq, x, cols, lane);
    b = warp_row_dot<T>(row_b, xq, x, cols, lane);
}

}  // namespace zinc::backend::cuda
