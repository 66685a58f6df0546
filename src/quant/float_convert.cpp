
#include "quant/float_convert.h"

#include <bit>

namespace zinc::quant {

float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1Fu;
    const uint32_t mantissa = h & 0x3FFu;
    uint32_t bits;
    if (exponent == 0x1F) {
        // Infinity or NaN; a NaN is returned quiet with its payload, as a float multiply would.
        bits = sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
    } else if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else {
            // Subnormal: mantissa * 2^-24; normalise so the leading one becomes implicit.
            uint32_t m = mantissa;
            uint32_t shift = 0;
            while ((m & 0x400u) == 0) {
                m <<= 1;
                ++shift;
            }
            bits = sign | ((127u - 14u - shift) << 23) | ((m & 0x3FFu) << 13);
        }
    } else {
        bits = sign | ((exponent + (127u - 15u)) << 23) | (mantissa << 13);
    }
    return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
    const uint32_t w = std::bit_cast<uint32_t>(f);
    const uint16_t sign = static_cast<uint16_t>((w >> 16) & 0x8000u);
    const uint32_t a = w & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return sign | 0x7E00u;    // NaN
    if (a >= 0x477FF000u) return sign | 0x7C00u;   // >= 65520 rounds to infinity
    if (a >= 0x38800000u) {
        // Normal result (>= 2^-14).
        uint32_t result = ((a >> 23) - 112u) << 10 | ((a & 0x7FFFFFu) >> 13);
        const uint32_t rest = a & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // carry may bump the exponent
        return static_cast<uint16_t>(sign | result);
    }
    if (a <= 0x33000000u) return sign;  // <= 2^-25 rounds to zero (the tie goes to even zero)
    // Subnormal result, in units of 2^-24.
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - (a >> 23);  // 14..24
    uint32_t result = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
}

float bf16_to_fp32(uint16_t h) {
    return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

uint16_t fp32_to_bf16(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float e8m0_to_fp32(uint8_t e) {
    const uint32_t bits = e == 0 ? 0x00400000u : static_cast<uint32_t>(e) << 23;
    return std::bit_cast<float>(bits);
}

float e8m0_to_fp32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : static_cast<uint32_t>(e - 1) << 23;
    return std::bit_cast<float>(bits);
}

}  // namespace zinc::quant
