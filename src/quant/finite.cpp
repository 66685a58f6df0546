#include "quant/finite.h"

#include <cstddef>
#include <cstring>
#include <initializer_list>

#include "quant/blocks.h"

namespace zinc::quant {
namespace {

// A float of these bits is an infinity or a NaN exactly when all its exponent bits are set.
bool f16_bad(uint16_t h) { return (h & 0x7C00u) == 0x7C00u; }
bool bf16_bad(uint16_t h) { return (h & 0x7F80u) == 0x7F80u; }
bool f32_bad(uint32_t x) { return (x & 0x7F800000u) == 0x7F800000u; }

// Scalars of type T, checked a run at a time: the test vectorizes, and the first bad one is looked for only in the
// run that has it.
template <class T, bool (*bad)(T)>
int64_t scan(const uint8_t* data, int64_t n) {
    constexpr int64_t kRun = 4096;
    for (int64_t start = 0; start < n; start += kRun) {
        const int64_t end = start + kRun < n ? start + kRun : n;
        T v[kRun];
        std::memcpy(v, data + start * int64_t(sizeof(T)), size_t(end - start) * sizeof(T));
        bool any = false;
        for (int64_t i = 0; i < end - start; ++i) any |= bad(v[i]);
        if (!any) continue;
        for (int64_t i = 0; i < end - start; ++i)
            if (bad(v[i])) return start + i;
    }
    return -1;
}

// The blocks' f16 fields at these byte offsets.
template <class Block>
int64_t scan_blocks(const uint8_t* data, int64_t n_blocks, std::initializer_list<size_t> offsets) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = data + b * int64_t(sizeof(Block));
        for (size_t off : offsets) {
            uint16_t h;
            std::memcpy(&h, block + off, sizeof h);
            if (f16_bad(h)) return b;
        }
    }
    return -1;
}

}  // namespace

int64_t first_non_finite(gguf::TensorType type, const uint8_t* data, int64_t n) {
    using T = gguf::TensorType;
    switch (type) {
        case T::F32: return scan<uint32_t, f32_bad>(data, n);
        case T::F16: return scan<uint16_t, f16_bad>(data, n);
        case T::BF16: return scan<uint16_t, bf16_bad>(data, n);
        case T::Q4_0: return scan_blocks<BlockQ4_0>(data, n / kQK, {offsetof(BlockQ4_0, d)});
        case T::Q4_1: return scan_blocks<BlockQ4_1>(data, n / kQK, {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)});
        case T::Q5_0: return scan_blocks<BlockQ5_0>(data, n / kQK, {offsetof(BlockQ5_0, d)});
        case T::Q5_1: return scan_blocks<BlockQ5_1>(data, n / kQK, {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)});
        case T::Q8_0: return scan_blocks<BlockQ8_0>(data, n / kQK, {offsetof(BlockQ8_0, d)});
        case T::Q8_1: return scan_blocks<BlockQ8_1>(data, n / kQK, {offsetof(BlockQ8_1, d), offsetof(BlockQ8_1, s)});
        case T::Q2_K:
            return scan_blocks<BlockQ2_K>(data, n / kQK_K, {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)});
        case T::Q3_K: return scan_blocks<BlockQ3_K>(data, n / kQK_K, {offsetof(BlockQ3_K, d)});
        case T::Q4_K:
            return scan_blocks<BlockQ4_K>(data, n / kQK_K, {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)});
        case T::Q5_K:
            return scan_blocks<BlockQ5_K>(data, n / kQK_K, {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)});
        case T::Q6_K: return scan_blocks<BlockQ6_K>(data, n / kQK_K, {offsetof(BlockQ6_K, d)});
        case T::IQ4_NL: return scan_blocks<BlockIQ4_NL>(data, n / kQK, {offsetof(BlockIQ4_NL, d)});
        case T::IQ4_XS: return scan_blocks<BlockIQ4_XS>(data, n / kQK_K, {offsetof(BlockIQ4_XS, d)});
        case T::Q8_K:
            for (int64_t b = 0; b < n / kQK_K; ++b) {
                uint32_t d;
                std::memcpy(&d, data + b * int64_t(sizeof(BlockQ8_K)) + offsetof(BlockQ8_K, d), sizeof d);
                if (f32_bad(d)) return b;
            }
            return -1;
        case T::MXFP4:
            // E8M0: 2^(e - 127), and all ones is NaN (an infinity as ggml decodes it).
            for (int64_t b = 0; b < n / kQK; ++b)
                if (data[b * int64_t(sizeof(BlockMXFP4)) + offsetof(BlockMXFP4, e)] == 0xFF) return b;
            return -1;
        default: return -1;
    }
}

}  // namespace zinc::quant
