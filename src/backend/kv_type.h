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

// Where `rows` consecutive rows from `row` lie in a plane of `capacity` rows of `width` values: their values' bytes,
// then for q8_0 their scales' bytes (none for the other types), as offsets into the plane and lengths.
struct KvRowBytes {
    uint64_t values_at, values, scales_at, scales;
};
inline KvRowBytes kv_row_bytes(KvType t, int64_t width, int64_t capacity, int64_t row, int64_t rows) {
    const uint64_t per_row = uint64_t(width) * (t == KvType::f32 ? 4 : t == KvType::f16 ? 2 : 1);
    KvRowBytes b{uint64_t(row) * per_row, uint64_t(rows) * per_row, 0, 0};
    if (t == KvType::q8_0) {
        const uint64_t scale_row = uint64_t(width / kKvBlock) * 2;
        b.scales_at = uint64_t(capacity) * uint64_t(width) + uint64_t(row) * scale_row;
        b.scales = uint64_t(rows) * scale_row;
    }
    return b;
}

}  // namespace zinc::backend
