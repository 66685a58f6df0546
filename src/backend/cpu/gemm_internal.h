// The micro-kernels behind gemm.h, one set per instruction set; not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/tensor_type.h"

namespace zinc::backend::cpu::detail {

// Activation rows per kernel call at most.
inline constexpr int kMaxActRows = 4;

// The activation rows of one kernel call (PackedActs' arrays of each row): quants, f32 block scales, the sums of
// quants the weight type needs (of every 32 values; of every 16 for Q2_K, Q3_K, Q6_K), and for Q8_0 −128 times the
// sum of every four.
struct ActRefs {
    const int8_t* q[kMaxActRows];
    const float* d[kMaxActRows];
    const int16_t* s[kMaxActRows];
    const int32_t* c[kMaxActRows];
};

// One 8-row tile of packed weights (`cols` values per row) times `rows` activation rows: out[j·ld + i], i < 8.
struct PackedKernel {
    void (*fn)(const uint8_t* tile, int64_t cols, const ActRefs& a, float* out, int64_t ld) = nullptr;
    int rows = 0;
};

// The widest kernel of an instruction set for weight type w with at most max_rows activation rows; fn is nullptr
// where the set has none for w.
PackedKernel scalar_packed_kernel(gguf::TensorType w, int max_rows);
#if defined(__x86_64__)
#define ZINC_GEMM_X86 1
PackedKernel avx2_packed_kernel(gguf::TensorType w, int max_rows);
PackedKernel avx512_packed_kernel(gguf::TensorType w, int max_rows);
#endif

}  // namespace zinc::backend::cpu::detail
