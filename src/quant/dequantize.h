// Dequantization of tensor rows to f32, bit-exact with ggml's reference dequantize_row_* / *_to_fp32_row.
#pragma once

#include <cstddef>

#include "gguf/tensor_type.h"

namespace zinc::quant {

// True when dequantize_row supports type t.
bool can_dequantize(gguf::TensorType t);

// Decodes n elements (a multiple of t's block size) from src, which holds row_bytes(t, n) bytes, into dst.
// Throws std::invalid_argument for an unsupported type or an n that is not a whole number of blocks.
void dequantize_row(gguf::TensorType t, const void* src, float* dst, size_t n);

}  // namespace zinc::quant
