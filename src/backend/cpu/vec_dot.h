// Dot products of a weight row with an activation row quantized to the weight type's "vec-dot type", as ggml's
// CPU backend computes quantized matmuls (docs/formats.md §2.8, §3; docs/models.md §0.3 item 3): the activation row is
// converted once (quantize_activation) and every weight row is then dotted with it by integer block dot products
// with one float multiply-add per (sub-)block.
//
// Two implementations: a scalar one (namespace ref: the same sums, in the same order, as ggml's generic
// ggml_vec_dot_*_generic kernels — the readable reference) and, on x86-64 processors with AVX2, FMA and F16C
// (cpu_features.h, checked at run time), SIMD kernels for the common types, which give the same integer block sums and
// differ only in the order of the float accumulation.
#pragma once

#include <cstddef>

#include "gguf/tensor_type.h"

namespace zinc::backend::cpu {

// True for the weight types vec_dot supports: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K…Q6_K, IQ4_NL,
// IQ4_XS, MXFP4.
bool can_vec_dot(gguf::TensorType w);

// The activation type that weights of type w are dotted with, as ggml-cpu's type_traits_cpu[w].vec_dot_type:
// Q8_0 for Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4; Q8_1 for Q4_1, Q5_1; Q8_K for Q2_K…Q6_K and IQ4_XS; F16, BF16, F32 for
// themselves. Throws std::invalid_argument for other types.
gguf::TensorType vec_dot_type(gguf::TensorType w);

// Converts n f32 activations (a multiple of the block size of dot_type) into row_bytes(dot_type, n) bytes at dst,
// byte-exact with ggml-cpu's from_float for dot_type on x86 (the AVX/AVX2 build):
//   Q8_0, Q8_1: d = amax/127 stored as f16, q = round-half-even(x * (127/amax)) (the multiplier is 127/amax, not
//               1/d as in quantize_row_q8_0_ref), Q8_1's s = f16(d * Σq);
//   Q8_K:       quantize_row_q8_K_ref;
//   F16, BF16:  round to nearest even; F32: a copy.
// The result does not depend on whether the AVX2 code is compiled in.
// Throws std::invalid_argument for another dot_type or an n that is not a whole number of blocks.
void quantize_activation(gguf::TensorType dot_type, const float* x, void* dst, size_t n);

// Σ_i w_i·a_i over n elements: wrow is a row of weight type w (row_bytes(w, n) bytes), arow the same row width
// quantized by quantize_activation(vec_dot_type(w), ...). The AVX2 kernels where cpu_isa() has AVX2, otherwise
// ref::vec_dot.
// n must be a whole number of blocks of both types (not checked here, for speed; see vec_dot_fn).
float vec_dot(gguf::TensorType w, const void* wrow, const void* arow, size_t n);

// The kernel vec_dot uses for weight type w, for callers that dot many rows of one type. Throws
// std::invalid_argument for an unsupported type.
using VecDotFn = float (*)(const void* wrow, const void* arow, size_t n);
VecDotFn vec_dot_fn(gguf::TensorType w);

// A kernel for a tile of `rows_w` consecutive weight rows × `rows_a` activation rows, sharing the loads and decoding
// between the pairs: out[t · out_stride + o] = vec_dot(w, wrow o, arow t, n), each bit-identical to vec_dot's result.
// fn is nullptr for types without one (then use vec_dot_fn pair by pair).
struct VecDotTile {
    int rows_w = 0, rows_a = 0;
    void (*fn)(const void* w, size_t w_stride, const void* a, size_t a_stride, size_t n, float* out,
               size_t out_stride) = nullptr;
};
VecDotTile vec_dot_tile(gguf::TensorType w);

// True when vec_dot for w runs an AVX2 kernel on this processor (false: it runs the scalar reference).
bool vec_dot_has_simd(gguf::TensorType w);

namespace ref {
// The scalar reference kernels (ggml's generic formulation), whatever the build.
float vec_dot(gguf::TensorType w, const void* wrow, const void* arow, size_t n);
VecDotFn vec_dot_fn(gguf::TensorType w);
}  // namespace ref

}  // namespace zinc::backend::cpu
