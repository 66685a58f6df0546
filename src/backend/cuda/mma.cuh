// The tensor-core instructions the CUDA kernels use (PTX ISA: mma.sync m16n8k16 with f16 inputs and m16n8k8 with
// tf32 inputs, both with f32 accumulation; m16n8k32 and m16n8k16 with int8 inputs; ldmatrix), shared by the prefill
// matmul (matmul_mma.cu), the decode step's matmul (matmul_step_mma.cu), the MoE experts' products (moe_mma.cu), the
// attention kernels (attention_mma.cu, attention_flash.cu) and the delta-net's chunked form (delta_net.cu).
//
// Fragment layouts, lane = 4 g + t. mma.m16n8k16 with .f16 inputs: A rows g and g + 8 at columns 2t, 2t + 1 and
// 2t + 8, 2t + 9; B column g at rows 2t, 2t + 1 and 2t + 8, 2t + 9. mma.m16n8k8 with .tf32 inputs: A at (g, t),
// (g + 8, t), (g, t + 4), (g + 8, t + 4); B column g at rows t and t + 4. Both: C rows g and g + 8 at columns 2t,
// 2t + 1.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace zinc::backend::cuda {

// a and b rounded to f16, a in the lower half (the lower index, as fragments hold them).
__device__ __forceinline__ uint32_t pack_half2(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// x0, x1 as two f16 pairs: their roundings (hi) and the roundings of what those leave (lo), about 22 bits together;
// the lower index in the lower half, as fragments hold them.
__device__ __forceinline__ void split_pair(float x0, float x1, uint32_t& hi, uint32_t& lo) {
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 back = __half22float2(h);
    const __half2 l = __floats2half2_rn(x0 - back.x, x1 - back.y);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
}

// c += a b for a 16 x 16 f16 A fragment and a 16 x 8 B fragment (b0: rows 0-7, b1: rows 8-15), f32 accumulators.
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a b with int8 inputs and exact int32 accumulation (the decode step's products, matmul_step_mma.cu).
// m16n8k32: A rows g and g + 8 (a[0], a[1]) at k = 4t .. 4t + 3, the same rows at 16 + 4t .. (a[2], a[3]); B column g
// at k = 4t .. (b0) and 16 + 4t .. (b1); four int8 values to a register, the lowest k in the lowest byte.
// m16n8k16: A rows g, g + 8 at k = 4t .. 4t + 3; B column g at the same k.
__device__ __forceinline__ void mma_16832_s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_16816_s8(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b));
}

// x rounded to a tf32 (hi), and what that leaves rounded to a tf32 (lo): about 22 bits together, with f32's range.
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
    const float rest = x - __uint_as_float(hi);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(rest));
}

// c += a b for a 16 x 8 tf32 A fragment and an 8 x 8 B fragment (b0: rows 0-3, b1: rows 4-7), f32 accumulators.
__device__ __forceinline__ void mma_1688_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 f16 matrices from shared memory: lanes 8i .. 8i + 7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    const unsigned a = unsigned(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// The same, each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
    const unsigned a = unsigned(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

}  // namespace zinc::backend::cuda
