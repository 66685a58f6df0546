// Reference quantization of f32 rows, byte-exact with ggml's quantize_row_*_ref (no importance matrix).
#pragma once

#include <cstddef>

#include "gguf/tensor_type.h"

namespace zinc::quant {

// True when quantize_row supports type t.
bool can_quantize(gguf::TensorType t);

// Encodes n f32 values (a multiple of t's block size) into row_bytes(t, n) bytes at dst, as llama-quantize does
// without an importance matrix: ggml's quantize_row_<type>_ref for F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// Q2_K…Q6_K, Q8_K and MXFP4. For IQ4_NL and IQ4_XS it is ggml's quantize_iq4_nl / quantize_iq4_xs with a null
// imatrix (the path llama-quantize takes; note that ggml's quantize_row_iq4_nl_ref differs from it).
// Throws std::invalid_argument for an unsupported type or an n that is not a whole number of blocks.
void quantize_row(gguf::TensorType t, const float* src, void* dst, size_t n);

}  // namespace zinc::quant
