// Activation quantization formats (docs/formats.md §2.7.3, §2.7.5, §2.8), byte-exact with ggml's
// quantize_row_q8_1_ref and quantize_row_q8_K_ref.
#pragma once

#include <cstddef>

namespace zinc::quant {

// n (a multiple of 32) values -> n/32 Q8_1 blocks of 36 bytes: d = amax/127, q = round-half-away(x/d via 1/d),
// s = f16(d * sum(q)).
void quantize_row_q8_1(const float* src, void* dst, size_t n);

// n (a multiple of 256) values -> n/256 Q8_K blocks of 292 bytes (f32 d, 256 i8, 16 i16 block sums).
// For an all-zero block d, qs and bsums are all zero (ggml leaves bsums unwritten there).
void quantize_row_q8_K(const float* src, void* dst, size_t n);

}  // namespace zinc::quant
