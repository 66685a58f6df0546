// Element types of the KV cache (llama.cpp's --cache-type-k/-v) and the byte layout both backends use for them.
// Plain C++17 without the standard library's heavier headers, so the CUDA kernels include it too.
#pragma once

#include <cstdint>

namespace zinc::backend {

enum class KvType : int {
    f32,   // 4 bytes a value
    f16,   // 2 bytes a value (IEEE half, round to nearest even)
    q8_0,  // blocks of 32 values: int8 q = round(x / d), d = amax / 127 kept as f16
};

// A q8_0 cache of `rows` rows of `width` (a multiple of 32) values keeps all rows' int8 values first and then all
// rows' f16 scales, one per 32 values, so that both stay aligned for wide loads (GGUF's 34-byte blocks would not).
inline constexpr int kKvBlock = 32;

// Bytes of one K or V plane of `rows` rows of `width` values.
inline uint64_t kv_plane_bytes(KvType t, int64_t width, int64_t rows) {
    const uint64_t n = uint64_t(width) * uint64_t(rows);
    switch (t) {
    case KvType::f32: return n * 4;
    case KvType::f16: return n * 2;
    case KvType::q8_0: return n + n / kKvBlock * 2;
    }
    return 0;
}

}  // namespace zinc::backend
