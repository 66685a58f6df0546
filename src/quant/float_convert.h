// Scalar conversions between f32 and the narrow float formats ggml stores (docs/formats.md §0, §2.2, §2.5).
// Each matches llama.cpp's portable software path bit for bit on every input.
#pragma once

#include <cstdint>

namespace zinc::quant {

// IEEE binary16 -> binary32, exact; NaNs keep their payload and come out quiet.
float fp16_to_fp32(uint16_t h);
// binary32 -> binary16 with round-to-nearest-even; overflow gives +-inf; NaN gives 0x7E00 with the sign.
uint16_t fp32_to_fp16(float f);
// bfloat16 -> binary32: the 16 bits become the top half.
float bf16_to_fp32(uint16_t h);
// binary32 -> bfloat16 with round-to-nearest-even on the top half; NaNs are made quiet (bit 6 set), subnormals kept.
uint16_t fp32_to_bf16(float f);
// E8M0 exponent byte -> 2^(e-127); e = 0 gives 2^-127 (subnormal). 0xFF is not special-cased (gives +inf).
float e8m0_to_fp32(uint8_t e);
// Half of e8m0_to_fp32, i.e. 2^(e-128), as MXFP4 uses it with its doubled value table.
float e8m0_to_fp32_half(uint8_t e);

}  // namespace zinc::quant
