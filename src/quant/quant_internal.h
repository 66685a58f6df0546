// Helpers shared by the quantizer sources; not part of the public API.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace zinc::quant::detail {

// Round to nearest, ties to even, by adding 1.5 * 2^23 and reading the mantissa (as ggml's nearest_int).
// Exact for |v| <= 2^22 - 1; outside that range (and for NaN) it returns what the same bit trick yields, which is
// what ggml's quantizers then store.
inline int nearest_int(float v) {
    const float biased = v + 12582912.0f;
    const int32_t bits = std::bit_cast<int32_t>(biased);
    return (bits & 0x007FFFFF) - 0x00400000;
}

// A C float-to-integer conversion as x86-64 executes it (cvttss2si): truncation toward zero, with INT32_MIN for NaN
// and out-of-range values. ggml's C code converts floats to int8_t/uint8_t this way; writing it out keeps this code
// free of the undefined behaviour and byte-exact even for degenerate inputs (infinite or NaN intermediate scales).
inline int32_t trunc_to_int(float v) {
    if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
    return static_cast<int32_t>(v);
}

// Round half away from zero (C roundf) followed by the same conversion.
int32_t round_to_int(float v);

// The 6-bit scale and min of sub-block j (0-7) from the 12 packed scale bytes of Q4_K / Q5_K.
inline void scale_min_k4(int j, const uint8_t* s, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63;
        m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// K-quant row quantizers (quantize_k.cpp); nb is the number of 256-element super-blocks.
void quantize_q2_K(const float* x, void* dst, size_t nb);
void quantize_q3_K(const float* x, void* dst, size_t nb);
void quantize_q4_K(const float* x, void* dst, size_t nb);
void quantize_q5_K(const float* x, void* dst, size_t nb);
void quantize_q6_K(const float* x, void* dst, size_t nb);

// IQ4_NL / IQ4_XS quantizers (quantize_iq4.cpp); nb is the number of blocks of the type.
void quantize_iq4_nl(const float* x, void* dst, size_t nb);
void quantize_iq4_xs(const float* x, void* dst, size_t nb);

}  // namespace zinc::quant::detail
