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

// Lane `lane`'s partial sum of row . x: quantized types (T with a chunk_dot) read xq, the cols / 32 Q8_1 blocks of x;
// float types read x.
template <int T>
__device__ __forceinline__ float lane_row_dot(const uint8_t* row, const BlockQ8_1f* xq, const float* x, int64_t cols,
                                              int lane) {
    float sum = 0.0f;
    // Unrolled so that the loads of several chunks are in flight together: one chunk's loads alone leave the memory
    // system mostly idle (a 4096-wide row gives each lane only 4 chunks).
    if constexpr (is_float_weight(T)) {
#pragma unroll 8
        for (int64_t i = lane; i < cols; i += 32) sum = __fadd_rn(sum, float_weight<T>(row, i) * x[i]);
    } else {
        const int64_t n_chunks = cols / 32;
#pragma unroll 4
        for (int64_t c = lane; c < n_chunks; c += 32) sum = __fadd_rn(sum, chunk_dot<T>(row, c, xq[c]));
    }
    return sum;
}

// row . x in every lane of the warp.
template <int T>
__device__ __forceinline__ float warp_row_dot(const uint8_t* row, const BlockQ8_1f* xq, const float* x, int64_t cols,
                                              int lane) {
    return warp_sum(lane_row_dot<T>(row, xq, x, cols, lane));
}

// row_a . x and row_b . x in every lane, each summed exactly as warp_row_dot sums it; the two rows' loads are
// interleaved, so twice as many are in flight.
template <int T>
__device__ __forceinline__ void warp_row_dot2(const uint8_t* row_a, const uint8_t* row_b, const BlockQ8_1f* xq,
                                              const float* x, int64_t cols, int lane, float& a, float& b) {
    float sa = 0.0f, sb = 0.0f;
    if constexpr (is_float_weight(T)) {
        for (int64_t i = lane; i < cols; i += 32) {
            const float xv = x[i];
            sa = __fadd_rn(sa, float_weight<T>(row_a, i) * xv);
            sb = __fadd_rn(sb, float_weight<T>(row_b, i) * xv);
        }
    } else {
        const int64_t n_chunks = cols / 32;
        for (int64_t c = lane; c < n_chunks; c += 32) {
            sa = __fadd_rn(sa, chunk_dot<T>(row_a, c, xq[c]));
            sb = __fadd_rn(sb, chunk_dot<T>(row_b, c, xq[c]));
        }
    }
    a = warp_sum(sa);
    b = warp_sum(sb);
}

}  // namespace zinc::backend::cuda
