// Kernels shared between vec_dot.cpp and vec_dot_avx2.cpp; not part of the public API.
#pragma once

#include <cstddef>

#include "backend/cpu/vec_dot.h"

namespace zinc::backend::cpu::detail {

// The scalar Q8_0 / Q8_1 activation quantizers (what quantize_activation runs without AVX2), for the tests.
void scalar_quantize_q8_0(const float* x, void* dst, size_t n);
void scalar_quantize_q8_1(const float* x, void* dst, size_t n);

// On x86-64 the AVX2 kernels are always compiled (vec_dot_avx2.cpp is built for AVX2) and used where cpu_isa() has
// AVX2.
#if defined(__x86_64__)
#define ZINC_VEC_DOT_AVX2 1
// The AVX2 kernel for weight type w, or nullptr where there is none (the scalar reference is used then).
VecDotFn avx2_vec_dot_fn(gguf::TensorType w);
VecDotTile avx2_vec_dot_tile(gguf::TensorType w);
// AVX2 Q8_0 / Q8_1 activation quantizers, byte-exact with the scalar ones; Q8_K byte-exact with quantize_row_q8_K
// for finite inputs (a block holding a NaN goes through quantize_row_q8_K).
void avx2_quantize_q8_0(const float* x, void* dst, size_t n);
void avx2_quantize_q8_1(const float* x, void* dst, size_t n);
void avx2_quantize_q8_K(const float* x, void* dst, size_t n);
#endif

}  // namespace zinc::backend::cpu::detail
